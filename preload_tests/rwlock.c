/* rwlock — reader-writer locks: NPTL's error codes, reader and writer
 * preference, timeouts, and readers and writers hammering a lock with the
 * invariants checked inside every critical section.
 *
 * One line per probe, "<what>: <result>", compared line by line between a
 * native and a bobbin run; each probe also checks glibc 2.36's answer itself.
 * Error probes: EDEADLK (the write holder asks again, for a read or a write
 * lock; not from the try variants, which say EBUSY), EBUSY, EINVAL for a bad
 * tv_nsec or clock (checked by NPTL even when the lock is free), ETIMEDOUT
 * (held by another thread, an already-past deadline, a negative tv_sec),
 * EAGAIN on reader overflow. Reaching 2^28 readers with threads is out of
 * reach, so that probe writes glibc's reader count directly: __readers holds
 * it shifted left by 3 (bobbin keeps the same encoding, on purpose).
 *
 * Preference: with the default kind a reader joins readers while a writer
 * waits; with PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP a reader that
 * arrives while a writer waits goes after the writer. Which thread got the
 * lock first is recorded, so the output does not depend on timing.
 *
 * A watchdog (alarm) turns a hang into exit 1 naming the probe, on stderr.
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

#define PROBE_NAME "rwlock"
#include "expect.h"

#define MS 1000000LL

/* ---- a helper thread that holds a lock while main probes it ---- */

struct holder {
    pthread_t t;
    pthread_rwlock_t *rw;
    int write;
    atomic_int state; /* 1: holds it; 2: main says let go */
};

static void *holder_main(void *arg)
{
    struct holder *h = arg;
    int rc = h->write ? pthread_rwlock_wrlock(h->rw) : pthread_rwlock_rdlock(h->rw);
    CHECK(rc == 0, "holder lock: %s", ename(rc));
    atomic_store(&h->state, 1);
    while (atomic_load(&h->state) != 2)
        sched_yield();
    pthread_rwlock_unlock(h->rw);
    return NULL;
}

static void hold(struct holder *h, pthread_rwlock_t *rw, int write)
{
    h->rw = rw;
    h->write = write;
    atomic_store(&h->state, 0);
    int rc = pthread_create(&h->t, NULL, holder_main, h);
    REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    while (atomic_load(&h->state) == 0)
        sched_yield();
}

static void let_go(struct holder *h)
{
    atomic_store(&h->state, 2);
    pthread_join(h->t, NULL);
}

/* ---- error codes ---- */

