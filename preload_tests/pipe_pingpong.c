/* pipe_pingpong — blocking pipes between threads: one-byte ping-pong, writes larger
 * than the pipe's capacity, and PIPE_BUF atomicity with several writers.
 *
 *   pingpong   two threads, two pipes: A writes byte k into pipe 1, B reads it, checks
 *              it and writes k+1 into pipe 2, A reads and checks that; 100,000
 *              round trips (a lost wake-up hangs it: the harness's timeout).
 *   socketpair the same over one socketpair in both directions (ROUND_TRIPS / 4), then
 *              a pipe that gets the pair's closed numbers back carries 64 bytes to a
 *              reader parked on it.
 *   big write  one write() of 1 MiB into a pipe (64 KiB of capacity): a blocking write
 *              returns only when all of it is written, so it must return 1 MiB. The
 *              reader takes it with reads of odd sizes, then a writev() of three pieces
 *              (300 KiB) is read with 1 MiB reads. Every byte is checked.
 *   atomic     four writers, 2,000 records of 512 bytes each (512 <= PIPE_BUF, so each
 *              write is atomic) into one pipe; the reader checks that no record is torn
 *              or interleaved with another and that each writer's records come in
 *              order.
 *
 * stdout: one line per part with its counts and checksum.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "probe.h"

enum { ROUND_TRIPS = 100000, BIG = 1 << 20, WRITERS = 4, RECORDS = 2000, RECSZ = 512 };

static ssize_t read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return got > 0 ? (ssize_t)got : n;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* ---- pingpong ---- */

static int ping[2], pong[2];

/* one side of a ping-pong: the byte k comes in on rfd, k+1 goes out on wfd */
struct pong_side {
    const char *what;
    int rfd, wfd;
    long trips;
};

static void *ponger(void *arg)
{
    const struct pong_side *ps = arg;
    for (long k = 0; k < ps->trips; k++) {
        unsigned char c;
        if (read(ps->rfd, &c, 1) != 1) {
            CHECK(0, "%s ponger read: %s", ps->what, strerror(errno));
            break;
        }
        CHECK(c == (unsigned char)k, "%s ponger: got %u, want %u", ps->what, c, (unsigned char)k);
        c++;
        if (write(ps->wfd, &c, 1) != 1) {
            CHECK(0, "%s ponger write: %s", ps->what, strerror(errno));
            break;
        }
    }
    return NULL;
}

/* the other side: sends k on wfd, reads k+1 from rfd; returns the trips
 * made and adds the answers into *sum */
static long pinger(const struct pong_side *ps, uint64_t *sum)
{
    long trips = 0;
    for (long k = 0; k < ps->trips; k++) {
        unsigned char c = (unsigned char)k;
        if (write(ps->wfd, &c, 1) != 1 || read(ps->rfd, &c, 1) != 1) {
            CHECK(0, "%s pinger: %s", ps->what, strerror(errno));
            break;
        }
        CHECK(c == (unsigned char)(k + 1), "%s pinger: got %u, want %u", ps->what, c,
              (unsigned char)(k + 1));
        *sum += c;
        trips++;
    }
    return trips;
}

static void pingpong(void)
{
    REQUIRE(pipe(ping) == 0 && pipe(pong) == 0, "pipe: %s", strerror(errno));
    pthread_t t;
    struct pong_side back = {"pipe", ping[0], pong[1], ROUND_TRIPS};
    struct pong_side out = {"pipe", pong[0], ping[1], ROUND_TRIPS};
    REQUIRE(pthread_create(&t, NULL, ponger, &back) == 0, "pthread_create");
    uint64_t sum = 0;
    long trips = pinger(&out, &sum);
    pthread_join(t, NULL);
    for (int i = 0; i < 2; i++) {
        close(ping[i]);
        close(pong[i]);
    }
    printf("pingpong round_trips=%ld sum=%llu\n", trips, (unsigned long long)sum);
}

/* ---- socketpair ---- */

