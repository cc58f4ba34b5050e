/* lifecycle_errors — the error codes and attribute round trips NPTL gives.
 *
 * One line per probe, "<what>: <result>", so a native run and a bobbin run can be
 * compared line by line; each probe also checks the NPTL answer itself. Threads
 * that are joined or detached while "running" really are running: they spin on a
 * flag (with sched_yield) until main lets them go, so no probe touches a thread
 * handle after the thread has gone away (which would be undefined).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "probe.h"

static atomic_int release_flag;
static atomic_int started;
static pthread_t seen_self;

static void *spin(void *arg)
{
    seen_self = pthread_self();
    atomic_fetch_add(&started, 1);
    while (!atomic_load(&release_flag))
        sched_yield();
    return arg;
}

static const char *ename(int rc)
{
    const char *n = rc == 0 ? "0" : strerrorname_np(rc);
    return n ? n : "?";
}

static void expect(const char *what, int rc, int want)
{
    printf("%s: %s\n", what, ename(rc));
    CHECK(rc == want, "%s: got %s, want %s", what, ename(rc), ename(want));
}

static void expect_val(const char *what, long got, long want)
{
    printf("%s: %ld\n", what, got);
    CHECK(got == want, "%s: got %ld, want %ld", what, got, want);
}

static pthread_t start_spinner(const pthread_attr_t *attr)
{
    pthread_t t;
    int before = atomic_load(&started);
    int rc = pthread_create(&t, attr, spin, (void *)7);
    REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    while (atomic_load(&started) == before)
        sched_yield();
    return t;
}

static void join_probes(void)
{
    expect("join self", pthread_join(pthread_self(), NULL), EDEADLK);

    atomic_store(&release_flag, 0);
    pthread_t t = start_spinner(NULL);
    expect_val("pthread_equal(created, its own pthread_self)", pthread_equal(t, seen_self) != 0, 1);
    expect_val("pthread_equal(created, main)", pthread_equal(t, pthread_self()) != 0, 0);
    expect_val("pthread_equal(self, self)", pthread_equal(pthread_self(), pthread_self()) != 0, 1);
    expect("tryjoin_np running", pthread_tryjoin_np(t, NULL), EBUSY);

    struct timespec past;
    clock_gettime(CLOCK_REALTIME, &past);
    past.tv_sec -= 1;
    expect("timedjoin_np past deadline", pthread_timedjoin_np(t, NULL, &past), ETIMEDOUT);

    struct timespec soon;
    clock_gettime(CLOCK_REALTIME, &soon);
    soon.tv_nsec += 20 * 1000 * 1000;
    if (soon.tv_nsec >= 1000000000) {
        soon.tv_sec++;
        soon.tv_nsec -= 1000000000;
    }
    expect("timedjoin_np 20ms on running", pthread_timedjoin_np(t, NULL, &soon), ETIMEDOUT);

    atomic_store(&release_flag, 1);
    void *ret = NULL;
    expect("join after release", pthread_join(t, &ret), 0);
    expect_val("join return value", (long)(intptr_t)ret, 7);
}

static atomic_int self_detached_done, schedprio_rc = -1;
static void *detach_self(void *arg)
{
    (void)arg;
    atomic_store(&schedprio_rc, pthread_setschedprio(pthread_self(), 0));
    pthread_detach(pthread_self());
    atomic_store(&self_detached_done, 1);
    return NULL;
}

static void detach_probes(void)
{
    atomic_store(&release_flag, 0);
    pthread_t t = start_spinner(NULL);
    expect("detach running", pthread_detach(t), 0);
    expect("detach twice", pthread_detach(t), EINVAL);
    expect("join detached", pthread_join(t, NULL), EINVAL);
    /* glibc 2.36 tests "still running" before "detached": EBUSY, not EINVAL. */
    expect("tryjoin_np detached running", pthread_tryjoin_np(t, NULL), EBUSY);

    pthread_attr_t a, got;
    int state = -1;
    pthread_attr_init(&a);
    expect("attr_setdetachstate bad value", pthread_attr_setdetachstate(&a, 42), EINVAL);
    expect("attr_setdetachstate DETACHED", pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED), 0);
    pthread_t d = start_spinner(&a);
    expect("getattr_np detached thread", pthread_getattr_np(d, &got), 0);
    pthread_attr_getdetachstate(&got, &state);
    expect_val("getattr_np detachstate is DETACHED", state == PTHREAD_CREATE_DETACHED, 1);
    pthread_attr_destroy(&got);
    expect("join created-detached", pthread_join(d, NULL), EINVAL);
    expect("detach created-detached", pthread_detach(d), EINVAL);
    pthread_attr_destroy(&a);
    atomic_store(&release_flag, 1);   /* both detached threads now end on their own */

    /* Outside POSIX (the handle of a detached thread that ended), but what
     * NPTL answers while no thread was created since, its descriptor being
     * cached: EINVAL, where a runtime that forgot the thread was detached
     * would wait for an exit long past. */
    pthread_t e;
    if (pthread_create(&e, NULL, detach_self, NULL) == 0) {
        while (!atomic_load(&self_detached_done))
            sched_yield();
        expect("setschedprio of a thread, to 0", atomic_load(&schedprio_rc), 0);
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL); /* it has returned by now */
        expect("join of a thread that detached itself and ended", pthread_join(e, NULL),
               EINVAL);
    }
}

