/* cancel_async — PTHREAD_CANCEL_ASYNCHRONOUS on threads that never reach a
 * cancellation point.
 *
 * Natively SIGCANCEL interrupts the thread wherever it is and it unwinds from
 * there. Under bobbin a green thread computing in the program's own code is
 * stopped by the preemption signal at a safe point and unwinds the same way.
 * Four threads (more than MAXPROCS, so some wait in a run queue when the
 * cancel comes) switch to asynchronous cancellation and spin on arithmetic
 * with no call at all; main cancels each one. Expected for each: the join
 * value PTHREAD_CANCELED, its cleanup handler run exactly once, the code after
 * the loop never reached. Then a thread that turns asynchronous cancellation
 * on only after the cancel is already pending must act at once (in
 * pthread_setcanceltype), and one that disabled cancellation must not be
 * cancelled until it enables it again.
 *
 * A watchdog ends the test (exit 1) if a cancel never acts.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

enum { NSPIN = 4 };

struct spinner {
    atomic_int started, cleanups, after;
    volatile uint64_t acc;
};

static void count_cleanup(void *arg)
{
    struct spinner *s = arg;
    atomic_fetch_add(&s->cleanups, 1);
}

static void on_alarm(int sig)
{
    static const char msg[] = "cancel_async: watchdog: a cancel never acted\n";
    (void)sig;
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void *spin_thread(void *arg)
{
    struct spinner *s = arg;
    int old;
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
    pthread_cleanup_push(count_cleanup, s);
    atomic_store(&s->started, 1);
    uint64_t x = 1;
    for (;;) { /* no call: only an asynchronous cancel can end this */
        x = x * 6364136223846793005u + 1442695040888963407u;
        s->acc = x;
    }
    atomic_store(&s->after, 1);
    pthread_cleanup_pop(0);
    return (void *)1;
}

static atomic_int gate;

/* the cancel is pending before the thread makes itself asynchronous */
static void *late_async_thread(void *arg)
{
    struct spinner *s = arg;
    pthread_cleanup_push(count_cleanup, s);
    atomic_store(&s->started, 1);
    while (!atomic_load(&gate))
        ; /* no cancellation point while the cancel arrives */
    int old;
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old); /* acts here */
    atomic_store(&s->after, 1);
    pthread_cleanup_pop(0);
    return (void *)1;
}

/* asynchronous but disabled: the cancel waits until it is enabled again */
static void *disabled_thread(void *arg)
{
    struct spinner *s = arg;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
    pthread_cleanup_push(count_cleanup, s);
    atomic_store(&s->started, 1);
    uint64_t x = 7;
    while (!atomic_load(&gate)) {
        x = x * 2862933555777941757u + 3037000493u;
        s->acc = x;
    }
    atomic_store(&s->after, 1); /* reached: cancellation was disabled */
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old); /* acts here */
    atomic_store(&s->after, 2);
    pthread_cleanup_pop(0);
    return (void *)1;
}

static void wait_started(struct spinner *s)
{
    while (!atomic_load(&s->started))
        usleep(1000);
}

static void report(const char *what, pthread_t t, struct spinner *s, int want_after)
{
    void *ret = NULL;
    int jr = pthread_join(t, &ret);
    int canceled = jr == 0 && ret == PTHREAD_CANCELED;
    printf("%-14s canceled=%d cleanups=%d after=%d\n", what, canceled,
           atomic_load(&s->cleanups), atomic_load(&s->after));
    CHECK(canceled, "%s: join %d, value %p, want PTHREAD_CANCELED", what, jr, ret);
    CHECK(atomic_load(&s->cleanups) == 1, "%s: %d cleanup runs, want 1", what,
          atomic_load(&s->cleanups));
    CHECK(atomic_load(&s->after) == want_after, "%s: after=%d, want %d", what,
          atomic_load(&s->after), want_after);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(20);

    static struct spinner sp[NSPIN];
    pthread_t t[NSPIN];
    for (int i = 0; i < NSPIN; i++)
        REQUIRE(pthread_create(&t[i], NULL, spin_thread, &sp[i]) == 0, "pthread_create");
    for (int i = 0; i < NSPIN; i++)
        wait_started(&sp[i]);
    usleep(20000); /* all of them deep in their loops */
    for (int i = 0; i < NSPIN; i++)
        CHECK(pthread_cancel(t[i]) == 0, "pthread_cancel spinner %d", i);
    for (int i = 0; i < NSPIN; i++) {
        char what[32];
        snprintf(what, sizeof what, "spinner %d", i);
        report(what, t[i], &sp[i], 0);
    }

    static struct spinner late, dis;
    pthread_t tl, td;
    REQUIRE(pthread_create(&tl, NULL, late_async_thread, &late) == 0, "pthread_create");
    REQUIRE(pthread_create(&td, NULL, disabled_thread, &dis) == 0, "pthread_create");
    wait_started(&late);
    wait_started(&dis);
    CHECK(pthread_cancel(tl) == 0, "pthread_cancel late");
    CHECK(pthread_cancel(td) == 0, "pthread_cancel disabled");
    usleep(20000); /* the disabled one must still be running */
    atomic_store(&gate, 1);
    report("late async", tl, &late, 0);
    report("disabled", td, &dis, 1);

    printf("cancel_async: done\n");
    return probe_exit("cancel_async");
}
