/* timed_waits — timed waits that time out do so at their deadline: never before it,
 * and not much after it.
 *
 * Each kind of timed wait is given a deadline 20 ms ahead, 20 times, in a situation
 * where nothing will end the wait early (the mutex stays held, nobody signals the
 * condvar, the thread to join does not end):
 *   pthread_cond_timedwait (CLOCK_REALTIME), pthread_cond_timedwait on a condvar
 *   with condattr_setclock(CLOCK_MONOTONIC), pthread_cond_clockwait(MONOTONIC),
 *   pthread_mutex_timedlock (REALTIME), pthread_mutex_clocklock(MONOTONIC),
 *   clock_nanosleep TIMER_ABSTIME on MONOTONIC and on REALTIME,
 *   pthread_timedjoin_np (REALTIME), pthread_clockjoin_np(MONOTONIC).
 * After each return the deadline's clock is read again:
 *   - returning before the deadline, or with anything but ETIMEDOUT (0 for
 *     clock_nanosleep), fails the test at once;
 *   - lateness above 10 ms is counted, but the machine is shared and noisy, so the
 *     test fails only when the median lateness of the 20 trials exceeds 10 ms.
 * stdout has one pass/fail line per kind and no numbers; the numbers (median,
 * maximum, trials late by more than 10 ms) go to stderr.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"

#define MS 1000000LL
enum { TRIALS = 20 };
#define AHEAD (20 * MS)
#define LATE_LIMIT (10 * MS)

static int64_t ns_of(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec ts_of(int64_t ns)
{
    return (struct timespec){ ns / 1000000000, ns % 1000000000 };
}

/* ---- what the waits wait for ---- */

static pthread_mutex_t wait_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wait_cv = PTHREAD_COND_INITIALIZER; /* never signalled */
static pthread_cond_t mono_cv;                             /* CLOCK_MONOTONIC attr */

static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER; /* held by the blocker */

/* the blocker holds held_mu and stays alive until main raises `release` */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int release_flag;
static atomic_int blocker_ready;
static pthread_t blocker;

static void *blocker_main(void *arg)
{
    pthread_mutex_lock(&held_mu);
    pthread_mutex_lock(&gate_mu);
    atomic_store(&blocker_ready, 1);
    while (!release_flag)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    pthread_mutex_unlock(&held_mu);
    return arg;
}

/* ---- the kinds of wait: each waits until `deadline` (ns on `clock`) ---- */

struct kind {
    const char *name;
    clockid_t clock;
    int want; /* the return value of a wait that timed out */
    int (*wait)(clockid_t clock, const struct timespec *deadline);
};

static int cond_timedwait_rt(clockid_t c, const struct timespec *d)
{
    pthread_mutex_lock(&wait_mu);
    int rc = pthread_cond_timedwait(&wait_cv, &wait_mu, d);
    pthread_mutex_unlock(&wait_mu);
    return rc;
}

static int cond_timedwait_mono(clockid_t c, const struct timespec *d)
{
    pthread_mutex_lock(&wait_mu);
    int rc = pthread_cond_timedwait(&mono_cv, &wait_mu, d);
    pthread_mutex_unlock(&wait_mu);
    return rc;
}

static int cond_clockwait(clockid_t c, const struct timespec *d)
{
    pthread_mutex_lock(&wait_mu);
    int rc = pthread_cond_clockwait(&wait_cv, &wait_mu, c, d);
    pthread_mutex_unlock(&wait_mu);
    return rc;
}

static int mutex_timedlock(clockid_t c, const struct timespec *d)
{
    int rc = pthread_mutex_timedlock(&held_mu, d);
    if (rc == 0)
        pthread_mutex_unlock(&held_mu);
    return rc;
}

static int mutex_clocklock(clockid_t c, const struct timespec *d)
{
    int rc = pthread_mutex_clocklock(&held_mu, c, d);
    if (rc == 0)
        pthread_mutex_unlock(&held_mu);
    return rc;
}

static int nanosleep_abs(clockid_t c, const struct timespec *d)
{
    int rc;
    do
        rc = clock_nanosleep(c, TIMER_ABSTIME, d, NULL);
    while (rc == EINTR);
    return rc;
}

static int timedjoin(clockid_t c, const struct timespec *d)
{
    return pthread_timedjoin_np(blocker, NULL, d);
}