/* One socketpair, both directions: A sends k on sv[0], B answers k+1 on
 * sv[1]. Then the pair is closed and the same numbers come back for a
 * pipe made at once, whose ends must not be confused with the old pair's
 * (a write to the new write end wakes the reader of the new read end). */
static int sv[2];

static int reuse[2];

static void *reuse_reader(void *arg)
{
    (void)arg;
    unsigned char buf[64];
    ssize_t n = read_full(reuse[0], buf, sizeof buf);
    CHECK(n == (ssize_t)sizeof buf, "reused-number pipe read returned %zd", n);
    long s = 0;
    for (int i = 0; i < (int)sizeof buf; i++)
        s += buf[i];
    return (void *)s;
}

static void socket_pair(void)
{
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair: %s", strerror(errno));
    pthread_t t;
    struct pong_side back = {"socketpair", sv[1], sv[1], ROUND_TRIPS / 4};
    struct pong_side out = {"socketpair", sv[0], sv[0], ROUND_TRIPS / 4};
    REQUIRE(pthread_create(&t, NULL, ponger, &back) == 0, "pthread_create");
    uint64_t sum = 0;
    long trips = pinger(&out, &sum);
    pthread_join(t, NULL);
    int old0 = sv[0], old1 = sv[1];
    close(sv[0]);
    close(sv[1]);
    REQUIRE(pipe(reuse) == 0, "pipe: %s", strerror(errno));
    REQUIRE(pthread_create(&t, NULL, reuse_reader, NULL) == 0, "pthread_create");
    unsigned char buf[64];
    long want = 0;
    for (int i = 0; i < (int)sizeof buf; i++) {
        buf[i] = (unsigned char)(i * 7);
        want += buf[i];
    }
    for (int i = 0; i < (int)sizeof buf; i += 16) {
        usleep(1000); /* the reader parks between the pieces */
        CHECK(write(reuse[1], buf + i, 16) == 16, "pipe write: %s", strerror(errno));
    }
    void *got;
    pthread_join(t, &got);
    CHECK((long)got == want, "reused-number pipe carried %ld, want %ld", (long)got, want);
    printf("socketpair round_trips=%ld sum=%llu numbers_reused=%d\n", trips,
           (unsigned long long)sum, (reuse[0] == old0 || reuse[0] == old1) &&
           (reuse[1] == old0 || reuse[1] == old1));
    close(reuse[0]);
    close(reuse[1]);
}

/* ---- big write ---- */

static int big[2];
static unsigned char *bigbuf;

static unsigned char big_byte(size_t i)
{
    return (unsigned char)((i * 131) ^ (i >> 11));
}

static void *big_writer(void *arg)
{
    (void)arg;
    ssize_t n = write(big[1], bigbuf, BIG);
    CHECK(n == BIG, "write of %d bytes into a pipe returned %zd (%s)", BIG, n,
          n < 0 ? strerror(errno) : "short");
    /* then 300 KiB in three pieces of a writev */
    struct iovec v[3] = { { bigbuf, 100000 }, { bigbuf + 100000, 7 },
                          { bigbuf + 100007, 300 * 1024 - 100007 } };
    n = writev(big[1], v, 3);
    CHECK(n == 300 * 1024, "writev of %d bytes into a pipe returned %zd (%s)", 300 * 1024, n,
          n < 0 ? strerror(errno) : "short");
    close(big[1]);
    return NULL;
}

