/* probe.h — the few helpers every preload test shares.
 *
 * A preload test is a plain pthread program: it must build and pass without bobbin,
 * print the same stdout natively and under LD_PRELOAD=libbobbin.so, and exit
 * 0 (pass), 1 (fail) or 77 (skip). It never prints thread counts or timings: the
 * harness measures those, and anything timing-dependent would make the two runs'
 * stdout differ.
 *
 * CHECK() records a failure and carries on, so one run reports every broken
 * property; probe_exit() turns the record into the exit status. Failure messages go
 * to stderr, which the harness does not compare.
 */
#ifndef BOBBIN_PROBE_H
#define BOBBIN_PROBE_H

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#define PROBE_PASS 0
#define PROBE_FAIL 1
#define PROBE_SKIP 77

static atomic_int probe_failures;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            if (atomic_fetch_add(&probe_failures, 1) < 20) {                  \
                fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__,        \
                        __LINE__, #cond);                                     \
                fprintf(stderr, __VA_ARGS__);                                 \
                fputc('\n', stderr);                                          \
            }                                                                 \
        }                                                                     \
    } while (0)

/* For calls whose failure means the test cannot go on (pthread_create, malloc). */
#define REQUIRE(cond, ...)                                                    \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: REQUIRE(%s) failed: ", __FILE__, __LINE__,\
                    #cond);                                                   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            exit(PROBE_FAIL);                                                 \
        }                                                                     \
    } while (0)

/* an absolute time ms milliseconds from now on clock (timed waits' deadlines) */
static inline struct timespec probe_in_ms(clockid_t clock, long ms)
{
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_nsec += ms * 1000000;
    t.tv_sec += t.tv_nsec / 1000000000;
    t.tv_nsec %= 1000000000;
    return t;
}

/* a thread's body that computes until the atomic_int at stop is set */
static inline void *probe_spin(void *stop)
{
    volatile unsigned long x = 0;
    while (!atomic_load_explicit((atomic_int *)stop, memory_order_relaxed))
        x++;
    return NULL;
}

/* A system call made by the program's own `syscall` instruction, not
 * through libc (what bobbin cannot interpose): the kernel's convention, a
 * negative errno, errno untouched. x86_64. */
static inline long probe_raw_syscall6(long n, long a1, long a2, long a3, long a4, long a5,
                                      long a6)
{
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

/* a thread body that computes without a call until *(atomic_int *)stop */
static inline void *probe_compute(void *stop)
{
    volatile unsigned long x = 0;
    while (!atomic_load_explicit((atomic_int *)stop, memory_order_relaxed))
        x++;
    return NULL;
}

static inline int probe_exit(const char *name)
{
    int n = atomic_load(&probe_failures);
    fflush(stdout);
    if (n != 0) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, n);
        return PROBE_FAIL;
    }
    return PROBE_PASS;
}

#ifdef PROBE_NAME
#include <string.h>
#include <unistd.h>

/* A watchdog for tests that run named probes: the test sets current_probe
 * before each and arms alarm(); on SIGALRM it says which one hung and fails. */
static const char *volatile current_probe = "start";

static void on_alarm(int sig)
{
    static const char pre[] = PROBE_NAME ": watchdog: hung in probe: ";
    const char *p = current_probe;
    (void)sig;
    (void)!write(2, pre, sizeof pre - 1);
    (void)!write(2, p, strlen(p));
    (void)!write(2, "\n", 1);
    _exit(1);
}
#endif

#ifdef SIGALRM
#include <string.h>
/* sig's action: handler h with flags, nothing else blocked while it runs
 * (for tests that include <signal.h> first); 0 or -1 as sigaction */
static inline int probe_on_signal(int sig, void (*h)(int), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL);
}

/* the same with an SA_SIGINFO handler */
static inline int probe_on_siginfo(int sig, void (*h)(int, siginfo_t *, void *), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = h;
    sa.sa_flags = flags | SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL);
}
#endif

/* fn runs on a stack of its own (a makecontext coroutine) on the calling
 * thread, which goes on when fn returns: code off the thread's own stack */
static inline void probe_on_coroutine(void (*fn)(void))
{
    enum { SIZE = 256 * 1024 };
    ucontext_t back, co;
    char *stack = malloc(SIZE);
    REQUIRE(stack != NULL && getcontext(&co) == 0, "coroutine");
    co.uc_stack.ss_sp = stack;
    co.uc_stack.ss_size = SIZE;
    co.uc_link = &back;
    makecontext(&co, fn, 0);
    REQUIRE(swapcontext(&back, &co) == 0, "swapcontext");
    free(stack);
}

/* fn runs once, 1 ms from now, on a thread glibc makes for it (a
 * SIGEV_THREAD timer's helper: a thread bobbin did not make). The timer is
 * the caller's to delete. */
static inline timer_t probe_callback_soon(void (*fn)(union sigval))
{
    struct sigevent se;
    memset(&se, 0, sizeof se);
    se.sigev_notify = SIGEV_THREAD;
    se.sigev_notify_function = fn;
    timer_t tm;
    REQUIRE(timer_create(CLOCK_MONOTONIC, &se, &tm) == 0, "timer_create");
    struct itimerspec its = {{0, 0}, {0, 1000000}};
    REQUIRE(timer_settime(tm, 0, &its, NULL) == 0, "timer_settime");
    return tm;
}

#endif
