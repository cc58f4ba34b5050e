/* echo_client — the native load for echo_server: NCONNS concurrent TCP connections.
 *
 * usage: echo_client PORT NCONNS
 *
 * Single-threaded, non-blocking sockets on one epoll instance, so the client itself
 * costs one OS thread whatever NCONNS is. echo_server starts it with LD_PRELOAD
 * removed from its environment: the load is always native, and only the server runs
 * under bobbin.
 *
 *   1. connect all NCONNS connections to 127.0.0.1:PORT, at most MAX_CONNECTING
 *      handshakes in flight (so the server's accept queue is never flooded), and keep
 *      every one of them open to the end;
 *   2. ECHO_ROUNDS rounds (echo_common.h): in each, every connection sends its
 *      message for the round, and the round ends only when every connection has had
 *      all of its bytes back — so after round 0 the server holds NCONNS connections,
 *      and a thread for each, at once;
 *   3. close everything and print one line on stdout:
 *          echo_client conns=N bytes=B checksum=0x...
 *      where B counts the echoed bytes and the checksum folds every echoed byte
 *      (echo_common.h). Every echoed byte is also checked as it arrives.
 *
 * Exits 0 on success, 1 on any failure (said on stderr), 2 on a usage error. It
 * raises RLIMIT_NOFILE to what it needs and fails if the hard limit is too low (the
 * server scales NCONNS down before starting it). No progress for NO_PROGRESS_MS is a
 * failure, so a stuck server never makes the client hang.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "echo_common.h"

enum { MAX_CONNECTING = 256, NO_PROGRESS_MS = 30000, MAX_EVENTS = 512 };

enum cstate { CONNECTING, ESTABLISHED };

struct conn {
    int fd;
    enum cstate state;
    size_t sent, recvd;  /* in the current round */
    uint64_t hash;
};

static struct conn *conns;
static long nconns;
static int round_no = -1;
static long round_done;
static uint64_t echoed_bytes;

static void die(const char *what, long conn, int err)
{
    fprintf(stderr, "echo_client: %s (connection %ld, round %d): %s\n", what, conn, round_no,
            err ? strerror(err) : "unexpected");
    exit(1);
}

static void try_send(long i)
{
    struct conn *c = &conns[i];
    size_t len = ECHO_SIZES[round_no];
    unsigned char buf[4096];
    while (c->sent < len) {
        size_t k = len - c->sent < sizeof buf ? len - c->sent : sizeof buf;
        for (size_t j = 0; j < k; j++)
            buf[j] = echo_byte(i, round_no, c->sent + j);
        ssize_t n = send(c->fd, buf, k, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EINTR)
                continue;
            die("send", i, errno);
        }
        c->sent += (size_t)n;
    }
}

static void try_recv(long i)
{
    struct conn *c = &conns[i];
    size_t len = ECHO_SIZES[round_no];
    unsigned char buf[8192];
    while (c->recvd < c->sent) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EINTR)
                continue;
            die("recv", i, errno);
        }
        if (n == 0)
            die("server closed the connection early", i, 0);
        if (c->recvd + (size_t)n > c->sent)
            die("more bytes echoed than sent", i, 0);
        for (ssize_t j = 0; j < n; j++) {
            if (buf[j] != echo_byte(i, round_no, c->recvd + (size_t)j))
                die("echoed byte differs from the byte sent", i, 0);
            c->hash = echo_fnv(c->hash, buf[j]);
        }
        c->recvd += (size_t)n;
        echoed_bytes += (uint64_t)n;
        if (c->recvd == len)
            round_done++;
    }
}

static void raise_nofile(long need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        die("getrlimit", -1, errno);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)need) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= (rlim_t)need
                          ? (rlim_t)need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            die("setrlimit(RLIMIT_NOFILE)", -1, errno);
        if (rl.rlim_cur < (rlim_t)need) {
            fprintf(stderr, "echo_client: %ld connections need %ld fds, the hard limit is %llu\n",
                    nconns, need, (unsigned long long)rl.rlim_max);
            exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) <= 0 || atol(argv[2]) <= 0) {
        fprintf(stderr, "usage: echo_client PORT NCONNS\n");
        return 2;
    }
    int port = atoi(argv[1]);
    nconns = atol(argv[2]);
    raise_nofile(nconns + 32);
    conns = calloc((size_t)nconns, sizeof *conns);
    if (conns == NULL)
        die("calloc", -1, errno);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1", -1, errno);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct epoll_event evs[MAX_EVENTS];

    /* 1. connect them all */
    long next = 0, connecting = 0, established = 0;
    while (established < nconns) {
        while (connecting < MAX_CONNECTING && next < nconns) {
            long i = next++;
            struct conn *c = &conns[i];
            c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (c->fd < 0)
                die("socket", i, errno);
            int one = 1;
            setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            c->hash = ECHO_FNV_INIT;
            struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLET, .data.u64 = (uint64_t)i };
            if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) != 0)
                die("epoll_ctl", i, errno);
            if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
                c->state = ESTABLISHED;
                established++;
            } else if (errno == EINPROGRESS) {
                c->state = CONNECTING;
                connecting++;
            } else {
                die("connect", i, errno);
            }
        }
        if (connecting == 0)
            continue;
        int n = epoll_wait(ep, evs, MAX_EVENTS, NO_PROGRESS_MS);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("epoll_wait", -1, errno);
        if (n == 0)
            die("no connection completed for 30 s", -1, ETIMEDOUT);
        for (int k = 0; k < n; k++) {
            long i = (long)evs[k].data.u64;
            struct conn *c = &conns[i];
            if (c->state != CONNECTING)
                continue;
            int err = 0;
            socklen_t sl = sizeof err;
            if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
                die("getsockopt(SO_ERROR)", i, errno);
            if (err != 0)
                die("connect", i, err);
            if (!(evs[k].events & EPOLLOUT))
                continue;
            c->state = ESTABLISHED;
            connecting--;
            established++;
        }
    }

    /* 2. the rounds: every connection in flight at once */
    for (round_no = 0; round_no < ECHO_ROUNDS; round_no++) {
        round_done = 0;
        for (long i = 0; i < nconns; i++) {
            conns[i].sent = conns[i].recvd = 0;
            try_send(i);
        }
        /* an echo of what was sent before the loop arrives as an edge below */
        while (round_done < nconns) {
            int n = epoll_wait(ep, evs, MAX_EVENTS, NO_PROGRESS_MS);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                die("epoll_wait", -1, errno);
            if (n == 0)
                die("no echo for 30 s", -1, ETIMEDOUT);
            for (int k = 0; k < n; k++) {
                long i = (long)evs[k].data.u64;
                if (evs[k].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
                    try_send(i);
                if (evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                    try_recv(i);
            }
        }
    }

    /* 3. hang up and report */
    uint64_t sum = 0;
    for (long i = 0; i < nconns; i++) {
        sum = echo_combine(sum, i, conns[i].hash);
        close(conns[i].fd);
    }
    close(ep);
    printf("echo_client conns=%ld bytes=%llu checksum=0x%016llx\n", nconns,
           (unsigned long long)echoed_bytes, (unsigned long long)sum);
    return fflush(stdout) == 0 ? 0 : 1;
}
