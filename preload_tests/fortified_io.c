/* fortified_io — blocking calls through their _FORTIFY_SOURCE entry points.
 *
 * Built with -D_FORTIFY_SOURCE=2, as Debian builds its packages: where the
 * compiler knows a buffer's size but not that the call fits it, read, recv,
 * recvfrom, pread, poll, ppoll and open become __read_chk, __recv_chk,
 * __recvfrom_chk, __pread_chk, __poll_chk, __ppoll_chk and __open_2. glibc's
 * versions call the real functions by internal names. Under bobbin before
 * 2026-11-25 they were not interposed: on a socket bobbin keeps non-blocking
 * for real, a blocking read, recv or recvfrom answered EAGAIN at once, and
 * poll failed.
 *
 * A thread writes to a socket pair after a pause before each of main's
 * calls, which must each wait for it and get the bytes; a FIFO opened
 * through __open_2 waits for its writer; an oversized read still aborts
 * with glibc's buffer-overflow report (in a child). A watchdog names the
 * part that hangs.
 */
#define PROBE_NAME "fortified_io"
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int sv[2];
static volatile size_t len = 16; /* not a constant: the _chk entry points */
static volatile int oflags = O_RDONLY;
static char fifo[64];

static void *writer(void *arg)
{
    (void)arg;
    const char *words[] = {"read", "recv", "recvfrom", "poll", "ppoll"};
    for (int i = 0; i < 5; i++) {
        usleep(20 * 1000);
        CHECK(send(sv[1], words[i], strlen(words[i]), 0) > 0, "send");
    }
    return NULL;
}

static void *fifo_writer(void *arg)
{
    (void)arg;
    usleep(20 * 1000);
    int fd = open(fifo, O_WRONLY);
    CHECK(fd >= 0 && write(fd, "fifo", 4) == 4, "fifo write");
    close(fd);
    return NULL;
}

static void show(const char *what, ssize_t n, const char *buf)
{
    if (n >= 0)
        printf("%s: %zd \"%.*s\"\n", what, n, (int)n, buf);
    else
        printf("%s: -1 %s\n", what, errno == EAGAIN ? "EAGAIN" : strerror(errno));
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(30);
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    pthread_t w;
    REQUIRE(pthread_create(&w, NULL, writer, NULL) == 0, "create");

    current_probe = "read, recv, recvfrom";
    char b[16];
    ssize_t n = read(sv[0], b, len);
    show("__read_chk", n, b);
    n = recv(sv[0], b, len, 0);
    show("__recv_chk", n, b);
    n = recvfrom(sv[0], b, len, 0, NULL, NULL);
    show("__recvfrom_chk", n, b);

    current_probe = "poll, ppoll";
    struct pollfd p[2] = {{sv[0], POLLIN, 0}};
    volatile nfds_t one = 1;
    int r = poll(p, one, 10000);
    printf("__poll_chk: %d revents %#x\n", r, p[0].revents);
    n = read(sv[0], b, len);
    show("then read", n, b);
    struct timespec ten = {10, 0};
    p[0].revents = 0;
    r = ppoll(p, one, &ten, NULL);
    printf("__ppoll_chk: %d revents %#x\n", r, p[0].revents);
    n = read(sv[0], b, len);
    show("then read", n, b);
    pthread_join(w, NULL);

    current_probe = "a FIFO opened through __open_2";
    snprintf(fifo, sizeof fifo, "/tmp/bobbin-fortified-%d", (int)getpid());
    unlink(fifo);
    REQUIRE(mkfifo(fifo, 0600) == 0, "mkfifo");
    REQUIRE(pthread_create(&w, NULL, fifo_writer, NULL) == 0, "create");
    int fd = open(fifo, oflags);
    n = fd >= 0 ? read(fd, b, len) : -1;
    show("__open_2 FIFO, then read", n, b);
    if (fd >= 0)
        close(fd);
    pthread_join(w, NULL);
    unlink(fifo);

    current_probe = "an oversized read";
    pid_t c = fork();
    if (c == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2); /* glibc's report, not compared */
        volatile size_t big = 64;
        (void)!read(sv[0], b, big);
        _exit(0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    printf("an oversized read: %s\n",
           WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT ? "aborted" : "not aborted");
    alarm(0);
    return probe_exit("fortified_io");
}
