/* contention.c — N threads increment one counter under one mutex.
 *
 *   contention_2, contention_8, contention_64   N = 2, 8, 64 threads
 *
 * The total number of increments is the same in every mode (n, split evenly; the
 * first n % N threads do one more), so the modes compare the cost of one
 * lock/increment/unlock as contention grows. Main holds the mutex while it creates
 * the threads, each thread starts by taking it, and the clock starts when main lets
 * go: creation stays out of the timing. A plain default mutex, as an unmodified
 * program would use.
 *
 * Checksum: the counter ends at n, and the per-thread counts add up to n.
 * Usage: contention [n]; reports ns per lock/unlock. Go twin: bench/go/contention
 * (sync.Mutex, the same loop).
 */
#include <pthread.h>

#include "bench.h"

enum { MAXT = 64 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long long counter; /* under mu */

static void *worker(void *arg)
{
    long k = (long)(intptr_t)arg;
    for (long i = 0; i < k; i++) {
        pthread_mutex_lock(&mu);
        counter++;
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static void run(int nthreads, long n)
{
    static pthread_t t[MAXT];
    char name[32];
    snprintf(name, sizeof name, "contention_%d", nthreads);
    counter = 0;
    long long total = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nthreads; i++) {
        long k = n / nthreads + (i < n % nthreads);
        total += k;
        bench_check(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)k), "pthread_create");
    }
    uint64_t t0 = bench_now_ns();
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < nthreads; i++)
        bench_check(pthread_join(t[i], NULL), "pthread_join");
    uint64_t t1 = bench_now_ns();
    bench_verify(name, total, n);
    bench_verify(name, counter, n);
    bench_report(name, n, t1 - t0);
}

int main(int argc, char **argv)
{
    long n = bench_iters(argc, argv, 1000000);
    run(2, n);
    run(8, n);
    run(64, n);
    return 0;
}
