/* fork_locked_wait — a forked child whose only thread is locked to its OS
 * thread (by prctl(PR_SET_TIMERSLACK), per-OS-thread state; `perf stat`
 * named itself with PR_SET_NAME before it waited for the go-ahead, which
 * pinned its thread until names stopped pinning) and then waits: in a sleep, and in a
 * read of a pipe that the parent writes 100 ms later. Under bobbin the
 * child has no sysmon yet and its one M sleeps while its locked thread
 * waits: some M must still sleep in the netpoller and on the timers, or the
 * child never wakes (it hung before: `perf stat CMD` under LD_PRELOAD).
 *
 * Checks: the child reads what the parent wrote and exits 0; the parent
 * prints what it saw. A watchdog (alarm, 10 s) in the parent kills a hung
 * child and fails.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

static pid_t child;

static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "fork_locked_wait: watchdog: the child never woke\n";
    (void)!write(2, msg, sizeof msg - 1);
    if (child > 0)
        kill(child, SIGKILL);
    _exit(1);
}

int main(void)
{
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    child = fork();
    REQUIRE(child >= 0, "fork");
    if (child == 0) {
        close(p[1]);
        prctl(PR_SET_TIMERSLACK, 50000UL); /* the default slack: only the pin differs */
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL); /* a timer while the locked M sleeps */
        char buf[16] = {0};
        ssize_t n = read(p[0], buf, 5); /* the netpoller while it sleeps */
        _exit(n == 5 && memcmp(buf, "hello", 5) == 0 ? 0 : 3);
    }
    close(p[0]);
    signal(SIGALRM, on_watchdog);
    alarm(10);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CHECK(write(p[1], "hello", 5) == 5, "write");
    int st;
    REQUIRE(waitpid(child, &st, 0) == child, "waitpid");
    alarm(0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child ended with status %#x", st);
    printf("child read the parent's word: %s\n",
           WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "yes" : "no");
    return probe_exit("fork_locked_wait");
}
