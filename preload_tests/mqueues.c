/* mqueues — threads that wait on POSIX message queues.
 *
 * 1. 50 threads each wait in mq_receive on a queue of their own until main
 *    sends them their number.
 * 2. Two threads ping-pong a counter over two queues, 2,000 round trips.
 * 3. A sender fills a queue of 4 messages and waits in mq_send for room
 *    while a receiver, started late, takes 100 messages.
 * 4. Errors: mq_timedreceive on an empty queue times out (ETIMEDOUT), with
 *    an invalid time-out fails with EINVAL, an O_NONBLOCK queue answers
 *    EAGAIN, and a handler without SA_RESTART interrupts mq_receive (EINTR).
 *
 * Under bobbin a receive or send that would block waits on the poller (a
 * queue descriptor is pollable); the library before 2026-11-26 blocked an
 * OS thread in each (part 1: 52 OS threads, where the harness allows
 * MAXPROCS + 2).
 */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

enum { NQ = 50, ROUNDS = 2000, MSGS = 100 };

static mqd_t open_queue(const char *tag, int i, long maxmsg, int flags)
{
    char name[64];
    snprintf(name, sizeof name, "/bobbin-mq-%d-%s-%d", (int)getpid(), tag, i);
    struct mq_attr a = {.mq_maxmsg = maxmsg, .mq_msgsize = sizeof(long)};
    mqd_t q = mq_open(name, O_CREAT | O_EXCL | O_RDWR | flags, 0600, &a);
    REQUIRE(q != (mqd_t)-1, "mq_open %s: %s", name, strerror(errno));
    mq_unlink(name); /* gone with the last close */
    return q;
}

static mqd_t own[NQ];

static void *own_reader(void *arg)
{
    long i = (long)arg, v = -1;
    if (mq_receive(own[i], (char *)&v, sizeof v, NULL) != sizeof v)
        return (void *)-1L;
    return (void *)v;
}

static mqd_t ping, pong;

static void *ponger(void *arg)
{
    (void)arg;
    for (int k = 0; k < ROUNDS; k++) {
        long v;
        if (mq_receive(ping, (char *)&v, sizeof v, NULL) != sizeof v)
            return (void *)-1L;
        v++;
        if (mq_send(pong, (const char *)&v, sizeof v, 0) != 0)
            return (void *)-1L;
    }
    return NULL;
}

static mqd_t small;

static void *filler(void *arg)
{
    (void)arg;
    for (long k = 0; k < MSGS; k++)
        if (mq_send(small, (const char *)&k, sizeof k, 0) != 0)
            return (void *)-1L;
    return NULL;
}

static void on_alrm(int sig)
{
    (void)sig;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    static pthread_t t[NQ];

    for (long i = 0; i < NQ; i++) {
        own[i] = open_queue("own", (int)i, 2, 0);
        REQUIRE(pthread_create(&t[i], NULL, own_reader, (void *)i) == 0, "create");
    }
    usleep(20 * 1000);
    for (long i = 0; i < NQ; i++) {
        long v = i * 3 + 1;
        REQUIRE(mq_send(own[i], (const char *)&v, sizeof v, 0) == 0, "mq_send");
    }
    long sum = 0, want = 0;
    for (long i = 0; i < NQ; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (long)r;
        want += i * 3 + 1;
        mq_close(own[i]);
    }
    printf("own queues: %ld (want %ld)\n", sum, want);
    CHECK(sum == want, "%ld", sum);

    ping = open_queue("ping", 0, 1, 0);
    pong = open_queue("pong", 0, 1, 0);
    REQUIRE(pthread_create(&t[0], NULL, ponger, NULL) == 0, "create");
    long v = 0;
    for (int k = 0; k < ROUNDS; k++) {
        REQUIRE(mq_send(ping, (const char *)&v, sizeof v, 0) == 0, "send");
        REQUIRE(mq_receive(pong, (char *)&v, sizeof v, NULL) == sizeof v, "receive");
        v++;
    }
    pthread_join(t[0], NULL);
    printf("ping-pong: counter %ld (want %d)\n", v, 2 * ROUNDS);
    CHECK(v == 2 * ROUNDS, "%ld", v);

    small = open_queue("small", 0, 4, 0);
    REQUIRE(pthread_create(&t[0], NULL, filler, NULL) == 0, "create");
    usleep(20 * 1000); /* the filler is waiting for room by now */
    long got = 0, in_order = 1;
    for (long k = 0; k < MSGS; k++) {
        long m = -1;
        REQUIRE(mq_receive(small, (char *)&m, sizeof m, NULL) == sizeof m, "receive");
        in_order &= m == k;
        got++;
    }
    void *fr;
    pthread_join(t[0], &fr);
    printf("full queue: %ld messages, in order %ld, sender %s\n", got, in_order,
           fr == NULL ? "ok" : "failed");
    CHECK(got == MSGS && in_order && fr == NULL, "full queue");

    mqd_t empty = open_queue("empty", 0, 2, 0);
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_nsec += 30 * 1000 * 1000;
    if (at.tv_nsec >= 1000000000) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000;
    }
    errno = 0;
    ssize_t n = mq_timedreceive(empty, (char *)&v, sizeof v, NULL, &at);
    printf("timed receive on an empty queue: %zd %s\n", n, errno == ETIMEDOUT ? "ETIMEDOUT" : "other");
    CHECK(n == -1 && errno == ETIMEDOUT, "errno %d", errno);
    struct timespec bad = {0, 2000000000L};
    errno = 0;
    n = mq_timedreceive(empty, (char *)&v, sizeof v, NULL, &bad);
    printf("invalid time-out: %zd %s\n", n, errno == EINVAL ? "EINVAL" : "other");
    CHECK(n == -1 && errno == EINVAL, "errno %d", errno);
    mqd_t nb = open_queue("nb", 0, 2, O_NONBLOCK);
    errno = 0;
    n = mq_receive(nb, (char *)&v, sizeof v, NULL);
    printf("O_NONBLOCK: %zd %s\n", n, errno == EAGAIN ? "EAGAIN" : "other");
    CHECK(n == -1 && errno == EAGAIN, "errno %d", errno);
    struct sigaction sa = {0};
    sa.sa_handler = on_alrm; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    alarm(1);
    errno = 0;
    n = mq_receive(empty, (char *)&v, sizeof v, NULL);
    printf("interrupted by a handler: %zd %s\n", n, errno == EINTR ? "EINTR" : "other");
    CHECK(n == -1 && errno == EINTR, "errno %d", errno);
    mq_close(empty);
    mq_close(nb);
    printf("mqueues: done\n");
    return probe_exit("mqueues");
}
