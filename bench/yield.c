/* yield.c — two threads ping-pong through sched_yield().
 *
 * One shared atomic counter. Thread A moves it from 2i to 2i+1, thread B from 2i+1 to
 * 2i+2; each waits for its turn in a loop that calls sched_yield(). One round trip =
 * one move by A and one by B. With one processor (BOBBIN_MAXPROCS=1 / GOMAXPROCS=1;
 * natively, run under `taskset -c 0`) this is a pure yield round trip: A yields, B
 * runs, B yields, A runs. With two, both spin on their own CPU and the round trip is
 * mostly the cache line moving, plus the yields.
 *
 * Checksum: the counter ends at 2n, A stored the odd values (sum n^2) and B the even
 * ones (sum n(n+1)). Usage: yield [n]; reports ns per round trip. Go twin:
 * bench/go/yield (runtime.Gosched() in the same loop).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench.h"

static atomic_long counter;
static atomic_int ready;
static long n;
static uint64_t t_start, t_end; /* written by A only, read after join */

/* Both threads start the race together, so spawn latency stays out of the timing. */
static void gate(void)
{
    atomic_fetch_add(&ready, 1);
    while (atomic_load(&ready) < 2)
        sched_yield();
}

/* Wait until the counter reaches v; acquire pairs with the other thread's release store. */
static void wait_for(long v)
{
    while (atomic_load_explicit(&counter, memory_order_acquire) != v)
        sched_yield();
}

static void *thread_a(void *out)
{
    long long s = 0;
    gate();
    t_start = bench_now_ns();
    for (long i = 0; i < n; i++) {
        wait_for(2 * i);
        atomic_store_explicit(&counter, 2 * i + 1, memory_order_release);
        s += 2 * i + 1;
    }
    wait_for(2 * n); /* B's last move completes the last round trip */
    t_end = bench_now_ns();
    *(long long *)out = s;
    return NULL;
}

static void *thread_b(void *out)
{
    long long s = 0;
    gate();
    for (long i = 0; i < n; i++) {
        wait_for(2 * i + 1);
        atomic_store_explicit(&counter, 2 * i + 2, memory_order_release);
        s += 2 * i + 2;
    }
    *(long long *)out = s;
    return NULL;
}

int main(int argc, char **argv)
{
    n = bench_iters(argc, argv, 200000);
    long long sa = 0, sb = 0;
    pthread_t a, b;
    bench_check(pthread_create(&a, NULL, thread_a, &sa), "pthread_create");
    bench_check(pthread_create(&b, NULL, thread_b, &sb), "pthread_create");
    bench_check(pthread_join(a, NULL), "pthread_join");
    bench_check(pthread_join(b, NULL), "pthread_join");
    bench_verify("yield counter", atomic_load(&counter), 2LL * n);
    bench_verify("yield sum A", sa, (long long)n * n);
    bench_verify("yield sum B", sb, (long long)n * (n + 1));
    bench_report("yield", n, t_end - t_start);
    return 0;
}
