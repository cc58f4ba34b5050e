/* timer_slack.c — every thread keeps the timer slack it has natively.
 *
 * The kernel lets a sleep with a timeout end up to the thread's timer slack
 * late (50 µs by default), and a thread or forked child inherits its
 * creator's. A runtime that changes the slack of the OS threads running the
 * program's threads changes every timeout they wait for: a 5 µs futex wait
 * that natively lasts ~55 µs times out after 5 µs, and a child forked from
 * such a thread inherits the change.
 *
 * Checks, against main's slack at start:
 *   - 64 threads read theirs after sleeping and yielding (so they have moved
 *     between OS threads under an M:N runtime);
 *   - children forked from main and from a thread report theirs;
 *   - a thread that sets its own slack (PR_SET_TIMERSLACK) keeps it across
 *     sleeps and yields, and a child it forks inherits it.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { NTHREADS = 64, OWN_SLACK = 123456 };

static long initial;

static long slack(void)
{
    return prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
}

static void nap(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    sched_yield();
}

/* the slack of a child forked here, read in the child */
static long child_slack(void)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe");
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        long v = slack();
        _exit(write(fds[1], &v, sizeof v) == sizeof v ? 0 : 1);
    }
    close(fds[1]);
    long v = -1;
    CHECK(read(fds[0], &v, sizeof v) == sizeof v, "reading the child's slack");
    close(fds[0]);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child");
    return v;
}

static void *reader(void *arg)
{
    long *out = arg;
    for (int i = 0; i < 5; i++)
        nap();
    *out = slack();
    return NULL;
}

static void *forker(void *arg)
{
    long *out = arg;
    nap();
    *out = child_slack();
    return NULL;
}

static void *setter(void *arg)
{
    long *out = arg;
    REQUIRE(prctl(PR_SET_TIMERSLACK, OWN_SLACK, 0, 0, 0) == 0, "PR_SET_TIMERSLACK");
    long worst = OWN_SLACK;
    for (int i = 0; i < 20; i++) {
        nap();
        if (slack() != OWN_SLACK)
            worst = slack();
    }
    out[0] = worst;
    out[1] = child_slack();
    return NULL;
}

int main(void)
{
    initial = slack();
    REQUIRE(initial > 0, "PR_GET_TIMERSLACK");
    /* the harness starts both runs from the same parent, so the value is
     * the same natively and under a runtime that leaves it alone */
    printf("main's slack: %ld ns\n", initial);

    static long got[NTHREADS];
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, reader, &got[i]) == 0, "pthread_create");
    for (int i = 0; i < NTHREADS; i++)
        REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");
    int same = 0;
    for (int i = 0; i < NTHREADS; i++) {
        CHECK(got[i] == initial, "thread %d: slack %ld ns, main's %ld", i, got[i], initial);
        same += got[i] == initial;
    }
    printf("threads with main's slack: %d of %d\n", same, NTHREADS);

    long from_main = child_slack();
    CHECK(from_main == initial, "child of main: slack %ld ns, main's %ld", from_main, initial);
    printf("child of main: %s\n", from_main == initial ? "main's slack" : "other");

    long from_thread = -1;
    pthread_t f;
    REQUIRE(pthread_create(&f, NULL, forker, &from_thread) == 0, "pthread_create");
    REQUIRE(pthread_join(f, NULL) == 0, "pthread_join");
    CHECK(from_thread == initial, "child of a thread: slack %ld ns, main's %ld", from_thread,
          initial);
    printf("child of a thread: %s\n", from_thread == initial ? "main's slack" : "other");

    long own[2] = {-1, -1};
    pthread_t s;
    REQUIRE(pthread_create(&s, NULL, setter, own) == 0, "pthread_create");
    REQUIRE(pthread_join(s, NULL) == 0, "pthread_join");
    CHECK(own[0] == OWN_SLACK, "a thread set %d ns and then read %ld", OWN_SLACK, own[0]);
    CHECK(own[1] == OWN_SLACK, "its child: %ld ns, want %d", own[1], OWN_SLACK);
    printf("own slack kept: %s, inherited by its child: %s\n", own[0] == OWN_SLACK ? "yes" : "no",
           own[1] == OWN_SLACK ? "yes" : "no");
    CHECK(slack() == initial, "main's slack changed to %ld", slack());
    return probe_exit("timer_slack");
}
