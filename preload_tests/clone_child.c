/* clone_child — a child made with clone(2) through glibc's wrapper, without
 * CLONE_VM (a separate process, as stress-ng's clone stressor makes them),
 * whose function creates and joins a thread, sleeps, and returns its value.
 * The child starts with one thread and none of fork's handlers run: under
 * bobbin it runs natively, and ends when its function returns. (It used to
 * start OS threads of its own, and its only real thread's exit left a
 * zombie process that never ended: waitpid hung.)
 *
 * Checks: waitpid returns the child with the status its function returned;
 * stdout the same natively and under bobbin. Watchdog: alarm, 20 s.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_NAME "clone_child"
#include "probe.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *thread_main(void *arg)
{
    pthread_mutex_lock(&mu);
    pthread_mutex_unlock(&mu);
    return arg;
}

static int child(void *arg)
{
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, arg) != 0)
        return 90;
    void *r;
    if (pthread_join(t, &r) != 0)
        return 91;
    usleep(1000);
    return (int)(intptr_t)r;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(20);
    current_probe = "clone";
    size_t sz = 1 << 20;
    char *stack = malloc(sz);
    REQUIRE(stack != NULL, "malloc");
    for (int round = 1; round <= 3; round++) {
        pid_t p = clone(child, stack + sz, SIGCHLD, (void *)(intptr_t)(40 + round));
        REQUIRE(p > 0, "clone");
        int st;
        pid_t w = waitpid(p, &st, 0);
        CHECK(w == p, "waitpid returned %d", (int)w);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 40 + round, "child status %#x", st);
        printf("round %d: child exited with %d\n", round, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    return probe_exit(PROBE_NAME);
}
