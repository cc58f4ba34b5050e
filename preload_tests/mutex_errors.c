/* mutex_errors — the error codes NPTL gives for mutexes and condition variables.
 *
 * One line per probe, "<what>: <result>", so a native run and a bobbin run can be
 * compared line by line; each probe also checks the NPTL (glibc 2.36) answer itself.
 * Covered: errorcheck relock (EDEADLK) and unlock by a non-owner or when unlocked
 * (EPERM); trylock EBUSY; recursive depth and unlock; destroy while locked (EBUSY);
 * timedlock with a bad tv_nsec (EINVAL only when it would wait) and ETIMEDOUT;
 * clocklock on CLOCK_MONOTONIC and on a clock futexes do not support (EINVAL); the
 * _NP static initialisers; cond_wait with an errorcheck/recursive mutex not held
 * (EPERM); cond_timedwait ETIMEDOUT and EINVAL; condattr_setclock(CLOCK_MONOTONIC)
 * with timedwait (it must wait the full time on that clock); clockwait with a bad
 * clock (EINVAL). Then robust and process-shared mutexes, which bobbin leaves to
 * glibc's kernel futexes: contended use, a robust mutex whose owner died
 * (EOWNERDEAD, pthread_mutex_consistent), a process-shared condvar, and waiters
 * blocked on such a mutex, more of them than MAXPROCS, while the holder sleeps.
 *
 * Threads that must hold a mutex while main probes it spin on a flag (with
 * sched_yield) until main lets them go. A watchdog (alarm) turns a hang into exit 1
 * with the name of the probe that hung, on stderr.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "mutex_errors"
#include "expect.h"

#define MS 1000000LL

/* now + ns on clock */
/* ---- a helper thread that runs one mutex operation while main watches ---- */

enum op { OP_HOLD, OP_UNLOCK, OP_TRYLOCK, OP_LOCK_EXIT };

struct helper {
    pthread_t t;
    pthread_mutex_t *mu;
    enum op op;
    atomic_int state; /* 1: did its operation; 2: main says finish */
    int rc;
    pid_t tid; /* its gettid() */
};

static void *helper_main(void *arg)
{
    struct helper *h = arg;
    h->tid = gettid();
    switch (h->op) {
    case OP_HOLD:
        h->rc = pthread_mutex_lock(h->mu);
        break;
    case OP_UNLOCK:
        h->rc = pthread_mutex_unlock(h->mu);
        break;
    case OP_TRYLOCK:
        h->rc = pthread_mutex_trylock(h->mu);
        break;
    case OP_LOCK_EXIT: /* lock and end without unlocking (robust owner death) */
        h->rc = pthread_mutex_lock(h->mu);
        atomic_store(&h->state, 1);
        return NULL;
    }
    atomic_store(&h->state, 1);
    while (atomic_load(&h->state) != 2)
        sched_yield();
    if ((h->op == OP_HOLD || h->op == OP_TRYLOCK) && h->rc == 0)
        pthread_mutex_unlock(h->mu);
    return NULL;
}

/* starts a helper and waits until it has done its operation; returns its result */
static int helper_start(struct helper *h, pthread_mutex_t *mu, enum op op)
{
    h->mu = mu;
    h->op = op;
    h->rc = -1;
    atomic_store(&h->state, 0);
    int rc = pthread_create(&h->t, NULL, helper_main, h);
    REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    while (atomic_load(&h->state) == 0)
        sched_yield();
    return h->rc;
}

static void helper_finish(struct helper *h)
{
    atomic_store(&h->state, 2);
    int rc = pthread_join(h->t, NULL);
    REQUIRE(rc == 0, "pthread_join: %s", strerror(rc));
}

/* the result of a trylock by another thread (which unlocks again if it got it) */
static int trylock_elsewhere(pthread_mutex_t *mu)
{
    struct helper h;
    int rc = helper_start(&h, mu, OP_TRYLOCK);
    helper_finish(&h);
    return rc;
}

