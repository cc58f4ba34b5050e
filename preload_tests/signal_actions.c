/* signal_actions — the program's signal actions, as it set them, and
 * handlers that wait.
 *
 * Part 1, actions read back: sigaction, signal, sysv_signal, siginterrupt
 * and sigset install handlers; reading each action back gives the handler,
 * the flags (SA_SIGINFO, SA_RESTART, SA_RESETHAND, SA_NODEFER) and the mask
 * the program asked for, and the old action each call returns is the one
 * installed before. A handler that asked for SA_SIGINFO gets its siginfo and
 * a context; one that did not is called with the signal number alone.
 *
 * Part 2, handlers that wait: a timer's SIGALRM (process-directed, every
 * 300 µs) lands on whatever thread runs, while three threads spin in
 * call-free loops (preempted by the runtime's own signal, if it has one)
 * and a fourth sleeps and wakes. Its handler sleeps 20 µs, so it waits in
 * the middle of the thread it interrupted, and may go on elsewhere. A CPU
 * timer's SIGPROF (SA_ONSTACK) meanwhile checks that nothing overwrites its
 * stack while it runs. Checks: the spinners' sums, the sleeper's count,
 * every handler run ended (waited for), no SIGPROF stack overwritten. Under a
 * runtime whose handler that waited came back on another OS thread and
 * gave that thread the first one's alternate signal stack (two OS threads
 * then share one), this crashes, or SIGPROF finds its stack overwritten.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

/* siginterrupt and sigset are old, and still in use: probed as they are */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static atomic_int plain_runs, info_runs, info_ok;

static void plain(int sig)
{
    if (sig == SIGUSR1 || sig == SIGUSR2)
        atomic_fetch_add(&plain_runs, 1);
}

static void other(int sig)
{
    (void)sig;
}

static void with_info(int sig, siginfo_t *si, void *uc)
{
    atomic_fetch_add(&info_runs, 1);
    if (si != NULL && si->si_signo == sig && uc != NULL)
        atomic_fetch_add(&info_ok, 1);
}

static struct sigaction read_back(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    CHECK(sigaction(sig, NULL, &sa) == 0, "sigaction(%d, NULL, &old): %s", sig, strerror(errno));
    return sa;
}

static int flags_of(const struct sigaction *sa)
{
    return sa->sa_flags & (SA_SIGINFO | SA_RESTART | SA_RESETHAND | SA_NODEFER | SA_ONSTACK);
}