static int clockjoin(clockid_t c, const struct timespec *d)
{
    return pthread_clockjoin_np(blocker, NULL, c, d);
}

static const struct kind kinds[] = {
    { "pthread_cond_timedwait (REALTIME)", CLOCK_REALTIME, ETIMEDOUT, cond_timedwait_rt },
    { "pthread_cond_timedwait (condattr MONOTONIC)", CLOCK_MONOTONIC, ETIMEDOUT,
      cond_timedwait_mono },
    { "pthread_cond_clockwait (MONOTONIC)", CLOCK_MONOTONIC, ETIMEDOUT, cond_clockwait },
    { "pthread_mutex_timedlock (REALTIME)", CLOCK_REALTIME, ETIMEDOUT, mutex_timedlock },
    { "pthread_mutex_clocklock (MONOTONIC)", CLOCK_MONOTONIC, ETIMEDOUT, mutex_clocklock },
    { "clock_nanosleep TIMER_ABSTIME (MONOTONIC)", CLOCK_MONOTONIC, 0, nanosleep_abs },
    { "clock_nanosleep TIMER_ABSTIME (REALTIME)", CLOCK_REALTIME, 0, nanosleep_abs },
    { "pthread_timedjoin_np (REALTIME)", CLOCK_REALTIME, ETIMEDOUT, timedjoin },
    { "pthread_clockjoin_np (MONOTONIC)", CLOCK_MONOTONIC, ETIMEDOUT, clockjoin },
};

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void run_kind(const struct kind *k)
{
    int64_t late[TRIALS];
    int early = 0, wrong = 0, over = 0;
    for (int i = 0; i < TRIALS; i++) {
        int64_t deadline = ns_of(k->clock) + AHEAD;
        struct timespec d = ts_of(deadline);
        int rc = k->wait(k->clock, &d);
        int64_t now = ns_of(k->clock);
        late[i] = now - deadline;
        if (rc != k->want) {
            wrong++;
            fprintf(stderr, "timed_waits: %s: trial %d returned %s, want %s\n", k->name, i,
                    rc ? strerrorname_np(rc) : "0", k->want ? strerrorname_np(k->want) : "0");
        }
        if (now < deadline) {
            early++;
            fprintf(stderr, "timed_waits: %s: trial %d returned %lld ns before its deadline\n",
                    k->name, i, (long long)(deadline - now));
        }
        if (late[i] > LATE_LIMIT)
            over++;
    }
    qsort(late, TRIALS, sizeof late[0], cmp64);
    int64_t median = (late[TRIALS / 2 - 1] + late[TRIALS / 2]) / 2;
    fprintf(stderr, "timed_waits: %-45s median late %7.3f ms, max %7.3f ms, "
            "%d of %d late by > 10 ms\n", k->name, median / 1e6, late[TRIALS - 1] / 1e6, over,
            TRIALS);

    printf("%s: %s\n", k->name, wrong ? "FAIL (did not time out)" : "times out");
    printf("%s: %s\n", k->name, early ? "FAIL (returned before its deadline)"
                                      : "never before its deadline");
    printf("%s: %s\n", k->name, median > LATE_LIMIT ? "FAIL (median lateness above 10 ms)"
                                                    : "median lateness within 10 ms");
    CHECK(wrong == 0, "%s: %d trials did not time out", k->name, wrong);
    CHECK(early == 0, "%s: %d trials returned before the deadline", k->name, early);
    CHECK(median <= LATE_LIMIT, "%s: median lateness %.3f ms", k->name, median / 1e6);
}

int main(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    REQUIRE(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0, "condattr_setclock");
    REQUIRE(pthread_cond_init(&mono_cv, &ca) == 0, "cond_init");
    pthread_condattr_destroy(&ca);

    int rc = pthread_create(&blocker, NULL, blocker_main, (void *)42);
    REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    while (!atomic_load(&blocker_ready))
        sched_yield();

    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        run_kind(&kinds[i]);

    pthread_mutex_lock(&gate_mu);
    release_flag = 1;
    pthread_cond_signal(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    void *ret = NULL;
    rc = pthread_join(blocker, &ret);
    CHECK(rc == 0 && ret == (void *)42, "join the blocker: %s", strerror(rc));
    pthread_cond_destroy(&mono_cv);
    return probe_exit("timed_waits");
}
