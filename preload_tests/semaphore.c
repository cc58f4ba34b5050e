/* semaphore — unnamed POSIX semaphores: a bounded buffer between 4 producers
 * and 4 consumers, and NPTL's return values and errno.
 *
 * The buffer has 8 slots guarded by two counting semaphores (free slots,
 * filled slots) and a binary semaphore used as the mutex. Producers put the
 * numbers 1..N each; consumers sum what they take: the sum and the count
 * must come out exact, and the buffer never holds more than 8 or less than 0.
 * Probes: sem_trywait at 0 (EAGAIN), sem_timedwait and sem_clockwait
 * (ETIMEDOUT after the wait, EINVAL for a bad tv_nsec even when a token is
 * there, EINVAL for an unsupported clock), sem_post at SEM_VALUE_MAX
 * (EOVERFLOW), sem_init above SEM_VALUE_MAX (EINVAL), sem_getvalue, a post
 * that wakes a waiter parked in sem_wait, a process-shared semaphore used by
 * threads (glibc's implementation under bobbin), and sem_destroy right after
 * the last waiter returns. A watchdog (alarm) turns a hang into exit 1.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "semaphore"
#define EXPECT_OWN_EXPECT
#include "expect.h"

#define MS 1000000LL

/* a call returning 0 or -1 with errno: prints "what: 0" or "what: -1 ENAME" */
static void expect(const char *what, int rc, int err, int want_rc, int want_err)
{
    current_probe = what;
    if (rc == 0)
        printf("%s: 0\n", what);
    else
        printf("%s: %d %s\n", what, rc, ename(err));
    fflush(stdout);
    CHECK(rc == want_rc && (rc == 0 || err == want_err), "%s: got %d %s, want %d %s", what, rc,
          ename(err), want_rc, ename(want_err));
}
#define EXPECT(what, call, want_rc, want_err)                \
    do {                                                     \
        errno = 0;                                           \
        int rc_ = (call);                                    \
        expect(what, rc_, errno, want_rc, want_err);         \
    } while (0)

static int value_of(sem_t *s)
{
    int v = -12345;
    sem_getvalue(s, &v);
    return v;
}

/* ---- bounded buffer ---- */

#define SLOTS 8
#define NPROD 4
#define NCONS 4
#define PER_PRODUCER 20000

static sem_t free_slots, filled, guard;
static long buf[SLOTS];
static int head, tail, held; /* guarded by `guard` */
static atomic_long consumed_sum, consumed_count, bad;

