/* signal_to_waiter — a process signal sent while main waits in pause(),
 * flock() or sigsuspend() runs its handler on main and ends or restarts the
 * wait as its action says, however busy the other threads are.
 *
 * Three workers hand a counter around a mutex and condition variable as fast
 * as they can (their OS threads keep switching between them). A sender
 * thread, which blocks SIGUSR1, waits for main to announce a round and to be
 * asleep (its kernel thread's state; or 50 ms), and sends kill(getpid(),
 * SIGUSR1); the handler notes the thread it ran on. 100 rounds of each:
 *   1. The workers let SIGUSR1 in; main lets it in and waits in pause().
 *   2. main waits in flock() of a file the sender holds locked, the action
 *      without SA_RESTART: the call fails with EINTR.
 *   3. The same with SA_RESTART: the call goes on, and gets the lock once the
 *      sender, having seen the handler run, lets go.
 *   4. Three new workers block it; main blocks it and waits in sigsuspend()
 *      with an empty mask.
 * The kernel gives a process signal to the main thread first when it lets it
 * in (in 4, only main does, inside its sigsuspend), so natively every round's
 * handler runs on main and its wait ends as described. A round whose
 * wait has not ended after 5 s gets another signal (counted: natively none
 * is needed).
 *
 * Under bobbin such a signal could land on an OS thread between two green
 * threads; bobbin kept it and handed it to main, which was asleep in the
 * kernel and was never woken: stress-ng's mutex stressor waited in pause()
 * for its SIGALRM for ever (1 run in 5). One that landed on a worker's code
 * ran its handler there, and main's pause went on. In sigsuspend, main's
 * mask for the wait was not seen, and a signal kept for it went back to the
 * kernel as sigqueue's. (Bobbin now runs the handler over main's call from
 * its own SIGURG, which the kernel restarts calls after: phase 2 checks that
 * flock still fails.)
 *
 * stdout: one line per phase, then one for the handlers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/file.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

#define ROUNDS 100

static pthread_t main_th;
static atomic_int on_main, on_other, round_ready = -1, round_done = -1, stop;
static atomic_int resends, started;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long turn;

static void on_usr1(int sig)
{
    (void)sig;
    if (pthread_equal(pthread_self(), main_th))
        atomic_fetch_add(&on_main, 1);
    else
        atomic_fetch_add(&on_other, 1);
}

/* worker k of 3: waits for its turn, passes it on */
static void *churn(void *arg)
{
    long k = (long)arg;
    atomic_fetch_add(&started, 1);
    pthread_mutex_lock(&mu);
    while (!atomic_load(&stop)) {
        while (turn % 3 != k && !atomic_load(&stop))
            pthread_cond_wait(&cv, &mu);
        turn++;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* main's kernel thread asleep (natively: main; under bobbin this says
 * nothing, and the 50 ms do) */
static void wait_main_asleep(void)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
    for (int i = 0; i < 50; i++) {
        FILE *f = fopen(path, "r");
        if (f == NULL)
            break;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && p[2] == 'S')
            return;
        sleep_ms(1);
    }
}

/* the phases, ROUNDS rounds each */
enum { P_PAUSE, P_FLOCK, P_FLOCK_RESTART, P_SIGSUSPEND, NPHASES };
static int lockfd; /* the sender's open file description of the lock file */
static atomic_int sender_locked = -1;

static void *sender(void *arg)
{
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    REQUIRE(pthread_sigmask(SIG_BLOCK, &s, NULL) == 0, "block in sender");
    for (int r = 0; r < NPHASES * ROUNDS; r++) {
        int phase = r / ROUNDS;
        bool locks = phase == P_FLOCK || phase == P_FLOCK_RESTART;
        if (locks)
            REQUIRE(flock(lockfd, LOCK_EX) == 0, "sender's flock");
        atomic_store(&sender_locked, r);
        while (atomic_load(&round_ready) < r)
            sched_yield();
        sleep_ms(1);
        wait_main_asleep();
        int handled = atomic_load(&on_main) + atomic_load(&on_other);
        kill(getpid(), SIGUSR1);
        /* 5 s: a lost signal, not a slow one */
        struct timespec t0, now;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        bool unlocked = false;
        while (atomic_load(&round_done) < r) {
            if (phase == P_FLOCK_RESTART && !unlocked &&
                atomic_load(&on_main) + atomic_load(&on_other) > handled) {
                /* the handler ran: the flock goes on until it gets the lock */
                REQUIRE(flock(lockfd, LOCK_UN) == 0, "sender's unlock");
                unlocked = true;
            }
            sleep_ms(1);
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - t0.tv_sec >= 5) {
                atomic_fetch_add(&resends, 1);
                kill(getpid(), SIGUSR1);
                t0 = now;
            }
        }
        if (locks && !unlocked)
            REQUIRE(flock(lockfd, LOCK_UN) == 0, "sender's unlock");
    }
    return NULL;
}

