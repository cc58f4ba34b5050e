/* spawn_seq — 20,000 threads created and joined one after another.
 *
 * Each thread returns a value computed from its argument; main checks every value
 * and the sum. Under bobbin this is G creation and exit with at most one G alive
 * besides main, so dead Gs, their stacks and TLS blocks must be recycled correctly:
 * a stale value or a wrong return would show in the sum.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

enum { NTHREADS = 20000 };

static uint64_t work(uint64_t i)
{
    return (i * 2654435761u) % 1000003u + i;
}

static void *thread_main(void *arg)
{
    uint64_t i = (uint64_t)(uintptr_t)arg;
    return (void *)(uintptr_t)work(i);
}

int main(void)
{
    uint64_t sum = 0, want = 0;

    for (uint64_t i = 0; i < NTHREADS; i++) {
        pthread_t t;
        void *ret = NULL;
        int rc = pthread_create(&t, NULL, thread_main, (void *)(uintptr_t)i);
        REQUIRE(rc == 0, "pthread_create #%llu: %s", (unsigned long long)i, strerror(rc));
        rc = pthread_join(t, &ret);
        REQUIRE(rc == 0, "pthread_join #%llu: %s", (unsigned long long)i, strerror(rc));
        CHECK((uint64_t)(uintptr_t)ret == work(i), "thread %llu returned %llu, want %llu",
              (unsigned long long)i, (unsigned long long)(uintptr_t)ret,
              (unsigned long long)work(i));
        sum += (uint64_t)(uintptr_t)ret;
        want += work(i);
    }
    CHECK(sum == want, "sum %llu, want %llu", (unsigned long long)sum,
          (unsigned long long)want);
    printf("spawn_seq: %d threads joined, sum=%llu\n", NTHREADS, (unsigned long long)sum);
    return probe_exit("spawn_seq");
}
