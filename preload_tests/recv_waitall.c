/* recv_waitall — recv/recvmsg with MSG_WAITALL on a stream socket wait for
 * the whole length, and a blocking sendmsg sends all it is given, as the
 * kernel's do.
 *
 * bobbin's reads try with MSG_DONTWAIT first, with which the kernel gives
 * what is there: a MSG_WAITALL read of 8 bytes sent one by one returned the
 * first byte alone (and the rest was read as the next message). A sender
 * thread writes one byte every 2 ms into a Unix stream socket:
 *  - recv of 8 bytes with MSG_WAITALL gets all 8;
 *  - recvmsg of 6 bytes into an iovec of 2 + 4 gets all 6, in place;
 *  - a signal (handler without SA_RESTART) sent once 5 bytes are there
 *    ends a 40-byte MSG_WAITALL read with those 5, not EINTR;
 *  - the peer's shutdown ends one with what came (3 of 10);
 *  - on a datagram socket MSG_WAITALL changes nothing (one datagram);
 *  - sendmsg of 1 MiB in two iovec parts to a reader that starts late
 *    sends it all (bobbin's returned after the first 146 KiB that fit),
 *    and the reader gets every byte;
 *  - pwritev2 (offset -1, no flags) of 1 MiB into a pipe, the same: glibc
 *    makes it its own writev, which bobbin did not see; the M blocked in
 *    the kernel, and a preemption signal cut the write short.
 * Every result is printed and compared with the native run's.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "probe.h"

static int sv[2];
static pthread_t reader_thread;

static void *drip(void *arg)
{
    const char *m = arg;
    for (size_t i = 0; i < strlen(m); i++) {
        usleep(2000);
        REQUIRE(send(sv[1], m + i, 1, 0) == 1, "send");
    }
    return NULL;
}

static void *drip_then_shut(void *arg)
{
    drip(arg);
    shutdown(sv[1], SHUT_WR);
    return NULL;
}

static void *drip_then_kick(void *arg)
{
    drip(arg);
    usleep(5000); /* the reader has the bytes and waits for the rest */
    pthread_kill(reader_thread, SIGUSR1);
    return NULL;
}

enum { BIG = 1 << 20 };
static long big_got;

static void *late_reader(void *arg)
{
    (void)arg;
    char chunk[4096];
    ssize_t n;
    usleep(20000); /* the sender fills the socket first */
    while ((n = read(sv[1], chunk, sizeof chunk)) > 0)
        big_got += n;
    return NULL;
}

static void on_usr1(int sig)
{
    (void)sig;
}

int main(void)
{
    char buf[64];
    pthread_t t;
    reader_thread = pthread_self();
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");

    REQUIRE(pthread_create(&t, NULL, drip, "abcdefgh") == 0, "pthread_create");
    ssize_t r = recv(sv[0], buf, 8, MSG_WAITALL);
    pthread_join(t, NULL);
    printf("recv MSG_WAITALL of 8: %zd '%.*s'\n", r, r > 0 ? (int)r : 0, buf);

    char a[2], b[4];
    struct iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
    struct msghdr mh = {0};
    mh.msg_iov = iov;
    mh.msg_iovlen = 2;
    REQUIRE(pthread_create(&t, NULL, drip, "ABCDEF") == 0, "pthread_create");
    r = recvmsg(sv[0], &mh, MSG_WAITALL);
    pthread_join(t, NULL);
    printf("recvmsg MSG_WAITALL of 2+4: %zd '%.2s' '%.4s'\n", r, a, b);

    probe_on_signal(SIGUSR1, on_usr1, 0); /* no SA_RESTART */
    REQUIRE(pthread_create(&t, NULL, drip_then_kick, "12345") == 0, "pthread_create");
    r = recv(sv[0], buf, 40, MSG_WAITALL);
    int e = errno;
    pthread_join(t, NULL);
    printf("recv MSG_WAITALL of 40, a signal after 5: %zd %s\n", r, r < 0 ? strerrorname_np(e) : "");

    REQUIRE(pthread_create(&t, NULL, drip_then_shut, "xyz") == 0, "pthread_create");
    r = recv(sv[0], buf, 10, MSG_WAITALL);
    pthread_join(t, NULL);
    printf("recv MSG_WAITALL of 10, peer shut down after 3: %zd '%.*s'\n", r, r > 0 ? (int)r : 0, buf);

    int d[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_DGRAM, 0, d) == 0, "socketpair");
    send(d[1], "dg", 2, 0);
    r = recv(d[0], buf, 10, MSG_WAITALL);
    printf("datagram recv MSG_WAITALL of 10: %zd\n", r);

    static char big[BIG];
    struct iovec two[2] = {{big, BIG / 4}, {big + BIG / 4, BIG - BIG / 4}};
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = two;
    mh.msg_iovlen = 2;
    REQUIRE(pthread_create(&t, NULL, late_reader, NULL) == 0, "pthread_create");
    r = sendmsg(sv[0], &mh, 0);
    shutdown(sv[0], SHUT_WR);
    pthread_join(t, NULL);
    printf("sendmsg of %d bytes in 2 parts: %zd, the reader got %ld\n", BIG, r, big_got);

    int pp[2];
    REQUIRE(pipe(pp) == 0, "pipe");
    sv[1] = pp[0]; /* late_reader reads sv[1] */
    big_got = 0;
    REQUIRE(pthread_create(&t, NULL, late_reader, NULL) == 0, "pthread_create");
    r = pwritev2(pp[1], two, 2, -1, 0);
    close(pp[1]);
    pthread_join(t, NULL);
    printf("pwritev2 of %d bytes into a pipe: %zd, the reader got %ld\n", BIG, r, big_got);
    return probe_exit("recv_waitall");
}
