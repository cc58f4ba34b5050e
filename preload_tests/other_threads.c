/* other_threads — calls that name another thread, live or ended, answer
 * as NPTL's; pthread_once survives an init routine that ends its thread.
 *
 * 1. Kernel state set from outside: main sets the CPU affinity (one CPU
 *    the process may use) of a thread that sleeps and of one that spins,
 *    and the scheduling policy (SCHED_BATCH) of the sleeper. Both then
 *    look at their own state (sched_getaffinity(0), sched_getscheduler(0))
 *    and print it; main reads it back with pthread_getaffinity_np and
 *    pthread_getschedparam. Under bobbin such a thread has no OS thread of
 *    its own until then: these calls failed with EINVAL, and they must
 *    instead take effect by the thread's next switch, as if it had made
 *    them itself. Invalid policies and priorities give NPTL's answers.
 * 2. A thread that has ended and is not joined yet: the scheduling calls
 *    give ESRCH, the name calls ENOENT, pthread_getcpuclockid and
 *    pthread_sigqueue ESRCH, pthread_kill and pthread_cancel 0, and the
 *    affinity calls act on the caller (NPTL asks the kernel about tid 0).
 *    bobbin answered 0 (or EINVAL) from the thread's stored attributes.
 * 3. Attributes a new thread takes: pthread_attr_setsigmask_np's mask,
 *    pthread_attr_setaffinity_np's CPUs (bobbin ignored both), an
 *    explicit SCHED_FIFO (where the process may have it), a policy
 *    inherited from a FIFO creator (bobbin only stored them); then a plain
 *    thread finds none of it (an OS thread that ran one kept its policy).
 * 4. pthread_once whose init routine calls pthread_exit: as if
 *    pthread_once had never been called, so the next caller runs init
 *    again (POSIX; bobbin's left the control "in progress" and the next
 *    caller waited for ever). And one cancelled inside init while another
 *    thread waits in pthread_once for it: the waiter runs init.
 * 5. A thread pinned to one CPU creates a thread with another CPU in its
 *    attributes, and pins a live thread to another CPU: both succeed and
 *    the threads run there (bobbin checked the CPUs against the caller's
 *    own mask and said EINVAL: libgomp with OMP_PROC_BIND, which pins main
 *    first, could start no worker).
 * A watchdog (alarm) turns a hang into exit 1.
 */
#include <errno.h>
#include <semaphore.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "other_threads"
#include "probe.h"

#define SHOW(name, r) printf("%-40s %s\n", name, (r) ? strerrorname_np(r) : "0")

static atomic_int look, spin_stop;
static int chosen; /* the one CPU both get */

static void report_self(const char *who)
{
    cpu_set_t cs;
    CPU_ZERO(&cs);
    sched_getaffinity(0, sizeof cs, &cs);
    printf("%s: %d CPU(s), the chosen one: %d, policy %d\n", who, CPU_COUNT(&cs),
           CPU_ISSET(chosen, &cs) ? 1 : 0, sched_getscheduler(0));
}

static void *sleeper(void *arg)
{
    while (!atomic_load(&look))
        usleep(1000);
    report_self("sleeper");
    return arg;
}

static void *spinner(void *arg)
{
    volatile unsigned long x = 0;
    while (!atomic_load(&spin_stop))
        x++;
    report_self("spinner");
    return arg;
}

static void kernel_state(void)
{
    cpu_set_t allowed;
    REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0, "sched_getaffinity");
    for (chosen = 0; chosen < CPU_SETSIZE && !CPU_ISSET(chosen, &allowed); chosen++)
        ;
    pthread_t s, p;
    REQUIRE(pthread_create(&s, NULL, sleeper, NULL) == 0, "pthread_create");
    REQUIRE(pthread_create(&p, NULL, spinner, NULL) == 0, "pthread_create");
    usleep(20 * 1000);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(chosen, &one);
    SHOW("setaffinity(sleeper)", pthread_setaffinity_np(s, sizeof one, &one));
    SHOW("setaffinity(spinner)", pthread_setaffinity_np(p, sizeof one, &one));
    cpu_set_t none;
    CPU_ZERO(&none);
    SHOW("setaffinity(sleeper, no CPU)", pthread_setaffinity_np(s, sizeof none, &none));
    struct sched_param sp = {0};
    SHOW("setschedparam(sleeper, BATCH, 0)", pthread_setschedparam(s, SCHED_BATCH, &sp));
    sp.sched_priority = 5;
    SHOW("setschedparam(sleeper, OTHER, 5)", pthread_setschedparam(s, SCHED_OTHER, &sp));
    SHOW("setschedparam(sleeper, policy 42)", pthread_setschedparam(s, 42, &sp));
    sp.sched_priority = 0;
    SHOW("setschedparam(sleeper, FIFO, 0)", pthread_setschedparam(s, SCHED_FIFO, &sp));
    cpu_set_t got;
    SHOW("getaffinity(spinner)", pthread_getaffinity_np(p, sizeof got, &got));
    printf("  %d CPU(s), the chosen one: %d\n", CPU_COUNT(&got), CPU_ISSET(chosen, &got) ? 1 : 0);
    int policy = -1;
    SHOW("getschedparam(sleeper)", pthread_getschedparam(s, &policy, &sp));
    printf("  policy %d priority %d\n", policy, sp.sched_priority);
    usleep(30 * 1000);
    atomic_store(&look, 1);
    pthread_join(s, NULL);
    atomic_store(&spin_stop, 1);
    pthread_join(p, NULL);
}

