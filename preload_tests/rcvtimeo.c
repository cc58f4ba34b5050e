/* rcvtimeo — SO_RCVTIMEO and SO_SNDTIMEO on blocking sockets.
 *
 *   - recv, read, recvmsg and accept on a socket with SO_RCVTIMEO = 200 ms and nothing
 *     to read end with -1 EAGAIN after about 200 ms (at least 90 % of it, at most
 *     5 s: a generous bound, never printed);
 *   - data that arrives before the timeout (a helper thread writes after 50 ms) is
 *     returned normally;
 *   - SO_RCVTIMEO = 0 means no timeout: the read waits for the helper's byte;
 *   - send on a socket whose buffers are full, with SO_SNDTIMEO = 200 ms, ends with
 *     -1 EAGAIN after about 200 ms; a send larger than the space left returns a partial
 *     count when the timeout expires;
 *   - getsockopt reads back the timeouts set;
 *   - two threads at once on one socket: one in recv with a timeout, the other sending
 *     on it (the receive timeout does not touch the send side).
 * stdout: each call's result (return value or -1 and the errno name); the times are
 * checked, never printed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { TIMEO_MS = 200, EARLY_MS = 50, LATE_MS = 5000 };

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *res(long r)
{
    static char buf[64];
    const char *e = errno == EAGAIN ? "EAGAIN" : errno == EINPROGRESS ? "EINPROGRESS"
                  : errno == ETIMEDOUT ? "ETIMEDOUT" : errno == EINTR ? "EINTR" : "other";
    if (r < 0)
        snprintf(buf, sizeof buf, "ret=-1 %s", e);
    else
        snprintf(buf, sizeof buf, "ret=%ld", r);
    return buf;
}

static void set_timeo(int fd, int opt, int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    REQUIRE(setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv) == 0, "setsockopt: %s",
            strerror(errno));
}

static void check_timed_out(const char *what, int64_t t0)
{
    int64_t el = now_ms() - t0;
    CHECK(el >= TIMEO_MS * 9 / 10, "%s returned after %lld ms, before its %d ms timeout", what,
          (long long)el, TIMEO_MS);
    CHECK(el < TIMEO_MS + LATE_MS, "%s took %lld ms for a %d ms timeout", what, (long long)el,
          TIMEO_MS);
}

struct helper {
    pthread_t t;
    int fd, ms;
};

static void *helper_fn(void *arg)
{
    struct helper *h = arg;
    usleep((useconds_t)h->ms * 1000);
    CHECK(send(h->fd, "d", 1, MSG_NOSIGNAL) == 1, "helper send: %s", strerror(errno));
    return NULL;
}

static void helper_start(struct helper *h, int fd, int ms)
{
    h->fd = fd;
    h->ms = ms;
    REQUIRE(pthread_create(&h->t, NULL, helper_fn, h) == 0, "pthread_create");
}

static int tcp_listener(struct sockaddr_in *sa)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(l >= 0, "socket: %s", strerror(errno));
    *sa = (struct sockaddr_in){ .sin_family = AF_INET };
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(l, (struct sockaddr *)sa, sizeof *sa) == 0, "bind: %s", strerror(errno));
    REQUIRE(listen(l, 16) == 0, "listen: %s", strerror(errno));
    socklen_t sl = sizeof *sa;
    REQUIRE(getsockname(l, (struct sockaddr *)sa, &sl) == 0, "getsockname");
    return l;
}

static void probe_rcvtimeo(const char *kind, int a, int b)
{
    printf("%s, SO_RCVTIMEO %d ms:\n", kind, TIMEO_MS);
    set_timeo(a, SO_RCVTIMEO, TIMEO_MS);
    struct timeval tv;
    socklen_t sl = sizeof tv;
    REQUIRE(getsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, &sl) == 0, "getsockopt");
    printf("  getsockopt: %ld.%06ld\n", (long)tv.tv_sec, (long)tv.tv_usec);
    char buf[16];
    int64_t t0 = now_ms();
    ssize_t n = recv(a, buf, sizeof buf, 0);
    check_timed_out("recv", t0);
    printf("  recv, nothing sent: %s\n", res(n));
    t0 = now_ms();
    n = read(a, buf, sizeof buf);
    check_timed_out("read", t0);
    printf("  read, nothing sent: %s\n", res(n));
    struct iovec v = { buf, sizeof buf };
    struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
    t0 = now_ms();
    n = recvmsg(a, &m, 0);
    check_timed_out("recvmsg", t0);
    printf("  recvmsg, nothing sent: %s\n", res(n));
    t0 = now_ms();
    n = readv(a, &v, 1);
    check_timed_out("readv", t0);
    printf("  readv, nothing sent: %s\n", res(n));

    struct helper h;
    helper_start(&h, b, EARLY_MS);
    n = recv(a, buf, sizeof buf, 0);
    printf("  recv, data after %d ms: %s byte=%c\n", EARLY_MS, res(n), n == 1 ? buf[0] : '-');
    pthread_join(h.t, NULL);

    /* 0 turns the timeout off: wait for data that comes after more than TIMEO_MS */
    set_timeo(a, SO_RCVTIMEO, 0);
    helper_start(&h, b, TIMEO_MS * 2);
    t0 = now_ms();
    n = recv(a, buf, sizeof buf, 0);
    int64_t el = now_ms() - t0;
    printf("  timeout 0, data after %d ms: %s waited=%s\n", TIMEO_MS * 2, res(n),
           el >= TIMEO_MS ? "yes" : "no");
    pthread_join(h.t, NULL);
}