static void error_probes(void)
{
    static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
    struct timespec later = after(CLOCK_REALTIME, 1000 * MS);
    struct timespec later_mono = after(CLOCK_MONOTONIC, 1000 * MS);
    struct timespec bad = later;
    bad.tv_nsec = 1000000000;
    struct timespec negative_nsec = later;
    negative_nsec.tv_nsec = -1;

    expect("wrlock", pthread_rwlock_wrlock(&rw), 0);
    expect("wrlock again by the writer", pthread_rwlock_wrlock(&rw), EDEADLK);
    expect("rdlock by the writer", pthread_rwlock_rdlock(&rw), EDEADLK);
    expect("timedwrlock by the writer", pthread_rwlock_timedwrlock(&rw, &later), EDEADLK);
    expect("timedrdlock by the writer", pthread_rwlock_timedrdlock(&rw, &later), EDEADLK);
    expect("timedrdlock by the writer, bad tv_nsec", pthread_rwlock_timedrdlock(&rw, &bad),
           EINVAL);
    expect("trywrlock by the writer", pthread_rwlock_trywrlock(&rw), EBUSY);
    expect("tryrdlock by the writer", pthread_rwlock_tryrdlock(&rw), EBUSY);
    expect("unlock (write)", pthread_rwlock_unlock(&rw), 0);

    expect("rdlock", pthread_rwlock_rdlock(&rw), 0);
    expect("rdlock again (recursive)", pthread_rwlock_rdlock(&rw), 0);
    expect("tryrdlock while read-locked", pthread_rwlock_tryrdlock(&rw), 0);
    expect("trywrlock while read-locked", pthread_rwlock_trywrlock(&rw), EBUSY);
    for (int i = 0; i < 3; i++)
        expect("unlock (read)", pthread_rwlock_unlock(&rw), 0);
    expect("trywrlock when free", pthread_rwlock_trywrlock(&rw), 0);
    expect("unlock", pthread_rwlock_unlock(&rw), 0);

    /* NPTL checks the timeout first, even when the lock is free */
    expect("timedwrlock free, tv_nsec 1e9", pthread_rwlock_timedwrlock(&rw, &bad), EINVAL);
    expect("timedrdlock free, tv_nsec -1", pthread_rwlock_timedrdlock(&rw, &negative_nsec),
           EINVAL);
    expect("clockrdlock CLOCK_PROCESS_CPUTIME_ID",
           pthread_rwlock_clockrdlock(&rw, CLOCK_PROCESS_CPUTIME_ID, &later), EINVAL);
    expect("clockwrlock CLOCK_THREAD_CPUTIME_ID",
           pthread_rwlock_clockwrlock(&rw, CLOCK_THREAD_CPUTIME_ID, &later), EINVAL);
    expect("clockwrlock CLOCK_MONOTONIC free", pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC,
                                                                          &later_mono), 0);
    expect("unlock", pthread_rwlock_unlock(&rw), 0);
    expect("clockrdlock CLOCK_MONOTONIC free", pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC,
                                                                          &later_mono), 0);
    expect("unlock", pthread_rwlock_unlock(&rw), 0);
    struct timespec past = { 0, 0 };
    expect("timedwrlock free, deadline passed", pthread_rwlock_timedwrlock(&rw, &past), 0);
    expect("unlock", pthread_rwlock_unlock(&rw), 0);

    /* another thread holds the write lock */
    struct holder h;
    hold(&h, &rw, 1);
    expect("tryrdlock, other writer", pthread_rwlock_tryrdlock(&rw), EBUSY);
    expect("trywrlock, other writer", pthread_rwlock_trywrlock(&rw), EBUSY);
    int64_t t0 = ns_of(CLOCK_MONOTONIC);
    struct timespec soon = after(CLOCK_REALTIME, 50 * MS);
    expect("timedrdlock 50ms, other writer", pthread_rwlock_timedrdlock(&rw, &soon), ETIMEDOUT);
    int64_t waited = ns_of(CLOCK_MONOTONIC) - t0;
    CHECK(waited >= 45 * MS, "timedrdlock returned after %lld ns", (long long)waited);
    t0 = ns_of(CLOCK_MONOTONIC);
    soon = after(CLOCK_MONOTONIC, 50 * MS);
    expect("clockwrlock MONOTONIC 50ms, other writer",
           pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, &soon), ETIMEDOUT);
    waited = ns_of(CLOCK_MONOTONIC) - t0;
    CHECK(waited >= 45 * MS, "clockwrlock returned after %lld ns", (long long)waited);
    soon = after(CLOCK_MONOTONIC, 20 * MS);
    expect("clockrdlock MONOTONIC 20ms, other writer",
           pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, &soon), ETIMEDOUT);
    soon = after(CLOCK_REALTIME, 20 * MS);
    expect("timedwrlock 20ms, other writer", pthread_rwlock_timedwrlock(&rw, &soon), ETIMEDOUT);
    expect("timedwrlock, deadline passed", pthread_rwlock_timedwrlock(&rw, &past), ETIMEDOUT);
    struct timespec negative = { -1, 0 };
    expect("timedrdlock, negative tv_sec", pthread_rwlock_timedrdlock(&rw, &negative), ETIMEDOUT);
    expect("timedrdlock, bad tv_nsec, other writer", pthread_rwlock_timedrdlock(&rw, &bad),
           EINVAL);
    let_go(&h);
    /* the timed-out waiters left nothing behind */
    expect("wrlock after the timeouts", pthread_rwlock_wrlock(&rw), 0);
    expect("unlock", pthread_rwlock_unlock(&rw), 0);

    /* another thread holds a read lock */
    hold(&h, &rw, 0);
    expect("tryrdlock, other reader", pthread_rwlock_tryrdlock(&rw), 0);
    expect("unlock", pthread_rwlock_unlock(&rw), 0);
    expect("rdlock, other reader", pthread_rwlock_rdlock(&rw), 0);
    expect("unlock", pthread_rwlock_unlock(&rw), 0);
    expect("trywrlock, other reader", pthread_rwlock_trywrlock(&rw), EBUSY);
    soon = after(CLOCK_REALTIME, 20 * MS);
    expect("timedwrlock 20ms, other reader", pthread_rwlock_timedwrlock(&rw, &soon), ETIMEDOUT);
    let_go(&h);
    expect("trywrlock after the reader left", pthread_rwlock_trywrlock(&rw), 0);
    expect("unlock", pthread_rwlock_unlock(&rw), 0);
    expect("destroy", pthread_rwlock_destroy(&rw), 0);

    /* reader overflow: 2^28 - 1 readers is the most NPTL counts */
    pthread_rwlock_t big;
    expect("init", pthread_rwlock_init(&big, NULL), 0);
    big.__data.__readers = ((1u << 28) - 2) << 3;
    expect("tryrdlock, reader 2^28-1", pthread_rwlock_tryrdlock(&big), 0);
    expect("tryrdlock, reader 2^28", pthread_rwlock_tryrdlock(&big), EAGAIN);
    expect("rdlock, reader 2^28", pthread_rwlock_rdlock(&big), EAGAIN);
    expect("timedrdlock, reader 2^28", pthread_rwlock_timedrdlock(&big, &later), EAGAIN);
    expect_val("readers after the overflow", big.__data.__readers >> 3, (1 << 28) - 1);
    expect("unlock (read)", pthread_rwlock_unlock(&big), 0);
    expect_val("readers after an unlock", big.__data.__readers >> 3, (1 << 28) - 2);
    expect("destroy", pthread_rwlock_destroy(&big), 0);

    /* attributes and initialisers */
    pthread_rwlockattr_t a;
    int kind = -1;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_getkind_np(&a, &kind);
    expect_val("default kind", kind, PTHREAD_RWLOCK_PREFER_READER_NP);
    expect("setkind_np PREFER_WRITER_NONRECURSIVE",
           pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP), 0);
    expect("setkind_np 7", pthread_rwlockattr_setkind_np(&a, 7), EINVAL);
    pthread_rwlock_t k;
    expect("init with kind", pthread_rwlock_init(&k, &a), 0);
    expect_val("__flags from init", k.__data.__flags, 2);
    pthread_rwlock_t ki = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
    expect_val("__flags from the static initialiser", ki.__data.__flags, 2);
    expect("rdlock writer-preferring", pthread_rwlock_rdlock(&ki), 0);
    expect("unlock", pthread_rwlock_unlock(&ki), 0);
    pthread_rwlockattr_destroy(&a);
}