static void init_kind(pthread_mutex_t *mu, int kind)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    REQUIRE(pthread_mutexattr_settype(&a, kind) == 0, "settype %d", kind);
    REQUIRE(pthread_mutex_init(mu, &a) == 0, "mutex_init kind %d", kind);
    pthread_mutexattr_destroy(&a);
}

/* ---- the probes ---- */

static void errorcheck_probes(void)
{
    pthread_mutex_t m;
    init_kind(&m, PTHREAD_MUTEX_ERRORCHECK);
    expect("errorcheck unlock while unlocked", pthread_mutex_unlock(&m), EPERM);
    expect("errorcheck lock", pthread_mutex_lock(&m), 0);
    expect("errorcheck relock by owner", pthread_mutex_lock(&m), EDEADLK);
    expect("errorcheck trylock by owner", pthread_mutex_trylock(&m), EBUSY);
    struct timespec soon = after(CLOCK_REALTIME, 10 * MS);
    expect("errorcheck timedlock by owner", pthread_mutex_timedlock(&m, &soon), EDEADLK);
    struct helper h;
    expect("errorcheck unlock by non-owner", helper_start(&h, &m, OP_UNLOCK), EPERM);
    helper_finish(&h);
    expect("errorcheck trylock by another thread", trylock_elsewhere(&m), EBUSY);
    expect("errorcheck unlock by owner", pthread_mutex_unlock(&m), 0);
    expect("errorcheck second unlock", pthread_mutex_unlock(&m), EPERM);
    expect("errorcheck trylock by another thread after unlock", trylock_elsewhere(&m), 0);
    expect("errorcheck destroy", pthread_mutex_destroy(&m), 0);
}

/* the fields glibc keeps in a default or adaptive mutex, which debuggers and
 * programs read: the holder's thread id and the user count */
static void owner_probes(const char *kind, pthread_mutex_t *m)
{
    char what[96];
    snprintf(what, sizeof what, "%s lock", kind);
    expect(what, pthread_mutex_lock(m), 0);
    snprintf(what, sizeof what, "%s owner is the holder's tid", kind);
    expect_val(what, m->__data.__owner == gettid(), 1);
    snprintf(what, sizeof what, "%s users while held", kind);
    expect_val(what, m->__data.__nusers, 1);
    snprintf(what, sizeof what, "%s unlock", kind);
    expect(what, pthread_mutex_unlock(m), 0);
    snprintf(what, sizeof what, "%s owner after unlock", kind);
    expect_val(what, m->__data.__owner, 0);
    snprintf(what, sizeof what, "%s users after unlock", kind);
    expect_val(what, m->__data.__nusers, 0);
    struct helper h;
    snprintf(what, sizeof what, "%s held by another thread", kind);
    expect(what, helper_start(&h, m, OP_HOLD), 0);
    snprintf(what, sizeof what, "%s owner is the other thread's tid", kind);
    expect_val(what, m->__data.__owner == h.tid && h.tid != gettid(), 1);
    helper_finish(&h);
    snprintf(what, sizeof what, "%s owner after the other thread's unlock", kind);
    expect_val(what, m->__data.__owner, 0);
}

static void normal_probes(void)
{
    pthread_mutex_t m;
    init_kind(&m, PTHREAD_MUTEX_NORMAL);
    expect("normal trylock", pthread_mutex_trylock(&m), 0);
    expect("normal trylock while held by self", pthread_mutex_trylock(&m), EBUSY);
    expect("normal trylock by another thread", trylock_elsewhere(&m), EBUSY);
    expect("normal destroy while locked", pthread_mutex_destroy(&m), EBUSY);
    expect("normal unlock", pthread_mutex_unlock(&m), 0);
    expect("normal destroy", pthread_mutex_destroy(&m), 0);

    pthread_mutex_t d = PTHREAD_MUTEX_INITIALIZER;
    struct helper h;
    expect("default mutex held by another thread", helper_start(&h, &d, OP_HOLD), 0);
    expect("default trylock while held elsewhere", pthread_mutex_trylock(&d), EBUSY);
    expect("default destroy while held elsewhere", pthread_mutex_destroy(&d), EBUSY);
    helper_finish(&h);
    expect("default destroy after release", pthread_mutex_destroy(&d), 0);

    pthread_mutex_t o = PTHREAD_MUTEX_INITIALIZER;
    owner_probes("default", &o);
    pthread_mutex_t ad = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
    owner_probes("adaptive", &ad);
}

