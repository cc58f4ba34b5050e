/* spawn_alive — 20,000 threads in batches of 1,000 alive at the same time.
 *
 * Every thread of a batch announces itself, then sched_yield()s until main raises
 * the batch's start flag, so all 1,000 are alive (and runnable) together; then each
 * computes a value from its argument and returns it. Main checks every value, and
 * that no thread ran ahead of its flag. Under bobbin this puts 1,000 Gs in the run
 * queues at once (more than one P's 256-slot ring) and recycles them 20 times.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

enum { NTHREADS = 20000, BATCH = 1000 };

static atomic_int started;   /* threads of the current batch that have begun */
static atomic_int go;        /* batch number + 1 once the batch may proceed */
static atomic_int early;     /* threads that saw a flag of the wrong batch */

static uint64_t work(uint64_t i)
{
    uint64_t x = i + 1;
    for (int k = 0; k < 16; k++)
        x = x * 6364136223846793005u + 1442695040888963407u;
    return x >> 17;
}

static void *thread_main(void *arg)
{
    uint64_t i = (uint64_t)(uintptr_t)arg;
    int batch = (int)(i / BATCH);

    atomic_fetch_add_explicit(&started, 1, memory_order_release);
    /* acquire: pairs with main's release store of go */
    while (atomic_load_explicit(&go, memory_order_acquire) != batch + 1)
        sched_yield();
    if (atomic_load(&started) != BATCH)
        atomic_fetch_add(&early, 1);
    return (void *)(uintptr_t)work(i);
}

int main(void)
{
    static pthread_t t[BATCH];
    uint64_t sum = 0, want = 0;

    for (int b = 0; b < NTHREADS / BATCH; b++) {
        atomic_store(&started, 0);
        for (int k = 0; k < BATCH; k++) {
            uint64_t i = (uint64_t)b * BATCH + k;
            int rc = pthread_create(&t[k], NULL, thread_main, (void *)(uintptr_t)i);
            REQUIRE(rc == 0, "pthread_create #%llu: %s", (unsigned long long)i,
                    strerror(rc));
        }
        /* acquire: pairs with each thread's release increment */
        while (atomic_load_explicit(&started, memory_order_acquire) != BATCH)
            sched_yield();
        atomic_store_explicit(&go, b + 1, memory_order_release);
        for (int k = 0; k < BATCH; k++) {
            uint64_t i = (uint64_t)b * BATCH + k;
            void *ret = NULL;
            int rc = pthread_join(t[k], &ret);
            REQUIRE(rc == 0, "pthread_join #%llu: %s", (unsigned long long)i, strerror(rc));
            CHECK((uint64_t)(uintptr_t)ret == work(i), "thread %llu returned a wrong value",
                  (unsigned long long)i);
            sum += (uint64_t)(uintptr_t)ret;
            want += work(i);
        }
    }
    CHECK(atomic_load(&early) == 0, "%d threads ran before their whole batch existed",
          atomic_load(&early));
    CHECK(sum == want, "sum %llu, want %llu", (unsigned long long)sum,
          (unsigned long long)want);
    printf("spawn_alive: %d threads in batches of %d, sum=%llu\n", NTHREADS, BATCH,
           (unsigned long long)sum);
    return probe_exit("spawn_alive");
}
