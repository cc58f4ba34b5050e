/* coroutine_lock_wait — a mutex wait on a coroutine's stack while the
 * holder, a green thread, is preempted with it held (qemu-img's thread
 * pool: its coroutines lock the pool's mutex that the worker threads hold).
 *
 * A call made off the green thread's own stack waits in the kernel
 * (glibc's own mutex wait); sysmon must then let that OS thread's
 * processor go so the holder can run and unlock. Under bobbin before
 * 2026-11-28 it did not when main had earlier waited for the same mutex
 * on its own stack, deeper than where it switched to the coroutine: the
 * mark bobbin leaves on a thread's stack while its code runs there stayed
 * readable (main's stack does not change while a coroutine runs), and
 * bobbin took it for its code still running under the wait: at
 * BOBBIN_MAXPROCS=1 the program hung (qemu-img bench, 3 runs of 5).
 *
 * 8 rounds: a worker takes the mutex and computes 20 ms with it held; main
 * first waits for it on its own stack, from a frame 16 KiB deep, then
 * from a coroutine. Checks: every lock taken, the counter they guard
 * right. A watchdog names a hang.
 * stdout: one line.
 */
#define PROBE_NAME "coroutine_lock_wait"
#include "probe.h"

#include <alloca.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

enum { ROUNDS = 8 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int holding, stop;
static long counter;
static volatile unsigned long sink;

static void hold_and_compute(void)
{
    pthread_mutex_lock(&mu);
    atomic_store(&holding, 1);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do { /* 20 ms of computing, the mutex held: preempted meanwhile */
        for (int i = 0; i < 100000; i++)
            sink += (unsigned long)i;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 20000000L);
    counter++;
    atomic_store(&holding, 0);
    pthread_mutex_unlock(&mu);
}

static void *worker(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        hold_and_compute();
        usleep(2000);
    }
    return NULL;
}

static void wait_holder(void)
{
    while (!atomic_load(&holding))
        usleep(200);
}

/* the wait on main's own stack, deep down */
static __attribute__((noinline)) void deep_lock(void)
{
    volatile char *pad = alloca(16 * 1024);
    pad[0] = 1;
    wait_holder();
    pthread_mutex_lock(&mu);
    counter++;
    pthread_mutex_unlock(&mu);
    pad[1] = 2;
}

static ucontext_t co_main, co_ctx;
static int co_locks;

static void co_body(void)
{
    for (;;) {
        /* (nothing of bobbin's called on main's own stack since its lock:
         * waited for here) */
        wait_holder();
        pthread_mutex_lock(&mu); /* on the coroutine's stack: glibc's wait */
        counter++;
        co_locks++;
        pthread_mutex_unlock(&mu);
        swapcontext(&co_ctx, &co_main);
    }
}

int main(void)
{
    static char stack[256 * 1024] __attribute__((aligned(16)));
    signal(SIGALRM, on_alarm);
    alarm(60);
    pthread_t w;
    REQUIRE(pthread_create(&w, NULL, worker, NULL) == 0, "worker");
    getcontext(&co_ctx);
    co_ctx.uc_stack.ss_sp = stack;
    co_ctx.uc_stack.ss_size = sizeof stack;
    co_ctx.uc_link = NULL;
    makecontext(&co_ctx, co_body, 0);
    int own = 0;
    for (int r = 0; r < ROUNDS; r++) {
        current_probe = "lock on main's own stack";
        deep_lock();
        own++;
        current_probe = "lock on the coroutine's stack";
        swapcontext(&co_main, &co_ctx);
    }
    atomic_store(&stop, 1);
    pthread_join(w, NULL);
    pthread_mutex_lock(&mu);
    long c = counter;
    pthread_mutex_unlock(&mu);
    CHECK(own == ROUNDS && co_locks == ROUNDS, "locks: own %d, coroutine %d", own, co_locks);
    CHECK(c >= 2 * ROUNDS, "counter %ld", c);
    printf("locks: %d on main's stack, %d on the coroutine's\n", own, co_locks);
    return probe_exit(PROBE_NAME);
}
