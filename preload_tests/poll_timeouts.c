/* poll_timeouts — poll, ppoll, select, pselect, epoll_wait, epoll_pwait and
 * epoll_pwait2 with timeouts: nothing ready (the timeout expires), something ready at
 * once, something made ready later by another thread, and the error cases.
 * epoll_pwait2's timeouts run beside a spinning thread: under bobbin before
 * 2026-11-25 it was not interposed, blocked its OS thread, and the signal that
 * takes the processor from such a thread made it fail with EINTR (the kernel never
 * restarts it).
 *
 * Each probe prints its return value and the readiness it reported (revents, the fd
 * sets, the epoll events and data) on stdout, so the native and bobbin runs are
 * compared call by call. Times are checked, never printed: an expired timeout must
 * have waited at least about as long as asked (a timeout may be late, never early —
 * 90 % of it is accepted, since the kernel rounds) and every wait must end within
 * LATE_MS of what it waits for. A helper thread that writes WAKE_MS after the call
 * starts must get to run while the main thread waits — with BOBBIN_MAXPROCS=1 that
 * means the waiting call gave its processor away.
 *
 * Last, 60 threads wait at once (a third each in poll, select and epoll_wait, each on
 * its own pipe): half are woken by a writer, half time out. Under bobbin these waits
 * park on the netpoller, so the harness's default thread limit (MAXPROCS + 2) holds.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { TIMEOUT_MS = 100, WAKE_MS = 100, LONG_MS = 10000, LATE_MS = 5000 };

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *err_name(int e)
{
    switch (e) {
    case 0: return "0";
    case EBADF: return "EBADF";
    case EINVAL: return "EINVAL";
    case EINTR: return "EINTR";
    case EFAULT: return "EFAULT";
    default: return "other";
    }
}

/* the elapsed time of a wait that should have run its whole timeout */
static void check_expired(const char *what, int64_t t0, int timeout_ms)
{
    int64_t el = now_ms() - t0;
    CHECK(el >= timeout_ms * 9 / 10, "%s returned after %lld ms, before its %d ms timeout", what,
          (long long)el, timeout_ms);
    CHECK(el < timeout_ms + LATE_MS, "%s took %lld ms for a %d ms timeout", what, (long long)el,
          timeout_ms);
}

static void check_prompt(const char *what, int64_t t0)
{
    int64_t el = now_ms() - t0;
    CHECK(el < LATE_MS, "%s took %lld ms (the fd was ready after %d ms)", what, (long long)el,
          WAKE_MS);
}

/* ---- a helper that writes one byte into fd after WAKE_MS ---- */

struct later {
    pthread_t t;
    int fd;
};

static void *write_later_fn(void *arg)
{
    struct later *l = arg;
    usleep(WAKE_MS * 1000);
    CHECK(write(l->fd, "w", 1) == 1, "helper write: %s", strerror(errno));
    return NULL;
}

static void write_later(struct later *l, int fd)
{
    l->fd = fd;
    REQUIRE(pthread_create(&l->t, NULL, write_later_fn, l) == 0, "pthread_create");
}

static void drain(int fd)
{
    char buf[64];
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    while (read(fd, buf, sizeof buf) > 0)
        ;
    fcntl(fd, F_SETFL, fl);
}

/* ---- poll and ppoll ---- */

