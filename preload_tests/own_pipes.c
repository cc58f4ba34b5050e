/* own_pipes — pipes a program makes and uses itself, and shares.
 *
 * Under bobbin a pipe made on a green thread is kept non-blocking for real
 * (plain read/write then, not preadv2/pwritev2 with RWF_NOWAIT), as its
 * sockets are, until stdio or another program may use it directly. Nothing
 * of that may show:
 *
 * 1. fcntl(F_GETFL) shows the mode the program asked for (pipe, pipe2 with
 *    O_NONBLOCK, F_SETFL both ways); a non-blocking pipe's read answers
 *    EAGAIN, a blocking one's waits.
 * 2. Blocking reads and writes between threads: data sent late is waited
 *    for, a 1 MiB write to a slow reader is whole, four writers' records of
 *    PIPE_BUF bytes never interleave, EPIPE once the reader is gone.
 * 3. tee, splice and vmsplice between pipes wait for data and room.
 * 4. Off a green thread (a coroutine's stack) a blocking read waits too.
 * 5. Shared: a forked child reads its inherited end blocking; a child of
 *    posix_spawn reads a pipe as its stdin (head -c); fdopen + fgets and
 *    dup2 onto stdin + fgets read late data; a pipe made after the fork and
 *    passed to the child over a Unix socket (SCM_RIGHTS) is blocking there
 *    and its read waits (the previous library: O_NONBLOCK, EAGAIN).
 * Every result is printed and compared with NPTL's.
 */
#define PROBE_NAME "own_pipes"
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void pause_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int nb(int fd)
{
    return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;
}

struct late {
    int fd, ms;
    const char *text;
};

/* writes text to fd after ms */
static void *write_late(void *arg)
{
    struct late *l = arg;
    pause_ms(l->ms);
    REQUIRE(write(l->fd, l->text, strlen(l->text)) == (ssize_t)strlen(l->text), "write");
    return NULL;
}

static pthread_t late(int fd, int ms, const char *text)
{
    static struct late ls[16];
    static int n;
    struct late *l = &ls[n++ % 16];
    *l = (struct late){fd, ms, text};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, write_late, l) == 0, "pthread_create");
    return t;
}

static long read_all(int fd)
{
    static char buf[65536];
    long got = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            return got;
        got += n;
    }
}

static void *slow_reader(void *arg)
{
    int fd = (int)(intptr_t)arg;
    pause_ms(30);
    return (void *)read_all(fd);
}

enum { WRITERS = 4, RECORDS = 200 };
static int rec_pipe[2];

static void *record_writer(void *arg)
{
    char rec[PIPE_BUF];
    memset(rec, 'a' + (int)(intptr_t)arg, sizeof rec);
    for (int i = 0; i < RECORDS; i++)
        REQUIRE(write(rec_pipe[1], rec, sizeof rec) == (ssize_t)sizeof rec, "write");
    return NULL;
}

static int co_pipe[2];
static long co_got;

static void co_read(void)
{
    char b[16];
    co_got = read(co_pipe[0], b, sizeof b);
}

static void *on_coroutine(void *arg)
{
    (void)arg;
    probe_on_coroutine(co_read);
    return NULL;
}

/* a thread that reads a pipe until its end, after a pause */
static void *drain(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[4096];
    struct timespec ts = { 0, 30 * 1000000 };
    nanosleep(&ts, NULL);
    while (read(fd, buf, sizeof buf) > 0)
        ;
    return NULL;
}