static void *producer(void *arg)
{
    (void)arg;
    for (long i = 1; i <= PER_PRODUCER; i++) {
        if (i % 64 == 0) {
            struct timespec far = after(CLOCK_REALTIME, 30000 * MS);
            while (sem_timedwait(&free_slots, &far) != 0)
                atomic_fetch_add(&bad, 1);
        } else {
            while (sem_wait(&free_slots) != 0)
                atomic_fetch_add(&bad, 1);
        }
        sem_wait(&guard);
        buf[tail] = i;
        tail = (tail + 1) % SLOTS;
        if (++held > SLOTS)
            atomic_fetch_add(&bad, 1);
        sem_post(&guard);
        sem_post(&filled);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    long n = (long)arg; /* how many items this consumer takes */
    for (long k = 0; k < n; k++) {
        if (k % 64 == 0) {
            struct timespec far = after(CLOCK_MONOTONIC, 30000 * MS);
            while (sem_clockwait(&filled, CLOCK_MONOTONIC, &far) != 0)
                atomic_fetch_add(&bad, 1);
        } else if (k % 5 == 1) {
            while (sem_trywait(&filled) != 0) {
                if (errno != EAGAIN)
                    atomic_fetch_add(&bad, 1);
                sched_yield();
            }
        } else {
            while (sem_wait(&filled) != 0)
                atomic_fetch_add(&bad, 1);
        }
        sem_wait(&guard);
        long v = buf[head];
        head = (head + 1) % SLOTS;
        if (--held < 0)
            atomic_fetch_add(&bad, 1);
        sem_post(&guard);
        sem_post(&free_slots);
        atomic_fetch_add(&consumed_sum, v);
        atomic_fetch_add(&consumed_count, 1);
    }
    return NULL;
}

static void bounded_buffer(void)
{
    current_probe = "bounded buffer";
    sem_init(&free_slots, 0, SLOTS);
    sem_init(&filled, 0, 0);
    sem_init(&guard, 0, 1);
    pthread_t p[NPROD], c[NCONS];
    long total = (long)NPROD * PER_PRODUCER;
    for (int i = 0; i < NCONS; i++) {
        long share = total / NCONS + (i < total % NCONS);
        REQUIRE(pthread_create(&c[i], NULL, consumer, (void *)share) == 0, "pthread_create");
    }
    for (int i = 0; i < NPROD; i++)
        REQUIRE(pthread_create(&p[i], NULL, producer, NULL) == 0, "pthread_create");
    for (int i = 0; i < NPROD; i++)
        pthread_join(p[i], NULL);
    for (int i = 0; i < NCONS; i++)
        pthread_join(c[i], NULL);
    expect_val("items consumed", atomic_load(&consumed_count), total);
    expect_val("sum consumed", atomic_load(&consumed_sum),
               (long)NPROD * PER_PRODUCER * (PER_PRODUCER + 1) / 2);
    expect_val("errors and bound violations", atomic_load(&bad), 0);
    expect_val("free slots at the end", value_of(&free_slots), SLOTS);
    expect_val("filled at the end", value_of(&filled), 0);
    expect_val("guard at the end", value_of(&guard), 1);
    sem_destroy(&free_slots);
    sem_destroy(&filled);
    sem_destroy(&guard);
}

/* ---- a parked waiter woken by a post ---- */

struct wake {
    sem_t *s;
    atomic_int started;
    int rc;
};

static void *wake_waiter(void *arg)
{
    struct wake *w = arg;
    atomic_store(&w->started, 1);
    w->rc = sem_wait(w->s);
    return NULL;
}

static void waiter_probes(void)
{
    /* the waiter blocks (very likely before the post; either order works) */
    sem_t s;
    sem_init(&s, 0, 0);
    struct wake w = { .s = &s };
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, wake_waiter, &w) == 0, "pthread_create");
    while (!atomic_load(&w.started))
        sched_yield();
    usleep(20000);
    EXPECT("sem_post to a waiter", sem_post(&s), 0, 0);
    pthread_join(t, NULL);
    expect_val("the waiter's sem_wait", w.rc, 0);
    expect_val("value after the hand-off", value_of(&s), 0);
    EXPECT("sem_destroy", sem_destroy(&s), 0, 0);

    /* many waiters, destroy as soon as the last has returned (POSIX allows
     * it while the last sem_post may still be on its way out) */
    long ok = 0;
    for (int iter = 0; iter < 200; iter++) {
        sem_t *hs = malloc(sizeof *hs);
        REQUIRE(hs != NULL, "malloc");
        sem_init(hs, 0, 0);
        struct wake ws[4];
        pthread_t ts[4];
        for (int i = 0; i < 4; i++) {
            ws[i] = (struct wake){ .s = hs };
            REQUIRE(pthread_create(&ts[i], NULL, wake_waiter, &ws[i]) == 0, "pthread_create");
        }
        for (int i = 0; i < 4; i++)
            sem_post(hs);
        for (int i = 0; i < 4; i++) {
            pthread_join(ts[i], NULL);
            ok += ws[i].rc == 0;
        }
        sem_destroy(hs);
        memset(hs, 0x5a, sizeof *hs);
        free(hs);
    }
    expect_val("waits that returned 0 (200 x 4)", ok, 800);
}

/* ---- error codes ---- */