static void attr_probes(void)
{
    pthread_attr_t a, got;
    size_t size = 0, guard = 0;
    void *addr = NULL;
    int local;

    pthread_attr_init(&a);
    expect("attr_setstacksize 1024", pthread_attr_setstacksize(&a, 1024), EINVAL);
    expect("attr_setstacksize 256KiB", pthread_attr_setstacksize(&a, 256 * 1024), 0);
    expect("attr_setguardsize 8KiB", pthread_attr_setguardsize(&a, 8192), 0);
    pthread_attr_getguardsize(&a, &guard);
    expect_val("attr_getguardsize", (long)guard, 8192);

    atomic_store(&release_flag, 0);
    pthread_t t = start_spinner(&a);
    expect("getattr_np", pthread_getattr_np(t, &got), 0);
    pthread_attr_getstack(&got, &addr, &size);
    expect_val("getattr_np stacksize", (long)size, 256 * 1024);
    pthread_attr_getguardsize(&got, &guard);
    expect_val("getattr_np guardsize", (long)guard, 8192);
    pthread_attr_destroy(&got);
    atomic_store(&release_flag, 1);
    expect("join", pthread_join(t, NULL), 0);
    pthread_attr_destroy(&a);

    /* The calling thread's own stack contains its locals. */
    expect("getattr_np self", pthread_getattr_np(pthread_self(), &got), 0);
    pthread_attr_getstack(&got, &addr, &size);
    expect_val("main's stack holds its locals",
               (char *)&local >= (char *)addr && (char *)&local < (char *)addr + size, 1);
    pthread_attr_destroy(&got);
}

/* its name at its start (PR_GET_NAME), then again once main renamed it */
static void *name_reader(void *arg)
{
    char (*names)[17] = arg;
    char first[17] = {0};
    prctl(PR_GET_NAME, first);
    memcpy(names[0], first, sizeof first);
    while (!atomic_load(&release_flag))
        sched_yield();
    prctl(PR_GET_NAME, names[1]);
    return NULL;
}

static void name_probes(void)
{
    char buf[32];

    atomic_store(&release_flag, 0);
    pthread_t t = start_spinner(NULL);
    expect("setname_np other", pthread_setname_np(t, "bobbin-worker"), 0);
    memset(buf, 0, sizeof buf);
    expect("getname_np other", pthread_getname_np(t, buf, sizeof buf), 0);
    printf("name read back: %s\n", buf);
    CHECK(strcmp(buf, "bobbin-worker") == 0, "name %s", buf);
    expect("setname_np 16 chars", pthread_setname_np(t, "0123456789abcdef"), ERANGE);
    expect("getname_np buffer 8", pthread_getname_np(t, buf, 8), ERANGE);
    atomic_store(&release_flag, 1);
    expect("join", pthread_join(t, NULL), 0);

    expect("setname_np self", pthread_setname_np(pthread_self(), "lifecycle-main"), 0);
    memset(buf, 0, sizeof buf);
    expect("getname_np self", pthread_getname_np(pthread_self(), buf, sizeof buf), 0);
    printf("name read back: %s\n", buf);
    CHECK(strcmp(buf, "lifecycle-main") == 0, "name %s", buf);

    /* prctl(PR_GET_NAME) answers the same as getname_np: a name a thread
     * set itself, one another thread set for it, and the one a new thread
     * starts with (its creator's, as the kernel copies comm) */
    /* main's name is the process's, in /proc (what ps and pgrep read) */
    char comm[32] = {0};
    FILE *f = fopen("/proc/self/comm", "r");
    if (f) {
        if (fgets(comm, sizeof comm, f))
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
    }
    printf("/proc/self/comm: %s\n", comm);
    CHECK(strcmp(comm, "lifecycle-main") == 0, "/proc/self/comm %s", comm);
    char pr[17] = {0};
    expect("prctl PR_GET_NAME self", prctl(PR_GET_NAME, pr), 0);
    printf("PR_GET_NAME: %s\n", pr);
    CHECK(strcmp(pr, "lifecycle-main") == 0, "PR_GET_NAME %s", pr);
    static char names[2][17];
    atomic_store(&release_flag, 0);
    expect("create name reader", pthread_create(&t, NULL, name_reader, names), 0);
    while (names[0][0] == 0 && !atomic_load(&release_flag))
        sched_yield();
    expect("setname_np reader", pthread_setname_np(t, "renamed"), 0);
    atomic_store(&release_flag, 1);
    expect("join", pthread_join(t, NULL), 0);
    printf("PR_GET_NAME in a new thread: %s, after setname_np from main: %s\n", names[0],
           names[1]);
    CHECK(strcmp(names[0], "lifecycle-main") == 0 && strcmp(names[1], "renamed") == 0,
          "PR_GET_NAME %s, %s", names[0], names[1]);

    /* and PR_SET_NAME on main renames the process, as getname_np sees it */
    expect("prctl PR_SET_NAME main", prctl(PR_SET_NAME, "main-prctl"), 0);
    memset(buf, 0, sizeof buf);
    expect("getname_np self", pthread_getname_np(pthread_self(), buf, sizeof buf), 0);
    memset(comm, 0, sizeof comm);
    f = fopen("/proc/self/comm", "r");
    if (f) {
        if (fgets(comm, sizeof comm, f))
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
    }
    printf("after PR_SET_NAME: getname_np %s, /proc/self/comm %s\n", buf, comm);
    CHECK(strcmp(buf, "main-prctl") == 0 && strcmp(comm, "main-prctl") == 0, "%s %s", buf, comm);
}

int main(void)
{
    join_probes();
    detach_probes();
    attr_probes();
    name_probes();
    return probe_exit("lifecycle_errors");
}