static void *quick(void *arg)
{
    return arg;
}

static void ended_thread(void)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, quick, NULL) == 0, "pthread_create");
    usleep(50 * 1000); /* it has ended */
    int policy;
    struct sched_param sp = {0};
    SHOW("getschedparam(ended)", pthread_getschedparam(t, &policy, &sp));
    SHOW("setschedparam(ended)", pthread_setschedparam(t, SCHED_OTHER, &sp));
    SHOW("setschedprio(ended)", pthread_setschedprio(t, 0));
    char name[32];
    SHOW("getname_np(ended)", pthread_getname_np(t, name, sizeof name));
    SHOW("getname_np(ended, 8 bytes)", pthread_getname_np(t, name, 8));
    SHOW("setname_np(ended)", pthread_setname_np(t, "x"));
    clockid_t c;
    SHOW("getcpuclockid(ended)", pthread_getcpuclockid(t, &c));
    SHOW("sigqueue(ended)", pthread_sigqueue(t, SIGUSR1, (union sigval){0}));
    SHOW("kill(ended, 0)", pthread_kill(t, 0));
    SHOW("cancel(ended)", pthread_cancel(t));
    cpu_set_t mine, got;
    sched_getaffinity(0, sizeof mine, &mine);
    SHOW("getaffinity(ended)", pthread_getaffinity_np(t, sizeof got, &got));
    printf("  the caller's mask: %d\n", CPU_EQUAL(&mine, &got));
    SHOW("setaffinity(ended, the caller's mask)", pthread_setaffinity_np(t, sizeof mine, &mine));
    SHOW("join(ended)", pthread_join(t, NULL));
}

static pthread_once_t once_exit = PTHREAD_ONCE_INIT, once_cancel = PTHREAD_ONCE_INIT;
static atomic_int exit_runs, cancel_runs, in_init;

static void init_exits(void)
{
    if (atomic_fetch_add(&exit_runs, 1) == 0)
        pthread_exit(NULL);
}

static void *call_once_exit(void *arg)
{
    pthread_once(&once_exit, init_exits);
    return arg;
}

static void init_blocks(void)
{
    if (atomic_fetch_add(&cancel_runs, 1) == 0) {
        atomic_store(&in_init, 1);
        for (;;)
            pause(); /* a cancellation point */
    }
}

static void *call_once_cancel(void *arg)
{
    pthread_once(&once_cancel, init_blocks);
    return arg;
}

static void once_abandoned(void)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, call_once_exit, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    REQUIRE(pthread_create(&t, NULL, call_once_exit, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    printf("once, init ended its thread: init ran %d times\n", atomic_load(&exit_runs));

    pthread_t a, b;
    REQUIRE(pthread_create(&a, NULL, call_once_cancel, NULL) == 0, "pthread_create");
    while (!atomic_load(&in_init))
        usleep(1000);
    REQUIRE(pthread_create(&b, NULL, call_once_cancel, NULL) == 0, "pthread_create");
    usleep(20 * 1000); /* b waits in pthread_once */
    pthread_cancel(a);
    void *ra, *rb;
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    printf("once, init cancelled: first %s, the waiter ran init: %d (runs %d)\n",
           ra == PTHREAD_CANCELED ? "cancelled" : "returned", rb == NULL, atomic_load(&cancel_runs));
}

static void *report_attrs(void *arg)
{
    sigset_t m;
    pthread_sigmask(SIG_BLOCK, NULL, &m);
    struct sched_param kp;
    sched_getparam(0, &kp);
    printf("%s: SIGUSR1 blocked %d, kernel policy %d/%d, ", (const char *)arg,
           sigismember(&m, SIGUSR1), sched_getscheduler(0), kp.sched_priority);
    report_self("sees");
    return NULL;
}

/* attributes of pthread_create that a thread takes with it: a signal mask,
 * a CPU mask, an explicit real-time policy (EPERM natively and under bobbin
 * where the process may not have one), one inherited from its creator */
static void *create_inheriting(void *arg)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, report_attrs, arg) == 0, "pthread_create");
    pthread_join(t, NULL);
    return NULL;
}

