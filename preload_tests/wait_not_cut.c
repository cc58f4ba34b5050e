/* wait_not_cut — a wait for a signal with no time-out (sigsuspend, ppoll,
 * pselect, epoll_pwait with a mask, pause), or with one longer than the
 * wait (ppoll, 5 s), ends when the signal's handler has run, and only then.
 *
 * Two threads compute without a call while main, ROUNDS times: arms a
 * ITIMER_REAL of S + 1 ms (then every 30 ms), computes for S (S walks from 9.90 to
 * 10.15 ms, where bobbin's preemption of a thread that ran a whole slice
 * lands), and waits with SIGALRM blocked outside the wait; the waits rotate
 * through the six calls (pause with SIGALRM let in for it, the alarm
 * still a millisecond away). Natively every wait ends with EINTR after the
 * handler ran. Checks: every wait fails with EINTR, none ended before its
 * handler ran (then the round waits again for its alarm, counted).
 *
 * Under bobbin the preemption signal that sysmon sent a thread it saw
 * computing could land once it had entered such a wait: the kernel ends
 * those with EINTR for any handler, bobbin's own too (the previous library:
 * 1-2 waits of 600 cut short in 3 runs of 6; signal_to_waiter's sigsuspend
 * round then took the next round's signal, and one handler was missing at
 * the end). The rate is low: the test can pass on a library with the bug.
 *
 * stdout: one line per call.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { ROUNDS = 300, NCALLS = 6 };
static const char *const names[NCALLS] = {"sigsuspend", "ppoll",       "pselect",
                                          "epoll_pwait", "timed ppoll", "pause"};

static atomic_int handled, stop;

static void on_alarm(int sig)
{
    (void)sig;
    atomic_fetch_add(&handled, 1);
}

static long now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

/* call k's wait, SIGALRM let in for it alone (none: the empty mask) */
static int wait_once(int k, int epfd, const sigset_t *none, const sigset_t *blk)
{
    switch (k) {
    case 0:
        return sigsuspend(none);
    case 1:
        return ppoll(NULL, 0, NULL, none);
    case 2:
        return pselect(0, NULL, NULL, NULL, NULL, none);
    case 3: {
        struct epoll_event ev;
        return epoll_pwait(epfd, &ev, 1, -1, none);
    }
    case 4: {
        struct timespec ts = {5, 0};
        return ppoll(NULL, 0, &ts, none);
    }
    default: {
        /* the alarm is still about a millisecond away */
        REQUIRE(pthread_sigmask(SIG_UNBLOCK, blk, NULL) == 0, "unblock");
        int r = pause();
        int e = errno;
        REQUIRE(pthread_sigmask(SIG_BLOCK, blk, NULL) == 0, "block");
        errno = e;
        return r;
    }
    }
}

int main(void)
{
    REQUIRE(probe_on_signal(SIGALRM, on_alarm, 0) == 0, "sigaction");
    sigset_t blk, none;
    sigemptyset(&blk);
    sigaddset(&blk, SIGALRM);
    sigemptyset(&none);
    REQUIRE(pthread_sigmask(SIG_BLOCK, &blk, NULL) == 0, "block");
    int epfd = epoll_create1(0);
    REQUIRE(epfd >= 0, "epoll_create1");
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&t[i], NULL, probe_compute, &stop) == 0, "create");

    int eintr[NCALLS] = {0}, early[NCALLS] = {0}, rounds[NCALLS] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int k = r % NCALLS;
        long spin = 9900 + (r * 7919L) % 250;
        /* again every 30 ms: a wait begun late (a loaded machine) still ends */
        struct itimerval it = {{0, 30000}, {0, spin + 1000}};
        int before = atomic_load(&handled);
        REQUIRE(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer");
        long t0 = now_us();
        volatile unsigned long x = 0;
        while (now_us() - t0 < spin)
            x++;
        int ret = wait_once(k, epfd, &none, &blk);
        rounds[k]++;
        eintr[k] += ret == -1 && errno == EINTR;
        if (atomic_load(&handled) == before) {
            early[k]++;
            while (atomic_load(&handled) == before) /* its alarm is still to come */
                sigsuspend(&none);
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    REQUIRE(setitimer(ITIMER_REAL, &off, NULL) == 0, "setitimer");
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);

    for (int k = 0; k < NCALLS; k++) {
        CHECK(eintr[k] == rounds[k], "%s: %d of %d waits ended with EINTR", names[k], eintr[k],
              rounds[k]);
        CHECK(early[k] == 0, "%s: %d of %d waits ended before the handler ran", names[k],
              early[k], rounds[k]);
        printf("%s: every wait ended by its handler: %s\n", names[k],
               eintr[k] == rounds[k] && early[k] == 0 ? "yes" : "no");
    }
    return probe_exit("wait_not_cut");
}
