/* c11_threads — the C11 <threads.h> API: threads, mutexes, condition
 * variables, thread-specific storage, call_once, sleeps.
 *
 * glibc implements it with its own pthread functions called by internal
 * names, which an LD_PRELOAD library cannot see: under bobbin before
 * 2026-11-25 every thrd_create made an OS thread (the harness's thread
 * count fails), mtx_lock/cnd_wait/thrd_sleep waited in the kernel, and a
 * tss_create key's destructor never ran for a thread made by
 * pthread_create (part 3 fails).
 *
 * 1. NTHR threads made with thrd_create are alive at once (they wait on a
 *    condition variable until all have started), each counts into a shared
 *    total under a mutex, sleeps with thrd_sleep and yields, keeps a tss
 *    value and a _Thread_local of its own, and returns id - 500 (negative
 *    too), which thrd_join gives back whole. call_once runs its function
 *    once. The tss destructor runs once per thread with that thread's value.
 * 2. A relay of NRELAY threads passes a token round ROUNDS times through
 *    one mutex and condition variable; thrd_exit from a nested call ends
 *    a thread with its value.
 * 3. Threads made with pthread_create use a tss_create key: its destructor
 *    runs for each of them, and a thread made later on a reused block
 *    starts with no value.
 * 4. Results: a held mutex gives thrd_busy to mtx_trylock and
 *    thrd_timedout to mtx_timedlock from another thread; cnd_timedwait
 *    times out; a recursive mutex locks twice; an unknown mtx_init type is
 *    a plain mutex; thrd_sleep cut short by a signal gives -1 and the time
 *    left; thrd_detach; a joined thread's 0 result.
 * A watchdog names the part that hangs.
 */
#define PROBE_NAME "c11_threads"
#include "probe.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

enum { NTHR = 1000, NRELAY = 8, ROUNDS = 500, NPT = 50 };

static mtx_t mu;
static cnd_t cv;
static int started, total, dtor_calls;
static long dtor_sum;
static tss_t key;
static once_flag once = ONCE_FLAG_INIT;
static int once_runs;
static _Thread_local int mine = 3;

static void count_once(void)
{
    once_runs++;
}

static void dtor(void *v)
{
    mtx_lock(&mu);
    dtor_calls++;
    dtor_sum += (long)(intptr_t)v;
    mtx_unlock(&mu);
}

static int worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    call_once(&once, count_once);
    CHECK(tss_get(key) == NULL, "thread %d starts with a tss value", id);
    CHECK(tss_set(key, (void *)(intptr_t)(id + 1)) == thrd_success, "tss_set");
    CHECK(mine == 3, "thread %d: _Thread_local starts at %d", id, mine);
    mine += id;
    mtx_lock(&mu);
    started++;
    cnd_broadcast(&cv);
    while (started < NTHR)
        cnd_wait(&cv, &mu);
    total += id;
    mtx_unlock(&mu);
    struct timespec d = {0, 1000000};
    CHECK(thrd_sleep(&d, NULL) == 0, "thrd_sleep");
    thrd_yield();
    CHECK(tss_get(key) == (void *)(intptr_t)(id + 1), "thread %d: tss value changed", id);
    CHECK(mine == 3 + id, "thread %d: _Thread_local changed", id);
    return id - 500;
}

/* part 2: a token goes round NRELAY threads */
static int token, relay_done;

static _Noreturn void finish(int v)
{
    thrd_exit(v);
}

static int relay(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int r = 0; r < ROUNDS; r++) {
        mtx_lock(&mu);
        while (token % NRELAY != id)
            cnd_wait(&cv, &mu);
        token++;
        cnd_broadcast(&cv);
        mtx_unlock(&mu);
    }
    mtx_lock(&mu);
    relay_done++;
    mtx_unlock(&mu);
    finish(id * 10);
}

/* part 3: a tss key used by pthreads */
static void *pt_worker(void *arg)
{
    CHECK(tss_get(key) == NULL, "pthread %d starts with a tss value", (int)(intptr_t)arg);
    tss_set(key, (void *)((intptr_t)arg + 1));
    return NULL;
}

/* part 4 */
static mtx_t held, tm;

static int holder(void *arg)
{
    (void)arg;
    int busy = mtx_trylock(&held);
    struct timespec dl = probe_in_ms(CLOCK_REALTIME, 20);
    int timed = mtx_timedlock(&held, &dl);
    return busy * 10 + timed;
}

/* a mutex of its own: trylock, then unlock; 0 */
static int quick(void *arg)
{
    (void)arg;
    mtx_t m;
    mtx_init(&m, mtx_plain);
    int r = mtx_trylock(&m);
    mtx_unlock(&m);
    mtx_destroy(&m);
    return r;
}

static volatile sig_atomic_t sleeping, got_signal;
static void on_usr1(int sig)
{
    (void)sig;
    got_signal = 1;
}

