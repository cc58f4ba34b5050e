/* offg_sockets — blocking socket calls made where bobbin runs no green
 * thread: on a coroutine's stack (makecontext/swapcontext) and in a
 * SIGEV_THREAD timer callback (glibc's own helper thread), on sockets a
 * green thread made, which bobbin keeps non-blocking for real.
 *
 * The previous library passed such calls straight to the kernel, which
 * answered EAGAIN at once where the program expects a wait: read, recv,
 * send and sendfile failed, a 4 MiB write stopped after the 219 KiB that
 * fit, accept failed. And on a green thread, sendfile to such a socket
 * returned after the first part (a blocking socket takes the whole count),
 * and recvmmsg with a timeout answered EAGAIN at once.
 *
 * In each of three places (a plain thread, a coroutine on a thread, a
 * timer callback) the same calls run against a peer thread that answers
 * late: read and recv of data sent after a pause, a 4 MiB write and send,
 * accept of a connection made late, connect (of a socket main made), a 4 MiB sendfile, splice from
 * the socket into a pipe, a recv that SO_RCVTIMEO ends with EAGAIN, a
 * 256 KiB dprintf, a recvmmsg with a timeout (which the kernel looks at only
 * after a datagram: it waits for the first one), a recvfrom made through
 * syscall() (the library before it: EAGAIN). Then POSIX AIO reads of a
 * socket and of a pipe main made, data late: glibc's helper threads read
 * them with its internal read (the previous library: EAGAIN). Every result is printed and compared with NPTL's.
 */
#define PROBE_NAME "offg_sockets"
#include "probe.h"

#include <aio.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

enum { BIG = 4 << 20, PRINTED = 256 << 10 };

static int sv[2], lfd, cfd, port, filefd;
static char *big, *text;
static long peer_got[3];

static void report(const char *where, const char *what, long n)
{
    printf("%-10s %-22s %ld%s%s\n", where, what, n, n < 0 ? " " : "", n < 0 ? strerror(errno) : "");
}

static void pause_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* the peer's reads of want bytes: how many came */
static long read_up_to(long want)
{
    static char buf[65536];
    long got = 0;
    while (got < want) {
        ssize_t n = read(sv[1], buf, sizeof buf);
        if (n <= 0)
            break;
        got += n;
    }
    return got;
}

/* the other side, on a thread of its own, each step late */
static void *peer(void *arg)
{
    (void)arg;
    pause_ms(30);
    REQUIRE(write(sv[1], "hello", 5) == 5, "write");
    pause_ms(30);
    REQUIRE(write(sv[1], "again", 5) == 5, "write");
    pause_ms(30);
    peer_got[0] = read_up_to(2L * BIG); /* the write and the send */
    pause_ms(30);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    REQUIRE(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
    pause_ms(30);
    peer_got[1] = read_up_to(BIG); /* the sendfile */
    pause_ms(30);
    REQUIRE(write(sv[1], "splice", 6) == 6, "write");
    pause_ms(30);
    peer_got[2] = read_up_to(PRINTED); /* the dprintf */
    pause_ms(30);
    REQUIRE(write(sv[1], "mmsg!", 5) == 5, "write");
    pause_ms(30);
    REQUIRE(write(sv[1], "syscall", 7) == 7, "write");
    close(c);
    return NULL;
}

static void calls(const char *where)
{
    char b[16];
    report(where, "read", read(sv[0], b, sizeof b));
    report(where, "recv", recv(sv[0], b, sizeof b, 0));
    report(where, "write 4 MiB", write(sv[0], big, BIG));
    report(where, "send 4 MiB", send(sv[0], big, BIG, 0));
    int a = accept(lfd, NULL, NULL);
    report(where, "accept", a >= 0);
    if (a >= 0)
        close(a);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    report(where, "connect", connect(cfd, (struct sockaddr *)&sa, sizeof sa));
    close(cfd);
    off_t off = 0;
    report(where, "sendfile 4 MiB", sendfile(sv[0], filefd, &off, BIG));
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    report(where, "splice to a pipe", splice(sv[0], NULL, p[1], NULL, 64, 0));
    close(p[0]);
    close(p[1]);
    struct timeval tv = {0, 50000};
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    report(where, "recv, SO_RCVTIMEO", recv(sv[0], b, sizeof b, 0));
    tv.tv_usec = 0;
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    report(where, "dprintf 256 KiB", dprintf(sv[0], "%s", text));
    struct mmsghdr mm;
    struct iovec iov = {b, sizeof b};
    memset(&mm, 0, sizeof mm);
    mm.msg_hdr.msg_iov = &iov;
    mm.msg_hdr.msg_iovlen = 1;
    struct timespec to = {5, 0}; /* looked at after a datagram only */
    int k = recvmmsg(sv[0], &mm, 1, 0, &to);
    report(where, "recvmmsg, a timeout", k);
    report(where, "  its length", k == 1 ? (long)mm.msg_len : -1);
    report(where, "syscall(SYS_recvfrom)", syscall(SYS_recvfrom, sv[0], b, sizeof b, 0, NULL, NULL));
}

/* fresh sockets, made by main (a green thread under bobbin), and a peer */
static pthread_t start(void)
{
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof sa;
    REQUIRE(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(lfd, 4) == 0 &&
                getsockname(lfd, (struct sockaddr *)&sa, &l) == 0,
            "listener: %s", strerror(errno));
    port = ntohs(sa.sin_port);
    cfd = socket(AF_INET, SOCK_STREAM, 0); /* made here: one bobbin keeps non-blocking */
    REQUIRE(cfd >= 0, "socket");
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, peer, NULL) == 0, "pthread_create");
    return t;
}