static void probe_poll(void)
{
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    struct pollfd f = { p[0], POLLIN, 0 };

    int64_t t0 = now_ms();
    int r = poll(&f, 1, TIMEOUT_MS);
    check_expired("poll timeout", t0, TIMEOUT_MS);
    printf("poll nothing ready: ret=%d revents=%#x\n", r, f.revents);

    CHECK(write(p[1], "x", 1) == 1, "write");
    r = poll(&f, 1, LONG_MS);
    printf("poll ready: ret=%d revents=%#x\n", r, f.revents);
    drain(p[0]);

    struct pollfd w = { p[1], POLLOUT, 0 };
    r = poll(&w, 1, LONG_MS);
    printf("poll writable: ret=%d revents=%#x\n", r, w.revents);

    struct later l;
    write_later(&l, p[1]);
    t0 = now_ms();
    r = poll(&f, 1, LONG_MS);
    check_prompt("poll until a thread writes", t0);
    printf("poll ready later: ret=%d revents=%#x\n", r, f.revents);
    pthread_join(l.t, NULL);
    drain(p[0]);

    write_later(&l, p[1]);
    t0 = now_ms();
    r = poll(&f, 1, -1);
    check_prompt("poll(-1) until a thread writes", t0);
    printf("poll infinite, ready later: ret=%d revents=%#x\n", r, f.revents);
    pthread_join(l.t, NULL);
    drain(p[0]);

    /* two fds, one ready later, one never */
    int q[2];
    REQUIRE(pipe(q) == 0, "pipe");
    struct pollfd two[2] = { { q[0], POLLIN, 0 }, { p[0], POLLIN, 0 } };
    write_later(&l, p[1]);
    r = poll(two, 2, LONG_MS);
    printf("poll two fds: ret=%d revents=%#x,%#x\n", r, two[0].revents, two[1].revents);
    pthread_join(l.t, NULL);
    drain(p[0]);

    /* a negative fd is ignored; a closed one is POLLNVAL */
    struct pollfd neg = { -1, POLLIN, 0 };
    t0 = now_ms();
    r = poll(&neg, 1, TIMEOUT_MS);
    check_expired("poll on fd -1", t0, TIMEOUT_MS);
    printf("poll fd -1: ret=%d revents=%#x\n", r, neg.revents);
    int dead = dup(q[0]);
    close(dead);
    struct pollfd nv = { dead, POLLIN, 0 };
    r = poll(&nv, 1, LONG_MS);
    printf("poll closed fd: ret=%d revents=%#x\n", r, nv.revents);

    /* the write end closed: POLLHUP */
    close(q[1]);
    struct pollfd hup = { q[0], POLLIN, 0 };
    r = poll(&hup, 1, LONG_MS);
    printf("poll writer gone: ret=%d revents=%#x\n", r, hup.revents);
    close(q[0]);

    /* poll with no fds at all is a sleep */
    t0 = now_ms();
    r = poll(NULL, 0, TIMEOUT_MS);
    check_expired("poll(NULL, 0)", t0, TIMEOUT_MS);
    printf("poll no fds: ret=%d\n", r);

    /* ppoll */
    struct timespec ts = { 0, TIMEOUT_MS * 1000000L };
    t0 = now_ms();
    r = ppoll(&f, 1, &ts, NULL);
    check_expired("ppoll timeout", t0, TIMEOUT_MS);
    printf("ppoll nothing ready: ret=%d revents=%#x\n", r, f.revents);
    write_later(&l, p[1]);
    ts.tv_sec = LONG_MS / 1000;
    ts.tv_nsec = 0;
    sigset_t none;
    sigemptyset(&none);
    t0 = now_ms();
    r = ppoll(&f, 1, &ts, &none);
    check_prompt("ppoll until a thread writes", t0);
    printf("ppoll ready later: ret=%d revents=%#x\n", r, f.revents);
    pthread_join(l.t, NULL);
    drain(p[0]);
    close(p[0]);
    close(p[1]);
}

/* ---- select and pselect ---- */

