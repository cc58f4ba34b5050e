/* process_signals — signals sent to the whole process (kill(getpid()), alarm,
 * ualarm) reach the thread the kernel would give them to, interrupt what that
 * thread waits in, and stay pending while every thread blocks them.
 *
 * 1. ualarm(50 ms), then main blocks in read() on an empty pipe: the SIGALRM
 *    handler (no SA_RESTART) runs and read fails with EINTR. (Under bobbin the
 *    signal used to run its handler on an idle OS thread while the read went on
 *    waiting for ever: a program's alarm() timeout never fired.)
 * 2. ualarm(50 ms), then nanosleep(5 s): -1/EINTR, at least 4 s left.
 * 3. Four threads parked in a condvar; main blocks SIGUSR1 only now, 2,000
 *    times: kill(getpid(), SIGUSR1) must leave it pending (sigpending shows it)
 *    with the handler not run, and unblocking must run the handler once and
 *    leave nothing pending. (Idle OS threads with an older mask used to take it.)
 * 4. Only a worker parked in sem_wait takes SIGUSR2 (main and three others block
 *    it): the handler runs on that worker (pthread_self compared), and its
 *    sem_wait fails with EINTR; 200 rounds.
 * 5. The same with SIGUSR1 and SA_RESTART, the worker in read() on a pipe: the
 *    handler runs on it, and the read goes on and returns the byte main writes
 *    once it saw the handler run; 200 rounds.
 *
 * 6. pthread_kill of an ignored signal (SIG_IGN) to a thread in a 200 ms
 *    nanosleep: the sleep returns 0 and lasted the whole 200 ms, as natively
 *    (bobbin used to end it early, returning 0 as if it had slept).
 *
 * 7. A forked child, the only thread of its process (under bobbin it waits in
 *    the kernel, not on the poller): ualarm(50 ms), a 30 ms poll on an empty
 *    pipe returns 0, a read on it fails with EINTR, a select without timeout
 *    returns it readable once the parent writes; then it reads the 4 MiB its
 *    parent writes in odd-sized pieces and exits with a status that says
 *    whether the bytes' checksum matched.
 *
 * A watchdog thread (not alarm: SIGALRM is under test) ends a hang with exit 1
 * naming the probe. stdout: one line per probe.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_NAME "process_signals"
#include "probe.h"

static atomic_int alarms, usr1s, usr2s;
static pthread_t usr2_thread, usr1_thread;
static atomic_int usr2_wrong, usr1_wrong;

static void on_alarm_sig(int sig)
{
    (void)sig;
    atomic_fetch_add(&alarms, 1);
}

static pthread_t expect_usr1; /* 0: any thread */
static void on_usr1(int sig)
{
    (void)sig;
    if (expect_usr1 && !pthread_equal(pthread_self(), expect_usr1))
        atomic_fetch_add(&usr1_wrong, 1);
    atomic_fetch_add(&usr1s, 1);
}

static void on_usr2(int sig)
{
    (void)sig;
    if (!pthread_equal(pthread_self(), usr2_thread))
        atomic_fetch_add(&usr2_wrong, 1);
    atomic_fetch_add(&usr2s, 1);
}

static void handle(int sig, void (*fn)(int), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(sig, &sa, NULL) == 0, "sigaction %d", sig);
}

static void block(int how, int sig)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    REQUIRE(pthread_sigmask(how, &s, NULL) == 0, "pthread_sigmask");
}

static bool is_pending(int sig)
{
    sigset_t s;
    REQUIRE(sigpending(&s) == 0, "sigpending");
    return sigismember(&s, sig);
}

static void *watchdog(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* the probes' signals are not for it */
    struct timespec ts = {60, 0};
    while (nanosleep(&ts, &ts) != 0)
        ;
    on_alarm(SIGALRM); /* probe.h: names the probe, exits 1 */
    return NULL;
}

/* parked threads: idle OS threads under bobbin */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stop;
static void *parked(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!stop)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static sem_t sem;
static atomic_int usr2_eintr;
static atomic_int round_ready;
static void *usr2_taker(void *arg)
{
    int rounds = (int)(intptr_t)arg;
    block(SIG_UNBLOCK, SIGUSR2);
    for (int i = 0; i < rounds; i++) {
        atomic_store(&round_ready, 1);
        int r = sem_wait(&sem);
        if (r != 0 && errno == EINTR)
            atomic_fetch_add(&usr2_eintr, 1);
        else if (r == 0)
            CHECK(0, "sem_wait returned 0 with nothing posted");
    }
    return NULL;
}

static int usr1_pipe[2];
static atomic_int usr1_reads;
static void *usr1_reader(void *arg)
{
    int rounds = (int)(intptr_t)arg;
    block(SIG_UNBLOCK, SIGUSR1);
    for (int i = 0; i < rounds; i++) {
        char c;
        atomic_store(&round_ready, 1);
        ssize_t n = read(usr1_pipe[0], &c, 1);
        CHECK(n == 1, "read with SA_RESTART returned %zd (%s)", n, n < 0 ? strerror(errno) : "");
        if (n == 1)
            atomic_fetch_add(&usr1_reads, 1);
    }
    return NULL;
}