/* ---- preference ---- */

struct pref {
    pthread_rwlock_t *rw;
    atomic_int order;      /* next position in the order */
    atomic_int writer_pos; /* position at which the writer got the lock (1-based) */
    atomic_int reader_pos;
    atomic_int reader_trying;
};

static void *pref_writer(void *arg)
{
    struct pref *p = arg;
    int rc = pthread_rwlock_wrlock(p->rw);
    CHECK(rc == 0, "pref writer: %s", ename(rc));
    atomic_store(&p->writer_pos, atomic_fetch_add(&p->order, 1) + 1);
    usleep(10000); /* a reader let in too early would show here too */
    pthread_rwlock_unlock(p->rw);
    return NULL;
}

static void *pref_reader(void *arg)
{
    struct pref *p = arg;
    atomic_store(&p->reader_trying, 1);
    int rc = pthread_rwlock_rdlock(p->rw);
    CHECK(rc == 0, "pref reader: %s", ename(rc));
    atomic_store(&p->reader_pos, atomic_fetch_add(&p->order, 1) + 1);
    pthread_rwlock_unlock(p->rw);
    return NULL;
}

/* main holds a read lock; a writer starts waiting; then a reader comes */
static void preference(const char *name, pthread_rwlock_t *rw, int writer_first)
{
    char what[128];
    struct pref p = { .rw = rw };
    pthread_t w, r;
    snprintf(what, sizeof what, "%s: main rdlock", name);
    expect(what, pthread_rwlock_rdlock(rw), 0);
    REQUIRE(pthread_create(&w, NULL, pref_writer, &p) == 0, "pthread_create");
    if (writer_first) {
        /* a writer-preferring lock refuses readers once the writer waits:
         * that is how we know it does */
        snprintf(what, sizeof what, "%s: waiting for the writer to queue", name);
        current_probe = what;
        while (pthread_rwlock_tryrdlock(rw) == 0) {
            pthread_rwlock_unlock(rw);
            usleep(1000);
        }
        printf("%s: tryrdlock while a writer waits: EBUSY\n", name);
    } else {
        usleep(20000); /* let the writer queue (not needed for the result) */
        snprintf(what, sizeof what, "%s: tryrdlock while a writer waits", name);
        expect(what, pthread_rwlock_tryrdlock(rw), 0);
        pthread_rwlock_unlock(rw);
    }
    REQUIRE(pthread_create(&r, NULL, pref_reader, &p) == 0, "pthread_create");
    snprintf(what, sizeof what, "%s: waiting for the reader", name);
    current_probe = what;
    if (writer_first) {
        while (!atomic_load(&p.reader_trying))
            sched_yield();
        usleep(20000); /* the reader is (very likely) parked now */
        snprintf(what, sizeof what, "%s: reader still out while main reads", name);
        expect_val(what, atomic_load(&p.reader_pos), 0);
    } else {
        while (atomic_load(&p.reader_pos) == 0)
            sched_yield();
    }
    snprintf(what, sizeof what, "%s: main unlock", name);
    expect(what, pthread_rwlock_unlock(rw), 0);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    snprintf(what, sizeof what, "%s: writer got the lock at position", name);
    expect_val(what, atomic_load(&p.writer_pos), writer_first ? 1 : 2);
    snprintf(what, sizeof what, "%s: reader got the lock at position", name);
    expect_val(what, atomic_load(&p.reader_pos), writer_first ? 2 : 1);
}

