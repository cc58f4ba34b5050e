/* offstack_signals — pthread_kill of a green thread that runs code on a
 * stack of the program's own.
 *
 * SBCL runs all the Lisp code of its main thread on a control stack it
 * allocated, and changes that thread's signal mask there; its collector
 * stops the world with pthread_kill and waits for every thread's handler.
 * Under bobbin before 2026-11-28 the signal for the main thread stayed in
 * bobbin's pending set for ever: bobbin runs a green thread's handlers
 * only on its own stack, and its copy of the thread's mask still blocked
 * the signal that the code on the other stack had unblocked with the real
 * call (`sbcl --script` of a program whose threads collect hung at P=1 and
 * P=2).
 *
 * main switches to a makecontext coroutine and, 20 times per part, waits
 * there until the handler of SIGUSR2, sent by an NPTL thread (made from the
 * coroutine's stack, as SBCL's threads are), has run:
 *   1. computing, no call in its loop;
 *   2. waiting in its own futex system call (syscall(2));
 *   3. the same, with SIGUSR2 blocked on main's own stack before the
 *      switch and unblocked on the coroutine's.
 * Checks: each handler runs, on main, once per signal; the sender waits at
 * most 5 s for each.
 * stdout: one line per part.
 */
#define PROBE_NAME "offstack_signals"
#include "probe.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

enum { ROUNDS = 20 };

static pthread_t main_th;
static sem_t ack, go;
static volatile sig_atomic_t flag;
static atomic_int handled, not_main, lost;
static int part;

static void on_usr2(int sig)
{
    (void)sig;
    if (!pthread_equal(pthread_self(), main_th))
        atomic_fetch_add(&not_main, 1);
    atomic_fetch_add(&handled, 1);
    flag = 1;
    sem_post(&ack);
}

/* the NPTL thread: one signal per round of the 3 parts, each acknowledged */
static void *sender(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3 * ROUNDS; i++) {
        sem_wait(&go);
        pthread_kill(main_th, SIGUSR2);
        struct timespec t = probe_in_ms(CLOCK_REALTIME, 5000);
        if (sem_timedwait(&ack, &t) != 0) {
            atomic_fetch_add(&lost, 1);
            flag = 1; /* let main go on */
        }
    }
    return NULL;
}

static ucontext_t co_main, co_ctx;
static pthread_t snd;

static void wait_flag(void)
{
    static _Atomic uint32_t word;
    while (!flag) {
        if (part == 1) {
            for (volatile int k = 0; k < 1000; k++)
                ;
        } else {
            struct timespec t = {0, 50 * 1000 * 1000};
            syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &t, NULL, 0);
        }
    }
}

static void co_body(void)
{
    REQUIRE(pthread_create(&snd, NULL, sender, NULL) == 0, "sender");
    swapcontext(&co_ctx, &co_main);
    for (;;) {
        if (part == 3) {
            sigset_t s;
            sigemptyset(&s);
            sigaddset(&s, SIGUSR2);
            pthread_sigmask(SIG_UNBLOCK, &s, NULL);
        }
        for (int i = 0; i < ROUNDS; i++) {
            flag = 0;
            sem_post(&go);
            wait_flag();
        }
        swapcontext(&co_ctx, &co_main);
    }
}

int main(void)
{
    static char stack[512 * 1024] __attribute__((aligned(16)));
    signal(SIGALRM, on_alarm);
    alarm(120);
    main_th = pthread_self();
    sem_init(&ack, 0, 0);
    sem_init(&go, 0, 0);
    REQUIRE(probe_on_signal(SIGUSR2, on_usr2, SA_RESTART) == 0, "sigaction");
    getcontext(&co_ctx);
    co_ctx.uc_stack.ss_sp = stack;
    co_ctx.uc_stack.ss_size = sizeof stack;
    co_ctx.uc_link = NULL;
    makecontext(&co_ctx, co_body, 0);
    current_probe = "create the sender";
    swapcontext(&co_main, &co_ctx);
    static const char *const names[] = {"", "computing", "futex", "futex, unblocked there"};
    for (part = 1; part <= 3; part++) {
        current_probe = names[part];
        if (part == 3) {
            sigset_t s;
            sigemptyset(&s);
            sigaddset(&s, SIGUSR2);
            pthread_sigmask(SIG_BLOCK, &s, NULL);
        }
        atomic_store(&handled, 0);
        atomic_store(&lost, 0);
        swapcontext(&co_main, &co_ctx);
        CHECK(atomic_load(&handled) == ROUNDS && atomic_load(&lost) == 0,
              "%s: %d handlers for %d signals, %d not seen within 5 s", names[part],
              atomic_load(&handled), ROUNDS, atomic_load(&lost));
        printf("part %d (%s): %d handlers\n", part, names[part], atomic_load(&handled));
    }
    pthread_join(snd, NULL);
    CHECK(atomic_load(&not_main) == 0, "%d handlers ran on another thread", not_main);
    return probe_exit(PROBE_NAME);
}