static pthread_t drainer(int fd)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, drain, (void *)(intptr_t)fd) == 0, "pthread_create");
    return t;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    signal(SIGPIPE, SIG_IGN);
    alarm(60);
    char b[64];

    current_probe = "1: modes";
    int p[2], q[2];
    REQUIRE(pipe(p) == 0 && pipe2(q, O_NONBLOCK) == 0, "pipe");
    printf("1: pipe O_NONBLOCK %d %d, pipe2(O_NONBLOCK) %d %d\n", nb(p[0]), nb(p[1]), nb(q[0]),
           nb(q[1]));
    ssize_t n = read(q[0], b, sizeof b);
    printf("1: empty non-blocking read %zd %s\n", n, n < 0 ? strerror(errno) : "");
    REQUIRE(fcntl(q[0], F_SETFL, fcntl(q[0], F_GETFL) & ~O_NONBLOCK) == 0, "F_SETFL");
    REQUIRE(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK) == 0, "F_SETFL");
    printf("1: after F_SETFL: %d %d\n", nb(q[0]), nb(p[0]));
    n = read(p[0], b, sizeof b);
    printf("1: made non-blocking, empty read %zd %s\n", n, n < 0 ? strerror(errno) : "");
    pthread_t t = late(q[1], 30, "late");
    n = read(q[0], b, sizeof b);
    printf("1: made blocking, read %zd\n", n);
    pthread_join(t, NULL);
    close(p[0]), close(p[1]), close(q[0]), close(q[1]);

    current_probe = "2: between threads";
    REQUIRE(pipe(p) == 0, "pipe");
    t = late(p[1], 30, "hello");
    n = read(p[0], b, sizeof b);
    printf("2: read of late data %zd\n", n);
    pthread_join(t, NULL);
    enum { MB = 1 << 20 };
    char *big = calloc(1, MB);
    REQUIRE(big, "calloc");
    pthread_t r;
    REQUIRE(pthread_create(&r, NULL, slow_reader, (void *)(intptr_t)p[0]) == 0, "create");
    n = write(p[1], big, MB);
    close(p[1]);
    void *got;
    pthread_join(r, &got);
    printf("2: 1 MiB write %zd, read %ld\n", n, (long)(intptr_t)got);
    close(p[0]);
    REQUIRE(pipe(rec_pipe) == 0, "pipe");
    pthread_t w[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        REQUIRE(pthread_create(&w[i], NULL, record_writer, (void *)(intptr_t)i) == 0, "create");
    int torn = 0, recs = 0;
    char rec[PIPE_BUF];
    for (int i = 0; i < WRITERS * RECORDS; i++) {
        size_t have = 0;
        while (have < sizeof rec) {
            n = read(rec_pipe[0], rec + have, sizeof rec - have);
            REQUIRE(n > 0, "read");
            have += (size_t)n;
        }
        recs++;
        for (size_t k = 1; k < sizeof rec; k++)
            if (rec[k] != rec[0]) {
                torn++;
                break;
            }
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(w[i], NULL);
    printf("2: %d records of PIPE_BUF bytes from %d writers, %d torn\n", recs, WRITERS, torn);
    close(rec_pipe[1]);
    n = write(rec_pipe[1], "x", 1);
    printf("2: write to a closed end %zd %s\n", n, n < 0 ? strerror(errno) : "");
    close(rec_pipe[0]);
    REQUIRE(pipe(p) == 0, "pipe");
    close(p[0]);
    n = write(p[1], "x", 1);
    printf("2: write with no reader %zd %s\n", n, n < 0 ? strerror(errno) : "");
    close(p[1]);

    current_probe = "3: tee, splice, vmsplice";
    int a[2], c[2];
    REQUIRE(pipe(a) == 0 && pipe(c) == 0, "pipe");
    t = late(a[1], 30, "teed");
    n = tee(a[0], c[1], 64, 0);
    pthread_join(t, NULL);
    printf("3: tee of late data %zd\n", n);
    n = splice(a[0], NULL, c[1], NULL, 64, 0);
    printf("3: splice %zd\n", n);
    n = read(c[0], b, sizeof b);
    printf("3: read both %zd\n", n);
    struct iovec iov = {"vmsplice", 8};
    n = vmsplice(c[1], &iov, 1, 0);
    printf("3: vmsplice %zd, read %zd\n", n, read(c[0], b, sizeof b));
    /* with a regular file at one end (Rust's io::copy): data written late
     * into the pipe, and a pipe full until a reader drains it */
    char path[] = "/tmp/own_pipes_XXXXXX";
    int ff = mkstemp(path);
    REQUIRE(ff >= 0, "mkstemp");
    unlink(path);
    t = late(a[1], 30, "tofile");
    n = splice(a[0], NULL, ff, NULL, 64, 0);
    pthread_join(t, NULL);
    printf("3: splice of late data into a file %zd %s\n", n, n < 0 ? strerror(errno) : "");
    static char fill[65536];
    REQUIRE(pwrite(ff, fill, sizeof fill, 0) == (ssize_t)sizeof fill, "pwrite");
    int fl = fcntl(c[1], F_GETFL);
    fcntl(c[1], F_SETFL, fl | O_NONBLOCK);
    while (write(c[1], fill, sizeof fill) > 0)
        ;
    fcntl(c[1], F_SETFL, fl);
    pthread_t dr = drainer(c[0]);
    loff_t off = 0;
    n = splice(ff, &off, c[1], NULL, 4096, 0);
    printf("3: splice from a file into a full pipe %s\n", n > 0 ? "> 0" : strerror(errno));
    close(c[1]);
    pthread_join(dr, NULL);
    close(ff);
    close(a[0]), close(a[1]), close(c[0]);

    current_probe = "4: a coroutine";
    REQUIRE(pipe(co_pipe) == 0, "pipe");
    t = late(co_pipe[1], 30, "coro");
    pthread_t co;
    REQUIRE(pthread_create(&co, NULL, on_coroutine, NULL) == 0, "create");
    pthread_join(co, NULL);
    pthread_join(t, NULL);
    printf("4: read on a coroutine %ld\n", co_got);
    close(co_pipe[0]), close(co_pipe[1]);

    current_probe = "5: shared";
    REQUIRE(pipe(p) == 0, "pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[1]);
        ssize_t k = read(p[0], b, sizeof b); /* blocking, data comes late */
        _exit(k == 5 ? 0 : 1);
    }
    close(p[0]);
    pause_ms(30);
    REQUIRE(write(p[1], "child", 5) == 5, "write");
    int st;
    waitpid(pid, &st, 0);
    printf("5: forked child read its end: exit %d\n", WEXITSTATUS(st));
    close(p[1]);

    REQUIRE(pipe(p) == 0, "pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[0], 0);
    posix_spawn_file_actions_addclose(&fa, p[1]);
    char *argv[] = {"head", "-c", "5", NULL};
    int out[2];
    REQUIRE(pipe(out) == 0, "pipe");
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    REQUIRE(posix_spawnp(&pid, "head", &fa, NULL, argv, environ) == 0, "posix_spawnp");
    close(p[0]);
    close(out[1]);
    pause_ms(30);
    REQUIRE(write(p[1], "spawned", 7) == 7, "write");
    close(p[1]);
    n = read(out[0], b, sizeof b);
    waitpid(pid, &st, 0);
    printf("5: head -c 5 read the pipe: %.*s, exit %d\n", (int)(n > 0 ? n : 0), b,
           WEXITSTATUS(st));
    close(out[0]);
    posix_spawn_file_actions_destroy(&fa);

    REQUIRE(pipe(p) == 0, "pipe");
    FILE *f = fdopen(p[0], "r");
    REQUIRE(f, "fdopen");
    t = late(p[1], 30, "a line\n");
    char *line = fgets(b, sizeof b, f);
    pthread_join(t, NULL);
    printf("5: fgets on fdopen: %s", line ? line : "NULL\n");
    fclose(f);
    close(p[1]);

    REQUIRE(pipe(p) == 0, "pipe");
    int saved_in = dup(0);
    REQUIRE(dup2(p[0], 0) == 0, "dup2");
    close(p[0]);
    t = late(p[1], 30, "stdin line\n");
    line = fgets(b, sizeof b, stdin);
    pthread_join(t, NULL);
    printf("5: fgets on stdin: %s", line ? line : "NULL\n");
    dup2(saved_in, 0);
    close(saved_in);
    close(p[1]);

    int us[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, us) == 0, "socketpair");
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        close(us[0]);
        char one;
        struct iovec v = {&one, 1};
        union {
            struct cmsghdr h;
            char space[CMSG_SPACE(sizeof(int))];
        } ctl;
        struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = &ctl,
                           .msg_controllen = sizeof ctl};
        if (recvmsg(us[1], &m, 0) != 1)
            _exit(2);
        int fd;
        memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
        int flags = fcntl(fd, F_GETFL);
        ssize_t k = read(fd, b, sizeof b); /* the parent writes late */
        _exit((flags & O_NONBLOCK) ? 3 : k == 6 ? 0 : 4);
    }
    close(us[1]);
    REQUIRE(pipe(p) == 0, "pipe"); /* made after the fork: this process's alone */
    char one = 'x';
    struct iovec v = {&one, 1};
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = &ctl,
                       .msg_controllen = sizeof ctl};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &p[0], sizeof(int));
    REQUIRE(sendmsg(us[0], &m, 0) == 1, "sendmsg: %s", strerror(errno));
    pause_ms(30);
    REQUIRE(write(p[1], "passed", 6) == 6, "write");
    waitpid(pid, &st, 0);
    printf("5: a pipe passed to the child in SCM_RIGHTS: exit %d\n", WEXITSTATUS(st));
    close(p[0]);
    close(p[1]);
    close(us[0]);
    alarm(0);
    free(big);
    printf("own_pipes: done\n");
    return probe_exit(PROBE_NAME);
}
