/* echo_inproc — 500 client threads and 500 server threads in one process, over TCP
 * on 127.0.0.1.
 *
 * Main listens on an ephemeral port, starts 500 client threads, then accepts 500
 * connections and gives each a server thread that echoes until EOF. Clients wait on a
 * barrier with main until every connection has its server thread, so all 1,000
 * threads are alive at once. Then client i, in each of ROUNDS rounds sends a message of SIZES[r] bytes (whose
 * bytes depend on i, r and the position) and reads the echo back in full, checking
 * every byte; then it half-closes (shutdown SHUT_WR), expects EOF from the server and
 * closes. Client and server threads use different calls by index — read/write,
 * recv/send, readv/writev, recvmsg/sendmsg, recvfrom/sendto — so every blocking
 * socket call runs with the others in flight. No message is larger than what the
 * socket buffers hold in one direction, so a client that writes all before reading
 * cannot deadlock with its server.
 *
 * stdout: the connection count, bytes echoed and a checksum of everything the
 * clients received (order-independent across clients). Under bobbin all 1,000
 * threads are green threads parked on the netpoller: the harness's default thread
 * limit (MAXPROCS + 2) applies.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "probe.h"

enum { NCONNS = 500, ROUNDS = 4, NKINDS = 5 };
static const size_t SIZES[ROUNDS] = { 1, 100, 4000, 20000 };
static const char *const KIND[NKINDS] = { "read/write", "recv/send", "readv/writev",
                                          "recvmsg/sendmsg", "recvfrom/sendto" };

static struct sockaddr_in server_addr;
static pthread_t clients[NCONNS], servers[NCONNS];
static atomic_ullong checksum;
/* the clients and main: nobody sends before all 1,000 threads exist */
static pthread_barrier_t all_connected;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static uint8_t byte_at(long conn, int round, size_t j)
{
    return (uint8_t)(mix((uint64_t)conn << 32 ^ (uint64_t)round << 24 ^ j / 8) >> (j % 8 * 8));
}

/* one call of the given kind; its result as the call returns it */
static ssize_t recv_some(int kind, int fd, void *buf, size_t len)
{
    switch (kind) {
    case 0:
        return read(fd, buf, len);
    case 1:
        return recv(fd, buf, len, 0);
    case 2: {
        /* two pieces, so readv scatters */
        struct iovec v[2] = { { buf, len / 2 }, { (char *)buf + len / 2, len - len / 2 } };
        return len > 1 ? readv(fd, v, 2) : readv(fd, v + 1, 1);
    }
    case 3: {
        struct iovec v = { buf, len };
        struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
        return recvmsg(fd, &m, 0);
    }
    default:
        return recvfrom(fd, buf, len, 0, NULL, NULL);
    }
}

static ssize_t send_some(int kind, int fd, const void *buf, size_t len)
{
    switch (kind) {
    case 0:
        return write(fd, buf, len);
    case 1:
        return send(fd, buf, len, MSG_NOSIGNAL);
    case 2: {
        struct iovec v[2] = { { (void *)buf, len / 2 },
                              { (char *)buf + len / 2, len - len / 2 } };
        return len > 1 ? writev(fd, v, 2) : writev(fd, v + 1, 1);
    }
    case 3: {
        struct iovec v = { (void *)buf, len };
        struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
        return sendmsg(fd, &m, MSG_NOSIGNAL);
    }
    default:
        return sendto(fd, buf, len, MSG_NOSIGNAL, NULL, 0);
    }
}