static void *ignored_sleeper(void *arg)
{
    (void)arg;
    struct timespec t0, t1, ts = {0, 200000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    atomic_store(&round_ready, 1);
    int r = nanosleep(&ts, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long ns = (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    CHECK(r == 0, "nanosleep returned %d (%s)", r, strerror(errno));
    CHECK(ns >= 200000000LL, "nanosleep of 200 ms returned after %lld ns", ns);
    return (void *)(intptr_t)(r == 0 && ns >= 200000000LL);
}

static void wait_ready(void)
{
    while (!atomic_exchange(&round_ready, 0))
        sched_yield();
    struct timespec ts = {0, 2000000}; /* let it get into its wait */
    nanosleep(&ts, NULL);
}

int main(void)
{
    pthread_t wd;
    REQUIRE(pthread_create(&wd, NULL, watchdog, NULL) == 0, "watchdog");
    pthread_detach(wd);

    /* 1: alarm and a read */
    current_probe = "ualarm + read";
    handle(SIGALRM, on_alarm_sig, 0);
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    ualarm(50000, 0);
    char c;
    ssize_t n = read(p[0], &c, 1);
    int e = errno;
    CHECK(n == -1 && e == EINTR, "read: %zd, %s", n, strerror(e));
    CHECK(atomic_load(&alarms) == 1, "SIGALRM handler ran %d times", atomic_load(&alarms));
    printf("ualarm + read: %s, handler ran %d time(s)\n", n == -1 && e == EINTR ? "EINTR" : "no EINTR",
           atomic_load(&alarms));

    /* 2: alarm and a sleep */
    current_probe = "ualarm + nanosleep";
    struct timespec ts = {5, 0}, left = {0, 0};
    ualarm(50000, 0);
    int r = nanosleep(&ts, &left);
    e = errno;
    CHECK(r == -1 && e == EINTR, "nanosleep: %d, %s", r, strerror(e));
    CHECK(left.tv_sec >= 4, "nanosleep left %ld s", (long)left.tv_sec);
    printf("ualarm + nanosleep: %s, at least 4 s left: %s\n", r == -1 && e == EINTR ? "EINTR" : "no EINTR",
           left.tv_sec >= 4 ? "yes" : "no");

    /* 3: blocked by every thread: pending */
    current_probe = "blocked: pending";
    handle(SIGUSR1, on_usr1, 0);
    /* the parked threads block both (inherited); main takes SIGUSR1 again
     * while their OS threads go idle, and blocks it only in the rounds */
    block(SIG_BLOCK, SIGUSR1);
    block(SIG_BLOCK, SIGUSR2);
    pthread_t pk[4];
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&pk[i], NULL, parked, NULL) == 0, "parked");
    block(SIG_UNBLOCK, SIGUSR1);
    ts = (struct timespec){0, 20000000};
    nanosleep(&ts, NULL); /* they park; their OS threads go idle */
    int good = 0;
    for (int i = 0; i < 2000; i++) {
        int before = atomic_load(&usr1s);
        block(SIG_BLOCK, SIGUSR1);
        kill(getpid(), SIGUSR1);
        bool pend = is_pending(SIGUSR1);
        bool early = atomic_load(&usr1s) != before;
        block(SIG_UNBLOCK, SIGUSR1);
        bool ran = atomic_load(&usr1s) == before + 1;
        bool still = is_pending(SIGUSR1);
        if (pend && !early && ran && !still)
            good++;
        else
            CHECK(0, "round %d: pending %d, handler before unblock %d, after %d, still pending %d", i,
                  pend, early, ran, still);
    }
    printf("blocked: pending: %d of 2000 rounds right\n", good);

    /* 4: only one thread takes it: there, and its sem_wait ends with EINTR */
    current_probe = "one taker: sem_wait";
    handle(SIGUSR2, on_usr2, 0);
    sem_init(&sem, 0, 0);
    REQUIRE(pthread_create(&usr2_thread, NULL, usr2_taker, (void *)200) == 0, "taker");
    for (int i = 0; i < 200; i++) {
        wait_ready();
        kill(getpid(), SIGUSR2);
    }
    pthread_join(usr2_thread, NULL);
    CHECK(atomic_load(&usr2s) == 200, "SIGUSR2 handler ran %d times", atomic_load(&usr2s));
    CHECK(atomic_load(&usr2_wrong) == 0, "SIGUSR2 handler ran on another thread %d times",
          atomic_load(&usr2_wrong));
    CHECK(atomic_load(&usr2_eintr) == 200, "sem_wait EINTR %d times", atomic_load(&usr2_eintr));
    printf("one taker: sem_wait: %d handled on it, %d EINTR\n",
           atomic_load(&usr2s) - atomic_load(&usr2_wrong), atomic_load(&usr2_eintr));

    /* 5: SA_RESTART: the read goes on */
    current_probe = "one taker: read, SA_RESTART";
    block(SIG_BLOCK, SIGUSR1); /* main, and the reader made now, unblocks it */
    REQUIRE(pipe(usr1_pipe) == 0, "pipe");
    handle(SIGUSR1, on_usr1, SA_RESTART);
    int base = atomic_load(&usr1s);
    REQUIRE(pthread_create(&usr1_thread, NULL, usr1_reader, (void *)200) == 0, "reader");
    expect_usr1 = usr1_thread;
    for (int i = 0; i < 200; i++) {
        wait_ready();
        kill(getpid(), SIGUSR1);
        while (atomic_load(&usr1s) < base + i + 1)
            sched_yield();
        CHECK(write(usr1_pipe[1], "x", 1) == 1, "write");
    }
    pthread_join(usr1_thread, NULL);
    CHECK(atomic_load(&usr1_wrong) == 0, "SIGUSR1 handler ran on another thread %d times",
          atomic_load(&usr1_wrong));
    printf("one taker: read, SA_RESTART: %d handled on it, %d reads whole\n",
           atomic_load(&usr1s) - base - atomic_load(&usr1_wrong), atomic_load(&usr1_reads));

    /* 6: an ignored signal does not cut a sleep short */
    current_probe = "ignored signal + nanosleep";
    signal(SIGWINCH, SIG_IGN);
    pthread_t sl;
    atomic_store(&round_ready, 0);
    REQUIRE(pthread_create(&sl, NULL, ignored_sleeper, NULL) == 0, "sleeper");
    while (!atomic_load(&round_ready))
        sched_yield();
    ts = (struct timespec){0, 20000000};
    nanosleep(&ts, NULL);
    CHECK(pthread_kill(sl, SIGWINCH) == 0, "pthread_kill");
    void *slept_whole = NULL;
    pthread_join(sl, &slept_whole);
    printf("ignored signal + nanosleep: returned 0 after the whole 200 ms: %s\n",
           slept_whole ? "yes" : "no");

    /* 7: a one-thread child */
    current_probe = "one-thread child: read";
    int down[2];
    REQUIRE(pipe(down) == 0, "pipe");
    pid_t child = fork();
    REQUIRE(child >= 0, "fork");
    if (child == 0) {
        close(down[1]);
        atomic_store(&alarms, 0);
        ualarm(50000, 0);
        struct pollfd pf = {down[0], POLLIN, 0};
        int pr = poll(&pf, 1, 30); /* nothing comes for 150 ms */
        char b;
        ssize_t k = read(down[0], &b, 1);
        int ok = pr == 0 && k == -1 && errno == EINTR && atomic_load(&alarms) == 1;
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(down[0], &rs);
        ok = ok && select(down[0] + 1, &rs, NULL, NULL, NULL) == 1 && FD_ISSET(down[0], &rs);
        unsigned long long sum = 0, got = 0;
        static unsigned char buf[65536];
        ssize_t m;
        while ((m = read(down[0], buf, sizeof buf)) > 0 || (m < 0 && errno == EINTR)) {
            for (ssize_t j = 0; j < m; j++)
                sum = sum * 31 + buf[j];
            if (m > 0)
                got += (unsigned long long)m;
        }
        _exit(!ok ? 2 : got != (4u << 20) ? 3 : (sum & 0xff) == 0 ? 4 : 10 + (int)(sum % 100));
    }
    close(down[0]);
    ts = (struct timespec){0, 150000000};
    nanosleep(&ts, NULL); /* after the child's alarm */
    unsigned long long sum = 0;
    static unsigned char out[4u << 20];
    for (size_t j = 0; j < sizeof out; j++)
        out[j] = (unsigned char)(j * 7 + j / 4099);
    for (size_t j = 0; j < sizeof out; j++)
        sum = sum * 31 + out[j];
    for (size_t off = 0; off < sizeof out;) {
        size_t piece = 1 + (off * 13) % 7001;
        if (piece > sizeof out - off)
            piece = sizeof out - off;
        ssize_t w = write(down[1], out + off, piece);
        REQUIRE(w > 0, "write to the child");
        off += (size_t)w;
    }
    close(down[1]);
    int st = 0;
    REQUIRE(waitpid(child, &st, 0) == child, "waitpid");
    int want = (sum & 0xff) == 0 ? 4 : 10 + (int)(sum % 100);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == want, "child status %#x, want exit %d", st, want);
    printf("one-thread child: EINTR, then 4 MiB read whole: %s\n",
           WIFEXITED(st) && WEXITSTATUS(st) == want ? "yes" : "no");

    pthread_mutex_lock(&mu);
    stop = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < 4; i++)
        pthread_join(pk[i], NULL);
    return probe_exit(PROBE_NAME);
}
