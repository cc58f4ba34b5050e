/* blocked_signals — a signal sent to one thread that the thread blocks stays
 * that thread's: it waits, runs its handler on that thread once unblocked,
 * or is taken by that thread's sigwait, and never runs anywhere else.
 *
 * 1. A thread blocks SIGUSR1 and sends it to itself (raise, gsignal,
 *    pthread_kill of itself, pthread_sigqueue of itself with a value, in
 *    turn), sleeps 1 ms 10 times while 3 other threads sleep and wake beside
 *    it (its OS thread changes under bobbin), checks sigpending() shows it,
 *    then unblocks: the handler runs before pthread_sigmask returns, on that
 *    thread, once (pthread_sigqueue's value seen by the SA_SIGINFO handler).
 *    80 rounds.
 * 2. A thread blocks SIGUSR1 and waits in pause() (or waitpid of a child
 *    that lives until main, having sent the signal, tells it to end through
 *    a pipe: a child that lived 30 ms could end before a main kept off the
 *    CPU that long sent it, one run in a few hundred on a loaded machine):
 *    another thread sends it SIGUSR1 (pthread_kill, or
 *    pthread_sigqueue). The call is not cut short by it; SIGUSR2 (not
 *    blocked) ends pause (the child's end, waitpid); the thread then sees
 *    SIGUSR1 pending and takes it with sigwaitinfo (the value intact).
 *    Meanwhile no handler of SIGUSR1 runs anywhere. 40 rounds.
 * 3. A thread that ends with SIGUSR1 blocked and pending (sent to it while it
 *    slept in pause): the signal ends with it, no handler runs. 20 rounds.
 *
 * 4. A thread blocks SIGPIPE and writes to a pipe whose reader has gone, with
 *    write(), or with stdio (fputs + fflush: glibc's own write), then sleeps
 *    1 ms 10 times beside 3 threads that do not block SIGPIPE; after write()
 *    it swallows the SIGPIPE with a zero-timeout sigtimedwait, after stdio it
 *    leaves it pending (bobbin catches glibc's own write's SIGPIPE only when
 *    another thread next runs on that OS thread: README). 60 rounds: the
 *    process lives, each write failed with EPIPE, each write()'s SIGPIPE was
 *    swallowed.
 * 5. The same with SIGXFSZ: a write past RLIMIT_FSIZE (6,000 bytes, this
 *    part only) fails with EFBIG, the signal is swallowed after the sleeps.
 *    30 rounds.
 *
 * Under bobbin, the signals of 1 went to the kernel queue of the OS thread
 * the sender was on: another thread run there later took them (50 handlers
 * of 50 on the wrong thread); the signal of 3 ran on another thread; the SIGPIPE of 4 killed the process
 * (exit 141) as soon as a thread that lets it in ran on that OS thread, the
 * SIGXFSZ of 5 likewise (exit 153).
 *
 * stdout: one line per part.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "blocked_signals"
#include "probe.h"

static __thread int is_sender;   /* this thread is the one the signal is for */
static atomic_int on_owner, elsewhere, value_seen, usr2;
static atomic_int stop_others;

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (is_sender)
        atomic_fetch_add(&on_owner, 1);
    else
        atomic_fetch_add(&elsewhere, 1);
    if (si->si_code == SI_QUEUE && si->si_value.sival_int == 4242)
        atomic_fetch_add(&value_seen, 1);
}

static void on_usr2(int sig)
{
    (void)sig;
    atomic_fetch_add(&usr2, 1);
}

static void *sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_others))
        usleep(300);
    return NULL;
}

static void block_usr1(int how)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    pthread_sigmask(how, &s, NULL);
}

static int usr1_pending(void)
{
    sigset_t p;
    sigpending(&p);
    return sigismember(&p, SIGUSR1);
}

/* part 1: one round, kind 0..3 */
static void *self_sender(void *arg)
{
    long kind = (long)arg;
    is_sender = 1;
    block_usr1(SIG_BLOCK);
    int before = atomic_load(&on_owner);
    if (kind == 0)
        raise(SIGUSR1);
    else if (kind == 1)
        gsignal(SIGUSR1);
    else if (kind == 2)
        pthread_kill(pthread_self(), SIGUSR1);
    else
        pthread_sigqueue(pthread_self(), SIGUSR1, (union sigval){.sival_int = 4242});
    CHECK(atomic_load(&on_owner) == before, "kind %ld: the handler ran while blocked", kind);
    for (int i = 0; i < 10; i++)
        usleep(1000);
    CHECK(usr1_pending(), "kind %ld: not pending after the sleeps", kind);
    block_usr1(SIG_UNBLOCK);
    CHECK(atomic_load(&on_owner) == before + 1, "kind %ld: handler ran %d times on the thread by the unblock",
          kind, atomic_load(&on_owner) - before);
    return NULL;
}

static pthread_t target;
static atomic_int target_waiting;
static int child_end[2]; /* part 2, kind 2: main's byte ends the child */

