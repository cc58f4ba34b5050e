/* close_wakes — a thread blocked in read/write/accept on an fd that another thread
 * closes, replaces with dup2, or shuts down: the blocked call must return as it does
 * natively, and never hang.
 *
 * Each case: a thread blocks in a call on fd F; SETTLE_MS later the main thread acts
 * on F (close, dup2 of /dev/null over it, shutdown); SETTLE_MS after that it acts on
 * the other end (closes the pipe's or socket's peer, or connects to the listener's
 * port), which natively is what ends a call still blocked on the old file: on Linux a
 * close or dup2 in one thread does not interrupt a call another thread is blocked in
 * — the call goes on with the file it started with, and returns 0 (EOF) or EPIPE when
 * the peer goes away. shutdown, by contrast, ends it at once.
 *
 * stdout: per case, whether the call returned (within LATE_MS of the last action)
 * and its result: a count, 0, or the errno name — nothing about when. Where the fd
 * was closed or dup2'd over, only "returned": bobbin ends such a call with EBADF
 * by design (README, Behaviour to know about), Linux lets it go on. A call that
 * has not returned is left behind (its thread detached) and reported as "returned=no";
 * the process still ends.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { SETTLE_MS = 200, LATE_MS = 5000 };

enum op { OP_READ, OP_WRITE, OP_ACCEPT };

struct blocked {
    enum op op;
    int fd;
    ssize_t ret;
    int err;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
};

static const char *err_name(int e)
{
    switch (e) {
    case EBADF: return "EBADF";
    case EPIPE: return "EPIPE";
    case EINVAL: return "EINVAL";
    case ECONNRESET: return "ECONNRESET";
    case ECONNABORTED: return "ECONNABORTED";
    case EINTR: return "EINTR";
    case EAGAIN: return "EAGAIN";
    default: return "other";
    }
}

static void *blocker(void *arg)
{
    struct blocked *b = arg;
    static char big[1 << 16];
    ssize_t r;
    switch (b->op) {
    case OP_READ: {
        char c;
        r = read(b->fd, &c, 1);
        break;
    }
    case OP_WRITE:
        r = write(b->fd, big, sizeof big);
        break;
    default:
        r = accept(b->fd, NULL, NULL);
        break;
    }
    int e = errno;
    pthread_mutex_lock(&b->mu);
    b->ret = r;
    b->err = e;
    b->done = 1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static struct blocked *start(enum op op, int fd, pthread_t *t)
{
    struct blocked *b = calloc(1, sizeof *b); /* leaked if the call never returns */
    REQUIRE(b != NULL, "calloc");
    b->op = op;
    b->fd = fd;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    REQUIRE(pthread_create(t, NULL, blocker, b) == 0, "pthread_create");
    usleep(SETTLE_MS * 1000); /* let it block */
    return b;
}

/* waits up to LATE_MS for the call to return; prints the outcome */
static void finish(const char *what, struct blocked *b, pthread_t t)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += LATE_MS / 1000;
    pthread_mutex_lock(&b->mu);
    while (!b->done)
        if (pthread_cond_timedwait(&b->cv, &b->mu, &until) == ETIMEDOUT)
            break;
    int done = b->done;
    pthread_mutex_unlock(&b->mu);
    if (!done) {
        printf("%s: returned=no\n", what);
        pthread_detach(t);
        return;
    }
    pthread_join(t, NULL);
    /* The result goes to stdout only when it must match natively. A close or
     * dup2 of an fd a call is blocked on ends that call with EBADF under
     * bobbin (issue 4's rule, Go's too: no green thread stays parked on a
     * closed fd), where Linux lets it go on with the old file; so for those
     * cases stdout says only that the call returned, and stderr the result. */
    char res[64];
    if (b->ret < 0)
        snprintf(res, sizeof res, "%s", err_name(b->err));
    else if (b->op == OP_ACCEPT)
        snprintf(res, sizeof res, "a new fd");
    else
        snprintf(res, sizeof res, "%zd", b->ret);
    bool closed_under_it = strstr(what, "closed, then") || strstr(what, "dup2'd over it");
    fprintf(stderr, "%s: result=%s\n", what, res);
    if (closed_under_it)
        printf("%s: returned=yes\n", what);
    else
        printf("%s: returned=yes result=%s\n", what, res);
    if (b->op == OP_ACCEPT && b->ret >= 0)
        close((int)b->ret);
    free(b);
}

