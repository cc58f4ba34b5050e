/* signal_running — pthread_kill of a thread that is running its own
 * call-free code, whose handler makes calls that wait (nanosleep, a blocking
 * write into a pipe, sched_yield) as an async-signal-safe handler may.
 *
 * Natively the kernel runs the handler on the thread at once, with the signal
 * blocked during it (and only then) and a ucontext as the third argument of
 * an SA_SIGINFO handler. Under bobbin the thread is a green thread on some OS
 * thread: its handler must run on that green thread, and a wait inside the
 * handler must park it like any other wait, leaving its OS thread fit to run
 * others (able to be preempted, with the mask the next thread wants).
 *
 * Two spinners add up a series in tight loops; main signals one of them ROUNDS
 * times, each time waiting (poll, 10 s) for the handler's acknowledgement in a
 * pipe before the next signal, so no signal is merged with a pending one. With
 * one P, main itself only runs again if the spinners can still be preempted
 * after every handler. Checks: every signal handled once, on its target, with
 * a ucontext, SIGUSR1 blocked inside the handler and not after; the spinners'
 * sums equal the ones main computes.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

#define ROUNDS 150
#define SPIN 4000000ull

static int ack[2];
static pthread_t target;
static atomic_int runs, on_target, with_uctx, blocked_inside, wrote;
static atomic_int stop;

static void on_usr1(int sig, siginfo_t *si, void *uctx)
{
    int e = errno;
    if (pthread_equal(pthread_self(), target))
        atomic_fetch_add(&on_target, 1);
    if (uctx != NULL && si != NULL && si->si_signo == sig)
        atomic_fetch_add(&with_uctx, 1);
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    if (sigismember(&cur, SIGUSR1))
        atomic_fetch_add(&blocked_inside, 1);
    int n = atomic_fetch_add(&runs, 1);
    /* waits a green thread parks in */
    if (n % 3 == 0) {
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    } else if (n % 3 == 1) {
        sched_yield();
    }
    if (write(ack[1], "a", 1) == 1) /* blocking pipe: may wait for main */
        atomic_fetch_add(&wrote, 1);
    errno = e;
}

struct spinner {
    uint64_t seed, sum, rounds;
    int usr1_blocked_after;
};

static uint64_t series(uint64_t seed, uint64_t i)
{
    return (seed + i) * 2654435761u ^ (i >> 3);
}

static void *spin(void *arg)
{
    struct spinner *s = arg;
    volatile uint64_t sum = 0;
    uint64_t r = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (uint64_t i = 0; i < SPIN; i++)
            sum += series(s->seed, i);
        r++;
    }
    s->sum = sum;
    s->rounds = r;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    s->usr1_blocked_after = sigismember(&cur, SIGUSR1);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    REQUIRE(pipe(ack) == 0, "pipe: %s", strerror(errno));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");

    struct spinner sp[2] = {{.seed = 7}, {.seed = 1234567}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&th[i], NULL, spin, &sp[i]) == 0, "pthread_create");
    target = th[0];

    int acked = 0;
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(pthread_kill(target, SIGUSR1) == 0, "pthread_kill round %d", i);
        struct pollfd p = {ack[0], POLLIN, 0};
        int k = poll(&p, 1, 10000);
        if (k != 1) {
            CHECK(k == 1, "round %d: no acknowledgement within 10 s (poll %d)", i, k);
            break;
        }
        char c;
        if (read(ack[0], &c, 1) == 1)
            acked++;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);

    printf("signals acknowledged: %d of %d\n", acked, ROUNDS);
    printf("handler runs: %d, on the target: %d, with a ucontext: %d\n",
           atomic_load(&runs), atomic_load(&on_target), atomic_load(&with_uctx));
    printf("SIGUSR1 blocked inside the handler: %d; after, in the spinners: %d %d\n",
           atomic_load(&blocked_inside), sp[0].usr1_blocked_after, sp[1].usr1_blocked_after);
    CHECK(acked == ROUNDS, "acknowledged %d of %d", acked, ROUNDS);
    CHECK(atomic_load(&runs) == ROUNDS, "handler ran %d times", atomic_load(&runs));
    CHECK(atomic_load(&on_target) == ROUNDS, "on target %d", atomic_load(&on_target));
    CHECK(atomic_load(&with_uctx) == ROUNDS, "with ucontext %d", atomic_load(&with_uctx));
    CHECK(atomic_load(&blocked_inside) == ROUNDS, "blocked inside %d",
          atomic_load(&blocked_inside));
    CHECK(atomic_load(&wrote) == ROUNDS, "wrote %d", atomic_load(&wrote));
    CHECK(!sp[0].usr1_blocked_after && !sp[1].usr1_blocked_after, "SIGUSR1 left blocked");

    /* the sums the spinners computed, recomputed here */
    int sums_ok = 1;
    for (int k = 0; k < 2; k++) {
        uint64_t one = 0;
        for (uint64_t i = 0; i < SPIN; i++)
            one += series(sp[k].seed, i);
        uint64_t want = one * sp[k].rounds; /* every round adds the same */
        CHECK(want == sp[k].sum, "spinner %d: sum %llx, want %llx", k,
              (unsigned long long)sp[k].sum, (unsigned long long)want);
        sums_ok &= want == sp[k].sum;
    }
    printf("spinner sums: %s\n", sums_ok ? "as computed by main" : "WRONG");
    return probe_exit("signal_running");
}
