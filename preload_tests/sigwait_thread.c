/* sigwait_thread — signals sent to one thread (pthread_kill,
 * pthread_sigqueue) that the thread takes with sigwait, sigwaitinfo or
 * sigtimedwait, and pthread_sigqueue's values.
 *
 * Natively the kernel queues a thread-directed signal on that thread; one
 * the thread blocks stays pending until it waits for it. Under bobbin a
 * signal sent while the green thread runs is pending in bobbin, not in the
 * kernel, and glibc's pthread_sigqueue would aim at a kernel thread the
 * green thread has not got.
 *
 * Probes, each printing what it saw (the same natively and under bobbin):
 *  1. pthread_kill(SIGUSR1) while the target runs with it blocked: its
 *     sigpending shows it, and sigwait then returns it;
 *  2. pthread_sigqueue(SIGUSR2, 42) to a thread already in sigwaitinfo:
 *     SI_QUEUE and 42;
 *  3. three pthread_sigqueue(SIGRTMIN) with 1, 2, 3 while it runs with it
 *     blocked: three sigwaitinfo give 1, 2, 3 in order;
 *  4. two pthread_sigqueue(SIGUSR1) while blocked: one wait gets it, a
 *     second sigtimedwait with a zero timeout gets EAGAIN (merged);
 *  5. pthread_sigqueue(SIGUSR2, 7) to a thread running with a handler: the
 *     handler sees SI_QUEUE and 7, on that thread;
 *  6. sigtimedwait with nothing sent, 30 ms: EAGAIN;
 *  7. pthread_sigqueue of glibc's cancellation signal: EINVAL;
 *  8. pthread_kill(SIGUSR2) to a thread running with it blocked, which then
 *     calls sigsuspend with an empty mask: the handler runs on it and
 *     sigsuspend returns EINTR, with SIGUSR2 blocked again after;
 *  9. the same with ppoll (empty mask, a pipe nobody writes, 5 s): EINTR;
 * 10. the same, then pthread_sigmask(SIG_UNBLOCK): the handler has run when
 *     it returns;
 * 11. pthread_kill of a signal the thread blocks, 50 ms into its 200 ms
 *     nanosleep: the sleep returns 0 no earlier than 200 ms (a sleep never
 *     ends early), and the signal is still pending after.
 * The whole round runs 50 times (probes 1-5) to catch a signal posted just
 * as the target enters its wait.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

#define ROUNDS 50

static atomic_int stage, ack;
static pthread_t target;
static atomic_int h_code, h_value, h_on_target;

static void wait_stage(int s)
{
    while (atomic_load(&stage) != s)
        sched_yield();
}

static void wait_ack(int a)
{
    while (atomic_load(&ack) != a)
        sched_yield();
}

static void on_usr2(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    atomic_store(&h_code, si->si_code);
    atomic_store(&h_value, si->si_value.sival_int);
    atomic_store(&h_on_target, pthread_equal(pthread_self(), target));
}

struct result {
    int p1_sig, p1_pending;
    int p2_sig, p2_code, p2_value;
    int p3_values[3];
    int p4_first, p4_second, p4_errno;
};

static struct result res[ROUNDS];
static int round_no;

static void *victim(void *arg)
{
    (void)arg;
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR1);
    sigaddset(&m, SIGUSR2);
    sigaddset(&m, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &m, NULL);
    for (round_no = 0; round_no < ROUNDS; round_no++) {
        struct result *r = &res[round_no];
        /* 1 */
        atomic_store(&ack, 1);
        wait_stage(1); /* main has sent SIGUSR1 by now */
        sigset_t w;
        sigemptyset(&w);
        sigaddset(&w, SIGUSR1);
        sigset_t pend;
        sigpending(&pend);
        r->p1_pending = sigismember(&pend, SIGUSR1);
        int s = 0;
        r->p1_sig = sigwait(&w, &s) == 0 ? s : -1;
        /* 2: main queues SIGUSR2 once we are (probably) waiting */
        sigemptyset(&w);
        sigaddset(&w, SIGUSR2);
        atomic_store(&ack, 2);
        siginfo_t si;
        r->p2_sig = sigwaitinfo(&w, &si);
        r->p2_code = si.si_code;
        r->p2_value = si.si_value.sival_int;
        /* 3 */
        atomic_store(&ack, 3);
        wait_stage(3);
        sigemptyset(&w);
        sigaddset(&w, SIGRTMIN);
        for (int k = 0; k < 3; k++)
            r->p3_values[k] = sigwaitinfo(&w, &si) == SIGRTMIN ? si.si_value.sival_int : -1;
        /* 4 */
        atomic_store(&ack, 4);
        wait_stage(4);
        sigemptyset(&w);
        sigaddset(&w, SIGUSR1);
        r->p4_first = sigwaitinfo(&w, &si);
        struct timespec zero = {0, 0};
        r->p4_second = sigtimedwait(&w, &si, &zero);
        r->p4_errno = errno;
        /* 5: SIGUSR2 unblocked, with a handler, while we run */
        sigemptyset(&w);
        sigaddset(&w, SIGUSR2);
        atomic_store(&h_code, 0);
        pthread_sigmask(SIG_UNBLOCK, &w, NULL);
        atomic_store(&ack, 5);
        while (atomic_load(&h_code) == 0)
            ; /* no call: the handler must come to us */
        pthread_sigmask(SIG_BLOCK, &w, NULL);
        atomic_store(&ack, 6);
        wait_stage(6);
    }
    return NULL;
}