static void recursive_probes(void)
{
    pthread_mutex_t m;
    init_kind(&m, PTHREAD_MUTEX_RECURSIVE);
    expect("recursive unlock while unlocked", pthread_mutex_unlock(&m), EPERM);
    expect("recursive lock depth 1", pthread_mutex_lock(&m), 0);
    expect("recursive lock depth 2", pthread_mutex_lock(&m), 0);
    expect("recursive trylock depth 3", pthread_mutex_trylock(&m), 0);
    struct timespec soon = after(CLOCK_REALTIME, 10 * MS);
    expect("recursive timedlock depth 4", pthread_mutex_timedlock(&m, &soon), 0);
    struct helper h;
    expect("recursive unlock by non-owner", helper_start(&h, &m, OP_UNLOCK), EPERM);
    helper_finish(&h);
    expect("recursive destroy while locked", pthread_mutex_destroy(&m), EBUSY);
    expect("recursive unlock to depth 3", pthread_mutex_unlock(&m), 0);
    expect("recursive unlock to depth 2", pthread_mutex_unlock(&m), 0);
    expect("recursive unlock to depth 1", pthread_mutex_unlock(&m), 0);
    expect("recursive trylock by another thread at depth 1", trylock_elsewhere(&m), EBUSY);
    expect("recursive unlock to depth 0", pthread_mutex_unlock(&m), 0);
    expect("recursive unlock past depth 0", pthread_mutex_unlock(&m), EPERM);
    expect("recursive trylock by another thread at depth 0", trylock_elsewhere(&m), 0);
    expect("recursive destroy", pthread_mutex_destroy(&m), 0);
}

static void timed_probes(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    struct timespec bad = { 0, 1000000000 };
    struct timespec neg = { 0, -1 };
    /* NPTL looks at the time only when it has to wait */
    expect("timedlock tv_nsec=1e9 on a free mutex", pthread_mutex_timedlock(&m, &bad), 0);
    expect("unlock", pthread_mutex_unlock(&m), 0);

    struct helper h;
    expect("mutex held by another thread", helper_start(&h, &m, OP_HOLD), 0);
    expect("timedlock tv_nsec=1e9 on a held mutex", pthread_mutex_timedlock(&m, &bad), EINVAL);
    expect("timedlock tv_nsec=-1 on a held mutex", pthread_mutex_timedlock(&m, &neg), EINVAL);
    expect("clocklock MONOTONIC tv_nsec=1e9 on a held mutex",
           pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &bad), EINVAL);

    struct timespec past = after(CLOCK_REALTIME, -1000 * MS);
    expect("timedlock deadline in the past", pthread_mutex_timedlock(&m, &past), ETIMEDOUT);

    int64_t t0 = ns_of(CLOCK_REALTIME);
    struct timespec dl = after(CLOCK_REALTIME, 30 * MS);
    expect("timedlock 30ms on a held mutex", pthread_mutex_timedlock(&m, &dl), ETIMEDOUT);
    expect_val("timedlock waited 30ms", ns_of(CLOCK_REALTIME) - t0 >= 30 * MS, 1);

    t0 = ns_of(CLOCK_MONOTONIC);
    dl = after(CLOCK_MONOTONIC, 30 * MS);
    expect("clocklock MONOTONIC 30ms on a held mutex",
           pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &dl), ETIMEDOUT);
    expect_val("clocklock MONOTONIC waited 30ms", ns_of(CLOCK_MONOTONIC) - t0 >= 30 * MS, 1);

    dl = after(CLOCK_REALTIME, 30 * MS);
    expect("clocklock REALTIME 30ms on a held mutex",
           pthread_mutex_clocklock(&m, CLOCK_REALTIME, &dl), ETIMEDOUT);

    dl = after(CLOCK_MONOTONIC, 30 * MS);
    expect("clocklock PROCESS_CPUTIME_ID on a held mutex",
           pthread_mutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &dl), EINVAL);
    expect("clocklock BOOTTIME on a held mutex",
           pthread_mutex_clocklock(&m, CLOCK_BOOTTIME, &dl), EINVAL);
    helper_finish(&h);

    /* a bad clock is refused before the lock is even tried */
    expect("clocklock PROCESS_CPUTIME_ID on a free mutex",
           pthread_mutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &dl), EINVAL);
    expect("clocklock -1 on a free mutex", pthread_mutex_clocklock(&m, (clockid_t)-1, &dl),
           EINVAL);
    expect("trylock after refused clocklocks (still free)", pthread_mutex_trylock(&m), 0);
    expect("unlock", pthread_mutex_unlock(&m), 0);
    dl = after(CLOCK_MONOTONIC, 30 * MS);
    expect("clocklock MONOTONIC on a free mutex",
           pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &dl), 0);
    expect("unlock", pthread_mutex_unlock(&m), 0);
}

