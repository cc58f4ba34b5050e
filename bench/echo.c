/* echo.c — a thread-per-connection TCP echo server under request/response load, with
 * the clients in the same process (one thread per client connection too).
 *
 * For each connection count C (100, 1,000 and 5,000 by default, or the ones given):
 * a listener on an ephemeral port of 127.0.0.1, an accept loop that gives every
 * connection its own server thread (read, write it back, until EOF), and C client
 * threads that connect and wait on a barrier until all C are connected. Then each
 * client sends n/C requests of REQ bytes one after another — write the request, read
 * the whole echo back — and hangs up. The time is taken from the barrier to the last
 * client's end, so connection set-up is not in it; ns_per_op = that time / n, and
 * requests/s = 1e9 / ns_per_op.
 *
 * Client and server are both in this process so that the three columns of
 * scripts/bench run the same whole workload: natively 2C + 2 OS threads, under bobbin
 * C server and C client green threads on BOBBIN_MAXPROCS Ps, and in Go (bench/go/echo,
 * net package, a goroutine per connection on each side) goroutines. scripts/bench
 * samples the process's peak OS threads and RSS for each connection count.
 *
 * Checksum: every echoed byte is compared with the byte sent, and the first byte of
 * every echo is summed; the sum must equal the one computed from the request bytes.
 * Usage: echo [n [C...]] (default n = 200,000); one line "echo_<C> n=<n>
 * ns_per_op=<x>" per connection count. Needs 2C + 16 fds: RLIMIT_NOFILE is raised
 * to its hard limit, and a count that still does not fit fails (exit 1).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

enum { REQ = 64 };

static struct sockaddr_in addr;
static pthread_barrier_t start;
static long per_conn;
static atomic_llong sum;

static uint8_t req_byte(long conn, long k, int j)
{
    return (uint8_t)(conn * 131 + k * 7 + j * 3 + (k >> 8));
}

static void fail(const char *what)
{
    fprintf(stderr, "echo: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *server(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (write(fd, buf, (size_t)n) != n)
            fail("server write");
    }
    close(fd);
    return NULL;
}

struct acceptor {
    int lfd;
    long conns;
    pthread_t *threads;
};

static void *accept_loop(void *arg)
{
    struct acceptor *a = arg;
    for (long i = 0; i < a->conns; i++) {
        int fd = accept(a->lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                i--;
                continue;
            }
            fail("accept");
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        bench_check(pthread_create(&a->threads[i], NULL, server, (void *)(intptr_t)fd),
                    "pthread_create (server)");
    }
    return NULL;
}

static void *client(void *arg)
{
    long id = (long)(intptr_t)arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        fail("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    while (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0)
        if (errno != EINTR)
            fail("connect");
    pthread_barrier_wait(&start);
    uint8_t out[REQ], in[REQ];
    long long s = 0;
    for (long k = 0; k < per_conn; k++) {
        for (int j = 0; j < REQ; j++)
            out[j] = req_byte(id, k, j);
        if (write(fd, out, REQ) != REQ)
            fail("client write");
        size_t got = 0;
        while (got < REQ) {
            ssize_t n = read(fd, in + got, REQ - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                fprintf(stderr, "echo: client %ld: %s\n", id, n ? strerror(errno) : "EOF");
                exit(1);
            }
            got += (size_t)n;
        }
        if (memcmp(in, out, REQ) != 0) {
            fprintf(stderr, "echo: client %ld: the echo differs from the request\n", id);
            exit(1);
        }
        s += in[0];
    }
    close(fd);
    atomic_fetch_add_explicit(&sum, s, memory_order_relaxed);
    return NULL;
}

static void run(long n, long conns)
{
    per_conn = n / conns;
    if (per_conn < 1)
        per_conn = 1;
    long total = per_conn * conns;
    atomic_store(&sum, 0);

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0)
        fail("socket");
    addr = (struct sockaddr_in){ .sin_family = AF_INET };
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof addr;
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, 4096) != 0 ||
        getsockname(lfd, (struct sockaddr *)&addr, &sl) != 0)
        fail("listen");

    pthread_t *servers = calloc((size_t)conns, sizeof *servers);
    pthread_t *clients = calloc((size_t)conns, sizeof *clients);
    if (!servers || !clients)
        fail("calloc");
    struct acceptor a = { lfd, conns, servers };
    pthread_t acc;
    bench_check(pthread_create(&acc, NULL, accept_loop, &a), "pthread_create (acceptor)");
    bench_check(pthread_barrier_init(&start, NULL, (unsigned)conns + 1), "barrier_init");
    for (long i = 0; i < conns; i++)
        bench_check(pthread_create(&clients[i], NULL, client, (void *)(intptr_t)i),
                    "pthread_create (client)");
    pthread_barrier_wait(&start);
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < conns; i++)
        bench_check(pthread_join(clients[i], NULL), "pthread_join");
    uint64_t t1 = bench_now_ns();
    bench_check(pthread_join(acc, NULL), "pthread_join");
    for (long i = 0; i < conns; i++)
        bench_check(pthread_join(servers[i], NULL), "pthread_join");
    close(lfd);
    pthread_barrier_destroy(&start);

    long long want = 0;
    for (long c = 0; c < conns; c++)
        for (long k = 0; k < per_conn; k++)
            want += req_byte(c, k, 0);
    char name[32];
    snprintf(name, sizeof name, "echo_%ld", conns);
    bench_verify(name, atomic_load(&sum), want);
    bench_report(name, total, t1 - t0);
    free(servers);
    free(clients);
}

static void raise_nofile(long need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        fail("getrlimit");
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)need) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)need) {
            fprintf(stderr, "echo: %ld fds needed, RLIMIT_NOFILE hard limit is %llu\n", need,
                    (unsigned long long)rl.rlim_max);
            exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    long n = 200000;
    long conns[16] = { 100, 1000, 5000 };
    int nconns = 3;
    if (argc > 1) {
        char *end;
        n = strtol(argv[1], &end, 10);
        if (*end || n <= 0 || argc > 2 + 16) {
            fprintf(stderr, "usage: echo [requests [connections...]]\n");
            return 2;
        }
    }
    if (argc > 2) {
        nconns = 0;
        for (int i = 2; i < argc; i++) {
            char *end;
            conns[nconns] = strtol(argv[i], &end, 10);
            if (*end || conns[nconns] <= 0) {
                fprintf(stderr, "usage: echo [requests [connections...]]\n");
                return 2;
            }
            nconns++;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    long most = 0;
    for (int i = 0; i < nconns; i++)
        most = conns[i] > most ? conns[i] : most;
    raise_nofile(2 * most + 16);
    for (int i = 0; i < nconns; i++)
        run(n, conns[i]);
    return 0;
}