static void create_attrs(void)
{
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    SHOW("attr_setsigmask_np", pthread_attr_setsigmask_np(&a, &usr1));
    REQUIRE(pthread_create(&t, &a, report_attrs, "sigmask attr") == 0, "pthread_create");
    pthread_join(t, NULL);
    pthread_attr_destroy(&a);

    pthread_attr_init(&a);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(chosen, &one);
    SHOW("attr_setaffinity_np", pthread_attr_setaffinity_np(&a, sizeof one, &one));
    REQUIRE(pthread_create(&t, &a, report_attrs, "affinity attr") == 0, "pthread_create");
    pthread_join(t, NULL);
    pthread_attr_destroy(&a);

    pthread_attr_init(&a);
    pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(&a, SCHED_FIFO);
    struct sched_param sp = {.sched_priority = 10};
    pthread_attr_setschedparam(&a, &sp);
    int err = pthread_create(&t, &a, report_attrs, "explicit FIFO 10");
    if (err == 0)
        pthread_join(t, NULL); /* (it prints first: it may run before main) */
    SHOW("create explicit FIFO 10", err);
    err = pthread_create(&t, &a, create_inheriting, "inherited from a FIFO 10 creator");
    if (err == 0)
        pthread_join(t, NULL);
    pthread_attr_destroy(&a);
    /* after them, a plain thread: none of that state on its OS thread */
    REQUIRE(pthread_create(&t, NULL, report_attrs, "plain") == 0, "pthread_create");
    pthread_join(t, NULL);
}

/* 5: a thread pinned to one CPU gives another thread a different one */
static int pin_a, pin_b;

static void *report_pin(void *arg)
{
    (void)arg;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    sched_getaffinity(0, sizeof cs, &cs);
    printf("  its CPUs: %s\n", CPU_COUNT(&cs) == 1 && CPU_ISSET(pin_b, &cs) ? "the other one" : "others");
    return NULL;
}

static void *wait_pin(void *arg)
{
    sem_t *go = arg;
    while (sem_wait(go) != 0)
        ;
    return report_pin(NULL);
}

static void *pinned_creator(void *arg)
{
    (void)arg;
    cpu_set_t a, b;
    CPU_ZERO(&a);
    CPU_SET(pin_a, &a);
    CPU_ZERO(&b);
    CPU_SET(pin_b, &b);
    SHOW("pin itself to one CPU", pthread_setaffinity_np(pthread_self(), sizeof a, &a));
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setaffinity_np(&at, sizeof b, &b);
    pthread_t t;
    int err = pthread_create(&t, &at, report_pin, NULL);
    if (err == 0) /* (its line first, as natively it nearly always is) */
        pthread_join(t, NULL);
    SHOW("create with another CPU", err);
    pthread_attr_destroy(&at);
    sem_t go;
    sem_init(&go, 0, 0);
    REQUIRE(pthread_create(&t, NULL, wait_pin, &go) == 0, "pthread_create");
    SHOW("setaffinity(other thread, another CPU)", pthread_setaffinity_np(t, sizeof b, &b));
    sem_post(&go);
    pthread_join(t, NULL);
    return NULL;
}

static void pinned_pins_other(void)
{
    cpu_set_t allowed;
    REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0, "sched_getaffinity");
    pin_a = pin_b = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed)) {
            if (pin_a < 0)
                pin_a = c;
            else if (pin_b < 0)
                pin_b = c;
        }
    if (pin_b < 0) {
        printf("pinned creator: one CPU only, nothing to show\n");
        return;
    }
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, pinned_creator, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
}

int main(void)
{
    signal(SIGALRM, on_alarm); /* probe.h's watchdog */
    alarm(30);
    current_probe = "kernel state set from outside";
    kernel_state();
    current_probe = "attributes of pthread_create";
    create_attrs();
    current_probe = "a thread that has ended";
    ended_thread();
    current_probe = "pthread_once abandoned by init";
    once_abandoned();
    current_probe = "a pinned thread pins another";
    pinned_pins_other();
    return probe_exit("other_threads");
}