static pthread_t w[3];

static void start_workers(void)
{
    atomic_store(&stop, 0);
    atomic_store(&started, 0);
    for (long k = 0; k < 3; k++)
        REQUIRE(pthread_create(&w[k], NULL, churn, (void *)k) == 0, "create worker");
    while (atomic_load(&started) < 3)
        sched_yield();
}

static void stop_workers(void)
{
    atomic_store(&stop, 1);
    pthread_mutex_lock(&mu);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int k = 0; k < 3; k++)
        pthread_join(w[k], NULL);
}

/* main's side of a round: announce it once the sender holds what it must,
 * wait */
static void ready(int r)
{
    while (atomic_load(&sender_locked) < r)
        sched_yield();
    atomic_store(&round_ready, r);
}

int main(void)
{
    main_th = pthread_self();
    char path[] = "/tmp/signal_to_waiter.XXXXXX";
    int mfd = mkstemp(path);
    REQUIRE(mfd >= 0, "mkstemp");
    lockfd = open(path, O_RDWR); /* another open file description: its own lock */
    REQUIRE(lockfd >= 0, "open");
    unlink(path);
    REQUIRE(probe_on_signal(SIGUSR1, on_usr1, 0) == 0, "sigaction");
    pthread_t snd;
    start_workers();
    REQUIRE(pthread_create(&snd, NULL, sender, NULL) == 0, "create sender");

    /* 1 */
    int ok = 0, r = 0;
    for (int i = 0; i < ROUNDS; i++, r++) {
        ready(r);
        int ret = pause();
        ok += ret == -1 && errno == EINTR;
        atomic_store(&round_done, r);
    }
    CHECK(ok == ROUNDS, "pause: %d of %d waits ended with EINTR", ok, ROUNDS);
    printf("pause: every wait ended with EINTR: %s\n", ok == ROUNDS ? "yes" : "no");

    /* 2: no SA_RESTART, flock fails with EINTR */
    ok = 0;
    for (int i = 0; i < ROUNDS; i++, r++) {
        ready(r);
        int ret = flock(mfd, LOCK_EX);
        ok += ret == -1 && errno == EINTR;
        if (ret == 0)
            flock(mfd, LOCK_UN);
        atomic_store(&round_done, r);
    }
    CHECK(ok == ROUNDS, "flock: %d of %d waits ended with EINTR", ok, ROUNDS);
    printf("flock: every wait ended with EINTR: %s\n", ok == ROUNDS ? "yes" : "no");

    /* 3: SA_RESTART, flock goes on and gets the lock */
    REQUIRE(probe_on_signal(SIGUSR1, on_usr1, SA_RESTART) == 0, "sigaction");
    ok = 0;
    for (int i = 0; i < ROUNDS; i++, r++) {
        ready(r);
        int ret = flock(mfd, LOCK_EX);
        ok += ret == 0;
        if (ret == 0)
            flock(mfd, LOCK_UN);
        atomic_store(&round_done, r);
    }
    CHECK(ok == ROUNDS, "flock with SA_RESTART: %d of %d got the lock", ok, ROUNDS);
    printf("flock with SA_RESTART: every wait got the lock: %s\n", ok == ROUNDS ? "yes" : "no");
    REQUIRE(probe_on_signal(SIGUSR1, on_usr1, 0) == 0, "sigaction");

    /* 4 */
    sigset_t blk, none;
    sigemptyset(&blk);
    sigaddset(&blk, SIGUSR1);
    sigemptyset(&none);
    REQUIRE(pthread_sigmask(SIG_BLOCK, &blk, NULL) == 0, "block in main");
    stop_workers();
    start_workers(); /* blocking it too: created with main's mask */
    ok = 0;
    for (int i = 0; i < ROUNDS; i++, r++) {
        ready(r);
        int ret = sigsuspend(&none);
        ok += ret == -1 && errno == EINTR;
        atomic_store(&round_done, r);
    }
    CHECK(ok == ROUNDS, "sigsuspend: %d of %d waits ended with EINTR", ok, ROUNDS);
    printf("sigsuspend: every wait ended with EINTR: %s\n", ok == ROUNDS ? "yes" : "no");

    stop_workers();
    pthread_join(snd, NULL);

    int om = atomic_load(&on_main), oo = atomic_load(&on_other), rs = atomic_load(&resends);
    CHECK(rs == 0, "%d rounds needed a second signal (the first one's wait never ended)", rs);
    CHECK(oo == 0, "%d handlers ran on another thread than main (%d on main)", oo, om);
    CHECK(om == NPHASES * ROUNDS + rs, "%d handlers ran on main, %d signals sent", om,
          NPHASES * ROUNDS + rs);
    printf("handlers on main: %s\n", oo == 0 && rs == 0 ? "all" : "not all");
    return probe_exit("signal_to_waiter");
}