static void error_probes(void)
{
    sem_t s;
    EXPECT("sem_init SEM_VALUE_MAX + 1", sem_init(&s, 0, (unsigned)SEM_VALUE_MAX + 1), -1, EINVAL);
    EXPECT("sem_init 0", sem_init(&s, 0, 0), 0, 0);
    expect_val("getvalue", value_of(&s), 0);
    EXPECT("sem_trywait at 0", sem_trywait(&s), -1, EAGAIN);

    int64_t t0 = ns_of(CLOCK_MONOTONIC);
    struct timespec soon = after(CLOCK_REALTIME, 50 * MS);
    EXPECT("sem_timedwait 50ms at 0", sem_timedwait(&s, &soon), -1, ETIMEDOUT);
    int64_t waited = ns_of(CLOCK_MONOTONIC) - t0;
    CHECK(waited >= 45 * MS, "sem_timedwait returned after %lld ns", (long long)waited);
    t0 = ns_of(CLOCK_MONOTONIC);
    soon = after(CLOCK_MONOTONIC, 50 * MS);
    EXPECT("sem_clockwait MONOTONIC 50ms at 0", sem_clockwait(&s, CLOCK_MONOTONIC, &soon), -1,
           ETIMEDOUT);
    waited = ns_of(CLOCK_MONOTONIC) - t0;
    CHECK(waited >= 45 * MS, "sem_clockwait returned after %lld ns", (long long)waited);
    struct timespec past = { 0, 0 };
    EXPECT("sem_timedwait deadline passed", sem_timedwait(&s, &past), -1, ETIMEDOUT);
    struct timespec negative = { -1, 0 };
    EXPECT("sem_timedwait negative tv_sec", sem_timedwait(&s, &negative), -1, ETIMEDOUT);
    struct timespec bad = after(CLOCK_REALTIME, 1000 * MS);
    bad.tv_nsec = 1000000000;
    EXPECT("sem_timedwait tv_nsec 1e9 at 0", sem_timedwait(&s, &bad), -1, EINVAL);
    expect_val("getvalue after the timeouts", value_of(&s), 0);

    EXPECT("sem_post", sem_post(&s), 0, 0);
    expect_val("getvalue", value_of(&s), 1);
    /* NPTL checks the timeout before it looks at the value */
    EXPECT("sem_timedwait tv_nsec 1e9 with a token", sem_timedwait(&s, &bad), -1, EINVAL);
    bad.tv_nsec = -1;
    EXPECT("sem_clockwait tv_nsec -1 with a token", sem_clockwait(&s, CLOCK_MONOTONIC, &bad), -1,
           EINVAL);
    struct timespec later = after(CLOCK_MONOTONIC, 1000 * MS);
    EXPECT("sem_clockwait CLOCK_PROCESS_CPUTIME_ID with a token",
           sem_clockwait(&s, CLOCK_PROCESS_CPUTIME_ID, &later), -1, EINVAL);
    expect_val("getvalue", value_of(&s), 1);
    EXPECT("sem_timedwait deadline passed, with a token", sem_timedwait(&s, &past), 0, 0);
    EXPECT("sem_post", sem_post(&s), 0, 0);
    EXPECT("sem_clockwait with a token", sem_clockwait(&s, CLOCK_MONOTONIC, &later), 0, 0);
    EXPECT("sem_post", sem_post(&s), 0, 0);
    EXPECT("sem_trywait with a token", sem_trywait(&s), 0, 0);
    EXPECT("sem_post", sem_post(&s), 0, 0);
    EXPECT("sem_wait with a token", sem_wait(&s), 0, 0);
    EXPECT("sem_destroy", sem_destroy(&s), 0, 0);

    EXPECT("sem_init SEM_VALUE_MAX - 1", sem_init(&s, 0, SEM_VALUE_MAX - 1), 0, 0);
    EXPECT("sem_post to SEM_VALUE_MAX", sem_post(&s), 0, 0);
    expect_val("getvalue is SEM_VALUE_MAX", value_of(&s) == SEM_VALUE_MAX, 1);
    EXPECT("sem_post past SEM_VALUE_MAX", sem_post(&s), -1, EOVERFLOW);
    EXPECT("sem_trywait at SEM_VALUE_MAX", sem_trywait(&s), 0, 0);
    EXPECT("sem_post back to SEM_VALUE_MAX", sem_post(&s), 0, 0);
    EXPECT("sem_destroy", sem_destroy(&s), 0, 0);
}

/* ---- process-shared: glibc's implementation, waits inside entersyscall ---- */

struct pshared {
    sem_t items, done;
    long total;
};

static void *pshared_consumer(void *arg)
{
    struct pshared *p = arg;
    for (int i = 0; i < 1000; i++) {
        sem_wait(&p->items);
        __atomic_fetch_add(&p->total, 1, __ATOMIC_RELAXED);
    }
    sem_post(&p->done);
    return NULL;
}

static void pshared_probes(void)
{
    current_probe = "pshared semaphore";
    struct pshared *p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                             -1, 0);
    REQUIRE(p != MAP_FAILED, "mmap: %s", strerror(errno));
    EXPECT("pshared sem_init", sem_init(&p->items, 1, 0), 0, 0);
    EXPECT("pshared sem_init", sem_init(&p->done, 1, 0), 0, 0);
    EXPECT("pshared trywait at 0", sem_trywait(&p->items), -1, EAGAIN);
    struct timespec soon = after(CLOCK_REALTIME, 20 * MS);
    EXPECT("pshared timedwait 20ms at 0", sem_timedwait(&p->items, &soon), -1, ETIMEDOUT);
    /* one consumer: each blocked wait holds an OS thread under bobbin */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, pshared_consumer, p) == 0, "pthread_create");
    for (int i = 0; i < 1000; i++)
        sem_post(&p->items);
    sem_wait(&p->done);
    pthread_join(t, NULL);
    expect_val("pshared items taken", p->total, 1000);
    expect_val("pshared value at the end", value_of(&p->items), 0);
    EXPECT("pshared sem_destroy", sem_destroy(&p->items), 0, 0);
    EXPECT("pshared sem_destroy", sem_destroy(&p->done), 0, 0);
    munmap(p, sizeof *p);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(50);
    error_probes();
    waiter_probes();
    bounded_buffer();
    pshared_probes();
    alarm(0);
    return probe_exit("semaphore");
}
