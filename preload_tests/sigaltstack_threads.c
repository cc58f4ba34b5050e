/* sigaltstack_threads — the alternate signal stack is each thread's own.
 *
 * Rust's standard library gives every thread it starts an alternate stack
 * (mmap, sigaltstack) for its stack-overflow handler, and at the thread's
 * exit disables it and unmaps it. Under bobbin before 2026-11-25 the
 * alternate stack was the OS thread's: set by one green thread, it stayed
 * on an OS thread that went on to run others, and after the owner's exit
 * unmapped it, the next signal there (bobbin's own preemption signal, which
 * runs on the alternate stack) was written into unmapped memory: the
 * process died of SIGSEGV (part 1, 3 runs in 3 at MAXPROCS=2).
 *
 * 1. ROUNDS rounds of NTHR threads doing what Rust's do, while two
 *    spinners keep the preemption signal busy.
 * 2. A thread that set an alternate stack sees it after STEPS yields and
 *    sleeps (it may be on another OS thread each time), one that set none
 *    sees SS_DISABLE each time; a SIGUSR1 handler with SA_ONSTACK runs on
 *    the first thread's stack and sees SS_ONSTACK there.
 * A watchdog names the part that hangs.
 */
#define PROBE_NAME "sigaltstack_threads"
#include "probe.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { ROUNDS = 15, NTHR = 16, STEPS = 50, ALT = 64 * 1024 };

static volatile int stop;

static void *spinner(void *arg)
{
    (void)arg;
    volatile unsigned long x = 0;
    while (!stop)
        x++;
    return NULL;
}

static void *rust_like(void *arg)
{
    (void)arg;
    void *st = mmap(NULL, ALT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(st != MAP_FAILED, "mmap");
    stack_t ss = {.ss_sp = st, .ss_size = ALT, .ss_flags = 0};
    CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack");
    for (int i = 0; i < 10; i++) {
        usleep(200);
        sched_yield();
        volatile unsigned long x = 0;
        for (int j = 0; j < 20000; j++)
            x += (unsigned long)j;
    }
    stack_t off = {.ss_flags = SS_DISABLE};
    CHECK(sigaltstack(&off, NULL) == 0, "disable");
    munmap(st, ALT);
    return NULL;
}

/* part 2 */
static char *own_alt;
static volatile uintptr_t handler_at;
static volatile int handler_onstack;

static void on_usr1(int sig)
{
    (void)sig;
    char here;
    handler_at = (uintptr_t)&here;
    stack_t o;
    handler_onstack = sigaltstack(NULL, &o) == 0 && (o.ss_flags & SS_ONSTACK);
}

/* a yield or a short sleep (the thread may come back on another OS
 * thread), then the alternate stack as the thread sees it */
static stack_t step_and_look(int i)
{
    if (i % 2)
        sched_yield();
    else
        usleep(100);
    stack_t o;
    if (sigaltstack(NULL, &o) != 0)
        o = (stack_t){.ss_sp = NULL, .ss_flags = 0, .ss_size = 0}; /* matches neither */
    return o;
}

static void *with_alt(void *arg)
{
    (void)arg;
    own_alt = mmap(NULL, ALT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(own_alt != MAP_FAILED, "mmap");
    stack_t ss = {.ss_sp = own_alt, .ss_size = ALT, .ss_flags = 0};
    CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack");
    int seen = 0;
    for (int i = 0; i < STEPS; i++) {
        stack_t o = step_and_look(i);
        seen += o.ss_sp == own_alt && o.ss_size == ALT && !(o.ss_flags & (SS_DISABLE | SS_ONSTACK));
    }
    pthread_kill(pthread_self(), SIGUSR1);
    int on = handler_at >= (uintptr_t)own_alt && handler_at < (uintptr_t)own_alt + ALT;
    stack_t off = {.ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    return (void *)(intptr_t)(seen * 10 + on);
}

static void *without_alt(void *arg)
{
    (void)arg;
    int seen = 0;
    for (int i = 0; i < STEPS; i++)
        seen += (step_and_look(i).ss_flags & SS_DISABLE) != 0;
    return (void *)(intptr_t)seen;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    current_probe = "1: threads that set, disable and unmap their alternate stacks";
    pthread_t sp[2];
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&sp[i], NULL, spinner, NULL) == 0, "create");
    for (int r = 0; r < ROUNDS; r++) {
        pthread_t t[NTHR];
        for (int i = 0; i < NTHR; i++)
            REQUIRE(pthread_create(&t[i], NULL, rust_like, NULL) == 0, "create");
        for (int i = 0; i < NTHR; i++)
            pthread_join(t[i], NULL);
    }
    printf("1: %d threads set, used, disabled and unmapped an alternate stack\n",
           ROUNDS * NTHR);

    current_probe = "2: each thread's own";
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t a, b;
    pthread_create(&a, NULL, with_alt, NULL);
    pthread_create(&b, NULL, without_alt, NULL);
    void *ra = NULL, *rb = NULL;
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    long va = (long)(intptr_t)ra;
    printf("2: with one: saw it %ld of %d times, handler on it %ld, SS_ONSTACK there %d\n",
           va / 10, STEPS, va % 10, (int)handler_onstack);
    printf("2: without: saw SS_DISABLE %ld of %d times\n", (long)(intptr_t)rb, STEPS);
    stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(sp[i], NULL);
    alarm(0);
    return probe_exit("sigaltstack_threads");
}
