/* nonblock_eagain — O_NONBLOCK as the program sets it: EAGAIN where it asked for
 * non-blocking I/O, blocking where it did not, and F_GETFL reporting exactly what it
 * set.
 *
 * bobbin makes the sockets a program creates non-blocking for real and keeps the
 * program's own view apart; pipes it never changes. This probe checks that view from
 * every side:
 *   - made non-blocking by fcntl(F_SETFL), ioctl(FIONBIO), SOCK_NONBLOCK (socket,
 *     socketpair, accept4) and pipe2(O_NONBLOCK): read/recv/accept give EAGAIN, a full
 *     pipe or socket gives EAGAIN on write, F_GETFL shows O_NONBLOCK;
 *   - sockets the program left blocking (socket, socketpair, accept, accept from a
 *     non-blocking listener, dup, F_DUPFD): F_GETFL shows no O_NONBLOCK;
 *   - toggled back to blocking (fcntl or FIONBIO): a read waits again, until a helper
 *     thread writes HELPER_MS later;
 *   - O_NONBLOCK belongs to the open file description: set through a dup, the
 *     original fd is non-blocking too (F_GETFL and EAGAIN), and cleared through the
 *     dup it is blocking again;
 *   - MSG_DONTWAIT on a blocking socket gives EAGAIN;
 *   - an fd number that held a socket, reused for a pipe, is a plain pipe: blocking
 *     reads wait, F_SETFL sets the flags asked for, and O_NONBLOCK never appears in the
 *     flags the kernel holds (/proc/self/fdinfo), which other processes sharing the
 *     pipe would see.
 * stdout: each call's result (return value, errno name, F_GETFL in hex). A read that
 * must wait prints whether it did wait (at least half of HELPER_MS); when it should
 * not wait (EAGAIN expected) a helper writes anyway, so a wrong wait costs time, not a
 * hang.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { HELPER_MS = 150 };

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
    case EAGAIN: return "EAGAIN";
    case EINPROGRESS: return "EINPROGRESS";
    case EBADF: return "EBADF";
    case EINVAL: return "EINVAL";
    case ENOTSOCK: return "ENOTSOCK";
    default: return "other";
    }
}

/* "ret=N" or "ret=-1 EAGAIN" for a call that just returned r */
static const char *res(long r)
{
    static char buf[64];
    if (r < 0)
        snprintf(buf, sizeof buf, "ret=-1 %s", err_name(errno));
    else
        snprintf(buf, sizeof buf, "ret=%ld", r);
    return buf;
}

static void show_flags(const char *what, int fd)
{
    int fl = fcntl(fd, F_GETFL);
    printf("  %s: F_GETFL=%#x nonblock=%s\n", what, fl, fl >= 0 && (fl & O_NONBLOCK) ? "yes" : "no");
}

static void drain(int fd);

/* ---- a helper that writes one byte after HELPER_MS ---- */

struct helper {
    pthread_t t;
    int fd;
};

static void *helper_fn(void *arg)
{
    struct helper *h = arg;
    usleep(HELPER_MS * 1000);
    CHECK(write(h->fd, "h", 1) == 1, "helper write: %s", strerror(errno));
    return NULL;
}

static void helper_start(struct helper *h, int fd)
{
    h->fd = fd;
    REQUIRE(pthread_create(&h->t, NULL, helper_fn, h) == 0, "pthread_create");
}

/* a read that must block until the helper's byte: prints whether it waited */
static void read_blocks(const char *what, int rfd, int wfd)
{
    struct helper h;
    helper_start(&h, wfd);
    int64_t t0 = now_ms();
    char c = 0;
    ssize_t n = read(rfd, &c, 1);
    int64_t el = now_ms() - t0;
    printf("  %s: read %s byte=%c waited=%s\n", what, res(n), n == 1 ? c : '-',
           el >= HELPER_MS / 2 ? "yes" : "no");
    pthread_join(h.t, NULL);
    if (n != 1)
        drain(rfd); /* the helper's byte must not leak into the next probe */
}

/* a read that must fail at once with EAGAIN; a helper writes anyway, so a read that
 * wrongly blocks ends */