/* fill a's send side (and b's receive side) with MSG_DONTWAIT sends */
static long fill(int a)
{
    static char buf[65536];
    long total = 0;
    for (;;) {
        ssize_t n = send(a, buf, sizeof buf, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0)
            break;
        total += n;
    }
    CHECK(errno == EAGAIN, "filling stopped with %s", strerror(errno));
    return total;
}

static void probe_sndtimeo(const char *kind, int a, int b)
{
    printf("%s, SO_SNDTIMEO %d ms:\n", kind, TIMEO_MS);
    int small = 16384;
    setsockopt(a, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(b, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    set_timeo(a, SO_SNDTIMEO, TIMEO_MS);
    struct timeval tv;
    socklen_t sl = sizeof tv;
    REQUIRE(getsockopt(a, SOL_SOCKET, SO_SNDTIMEO, &tv, &sl) == 0, "getsockopt");
    printf("  getsockopt: %ld.%06ld\n", (long)tv.tv_sec, (long)tv.tv_usec);
    long filled = fill(a);
    printf("  filled: %s\n", filled > 0 ? "yes" : "no");

    static char big[1 << 20];
    int64_t t0 = now_ms();
    ssize_t n = send(a, big, 1, MSG_NOSIGNAL);
    check_timed_out("send on a full socket", t0);
    printf("  send 1 byte, full: %s\n", res(n));
    t0 = now_ms();
    n = write(a, big, 1000);
    check_timed_out("write on a full socket", t0);
    printf("  write 1000 bytes, full: %s\n", res(n));

    /* make room, then send far more than fits: a partial count at the timeout */
    char sink[4096];
    while (recv(b, sink, sizeof sink, MSG_DONTWAIT) > 0)
        ;
    /* TCP frees the sender's buffer only once the peer's window opens: wait for it */
    struct pollfd pw = { a, POLLOUT, 0 };
    int pr = poll(&pw, 1, LATE_MS);
    CHECK(pr == 1, "the socket did not become writable after the peer read (%d)", pr);
    t0 = now_ms();
    n = send(a, big, sizeof big, MSG_NOSIGNAL);
    int64_t el = now_ms() - t0;
    CHECK(el < TIMEO_MS + LATE_MS, "partial send took %lld ms", (long long)el);
    printf("  send 1 MiB with room for part of it: %s\n",
           n > 0 && n < (ssize_t)sizeof big ? "partial" : res(n));
}

/* one thread waits in recv with a timeout while another sends on the same socket */
struct both {
    int fd;
    ssize_t rn;
    int rerr;
};

static void *timed_reader(void *arg)
{
    struct both *b = arg;
    char c;
    b->rn = recv(b->fd, &c, 1, 0);
    b->rerr = errno;
    return NULL;
}

static void probe_both_sides(int a, int b)
{
    printf("recv with a timeout and send on one socket at once:\n");
    set_timeo(a, SO_RCVTIMEO, TIMEO_MS);
    set_timeo(a, SO_SNDTIMEO, 0);
    struct both st = { .fd = a };
    pthread_t t;
    int64_t t0 = now_ms();
    REQUIRE(pthread_create(&t, NULL, timed_reader, &st) == 0, "pthread_create");
    static char buf[100000];
    long sent = 0;
    char sink[8192];
    for (int i = 0; i < 20; i++) {
        ssize_t n = send(a, buf, sizeof buf / 20, MSG_NOSIGNAL);
        if (n > 0)
            sent += n;
        while (recv(b, sink, sizeof sink, MSG_DONTWAIT) > 0)
            ;
    }
    pthread_join(t, NULL);
    check_timed_out("recv beside sends", t0);
    errno = st.rerr;
    printf("  sent=%ld recv: %s\n", sent, res(st.rn));
}

int main(void)
{
    alarm(55);
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    probe_rcvtimeo("socketpair", sv[0], sv[1]);
    probe_sndtimeo("socketpair", sv[0], sv[1]);
    close(sv[0]);
    close(sv[1]);

    struct sockaddr_in sa;
    int l = tcp_listener(&sa);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
    int s = accept(l, NULL, NULL);
    REQUIRE(s >= 0, "accept: %s", strerror(errno));
    probe_rcvtimeo("TCP", c, s);
    probe_sndtimeo("TCP", s, c);
    close(c);
    close(s);

    printf("accept, SO_RCVTIMEO %d ms:\n", TIMEO_MS);
    set_timeo(l, SO_RCVTIMEO, TIMEO_MS);
    int64_t t0 = now_ms();
    int r = accept(l, NULL, NULL);
    check_timed_out("accept", t0);
    printf("  accept, nobody connects: %s\n", res(r));

    /* the options are the socket's: an accepted connection has its
     * listener's, and a dup (Rust's try_clone) sees one set after it */
    c = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
    s = accept(l, NULL, NULL);
    REQUIRE(s >= 0, "accept: %s", strerror(errno));
    char byte;
    t0 = now_ms();
    r = (int)read(s, &byte, 1);
    check_timed_out("read on an accepted connection", t0);
    printf("  read on a connection accepted from it: %s\n", res(r));
    int dup_s = fcntl(s, F_DUPFD_CLOEXEC, 0);
    set_timeo(s, SO_RCVTIMEO, 0);
    set_timeo(c, SO_RCVTIMEO, TIMEO_MS);
    t0 = now_ms();
    int dup_c = dup(c);
    r = (int)read(dup_c, &byte, 1);
    check_timed_out("read on a dup", t0);
    printf("  read on a dup made before the option was set: %s\n", res(r));
    close(dup_s);
    close(dup_c);
    close(c);
    close(s);
    close(l);

    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    probe_both_sides(sv[0], sv[1]);
    close(sv[0]);
    close(sv[1]);
    return probe_exit("rcvtimeo");
}