/* ---- stress ---- */

#define NREADERS 8
#define NWRITERS 8
#define WRITES 1500
#define READS 3000
#define SLOTS 16

struct stress {
    pthread_rwlock_t rw;
    atomic_int readers_in, writers_in;
    long slots[SLOTS]; /* a writer sets every slot to the same new value */
    long writes;
    atomic_long bad;
    atomic_long reads;
};

static void *stress_writer(void *arg)
{
    struct stress *s = arg;
    for (int i = 0; i < WRITES; i++) {
        int rc;
        if (i % 5 == 3) {
            while ((rc = pthread_rwlock_trywrlock(&s->rw)) == EBUSY)
                sched_yield();
        } else if (i % 5 == 4) {
            struct timespec far = after(CLOCK_REALTIME, 30000 * MS);
            rc = pthread_rwlock_timedwrlock(&s->rw, &far);
        } else {
            rc = pthread_rwlock_wrlock(&s->rw);
        }
        if (rc != 0) {
            atomic_fetch_add(&s->bad, 1);
            continue;
        }
        if (atomic_fetch_add(&s->writers_in, 1) != 0 || atomic_load(&s->readers_in) != 0)
            atomic_fetch_add(&s->bad, 1);
        long v = s->writes + 1;
        for (int j = 0; j < SLOTS; j++) {
            s->slots[j] = v;
            if (j == SLOTS / 2 && i % 64 == 0)
                sched_yield(); /* let others try while the slots disagree */
        }
        s->writes = v;
        atomic_fetch_sub(&s->writers_in, 1);
        pthread_rwlock_unlock(&s->rw);
    }
    return NULL;
}

