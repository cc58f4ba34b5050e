/* sigurg_program — a program that uses SIGURG itself, bobbin's preemption signal.
 * Go's run time (in a cgo program) installs a SIGURG handler and preempts its
 * goroutines with it; haproxy's "show threads" sends it to every thread. Before
 * 2026-11-27 the program's sigaction replaced bobbin's handler in the kernel:
 * a thread asleep in a raw system call never gave up its processor (a cgo "hello
 * world" hung at BOBBIN_MAXPROCS=1 and 2), the program's handler ran for
 * bobbin's own signals and on top of bobbin's code, and sigaction reported
 * bobbin's handler as the old action.
 *
 * 1. sigaction(SIGURG, NULL, &old) before any change: SIG_DFL.
 * 2. With a handler installed: two threads wait on a word with a raw futex
 *    system call while two threads spin until they are woken; the main thread
 *    sleeps 200 ms and then wakes them: everything ends.
 * 3. pthread_kill(SIGURG) to each of 8 threads, 20 rounds; each handler runs in
 *    its own thread and waits, yielding, until all 8 have arrived (haproxy's
 *    rendezvous): 160 calls, each thread's count 20, none on a foreign thread.
 * 4. kill(getpid(), SIGURG): the handler runs once.
 * 5. SIG_IGN, then SIG_DFL, each reported back as the old action; a SIGURG
 *    raised then is ignored.
 *
 * stdout: one line per part, the same natively.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define PROBE_NAME "sigurg_program"
#include "probe.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define N 8
#define ROUNDS 20

static atomic_int word, stop_spin, arrived, total, foreign, in_round;
static atomic_int counts[N];
static __thread int myidx = -1;

static long raw_futex(atomic_int *addr, int op, int val)
{
    return probe_raw_syscall6(SYS_futex, (long)addr, op, val, 0, 0, 0);
}

static void on_urg(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    atomic_fetch_add(&total, 1);
    if (myidx < 0) {
        atomic_fetch_add(&foreign, 1);
        return;
    }
    atomic_fetch_add(&counts[myidx], 1);
    if (!atomic_load(&in_round))
        return;
    /* arrived only grows: a handler late to leave one round never sees the
     * next round's count as its own */
    int target = (atomic_fetch_add(&arrived, 1) / N + 1) * N;
    while (atomic_load(&arrived) < target) /* every thread's handler runs meanwhile */
        sched_yield();
}

static void *futex_waiter(void *arg)
{
    (void)arg;
    while (atomic_load(&word) == 0)
        raw_futex(&word, FUTEX_WAIT_PRIVATE, 0);
    return NULL;
}

static atomic_int workers_stop, ready;

static void *worker(void *arg)
{
    myidx = (int)(intptr_t)arg;
    atomic_fetch_add(&ready, 1);
    while (!atomic_load(&workers_stop))
        usleep(500); /* an event loop's short waits */
    return NULL;
}

static void set(void (*h)(int), void (*sa3)(int, siginfo_t *, void *), struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (sa3) {
        sa.sa_sigaction = sa3;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
    } else {
        sa.sa_handler = h;
    }
    REQUIRE(sigaction(SIGURG, &sa, old) == 0, "sigaction: %s", strerror(errno));
}

static const char *name(void *h)
{
    return h == (void *)SIG_DFL ? "SIG_DFL" : h == (void *)SIG_IGN ? "SIG_IGN"
           : h == (void *)on_urg ? "the handler" : "another";
}

int main(void)
{
    alarm(60);
    /* 1 */
    struct sigaction old;
    REQUIRE(sigaction(SIGURG, NULL, &old) == 0, "sigaction");
    printf("1. SIGURG at start: %s\n", name((void *)old.sa_handler));

    /* 2 */
    set(NULL, on_urg, &old);
    pthread_t fw[2], sp[2];
    for (int i = 0; i < 2; i++) {
        REQUIRE(pthread_create(&fw[i], NULL, futex_waiter, NULL) == 0, "create");
        REQUIRE(pthread_create(&sp[i], NULL, probe_spin, &stop_spin) == 0, "create");
    }
    usleep(200000);
    atomic_store(&word, 1);
    raw_futex(&word, FUTEX_WAKE_PRIVATE, 64);
    for (int i = 0; i < 2; i++)
        pthread_join(fw[i], NULL);
    atomic_store(&stop_spin, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(sp[i], NULL);
    printf("2. raw futex waiters beside spinners: done\n");

    /* 3 */
    atomic_store(&total, 0);
    pthread_t w[N];
    for (int i = 0; i < N; i++)
        REQUIRE(pthread_create(&w[i], NULL, worker, (void *)(intptr_t)i) == 0, "create");
    while (atomic_load(&ready) < N)
        usleep(1000);
    atomic_store(&in_round, 1);
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++)
            REQUIRE(pthread_kill(w[i], SIGURG) == 0, "pthread_kill");
        while (atomic_load(&arrived) < N * (r + 1))
            usleep(200);
    }
    atomic_store(&in_round, 0);
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (atomic_load(&counts[i]) != ROUNDS)
            bad++;
    CHECK(bad == 0 && atomic_load(&foreign) == 0, "%d threads' counts wrong, %d foreign calls",
          bad, atomic_load(&foreign));
    printf("3. pthread_kill x %d x %d: %d calls, %d threads with a wrong count, %d foreign\n", N,
           ROUNDS, atomic_load(&total), bad, atomic_load(&foreign));

    /* 4 */
    atomic_store(&total, 0);
    REQUIRE(kill(getpid(), SIGURG) == 0, "kill");
    for (int i = 0; i < 200 && atomic_load(&total) == 0; i++)
        usleep(1000);
    usleep(20000);
    printf("4. kill(getpid()): %d call(s)\n", atomic_load(&total));

    /* 5 */
    set(SIG_IGN, NULL, &old);
    printf("5. old action: %s", name((void *)old.sa_handler));
    set(SIG_DFL, NULL, &old);
    printf(", then %s", name((void *)old.sa_handler));
    atomic_store(&total, 0);
    raise(SIGURG);
    usleep(20000);
    printf("; raised with SIG_DFL: %d call(s)\n", atomic_load(&total));

    atomic_store(&workers_stop, 1);
    for (int i = 0; i < N; i++)
        pthread_join(w[i], NULL);
    return probe_exit(PROBE_NAME);
}