static void read_eagain(const char *what, int rfd, int wfd)
{
    struct helper h;
    helper_start(&h, wfd);
    char c = 0;
    ssize_t n = read(rfd, &c, 1);
    printf("  %s: read %s\n", what, res(n));
    pthread_join(h.t, NULL);
    drain(rfd); /* the helper's byte, whatever happened */
}

/* fill a non-blocking fd until EAGAIN; returns the count written */
static long fill(int fd)
{
    static char buf[4096];
    long total = 0;
    for (int i = 0; i < 100000; i++) {
        ssize_t n = write(fd, buf, sizeof buf);
        if (n < 0) {
            printf("  fill: stops with %s\n", err_name(errno));
            return total;
        }
        total += n;
    }
    printf("  fill: never stopped\n");
    return total;
}

/* read whatever is there, without blocking (MSG_DONTWAIT-like, by O_NONBLOCK for the
 * duration, which also works on pipes) */
static void drain(int fd)
{
    char buf[4096];
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    while (read(fd, buf, sizeof buf) > 0)
        ;
    fcntl(fd, F_SETFL, fl);
}

/* ---- TCP on loopback ---- */

static int listener(int type_flags, struct sockaddr_in *sa)
{
    int l = socket(AF_INET, SOCK_STREAM | type_flags, 0);
    REQUIRE(l >= 0, "socket: %s", strerror(errno));
    *sa = (struct sockaddr_in){ .sin_family = AF_INET };
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(l, (struct sockaddr *)sa, sizeof *sa) == 0, "bind: %s", strerror(errno));
    REQUIRE(listen(l, 16) == 0, "listen: %s", strerror(errno));
    socklen_t sl = sizeof *sa;
    REQUIRE(getsockname(l, (struct sockaddr *)sa, &sl) == 0, "getsockname");
    return l;
}

/* a connected TCP pair: c (client) and *s (accepted) */
static int tcp_pair(int *s)
{
    struct sockaddr_in sa;
    int l = listener(0, &sa);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(c >= 0, "socket");
    REQUIRE(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
    *s = accept(l, NULL, NULL);
    REQUIRE(*s >= 0, "accept: %s", strerror(errno));
    close(l);
    return c;
}

/* ---- the probes ---- */

static void probe_fcntl_socketpair(void)
{
    printf("socketpair, O_NONBLOCK by fcntl:\n");
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    show_flags("as created", sv[0]);
    int fl = fcntl(sv[0], F_GETFL);
    printf("  F_SETFL O_NONBLOCK: %s\n", res(fcntl(sv[0], F_SETFL, fl | O_NONBLOCK)));
    show_flags("after F_SETFL", sv[0]);
    show_flags("the peer", sv[1]);
    read_eagain("empty", sv[0], sv[1]);
    char c;
    printf("  recv: %s\n", res(recv(sv[0], &c, 1, 0)));
    fill(sv[0]);
    drain(sv[1]);
    printf("  F_SETFL blocking: %s\n", res(fcntl(sv[0], F_SETFL, fl & ~O_NONBLOCK)));
    show_flags("after clearing", sv[0]);
    read_blocks("blocking again", sv[0], sv[1]);
    close(sv[0]);
    close(sv[1]);
}

static void probe_fionbio_tcp(void)
{
    printf("TCP, O_NONBLOCK by ioctl(FIONBIO):\n");
    int s, c = tcp_pair(&s);
    show_flags("client as created", c);
    show_flags("accepted", s);
    int on = 1;
    printf("  FIONBIO 1: %s\n", res(ioctl(c, FIONBIO, &on)));
    show_flags("after FIONBIO 1", c);
    read_eagain("empty", c, s);
    char c1;
    printf("  recv: %s\n", res(recv(c, &c1, 1, 0)));
    on = 0;
    printf("  FIONBIO 0: %s\n", res(ioctl(c, FIONBIO, &on)));
    show_flags("after FIONBIO 0", c);
    read_blocks("blocking again", c, s);
    /* the other direction: the accepted socket made non-blocking, then back */
    on = 1;
    ioctl(s, FIONBIO, &on);
    show_flags("accepted after FIONBIO 1", s);
    read_eagain("accepted, empty", s, c);
    on = 0;
    ioctl(s, FIONBIO, &on);
    read_blocks("accepted, blocking again", s, c);
    close(c);
    close(s);
}

static void probe_sock_nonblock(void)
{
    printf("SOCK_NONBLOCK:\n");
    struct sockaddr_in sa;
    int l = listener(SOCK_NONBLOCK, &sa);
    show_flags("listener", l);
    printf("  accept on empty listener: %s\n", res(accept(l, NULL, NULL)));
    int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    REQUIRE(c >= 0, "socket");
    show_flags("client", c);
    int r = connect(c, (struct sockaddr *)&sa, sizeof sa);
    printf("  connect: %s\n", r == 0 || errno == EINPROGRESS ? "0 or EINPROGRESS" : res(r));
    /* the connection shows up on the listener */
    int s = -1;
    for (int i = 0; i < 5000 && s < 0; i++) {
        s = accept(l, NULL, NULL);
        if (s < 0)
            usleep(1000);
    }
    REQUIRE(s >= 0, "accept: %s", strerror(errno));
    show_flags("accepted from a non-blocking listener with accept()", s);
    read_blocks("that accepted socket blocks", s, c);
    char ch;
    printf("  client recv: %s\n", res(recv(c, &ch, 1, 0)));

    int c2 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    REQUIRE(c2 >= 0, "socket");
    r = connect(c2, (struct sockaddr *)&sa, sizeof sa);
    int s2 = -1;
    for (int i = 0; i < 5000 && s2 < 0; i++) {
        s2 = accept4(l, NULL, NULL, SOCK_NONBLOCK);
        if (s2 < 0)
            usleep(1000);
    }
    REQUIRE(s2 >= 0, "accept4: %s", strerror(errno));
    show_flags("accepted with accept4(SOCK_NONBLOCK)", s2);
    read_eagain("accept4(SOCK_NONBLOCK) socket, empty", s2, c2);
    close(s2);
    close(c2);
    close(s);
    close(c);
    close(l);

    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0, "socketpair");
    show_flags("socketpair(SOCK_NONBLOCK)", sv[0]);
    read_eagain("socketpair(SOCK_NONBLOCK), empty", sv[0], sv[1]);
    fill(sv[1]);
    close(sv[0]);
    close(sv[1]);
}