static pthread_mutex_t s_recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_adaptive = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static long s_counter;

static void *count_adaptive(void *arg)
{
    for (int i = 0; i < 20000; i++) {
        pthread_mutex_lock(&s_adaptive);
        s_counter++;
        pthread_mutex_unlock(&s_adaptive);
    }
    return arg;
}

static void static_init_probes(void)
{
    expect("static recursive lock", pthread_mutex_lock(&s_recursive), 0);
    expect("static recursive relock", pthread_mutex_lock(&s_recursive), 0);
    expect("static recursive trylock by another thread", trylock_elsewhere(&s_recursive),
           EBUSY);
    expect("static recursive unlock", pthread_mutex_unlock(&s_recursive), 0);
    expect("static recursive unlock", pthread_mutex_unlock(&s_recursive), 0);
    expect("static recursive unlock past depth 0", pthread_mutex_unlock(&s_recursive), EPERM);

    expect("static errorcheck unlock while unlocked", pthread_mutex_unlock(&s_errorcheck),
           EPERM);
    expect("static errorcheck lock", pthread_mutex_lock(&s_errorcheck), 0);
    expect("static errorcheck relock", pthread_mutex_lock(&s_errorcheck), EDEADLK);
    expect("static errorcheck unlock", pthread_mutex_unlock(&s_errorcheck), 0);

    expect("static adaptive lock", pthread_mutex_lock(&s_adaptive), 0);
    expect("static adaptive trylock while held", pthread_mutex_trylock(&s_adaptive), EBUSY);
    expect("static adaptive trylock by another thread", trylock_elsewhere(&s_adaptive), EBUSY);
    expect("static adaptive unlock", pthread_mutex_unlock(&s_adaptive), 0);

    current_probe = "static adaptive, 4 threads x 20000 increments";
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], NULL, count_adaptive, NULL) == 0, "pthread_create");
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");
    expect_val("static adaptive, 4 threads x 20000 increments", s_counter, 80000);
}

/* ---- condition variables ---- */

struct cv_waiter {
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *flag;
    atomic_int waiting;
    int rc;
};

static void *cv_wait_main(void *arg)
{
    struct cv_waiter *w = arg;
    w->rc = pthread_mutex_lock(w->mu);
    atomic_store(&w->waiting, 1);
    while (w->rc == 0 && !*w->flag)
        w->rc = pthread_cond_wait(w->cv, w->mu);
    pthread_mutex_unlock(w->mu);
    return NULL;
}

