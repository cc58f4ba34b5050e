/* openmp — an OpenMP program (GCC's libgomp) computes what it computes
 * natively, at the speed it runs natively.
 *
 * libgomp's threads wait for each other at barriers on futexes with their
 * own syscall instruction, which bobbin cannot interpose: a waiting thread
 * holds its P while its OS thread sleeps in the kernel. sysmon sees such a
 * thread's OS thread use no CPU while others wait for the P, and lets the
 * P go as for a system call (the thread then runs on its own OS thread,
 * as natively). Before that, each wait cost up to a time slice: this
 * program took 23 s at P=1 and 12 s at P=2 against 0.1 s natively (the
 * same under bobbin now).
 *
 * Each round: a parallel reduction with dynamic scheduling, a region with
 * two barriers, a critical section and an atomic, and tasks. Printed: the
 * sums, the counts, and the number of threads (NTHREADS).
 */
#include <omp.h>
#include <stdio.h>

enum { NTHREADS = 6, ROUNDS = 400, N = 20000 };

static long fib(int n)
{
    if (n < 2)
        return n;
    long a, b;
#pragma omp task shared(a)
    a = fib(n - 1);
#pragma omp task shared(b)
    b = fib(n - 2);
#pragma omp taskwait
    return a + b;
}

int main(void)
{
    omp_set_num_threads(NTHREADS);
    long total = 0, crit = 0, atom = 0, tasks = 0;
    int team = 0;
    for (int r = 0; r < ROUNDS; r++) {
        long sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(dynamic, 64)
        for (long i = 0; i < N; i++)
            sum += (i * 7 + r) % 31;
        total += sum;
#pragma omp parallel
        {
#pragma omp single
            team = omp_get_num_threads();
#pragma omp barrier
#pragma omp critical
            crit += omp_get_thread_num() + 1;
#pragma omp barrier
#pragma omp atomic
            atom += 2;
        }
        if (r % 50 == 0) {
#pragma omp parallel
#pragma omp single
            tasks += fib(12);
        }
    }
    printf("team of %d threads\n", team);
    printf("reductions %ld\ncritical %ld\natomic %ld\ntasks %ld\n", total, crit, atom, tasks);
    return 0;
}
