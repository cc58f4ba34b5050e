/* cond_kernel_mutex — a condition variable of the process waited on with a mutex
 * that keeps its kernel semantics: process-shared (plain and recursive) and robust.
 * fio makes its mutexes process-shared and its condvars not. Under bobbin before
 * 2026-11-26 such a wait ran glibc's own condvar code over bobbin's condvar, whose
 * signals are bobbin's: the waiter was never woken and the program hung.
 *
 * For each kind of mutex: two threads take turns 20,000 times (wait for your turn,
 * flip it, signal); then a timed wait that nobody signals times out with the mutex
 * held again (trylock from another thread fails with EBUSY), and one with a
 * deadline already past returns ETIMEDOUT at once; a broadcast wakes 8 waiters.
 * stdout: one line per kind.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define PROBE_NAME "cond_kernel_mutex"
#include "probe.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

enum { ROUNDS = 20000, WAITERS = 8 };

static pthread_mutex_t mu;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, go, woke;

static void *other(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&mu);
        while (turn != 1)
            pthread_cond_wait(&cv, &mu);
        turn = 0;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static void *trylocker(void *arg)
{
    return (void *)(intptr_t)pthread_mutex_trylock(arg);
}

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!go)
        pthread_cond_wait(&cv, &mu);
    woke++;
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void run(const char *name, int type, int robust)
{
    current_probe = name;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, type);
    if (robust)
        pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    else
        pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    REQUIRE(pthread_mutex_init(&mu, &ma) == 0, "pthread_mutex_init");
    turn = go = woke = 0;

    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, other, NULL) == 0, "pthread_create");
    int done = 0;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&mu);
        while (turn != 0)
            pthread_cond_wait(&cv, &mu);
        turn = 1;
        done++;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
    }
    pthread_join(t, NULL);
    CHECK(done == ROUNDS, "%s: %d rounds", name, done);

    pthread_mutex_lock(&mu);
    struct timespec dl = probe_in_ms(CLOCK_REALTIME, 30);
    int r = pthread_cond_timedwait(&cv, &mu, &dl);
    CHECK(r == ETIMEDOUT, "%s: timed wait gave %d", name, r);
    void *tr;
    pthread_create(&t, NULL, trylocker, &mu);
    pthread_join(t, &tr);
    CHECK((intptr_t)tr == EBUSY, "%s: the mutex is not held again after the timeout (%d)", name,
          (int)(intptr_t)tr);
    struct timespec past = {1, 0};
    r = pthread_cond_timedwait(&cv, &mu, &past);
    CHECK(r == ETIMEDOUT, "%s: a deadline in the past gave %d", name, r);
    pthread_mutex_unlock(&mu);

    pthread_t w[WAITERS];
    for (int i = 0; i < WAITERS; i++)
        REQUIRE(pthread_create(&w[i], NULL, waiter, NULL) == 0, "pthread_create");
    usleep(20 * 1000);
    pthread_mutex_lock(&mu);
    go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < WAITERS; i++)
        pthread_join(w[i], NULL);
    CHECK(woke == WAITERS, "%s: broadcast woke %d of %d", name, woke, WAITERS);
    printf("%s: %d rounds, timed waits ETIMEDOUT, broadcast woke %d\n", name, done, woke);
    pthread_mutex_destroy(&mu);
}

int main(void)
{
    REQUIRE(probe_on_signal(SIGALRM, on_alarm, 0) == 0, "sigaction");
    alarm(60);
    run("process-shared", PTHREAD_MUTEX_NORMAL, 0);
    run("process-shared recursive", PTHREAD_MUTEX_RECURSIVE, 0);
    run("robust", PTHREAD_MUTEX_NORMAL, 1);
    return probe_exit(PROBE_NAME);
}