static void *stress_reader(void *arg)
{
    struct stress *s = arg;
    for (int i = 0; i < READS; i++) {
        int rc;
        if (i % 4 == 2) {
            struct timespec far = after(CLOCK_MONOTONIC, 30000 * MS);
            rc = pthread_rwlock_clockrdlock(&s->rw, CLOCK_MONOTONIC, &far);
        } else if (i % 4 == 3) {
            while ((rc = pthread_rwlock_tryrdlock(&s->rw)) == EBUSY)
                sched_yield();
        } else {
            rc = pthread_rwlock_rdlock(&s->rw);
        }
        if (rc != 0) {
            atomic_fetch_add(&s->bad, 1);
            continue;
        }
        atomic_fetch_add(&s->readers_in, 1);
        if (atomic_load(&s->writers_in) != 0)
            atomic_fetch_add(&s->bad, 1);
        long v = s->slots[0];
        for (int j = 1; j < SLOTS; j++)
            if (s->slots[j] != v)
                atomic_fetch_add(&s->bad, 1);
        if (v != s->writes)
            atomic_fetch_add(&s->bad, 1);
        if (i % 128 == 0)
            sched_yield(); /* hold the read lock across a switch */
        atomic_fetch_sub(&s->readers_in, 1);
        atomic_fetch_add(&s->reads, 1);
        pthread_rwlock_unlock(&s->rw);
    }
    return NULL;
}

static void stress(const char *name, const pthread_rwlockattr_t *attr)
{
    static struct stress s;
    memset(&s, 0, sizeof s);
    char what[128];
    snprintf(what, sizeof what, "%s: init", name);
    expect(what, pthread_rwlock_init(&s.rw, attr), 0);
    snprintf(what, sizeof what, "%s: running", name);
    current_probe = what;
    pthread_t t[NREADERS + NWRITERS];
    for (int i = 0; i < NREADERS + NWRITERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, i % 2 ? stress_reader : stress_writer, &s) == 0,
                "pthread_create");
    for (int i = 0; i < NREADERS + NWRITERS; i++)
        pthread_join(t[i], NULL);
    snprintf(what, sizeof what, "%s: writes", name);
    expect_val(what, s.writes, (long)NWRITERS * WRITES);
    snprintf(what, sizeof what, "%s: reads", name);
    expect_val(what, atomic_load(&s.reads), (long)NREADERS * READS);
    snprintf(what, sizeof what, "%s: invariant violations", name);
    expect_val(what, atomic_load(&s.bad), 0);
    snprintf(what, sizeof what, "%s: trywrlock at the end", name);
    expect(what, pthread_rwlock_trywrlock(&s.rw), 0);
    pthread_rwlock_unlock(&s.rw);
    pthread_rwlock_destroy(&s.rw);
}

/* ---- process-shared: glibc's own implementation under bobbin ---- */

struct pshared {
    pthread_rwlock_t rw;
    long counter;
};

static void *pshared_worker(void *arg)
{
    struct pshared *p = arg;
    for (int i = 0; i < 2000; i++) {
        pthread_rwlock_wrlock(&p->rw);
        p->counter++;
        pthread_rwlock_unlock(&p->rw);
        pthread_rwlock_rdlock(&p->rw);
        pthread_rwlock_unlock(&p->rw);
    }
    return NULL;
}

static void pshared_probes(void)
{
    struct pshared *p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                             -1, 0);
    REQUIRE(p != MAP_FAILED, "mmap: %s", strerror(errno));
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    expect("rwlockattr_setpshared SHARED", pthread_rwlockattr_setpshared(&a, PTHREAD_PROCESS_SHARED),
           0);
    expect("pshared init", pthread_rwlock_init(&p->rw, &a), 0);
    expect("pshared wrlock", pthread_rwlock_wrlock(&p->rw), 0);
    expect("pshared wrlock again", pthread_rwlock_wrlock(&p->rw), EDEADLK);
    expect("pshared unlock", pthread_rwlock_unlock(&p->rw), 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], NULL, pshared_worker, p) == 0, "pthread_create");
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    expect_val("pshared counter", p->counter, 4 * 2000);
    expect("pshared destroy", pthread_rwlock_destroy(&p->rw), 0);
    pthread_rwlockattr_destroy(&a);
    munmap(p, sizeof *p);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(50);

    error_probes();

    static pthread_rwlock_t def = PTHREAD_RWLOCK_INITIALIZER;
    preference("reader-preferring", &def, 0);
    static pthread_rwlock_t wp = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
    preference("writer-preferring", &wp, 1);

    stress("stress default", NULL);
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    stress("stress writer-preferring", &a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NP);
    stress("stress PREFER_WRITER_NP", &a);
    pthread_rwlockattr_destroy(&a);

    pshared_probes();

    alarm(0);
    return probe_exit("rwlock");
}
