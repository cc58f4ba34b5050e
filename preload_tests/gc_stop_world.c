/* gc_stop_world — the stop-the-world handshake of the Boehm collector (Guile,
 * and every program built on libgc): the collector pthread_kills a thread
 * with a "suspend" signal; that thread's handler posts a semaphore and waits
 * in sigsuspend, everything blocked but the "restart" signal, which the
 * collector sends next; the handler posts again and returns.
 *
 * 300 rounds with a worker that computes in its own code, then 300 with one
 * that loops on clock_gettime (the handler then interrupts glibc's code, and
 * bobbin runs it there as the kernel would, its calls going straight to the
 * kernel). The collector waits at most 2 s for each acknowledgement.
 * Checks: every round completes, the restart handler ran once per round.
 * The clock_gettime part is left out at BOBBIN_MAXPROCS=1 (README, known
 * limits: that thread then keeps the only processor while it waits).
 *
 * Under bobbin the restart signal was lost at P=2 (Guile: "Signals delivery
 * fails constantly at GC", then abort): sent before the handler's
 * sigsuspend began it stayed in bobbin's pending set, the SIGURG that should
 * have brought it blocked by the handler's mask; delivered in the call it
 * ran, and the call was made again by bobbin's restart of a call its own
 * SIGURG had cut short.
 *
 * stdout: one line per part.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROBE_NAME "gc_stop_world"
#include "probe.h"

#define SIG_SUSPEND SIGPWR
#define SIG_RESTART SIGXCPU
enum { ROUNDS = 300 };

static sem_t ack;
static volatile sig_atomic_t restarted;
static atomic_int restarts;
static sigset_t wait_mask;
static atomic_int stop;

static void suspend_handler(int sig)
{
    (void)sig;
    restarted = 0;
    sem_post(&ack);
    while (!restarted)
        sigsuspend(&wait_mask); /* everything blocked but SIG_RESTART */
    sem_post(&ack);
}

static void restart_handler(int sig)
{
    (void)sig;
    restarted = 1;
    atomic_fetch_add(&restarts, 1);
}

static void *computing(void *arg)
{
    (void)arg;
    volatile unsigned long x = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed))
        for (int k = 0; k < 1000; k++)
            x += (unsigned long)k;
    return NULL;
}

static void *clocking(void *arg)
{
    (void)arg;
    struct timespec ts;
    while (!atomic_load_explicit(&stop, memory_order_relaxed))
        clock_gettime(CLOCK_MONOTONIC, &ts);
    return NULL;
}

static int wait_ack(void)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 2;
    while (sem_timedwait(&ack, &dl) != 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

/* ROUNDS stops of a worker running body; the rounds completed */
static int stops(void *(*body)(void *))
{
    atomic_store(&stop, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, body, NULL) == 0, "create");
    int done = 0;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_kill(t, SIG_SUSPEND);
        if (wait_ack() != 0) {
            CHECK(0, "round %d: no suspend acknowledgement in 2 s", i);
            break;
        }
        pthread_kill(t, SIG_RESTART);
        if (wait_ack() != 0) {
            CHECK(0, "round %d: restart signal lost (still in sigsuspend after 2 s)", i);
            break;
        }
        done++;
    }
    atomic_store(&stop, 1);
    if (done == ROUNDS)
        pthread_join(t, NULL);
    return done;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(120);
    REQUIRE(sem_init(&ack, 0, 0) == 0, "sem_init");
    sigfillset(&wait_mask);
    sigdelset(&wait_mask, SIG_RESTART);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = suspend_handler;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    REQUIRE(sigaction(SIG_SUSPEND, &sa, NULL) == 0, "sigaction");
    REQUIRE(probe_on_signal(SIG_RESTART, restart_handler, 0) == 0, "sigaction");

    current_probe = "a computing worker";
    int n = stops(computing);
    printf("computing worker: %d of %d stops completed\n", n, ROUNDS);
    const char *p = getenv("BOBBIN_MAXPROCS");
    int clock_part = !(p && strcmp(p, "1") == 0 && getenv("LD_PRELOAD"));
    current_probe = "a worker in clock_gettime";
    int m = clock_part ? stops(clocking) : ROUNDS;
    printf("clock_gettime worker: %d of %d stops completed\n", m, ROUNDS);
    int r = atomic_load(&restarts), want = n + (clock_part ? m : 0);
    CHECK(r == want, "restart handler ran %d times for %d rounds", r, want);
    return probe_exit(PROBE_NAME);
}
