/* signalfd_thread — a thread's own signalfd shows the signals sent to that
 * thread (pthread_kill, pthread_sigqueue), and only those and the process's.
 *
 * A green thread has no kernel thread of its own: such a signal, blocked by
 * the thread, waited in bobbin, and the thread's signalfd (which shows what
 * is pending for the OS thread that reads it) never showed it: its poll
 * timed out, its read waited for ever.
 *
 * A reader thread blocks SIGUSR1 and SIGUSR2 and makes a signalfd of both.
 * ROUNDS times, in turn: main sends it SIGUSR1 before it polls (poll, then
 * read); SIGUSR2 while it polls; a pthread_sigqueue value before it reads
 * (the value and SI_QUEUE must come through); SIGUSR1 while it is blocked
 * in read; SIGUSR2 before a select. A second thread that blocks SIGUSR1 is
 * sent one: the reader's signalfd must not show it (a 50 ms poll times
 * out) and the second thread's sigwait takes it. Last, kill() to the
 * process reaches the reader's signalfd (SI_USER). Every result is
 * counted; the counts are printed.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "signalfd_thread"
#include "probe.h"

enum { ROUNDS = 40 };

static pthread_barrier_t step;
static pthread_t reader_th, other_th;
static int sfd;
static int good[8];

static void sync_step(void)
{
    pthread_barrier_wait(&step);
}

static void nap_ms(int ms)
{
    struct timespec t = { 0, ms * 1000000L };
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

/* one signal from the signalfd: its number, code and int value */
static int take(int *code, int *value)
{
    struct signalfd_siginfo si;
    ssize_t n = read(sfd, &si, sizeof si);
    if (n != (ssize_t)sizeof si)
        return -1;
    *code = si.ssi_code;
    *value = si.ssi_int;
    return (int)si.ssi_signo;
}

static void *reader(void *arg)
{
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    sfd = signalfd(-1, &set, 0);
    REQUIRE(sfd >= 0, "signalfd: %s", strerror(errno));
    sync_step();
    int code, value;
    for (int r = 0; r < ROUNDS; r++) {
        /* 0: sent before the poll */
        sync_step();
        struct pollfd p = { sfd, POLLIN, 0 };
        good[0] += poll(&p, 1, 5000) == 1 && take(&code, &value) == SIGUSR1 && code == SI_TKILL;
        /* 1: sent while it polls */
        sync_step();
        good[1] += poll(&p, 1, 5000) == 1 && take(&code, &value) == SIGUSR2 && code == SI_TKILL;
        /* 2: a queued value before the read */
        sync_step();
        sync_step();
        good[2] += take(&code, &value) == SIGUSR1 && code == SI_QUEUE && value == r + 100;
        /* 3: sent while it is blocked in read */
        sync_step();
        good[3] += take(&code, &value) == SIGUSR1 && code == SI_TKILL;
        /* 4: before a select */
        sync_step();
        sync_step();
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(sfd, &rs);
        struct timeval tv = { 5, 0 };
        good[4] += select(sfd + 1, &rs, NULL, NULL, &tv) == 1 && take(&code, &value) == SIGUSR2;
        /* 5: another thread's signal is not ours */
        sync_step();
        sync_step();
        good[5] += poll(&p, 1, 50) == 0;
        sync_step();
    }
    /* 7: the process's */
    sync_step();
    good[7] += take(&code, &value) == SIGUSR2 && code == SI_USER;
    return NULL;
}

static void *other(void *arg)
{
    (void)arg;
    sigset_t set, both;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    both = set;
    sigaddset(&both, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &both, NULL);
    sync_step();
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < 9; k++)
            sync_step();
        int sig = 0;
        good[6] += sigwait(&set, &sig) == 0 && sig == SIGUSR1;
        sync_step();
    }
    sync_step();
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(50);
    current_probe = "rounds";
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* kill() below must reach the reader's fd */
    pthread_barrier_init(&step, NULL, 3);
    REQUIRE(pthread_create(&reader_th, NULL, reader, NULL) == 0, "pthread_create");
    REQUIRE(pthread_create(&other_th, NULL, other, NULL) == 0, "pthread_create");
    sync_step();
    for (int r = 0; r < ROUNDS; r++) {
        pthread_kill(reader_th, SIGUSR1);
        sync_step(); /* 0 */
        sync_step(); /* 1 */
        nap_ms(5);
        pthread_kill(reader_th, SIGUSR2);
        sync_step(); /* 2 */
        pthread_sigqueue(reader_th, SIGUSR1, (union sigval){ .sival_int = r + 100 });
        sync_step();
        sync_step(); /* 3 */
        nap_ms(5);
        pthread_kill(reader_th, SIGUSR1);
        sync_step(); /* 4 */
        pthread_kill(reader_th, SIGUSR2);
        sync_step();
        sync_step(); /* 5 */
        pthread_kill(other_th, SIGUSR1);
        sync_step();
        sync_step();
    }
    current_probe = "process";
    kill(getpid(), SIGUSR2);
    sync_step();
    pthread_join(reader_th, NULL);
    pthread_join(other_th, NULL);
    static const char *what[8] = {
        "sent before poll", "sent during poll", "queued value before read", "sent during read",
        "sent before select", "another thread's not shown", "other thread's sigwait", "process signal",
    };
    for (int i = 0; i < 8; i++) {
        int want = i == 7 ? 1 : ROUNDS;
        printf("%s: %d of %d\n", what[i], good[i], want);
        CHECK(good[i] == want, "%s: %d of %d", what[i], good[i], want);
    }
    return probe_exit(PROBE_NAME);
}
