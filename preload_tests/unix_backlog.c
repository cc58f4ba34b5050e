/* unix_backlog — blocking calls on Unix-domain sockets that wait for the
 * peer, not for readiness of the caller's own socket.
 *
 * A blocking connect to a Unix-domain listener whose backlog is full waits
 * in the kernel until the listener accepts; a non-blocking one fails with
 * EAGAIN. bobbin makes every socket non-blocking for real, so it must wait
 * for the program: the program never sees EAGAIN from a socket it left
 * blocking.
 *
 * Probes (each compared with what the kernel does natively):
 *  1. backlog 1, nobody accepts for 100 ms: 8 blocking connects from main
 *     all succeed, and the acceptor reads each one's byte;
 *  2. full backlog, SO_SNDTIMEO 50 ms: connect fails with EAGAIN, no earlier
 *     than 40 ms;
 *  3. full backlog, the program's own O_NONBLOCK socket: EAGAIN at once;
 *  4. full backlog, a SIGUSR1 handler without SA_RESTART arriving after
 *     50 ms: connect fails with EINTR;
 *  5. 3,000 datagrams sent with sendto (not connected) to a receiver that
 *     starts reading after 100 ms: none lost, sum exact.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

static struct sockaddr_un addr;
static int lsock;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void make_addr(struct sockaddr_un *a, const char *tag)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    snprintf(a->sun_path, sizeof a->sun_path, "/tmp/bobbin-unix-%s-%d", tag, getpid());
    unlink(a->sun_path);
}

static int listener(const struct sockaddr_un *a)
{
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(s >= 0, "socket: %s", strerror(errno));
    REQUIRE(bind(s, (const struct sockaddr *)a, sizeof *a) == 0, "bind: %s", strerror(errno));
    REQUIRE(listen(s, 1) == 0, "listen: %s", strerror(errno));
    return s;
}

/* connect sockets without accepting until one would have to wait: the
 * backlog is full. Returns how many it made (closed by the caller). */
static int fill_backlog(int *held, int max)
{
    int n = 0;
    while (n < max) {
        int c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (connect(c, (struct sockaddr *)&addr, sizeof addr) != 0) {
            close(c);
            break;
        }
        held[n++] = c;
    }
    return n;
}

#define CLIENTS 8
static int accepted_bytes;

static void *acceptor(void *arg)
{
    (void)arg;
    usleep(100 * 1000);
    for (int i = 0; i < CLIENTS; i++) {
        int c = accept(lsock, NULL, NULL);
        if (c < 0) {
            CHECK(c >= 0, "accept: %s", strerror(errno));
            break;
        }
        char b;
        if (read(c, &b, 1) == 1 && b == 'a' + i)
            accepted_bytes++;
        close(c);
    }
    return NULL;
}

static void probe_blocking_connects(void)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, acceptor, NULL) == 0, "pthread_create");
    int ok = 0;
    for (int i = 0; i < CLIENTS; i++) {
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(c, (struct sockaddr *)&addr, sizeof addr) == 0) {
            char b = (char)('a' + i);
            if (write(c, &b, 1) == 1)
                ok++;
        } else {
            CHECK(0, "connect %d: %s", i, strerror(errno));
        }
        close(c);
    }
    pthread_join(t, NULL);
    printf("1. blocking connects to a full backlog: %d of %d made, %d bytes accepted\n", ok,
           CLIENTS, accepted_bytes);
    CHECK(ok == CLIENTS && accepted_bytes == CLIENTS, "connects %d, bytes %d", ok,
          accepted_bytes);
}

static void on_usr1(int sig)
{
    (void)sig;
}

static void *kick(void *arg)
{
    usleep(50 * 1000);
    pthread_kill(*(pthread_t *)arg, SIGUSR1);
    return NULL;
}

static void probe_full(void)
{
    int held[64];
    int n = fill_backlog(held, 64);
    CHECK(n >= 1 && n < 64, "backlog took %d connections", n);

    /* 2. SO_SNDTIMEO */
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    struct timeval tv = {0, 50 * 1000};
    setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    double t0 = now_ms();
    int r = connect(c, (struct sockaddr *)&addr, sizeof addr);
    int e = errno;
    double took = now_ms() - t0;
    printf("2. SO_SNDTIMEO 50 ms on a full backlog: %s\n", r == 0 ? "connected" : strerrorname_np(e));
    CHECK(r == -1 && e == EAGAIN, "connect: %d %s", r, strerror(e));
    CHECK(took >= 40, "timed out after %.1f ms", took);
    close(c);

    /* 3. the program's own O_NONBLOCK */
    c = socket(AF_UNIX, SOCK_STREAM, 0);
    fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
    t0 = now_ms();
    r = connect(c, (struct sockaddr *)&addr, sizeof addr);
    e = errno;
    took = now_ms() - t0;
    printf("3. O_NONBLOCK on a full backlog: %s\n", r == 0 ? "connected" : strerrorname_np(e));
    CHECK(r == -1 && e == EAGAIN, "connect: %d %s", r, strerror(e));
    CHECK(took < 1000, "took %.1f ms", took);
    close(c);

    /* 4. a handler without SA_RESTART */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t self = pthread_self(), t;
    pthread_create(&t, NULL, kick, &self);
    c = socket(AF_UNIX, SOCK_STREAM, 0);
    r = connect(c, (struct sockaddr *)&addr, sizeof addr);
    e = errno;
    pthread_join(t, NULL);
    printf("4. a signal during a connect to a full backlog: %s\n",
           r == 0 ? "connected" : strerrorname_np(e));
    CHECK(r == -1 && e == EINTR, "connect: %d %s", r, strerror(e));
    close(c);

    for (int i = 0; i < n; i++)
        close(held[i]);
}

#define DGRAMS 3000
static int dsock;
static long dsum;

static void *dreader(void *arg)
{
    (void)arg;
    usleep(100 * 1000);
    for (int i = 0; i < DGRAMS; i++) {
        int v;
        if (recv(dsock, &v, sizeof v, 0) != (ssize_t)sizeof v) {
            CHECK(0, "recv %d: %s", i, strerror(errno));
            break;
        }
        dsum += v;
    }
    return NULL;
}

static void probe_dgram(void)
{
    struct sockaddr_un da;
    make_addr(&da, "d");
    dsock = socket(AF_UNIX, SOCK_DGRAM, 0);
    REQUIRE(bind(dsock, (struct sockaddr *)&da, sizeof da) == 0, "bind: %s", strerror(errno));
    pthread_t t;
    pthread_create(&t, NULL, dreader, NULL);
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    int sent = 0;
    for (int i = 0; i < DGRAMS; i++)
        if (sendto(s, &i, sizeof i, 0, (struct sockaddr *)&da, sizeof da) == (ssize_t)sizeof i)
            sent++;
    pthread_join(t, NULL);
    long want = (long)DGRAMS * (DGRAMS - 1) / 2;
    printf("5. %d datagrams to a slow receiver: %d sent, sum %s\n", DGRAMS, sent,
           dsum == want ? "exact" : "WRONG");
    CHECK(sent == DGRAMS && dsum == want, "sent %d sum %ld want %ld", sent, dsum, want);
    close(s);
    close(dsock);
    unlink(da.sun_path);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    make_addr(&addr, "s");
    lsock = listener(&addr);
    probe_blocking_connects();
    probe_full();
    close(lsock);
    unlink(addr.sun_path);
    probe_dgram();
    return probe_exit("unix_backlog");
}
