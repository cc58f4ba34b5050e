/* sigwait_preempted — a pthread_sigqueue sent while the target is on its
 * way into sigwaitinfo, after a long stretch of work.
 *
 * Each round the target runs about 15 ms inside libc (memset of a large
 * buffer: code a preemption signal may not interrupt, so the runtime can
 * only switch the thread at its next call), announces that it is about to
 * wait, and calls sigwaitinfo for SIGUSR2, which it blocks. Main, which has
 * been waiting for its turn to run, sends SIGUSR2 with the round's value as
 * soon as it sees the announcement. Natively the signal is pending in the
 * kernel for the thread and sigwaitinfo returns it. Under bobbin the thread
 * is switched away at the preemption point of sigwaitinfo itself (its time
 * slice is over) and main's signal arrives while it waits for a processor:
 * a runtime that looked for pending signals before that point and waited in
 * the kernel after it slept for ever (the test's alarm). Every round must
 * end with SIGUSR2, SI_QUEUE and the round's value.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

#define ROUNDS 20
#define BUF (8u << 20)

static atomic_int round_no = -1, sent = -1;
static int got_sig[ROUNDS], got_code[ROUNDS], got_value[ROUNDS];
static unsigned char *buf;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *target(void *arg)
{
    (void)arg;
    sigset_t w;
    sigemptyset(&w);
    sigaddset(&w, SIGUSR2);
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ms();
        unsigned k = 0;
        while (now_ms() - t0 < 15)
            memset(buf, (int)(k++ & 0xff), BUF);
        atomic_store(&round_no, r); /* about to wait */
        siginfo_t si;
        memset(&si, 0, sizeof si);
        got_sig[r] = sigwaitinfo(&w, &si);
        got_code[r] = si.si_code;
        got_value[r] = si.si_value.sival_int;
        while (atomic_load(&sent) != r) /* main is done with this round */
            sched_yield();
    }
    return NULL;
}

int main(void)
{
    alarm(60);
    buf = malloc(BUF);
    REQUIRE(buf != NULL, "malloc");
    sigset_t w;
    sigemptyset(&w);
    sigaddset(&w, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &w, NULL); /* the target inherits it */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, target, NULL) == 0, "pthread_create");
    for (int r = 0; r < ROUNDS; r++) {
        while (atomic_load(&round_no) != r)
            sched_yield();
        union sigval v = {.sival_int = 1000 + r};
        CHECK(pthread_sigqueue(t, SIGUSR2, v) == 0, "pthread_sigqueue");
        atomic_store(&sent, r);
    }
    REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
    int ok = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int good = got_sig[r] == SIGUSR2 && got_code[r] == SI_QUEUE && got_value[r] == 1000 + r;
        CHECK(good, "round %d: signal %d, code %d, value %d", r, got_sig[r], got_code[r],
              got_value[r]);
        ok += good;
    }
    printf("rounds whose sigwaitinfo returned SIGUSR2 with SI_QUEUE and its value: %d of %d\n",
           ok, ROUNDS);
    free(buf);
    return probe_exit("sigwait_preempted");
}
