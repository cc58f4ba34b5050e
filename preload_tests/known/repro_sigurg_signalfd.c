/* repro_sigurg_signalfd — FIXED 2026-11-28 (test sigurg_signalfd). PostgreSQL 15's latch:
 * a process blocks SIGURG, watches it through a signalfd (in an epoll set,
 * or polled), and another process kill()s it with SIGURG.
 *
 * Natively every wake-up is seen (20/20 for epoll, poll, read, sigtimedwait).
 * Under bobbin (P=1 and P=2): 0/20 with epoll and with poll; read and
 * sigtimedwait 20/20; SIGUSR1 20/20 in every mode. SIGURG is bobbin's
 * preemption signal: no OS thread of the process blocks it in the kernel,
 * so a program's SIGURG is delivered to bobbin's handler (urg_program),
 * which drops it when the action is SIG_DFL and keeps it only in the
 * running G's pending set otherwise; it is never process-pending in the
 * kernel, where a polled signalfd would see it, and bb_sigfd_add leaves
 * SIGURG out of the lent signals. PostgreSQL under bobbin: backends waiting
 * for a row lock are woken only by the deadlock timer (P=1: 2 of 3 pgbench
 * -c 16 runs hang past their time, 30 tps with deadlock_timeout=1s; P=2:
 * 2.3x slower). A fix needs either a process-level pending SIGURG in bobbin
 * handed to the kernel queue of the OS thread of a G that polls a SIGURG
 * signalfd (with SIGURG blocked in the kernel for that call, epoll sets
 * holding a signalfd waited on in the kernel), or bobbin's own signal moved
 * off SIGURG once the program claims it.
 *
 * Build: gcc -O2 -o repro_sigurg_signalfd repro_sigurg_signalfd.c
 * Run:   ./repro_sigurg_signalfd 23 epoll   (also: poll, read, sigtimedwait;
 *        10 for SIGUSR1), natively and with LD_PRELOAD=libbobbin.so.
 *
 * (Written by a helper probe from PostgreSQL's pattern.)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
    int sig = argc > 1 ? atoi(argv[1]) : SIGURG;
    int use_poll = argc > 2 && strcmp(argv[2], "poll") == 0;
    int rounds = 20, ok = 0;
    sigset_t m; sigemptyset(&m); sigaddset(&m, sig);
    sigprocmask(SIG_BLOCK, &m, NULL);          /* like PG's UnBlockSig incl. SIGURG */
    for (int r = 0; r < rounds; r++) {
        int go[2]; pipe(go);
        pid_t c = fork();
        if (c == 0) {
            int sfd = signalfd(-1, &m, SFD_NONBLOCK | SFD_CLOEXEC);
            int ep = epoll_create1(EPOLL_CLOEXEC);
            struct epoll_event ev = { .events = EPOLLIN, .data.fd = sfd }, out;
            epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
            write(go[1], "x", 1);               /* ready */
            int n;
            if (argc > 2 && strcmp(argv[2], "sigtimedwait") == 0) {
                struct timespec ts = { 2, 0 }; _exit(sigtimedwait(&m, NULL, &ts) == sig ? 0 : 1);
            }
            if (argc > 2 && strcmp(argv[2], "read") == 0) {   /* blocking signalfd read, 2 s alarm */
                int bfd = signalfd(-1, &m, 0); alarm(2); struct signalfd_siginfo s2;
                _exit(read(bfd, &s2, sizeof s2) == sizeof s2 && (int)s2.ssi_signo == sig ? 0 : 1);
            }
            if (use_poll) { struct pollfd p = { sfd, POLLIN, 0 }; n = poll(&p, 1, 2000); }
            else n = epoll_wait(ep, &out, 1, 2000); /* PG waits -1; 2 s here */
            struct signalfd_siginfo si; ssize_t k = read(sfd, &si, sizeof si);
            _exit(n == 1 && k == sizeof si && (int)si.ssi_signo == sig ? 0 : 1);
        }
        char b; read(go[0], &b, 1); usleep(20000);
        kill(c, sig);                            /* PG's SetLatch: kill(owner, SIGURG) */
        int st; waitpid(c, &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
        close(go[0]); close(go[1]);
    }
    printf("signal %d via %s: %d/%d wakeups seen\n", sig, argc > 2 ? argv[2] : "epoll", ok, rounds);
    return ok == rounds ? 0 : 1;
}