static int s8_ret, s8_errno, s8_handler, s8_blocked;

/* 8: SIGUSR2 blocked, pthread_kill'd while running, then sigsuspend with
 * an empty mask: the handler runs on the thread and it returns EINTR */
static void *suspender(void *arg)
{
    int how = arg ? *(int *)arg : 0; /* 0 sigsuspend, 1 ppoll, 2 unblock */
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &m, NULL);
    atomic_store(&h_code, 0);
    if (how != 3) {
        atomic_store(&ack, 8);
        wait_stage(8);
    }
    sigset_t none;
    sigemptyset(&none);
    if (how == 3) {
        struct timespec t0, t1, req = {0, 200 * 1000 * 1000};
        clock_gettime(CLOCK_MONOTONIC, &t0);
        atomic_store(&ack, 9); /* main sends while we sleep */
        s8_ret = nanosleep(&req, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        s8_errno = ms >= 200 ? EINTR : 0; /* the whole sleep (EINTR: just the flag) */
        sigset_t pend;
        sigpending(&pend);
        s8_handler = sigismember(&pend, SIGUSR2); /* still pending, not run */
        int sig;
        sigwait(&m, &sig); /* take it */
    } else if (how == 2) {
        pthread_sigmask(SIG_UNBLOCK, &m, NULL);
        s8_ret = atomic_load(&h_code) != 0 ? -1 : 0; /* the handler ran before it returned */
        s8_errno = EINTR;
        pthread_sigmask(SIG_BLOCK, &m, NULL);
    } else if (how == 1) {
        int p[2];
        REQUIRE(pipe(p) == 0, "pipe");
        struct pollfd pf = {p[0], POLLIN, 0};
        struct timespec ts = {5, 0};
        s8_ret = ppoll(&pf, 1, &ts, &none);
        s8_errno = errno;
        close(p[0]);
        close(p[1]);
    } else {
        s8_ret = sigsuspend(&none);
        s8_errno = errno;
    }
    if (how != 3)
        s8_handler = atomic_load(&h_code) != 0 && atomic_load(&h_on_target);
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    s8_blocked = sigismember(&cur, SIGUSR2);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr2;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    sigset_t all;
    sigemptyset(&all);
    sigaddset(&all, SIGUSR1);
    sigaddset(&all, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* main never takes them */

    REQUIRE(pthread_create(&target, NULL, victim, NULL) == 0, "pthread_create");
    int ok5 = 0;
    for (int i = 0; i < ROUNDS; i++) {
        wait_ack(1);
        CHECK(pthread_kill(target, SIGUSR1) == 0, "pthread_kill");
        atomic_store(&stage, 1);
        wait_ack(2);
        if (i % 2)
            usleep(1000); /* sometimes surely in the wait, sometimes just entering */
        union sigval v = {.sival_int = 42};
        CHECK(pthread_sigqueue(target, SIGUSR2, v) == 0, "sigqueue USR2");
        wait_ack(3);
        for (int k = 1; k <= 3; k++) {
            v.sival_int = k;
            CHECK(pthread_sigqueue(target, SIGRTMIN, v) == 0, "sigqueue RTMIN");
        }
        atomic_store(&stage, 3);
        wait_ack(4);
        v.sival_int = 5;
        CHECK(pthread_sigqueue(target, SIGUSR1, v) == 0, "sigqueue USR1 a");
        CHECK(pthread_sigqueue(target, SIGUSR1, v) == 0, "sigqueue USR1 b");
        atomic_store(&stage, 4);
        wait_ack(5);
        v.sival_int = 7;
        CHECK(pthread_sigqueue(target, SIGUSR2, v) == 0, "sigqueue USR2 handler");
        wait_ack(6);
        ok5 += atomic_load(&h_code) == SI_QUEUE && atomic_load(&h_value) == 7 &&
               atomic_load(&h_on_target);
        atomic_store(&ack, 0);
        atomic_store(&stage, 6);
    }
    pthread_join(target, NULL);

    int ok[5] = {0};
    for (int i = 0; i < ROUNDS; i++) {
        struct result *r = &res[i];
        ok[0] += r->p1_sig == SIGUSR1 && r->p1_pending == 1;
        ok[1] += r->p2_sig == SIGUSR2 && r->p2_code == SI_QUEUE && r->p2_value == 42;
        ok[2] += r->p3_values[0] == 1 && r->p3_values[1] == 2 && r->p3_values[2] == 3;
        ok[3] += r->p4_first == SIGUSR1 && r->p4_second == -1 && r->p4_errno == EAGAIN;
        if (i == 0)
            printf("round 0: sigwait %d; sigwaitinfo %d code %d value %d; rt values %d %d %d; "
                   "merged %d then %d (%s)\n",
                   r->p1_sig, r->p2_sig, r->p2_code, r->p2_value, r->p3_values[0],
                   r->p3_values[1], r->p3_values[2], r->p4_first, r->p4_second,
                   r->p4_second < 0 ? strerrorname_np(r->p4_errno) : "-");
    }
    ok[4] = ok5;
    const char *names[5] = {"1. pthread_kill, sigpending shows it, then sigwait", "2. sigqueue into sigwaitinfo",
                            "3. three real-time values in order", "4. standard signal merged",
                            "5. handler sees SI_QUEUE and the value"};
    for (int k = 0; k < 5; k++) {
        printf("%s: %d of %d\n", names[k], ok[k], ROUNDS);
        CHECK(ok[k] == ROUNDS, "%s: %d of %d", names[k], ok[k], ROUNDS);
    }

    sigset_t w;
    sigemptyset(&w);
    sigaddset(&w, SIGUSR1);
    struct timespec ts = {0, 30 * 1000 * 1000};
    siginfo_t si;
    int r6 = sigtimedwait(&w, &si, &ts);
    int e6 = errno;
    printf("6. sigtimedwait with nothing sent: %d %s\n", r6, r6 < 0 ? strerrorname_np(e6) : "");
    CHECK(r6 == -1 && e6 == EAGAIN, "sigtimedwait: %d %d", r6, e6);

    /* 8, 9, 10, 11 */
    static int hows[4] = {0, 1, 2, 3};
    for (int k = 0; k < 4; k++) {
        atomic_store(&ack, 0);
        atomic_store(&stage, 0);
        REQUIRE(pthread_create(&target, NULL, suspender, &hows[k]) == 0, "pthread_create");
        while (atomic_load(&ack) != (k == 3 ? 9 : 8))
            sched_yield();
        if (k == 3)
            usleep(50 * 1000); /* into the sleep */
        CHECK(pthread_kill(target, SIGUSR2) == 0, "pthread_kill USR2");
        atomic_store(&stage, 8);
        pthread_join(target, NULL);
        printf("%s: returns %d (%s), handler on the thread %d, blocked again after %d\n",
               k == 3   ? "11. pthread_kill of a blocked signal during a 200 ms nanosleep (0, EINTR: slept it whole; 1: still pending)"
               : k == 2 ? "10. pthread_kill then pthread_sigmask(SIG_UNBLOCK) (-1: ran before it returned)"
               : k == 1 ? "9. pthread_kill then ppoll with an empty mask"
                        : "8. pthread_kill then sigsuspend",
               s8_ret, s8_errno == EINTR ? "EINTR" : "?", s8_handler, s8_blocked);
        CHECK(s8_ret == (k == 3 ? 0 : -1) && s8_errno == EINTR && s8_handler == 1 &&
                  s8_blocked == 1,
              "probe %d: %d %d %d %d", 8 + k, s8_ret, s8_errno, s8_handler, s8_blocked);
    }

    union sigval v = {.sival_int = 0};
    pthread_t self = pthread_self();
    int r7 = pthread_sigqueue(self, SIGRTMIN - 2, v); /* glibc's SIGCANCEL */
    printf("7. pthread_sigqueue of the cancellation signal: %s\n", strerrorname_np(r7));
    CHECK(r7 == EINVAL, "sigqueue SIGCANCEL: %d", r7);
    return probe_exit("sigwait_thread");
}