/* part 2: waits in pause (kind 0, 1) or waitpid (kind 2) with SIGUSR1 blocked */
static void *waiter(void *arg)
{
    long kind = (long)arg;
    is_sender = 1;
    block_usr1(SIG_BLOCK);
    pid_t child = 0;
    if (kind == 2) {
        child = fork();
        if (child == 0) {
            char c;
            close(child_end[1]);
            _exit(read(child_end[0], &c, 1) == 1 ? 7 : 8);
        }
        close(child_end[0]);
    }
    atomic_store(&target_waiting, 1);
    if (kind == 2) {
        int st = 0;
        pid_t r;
        do
            r = waitpid(child, &st, 0);
        while (r < 0 && errno == EINTR);
        CHECK(r == child && WIFEXITED(st) && WEXITSTATUS(st) == 7, "waitpid: %d status %#x", (int)r, st);
    } else {
        int before = atomic_load(&usr2);
        int r = pause();
        CHECK(r == -1 && errno == EINTR, "pause: %d", r);
        CHECK(atomic_load(&usr2) != before, "pause ended with no handler run");
    }
    CHECK(usr1_pending(), "kind %ld: SIGUSR1 not pending after the wait", kind);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    siginfo_t si;
    struct timespec zero = {0, 0};
    int sig = sigtimedwait(&s, &si, &zero);
    CHECK(sig == SIGUSR1, "kind %ld: sigtimedwait took %d", kind, sig);
    if (kind == 1)
        CHECK(sig == SIGUSR1 && si.si_code == SI_QUEUE && si.si_value.sival_int == 4242,
              "kind 1: code %d value %d", si.si_code, si.si_value.sival_int);
    return NULL;
}

/* part 3: ends with SIGUSR1 pending */
static void *ender(void *arg)
{
    (void)arg;
    is_sender = 1;
    block_usr1(SIG_BLOCK);
    atomic_store(&target_waiting, 1);
    int before = atomic_load(&usr2);
    while (atomic_load(&usr2) == before)
        pause();
    return NULL;
}

/* parts 4 and 5: block sig in this thread (s: the set of it) */
static void block_one(int sig, sigset_t *s)
{
    sigemptyset(s);
    sigaddset(s, sig);
    pthread_sigmask(SIG_BLOCK, s, NULL);
}

/* sleep beside the other threads, then swallow the pending signal of s */
static void sleep_and_swallow(const sigset_t *s, int sig, atomic_int *swallowed)
{
    for (int i = 0; i < 10; i++)
        usleep(1000);
    struct timespec zero = {0, 0};
    if (sigtimedwait(s, NULL, &zero) == sig)
        atomic_fetch_add(swallowed, 1);
}

/* part 4: a write into a closed pipe with SIGPIPE blocked, then swallowed */
static atomic_int epipes, swallowed;

static void *pipe_writer(void *arg)
{
    long kind = (long)arg;
    sigset_t s;
    block_one(SIGPIPE, &s);
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    close(p[0]);
    if (kind == 0) {
        if (write(p[1], "x", 1) == -1 && errno == EPIPE)
            atomic_fetch_add(&epipes, 1);
        close(p[1]);
    } else {
        FILE *f = fdopen(p[1], "w");
        REQUIRE(f != NULL, "fdopen");
        fputs("lost", f);
        if (fflush(f) != 0 && errno == EPIPE)
            atomic_fetch_add(&epipes, 1);
        fclose(f);
    }
    if (kind == 0)
        sleep_and_swallow(&s, SIGPIPE, &swallowed);
    else
        for (int i = 0; i < 10; i++)
            usleep(1000); /* left pending: it ends with the thread */
    return NULL;
}

/* part 5: a write past the file size limit with SIGXFSZ blocked */
static atomic_int efbigs, xfsz_swallowed;

static void *big_writer(void *arg)
{
    sigset_t s;
    block_one(SIGXFSZ, &s);
    char path[64];
    snprintf(path, sizeof path, "/tmp/blocked_signals.%d.%ld", (int)getpid(), (long)arg);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    REQUIRE(fd >= 0, "open %s", path);
    unlink(path);
    static char buf[4000];
    ssize_t n = 0;
    for (int i = 0; i < 3 && n >= 0; i++)
        n = write(fd, buf, sizeof buf); /* 4000, then 2000 (the limit), then EFBIG */
    if (n < 0 && errno == EFBIG)
        atomic_fetch_add(&efbigs, 1);
    close(fd);
    sleep_and_swallow(&s, SIGXFSZ, &xfsz_swallowed);
    return NULL;
}