static void cond_probes(void)
{
    pthread_mutex_t ec, rec;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    init_kind(&ec, PTHREAD_MUTEX_ERRORCHECK);
    init_kind(&rec, PTHREAD_MUTEX_RECURSIVE);

    expect("cond_signal with no waiters", pthread_cond_signal(&cv), 0);
    expect("cond_broadcast with no waiters", pthread_cond_broadcast(&cv), 0);
    expect("cond_wait, errorcheck mutex not held", pthread_cond_wait(&cv, &ec), EPERM);
    expect("cond_wait, recursive mutex not held", pthread_cond_wait(&cv, &rec), EPERM);
    struct timespec dl = after(CLOCK_REALTIME, 30 * MS);
    expect("cond_timedwait, errorcheck mutex not held", pthread_cond_timedwait(&cv, &ec, &dl),
           EPERM);
    struct helper h;
    expect("errorcheck mutex held by another thread", helper_start(&h, &ec, OP_HOLD), 0);
    expect("cond_wait, errorcheck mutex held by another thread", pthread_cond_wait(&cv, &ec),
           EPERM);
    helper_finish(&h);

    expect("lock errorcheck", pthread_mutex_lock(&ec), 0);
    int64_t t0 = ns_of(CLOCK_REALTIME);
    dl = after(CLOCK_REALTIME, 30 * MS);
    expect("cond_timedwait 30ms", pthread_cond_timedwait(&cv, &ec, &dl), ETIMEDOUT);
    expect_val("cond_timedwait waited 30ms", ns_of(CLOCK_REALTIME) - t0 >= 30 * MS, 1);
    expect("errorcheck relock after the timeout (mutex held again)", pthread_mutex_lock(&ec),
           EDEADLK);
    expect("trylock by another thread after the timeout", trylock_elsewhere(&ec), EBUSY);
    dl = after(CLOCK_REALTIME, -1000 * MS);
    expect("cond_timedwait deadline in the past", pthread_cond_timedwait(&cv, &ec, &dl),
           ETIMEDOUT);
    struct timespec bad = { 0, 1000000000 };
    expect("cond_timedwait tv_nsec=1e9", pthread_cond_timedwait(&cv, &ec, &bad), EINVAL);
    dl = after(CLOCK_MONOTONIC, 30 * MS);
    expect("cond_clockwait PROCESS_CPUTIME_ID",
           pthread_cond_clockwait(&cv, &ec, CLOCK_PROCESS_CPUTIME_ID, &dl), EINVAL);
    expect("cond_clockwait -1", pthread_cond_clockwait(&cv, &ec, (clockid_t)-1, &dl), EINVAL);
    expect("cond_clockwait MONOTONIC tv_nsec=1e9",
           pthread_cond_clockwait(&cv, &ec, CLOCK_MONOTONIC, &bad), EINVAL);
    t0 = ns_of(CLOCK_MONOTONIC);
    expect("cond_clockwait MONOTONIC 30ms",
           pthread_cond_clockwait(&cv, &ec, CLOCK_MONOTONIC, &dl), ETIMEDOUT);
    expect_val("cond_clockwait MONOTONIC waited 30ms", ns_of(CLOCK_MONOTONIC) - t0 >= 30 * MS,
               1);
    expect("mutex still held by main (unlock)", pthread_mutex_unlock(&ec), 0);

    /* a recursive mutex comes back from the wait as deep as it was */
    expect("recursive lock x3", pthread_mutex_lock(&rec) | pthread_mutex_lock(&rec) |
                                   pthread_mutex_lock(&rec), 0);
    dl = after(CLOCK_REALTIME, 10 * MS);
    expect("cond_timedwait on a recursive mutex at depth 3",
           pthread_cond_timedwait(&cv, &rec, &dl), ETIMEDOUT);
    expect("recursive unlock x3", pthread_mutex_unlock(&rec) | pthread_mutex_unlock(&rec) |
                                     pthread_mutex_unlock(&rec), 0);
    expect("recursive unlock past depth 0 after the wait", pthread_mutex_unlock(&rec), EPERM);

    /* condattr_setclock(CLOCK_MONOTONIC): timedwait's deadline is on that clock */
    pthread_condattr_t ca;
    pthread_cond_t mcv;
    clockid_t clk = -1;
    pthread_condattr_init(&ca);
    expect("condattr_setclock PROCESS_CPUTIME_ID",
           pthread_condattr_setclock(&ca, CLOCK_PROCESS_CPUTIME_ID), EINVAL);
    expect("condattr_setclock MONOTONIC", pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), 0);
    pthread_condattr_getclock(&ca, &clk);
    expect_val("condattr_getclock is MONOTONIC", clk == CLOCK_MONOTONIC, 1);
    expect("cond_init with the MONOTONIC attr", pthread_cond_init(&mcv, &ca), 0);
    pthread_condattr_destroy(&ca);
    expect("lock errorcheck", pthread_mutex_lock(&ec), 0);
    t0 = ns_of(CLOCK_MONOTONIC);
    dl = after(CLOCK_MONOTONIC, 50 * MS);
    expect("cond_timedwait 50ms on a MONOTONIC condvar", pthread_cond_timedwait(&mcv, &ec, &dl),
           ETIMEDOUT);
    expect_val("it waited the full 50ms on CLOCK_MONOTONIC",
               ns_of(CLOCK_MONOTONIC) - t0 >= 50 * MS, 1);

    /* and a signal still wakes a waiter on it before the deadline */
    int flag = 0;
    struct cv_waiter w = { .mu = &ec, .cv = &mcv, .flag = &flag };
    pthread_t wt;
    expect("unlock", pthread_mutex_unlock(&ec), 0);
    REQUIRE(pthread_create(&wt, NULL, cv_wait_main, &w) == 0, "pthread_create");
    while (!atomic_load(&w.waiting))
        sched_yield();
    pthread_mutex_lock(&ec);
    flag = 1;
    expect("cond_signal a MONOTONIC condvar", pthread_cond_signal(&mcv), 0);
    pthread_mutex_unlock(&ec);
    expect("join the signalled waiter", pthread_join(wt, NULL), 0);
    expect("the waiter's cond_wait", w.rc, 0);

    expect("cond_destroy MONOTONIC condvar", pthread_cond_destroy(&mcv), 0);
    expect("cond_destroy", pthread_cond_destroy(&cv), 0);
    expect("errorcheck destroy", pthread_mutex_destroy(&ec), 0);
    expect("recursive destroy", pthread_mutex_destroy(&rec), 0);
}

