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
 * Checksum: the sum is n(n-1)/2. Usage: sleepers [n [ms]]; reports the wall time
 * divided by n (ns per thread; times n it is the wall time). Go twin: bench/go/sleepers
 * (n goroutines time.Sleep(10 * time.Millisecond)).
 *
 * With ms (the mode sleepers_held), each thread sleeps ms milliseconds instead: with
 * ms well above the time it takes to create all n (natively about 65 us each here),
 * every thread is alive at the same time, so the sampled peaks are the memory of n
 * sleeping threads (the 10 ms run has only ~450 alive at once natively, thousands
 * under bobbin, and natively keeps every unjoined thread's stack).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "bench.h"

static atomic_llong sum;

static long sleep_ms = 10;

static void *sleeper(void *arg)
{
    struct timespec ts = { sleep_ms / 1000, sleep_ms % 1000 * 1000 * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    atomic_fetch_add_explicit(&sum, (long long)(intptr_t)arg, memory_order_relaxed);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = "sleepers";
    if (argc == 3) { /* sleepers n ms */
        char *end;
        sleep_ms = strtol(argv[2], &end, 10);
        if (*end || sleep_ms <= 0) {
            fprintf(stderr, "usage: %s [n [ms > 0]]\n", argv[0]);
            return 2;
        }
        mode = "sleepers_held";
        argc = 2;
    }
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
    bench_verify(mode, atomic_load(&sum), (long long)n * (n - 1) / 2);
    bench_report(mode, n, t1 - t0);
    free(t);
    return 0;
}
