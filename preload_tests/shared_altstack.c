/* shared_altstack — threads that share one alternate signal stack, as
 * varnish's workers do (one region for all, used natively only by the
 * SA_ONSTACK SIGSEGV handler that reports a crash).
 *
 * 4 threads (more than the processors, so they are preempted) each install
 * the same 80 KiB alternate stack, then compute two copies of the same
 * sequence without any call, ROUNDS times, and compare them after each
 * round; then every thread receives SIGUSR1 (a handler without SA_ONSTACK,
 * on the thread's own stack) 20 times. Checks: the copies always agree, each
 * thread ends with the value main computes for it, each handler ran on the
 * thread it was sent to.
 *
 * Under bobbin at P=2 the preemption signal's handler ran on the alternate
 * stack installed, the same for every thread: two OS threads wrote their
 * signal frames over each other, and the process died of SIGSEGV (16 runs
 * of 16), or one thread ran on two OS threads at once.
 *
 * stdout: one line.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define PROBE_NAME "shared_altstack"
#include "probe.h"

enum { NT = 4, ROUNDS = 60000, ALT = 81920, KILLS = 20 };

static void *alt;
static __thread long self_id = -1;
static atomic_int handled_right, handled_wrong, mismatches;
static pthread_barrier_t done;

static uint64_t step(uint64_t x)
{
    return x * 6364136223846793005ULL + 1442695040888963407ULL;
}

static uint64_t expected(long id)
{
    uint64_t x = (uint64_t)id * 7919 + 1;
    for (long n = 0; n < (long)ROUNDS * 1000; n++)
        x = step(x);
    return x;
}

static long kill_target = -1;

static void on_usr1(int sig)
{
    (void)sig;
    if (self_id == kill_target)
        atomic_fetch_add(&handled_right, 1);
    else
        atomic_fetch_add(&handled_wrong, 1);
}

static void *worker(void *arg)
{
    long id = (long)arg;
    self_id = id;
    stack_t ss = {.ss_sp = alt, .ss_size = ALT, .ss_flags = 0};
    REQUIRE(sigaltstack(&ss, NULL) == 0, "sigaltstack");
    volatile uint64_t x = (uint64_t)id * 7919 + 1, y = x;
    for (long n = 0; n < ROUNDS; n++) {
        uint64_t a = x, b = y;
        for (int i = 0; i < 1000; i++) {
            a = a * 6364136223846793005ULL + 1442695040888963407ULL;
            b = b * 6364136223846793005ULL + 1442695040888963407ULL;
        }
        x = a;
        y = b;
        if (x != y)
            atomic_fetch_add(&mismatches, 1);
    }
    pthread_barrier_wait(&done);
    pthread_barrier_wait(&done); /* main signals each thread meanwhile */
    return (void *)(uintptr_t)x;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(120);
    alt = mmap(NULL, ALT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(alt != MAP_FAILED, "mmap");
    REQUIRE(probe_on_signal(SIGUSR1, on_usr1, SA_RESTART) == 0, "sigaction");
    REQUIRE(pthread_barrier_init(&done, NULL, NT + 1) == 0, "barrier");
    pthread_t t[NT];
    current_probe = "computing";
    for (long i = 0; i < NT; i++)
        REQUIRE(pthread_create(&t[i], NULL, worker, (void *)i) == 0, "create");
    pthread_barrier_wait(&done);
    current_probe = "signals";
    for (long i = 0; i < NT; i++) {
        kill_target = i;
        for (int k = 0; k < KILLS; k++) {
            int before = atomic_load(&handled_right) + atomic_load(&handled_wrong);
            REQUIRE(pthread_kill(t[i], SIGUSR1) == 0, "pthread_kill");
            while (atomic_load(&handled_right) + atomic_load(&handled_wrong) == before)
                usleep(100);
        }
    }
    pthread_barrier_wait(&done);
    int right = 0;
    for (long i = 0; i < NT; i++) {
        void *r;
        pthread_join(t[i], &r);
        if ((uint64_t)(uintptr_t)r == expected(i))
            right++;
    }
    CHECK(atomic_load(&mismatches) == 0, "%d rounds whose two copies differed", atomic_load(&mismatches));
    CHECK(right == NT, "%d of %d threads ended with the value main computes", right, NT);
    CHECK(atomic_load(&handled_right) == NT * KILLS && atomic_load(&handled_wrong) == 0,
          "handlers: %d on the thread signalled, %d elsewhere", atomic_load(&handled_right),
          atomic_load(&handled_wrong));
    printf("%d threads on one alternate stack: %d right, %d mismatched rounds, %d of %d handlers "
           "on their thread\n", NT, right, atomic_load(&mismatches), atomic_load(&handled_right), NT * KILLS);
    return probe_exit(PROBE_NAME);
}
