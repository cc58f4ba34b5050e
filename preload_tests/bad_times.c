/* bad_times — timed calls given times out of range, on free and on busy
 * objects, answer as NPTL and the kernel do.
 *
 * Each line is one call and its result (the return value, with errno's
 * name for the calls that use errno); the harness compares the lines with
 * the native run's, so every answer must be NPTL's, whatever it is:
 *  - a mutex timedlock takes a free mutex without looking at the time, and
 *    checks it only when it would wait (EINVAL for tv_nsec out of range,
 *    ETIMEDOUT for a negative or past time); rwlocks check it first;
 *  - sem_timedwait checks the time even with a token there to take;
 *  - condvar waits check the time and the clock before waiting;
 *  - nanosleep and clock_nanosleep reject negative seconds, absolute or not
 *    (the kernel's timespec check; bobbin let an absolute one through);
 *  - pthread_timedjoin_np with tv_nsec out of range waits untimed for the
 *    thread to end (NPTL's loop ignores the futex's EINVAL) and joins a
 *    thread that has ended (bobbin answered EINVAL to both).
 * A holder thread keeps a mutex and an rwlock for HOLD_MS, then ends.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { HOLD_MS = 500 };

/* r: a pthread-style result (an errno value, 0) or, with uses_errno, -1 and errno */
static void show(const char *what, int r, int uses_errno)
{
    int e = uses_errno ? (r == 0 ? 0 : errno) : r;
    printf("%-36s %s\n", what, e ? strerrorname_np(e) : "0");
}

static const struct timespec nsec_neg = {0, -1}, nsec_big = {0, 1000000000}, sec_neg = {-1, 0},
                             epoch = {0, 0};
static pthread_mutex_t free_mu = PTHREAD_MUTEX_INITIALIZER, busy_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t free_rw = PTHREAD_RWLOCK_INITIALIZER, busy_rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static atomic_int holding;

static void *holder(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&busy_mu);
    pthread_rwlock_wrlock(&busy_rw);
    atomic_store(&holding, 1);
    usleep(HOLD_MS * 1000);
    pthread_rwlock_unlock(&busy_rw);
    pthread_mutex_unlock(&busy_mu);
    return (void *)7;
}

static void *quick(void *arg)
{
    return arg;
}

int main(void)
{
    sem_t one, none;
    sem_init(&one, 0, 1);
    sem_init(&none, 0, 0);
    pthread_t h;
    REQUIRE(pthread_create(&h, NULL, holder, NULL) == 0, "pthread_create");
    while (!atomic_load(&holding))
        usleep(1000);

    show("mutex_timedlock free nsec<0", pthread_mutex_timedlock(&free_mu, &nsec_neg), 0);
    pthread_mutex_unlock(&free_mu);
    show("mutex_timedlock busy nsec<0", pthread_mutex_timedlock(&busy_mu, &nsec_neg), 0);
    show("mutex_timedlock busy nsec=1e9", pthread_mutex_timedlock(&busy_mu, &nsec_big), 0);
    show("mutex_timedlock busy sec<0", pthread_mutex_timedlock(&busy_mu, &sec_neg), 0);
    show("mutex_timedlock busy epoch", pthread_mutex_timedlock(&busy_mu, &epoch), 0);
    show("mutex_clocklock busy clock 99", pthread_mutex_clocklock(&busy_mu, 99, &epoch), 0);
    show("mutex_clocklock free clock 99", pthread_mutex_clocklock(&free_mu, 99, &epoch), 0);
    show("mutex_clocklock busy CPUTIME", pthread_mutex_clocklock(&busy_mu, CLOCK_PROCESS_CPUTIME_ID, &epoch), 0);

    show("rwlock_timedrdlock free nsec<0", pthread_rwlock_timedrdlock(&free_rw, &nsec_neg), 0);
    show("rwlock_timedwrlock free nsec<0", pthread_rwlock_timedwrlock(&free_rw, &nsec_neg), 0);
    show("rwlock_timedrdlock busy nsec<0", pthread_rwlock_timedrdlock(&busy_rw, &nsec_neg), 0);
    show("rwlock_timedwrlock busy sec<0", pthread_rwlock_timedwrlock(&busy_rw, &sec_neg), 0);
    show("rwlock_clockrdlock free clock 99", pthread_rwlock_clockrdlock(&free_rw, 99, &epoch), 0);

    show("sem_timedwait token nsec<0", sem_timedwait(&one, &nsec_neg), 1);
    show("sem_timedwait empty nsec<0", sem_timedwait(&none, &nsec_neg), 1);
    show("sem_timedwait empty sec<0", sem_timedwait(&none, &sec_neg), 1);
    show("sem_clockwait empty clock 99", sem_clockwait(&none, 99, &epoch), 1);

    pthread_mutex_lock(&free_mu);
    show("cond_timedwait nsec<0", pthread_cond_timedwait(&cv, &free_mu, &nsec_neg), 0);
    show("cond_timedwait sec<0", pthread_cond_timedwait(&cv, &free_mu, &sec_neg), 0);
    show("cond_clockwait clock 99", pthread_cond_clockwait(&cv, &free_mu, 99, &epoch), 0);
    show("cond_clockwait CPUTIME", pthread_cond_clockwait(&cv, &free_mu, CLOCK_PROCESS_CPUTIME_ID, &epoch), 0);
    pthread_mutex_unlock(&free_mu);

    show("nanosleep sec<0", nanosleep(&sec_neg, NULL), 1);
    show("nanosleep nsec=1e9", nanosleep(&nsec_big, NULL), 1);
    show("clock_nanosleep nsec<0", clock_nanosleep(CLOCK_MONOTONIC, 0, &nsec_neg, NULL), 0);
    show("clock_nanosleep abs sec<0", clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &sec_neg, NULL), 0);
    show("clock_nanosleep abs REALTIME sec<0", clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &sec_neg, NULL), 0);
    show("clock_nanosleep clock 99", clock_nanosleep(99, 0, &epoch, NULL), 0);

    show("clockjoin clock 99", pthread_clockjoin_np(h, NULL, 99, &epoch), 0);
    void *ret = NULL;
    show("timedjoin running nsec<0", pthread_timedjoin_np(h, &ret, &nsec_neg), 0);
    printf("%-36s %ld\n", "  its value", (long)ret);

    pthread_t q;
    REQUIRE(pthread_create(&q, NULL, quick, (void *)9) == 0, "pthread_create");
    usleep(50 * 1000); /* it has ended */
    ret = NULL;
    show("timedjoin ended nsec=1e9", pthread_timedjoin_np(q, &ret, &nsec_big), 0);
    printf("%-36s %ld\n", "  its value", (long)ret);
    return probe_exit("bad_times");
}
