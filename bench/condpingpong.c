/* condpingpong.c — two threads ping-pong through a mutex and two condition variables.
 *
 * One counter under one mutex. Thread A waits (on cond_a) until the counter is even,
 * moves it from 2i to 2i+1 and signals cond_b; thread B waits (on cond_b) until it is
 * odd, moves it to 2i+2 and signals cond_a. One round trip = one move by each, so
 * every round trip is two waits and two wake-ups: natively two futex sleeps and
 * wake-ups, under bobbin two G parks and readies. Both threads pass a start gate
 * first, so spawn latency stays out of the timing.
 *
 * Checksum: the counter ends at 2n, A stored the odd values (sum n^2) and B the even
 * ones (sum n(n+1)). Usage: condpingpong [n]; reports ns per round trip.
 * Go twin: bench/go/condpingpong (sync.Cond, the same loop; and an unbuffered
 * channel pair, reported as condpingpong_chan).
 */
#include <pthread.h>

#include "bench.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond_a = PTHREAD_COND_INITIALIZER, cond_b = PTHREAD_COND_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static long counter; /* under mu */
static int ready;    /* under mu */
static long n;
static uint64_t t_start, t_end; /* written by A only, read after join */

static void gate(void)
{
    pthread_mutex_lock(&mu);
    if (++ready == 2)
        pthread_cond_broadcast(&gate_cv);
    while (ready < 2)
        pthread_cond_wait(&gate_cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void *thread_a(void *out)
{
    long long s = 0;
    gate();
    t_start = bench_now_ns();
    pthread_mutex_lock(&mu);
    for (long i = 0; i < n; i++) {
        while (counter != 2 * i)
            pthread_cond_wait(&cond_a, &mu);
        counter = 2 * i + 1;
        s += counter;
        pthread_cond_signal(&cond_b);
    }
    while (counter != 2 * n) /* B's last move completes the last round trip */
        pthread_cond_wait(&cond_a, &mu);
    pthread_mutex_unlock(&mu);
    t_end = bench_now_ns();
    *(long long *)out = s;
    return NULL;
}

static void *thread_b(void *out)
{
    long long s = 0;
    gate();
    pthread_mutex_lock(&mu);
    for (long i = 0; i < n; i++) {
        while (counter != 2 * i + 1)
            pthread_cond_wait(&cond_b, &mu);
        counter = 2 * i + 2;
        s += counter;
        pthread_cond_signal(&cond_a);
    }
    pthread_mutex_unlock(&mu);
    *(long long *)out = s;
    return NULL;
}

int main(int argc, char **argv)
{
    n = bench_iters(argc, argv, 100000);
    long long sa = 0, sb = 0;
    pthread_t a, b;
    bench_check(pthread_create(&a, NULL, thread_a, &sa), "pthread_create");
    bench_check(pthread_create(&b, NULL, thread_b, &sb), "pthread_create");
    bench_check(pthread_join(a, NULL), "pthread_join");
    bench_check(pthread_join(b, NULL), "pthread_join");
    bench_verify("condpingpong counter", counter, 2LL * n);
    bench_verify("condpingpong sum A", sa, (long long)n * n);
    bench_verify("condpingpong sum B", sb, (long long)n * (n + 1));
    bench_report("condpingpong", n, t_end - t_start);
    return 0;
}