static void probe_select(void)
{
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    fd_set rs;
    int64_t t0;

    FD_ZERO(&rs);
    FD_SET(p[0], &rs);
    struct timeval tv = { 0, TIMEOUT_MS * 1000 };
    t0 = now_ms();
    int r = select(p[0] + 1, &rs, NULL, NULL, &tv);
    check_expired("select timeout", t0, TIMEOUT_MS);
    printf("select nothing ready: ret=%d isset=%d tv=%ld.%06ld\n", r, FD_ISSET(p[0], &rs),
           (long)tv.tv_sec, (long)tv.tv_usec);

    CHECK(write(p[1], "x", 1) == 1, "write");
    FD_ZERO(&rs);
    FD_SET(p[0], &rs);
    tv = (struct timeval){ LONG_MS / 1000, 0 };
    r = select(p[0] + 1, &rs, NULL, NULL, &tv);
    printf("select ready: ret=%d isset=%d\n", r, FD_ISSET(p[0], &rs));
    drain(p[0]);

    struct later l;
    write_later(&l, p[1]);
    FD_ZERO(&rs);
    FD_SET(p[0], &rs);
    fd_set ws;
    FD_ZERO(&ws);
    t0 = now_ms();
    r = select(p[0] + 1, &rs, &ws, NULL, NULL);
    check_prompt("select(NULL timeout) until a thread writes", t0);
    printf("select infinite, ready later: ret=%d isset=%d\n", r, FD_ISSET(p[0], &rs));
    pthread_join(l.t, NULL);
    drain(p[0]);

    write_later(&l, p[1]);
    FD_ZERO(&rs);
    FD_SET(p[0], &rs);
    tv = (struct timeval){ LONG_MS / 1000, 0 };
    t0 = now_ms();
    r = select(p[0] + 1, &rs, NULL, NULL, &tv);
    check_prompt("select until a thread writes", t0);
    /* Linux writes the time left into tv: some of the 10 s must be left */
    printf("select ready later: ret=%d isset=%d time_left=%s\n", r, FD_ISSET(p[0], &rs),
           tv.tv_sec >= 4 ? "yes" : "no");
    pthread_join(l.t, NULL);
    drain(p[0]);

    /* select with no sets is a sleep */
    tv = (struct timeval){ 0, TIMEOUT_MS * 1000 };
    t0 = now_ms();
    r = select(0, NULL, NULL, NULL, &tv);
    check_expired("select(0, NULL...)", t0, TIMEOUT_MS);
    printf("select no fds: ret=%d\n", r);

    /* a closed fd in the set */
    int dead = dup(p[0]);
    close(dead);
    FD_ZERO(&rs);
    FD_SET(dead, &rs);
    tv = (struct timeval){ LONG_MS / 1000, 0 };
    errno = 0;
    r = select(dead + 1, &rs, NULL, NULL, &tv);
    printf("select closed fd: ret=%d errno=%s\n", r, err_name(r < 0 ? errno : 0));

    /* pselect */
    struct timespec ts = { 0, TIMEOUT_MS * 1000000L };
    FD_ZERO(&rs);
    FD_SET(p[0], &rs);
    t0 = now_ms();
    r = pselect(p[0] + 1, &rs, NULL, NULL, &ts, NULL);
    check_expired("pselect timeout", t0, TIMEOUT_MS);
    printf("pselect nothing ready: ret=%d isset=%d\n", r, FD_ISSET(p[0], &rs));
    write_later(&l, p[1]);
    FD_ZERO(&rs);
    FD_SET(p[0], &rs);
    ts = (struct timespec){ LONG_MS / 1000, 0 };
    sigset_t none;
    sigemptyset(&none);
    t0 = now_ms();
    r = pselect(p[0] + 1, &rs, NULL, NULL, &ts, &none);
    check_prompt("pselect until a thread writes", t0);
    printf("pselect ready later: ret=%d isset=%d\n", r, FD_ISSET(p[0], &rs));
    pthread_join(l.t, NULL);
    close(p[0]);
    close(p[1]);
}

/* ---- epoll ---- */

static void print_events(const char *what, int r, struct epoll_event *ev)
{
    if (r > 0)
        printf("%s: ret=%d events=%#x data=%llu\n", what, r, ev[0].events,
               (unsigned long long)ev[0].data.u64);
    else
        printf("%s: ret=%d errno=%s\n", what, r, err_name(r < 0 ? errno : 0));
}

static volatile int spinning;

static void *spin_fn(void *arg)
{
    (void)arg;
    volatile unsigned long x = 0;
    while (spinning)
        x++;
    return NULL;
}

