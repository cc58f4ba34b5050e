/* bsd_masks — the BSD and System V signal-mask calls change the thread's
 * mask as sigprocmask does, and dash's `wait` ends.
 *
 * glibc's sigsetmask, sigblock, siggetmask, sighold, sigrelse, sigignore
 * and sigpause make their own sigprocmask/sigaction/sigsuspend calls, which
 * bobbin did not see: the kernel's mask changed, the thread's in bobbin did
 * not. dash clears its mask with sigsetmask(0) after a vfork; the next
 * sigprocmask then answered "everything blocked", and `wait` suspended
 * with SIGCHLD blocked for ever (so did Rust's Command running sh -c with
 * a background job).
 *
 * In a thread: sigblock/siggetmask/sigsetmask and sighold/sigrelse read
 * back through pthread_sigmask; sigignore(SIGUSR2) shows as SIG_IGN and a
 * kill of it is ignored; dash's sequence (block all, fork a child, clear
 * with sigsetmask(0), block all again keeping the old mask, sigsuspend on
 * it until SIGCHLD's handler ran); sigpause(SIGUSR1) of System V with a
 * pthread_kill'ed SIGUSR1 waiting. Then system() of a shell line with a
 * background job and `wait` (the shell runs under LD_PRELOAD too) exits 0.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_NAME "bsd_masks"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "probe.h"

extern int sigblock(int mask);
extern int sigsetmask(int mask);
extern int siggetmask(void);

static volatile sig_atomic_t got_chld, got_usr1;

static void on_chld(int sig)
{
    (void)sig;
    got_chld = 1;
}

static void on_usr1(int sig)
{
    (void)sig;
    got_usr1 = 1;
}

static int blocked(int sig)
{
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, sig);
}

static void *masks(void *arg)
{
    (void)arg;
    current_probe = "bsd calls";
    int m = 1 << (SIGUSR1 - 1);
    printf("sigblock old has USR1: %d\n", (sigblock(m) & m) != 0);
    printf("blocked after sigblock: %d, siggetmask has it: %d\n", blocked(SIGUSR1), (siggetmask() & m) != 0);
    printf("sigsetmask(0) old has USR1: %d\n", (sigsetmask(0) & m) != 0);
    printf("blocked after sigsetmask(0): %d\n", blocked(SIGUSR1));
    CHECK(!blocked(SIGUSR1), "sigsetmask(0) left SIGUSR1 blocked");

    current_probe = "system v calls";
    sighold(SIGUSR1);
    printf("blocked after sighold: %d\n", blocked(SIGUSR1));
    sigrelse(SIGUSR1);
    printf("blocked after sigrelse: %d\n", blocked(SIGUSR1));
    sigignore(SIGUSR2);
    struct sigaction old;
    sigaction(SIGUSR2, NULL, &old);
    printf("SIGUSR2 ignored: %d\n", old.sa_handler == SIG_IGN);
    kill(getpid(), SIGUSR2); /* the process lives on */

    current_probe = "dash's wait";
    sigset_t all, prev;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    pid_t child = fork();
    REQUIRE(child >= 0, "fork");
    if (child == 0) {
        usleep(20000);
        _exit(3);
    }
    sigsetmask(0);
    int st = -1;
    pid_t w = waitpid(child, &st, WNOHANG);
    if (w == 0) {
        sigprocmask(SIG_SETMASK, &all, &prev);
        printf("mask before the wait is empty: %d\n", !sigismember(&prev, SIGCHLD));
        CHECK(!sigismember(&prev, SIGCHLD), "sigsetmask(0) was not seen: SIGCHLD blocked");
        while (!got_chld)
            sigsuspend(&prev);
        sigsetmask(0);
        w = waitpid(child, &st, 0);
    } else {
        printf("mask before the wait is empty: 1\n"); /* (the child was quicker) */
    }
    printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);

    current_probe = "sigpause";
    sighold(SIGUSR1);
    pthread_kill(pthread_self(), SIGUSR1);
    int r = sigpause(SIGUSR1); /* System V's: SIGUSR1 let in while it waits */
    printf("sigpause: %d %s, handler ran: %d, blocked after: %d\n", r, r < 0 ? strerrorname_np(errno) : "",
           got_usr1, blocked(SIGUSR1));
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(40);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_chld;
    sigaction(SIGCHLD, &sa, NULL);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    /* only the thread takes SIGCHLD (Linux gives it to the forking thread
     * first, bobbin to any that lets it in) */
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &chld, NULL);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, masks, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    signal(SIGCHLD, SIG_DFL);
    current_probe = "system";
    for (int i = 0; i < 3; i++) {
        int rc = system("sleep 0.1 & sleep 0.05; wait; exit 5");
        printf("system: %d\n", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
    }
    return probe_exit(PROBE_NAME);
}
