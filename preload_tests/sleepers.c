/* sleepers — 10,000 threads each sleep 10 ms ten times, all alive at once.
 *
 * Thread i's j-th sleep uses, in turn, nanosleep, usleep, clock_nanosleep relative
 * on CLOCK_MONOTONIC and clock_nanosleep TIMER_ABSTIME on CLOCK_MONOTONIC (kind
 * (i + j) % 4), so every kind is in flight at the same time. Each thread checks that
 * every sleep lasted at least 10 ms (a sleep may be late, never early) and returns a
 * value computed from its index; main joins all and prints only the checksum.
 *
 * Under bobbin all 10,000 sleepers are parked Gs on timers, so the harness's thread
 * limit (MAXPROCS + 2) applies. The program also measures its wall time: sleeping
 * 10 x 10 ms is 100 ms of ideal time per thread, all threads in parallel, so the
 * whole run should take at most 1.5 x 100 ms plus the time main spent creating the
 * threads (measured here). That bound is reported on stderr, and enforced only with
 * SLEEPERS_ENFORCE_WALL=1 (tests assert no timing) and when the threads are not 1:1
 * OS threads (the process never had more than 256 OS threads while main created the
 * sleepers, read from /proc/self/status every 250 creations): natively, where each
 * thread lives >= 100 ms, over a thousand are alive then, and 10,000 kernel threads
 * waking 100,000 times
 * on a small, shared machine miss it by themselves (measured: from 25 ms under to
 * 250 ms over on 2 CPUs), and a native failure would fail the test for the wrong
 * reason. Natively the numbers are still reported. Nothing about time goes to
 * stdout. If a native run cannot create 10,000 threads (EAGAIN: ulimit -u,
 * threads-max), it exits 77 (skip).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { NTHREADS = 10000, NSLEEPS = 10 };
#define SLEEP_NS 10000000LL /* 10 ms */

static pthread_t threads[NTHREADS];

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Threads: from /proc/self/status, -1 if unreadable */
static long os_thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long n = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %ld", &n) == 1)
            break;
    fclose(f);
    return n;
}

static const char *const kind_name[4] = {
    "nanosleep", "usleep", "clock_nanosleep(MONOTONIC, relative)",
    "clock_nanosleep(MONOTONIC, TIMER_ABSTIME)",
};

/* one 10 ms sleep of the given kind; 0 or an error number */
static int sleep_once(int kind)
{
    struct timespec ts = { 0, SLEEP_NS };
    int rc;
    switch (kind) {
    case 0:
        do
            rc = nanosleep(&ts, &ts);
        while (rc == -1 && errno == EINTR);
        return rc == 0 ? 0 : errno;
    case 1:
        rc = usleep(SLEEP_NS / 1000);
        return rc == 0 ? 0 : errno;
    case 2:
        do
            rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts);
        while (rc == EINTR);
        return rc;
    default: {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += SLEEP_NS;
        if (until.tv_nsec >= 1000000000) {
            until.tv_nsec -= 1000000000;
            until.tv_sec++;
        }
        do
            rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL);
        while (rc == EINTR);
        return rc;
    }
    }
}

static void *sleeper(void *arg)
{
    uint64_t i = (uint64_t)(uintptr_t)arg;
    uint64_t v = mix(i + 1);
    for (int j = 0; j < NSLEEPS; j++) {
        int kind = (int)((i + (uint64_t)j) % 4);
        int64_t t0 = mono_ns();
        int rc = sleep_once(kind);
        int64_t slept = mono_ns() - t0;
        CHECK(rc == 0, "thread %llu: %s: %s", (unsigned long long)i, kind_name[kind],
              strerror(rc));
        CHECK(slept >= SLEEP_NS, "thread %llu: %s returned after %lld ns, before 10 ms",
              (unsigned long long)i, kind_name[kind], (long long)slept);
        v = mix(v ^ (uint64_t)(j + 1));
    }
    return (void *)(uintptr_t)v;
}

static uint64_t expected(uint64_t i)
{
    uint64_t v = mix(i + 1);
    for (int j = 0; j < NSLEEPS; j++)
        v = mix(v ^ (uint64_t)(j + 1));
    return v;
}

int main(void)
{
    long os_threads = 0; /* the most OS threads seen while creating */
    int64_t t0 = mono_ns();
    for (int i = 0; i < NTHREADS; i++) {
        if (i % 250 == 0) {
            long n = os_thread_count();
            os_threads = n < 0 || os_threads < 0 ? -1 : n > os_threads ? n : os_threads;
        }
        int rc = pthread_create(&threads[i], NULL, sleeper, (void *)(uintptr_t)i);
        if (rc == EAGAIN) {
            fprintf(stderr, "sleepers: pthread_create #%d: %s: this system cannot run "
                    "%d threads at once; skipping\n", i, strerror(rc), NTHREADS);
            fflush(stderr);
            _exit(PROBE_SKIP); /* the threads already made are still sleeping */
        }
        REQUIRE(rc == 0, "pthread_create #%d: %s", i, strerror(rc));
    }
    int64_t created = mono_ns();

    uint64_t sum = 0;
    for (int i = 0; i < NTHREADS; i++) {
        void *ret = NULL;
        int rc = pthread_join(threads[i], &ret);
        REQUIRE(rc == 0, "pthread_join #%d: %s", i, strerror(rc));
        CHECK((uint64_t)(uintptr_t)ret == expected((uint64_t)i),
              "thread %d returned a wrong value", i);
        sum += (uint64_t)(uintptr_t)ret;
    }
    int64_t done = mono_ns();

    int64_t creation = created - t0, wall = done - t0;
    int64_t bound = 3 * (NSLEEPS * SLEEP_NS) / 2 + creation;
    int one_to_one = os_threads < 0 || os_threads > 256;
    fprintf(stderr, "sleepers: creation %.1f ms, wall %.1f ms, bound %.1f ms (%s: at most %ld "
            "OS threads during creation)\n", creation / 1e6, wall / 1e6, bound / 1e6,
            one_to_one ? "not enforced" : "enforced", os_threads);
    /* Reported, not asserted: the project asserts no timing in tests (the
     * machine is shared and noisy); bench/sleepers measures it, with medians.
     * SLEEPERS_ENFORCE_WALL=1 turns the check on for a run by hand. */
    const char *enforce = getenv("SLEEPERS_ENFORCE_WALL");
    if (enforce && *enforce == '1')
        CHECK(one_to_one || wall <= bound,
              "wall time %.1f ms is more than 1.5 x the ideal 100 ms + %.1f ms of thread "
              "creation = %.1f ms", wall / 1e6, creation / 1e6, bound / 1e6);

    printf("sleepers: %d threads x %d sleeps of 10 ms, checksum=%llu\n", NTHREADS, NSLEEPS,
           (unsigned long long)sum);
    return probe_exit("sleepers");
}