static void probe_epoll(void)
{
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    REQUIRE(ep >= 0, "epoll_create1: %s", strerror(errno));
    struct epoll_event e = { .events = EPOLLIN, .data.u64 = 4242 };
    REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &e) == 0, "epoll_ctl: %s", strerror(errno));
    struct epoll_event ev[4];
    int64_t t0;

    t0 = now_ms();
    int r = epoll_wait(ep, ev, 4, TIMEOUT_MS);
    check_expired("epoll_wait timeout", t0, TIMEOUT_MS);
    print_events("epoll_wait nothing ready", r, ev);

    CHECK(write(p[1], "x", 1) == 1, "write");
    r = epoll_wait(ep, ev, 4, LONG_MS);
    print_events("epoll_wait ready", r, ev);
    drain(p[0]);

    struct later l;
    write_later(&l, p[1]);
    t0 = now_ms();
    r = epoll_wait(ep, ev, 4, LONG_MS);
    check_prompt("epoll_wait until a thread writes", t0);
    print_events("epoll_wait ready later", r, ev);
    pthread_join(l.t, NULL);
    drain(p[0]);

    write_later(&l, p[1]);
    t0 = now_ms();
    r = epoll_wait(ep, ev, 4, -1);
    check_prompt("epoll_wait(-1) until a thread writes", t0);
    print_events("epoll_wait infinite, ready later", r, ev);
    pthread_join(l.t, NULL);
    drain(p[0]);

    /* edge-triggered: one event per edge; the second wait times out */
    e.events = EPOLLIN | EPOLLET;
    e.data.u64 = 77;
    REQUIRE(epoll_ctl(ep, EPOLL_CTL_MOD, p[0], &e) == 0, "epoll_ctl MOD: %s", strerror(errno));
    CHECK(write(p[1], "y", 1) == 1, "write");
    r = epoll_wait(ep, ev, 4, LONG_MS);
    print_events("epoll_wait edge", r, ev);
    t0 = now_ms();
    r = epoll_wait(ep, ev, 4, TIMEOUT_MS);
    check_expired("epoll_wait after the edge", t0, TIMEOUT_MS);
    print_events("epoll_wait no second edge", r, ev);
    drain(p[0]);

    /* epoll_pwait */
    sigset_t none;
    sigemptyset(&none);
    t0 = now_ms();
    r = epoll_pwait(ep, ev, 4, TIMEOUT_MS, &none);
    check_expired("epoll_pwait timeout", t0, TIMEOUT_MS);
    print_events("epoll_pwait nothing ready", r, ev);
    write_later(&l, p[1]);
    r = epoll_pwait(ep, ev, 4, LONG_MS, &none);
    print_events("epoll_pwait ready later", r, ev);
    pthread_join(l.t, NULL);

    /* epoll_pwait2 (a timespec), which the kernel never restarts after a
     * signal, while a spinner keeps the other threads' processor busy */
    spinning = 1;
    pthread_t sp;
    REQUIRE(pthread_create(&sp, NULL, spin_fn, NULL) == 0, "create");
    struct timespec to = {0, TIMEOUT_MS * 1000000};
    for (int i = 0; i < 3; i++) {
        t0 = now_ms();
        errno = 0;
        r = epoll_pwait2(ep, ev, 4, &to, NULL);
        check_expired("epoll_pwait2 timeout", t0, TIMEOUT_MS);
        print_events("epoll_pwait2 nothing ready, a spinner beside", r, ev);
    }
    r = epoll_pwait2(ep, ev, 4, &to, &none);
    print_events("epoll_pwait2 with a mask, nothing ready", r, ev);
    write_later(&l, p[1]);
    struct timespec longto = {LONG_MS / 1000, 0};
    r = epoll_pwait2(ep, ev, 4, &longto, NULL);
    print_events("epoll_pwait2 ready later", r, ev);
    pthread_join(l.t, NULL);
    drain(p[0]);
    struct timespec bad = {0, 1000000000};
    errno = 0;
    r = epoll_pwait2(ep, ev, 4, &bad, NULL);
    print_events("epoll_pwait2 tv_nsec 1e9", r, ev);
    spinning = 0;
    pthread_join(sp, NULL);

    /* a bad epoll fd, a bad maxevents */
    errno = 0;
    r = epoll_wait(p[0], ev, 4, TIMEOUT_MS);
    print_events("epoll_wait on a pipe", r, ev);
    errno = 0;
    r = epoll_wait(ep, ev, 0, TIMEOUT_MS);
    print_events("epoll_wait maxevents 0", r, ev);

    close(ep);
    close(p[0]);
    close(p[1]);
}