static int long_sleeper(void *arg)
{
    struct timespec *left = arg;
    struct timespec d = {30, 0};
    sleeping = 1;
    return thrd_sleep(&d, left);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    REQUIRE(mtx_init(&mu, mtx_plain) == thrd_success, "mtx_init");
    REQUIRE(cnd_init(&cv) == thrd_success, "cnd_init");
    REQUIRE(tss_create(&key, dtor) == thrd_success, "tss_create");

    current_probe = "1: threads alive at once";
    static thrd_t t[NTHR];
    for (int i = 0; i < NTHR; i++)
        REQUIRE(thrd_create(&t[i], worker, (void *)(intptr_t)i) == thrd_success, "thrd_create");
    long rsum = 0;
    int neg = 0;
    for (int i = 0; i < NTHR; i++) {
        int r = 12345;
        CHECK(thrd_join(t[i], &r) == thrd_success, "thrd_join");
        CHECK(r == i - 500, "thread %d returned %d", i, r);
        rsum += r;
        neg += r < 0;
    }
    printf("1: %d threads, total %d, results sum %ld (%d negative), call_once ran %d, "
           "tss destructor %d calls sum %ld\n",
           NTHR, total, rsum, neg, once_runs, dtor_calls, dtor_sum);

    current_probe = "2: relay";
    thrd_t rl[NRELAY];
    for (int i = 0; i < NRELAY; i++)
        REQUIRE(thrd_create(&rl[i], relay, (void *)(intptr_t)i) == thrd_success, "create");
    int xsum = 0;
    for (int i = 0; i < NRELAY; i++) {
        int r = -1;
        thrd_join(rl[i], &r);
        xsum += r;
    }
    printf("2: token %d after %d rounds of %d threads, %d done, thrd_exit values sum %d\n",
           token, ROUNDS, NRELAY, relay_done, xsum);

    current_probe = "3: pthreads with a tss key";
    dtor_calls = 0;
    dtor_sum = 0;
    for (int round = 0; round < 2; round++) {
        pthread_t p[NPT];
        for (int i = 0; i < NPT; i++)
            REQUIRE(pthread_create(&p[i], NULL, pt_worker, (void *)(intptr_t)i) == 0, "create");
        for (int i = 0; i < NPT; i++)
            pthread_join(p[i], NULL);
    }
    printf("3: tss destructor ran %d times for %d pthreads, sum %ld\n", dtor_calls, 2 * NPT,
           dtor_sum);
    tss_delete(key);

    current_probe = "4: results";
    REQUIRE(mtx_init(&held, mtx_timed) == thrd_success, "mtx_init");
    mtx_lock(&held);
    thrd_t h;
    thrd_create(&h, holder, NULL);
    int hr = -1;
    thrd_join(h, &hr);
    mtx_unlock(&held);
    printf("4: held mutex: trylock %d (busy %d), timedlock %d (timedout %d)\n", hr / 10,
           thrd_busy, hr % 10, thrd_timedout);

    struct timespec dl = probe_in_ms(CLOCK_REALTIME, 10);
    mtx_lock(&mu);
    printf("4: cnd_timedwait %d\n", cnd_timedwait(&cv, &mu, &dl));
    mtx_unlock(&mu);

    mtx_init(&tm, mtx_plain | mtx_recursive);
    int a = mtx_lock(&tm), b = mtx_lock(&tm), c = mtx_trylock(&tm);
    mtx_unlock(&tm);
    mtx_unlock(&tm);
    mtx_unlock(&tm);
    printf("4: recursive: %d %d %d\n", a, b, c);
    mtx_t odd;
    printf("4: mtx_init(7) %d", mtx_init(&odd, 7));
    mtx_lock(&odd);
    printf(", then trylock %d\n", mtx_trylock(&odd));
    mtx_unlock(&odd);
    mtx_destroy(&odd);

    current_probe = "4: thrd_sleep cut short";
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1; /* no SA_RESTART */
    sigaction(SIGUSR1, &sa, NULL);
    struct timespec left = {0, 0};
    thrd_t s;
    thrd_create(&s, long_sleeper, &left);
    while (!sleeping)
        thrd_yield();
    struct timespec pause = {0, 50 * 1000000};
    thrd_sleep(&pause, NULL);
    pthread_kill((pthread_t)s, SIGUSR1);
    int sr = 0;
    thrd_join(s, &sr);
    printf("4: thrd_sleep cut short: %d, handler ran %d, time left 25-30 s: %d\n", sr,
           (int)got_signal, left.tv_sec >= 25 && left.tv_sec < 30);

    thrd_t d;
    thrd_create(&d, quick, NULL);
    printf("4: thrd_detach %d\n", thrd_detach(d));
    thrd_t z;
    thrd_create(&z, quick, NULL);
    int zr = -1;
    thrd_join(z, &zr);
    printf("4: result 0 of a joined thread: %d, thrd_equal(self, self) %d\n", zr,
           thrd_equal(thrd_current(), thrd_current()) != 0);
    thrd_sleep(&pause, NULL); /* the detached one ends */
    alarm(0);
    return probe_exit("c11_threads");
}