static void big_write(void)
{
    bigbuf = malloc(BIG);
    unsigned char *in = malloc(BIG);
    REQUIRE(bigbuf && in, "malloc");
    for (size_t i = 0; i < BIG; i++)
        bigbuf[i] = big_byte(i);
    REQUIRE(pipe(big) == 0, "pipe: %s", strerror(errno));
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, big_writer, NULL) == 0, "pthread_create");

    /* the 1 MiB write, in reads of odd sizes */
    static const size_t sizes[] = { 1, 4095, 65537, 13, 100000, 7777 };
    size_t got = 0;
    long reads = 0;
    while (got < BIG) {
        size_t want = sizes[reads % 6] < BIG - got ? sizes[reads % 6] : BIG - got;
        ssize_t n = read(big[0], in + got, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            CHECK(0, "read after %zu bytes: %s", got, n ? strerror(errno) : "EOF");
            break;
        }
        got += (size_t)n;
        reads++;
    }
    CHECK(got == BIG && memcmp(in, bigbuf, BIG) == 0, "1 MiB through the pipe differs");
    /* the writev, with reads of up to 1 MiB, then EOF */
    size_t got2 = 0;
    for (;;) {
        ssize_t n = read(big[0], in + got2, BIG - got2);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            CHECK(0, "read: %s", strerror(errno));
            break;
        }
        if (n == 0)
            break;
        got2 += (size_t)n;
    }
    CHECK(got2 == 300 * 1024 && memcmp(in, bigbuf, got2) == 0, "writev through the pipe differs");
    pthread_join(t, NULL);
    close(big[0]);
    uint64_t h = 0;
    for (size_t i = 0; i < got2; i++)
        h = h * 31 + in[i];
    printf("big_write bytes=%zu writev_bytes=%zu hash=%016llx\n", got, got2, (unsigned long long)h);
    free(in);
    free(bigbuf);
}

/* ---- atomic records ---- */

static int recpipe[2];

struct record {
    uint32_t writer, seq;
    unsigned char fill[RECSZ - 8];
};

static void *rec_writer(void *arg)
{
    uint32_t w = (uint32_t)(uintptr_t)arg;
    struct record r;
    for (uint32_t s = 0; s < RECORDS; s++) {
        r.writer = w;
        r.seq = s;
        memset(r.fill, (int)(w * 37 + s) & 0xff, sizeof r.fill);
        ssize_t n = write(recpipe[1], &r, sizeof r);
        if (n != (ssize_t)sizeof r) {
            CHECK(0, "writer %u: write returned %zd (%s)", w, n, n < 0 ? strerror(errno) : "short");
            break;
        }
    }
    return NULL;
}

static void atomic_records(void)
{
    _Static_assert(sizeof(struct record) == RECSZ && RECSZ <= PIPE_BUF, "record size");
    REQUIRE(pipe(recpipe) == 0, "pipe: %s", strerror(errno));
    pthread_t t[WRITERS];
    for (int w = 0; w < WRITERS; w++)
        REQUIRE(pthread_create(&t[w], NULL, rec_writer, (void *)(uintptr_t)w) == 0,
                "pthread_create");
    uint32_t next[WRITERS] = { 0 };
    long torn = 0, order = 0, total = 0;
    uint64_t sum = 0;
    struct record r;
    while (total < (long)WRITERS * RECORDS) {
        ssize_t n = read_full(recpipe[0], &r, sizeof r);
        if (n != (ssize_t)sizeof r) {
            CHECK(0, "reader: %zd (%s) after %ld records", n, n < 0 ? strerror(errno) : "EOF",
                  total);
            break;
        }
        total++;
        if (r.writer >= WRITERS) {
            torn++;
            continue;
        }
        for (size_t j = 0; j < sizeof r.fill; j++)
            if (r.fill[j] != ((r.writer * 37 + r.seq) & 0xff)) {
                torn++;
                break;
            }
        if (r.seq != next[r.writer])
            order++;
        next[r.writer] = r.seq + 1;
        sum += (uint64_t)r.writer * 100000 + r.seq;
    }
    for (int w = 0; w < WRITERS; w++)
        pthread_join(t[w], NULL);
    close(recpipe[0]);
    close(recpipe[1]);
    CHECK(torn == 0, "%ld torn or interleaved records", torn);
    CHECK(order == 0, "%ld records out of order", order);
    printf("atomic records=%ld torn=%ld out_of_order=%ld sum=%llu\n", total, torn, order,
           (unsigned long long)sum);
}

int main(void)
{
    alarm(55);
    pingpong();
    socket_pair();
    big_write();
    atomic_records();
    return probe_exit("pipe_pingpong");
}
