/* dtor_raw_wait — a thread's TSD destructor and thread_local destructor that
 * wait with their own system call (a futex, as libgomp's destructor does for a
 * thread that used OpenMP) for a thread that is still computing.
 *
 * A worker sets a TSD value (destructor: wait on a futex word with a raw
 * `syscall` instruction until another thread sets it) and returns. A second
 * thread computes (no call at all) until the worker has begun to exit, then
 * sets the word and wakes it. Three rounds; then the same with a C++-less
 * thread_local destructor registered with __cxa_thread_atexit_impl, then with
 * a pthread_once init routine that waits so (the worker calls pthread_once),
 * then with a pthread_cleanup_push handler run by pthread_exit's unwinding,
 * and by a cancellation's.
 *
 * Checks: every round ends, the destructors ran once each.
 * Under bobbin at BOBBIN_MAXPROCS=1 the destructor kept the only processor
 * while asleep in the kernel (bobbin's exit code was marked below it, and
 * sysmon does not take the P from a thread asleep under bobbin's frames): the
 * computing thread never ran, and the process hung (libgomp: any thread that
 * used OpenMP hung in its exit). A cleanup handler that slept so had its P
 * taken by sysmon, and the unwinding's landing took one back without clearing
 * the M's note of it: the thread's exit took a P a second time and bobbin
 * aborted ("casgstatus: G3 is in status 2, not 3"), 2 runs in 3 at P=1.
 *
 * stdout: one line per kind.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>

#define PROBE_NAME "dtor_raw_wait"
#include "probe.h"

static volatile int word, exiting;
static atomic_int ran;
static pthread_key_t key;

static long raw_futex(volatile int *addr, int op, int val)
{
    return probe_raw_syscall6(SYS_futex, (long)addr, op, val, 0, 0, 0);
}

static void wait_word(void)
{
    exiting = 1;
    while (!word)
        raw_futex(&word, FUTEX_WAIT_PRIVATE, 0);
    atomic_fetch_add(&ran, 1);
}

static void tsd_dtor(void *v)
{
    (void)v;
    wait_word();
}

static void tl_dtor(void *v)
{
    (void)v;
    wait_word();
}

extern int __cxa_thread_atexit_impl(void (*fn)(void *), void *arg, void *dso);
extern void *__dso_handle;

static pthread_once_t onces[3] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};
static int once_round;

static void cleanup_wait(void *v)
{
    (void)v;
    wait_word();
}

static void *worker(void *arg)
{
    long kind = (long)arg;
    if (kind == 3 || kind == 4) {
        pthread_cleanup_push(cleanup_wait, NULL);
        if (kind == 3)
            pthread_exit(NULL);
        pthread_cancel(pthread_self());
        pthread_testcancel();
        pthread_cleanup_pop(0);
        return arg; /* not reached: the cancel unwinds */
    }
    if (kind == 1)
        __cxa_thread_atexit_impl(tl_dtor, NULL, &__dso_handle);
    else if (kind == 2)
        pthread_once(&onces[once_round], wait_word);
    else
        pthread_setspecific(key, (void *)1);
    return NULL;
}

static void *computer(void *arg)
{
    (void)arg;
    while (!exiting)
        ; /* computes, no call */
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < 20000000UL; i++)
        x += i;
    word = 1;
    raw_futex(&word, FUTEX_WAKE_PRIVATE, 1 << 30);
    return NULL;
}

static int rounds(void *kind)
{
    int before = atomic_load(&ran);
    for (int r = 0; r < 3; r++) {
        once_round = r;
        word = 0;
        exiting = 0;
        pthread_t c, w;
        REQUIRE(pthread_create(&c, NULL, computer, NULL) == 0, "create");
        REQUIRE(pthread_create(&w, NULL, worker, kind) == 0, "create");
        pthread_join(w, NULL);
        pthread_join(c, NULL);
    }
    return atomic_load(&ran) - before;
}

static const char *const kinds[] = {
    "TSD destructor",
    "thread_local destructor",
    "pthread_once init routine",
    "cleanup handler run by pthread_exit",
    "cleanup handler run by a cancellation",
};

int main(void)
{
    signal(SIGALRM, on_alarm); /* probe.h's watchdog */
    alarm(60);
    REQUIRE(pthread_key_create(&key, tsd_dtor) == 0, "pthread_key_create");
    for (long k = 0; k < (long)(sizeof kinds / sizeof kinds[0]); k++) {
        current_probe = kinds[k];
        int n = rounds((void *)k);
        CHECK(n == 3, "%s: ran %d times of 3", kinds[k], n);
        printf("%s waiting in its own futex call: %d of 3 rounds ended\n", kinds[k], n);
    }
    return probe_exit("dtor_raw_wait");
}
