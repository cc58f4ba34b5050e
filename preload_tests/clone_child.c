/* clone_child — children made with clone(2), the ways stress-ng's clone
 * stressor and vfork-like code make them:
 *
 * 1. clone() through glibc's wrapper without CLONE_VM (a separate process),
 *    whose function creates and joins a thread, sleeps, and returns its value.
 *    The child starts with one thread and none of fork's handlers run: under
 *    bobbin it runs natively, and ends when its function returns. (It used to
 *    start OS threads of its own, and its only real thread's exit left a
 *    zombie process that never ended: waitpid hung.)
 * 2. The same child made fork-like through syscall(SYS_clone3) and
 *    syscall(SYS_clone): no stack given, the child returns 0 from the call
 *    and goes on in the caller's code (stress-ng's way). These children used
 *    to sleep in bobbin's scheduler for ever.
 * 3. clone() with CLONE_VM (with and without CLONE_VFORK) and no TLS of its
 *    own: the child shares the parent's memory and TLS; it yields, sleeps,
 *    locks a mutex and makes a pipe round trip, then ends. It must not run
 *    as its parent's M (it used to). (The same made through syscall() cannot
 *    be tried: the child would return into the frame its parent still uses.)
 *
 * Checks: waitpid returns each child with the status it ended with; stdout
 * the same natively and under bobbin. Watchdog: alarm, 20 s.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/sched.h>
#include <sys/syscall.h>
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

/* the work of a child that shares our memory: calls bobbin interposes */
static int vm_child(void *arg)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int fds[2];
    char c = 'v';
    sched_yield();
    usleep(1000);
    if (pthread_mutex_lock(&m) != 0 || pthread_mutex_unlock(&m) != 0)
        return 92;
    if (pipe(fds) != 0 || write(fds[1], &c, 1) != 1 || read(fds[0], &c, 1) != 1 || c != 'v')
        return 93;
    close(fds[0]);
    close(fds[1]);
    return (int)(intptr_t)arg;
}

static void reap(const char *how, pid_t p, int want)
{
    REQUIRE(p > 0, "%s", how);
    int st;
    pid_t w = waitpid(p, &st, 0);
    CHECK(w == p, "%s: waitpid returned %d", how, (int)w);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == want, "%s: child status %#x", how, st);
    printf("%s: child exited with %d\n", how, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static long clone3_forklike(uint64_t flags)
{
    struct clone_args ca = {0};
    ca.flags = flags;
    ca.exit_signal = SIGCHLD;
    return syscall(SYS_clone3, &ca, sizeof ca);
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
        char how[32];
        snprintf(how, sizeof how, "clone round %d", round);
        reap(how, p, 40 + round);
    }

    current_probe = "syscall(SYS_clone3)";
    long p = clone3_forklike(0);
    if (p == 0)
        _exit(child((void *)50));
    if (p < 0 && errno == ENOSYS) { /* a kernel before 5.3: the same, as native */
        printf("syscall(SYS_clone3): child exited with 50\n");
    } else {
        reap("syscall(SYS_clone3)", (pid_t)p, 50);
    }
    current_probe = "syscall(SYS_clone)";
    p = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
    if (p == 0)
        _exit(child((void *)51));
    reap("syscall(SYS_clone)", (pid_t)p, 51);

    current_probe = "clone(CLONE_VM|CLONE_VFORK)";
    for (int round = 1; round <= 3; round++) {
        p = clone(vm_child, stack + sz, CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)(intptr_t)(60 + round));
        reap("clone(CLONE_VM|CLONE_VFORK)", (pid_t)p, 60 + round);
    }
    current_probe = "clone(CLONE_VM)";
    p = clone(vm_child, stack + sz, CLONE_VM | SIGCHLD, (void *)64);
    reap("clone(CLONE_VM)", (pid_t)p, 64);
    return probe_exit(PROBE_NAME);
}