/* ---- robust and process-shared: glibc's own (kernel futex) implementation ---- */

struct counted {
    pthread_mutex_t *mu;
    long *counter;
    int errors;
};

static void *count_kernel_mutex(void *arg)
{
    struct counted *c = arg;
    for (int i = 0; i < 20000; i++) {
        if (pthread_mutex_lock(c->mu) != 0) {
            c->errors++;
            continue;
        }
        (*c->counter)++;
        if (pthread_mutex_unlock(c->mu) != 0)
            c->errors++;
    }
    return NULL;
}

static void contend(const char *what, pthread_mutex_t *mu)
{
    long counter = 0;
    struct counted c[4];
    pthread_t t[4];
    current_probe = what;
    for (int i = 0; i < 4; i++) {
        c[i] = (struct counted){ mu, &counter, 0 };
        REQUIRE(pthread_create(&t[i], NULL, count_kernel_mutex, &c[i]) == 0, "pthread_create");
    }
    int errors = 0;
    for (int i = 0; i < 4; i++) {
        REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");
        errors += c[i].errors;
    }
    expect_val(what, counter, 80000);
    CHECK(errors == 0, "%s: %d lock/unlock calls failed", what, errors);
}

/* Main holds mu and sleeps 50 ms while three threads block in pthread_mutex_lock on
 * it: under bobbin that is more blocked waiters than MAXPROCS=2. All must get it. */
