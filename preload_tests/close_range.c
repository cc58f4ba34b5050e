/* close_range — close_range and closefrom, as daemons call them.
 *
 * Under bobbin before 2026-11-25 neither was interposed: bobbin's view of a
 * socket outlived it, and when an eventfd (made by a call bobbin does not
 * see) reused the number, its blocking read was taken for a read on that
 * socket, which bobbin keeps non-blocking and never waits for: the read
 * blocked the OS thread where bobbin could not let its processor go, and
 * with one processor the program hung (part 1). closefrom(3) also closed
 * bobbin's own epoll and wake-up fds, after which no socket wait could end
 * (part 2).
 *
 * 1. A socket pair is used, closed with close_range; an eventfd takes the
 *    lower number and a thread writes it 20 ms later: the read waits for it.
 * 2. After closefrom(3), a new socket pair: a thread sends 20 ms later and
 *    recv waits for it; a pipe the same.
 * 3. close_range with CLOSE_RANGE_CLOEXEC leaves the fds open, close-on-exec.
 * A watchdog names the part that hangs.
 */
#define PROBE_NAME "close_range"
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

struct later {
    int fd;
    int kind; /* 0: eventfd, 1: send, 2: write */
};

static void *write_later(void *arg)
{
    struct later *l = arg;
    usleep(20 * 1000);
    uint64_t v = 7;
    if (l->kind == 0)
        CHECK(write(l->fd, &v, sizeof v) == sizeof v, "eventfd write");
    else if (l->kind == 1)
        CHECK(send(l->fd, "sock", 4, 0) == 4, "send");
    else
        CHECK(write(l->fd, "pipe", 4) == 4, "write");
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(20);

    current_probe = "1: a number close_range freed, reused by an eventfd";
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    char c;
    CHECK(send(sv[1], "x", 1, 0) == 1 && recv(sv[0], &c, 1, 0) == 1, "first use");
    int lo = sv[0] < sv[1] ? sv[0] : sv[1];
    REQUIRE(close_range((unsigned)lo, (unsigned)lo + 1, 0) == 0, "close_range: %s",
            strerror(errno));
    int efd = eventfd(0, 0);
    printf("1: the eventfd took the freed number: %d\n", efd == lo);
    struct later l = {efd, 0};
    pthread_t t;
    pthread_create(&t, NULL, write_later, &l);
    uint64_t v = 0;
    ssize_t n = read(efd, &v, sizeof v);
    pthread_join(t, NULL);
    printf("1: read %zd, value %llu\n", n, (unsigned long long)v);
    close(efd);

    current_probe = "2: after closefrom(3)";
    closefrom(3);
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    l = (struct later){sv[1], 1};
    pthread_create(&t, NULL, write_later, &l);
    char b[8] = {0};
    n = recv(sv[0], b, sizeof b, 0);
    pthread_join(t, NULL);
    printf("2: recv %zd \"%.*s\"\n", n, n > 0 ? (int)n : 0, b);
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    l = (struct later){p[1], 2};
    pthread_create(&t, NULL, write_later, &l);
    memset(b, 0, sizeof b);
    n = read(p[0], b, sizeof b);
    pthread_join(t, NULL);
    printf("2: pipe read %zd \"%.*s\"\n", n, n > 0 ? (int)n : 0, b);

    current_probe = "3: CLOSE_RANGE_CLOEXEC";
    int lo2 = sv[0] < p[0] ? sv[0] : p[0];
    int r = close_range((unsigned)lo2, ~0u, CLOSE_RANGE_CLOEXEC);
    int open_cloexec = 0;
    int fds[4] = {sv[0], sv[1], p[0], p[1]};
    for (int i = 0; i < 4; i++)
        open_cloexec += fcntl(fds[i], F_GETFD) == FD_CLOEXEC;
    printf("3: close_range CLOEXEC %d, fds open and close-on-exec: %d of 4\n", r, open_cloexec);
    alarm(0);
    return probe_exit("close_range");
}