static void finish(pthread_t t)
{
    pthread_join(t, NULL);
    printf("peer read: write+send %ld, sendfile %ld, dprintf %ld\n", peer_got[0], peer_got[1],
           peer_got[2]);
    close(sv[0]);
    close(sv[1]);
    close(lfd);
}

struct late_write {
    int fd;
    const char *text;
};

static void *write_late(void *arg)
{
    struct late_write *l = arg;
    pause_ms(30);
    REQUIRE(write(l->fd, l->text, strlen(l->text)) == (ssize_t)strlen(l->text), "write");
    return NULL;
}

/* an aio_read of fds[0] while another thread writes fds[1] late */
static void aio_late(const char *what, int fds[2])
{
    char buf[16];
    struct aiocb cb;
    memset(&cb, 0, sizeof cb);
    cb.aio_fildes = fds[0];
    cb.aio_buf = buf;
    cb.aio_nbytes = sizeof buf;
    struct late_write l = {fds[1], "aio!"};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, write_late, &l) == 0, "pthread_create");
    int r = aio_read(&cb);
    const struct aiocb *list[1] = {&cb};
    while (r == 0 && aio_error(&cb) == EINPROGRESS)
        aio_suspend(list, 1, NULL);
    int err = r == 0 ? aio_error(&cb) : errno;
    printf("aio_read of a %-6s %d, %s, %zd\n", what, r, strerror(err), r == 0 ? aio_return(&cb) : -1);
    pthread_join(t, NULL);
    close(fds[0]);
    close(fds[1]);
}

static void *plain(void *arg)
{
    calls(arg);
    return NULL;
}

static void coroutine(void)
{
    calls("coroutine");
}

static void *on_coroutine(void *arg)
{
    (void)arg;
    probe_on_coroutine(coroutine);
    return NULL;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int callback_done;

static void callback(union sigval v)
{
    (void)v;
    calls("callback");
    pthread_mutex_lock(&mu);
    callback_done = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    signal(SIGPIPE, SIG_IGN);
    big = calloc(1, BIG);
    text = malloc(PRINTED + 1);
    REQUIRE(big && text, "malloc");
    memset(text, 'x', PRINTED);
    text[PRINTED] = '\0';
    char path[] = "/tmp/offg_sockets.XXXXXX";
    filefd = mkstemp(path);
    REQUIRE(filefd >= 0 && write(filefd, big, BIG) == BIG, "temporary file");
    unlink(path);

    current_probe = "1: a plain thread";
    alarm(60);
    pthread_t p = start(), t;
    REQUIRE(pthread_create(&t, NULL, plain, "thread") == 0, "pthread_create");
    pthread_join(t, NULL);
    finish(p);

    current_probe = "2: a coroutine";
    p = start();
    REQUIRE(pthread_create(&t, NULL, on_coroutine, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    finish(p);

    current_probe = "3: a timer callback";
    p = start();
    timer_t timer = probe_callback_soon(callback);
    pthread_mutex_lock(&mu);
    while (!callback_done)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    finish(p);
    timer_delete(timer);

    current_probe = "4: POSIX AIO";
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0, "socketpair");
    aio_late("socket", fds);
    REQUIRE(pipe(fds) == 0, "pipe");
    aio_late("pipe", fds);
    alarm(0);
    printf("offg_sockets: done\n");
    return probe_exit(PROBE_NAME);
}