static void settle(void)
{
    usleep(SETTLE_MS * 1000);
}

/* fill a pipe's write end so the next write blocks */
static void fill_pipe(int w)
{
    int fl = fcntl(w, F_GETFL);
    fcntl(w, F_SETFL, fl | O_NONBLOCK);
    static char buf[4096];
    while (write(w, buf, sizeof buf) > 0)
        ;
    fcntl(w, F_SETFL, fl);
}

static int listener(struct sockaddr_in *sa)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(l >= 0, "socket: %s", strerror(errno));
    *sa = (struct sockaddr_in){ .sin_family = AF_INET };
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(l, (struct sockaddr *)sa, sizeof *sa) == 0, "bind: %s", strerror(errno));
    REQUIRE(listen(l, 16) == 0, "listen: %s", strerror(errno));
    socklen_t sl = sizeof *sa;
    REQUIRE(getsockname(l, (struct sockaddr *)sa, &sl) == 0, "getsockname");
    return l;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(55);
    int devnull = open("/dev/null", O_RDONLY);
    REQUIRE(devnull >= 0, "open /dev/null: %s", strerror(errno));
    pthread_t t;
    struct blocked *b;
    int p[2], sv[2];

    REQUIRE(pipe(p) == 0, "pipe");
    b = start(OP_READ, p[0], &t);
    close(p[0]);
    settle();
    close(p[1]);
    finish("pipe read, fd closed, then the writer", b, t);

    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    b = start(OP_READ, sv[0], &t);
    close(sv[0]);
    settle();
    close(sv[1]);
    finish("socket read, fd closed, then the peer", b, t);

    REQUIRE(pipe(p) == 0, "pipe");
    b = start(OP_READ, p[0], &t);
    dup2(devnull, p[0]);
    settle();
    close(p[1]);
    finish("pipe read, /dev/null dup2'd over it, then the writer closed", b, t);
    close(p[0]);

    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    b = start(OP_READ, sv[0], &t);
    dup2(devnull, sv[0]);
    settle();
    close(sv[1]);
    finish("socket read, /dev/null dup2'd over it, then the peer closed", b, t);
    close(sv[0]);

    REQUIRE(pipe(p) == 0, "pipe");
    fill_pipe(p[1]);
    b = start(OP_WRITE, p[1], &t);
    close(p[1]);
    settle();
    close(p[0]);
    finish("pipe write (full), fd closed, then the reader", b, t);

    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    b = start(OP_READ, sv[0], &t);
    shutdown(sv[0], SHUT_RD);
    finish("socket read, shutdown(SHUT_RD) of its fd", b, t);
    close(sv[0]);
    close(sv[1]);

    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    b = start(OP_READ, sv[0], &t);
    shutdown(sv[1], SHUT_WR);
    finish("socket read, shutdown(SHUT_WR) by the peer", b, t);
    close(sv[0]);
    close(sv[1]);

    struct sockaddr_in sa;
    int l = listener(&sa);
    b = start(OP_ACCEPT, l, &t);
    shutdown(l, SHUT_RDWR);
    finish("accept, shutdown(SHUT_RDWR) of the listener", b, t);
    close(l);

    l = listener(&sa);
    b = start(OP_ACCEPT, l, &t);
    close(l);
    settle();
    int c = socket(AF_INET, SOCK_STREAM, 0);
    int cr = connect(c, (struct sockaddr *)&sa, sizeof sa);
    finish("accept, listener closed, then a client connects", b, t);
    /* natively the listener lives on in the blocked accept (0); under bobbin
     * the accept ended with EBADF and the listener is gone (ECONNREFUSED) */
    fprintf(stderr, "  that client's connect: %s\n", cr == 0 ? "0" : errno == ECONNREFUSED ? "ECONNREFUSED" : "other error");
    close(c);

    close(devnull);
    fflush(stdout);
    /* _exit: a call that never returned must not keep the process (or exit
     * handlers) waiting */
    _exit(probe_exit("close_wakes"));
}
