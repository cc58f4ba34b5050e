/* vfork_child — vfork children that close, dup and re-flag fds and reset signal
 * actions before they exec or exit, while the parent's other threads wait on
 * fds. A vfork child runs on its parent's memory: under bobbin before
 * 2026-11-26 its interposed close() removed the parent's view of the fd and its
 * poller registration, and its dup2 installed views over the parent's numbers.
 * Python's subprocess from threads then failed: the parent's read of its error
 * pipe, whose other end a concurrent child still held, returned EAGAIN.
 *
 * 1. Python's pattern: a pipe's write end is also held by another child for
 *    300 ms; a vfork child closes the read end and exits; the parent closes its
 *    write end and reads: it must wait and see EOF (0), not fail.
 * 2. A thread waits in read() on a pipe when the vfork child closes that pipe's
 *    read end and dup2s another pipe onto stdout, resets SIGUSR1 to SIG_DFL and
 *    execs this program (mode "exec"), which reports whether its stdout is
 *    non-blocking and writes a line into the pipe. The parent then writes to the
 *    waiting thread's pipe: the thread must get the bytes. The parent reads the
 *    exec'd child's line, and its own SIGUSR1 handler must still run.
 * 3. 8 threads at once vfork children that dup2 and exit, 50 times each, while
 *    the main thread ping-pongs bytes over a socketpair with another thread: every
 *    byte arrives, no call fails.
 *
 * stdout: one line per part, the same natively.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define PROBE_NAME "vfork_child"
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int waitp[2];
static char got[8];
static ssize_t gotn = -2;
static int goterr;
static atomic_int usr1;

static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&usr1, 1);
}

static void *reader(void *arg)
{
    (void)arg;
    gotn = read(waitp[0], got, sizeof got);
    goterr = errno;
    return NULL;
}

static int sv[2];

static void *echoer(void *arg)
{
    (void)arg;
    char c;
    while (read(sv[1], &c, 1) == 1 && c != '!')
        CHECK(write(sv[1], &c, 1) == 1, "echo write: %s", strerror(errno));
    return NULL;
}

static void *vforker(void *arg)
{
    (void)arg;
    for (volatile int i = 0; i < 50; i++) {
        int p[2];
        REQUIRE(pipe2(p, O_CLOEXEC) == 0, "pipe2");
        pid_t c = vfork();
        if (c == 0) {
            dup2(p[1], 3 + (i % 4) + 20);
            close(p[0]);
            _exit(0);
        }
        CHECK(c > 0, "vfork: %s", strerror(errno));
        int st;
        CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status");
        close(p[1]);
        char b;
        ssize_t n = read(p[0], &b, 1);
        CHECK(n == 0, "part 3: read of a pipe whose child copies are gone: %zd (%s)", n,
              strerror(errno));
        close(p[0]);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        int fl = fcntl(1, F_GETFL);
        printf("exec'd child: stdout %s\n", fl >= 0 && (fl & O_NONBLOCK) ? "non-blocking" : "blocking");
        return 0;
    }
    REQUIRE(probe_on_signal(SIGALRM, on_alarm, 0) == 0, "sigaction");
    alarm(60);
    REQUIRE(probe_on_signal(SIGUSR1, on_usr1, 0) == 0, "sigaction");

    /* 1 */
    current_probe = "python errpipe";
    int p[2];
    REQUIRE(pipe2(p, O_CLOEXEC) == 0, "pipe2");
    pid_t holder = fork();
    REQUIRE(holder >= 0, "fork");
    if (holder == 0) {
        usleep(300 * 1000);
        _exit(0);
    }
    pid_t c = vfork();
    if (c == 0) {
        close(p[0]);
        _exit(0);
    }
    REQUIRE(c > 0, "vfork");
    close(p[1]);
    char buf[64];
    ssize_t n = read(p[0], buf, sizeof buf);
    CHECK(n == 0, "part 1: read gave %zd (%s), natively it waits for EOF", n, n < 0 ? strerror(errno) : "-");
    printf("part 1: read %zd\n", n);
    waitpid(c, NULL, 0);
    waitpid(holder, NULL, 0);
    close(p[0]);

    /* 2 */
    current_probe = "exec child";
    int out[2];
    REQUIRE(pipe2(waitp, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0, "pipe2");
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, reader, NULL) == 0, "pthread_create");
    usleep(50 * 1000); /* the reader waits by now */
    fflush(stdout);
    c = vfork();
    if (c == 0) {
        close(waitp[0]);
        dup2(out[1], 1);
        signal(SIGUSR1, SIG_DFL);
        char *args[] = {argv[0], "exec", NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    REQUIRE(c > 0, "vfork");
    close(out[1]);
    int st;
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0, "exec'd child status");
    n = read(out[0], buf, sizeof buf - 1);
    CHECK(n > 0, "part 2: the exec'd child's line: %zd (%s)", n, n < 0 ? strerror(errno) : "-");
    if (n > 0) {
        buf[n] = '\0';
        printf("part 2: %s", buf);
    }
    CHECK(write(waitp[1], "ping", 4) == 4, "write");
    pthread_join(t, NULL);
    CHECK(gotn == 4 && memcmp(got, "ping", 4) == 0, "part 2: the waiting reader got %zd (%s)", gotn,
          gotn < 0 ? strerror(goterr) : "-");
    printf("part 2: reader got %zd\n", gotn);
    raise(SIGUSR1);
    CHECK(atomic_load(&usr1) == 1, "part 2: SIGUSR1 handler ran %d times", atomic_load(&usr1));
    printf("part 2: handler ran %d\n", atomic_load(&usr1));

    /* 3 */
    current_probe = "vfork storm";
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    pthread_t e, v[8];
    REQUIRE(pthread_create(&e, NULL, echoer, NULL) == 0, "pthread_create");
    for (int i = 0; i < 8; i++)
        REQUIRE(pthread_create(&v[i], NULL, vforker, NULL) == 0, "pthread_create");
    long bytes = 0;
    for (int i = 0; i < 20000; i++) {
        char c1 = (char)('a' + i % 26), c2 = 0;
        if (write(sv[0], &c1, 1) != 1 || read(sv[0], &c2, 1) != 1 || c2 != c1) {
            CHECK(0, "part 3: ping-pong byte %d: %s", i, strerror(errno));
            break;
        }
        bytes++;
    }
    for (int i = 0; i < 8; i++)
        pthread_join(v[i], NULL);
    CHECK(write(sv[0], "!", 1) == 1, "write");
    pthread_join(e, NULL);
    printf("part 3: %ld bytes echoed beside 400 vfork children\n", bytes);
    return probe_exit(PROBE_NAME);
}