static void part1(void)
{
    /* sigaction with SA_SIGINFO and a mask */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = with_info;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    CHECK(sigaction(SIGUSR1, &sa, &old) == 0, "sigaction: %s", strerror(errno));
    CHECK(old.sa_handler == SIG_DFL, "first old action is not SIG_DFL");
    struct sigaction b = read_back(SIGUSR1);
    CHECK(b.sa_sigaction == with_info, "read back: not the SA_SIGINFO handler");
    CHECK(flags_of(&b) == (SA_SIGINFO | SA_RESTART), "read back flags %#x", flags_of(&b));
    CHECK(sigismember(&b.sa_mask, SIGUSR2) == 1 && sigismember(&b.sa_mask, SIGTERM) == 0,
          "read back mask");
    raise(SIGUSR1);
    CHECK(atomic_load(&info_runs) == 1 && atomic_load(&info_ok) == 1,
          "SA_SIGINFO handler: %d runs, %d with siginfo and context", atomic_load(&info_runs),
          atomic_load(&info_ok));

    /* a plain handler replaces it: the old action is the SA_SIGINFO one */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = plain;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, &old) == 0, "sigaction: %s", strerror(errno));
    CHECK(old.sa_sigaction == with_info && flags_of(&old) == (SA_SIGINFO | SA_RESTART),
          "old action: handler %s, flags %#x",
          old.sa_sigaction == with_info ? "right" : "wrong", flags_of(&old));
    b = read_back(SIGUSR1);
    CHECK(b.sa_handler == plain && flags_of(&b) == 0, "read back plain: flags %#x",
          flags_of(&b));
    raise(SIGUSR1);
    CHECK(atomic_load(&plain_runs) == 1, "plain handler ran %d times", atomic_load(&plain_runs));

    /* signal(): BSD semantics, restarting, its own signal blocked */
    CHECK(signal(SIGUSR1, other) == plain, "signal() did not return the previous handler");
    b = read_back(SIGUSR1);
    CHECK(b.sa_handler == other && flags_of(&b) == SA_RESTART, "signal(): flags %#x",
          flags_of(&b));
    CHECK(sigismember(&b.sa_mask, SIGUSR1) == 1, "signal(): own signal not in the mask");
    /* siginterrupt turns SA_RESTART off, for this action and signal()'s next */
    CHECK(siginterrupt(SIGUSR1, 1) == 0, "siginterrupt: %s", strerror(errno));
    b = read_back(SIGUSR1);
    CHECK(b.sa_handler == other && flags_of(&b) == 0, "siginterrupt(1): flags %#x",
          flags_of(&b));
    CHECK(signal(SIGUSR1, plain) == other, "signal() after siginterrupt");
    b = read_back(SIGUSR1);
    CHECK(b.sa_handler == plain && flags_of(&b) == 0, "signal() after siginterrupt: flags %#x",
          flags_of(&b));
    CHECK(siginterrupt(SIGUSR1, 0) == 0, "siginterrupt(0): %s", strerror(errno));
    b = read_back(SIGUSR1);
    CHECK(flags_of(&b) == SA_RESTART, "siginterrupt(0): flags %#x", flags_of(&b));
    CHECK(signal(SIGUSR1, SIG_ERR) == SIG_ERR && errno == EINVAL, "signal(SIG_ERR)");
    CHECK(signal(0, plain) == SIG_ERR && errno == EINVAL, "signal(0)");
    CHECK(signal(65, plain) == SIG_ERR && errno == EINVAL, "signal(65)");

    /* sysv_signal: reset at delivery, not blocked while it runs */
    CHECK(sysv_signal(SIGUSR2, plain) == SIG_DFL, "sysv_signal's old handler");
    b = read_back(SIGUSR2);
    CHECK(b.sa_handler == plain && (flags_of(&b) & (SA_RESETHAND | SA_NODEFER)) ==
                                       (SA_RESETHAND | SA_NODEFER),
          "sysv_signal: flags %#x", flags_of(&b));
    int before = atomic_load(&plain_runs);
    raise(SIGUSR2);
    CHECK(atomic_load(&plain_runs) == before + 1, "sysv_signal handler did not run");
    b = read_back(SIGUSR2);
    CHECK(b.sa_handler == SIG_DFL, "sysv_signal: action not reset at delivery");

    /* sigset: SIG_HOLD blocks, a handler unblocks and says it was held */
    CHECK(sigset(SIGUSR2, SIG_HOLD) == SIG_DFL, "sigset(SIG_HOLD): previous disposition");
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    CHECK(sigismember(&cur, SIGUSR2) == 1, "sigset(SIG_HOLD) did not block");
    CHECK(sigset(SIGUSR2, plain) == SIG_HOLD, "sigset(handler) after SIG_HOLD");
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    CHECK(sigismember(&cur, SIGUSR2) == 0, "sigset(handler) did not unblock");
    b = read_back(SIGUSR2);
    CHECK(b.sa_handler == plain && flags_of(&b) == 0, "sigset: flags %#x", flags_of(&b));
    CHECK(sigset(SIGUSR2, SIG_DFL) == plain, "sigset(SIG_DFL): previous handler");

    /* glibc's own signals stay refused */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = plain;
    CHECK(sigaction(32, &sa, NULL) == -1 && errno == EINVAL, "sigaction(32) accepted");
    CHECK(sigaction(SIGKILL, &sa, NULL) == -1 && errno == EINVAL, "sigaction(SIGKILL) accepted");
    signal(SIGUSR1, SIG_DFL);
    printf("actions read back as set: sigaction, signal, siginterrupt, sysv_signal, sigset\n");
}

/* ---- part 2 ---- */

#define SPIN_ITERS 1800000000L
static atomic_long handler_in, handler_out;
static atomic_int stop;

static void on_alarm(int sig)
{
    (void)sig;
    int e = errno;
    atomic_fetch_add(&handler_in, 1);
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
    atomic_fetch_add(&handler_out, 1);
    errno = e;
}

static void *spinner(void *arg)
{
    long seed = (long)(intptr_t)arg;
    volatile long sum = 0;
    for (long i = 0; i < SPIN_ITERS / 3; i++)
        sum += (i ^ seed) & 7;
    return (void *)(intptr_t)sum;
}