static void probe_pipes(void)
{
    printf("pipes:\n");
    int p[2];
    REQUIRE(pipe2(p, O_NONBLOCK) == 0, "pipe2");
    show_flags("pipe2(O_NONBLOCK) read end", p[0]);
    show_flags("pipe2(O_NONBLOCK) write end", p[1]);
    read_eagain("empty", p[0], p[1]);
    printf("  filled with %ld bytes\n", fill(p[1]));
    /* a write larger than the space left is partial on a non-blocking pipe */
    char buf[8192] = { 0 };
    CHECK(read(p[0], buf, 4096) == 4096, "read 4096");
    ssize_t n = write(p[1], buf, sizeof buf);
    printf("  write 8192 into 4096 free: %s\n", res(n));
    close(p[0]);
    close(p[1]);

    REQUIRE(pipe(p) == 0, "pipe");
    show_flags("pipe read end", p[0]);
    show_flags("pipe write end", p[1]);
    int fl = fcntl(p[0], F_GETFL);
    fcntl(p[0], F_SETFL, fl | O_NONBLOCK);
    show_flags("read end after F_SETFL O_NONBLOCK", p[0]);
    read_eagain("empty", p[0], p[1]);
    fcntl(p[0], F_SETFL, fl);
    show_flags("read end cleared", p[0]);
    read_blocks("blocking again", p[0], p[1]);
    int on = 1;
    printf("  FIONBIO 1 on the read end: %s\n", res(ioctl(p[0], FIONBIO, &on)));
    show_flags("after FIONBIO 1", p[0]);
    read_eagain("empty", p[0], p[1]);
    on = 0;
    ioctl(p[0], FIONBIO, &on);
    read_blocks("FIONBIO 0, blocking again", p[0], p[1]);
    close(p[0]);
    close(p[1]);
}