static atomic_int held_waiters_started;

static void *lock_once(void *arg)
{
    pthread_mutex_t *mu = arg;
    atomic_fetch_add(&held_waiters_started, 1);
    int rc = pthread_mutex_lock(mu);
    if (rc == 0)
        rc = pthread_mutex_unlock(mu);
    return (void *)(intptr_t)rc;
}

static void held_across_sleep(const char *what, pthread_mutex_t *mu)
{
    pthread_t t[3];
    current_probe = what;
    alarm(20);
    atomic_store(&held_waiters_started, 0);
    REQUIRE(pthread_mutex_lock(mu) == 0, "lock");
    for (int i = 0; i < 3; i++)
        REQUIRE(pthread_create(&t[i], NULL, lock_once, mu) == 0, "pthread_create");
    while (atomic_load(&held_waiters_started) < 3)
        usleep(1000);
    usleep(50000);
    REQUIRE(pthread_mutex_unlock(mu) == 0, "unlock");
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        void *ret;
        REQUIRE(pthread_join(t[i], &ret) == 0, "pthread_join");
        bad += ret != NULL;
    }
    expect_val(what, bad, 0);
}

static pthread_mutex_t robust_mu; /* used again by the last probe */

static void robust_probes(void)
{
    pthread_mutex_t m;
    pthread_mutexattr_t a;
    int v = -1;
    pthread_mutexattr_init(&a);
    expect("mutexattr_setrobust ROBUST", pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST),
           0);
    pthread_mutexattr_getrobust(&a, &v);
    expect_val("mutexattr_getrobust is ROBUST", v == PTHREAD_MUTEX_ROBUST, 1);
    expect("robust mutex_init", pthread_mutex_init(&m, &a), 0);
    expect("robust lock", pthread_mutex_lock(&m), 0);
    expect("robust trylock by another thread", trylock_elsewhere(&m), EBUSY);
    expect("robust unlock", pthread_mutex_unlock(&m), 0);
    expect("robust consistent on a consistent mutex", pthread_mutex_consistent(&m), EINVAL);
    contend("robust mutex, 4 threads x 20000 increments", &m);

    /* the owner ends without unlocking: the next locker gets EOWNERDEAD */
    current_probe = "robust lock after its owner died";
    alarm(20);
    struct helper h;
    expect("robust lock by a thread that then exits", helper_start(&h, &m, OP_LOCK_EXIT), 0);
    REQUIRE(pthread_join(h.t, NULL) == 0, "pthread_join");
    struct timespec dl = after(CLOCK_REALTIME, 2000 * MS);
    int rc = pthread_mutex_timedlock(&m, &dl);
    expect("robust timedlock after its owner died", rc, EOWNERDEAD);
    if (rc == EOWNERDEAD) {
        expect("robust consistent", pthread_mutex_consistent(&m), 0);
        expect("robust unlock after consistent", pthread_mutex_unlock(&m), 0);
        expect("robust lock again", pthread_mutex_lock(&m), 0);
        expect("robust unlock again", pthread_mutex_unlock(&m), 0);
    } else {
        /* the dead owner's lock is stuck: go on with a fresh robust mutex */
        REQUIRE(pthread_mutex_init(&m, &a) == 0, "robust mutex_init");
    }
    robust_mu = m;
    alarm(40);
    pthread_mutexattr_destroy(&a);
}

struct shared {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int flag;
};

