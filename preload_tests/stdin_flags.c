/* stdin_flags — a pipe shared with another process keeps its file status flags: the
 * reading child reads its stdin from several threads, and neither side ever sees
 * O_NONBLOCK appear.
 *
 * The parent makes a pipe and forks a child that puts the read end on fd 0 (dup2)
 * and execs this program again ("child" mode) with the same environment — so under
 * bobbin the child runs under LD_PRELOAD too. The parent writes RECORDS records of
 * 8 bytes in writes of 4,096 bytes (at most PIPE_BUF: each arrives whole), pausing
 * 1 ms after every 8 writes so that the readers run dry and wait together; the child
 * reads fd 0 from READERS threads at once, each read asking for a multiple of 8
 * bytes, until EOF, and sums the records. A pipe's flags belong to the open file
 * shared by both processes: bobbin must never set O_NONBLOCK on it (the other process
 * would get EAGAIN), so both sides check, once it is shared, the flags the kernel
 * holds (/proc/self/fdinfo) as well as what F_GETFL reports, and the parent checks
 * that its own stdin (/dev/null from the harness) is untouched too. (Before the
 * fork the pipe is the parent's alone: only F_GETFL is checked there.)
 *
 * stdout: the child's record count and sum, then the parent's flag checks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

enum { RECORDS = 200000, PER_WRITE = 512, READERS = 4 };

/* the file status flags the kernel holds for fd, or -1 */
static long real_flags(int fd)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    unsigned long flags = 0;
    long r = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "flags: %lo", &flags) == 1) {
            r = (long)flags;
            break;
        }
    fclose(f);
    return r;
}

/* before the pipe is shared, only what the program sees: bobbin may keep a
 * pipe it alone uses non-blocking for real, as its sockets (it puts the
 * flag back when another process may share the pipe: checked below) */
static void check_view(const char *who, const char *what, int fd, int want_nonblock)
{
    int fl = fcntl(fd, F_GETFL);
    CHECK(fl >= 0, "%s: F_GETFL(%d): %s", who, fd, strerror(errno));
    int fl_nb = fl >= 0 && (fl & O_NONBLOCK) != 0;
    CHECK(fl_nb == want_nonblock, "%s: F_GETFL of %s shows O_NONBLOCK=%d", who, what, fl_nb);
    printf("%s: %s O_NONBLOCK F_GETFL=%s\n", who, what, fl_nb ? "yes" : "no");
}

static void check_flags(const char *who, const char *what, int fd, int want_nonblock)
{
    int fl = fcntl(fd, F_GETFL);
    long rf = real_flags(fd);
    CHECK(fl >= 0, "%s: F_GETFL(%d): %s", who, fd, strerror(errno));
    CHECK(rf >= 0, "%s: no flags in /proc/self/fdinfo/%d", who, fd);
    int fl_nb = fl >= 0 && (fl & O_NONBLOCK) != 0;
    int real_nb = rf >= 0 && (rf & O_NONBLOCK) != 0;
    CHECK(fl_nb == want_nonblock, "%s: F_GETFL of %s shows O_NONBLOCK=%d", who, what, fl_nb);
    CHECK(real_nb == want_nonblock, "%s: the kernel's flags of %s have O_NONBLOCK=%d", who,
          what, real_nb);
    printf("%s: %s O_NONBLOCK F_GETFL=%s kernel=%s\n", who, what, fl_nb ? "yes" : "no",
           real_nb ? "yes" : "no");
}

/* ---- child: read stdin from READERS threads ---- */

static atomic_llong rec_count, rec_sum;
static atomic_int read_errors;

static void *reader(void *arg)
{
    (void)arg;
    uint64_t buf[97]; /* 776 bytes: a multiple of 8, not of 4096 */
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n == 0)
            break;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "child: read: %s\n", strerror(errno));
            atomic_fetch_add(&read_errors, 1);
            break;
        }
        if (n % 8 != 0) {
            fprintf(stderr, "child: read %zd bytes, not whole records\n", n);
            atomic_fetch_add(&read_errors, 1);
            break;
        }
        long long s = 0;
        for (ssize_t i = 0; i < n / 8; i++)
            s += (long long)buf[i];
        atomic_fetch_add(&rec_count, n / 8);
        atomic_fetch_add(&rec_sum, s);
    }
    return NULL;
}

static int child_main(void)
{
    check_flags("child", "stdin (the pipe) before reading", 0, 0);
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, reader, NULL) == 0, "pthread_create");
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&read_errors) == 0, "child: %d reader(s) failed", atomic_load(&read_errors));
    printf("child: records=%lld sum=%lld\n", atomic_load(&rec_count), atomic_load(&rec_sum));
    check_flags("child", "stdin after reading", 0, 0);
    return probe_exit("stdin_flags child");
}

/* ---- parent ---- */

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0)
        return child_main();
    signal(SIGPIPE, SIG_IGN);
    alarm(55);
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(sl > 0, "readlink /proc/self/exe: %s", strerror(errno));
    self[sl] = '\0';

    check_flags("parent", "its own stdin before", 0, 0);
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe: %s", strerror(errno));
    check_view("parent", "write end before", p[1], 0);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(p[0], 0);
        close(p[0]);
        close(p[1]);
        char *args[] = { self, "child", NULL };
        execv(self, args);
        fprintf(stderr, "exec %s: %s\n", self, strerror(errno));
        _exit(127);
    }
    close(p[0]);

    uint64_t recs[PER_WRITE];
    long long want_sum = 0;
    for (long i = 0; i < RECORDS; i += PER_WRITE) {
        long k = RECORDS - i < PER_WRITE ? RECORDS - i : PER_WRITE;
        for (long j = 0; j < k; j++) {
            recs[j] = (uint64_t)((i + j) * 7 + 3);
            want_sum += (long long)recs[j];
        }
        ssize_t n = write(p[1], recs, (size_t)k * 8);
        if (n != k * 8) {
            CHECK(0, "parent: write returned %zd: %s", n, n < 0 ? strerror(errno) : "short");
            break;
        }
        /* pauses, so the child's readers run dry and all wait on fd 0 together */
        if (i / PER_WRITE % 8 == 7)
            usleep(1000);
        if (i / PER_WRITE == RECORDS / PER_WRITE / 2)
            check_flags("parent", "write end while the child reads", p[1], 0);
    }
    check_flags("parent", "write end after writing", p[1], 0);
    close(p[1]);
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child ended with status %#x", st);
    fflush(stdout);
    printf("parent: sent records=%d sum=%lld, child status %d\n", RECORDS, want_sum,
           WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    check_flags("parent", "its own stdin after", 0, 0);
    return probe_exit("stdin_flags");
}
