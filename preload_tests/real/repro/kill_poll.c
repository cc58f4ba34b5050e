/* repro: pthread_kill to a thread waiting in the program's own epoll_wait or poll.
 *
 * Bug found by apache.sh: apache's worker MPM wakes its listener thread, blocked in
 * epoll_wait, with pthread_kill(listener, SIGHUP) when a child must exit; natively
 * the wait fails with EINTR (epoll_wait and poll are never restarted, SA_RESTART or
 * not). Under bobbin the G parked on the netpoller runs the handler but its wait
 * goes on to the timeout, so the listener never sees the shutdown, and every child
 * outlives the parent's SIGTERM until apache's escalation ends it (AH00045 "child
 * process still did not exit", seconds later).
 *
 * A thread waits 2 s for a pipe that never becomes readable, first in epoll_wait,
 * then in poll; main sends it SIGHUP (handler without SA_RESTART) after 200 ms.
 * Natively both calls return -1/EINTR at once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static int pfd[2];
static int which;
static int bad;

static void on_hup(int s) { (void)s; }

static void *waiter(void *arg)
{
    (void)arg;
    int r;
    if (which == 0) {
        int ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN};
        epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev);
        r = epoll_wait(ep, &ev, 1, 2000);
        close(ep);
    } else {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        r = poll(&p, 1, 2000);
    }
    int e = errno;
    printf("%s returned %d%s\n", which == 0 ? "epoll_wait" : "poll", r,
           r < 0 && e == EINTR ? " (EINTR)" : "");
    if (!(r < 0 && e == EINTR))
        bad = 1;
    return NULL;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_hup; /* no SA_RESTART */
    sigaction(SIGHUP, &sa, NULL);
    if (pipe(pfd) != 0)
        return 1;
    for (which = 0; which < 2; which++) {
        pthread_t t;
        pthread_create(&t, NULL, waiter, NULL);
        usleep(200000);
        pthread_kill(t, SIGHUP);
        pthread_join(t, NULL);
    }
    return bad;
}
