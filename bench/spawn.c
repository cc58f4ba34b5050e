/* spawn.c — cost of creating and joining a thread.
 *
 *   spawn_seq    create one thread, join it, repeat: the latency of one short-lived
 *                thread, with never more than one alive.
 *   spawn_batch  create 1,000 threads, then join all 1,000, repeat: the throughput of
 *                a burst, with up to 1,000 alive (stacks, run queues and the join path
 *                all see load).
 *   spawn_sized  spawn_batch with each thread's stack size set to 2 MiB
 *                (pthread_attr_setstacksize), as Rust's std::thread and many servers
 *                do: stacks of a size of the program's own. (Go has no stack size to
 *                set: its twin is spawn_batch again.)
 *
 * Each thread adds its argument (1..n) into an atomic sum, so a run checks that every
 * thread ran exactly once: sum == n(n+1)/2. Default attributes throughout, as an
 * unmodified program would use them. Usage: spawn [n]; reports ns per thread.
 * Go twin: bench/go/spawn.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "bench.h"

enum { BATCH = 1000 };

static atomic_llong sum;

static void *body(void *arg)
{
    atomic_fetch_add_explicit(&sum, (long long)(intptr_t)arg, memory_order_relaxed);
    return NULL;
}

static void spawn_seq(long n)
{
    atomic_store(&sum, 0);
    uint64_t t0 = bench_now_ns();
    for (long i = 1; i <= n; i++) {
        pthread_t t;
        bench_check(pthread_create(&t, NULL, body, (void *)(intptr_t)i), "pthread_create");
        bench_check(pthread_join(t, NULL), "pthread_join");
    }
    uint64_t t1 = bench_now_ns();
    /* join orders every body's add before this load */
    bench_verify("spawn_seq", atomic_load(&sum), (long long)n * (n + 1) / 2);
    bench_report("spawn_seq", n, t1 - t0);
}

static void batches(const char *name, long n, const pthread_attr_t *attr)
{
    static pthread_t ts[BATCH];
    atomic_store(&sum, 0);
    uint64_t t0 = bench_now_ns();
    for (long base = 0; base < n; base += BATCH) {
        long k = n - base < BATCH ? n - base : BATCH;
        for (long j = 0; j < k; j++)
            bench_check(pthread_create(&ts[j], attr, body, (void *)(intptr_t)(base + j + 1)),
                        "pthread_create");
        for (long j = 0; j < k; j++)
            bench_check(pthread_join(ts[j], NULL), "pthread_join");
    }
    uint64_t t1 = bench_now_ns();
    bench_verify(name, atomic_load(&sum), (long long)n * (n + 1) / 2);
    bench_report(name, n, t1 - t0);
}

int main(int argc, char **argv)
{
    long n = bench_iters(argc, argv, 20000);
    spawn_seq(n);
    batches("spawn_batch", n, NULL);
    pthread_attr_t attr;
    bench_check(pthread_attr_init(&attr), "pthread_attr_init");
    bench_check(pthread_attr_setstacksize(&attr, 2 << 20), "pthread_attr_setstacksize");
    batches("spawn_sized", n, &attr);
    pthread_attr_destroy(&attr);
    return 0;
}