/* ---- many waiters at once ---- */

enum { WAITERS = 60 };

struct waiter {
    pthread_t t;
    int kind, p[2], ep;
    int ret, ready;
};

/* waits TIMEOUT_MS * 3 on its own pipe with poll, select or epoll_wait (by kind) */
static void *waiter_fn(void *arg)
{
    struct waiter *w = arg;
    int64_t t0 = now_ms();
    int to = TIMEOUT_MS * 3;
    if (w->kind == 0) {
        struct pollfd f = { w->p[0], POLLIN, 0 };
        w->ret = poll(&f, 1, to);
        w->ready = (f.revents & POLLIN) != 0;
    } else if (w->kind == 1) {
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(w->p[0], &rs);
        struct timeval tv = { 0, to * 1000 };
        w->ret = select(w->p[0] + 1, &rs, NULL, NULL, &tv);
        w->ready = FD_ISSET(w->p[0], &rs) != 0;
    } else {
        struct epoll_event ev;
        w->ret = epoll_wait(w->ep, &ev, 1, to);
        w->ready = w->ret == 1 && (ev.events & EPOLLIN);
    }
    if (w->ret == 0)
        check_expired("a timeout among many waiters", t0, to);
    else
        check_prompt("a wait among many waiters", t0);
    return NULL;
}

/* WAITERS threads wait at once, a third each in poll, select and epoll_wait; a
 * writer thread wakes every odd one after WAKE_MS, the even ones time out */
static void probe_many(void)
{
    static struct waiter w[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        w[i].kind = i % 3;
        REQUIRE(pipe(w[i].p) == 0, "pipe: %s", strerror(errno));
        w[i].ep = -1;
        if (w[i].kind == 2) {
            w[i].ep = epoll_create1(EPOLL_CLOEXEC);
            struct epoll_event e = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
            REQUIRE(w[i].ep >= 0 && epoll_ctl(w[i].ep, EPOLL_CTL_ADD, w[i].p[0], &e) == 0,
                    "epoll: %s", strerror(errno));
        }
    }
    for (int i = 0; i < WAITERS; i++)
        REQUIRE(pthread_create(&w[i].t, NULL, waiter_fn, &w[i]) == 0, "pthread_create");
    usleep(WAKE_MS * 1000);
    for (int i = 1; i < WAITERS; i += 2)
        CHECK(write(w[i].p[1], "m", 1) == 1, "write: %s", strerror(errno));
    int count[3][2] = { { 0 } }, wrong = 0;
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(w[i].t, NULL);
        count[w[i].kind][w[i].ready]++;
        if (w[i].ready != (i % 2) || w[i].ret != (i % 2))
            wrong++;
        close(w[i].p[0]);
        close(w[i].p[1]);
        if (w[i].ep >= 0)
            close(w[i].ep);
    }
    CHECK(wrong == 0, "%d of the many waiters got the wrong answer", wrong);
    printf("many waiters: poll ready=%d timed_out=%d, select ready=%d timed_out=%d, "
           "epoll_wait ready=%d timed_out=%d\n", count[0][1], count[0][0], count[1][1],
           count[1][0], count[2][1], count[2][0]);
}

int main(void)
{
    alarm(55);
    probe_poll();
    probe_select();
    probe_epoll();
    probe_many();
    return probe_exit("poll_timeouts");
}
