/* preempt_in_runtime — threads that spend whole time slices inside the
 * threading library: each of 4 creators makes detached threads back to back
 * for about a second, yielding only when 5,000 are alive, so under bobbin
 * (with 1 ms time slices, set by the harness) the preemption
 * signal (and the stuck-thread check) keeps landing in bobbin's own code,
 * in pthread_create and in the libc calls it makes (calloc, memset, mmap).
 * There a G must not be switched away or lose its P: bobbin's frames hold
 * them. The harness also runs this with the library copied under another
 * file name (bobbin must know its own code by address, not by name).
 *
 * Checks: every created thread ran exactly once (the sum of the numbers
 * they were given), counted after the last one is done. stdout is the
 * same natively and under bobbin. Watchdog: 60 s.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "preempt_in_runtime"
#include "probe.h"

#define CREATORS 4
#define RUN_NS 1000000000LL

static atomic_llong sum, expected;
static atomic_long alive;

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *body(void *arg)
{
    atomic_fetch_add(&sum, (long long)(intptr_t)arg);
    atomic_fetch_sub(&alive, 1);
    return NULL;
}

static void *creator(void *arg)
{
    long id = (long)(intptr_t)arg;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    long long end = now_ns() + RUN_NS;
    long n = 0;
    while (now_ns() < end) {
        /* bounded: under bobbin the new threads wait while this one runs */
        if (atomic_load(&alive) > 5000) {
            sched_yield();
            continue;
        }
        long v = id * 1000000 + (++n % 1000000);
        atomic_fetch_add(&alive, 1);
        atomic_fetch_add(&expected, v);
        int e = pthread_create(&(pthread_t){0}, &a, body, (void *)(intptr_t)v);
        if (e != 0) {
            atomic_fetch_sub(&alive, 1);
            atomic_fetch_sub(&expected, v);
            CHECK(0, "pthread_create: error %d", e);
            break;
        }
    }
    pthread_attr_destroy(&a);
    return (void *)n;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    current_probe = "create";
    pthread_t t[CREATORS];
    for (long i = 0; i < CREATORS; i++)
        REQUIRE(pthread_create(&t[i], NULL, creator, (void *)(intptr_t)(i + 1)) == 0,
                "pthread_create creator");
    long total = 0;
    for (int i = 0; i < CREATORS; i++) {
        void *r;
        REQUIRE(pthread_join(t[i], &r) == 0, "pthread_join creator");
        total += (long)(intptr_t)r;
    }
    current_probe = "drain";
    while (atomic_load(&alive) > 0)
        usleep(1000);
    CHECK(total > 0, "no thread was created");
    CHECK(atomic_load(&sum) == atomic_load(&expected),
          "threads ran %lld in sum, expected %lld", atomic_load(&sum), atomic_load(&expected));
    printf("every created thread ran once\n");
    return probe_exit(PROBE_NAME);
}
