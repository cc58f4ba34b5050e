/* memc_client — a thread-per-connection memcached load client that checks every value.
 *
 * usage: memc_client PORT THREADS KEYS [VALUE_MAX]
 *
 * THREADS threads each open one TCP connection to 127.0.0.1:PORT (memcached's text
 * protocol) and
 *   1. store KEYS keys "bb:T:I" with `set`, 32 pipelined at a time; every value is
 *      16 + (hash(T, I) % VALUE_MAX) bytes (default VALUE_MAX 1000), its bytes made
 *      from T and I, so any mix-up of keys, values or connections shows;
 *   2. read them back with multi-key `get`s of 16 keys, checking every byte;
 *   3. after a barrier (every thread has stored its keys), read back the keys of the
 *      next thread, (T + 1) % THREADS, the same way: the server's shared table, not
 *      just one connection's, must hold them.
 * stdout (the same in every correct run): the totals, "sets=N gets=N verified=N";
 * stderr: the first mismatch, if any, and the throughput, "ops/s=X seconds=Y".
 * Exit 0 when every set was STORED and every value came back exact, 1 otherwise,
 * 2 on a usage error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { SET_BATCH = 32, GET_BATCH = 16, RBUF = 1 << 16, VMAX_LIMIT = 1 << 20 };

static int port, nthreads, nkeys, vmax = 1000;
static pthread_barrier_t stored;
static atomic_long sets, gets, verified, failures;
static atomic_int reported;

struct conn {
    int fd;
    char buf[RBUF];
    size_t off, len;
};

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
    atomic_fetch_add(&failures, 1);
    if (atomic_exchange(&reported, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("memc_client: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static size_t value_len(int t, int i)
{
    return 16 + (size_t)(mix(((uint64_t)t << 32) | (uint32_t)i) % (uint64_t)vmax);
}

/* the value of key (t, i): printable bytes from a hash stream */
static void make_value(int t, int i, char *v, size_t n)
{
    uint64_t s = mix(((uint64_t)(t + 1) << 40) ^ (uint64_t)i);
    for (size_t k = 0; k < n; k++) {
        if (k % 8 == 0)
            s = mix(s + k);
        v[k] = (char)('A' + (int)((s >> (8 * (k % 8))) % 58));
    }
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int fill(struct conn *c)
{
    if (c->off > 0 && c->off == c->len)
        c->off = c->len = 0;
    if (c->len == sizeof c->buf) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    for (;;) {
        ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c->len += (size_t)r;
        return 0;
    }
}

/* one line without its "\r\n" into line (at most cap - 1 bytes); -1 on EOF/error */
static int read_line(struct conn *c, char *line, size_t cap)
{
    for (;;) {
        char *nl = memchr(c->buf + c->off, '\n', c->len - c->off);
        if (nl) {
            size_t n = (size_t)(nl - (c->buf + c->off));
            size_t copy = n > 0 && nl[-1] == '\r' ? n - 1 : n;
            if (copy >= cap)
                copy = cap - 1;
            memcpy(line, c->buf + c->off, copy);
            line[copy] = '\0';
            c->off += n + 1;
            return 0;
        }
        if (c->len - c->off >= sizeof c->buf / 2 && c->off == 0)
            return -1;  /* a line longer than half the buffer: not memcached */
        if (fill(c) < 0)
            return -1;
    }
}

static int read_exact(struct conn *c, char *dst, size_t n)
{
    while (n > 0) {
        if (c->off == c->len && fill(c) < 0)
            return -1;
        size_t k = c->len - c->off < n ? c->len - c->off : n;
        memcpy(dst, c->buf + c->off, k);
        c->off += k;
        dst += k;
        n -= k;
    }
    return 0;
}

static int connect_server(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int store_all(struct conn *c, int t, char *val, char *out, size_t outcap)
{
    char line[256];
    for (int i = 0; i < nkeys; i += SET_BATCH) {
        int n = nkeys - i < SET_BATCH ? nkeys - i : SET_BATCH;
        size_t used = 0;
        for (int k = 0; k < n; k++) {
            size_t vl = value_len(t, i + k);
            make_value(t, i + k, val, vl);
            used += (size_t)snprintf(out + used, outcap - used, "set bb:%d:%d 0 0 %zu\r\n", t,
                                     i + k, vl);
            memcpy(out + used, val, vl);
            used += vl;
            memcpy(out + used, "\r\n", 2);
            used += 2;
        }
        if (write_all(c->fd, out, used) < 0) {
            report("thread %d: write: %s", t, strerror(errno));
            return -1;
        }
        for (int k = 0; k < n; k++) {
            if (read_line(c, line, sizeof line) < 0) {
                report("thread %d: connection lost during sets", t);
                return -1;
            }
            if (strcmp(line, "STORED") != 0) {
                report("thread %d: set bb:%d:%d answered \"%s\"", t, t, i + k, line);
                return -1;
            }
            atomic_fetch_add(&sets, 1);
        }
    }
    return 0;
}

/* get every key of thread `owner` over connection c, checking each value */
static int check_all(struct conn *c, int t, int owner, char *want, char *got)
{
    char req[GET_BATCH * 32 + 16], line[256];
    for (int i = 0; i < nkeys; i += GET_BATCH) {
        int n = nkeys - i < GET_BATCH ? nkeys - i : GET_BATCH;
        size_t used = (size_t)snprintf(req, sizeof req, "get");
        for (int k = 0; k < n; k++)
            used += (size_t)snprintf(req + used, sizeof req - used, " bb:%d:%d", owner, i + k);
        used += (size_t)snprintf(req + used, sizeof req - used, "\r\n");
        if (write_all(c->fd, req, used) < 0) {
            report("thread %d: write: %s", t, strerror(errno));
            return -1;
        }
        atomic_fetch_add(&gets, n);
        for (int k = 0; k < n; k++) {
            if (read_line(c, line, sizeof line) < 0) {
                report("thread %d: connection lost during gets", t);
                return -1;
            }
            char key[64];
            unsigned flags;
            size_t len;
            char expect_key[64];
            snprintf(expect_key, sizeof expect_key, "bb:%d:%d", owner, i + k);
            if (sscanf(line, "VALUE %63s %u %zu", key, &flags, &len) != 3 ||
                strcmp(key, expect_key) != 0) {
                report("thread %d: expected VALUE %s, got \"%s\"", t, expect_key, line);
                return -1;
            }
            size_t vl = value_len(owner, i + k);
            if (len != vl || len > (size_t)vmax + 16) {
                report("thread %d: %s has %zu bytes, expected %zu", t, expect_key, len, vl);
                return -1;
            }
            if (read_exact(c, got, len + 2) < 0) {
                report("thread %d: connection lost in a value", t);
                return -1;
            }
            make_value(owner, i + k, want, vl);
            if (memcmp(got, want, vl) != 0 || got[vl] != '\r' || got[vl + 1] != '\n') {
                report("thread %d: value of %s differs", t, expect_key);
                return -1;
            }
            atomic_fetch_add(&verified, 1);
        }
        if (read_line(c, line, sizeof line) < 0 || strcmp(line, "END") != 0) {
            report("thread %d: expected END, got \"%s\"", t, line);
            return -1;
        }
    }
    return 0;
}

static void *client(void *arg)
{
    int t = (int)(intptr_t)arg;
    struct conn *c = calloc(1, sizeof *c);
    size_t outcap = (size_t)SET_BATCH * ((size_t)vmax + 96);
    char *out = malloc(outcap), *want = malloc((size_t)vmax + 32), *got = malloc((size_t)vmax + 32);
    int ok = c && out && want && got;
    if (!ok)
        report("thread %d: out of memory", t);
    if (ok && (c->fd = connect_server()) < 0) {
        report("thread %d: connect to 127.0.0.1:%d: %s", t, port, strerror(errno));
        ok = 0;
    }
    if (ok && store_all(c, t, want, out, outcap) < 0)
        ok = 0;
    if (ok && check_all(c, t, t, want, got) < 0)
        ok = 0;
    pthread_barrier_wait(&stored); /* every thread gets here, failed or not */
    if (ok && check_all(c, t, (t + 1) % nthreads, want, got) < 0)
        ok = 0;
    if (c && c->fd > 0) {
        write_all(c->fd, "quit\r\n", 6);
        close(c->fd);
    }
    free(c);
    free(out);
    free(want);
    free(got);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: memc_client PORT THREADS KEYS [VALUE_MAX]\n");
        return 2;
    }
    port = atoi(argv[1]);
    nthreads = atoi(argv[2]);
    nkeys = atoi(argv[3]);
    if (argc == 5)
        vmax = atoi(argv[4]);
    if (port <= 0 || port > 65535 || nthreads <= 0 || nthreads > 10000 || nkeys <= 0 ||
        vmax <= 0 || vmax > VMAX_LIMIT) {
        fprintf(stderr, "memc_client: bad arguments\n");
        return 2;
    }
    pthread_barrier_init(&stored, NULL, (unsigned)nthreads);
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int made = 0;
    for (; made < nthreads; made++) {
        int e = pthread_create(&th[made], NULL, client, (void *)(intptr_t)made);
        if (e != 0) {
            fprintf(stderr, "memc_client: pthread_create: %s\n", strerror(e));
            return 1; /* the others wait at the barrier forever: exit instead */
        }
    }
    for (int i = 0; i < made; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    long ops = atomic_load(&sets) + atomic_load(&gets);
    printf("sets=%ld gets=%ld verified=%ld\n", atomic_load(&sets), atomic_load(&gets),
           atomic_load(&verified));
    fprintf(stderr, "ops/s=%.0f seconds=%.3f\n", s > 0 ? (double)ops / s : 0.0, s);
    long expect = (long)nthreads * nkeys;
    if (atomic_load(&failures) != 0 || atomic_load(&sets) != expect ||
        atomic_load(&verified) != 2 * expect)
        return 1;
    return 0;
}
