/* prodcons.c — 4 producers and 4 consumers over a bounded buffer.
 *
 * A 64-slot ring under one mutex with two condition variables, "not empty" and "not
 * full", as a textbook producer/consumer: a producer waits while the ring is full,
 * puts an item and signals "not empty"; a consumer waits while it is empty, takes an
 * item and signals "not full". Producer p puts the items p, p+4, p+8, ... below n;
 * consumers end when the ring is empty and every producer is done. All 8 threads pass
 * a start gate before the clock starts.
 *
 * Checksum: the sum of all items taken is n(n-1)/2 and exactly n were taken.
 * Usage: prodcons [n]; reports ns per item (put and taken). Go twin: bench/go/prodcons
 * (sync.Cond, the same code; and a buffered channel of 64, reported as prodcons_chan).
 */
#include <pthread.h>

#include "bench.h"

enum { NPROD = 4, NCONS = 4, CAP = 64 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static long ring[CAP];
static int head, count, producers_left = NPROD, ready, open_gate; /* under mu */
static long n;
static long long taken_sum[NCONS], taken_count[NCONS];

static void gate(void)
{
    pthread_mutex_lock(&mu);
    ready++;
    pthread_cond_broadcast(&gate_cv); /* main waits for all 8 */
    while (!open_gate)
        pthread_cond_wait(&gate_cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void *producer(void *arg)
{
    long p = (long)(intptr_t)arg;
    gate();
    for (long item = p; item < n; item += NPROD) {
        pthread_mutex_lock(&mu);
        while (count == CAP)
            pthread_cond_wait(&not_full, &mu);
        ring[(head + count) % CAP] = item;
        count++;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&mu);
    }
    pthread_mutex_lock(&mu);
    if (--producers_left == 0)
        pthread_cond_broadcast(&not_empty);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void *consumer(void *arg)
{
    int c = (int)(intptr_t)arg;
    long long s = 0, k = 0;
    gate();
    for (;;) {
        pthread_mutex_lock(&mu);
        while (count == 0 && producers_left > 0)
            pthread_cond_wait(&not_empty, &mu);
        if (count == 0) {
            pthread_mutex_unlock(&mu);
            break;
        }
        long item = ring[head];
        head = (head + 1) % CAP;
        count--;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&mu);
        s += item;
        k++;
    }
    taken_sum[c] = s;
    taken_count[c] = k;
    return NULL;
}

int main(int argc, char **argv)
{
    n = bench_iters(argc, argv, 400000);
    pthread_t prod[NPROD], cons[NCONS];
    for (int i = 0; i < NCONS; i++)
        bench_check(pthread_create(&cons[i], NULL, consumer, (void *)(intptr_t)i),
                    "pthread_create");
    for (int i = 0; i < NPROD; i++)
        bench_check(pthread_create(&prod[i], NULL, producer, (void *)(intptr_t)i),
                    "pthread_create");
    /* main opens the gate once all 8 wait at it: the clock starts there */
    pthread_mutex_lock(&mu);
    while (ready < NPROD + NCONS)
        pthread_cond_wait(&gate_cv, &mu);
    uint64_t t0 = bench_now_ns();
    open_gate = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < NPROD; i++)
        bench_check(pthread_join(prod[i], NULL), "pthread_join");
    for (int i = 0; i < NCONS; i++)
        bench_check(pthread_join(cons[i], NULL), "pthread_join");
    uint64_t t1 = bench_now_ns();
    long long s = 0, k = 0;
    for (int i = 0; i < NCONS; i++) {
        s += taken_sum[i];
        k += taken_count[i];
    }
    bench_verify("prodcons count", k, n);
    bench_verify("prodcons sum", s, (long long)n * (n - 1) / 2);
    bench_report("prodcons", n, t1 - t0);
    return 0;
}
