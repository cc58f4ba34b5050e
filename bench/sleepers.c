/* sleepers.c — 10,000 threads each sleep 10 ms, then exit.
 *
 * Main creates n threads (default 10,000) that each nanosleep 10 ms and add their
 * index into an atomic sum, then joins them all. The time from the first create to
 * the last join is what a program full of mostly-idle threads pays: ideally a little
 * over 10 ms plus the cost of creating and joining n threads. scripts/bench also
 * samples this benchmark's peak OS threads and RSS from /proc/PID/status and, for the
 * native run, the kernel memory each thread costs (KernelStack + Slab + PageTables
 * from /proc/meminfo).
 *
 * Checksum: the sum is n(n-1)/2. Usage: sleepers [n]; reports the wall time divided
 * by n (ns per thread; times n it is the wall time). Go twin: bench/go/sleepers
 * (n goroutines time.Sleep(10 * time.Millisecond)).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "bench.h"

static atomic_llong sum;

static void *sleeper(void *arg)
{
    struct timespec ts = { 0, 10 * 1000 * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    atomic_fetch_add_explicit(&sum, (long long)(intptr_t)arg, memory_order_relaxed);
    return NULL;
}

int main(int argc, char **argv)
{
    long n = bench_iters(argc, argv, 10000);
    pthread_t *t = malloc((size_t)n * sizeof *t);
    if (t == NULL) {
        fprintf(stderr, "sleepers: out of memory\n");
        return 1;
    }
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < n; i++)
        bench_check(pthread_create(&t[i], NULL, sleeper, (void *)(intptr_t)i), "pthread_create");
    for (long i = 0; i < n; i++)
        bench_check(pthread_join(t[i], NULL), "pthread_join");
    uint64_t t1 = bench_now_ns();
    bench_verify("sleepers", atomic_load(&sum), (long long)n * (n - 1) / 2);
    bench_report("sleepers", n, t1 - t0);
    free(t);
    return 0;
}