static void wait_target(void)
{
    while (!atomic_load(&target_waiting))
        usleep(200);
    usleep(3000); /* in the call by now, in all likelihood */
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(120);
    REQUIRE(probe_on_siginfo(SIGUSR1, on_usr1, 0) == 0, "sigaction");
    REQUIRE(probe_on_signal(SIGUSR2, on_usr2, 0) == 0, "sigaction");

    pthread_t others[3];
    for (int i = 0; i < 3; i++)
        REQUIRE(pthread_create(&others[i], NULL, sleeper, NULL) == 0, "create");

    current_probe = "part 1: a thread's signal to itself, blocked";
    for (int r = 0; r < 80; r++) {
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, self_sender, (void *)(long)(r % 4)) == 0, "create");
        pthread_join(t, NULL);
    }
    int n1 = atomic_load(&on_owner), v1 = atomic_load(&value_seen);
    CHECK(n1 == 80, "part 1: %d handlers on the sending thread", n1);
    CHECK(v1 == 20, "part 1: pthread_sigqueue's value seen %d times", v1);
    CHECK(atomic_load(&elsewhere) == 0, "part 1: %d handlers on another thread", atomic_load(&elsewhere));
    printf("part 1: %d of 80 handlers on the thread that sent the signal to itself, %d elsewhere, "
           "value seen %d of 20\n", n1, atomic_load(&elsewhere), v1);

    current_probe = "part 2: blocked signal to a thread inside a call";
    for (int r = 0; r < 40; r++) {
        long kind = r % 3;
        atomic_store(&target_waiting, 0);
        if (kind == 2)
            REQUIRE(pipe(child_end) == 0, "pipe");
        REQUIRE(pthread_create(&target, NULL, waiter, (void *)kind) == 0, "create");
        wait_target();
        if (kind == 1)
            pthread_sigqueue(target, SIGUSR1, (union sigval){.sival_int = 4242});
        else
            pthread_kill(target, SIGUSR1);
        usleep(2000);
        if (kind != 2)
            pthread_kill(target, SIGUSR2);
        else
            REQUIRE(write(child_end[1], "x", 1) == 1 && close(child_end[1]) == 0, "end the child");
        pthread_join(target, NULL);
    }
    int n2 = atomic_load(&on_owner) - n1;
    CHECK(n2 == 0 && atomic_load(&elsewhere) == 0, "part 2: %d handlers on the thread, %d elsewhere", n2,
          atomic_load(&elsewhere));
    printf("part 2: 40 blocked signals sent into pause/waitpid taken by sigtimedwait, handlers run %d\n",
           n2 + atomic_load(&elsewhere));

    current_probe = "part 3: a thread ending with a blocked signal pending";
    for (int r = 0; r < 20; r++) {
        atomic_store(&target_waiting, 0);
        REQUIRE(pthread_create(&target, NULL, ender, NULL) == 0, "create");
        wait_target();
        pthread_kill(target, SIGUSR1);
        usleep(1000);
        pthread_kill(target, SIGUSR2);
        pthread_join(target, NULL);
        for (int i = 0; i < 3; i++)
            usleep(1000); /* the other threads run meanwhile */
    }
    int n3 = atomic_load(&on_owner) - n1 - n2;
    CHECK(n3 == 0 && atomic_load(&elsewhere) == 0, "part 3: %d handlers on the thread, %d elsewhere", n3,
          atomic_load(&elsewhere));
    printf("part 3: 20 threads ended with the signal pending, handlers run %d\n", n3 + atomic_load(&elsewhere));

    current_probe = "part 4: SIGPIPE blocked, swallowed after sleeps";
    for (int r = 0; r < 60; r++) {
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, pipe_writer, (void *)(long)(r % 2)) == 0, "create");
        pthread_join(t, NULL);
    }
    CHECK(atomic_load(&epipes) == 60, "part 4: %d writes failed with EPIPE", atomic_load(&epipes));
    CHECK(atomic_load(&swallowed) == 30, "part 4: %d SIGPIPEs of write() swallowed", atomic_load(&swallowed));
    printf("part 4: alive after 60 writes into a closed pipe with SIGPIPE blocked: EPIPE %d, "
           "swallowed by sigtimedwait %d of write()'s 30\n", atomic_load(&epipes), atomic_load(&swallowed));

    current_probe = "part 5: SIGXFSZ blocked, swallowed after sleeps";
    struct rlimit old_fsize, fsize = {6000, 6000};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old_fsize) == 0, "getrlimit");
    if (old_fsize.rlim_max != RLIM_INFINITY && old_fsize.rlim_max < fsize.rlim_max)
        fsize.rlim_max = old_fsize.rlim_max;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &fsize) == 0, "setrlimit");
    for (int r = 0; r < 30; r++) {
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, big_writer, (void *)(long)r) == 0, "create");
        pthread_join(t, NULL);
    }
    setrlimit(RLIMIT_FSIZE, &old_fsize);
    CHECK(atomic_load(&efbigs) == 30, "part 5: %d writes failed with EFBIG", atomic_load(&efbigs));
    CHECK(atomic_load(&xfsz_swallowed) == 30, "part 5: %d SIGXFSZs swallowed", atomic_load(&xfsz_swallowed));
    printf("part 5: alive after 30 writes past the file size limit with SIGXFSZ blocked: EFBIG %d, "
           "swallowed by sigtimedwait %d\n", atomic_load(&efbigs), atomic_load(&xfsz_swallowed));

    atomic_store(&stop_others, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(others[i], NULL);
    return probe_exit(PROBE_NAME);
}