/* SIGPROF, on the alternate signal stack where there is one: fills a
 * buffer on its stack, spins, and checks nothing else wrote it (another
 * thread's handler on the same alternate stack would) */
static atomic_long prof_runs, prof_bad;
static atomic_uint prof_tag;

static void on_prof(int sig)
{
    (void)sig;
    unsigned tag = atomic_fetch_add(&prof_tag, 1) * 2654435761u;
    volatile unsigned buf[512];
    for (int i = 0; i < 512; i++)
        buf[i] = tag + (unsigned)i;
    for (volatile int k = 0; k < 20000; k++)
        ;
    for (int i = 0; i < 512; i++)
        if (buf[i] != tag + (unsigned)i) {
            atomic_fetch_add(&prof_bad, 1);
            break;
        }
    atomic_fetch_add(&prof_runs, 1);
}

static void *sleeper(void *arg)
{
    (void)arg;
    long n = 0;
    while (!atomic_load(&stop)) {
        struct timespec ts = {0, 100000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        n++;
    }
    return (void *)(intptr_t)n;
}

static void part2(void)
{
    REQUIRE(probe_on_signal(SIGALRM, on_alarm, SA_RESTART) == 0, "sigaction(SIGALRM)");
    pthread_t sp[3], sl;
    REQUIRE(pthread_create(&sl, NULL, sleeper, NULL) == 0, "pthread_create");
    struct itimerval it = {{0, 300}, {0, 300}};
    setitimer(ITIMER_REAL, &it, NULL);
    REQUIRE(probe_on_signal(SIGPROF, on_prof, SA_RESTART | SA_ONSTACK) == 0,
            "sigaction(SIGPROF)");
    struct itimerval pt = {{0, 200}, {0, 200}};
    setitimer(ITIMER_PROF, &pt, NULL);
    for (long i = 0; i < 3; i++)
        REQUIRE(pthread_create(&sp[i], NULL, spinner, (void *)(intptr_t)(i + 1)) == 0,
                "pthread_create");
    long got[3];
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(sp[i], &r);
        got[i] = (long)(intptr_t)r;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    setitimer(ITIMER_PROF, &off, NULL);
    /* a signal still pending is dropped; a handler still running is
     * waited for: the counts are final after that */
    signal(SIGALRM, SIG_IGN);
    signal(SIGPROF, SIG_IGN);
    while (atomic_load(&handler_in) != atomic_load(&handler_out)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&stop, 1);
    void *r;
    pthread_join(sl, &r);
    for (int i = 0; i < 3; i++) {
        long seed = i + 1, want = 0;
        for (long k = 0; k < SPIN_ITERS / 3; k++)
            want += (k ^ seed) & 7;
        CHECK(got[i] == want, "spinner %d sum %ld, want %ld", i, got[i], want);
    }
    CHECK((long)(intptr_t)r > 0, "the sleeper never woke");
    CHECK(atomic_load(&handler_in) > 0, "no SIGALRM was handled");
    /* (every handler run ended: one that never came back hangs the wait
     * above, which the harness's time-out fails) */
    CHECK(atomic_load(&prof_runs) > 0, "no SIGPROF was handled");
    CHECK(atomic_load(&prof_bad) == 0, "%ld of %ld SIGPROF handlers found their stack overwritten",
          atomic_load(&prof_bad), atomic_load(&prof_runs));
    printf("spinner sums right, every waiting handler came back, no handler's stack was "
           "overwritten\n");
}

/* what a program finds before it sets anything: SIG_DFL for the faults
 * (bobbin's own overflow report on SIGSEGV showed through: Rust then
 * installed no stack-overflow handler of its own) */
static void defaults(void)
{
    const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE };
    for (int i = 0; i < 4; i++) {
        struct sigaction old;
        CHECK(sigaction(sigs[i], NULL, &old) == 0, "sigaction query");
        printf("signal %d at start: %s\n", sigs[i],
               old.sa_handler == SIG_DFL ? "SIG_DFL" : old.sa_handler == SIG_IGN ? "SIG_IGN" : "a handler");
    }
}

int main(void)
{
    defaults();
    part1();
    part2();
    return probe_exit("signal_actions");
}
