/* foreign_sync — condition variables, reader-writer locks and barriers
 * shared by green threads and threads bobbin did not make.
 *
 * A pthread_create made from a makecontext coroutine's stack gives an NPTL
 * thread (bobbin runs calls made off a thread's own stack as natively), as
 * do language runtimes that run their code on stacks of their own (SBCL:
 * every Lisp thread, and its main thread's calls). Under bobbin before
 * 2026-11-28 such a thread waited on a condition variable with glibc's
 * algorithm while green threads signalled it with bobbin's, which knew
 * nothing of it: the wake-up was lost (`sbcl --script` hung at exit at P=2,
 * its main thread waiting for the finalizer thread it had signalled).
 *
 * 1. condvar: a green thread and an NPTL thread take turns through one
 *    mutex and one condvar, 2,000 turns each; then 3 NPTL and 3 green
 *    waiters, one broadcast from each side wakes all six; an NPTL thread's
 *    timed wait with nobody signalling ends in ETIMEDOUT with the mutex
 *    held; a signal with one NPTL waiter wakes it; an NPTL waiter
 *    cancelled in its wait runs its cleanup handler with the mutex held.
 * 2. rwlock: 2 green and 2 NPTL threads each take the write lock 2,000 times
 *    and add one to a plain counter in two halves (a reader checks the
 *    halves agree); 2 green and 1 NPTL readers read meanwhile. The counter
 *    ends at 8,000 and no reader saw the halves differ.
 * 3. barrier: 2 green and 2 NPTL threads pass a barrier of 4, 500 times:
 *    each round exactly one gets PTHREAD_BARRIER_SERIAL_THREAD, and nobody
 *    leaves a round before all four arrived.
 * 4. once: a green thread runs a pthread_once routine that sleeps 30 ms
 *    while 2 NPTL threads call pthread_once on it, then the other way round:
 *    the routine runs once, and every caller returns after it ended (an NPTL
 *    thread waited for a green one in glibc's futex that nobody woke).
 * A watchdog names the part that hangs. stdout: one line per part.
 */
#define PROBE_NAME "foreign_sync"
#include "probe.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

/* ---- an NPTL thread: created from a coroutine's stack ---- */
static ucontext_t co_main, co_ctx;
static pthread_t *co_th;
static void *(*co_fn)(void *);
static void *co_arg;
static int co_err;

static void co_body(void)
{
    co_err = pthread_create(co_th, NULL, co_fn, co_arg);
    swapcontext(&co_ctx, &co_main);
}

static void create_foreign(pthread_t *th, void *(*fn)(void *), void *arg)
{
    static char stack[256 * 1024] __attribute__((aligned(16)));
    co_th = th;
    co_fn = fn;
    co_arg = arg;
    getcontext(&co_ctx);
    co_ctx.uc_stack.ss_sp = stack;
    co_ctx.uc_stack.ss_size = sizeof stack;
    co_ctx.uc_link = NULL;
    makecontext(&co_ctx, co_body, 0);
    swapcontext(&co_main, &co_ctx);
    REQUIRE(co_err == 0, "pthread_create from a coroutine: %d", co_err);
}

/* ---- 1. condvar ---- */
enum { TURNS = 2000 };
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, moves[2];

