/* handler_in_syscall — a signal handler that runs while its thread waits in
 * a call bobbin makes inside entersyscall (waitpid), and itself makes
 * interposed calls: write, kill. The classic watchdog: the parent waits for
 * a child that never ends, and a timer's handler reports and kills it.
 * Under bobbin those calls run with the thread already out of the
 * scheduler, as on a thread bobbin did not make (it crashed before).
 *
 * Checks: the handler's line, then waitpid's view of the child (killed by
 * SIGKILL), the same natively and under bobbin.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

static volatile pid_t child;

static void on_timer(int sig)
{
    (void)sig;
    static const char msg[] = "timer: killing the child\n";
    (void)!write(1, msg, sizeof msg - 1);
    kill(child, SIGKILL);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    child = fork();
    REQUIRE(child >= 0, "fork");
    if (child == 0) {
        for (;;)
            pause();
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_timer;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 0}, {0, 100 * 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    int st;
    pid_t r = waitpid(child, &st, 0);
    CHECK(r == child, "waitpid returned %d", (int)r);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %#x", st);
    printf("waitpid: child killed by signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return probe_exit("handler_in_syscall");
}
