/* signal_landing — a process signal sent just as the only thread that takes
 * it starts waiting runs its handler on that thread and ends the wait.
 *
 * Main blocks SIGUSR2; a worker lets it in and waits in sem_timedwait (a
 * semaphore nobody posts, 200 ms deadline). As soon as the worker shows as a
 * waiter in the semaphore's word (glibc's layout, bobbin's too: the waiter
 * count in the high half), main sends kill(getpid(), SIGUSR2) after a short
 * spin of varying length, and waits for the handler to have run. 5,000
 * rounds; the signal lands while the worker is still on its way into the
 * wait, or just parked.
 *
 * Checks: the handler ran once per round, always on the worker
 * (pthread_self compared), and every round's wait ended (EINTR, or its
 * deadline if the signal came before the wait began, as the kernel allows).
 * Under bobbin the signal used to land on the worker's OS thread after its
 * green thread had parked (that OS thread keeps the last thread's mask while
 * it looks for work) or halfway through bobbin's code: the handler ran as
 * another thread's and the wait went on (to its deadline here; a sem_wait
 * without one hung process_signals).
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "probe.h"

#define ROUNDS 5000

static sem_t sem;
static pthread_t worker;
static atomic_int handled, on_worker, ended, ready;

static void on_usr2(int sig)
{
    (void)sig;
    if (pthread_equal(pthread_self(), worker))
        atomic_fetch_add(&on_worker, 1);
    atomic_fetch_add(&handled, 1);
}

static void *wait_rounds(void *arg)
{
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    REQUIRE(pthread_sigmask(SIG_UNBLOCK, &s, NULL) == 0, "unblock");
    for (int i = 0; i < ROUNDS; i++) {
        struct timespec dl = probe_in_ms(CLOCK_REALTIME, 200);
        atomic_store(&ready, 1);
        int r = sem_timedwait(&sem, &dl);
        int e = errno;
        CHECK(r == -1 && (e == EINTR || e == ETIMEDOUT), "round %d: sem_timedwait %d, %s", i, r,
              strerror(e));
        atomic_fetch_add(&ended, 1);
    }
    return NULL;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    REQUIRE(pthread_sigmask(SIG_BLOCK, &s, NULL) == 0, "block");
    REQUIRE(sem_init(&sem, 0, 0) == 0, "sem_init");
    REQUIRE(pthread_create(&worker, NULL, wait_rounds, NULL) == 0, "pthread_create");
    _Atomic uint64_t *word = (_Atomic uint64_t *)&sem;
    for (int i = 0; i < ROUNDS; i++) {
        while (!atomic_exchange(&ready, 0))
            sched_yield();
        while ((atomic_load(word) >> 32) == 0) /* until it shows as a waiter */
            ;
        for (volatile int k = 0; k < (i % 64) * 20; k++)
            ;
        int before = atomic_load(&handled);
        REQUIRE(kill(getpid(), SIGUSR2) == 0, "kill");
        while (atomic_load(&handled) == before)
            sched_yield();
    }
    REQUIRE(pthread_join(worker, NULL) == 0, "join");
    CHECK(atomic_load(&handled) == ROUNDS, "handler ran %d times", atomic_load(&handled));
    CHECK(atomic_load(&on_worker) == ROUNDS, "handler ran on another thread %d times",
          ROUNDS - atomic_load(&on_worker));
    printf("handler ran on the waiting thread: %d of %d rounds\n", atomic_load(&on_worker), ROUNDS);
    printf("waits ended: %d\n", atomic_load(&ended));
    return probe_exit("signal_landing");
}