static void *taker(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int i = 0; i < TURNS; i++) {
        pthread_mutex_lock(&mu);
        while (turn != me)
            pthread_cond_wait(&cv, &mu);
        moves[me]++;
        turn = !me;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static int go, woken, waiting;

static void *bcast_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    waiting++;
    int round = go;
    while (go == round)
        pthread_cond_wait(&cv, &mu);
    woken++;
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void *bcast_sender(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    go++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static int timed_r, timed_held, one_r, one_flag;

static void *timed_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    struct timespec t = probe_in_ms(CLOCK_REALTIME, 50);
    do
        timed_r = pthread_cond_timedwait(&cv, &mu, &t);
    while (timed_r == 0);
    timed_held = pthread_mutex_trylock(&mu) == EBUSY;
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void *one_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    waiting++;
    while (!one_flag)
        one_r = pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static int cleanup_held = -1;

static void cancel_cleanup(void *arg)
{
    (void)arg;
    cleanup_held = pthread_mutex_trylock(&mu) == EBUSY;
    pthread_mutex_unlock(&mu);
}

static void *cancelled_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    waiting++;
    pthread_cleanup_push(cancel_cleanup, NULL);
    for (;;)
        pthread_cond_wait(&cv, &mu);
    pthread_cleanup_pop(1);
    return NULL;
}

static void wait_waiting(int n)
{
    for (;;) {
        pthread_mutex_lock(&mu);
        int w = waiting;
        pthread_mutex_unlock(&mu);
        if (w >= n)
            break;
        usleep(1000);
    }
    usleep(20 * 1000); /* into their waits */
}

static void part_condvar(void)
{
    current_probe = "condvar turns";
    pthread_t g, n;
    turn = 0;
    pthread_create(&g, NULL, taker, (void *)0);
    create_foreign(&n, taker, (void *)1);
    pthread_join(g, NULL);
    pthread_join(n, NULL);
    CHECK(moves[0] == TURNS && moves[1] == TURNS, "turns %d %d", moves[0], moves[1]);

    current_probe = "condvar broadcast";
    int all_woken = 1;
    for (int from = 0; from < 2; from++) {
        pthread_t w[6], s;
        waiting = woken = 0;
        for (int i = 0; i < 3; i++) {
            pthread_create(&w[i], NULL, bcast_waiter, NULL);
            create_foreign(&w[3 + i], bcast_waiter, NULL);
        }
        wait_waiting(6);
        if (from == 0)
            pthread_create(&s, NULL, bcast_sender, NULL);
        else
            create_foreign(&s, bcast_sender, NULL);
        pthread_join(s, NULL);
        for (int i = 0; i < 6; i++)
            pthread_join(w[i], NULL);
        CHECK(woken == 6, "broadcast from %s woke %d of 6", from ? "NPTL" : "green", woken);
        all_woken &= woken == 6;
    }

    current_probe = "condvar timed";
    pthread_t t;
    create_foreign(&t, timed_waiter, NULL);
    pthread_join(t, NULL);
    CHECK(timed_r == ETIMEDOUT && timed_held, "timed wait: %d, held %d", timed_r, timed_held);

    current_probe = "condvar signal";
    waiting = 0;
    create_foreign(&t, one_waiter, NULL);
    wait_waiting(1);
    pthread_mutex_lock(&mu);
    one_flag = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    CHECK(one_r == 0, "signalled wait: %d", one_r);

    current_probe = "condvar cancel";
    waiting = 0;
    void *res = NULL;
    create_foreign(&t, cancelled_waiter, NULL);
    wait_waiting(1);
    pthread_cancel(t);
    pthread_join(t, &res);
    CHECK(res == PTHREAD_CANCELED && cleanup_held == 1, "cancelled: %p, mutex held %d", res,
          cleanup_held);
    CHECK(pthread_mutex_trylock(&mu) == 0, "mutex left locked after the cancel");
    pthread_mutex_unlock(&mu);
    printf("condvar: turns %d/%d, broadcasts woke all %d, timed %s, signal %d, cancel %d\n",
           moves[0], moves[1], all_woken, timed_r == ETIMEDOUT ? "ETIMEDOUT" : "?", one_r,
           res == PTHREAD_CANCELED && cleanup_held == 1);
}

/* ---- 2. rwlock ---- */
enum { WRITES = 2000 };
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static volatile long half_a, half_b;
static atomic_int writers_left, torn, reads;

static void *writer(void *arg)
{
    (void)arg;
    for (int i = 0; i < WRITES; i++) {
        pthread_rwlock_wrlock(&rw);
        half_a = half_a + 1;
        if (i % 64 == 0)
            sched_yield();
        half_b = half_b + 1;
        pthread_rwlock_unlock(&rw);
    }
    atomic_fetch_sub(&writers_left, 1);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    while (atomic_load(&writers_left) > 0) {
        pthread_rwlock_rdlock(&rw);
        if (half_a != half_b)
            atomic_fetch_add(&torn, 1);
        atomic_fetch_add(&reads, 1);
        pthread_rwlock_unlock(&rw);
        sched_yield();
    }
    return NULL;
}

static void part_rwlock(void)
{
    current_probe = "rwlock";
    pthread_t w[4], r[3];
    atomic_store(&writers_left, 4);
    for (int i = 0; i < 2; i++) {
        pthread_create(&w[i], NULL, writer, NULL);
        create_foreign(&w[2 + i], writer, NULL);
        pthread_create(&r[i], NULL, reader, NULL);
    }
    create_foreign(&r[2], reader, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(w[i], NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(r[i], NULL);
    CHECK(half_a == 4 * WRITES && half_b == 4 * WRITES, "counter %ld %ld", half_a, half_b);
    CHECK(atomic_load(&torn) == 0, "%d reads saw a write half done", atomic_load(&torn));
    printf("rwlock: counter %ld, torn reads %d\n", half_a, atomic_load(&torn));
}

/* ---- 3. barrier ---- */
enum { ROUNDS = 500, PARTIES = 4 };
static pthread_barrier_t bar;
static atomic_int arrived[ROUNDS], serial[ROUNDS], early;

static void *passer(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        atomic_fetch_add(&arrived[i], 1);
        int r = pthread_barrier_wait(&bar);
        if (r == PTHREAD_BARRIER_SERIAL_THREAD)
            atomic_fetch_add(&serial[i], 1);
        else if (r != 0)
            atomic_fetch_add(&early, 1000);
        if (atomic_load(&arrived[i]) != PARTIES)
            atomic_fetch_add(&early, 1);
    }
    return NULL;
}

static void part_barrier(void)
{
    current_probe = "barrier";
    pthread_barrier_init(&bar, NULL, PARTIES);
    pthread_t t[PARTIES];
    for (int i = 0; i < PARTIES / 2; i++) {
        pthread_create(&t[i], NULL, passer, NULL);
        create_foreign(&t[PARTIES / 2 + i], passer, NULL);
    }
    for (int i = 0; i < PARTIES; i++)
        pthread_join(t[i], NULL);
    int bad_serial = 0;
    for (int i = 0; i < ROUNDS; i++)
        bad_serial += atomic_load(&serial[i]) != 1;
    CHECK(bad_serial == 0, "%d rounds without exactly one serial thread", bad_serial);
    CHECK(atomic_load(&early) == 0, "left a round early or failed: %d", atomic_load(&early));
    pthread_barrier_destroy(&bar);
    printf("barrier: %d rounds, bad serial %d, early %d\n", ROUNDS, bad_serial,
           atomic_load(&early));
}

/* ---- 4. once ---- */
static pthread_once_t once_g = PTHREAD_ONCE_INIT, once_n = PTHREAD_ONCE_INIT;
static atomic_int runs_g, runs_n, done_g, done_n, saw_undone;

static void init_g(void)
{
    atomic_fetch_add(&runs_g, 1);
    usleep(30 * 1000);
    atomic_store(&done_g, 1);
}

static void init_n(void)
{
    atomic_fetch_add(&runs_n, 1);
    usleep(30 * 1000);
    atomic_store(&done_n, 1);
}

static void *call_once(void *arg)
{
    int which = (int)(intptr_t)arg;
    pthread_once(which ? &once_n : &once_g, which ? init_n : init_g);
    if (!atomic_load(which ? &done_n : &done_g))
        atomic_fetch_add(&saw_undone, 1);
    return NULL;
}

static void part_once(void)
{
    current_probe = "once";
    for (int which = 0; which < 2; which++) {
        pthread_t first, t[2];
        /* the first caller runs the routine: green for once_g, NPTL for once_n */
        if (which == 0)
            pthread_create(&first, NULL, call_once, (void *)0);
        else
            create_foreign(&first, call_once, (void *)1);
        usleep(5 * 1000);
        for (int i = 0; i < 2; i++) {
            if (which == 0)
                create_foreign(&t[i], call_once, (void *)0);
            else
                pthread_create(&t[i], NULL, call_once, (void *)1);
        }
        pthread_join(first, NULL);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
    }
    CHECK(runs_g == 1 && runs_n == 1, "routines ran %d and %d times", runs_g, runs_n);
    CHECK(saw_undone == 0, "%d callers returned before the routine ended", saw_undone);
    printf("once: runs %d/%d, early returns %d\n", runs_g, runs_n, saw_undone);
}

/* argv[1], if given: the parts to run ("crbo": condvar, rwlock, barrier, once) */
int main(int argc, char **argv)
{
    const char *parts = argc > 1 ? argv[1] : "crbo";
    signal(SIGALRM, on_alarm);
    alarm(60);
    if (strchr(parts, 'c'))
        part_condvar();
    if (strchr(parts, 'r'))
        part_rwlock();
    if (strchr(parts, 'b'))
        part_barrier();
    if (strchr(parts, 'o'))
        part_once();
    return probe_exit(PROBE_NAME);
}
