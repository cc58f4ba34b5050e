/* yield_for_io — a thread that yields (sched_yield) until other threads,
 * waiting on file descriptors, have done their part.
 *
 * 1. Four threads share one epoll fd watching a pipe with EPOLLONESHOT and
 *    re-arm it after each byte they read; main writes 3,000 bytes one at a
 *    time and yields until a reader has taken each. Every event reaches
 *    exactly one reader, and epoll_wait(-1) never returns 0.
 * 2. Four threads poll(-1) and read one shared pipe; main yields until they
 *    have read each byte it wrote.
 *
 * Under bobbin with one P the yielding thread is the only runnable one: a
 * yield that let the P go only to the threads already in its run queue
 * never looked at the network, so each byte waited for sysmon's look at it
 * every 10 ms (30 s for part 1; the watchdog fails the test at 20 s).
 * Natively both parts take milliseconds.
 */
#define PROBE_NAME "yield_for_io"
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <unistd.h>

enum { READERS = 4, EVENTS = 3000, BYTES = 3000 };

static int ep, pfd[2], stopfd[2], shared[2];
static atomic_int events, zeros, errs;

static void *epoll_reader(void *arg)
{
    (void)arg;
    for (;;) {
        struct epoll_event e;
        int n = epoll_wait(ep, &e, 1, -1);
        if (n == 0) {
            atomic_fetch_add(&zeros, 1);
            continue;
        }
        if (n < 0) {
            if (errno != EINTR)
                atomic_fetch_add(&errs, 1);
            continue;
        }
        if (e.data.u32 == 2)
            return NULL; /* the stop pipe: level-triggered, every reader sees it */
        char c;
        if (read(pfd[0], &c, 1) == 1)
            atomic_fetch_add(&events, 1);
        struct epoll_event re = {.events = EPOLLIN | EPOLLONESHOT, .data.u32 = 1};
        if (epoll_ctl(ep, EPOLL_CTL_MOD, pfd[0], &re) != 0)
            atomic_fetch_add(&errs, 1);
    }
}

static atomic_long got;

static void *poll_reader(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd p = {shared[0], POLLIN, 0};
        int n = poll(&p, 1, -1);
        if (n == 0) {
            atomic_fetch_add(&zeros, 1);
            continue;
        }
        char c;
        /* the pipe is non-blocking: a reader that lost the race reads EAGAIN */
        if (n > 0 && read(shared[0], &c, 1) == 1) {
            if (c == 'x')
                return NULL;
            atomic_fetch_add(&got, 1);
        }
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(20);
    pthread_t t[READERS];

    current_probe = "1: epoll oneshot readers";
    REQUIRE(pipe(pfd) == 0 && pipe(stopfd) == 0, "pipe");
    ep = epoll_create1(0);
    REQUIRE(ep >= 0, "epoll_create1");
    struct epoll_event e = {.events = EPOLLIN | EPOLLONESHOT, .data.u32 = 1};
    REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &e) == 0, "epoll_ctl");
    for (int i = 0; i < READERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, epoll_reader, NULL) == 0, "create");
    for (int i = 0; i < EVENTS; i++) {
        REQUIRE(write(pfd[1], "a", 1) == 1, "write");
        while (atomic_load(&events) <= i)
            sched_yield();
    }
    struct epoll_event s = {.events = EPOLLIN, .data.u32 = 2};
    REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, stopfd[0], &s) == 0 && write(stopfd[1], "s", 1) == 1,
            "stop");
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    printf("epoll: %d events, %d returns of 0, %d errors\n", atomic_load(&events),
           atomic_load(&zeros), atomic_load(&errs));
    CHECK(atomic_load(&events) == EVENTS && atomic_load(&zeros) == 0 && atomic_load(&errs) == 0,
          "epoll part");

    current_probe = "2: poll readers";
    REQUIRE(pipe2(shared, O_NONBLOCK) == 0, "pipe2");
    for (int i = 0; i < READERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, poll_reader, NULL) == 0, "create");
    for (long i = 0; i < BYTES; i++) {
        REQUIRE(write(shared[1], "b", 1) == 1, "write");
        while (atomic_load(&got) <= i)
            sched_yield();
    }
    for (int i = 0; i < READERS; i++)
        REQUIRE(write(shared[1], "x", 1) == 1, "write");
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    printf("poll: %ld bytes read, %d returns of 0\n", atomic_load(&got), atomic_load(&zeros));
    CHECK(atomic_load(&got) == BYTES && atomic_load(&zeros) == 0, "poll part");
    alarm(0);
    printf("yield_for_io: done\n");
    return probe_exit(PROBE_NAME);
}