static void *pshared_waiter(void *arg)
{
    struct shared *s = arg;
    int rc = pthread_mutex_lock(&s->mu);
    while (rc == 0 && s->flag == 0)
        rc = pthread_cond_wait(&s->cv, &s->mu);
    if (rc == 0) {
        s->flag = 2;
        pthread_cond_signal(&s->cv);
        rc = pthread_mutex_unlock(&s->mu);
    }
    return (void *)(intptr_t)rc;
}

static void pshared_probes(void)
{
    struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(s != MAP_FAILED, "mmap: %s", strerror(errno));
    pthread_mutexattr_t a;
    pthread_condattr_t ca;
    int v = -1;
    pthread_mutexattr_init(&a);
    expect("mutexattr_setpshared SHARED", pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED),
           0);
    pthread_mutexattr_getpshared(&a, &v);
    expect_val("mutexattr_getpshared is SHARED", v == PTHREAD_PROCESS_SHARED, 1);
    expect("pshared mutex_init", pthread_mutex_init(&s->mu, &a), 0);
    pthread_mutexattr_destroy(&a);
    pthread_condattr_init(&ca);
    expect("condattr_setpshared SHARED", pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED),
           0);
    expect("pshared cond_init", pthread_cond_init(&s->cv, &ca), 0);
    pthread_condattr_destroy(&ca);

    expect("pshared lock", pthread_mutex_lock(&s->mu), 0);
    expect("pshared trylock by another thread", trylock_elsewhere(&s->mu), EBUSY);
    expect("pshared destroy while locked", pthread_mutex_destroy(&s->mu), EBUSY);
    expect("pshared unlock", pthread_mutex_unlock(&s->mu), 0);
    contend("pshared mutex, 4 threads x 20000 increments", &s->mu);

    current_probe = "pshared condvar handshake";
    alarm(20);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, pshared_waiter, s) == 0, "pthread_create");
    usleep(20000);
    pthread_mutex_lock(&s->mu);
    s->flag = 1;
    expect("pshared cond_signal", pthread_cond_signal(&s->cv), 0);
    int rc = 0;
    while (rc == 0 && s->flag != 2)
        rc = pthread_cond_wait(&s->cv, &s->mu);
    expect("pshared cond_wait for the answer", rc, 0);
    pthread_mutex_unlock(&s->mu);
    void *ret = (void *)-1;
    expect("join the pshared waiter", pthread_join(t, &ret), 0);
    expect("the pshared waiter's calls", (int)(intptr_t)ret, 0);

    pthread_mutex_lock(&s->mu);
    struct timespec dl = after(CLOCK_REALTIME, 30 * MS);
    expect("pshared cond_timedwait 30ms", pthread_cond_timedwait(&s->cv, &s->mu, &dl),
           ETIMEDOUT);
    pthread_mutex_unlock(&s->mu);
    alarm(40);
    expect("pshared cond_destroy", pthread_cond_destroy(&s->cv), 0);
    expect("pshared mutex_destroy", pthread_mutex_destroy(&s->mu), 0);
    munmap(s, sizeof *s);
}

/* Last, since a hang here ends the run (the watchdog): kernel-futex mutexes with
 * more blocked waiters than MAXPROCS while the holder sleeps. */
static void held_probes(void)
{
    pthread_mutex_t ps;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    REQUIRE(pthread_mutex_init(&ps, &a) == 0, "pshared mutex_init");
    pthread_mutexattr_destroy(&a);
    held_across_sleep("pshared mutex held across a sleep, 3 blocked waiters", &ps);
    expect("pshared mutex_destroy", pthread_mutex_destroy(&ps), 0);
    alarm(40);
    held_across_sleep("robust mutex held across a sleep, 3 blocked waiters", &robust_mu);
    alarm(40);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(40);
    errorcheck_probes();
    normal_probes();
    recursive_probes();
    timed_probes();
    static_init_probes();
    cond_probes();
    robust_probes();
    pshared_probes();
    held_probes();
    alarm(0);
    return probe_exit("mutex_errors");
}
