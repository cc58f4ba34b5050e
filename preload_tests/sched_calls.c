/* sched_calls — the sched_* calls that name a thread by id name the thread.
 *
 *  - 8 threads each read their attributes with syscall(SYS_sched_getattr,
 *    gettid()) and set the same ones back with syscall(SYS_sched_setattr,
 *    gettid()), as GLib does for every worker of a shared thread pool, and
 *    ask sched_getscheduler(gettid()) and sched_getparam(gettid()): all
 *    succeed, SCHED_OTHER, priority 0;
 *  - a thread moves itself to SCHED_BATCH with sched_setscheduler(0, ...),
 *    a second with sched_setscheduler(gettid(), ...), a third to SCHED_IDLE
 *    with syscall(SYS_sched_setattr, gettid()), a fourth with
 *    sched_setparam(0) of its priority 0 (no change); then each sleeps 1 ms
 *    ROUNDS times and reads its policy after each sleep (sched_getscheduler(0),
 *    sched_getattr): always its own, while NOTHERS threads sleep beside them
 *    and read theirs: always SCHED_OTHER. main reads the setters' policies
 *    with pthread_getschedparam.
 * Under bobbin sched_getattr and sched_setattr with a thread's gettid()
 * failed with ESRCH (every GStreamer run printed a GLib-CRITICAL), and
 * sched_setscheduler(0) changed the OS thread, whose policy the threads it
 * ran next took. A thread that saw a wrong value prints which.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PROBE_NAME "sched_calls"
#include "probe.h"

enum { NREAD = 8, NOTHERS = 5, ROUNDS = 120 };

struct kattr { /* the kernel's struct sched_attr, the fields up to SCHED_DEADLINE's */
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
};

static long getattr_of(pid_t tid, struct kattr *a)
{
    memset(a, 0, sizeof *a);
    return syscall(SYS_sched_getattr, tid, a, sizeof *a, 0);
}

static void *reader(void *arg)
{
    (void)arg;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    struct kattr a;
    long r = getattr_of(tid, &a);
    CHECK(r == 0 && a.sched_policy == SCHED_OTHER, "sched_getattr(gettid): %ld (%s) policy %u", r,
          r ? strerror(errno) : "", a.sched_policy);
    if (r == 0) {
        r = syscall(SYS_sched_setattr, tid, &a, 0);
        CHECK(r == 0, "sched_setattr(gettid) of what it read: %s", strerror(errno));
    }
    int pol = sched_getscheduler(tid);
    CHECK(pol == SCHED_OTHER, "sched_getscheduler(gettid): %d (%s)", pol, pol < 0 ? strerror(errno) : "");
    struct sched_param sp = {.sched_priority = -1};
    CHECK(sched_getparam(tid, &sp) == 0 && sp.sched_priority == 0, "sched_getparam(gettid): %s prio %d",
          strerror(errno), sp.sched_priority);
    return NULL;
}

static pthread_barrier_t ready;
static const int want_policy[4] = {SCHED_BATCH, SCHED_BATCH, SCHED_IDLE, SCHED_OTHER};

/* the current policy, asked both ways; -1 if they disagree */
static int policy_now(void)
{
    struct kattr a;
    int p = sched_getscheduler(0);
    if (getattr_of(0, &a) != 0 || (int)a.sched_policy != p)
        return -1;
    return p;
}

static void *setter(void *arg)
{
    long k = (long)arg;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    struct sched_param zero = {.sched_priority = 0};
    int r;
    if (k == 0) {
        r = sched_setscheduler(0, SCHED_BATCH, &zero);
    } else if (k == 1) {
        r = sched_setscheduler(tid, SCHED_BATCH, &zero);
    } else if (k == 2) {
        struct kattr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.sched_policy = SCHED_IDLE;
        r = (int)syscall(SYS_sched_setattr, tid, &a, 0);
    } else {
        r = sched_setparam(0, &zero);
    }
    CHECK(r == 0, "setter %ld: %s", k, strerror(errno));
    pthread_barrier_wait(&ready);
    int bad = 0;
    for (int i = 0; i < ROUNDS; i++) {
        usleep(1000);
        if (policy_now() != want_policy[k])
            bad++;
    }
    CHECK(bad == 0, "setter %ld: %d of %d reads not its own policy %d", k, bad, ROUNDS, want_policy[k]);
    pthread_barrier_wait(&ready); /* main reads the policies */
    pthread_barrier_wait(&ready);
    return NULL;
}

static void *other(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&ready);
    int bad = 0;
    for (int i = 0; i < ROUNDS; i++) {
        usleep(1000);
        if (policy_now() != SCHED_OTHER)
            bad++;
    }
    CHECK(bad == 0, "a thread that set nothing read a policy not SCHED_OTHER %d times of %d", bad, ROUNDS);
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&ready);
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    current_probe = "readers";
    pthread_t t[NREAD];
    for (int i = 0; i < NREAD; i++)
        REQUIRE(pthread_create(&t[i], NULL, reader, NULL) == 0, "create");
    for (int i = 0; i < NREAD; i++)
        pthread_join(t[i], NULL);
    printf("%d threads read and re-set their attributes by gettid()\n", NREAD);

    current_probe = "setters";
    REQUIRE(pthread_barrier_init(&ready, NULL, 4 + NOTHERS + 1) == 0, "barrier");
    pthread_t s[4], o[NOTHERS];
    for (long k = 0; k < 4; k++)
        REQUIRE(pthread_create(&s[k], NULL, setter, (void *)k) == 0, "create");
    for (int i = 0; i < NOTHERS; i++)
        REQUIRE(pthread_create(&o[i], NULL, other, NULL) == 0, "create");
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&ready);
    for (int k = 0; k < 4; k++) {
        int pol = -1;
        struct sched_param sp;
        CHECK(pthread_getschedparam(s[k], &pol, &sp) == 0 && pol == want_policy[k],
              "pthread_getschedparam of setter %d: policy %d, want %d", k, pol, want_policy[k]);
    }
    pthread_barrier_wait(&ready);
    for (int k = 0; k < 4; k++)
        pthread_join(s[k], NULL);
    for (int i = 0; i < NOTHERS; i++)
        pthread_join(o[i], NULL);
    CHECK(policy_now() == SCHED_OTHER, "main's policy %d", policy_now());
    printf("4 threads set their own policies, %d others kept theirs, %d rounds\n", NOTHERS, ROUNDS);
    return probe_exit(PROBE_NAME);
}