/* sends all of buf (sendmsg may legally return short on a stream socket) */
static int send_all(int kind, int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send_some(kind, fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static void *serve(void *arg)
{
    int fd = (int)(intptr_t)arg >> 8, kind = (int)(intptr_t)arg & 0xff;
    char buf[8192];
    for (;;) {
        ssize_t n = recv_some(kind, fd, buf, sizeof buf);
        if (n == 0)
            break;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            CHECK(0, "server %s: %s", KIND[kind], strerror(errno));
            break;
        }
        if (send_all(kind, fd, buf, (size_t)n) != 0) {
            CHECK(0, "server %s send: %s", KIND[kind], strerror(errno));
            break;
        }
    }
    close(fd);
    return NULL;
}

static void *client(void *arg)
{
    long i = (long)(intptr_t)arg;
    int kind = (int)(i % NKINDS);
    char out[20000], in[20000];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&server_addr, sizeof server_addr) != 0) {
        CHECK(0, "client %ld connect: %s", i, strerror(errno));
        close(fd);
        pthread_barrier_wait(&all_connected);
        return NULL;
    }
    pthread_barrier_wait(&all_connected);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int r = 0; r < ROUNDS; r++) {
        for (size_t j = 0; j < SIZES[r]; j++)
            out[j] = (char)byte_at(i, r, j);
        if (send_all(kind, fd, out, SIZES[r]) != 0) {
            CHECK(0, "client %ld %s send: %s", i, KIND[kind], strerror(errno));
            break;
        }
        size_t got = 0;
        while (got < SIZES[r]) {
            ssize_t n = recv_some(kind, fd, in + got, SIZES[r] - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                CHECK(0, "client %ld %s recv: %s", i, KIND[kind], n ? strerror(errno) : "EOF");
                break;
            }
            got += (size_t)n;
        }
        CHECK(got == SIZES[r] && memcmp(in, out, SIZES[r]) == 0,
              "client %ld round %d: echo differs", i, r);
        for (size_t j = 0; j < got; j++)
            h = (h ^ (uint8_t)in[j]) * 0x100000001b3ull;
    }
    CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown: %s", strerror(errno));
    char c;
    ssize_t n = recv_some(kind, fd, &c, 1);
    CHECK(n == 0, "client %ld: expected EOF after shutdown, got %zd (%s)", i, n,
          n < 0 ? strerror(errno) : "data");
    close(fd);
    atomic_fetch_add(&checksum, mix(h ^ (uint64_t)i));
    return NULL;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(55);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(lfd >= 0, "socket: %s", strerror(errno));
    server_addr.sin_family = AF_INET;
    server_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(lfd, (struct sockaddr *)&server_addr, sizeof server_addr) == 0, "bind: %s",
            strerror(errno));
    REQUIRE(listen(lfd, NCONNS) == 0, "listen: %s", strerror(errno));
    socklen_t sl = sizeof server_addr;
    REQUIRE(getsockname(lfd, (struct sockaddr *)&server_addr, &sl) == 0, "getsockname");

    pthread_barrier_init(&all_connected, NULL, NCONNS + 1);
    for (long i = 0; i < NCONNS; i++)
        REQUIRE(pthread_create(&clients[i], NULL, client, (void *)(intptr_t)i) == 0,
                "pthread_create client %ld", i);
    for (long i = 0; i < NCONNS; i++) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) {
            i--;
            continue;
        }
        REQUIRE(fd >= 0, "accept: %s", strerror(errno));
        /* the server's kind is not its client's: each pairing of calls meets */
        intptr_t arg = (intptr_t)fd << 8 | (intptr_t)((i * 3 + 1) % NKINDS);
        REQUIRE(pthread_create(&servers[i], NULL, serve, (void *)arg) == 0,
                "pthread_create server %ld", i);
    }
    close(lfd);
    pthread_barrier_wait(&all_connected);
    for (long i = 0; i < NCONNS; i++) {
        pthread_join(clients[i], NULL);
        pthread_join(servers[i], NULL);
    }
    uint64_t bytes = 0;
    for (int r = 0; r < ROUNDS; r++)
        bytes += SIZES[r];
    printf("echo_inproc conns=%d bytes=%llu checksum=0x%016llx\n", NCONNS,
           (unsigned long long)(bytes * NCONNS), (unsigned long long)atomic_load(&checksum));
    return probe_exit("echo_inproc");
}
