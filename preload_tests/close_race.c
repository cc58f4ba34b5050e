/* close_race.c — threads that close, dup and re-flag the same fd numbers
 * at once, as stress-ng's close stressor does.
 *
 * Racing close() against dup(), fcntl() and I/O on one fd number is legal:
 * the kernel makes each call atomic, so each one either sees the file or
 * fails with EBADF, and nothing else happens. A runtime that keeps its own
 * per-fd records must stay as safe: a record freed by one closer while a
 * second closer, a dup or a read still uses it is a double free or a use
 * after free (glibc aborts with "double free" or "unaligned fastbin chunk",
 * or the heap is silently corrupted).
 *
 * Main makes pipes, sockets and /dev/null fds, dups them, reads their flags,
 * writes and reads through them and closes them, ROUNDS times; NCLOSERS
 * threads meanwhile close, dup and F_SETFL whatever numbers main's current
 * fds have. Every call must answer as the kernel would (a result or EBADF,
 * never a crash), and the heap must survive: a malloc/free check and a
 * checksum of buffers allocated before the race are verified at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "probe.h"

enum { ROUNDS = 30000, NCLOSERS = 3, NBUF = 64 };

static atomic_int cur_fd = -1, cur_dup = -1;
static atomic_int stop;
static atomic_long odd_errors;

static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* anything but success or EBADF from these calls is wrong */
static void expect(long r, const char *what)
{
    if (r < 0 && errno != EBADF && errno != EAGAIN && errno != EPIPE &&
        errno != ECONNRESET && errno != ENOTCONN) {
        if (atomic_fetch_add(&odd_errors, 1) < 5)
            fprintf(stderr, "close_race: %s: %s\n", what, strerror(errno));
    }
}

static void *closer(void *arg)
{
    uint32_t s = (uint32_t)(uintptr_t)arg * 2654435761u + 1;
    while (!atomic_load(&stop)) {
        int fd = atomic_load(&cur_fd), dfd = atomic_load(&cur_dup);
        switch (rnd(&s) % 6) {
        case 0:
            if (fd >= 0)
                expect(close(fd), "close");
            break;
        case 1:
            if (dfd >= 0)
                expect(close(dfd), "close dup");
            break;
        case 2:
            if (fd >= 0) {
                int d = dup(fd);
                expect(d, "dup");
                if (d >= 0)
                    close(d);
            }
            break;
        case 3:
            if (fd >= 0) {
                int fl = fcntl(fd, F_GETFL);
                expect(fl, "F_GETFL");
                if (fl >= 0)
                    expect(fcntl(fd, F_SETFL, fl ^ O_NONBLOCK), "F_SETFL");
            }
            break;
        case 4:
            if (dfd >= 0) {
                char c;
                long r = read(dfd, &c, 1);
                (void)r; /* any answer: the number may be another file by now */
            }
            break;
        default:
            sched_yield();
            break;
        }
    }
    return NULL;
}

static uint64_t sum(unsigned char **bufs)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < NBUF; i++)
        for (int j = 0; j < 256; j++)
            h = (h ^ bufs[i][j]) * 1099511628211ull;
    return h;
}

int main(void)
{
    static unsigned char *bufs[NBUF];
    signal(SIGPIPE, SIG_IGN); /* a closer may close the read end first */
    for (int i = 0; i < NBUF; i++) {
        bufs[i] = malloc(256);
        REQUIRE(bufs[i] != NULL, "malloc");
        for (int j = 0; j < 256; j++)
            bufs[i][j] = (unsigned char)(i * 31 + j);
    }
    uint64_t before = sum(bufs);

    pthread_t t[NCLOSERS];
    for (int i = 0; i < NCLOSERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, closer, (void *)(uintptr_t)(i + 1)) == 0,
                "pthread_create");

    uint32_t s = 12345;
    long made = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int fd = -1, other = -1, sv[2], pfd[2];
        switch (rnd(&s) % 4) {
        case 0:
            if (pipe(pfd) == 0) {
                fd = pfd[0];
                other = pfd[1];
            }
            break;
        case 1:
            if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
                fd = sv[0];
                other = sv[1];
            }
            break;
        case 2:
            fd = socket(AF_INET, SOCK_STREAM, 0);
            break;
        default:
            fd = open("/dev/null", O_RDWR);
            break;
        }
        if (fd < 0)
            continue;
        made++;
        atomic_store(&cur_fd, fd);
        int d = dup(fd);
        atomic_store(&cur_dup, d);
        int fl = fcntl(fd, F_GETFL);
        expect(fl, "main F_GETFL");
        if (other >= 0) /* for the closers' reads; main never reads: a
                           closer may have taken the byte, and its read
                           would wait for good */
            expect(write(other, "x", 1), "main write");
        void *p = malloc(64 + r % 512); /* the heap stays in use meanwhile */
        free(p);
        atomic_store(&cur_fd, -1);
        atomic_store(&cur_dup, -1);
        close(fd);
        if (d >= 0)
            close(d);
        if (other >= 0)
            close(other);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < NCLOSERS; i++)
        REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");

    CHECK(sum(bufs) == before, "buffers allocated before the race changed");
    CHECK(atomic_load(&odd_errors) == 0, "%ld calls failed with an error other than EBADF",
          atomic_load(&odd_errors));
    CHECK(made > ROUNDS / 2, "only %ld of %d rounds made an fd", made, ROUNDS);
    for (int i = 0; i < NBUF; i++)
        free(bufs[i]);
    printf("close_race: %d rounds, heap intact\n", ROUNDS);
    return probe_exit("close_race");
}