static void probe_blocking_sockets(void)
{
    printf("sockets left blocking:\n");
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    int t = socket(AF_INET, SOCK_STREAM, 0);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    show_flags("socketpair", sv[0]);
    show_flags("socket(SOCK_STREAM)", t);
    show_flags("socket(SOCK_DGRAM)", u);
    char c;
    printf("  recv(MSG_DONTWAIT): %s\n", res(recv(sv[0], &c, 1, MSG_DONTWAIT)));
    int d = dup(sv[0]);
    show_flags("dup of it", d);
    read_blocks("dup blocks", d, sv[1]);
    int d2 = fcntl(sv[0], F_DUPFD_CLOEXEC, 100);
    show_flags("F_DUPFD_CLOEXEC of it", d2);
    read_blocks("F_DUPFD copy blocks", d2, sv[1]);
    int d3 = dup2(sv[0], 200);
    show_flags("dup2 of it", d3);
    read_blocks("dup2 copy blocks", d3, sv[1]);

    /* O_NONBLOCK is a property of the open file: shared by all the dups */
    int fl = fcntl(d, F_GETFL);
    fcntl(d, F_SETFL, fl | O_NONBLOCK);
    show_flags("the original after F_SETFL O_NONBLOCK on a dup", sv[0]);
    read_eagain("the original", sv[0], sv[1]);
    fcntl(d, F_SETFL, fl & ~O_NONBLOCK);
    show_flags("the original after clearing it on the dup", sv[0]);
    read_blocks("the original blocks again", sv[0], sv[1]);
    int on = 1;
    ioctl(sv[0], FIONBIO, &on);
    show_flags("a dup after FIONBIO 1 on the original", d2);
    read_eagain("that dup", d2, sv[1]);
    on = 0;
    ioctl(sv[0], FIONBIO, &on);
    read_blocks("that dup blocks again", d2, sv[1]);
    close(d);
    close(d2);
    close(d3);
    close(t);
    close(u);
    close(sv[0]);
    close(sv[1]);
}

/* O_NONBLOCK as the kernel holds it (/proc/self/fdinfo), whatever F_GETFL says */
static const char *real_nonblock(int fd)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return "unknown";
    unsigned long flags = 0;
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "flags: %lo", &flags) == 1) {
            found = 1;
            break;
        }
    fclose(f);
    return !found ? "unknown" : (flags & O_NONBLOCK) ? "yes" : "no";
}

/* the kernel's O_NONBLOCK of fd against that of a pipe just made (bobbin may keep
 * a pipe the process alone uses non-blocking for real, as a socket: the point here
 * is that the number's past as a socket leaves nothing behind) */
static const char *as_fresh_pipe(int fd)
{
    int q[2];
    REQUIRE(pipe(q) == 0, "pipe");
    int same = strcmp(real_nonblock(fd), real_nonblock(q[0])) == 0;
    close(q[0]);
    close(q[1]);
    return same ? "as a fresh pipe's" : "not as a fresh pipe's";
}

/* an fd number that was a socket is reused for a pipe: the pipe is the program's own
 * and must not inherit anything bobbin did to the socket */
static void probe_fd_reuse(void)
{
    printf("a socket's fd number reused by a pipe:\n");
    int s = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(s >= 0, "socket");
    char c;
    printf("  recv on the unconnected socket: %s\n", res(recv(s, &c, 1, 0)));
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    REQUIRE(dup2(p[0], s) == s, "dup2: %s", strerror(errno));
    close(p[0]);
    show_flags("the pipe on the socket's number", s);
    printf("  real O_NONBLOCK: %s\n", as_fresh_pipe(s));
    read_blocks("read", s, p[1]);
    int fl = fcntl(s, F_GETFL);
    printf("  F_SETFL without O_NONBLOCK: %s\n", res(fcntl(s, F_SETFL, fl & ~O_NONBLOCK)));
    show_flags("after F_SETFL", s);
    printf("  real O_NONBLOCK: %s\n", as_fresh_pipe(s));
    read_blocks("read again", s, p[1]);
    printf("  real O_NONBLOCK after the reads: %s\n", as_fresh_pipe(s));
    close(s);
    close(p[1]);
}

int main(void)
{
    alarm(55);
    probe_fcntl_socketpair();
    probe_fionbio_tcp();
    probe_sock_nonblock();
    probe_pipes();
    probe_blocking_sockets();
    probe_fd_reuse();
    fflush(stdout);
    return probe_exit("nonblock_eagain");
}
