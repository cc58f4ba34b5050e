/* anon_fds — threads that wait in a blocking read of an eventfd, a timerfd
 * or an inotify fd.
 *
 * 1. 200 threads each read their own eventfd (half with EFD_SEMAPHORE)
 *    until main has written to all of them; each returns what it read.
 * 2. eventfd_read/eventfd_write (glibc's, which read and write through
 *    internal names): 4 readers take 2,000 tokens of one EFD_SEMAPHORE
 *    eventfd between them, while main posts them in bursts.
 * 3. 100 threads each wait for a one-shot timerfd (20 ms) and then for
 *    three periods of a periodic one (5 ms): the expirations they read.
 * 4. A thread reads an inotify fd while main creates 20 files: the events.
 * 5. EFD_NONBLOCK: a read of an empty counter fails with EAGAIN at once.
 * 6. An eventfd that gets the number of a popen pipe the program read from
 *    and pclose closed (with glibc's internal close, unseen by an
 *    interposer of close): its reader gets what main writes.
 *
 * Natively every blocked thread is an OS thread; under bobbin each of these
 * reads waited in the kernel on an OS thread of its own (202 OS threads for
 * part 1, where the harness allows MAXPROCS + 2). They now wait on the
 * poller, as sockets and pipes do.
 */
#define PROBE_NAME "anon_fds"
#include "probe.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <unistd.h>

enum { NE = 200, READERS = 4, TOKENS = 2000, NT = 100, FILES = 20 };

static int efd[NE];

static void *event_reader(void *arg)
{
    long i = (long)arg;
    uint64_t v = 0;
    if (read(efd[i], &v, sizeof v) != sizeof v)
        return (void *)-1L;
    return (void *)(long)v;
}

static int sem;
static atomic_int taken;

static void *token_reader(void *arg)
{
    (void)arg;
    long mine = 0;
    for (;;) {
        eventfd_t v;
        if (eventfd_read(sem, &v) != 0)
            return (void *)-1L;
        if (atomic_fetch_add(&taken, 1) >= TOKENS)
            return (void *)mine; /* one of the READERS extra tokens: stop */
        mine += (long)v;
    }
}

static void *timer_reader(void *arg)
{
    (void)arg;
    int fd = timerfd_create(CLOCK_MONOTONIC, 0);
    if (fd < 0)
        return (void *)-1L;
    struct itimerspec once = {.it_value = {0, 20 * 1000 * 1000}};
    uint64_t n1 = 0, n = 0, total = 0;
    if (timerfd_settime(fd, 0, &once, NULL) != 0 || read(fd, &n1, sizeof n1) != sizeof n1)
        return (void *)-1L;
    struct itimerspec every = {.it_interval = {0, 5 * 1000 * 1000}, .it_value = {0, 5 * 1000 * 1000}};
    if (timerfd_settime(fd, 0, &every, NULL) != 0)
        return (void *)-1L;
    while (total < 3) { /* a late reader may find two periods at once */
        if (read(fd, &n, sizeof n) != sizeof n)
            return (void *)-1L;
        total += n;
    }
    close(fd);
    return (void *)(long)(n1 == 1 && total >= 3);
}

static int ino;

static void *inotify_reader(void *arg)
{
    (void)arg;
    long creates = 0;
    char buf[4096] __attribute__((aligned(8)));
    while (creates < FILES) {
        ssize_t n = read(ino, buf, sizeof buf);
        if (n <= 0)
            return (void *)-1L;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            creates += (e->mask & IN_CREATE) != 0;
            p += sizeof *e + e->len;
        }
    }
    return (void *)creates;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(50);
    static pthread_t t[NE];

    current_probe = "1: eventfd readers";
    for (long i = 0; i < NE; i++) {
        efd[i] = eventfd(0, i % 2 ? EFD_SEMAPHORE : 0);
        REQUIRE(efd[i] >= 0, "eventfd");
        REQUIRE(pthread_create(&t[i], NULL, event_reader, (void *)i) == 0, "create");
    }
    usleep(20 * 1000); /* most of them blocked in their reads by now */
    for (long i = 0; i < NE; i++) {
        uint64_t v = (uint64_t)i + 1;
        REQUIRE(write(efd[i], &v, sizeof v) == sizeof v, "write");
    }
    long sum = 0, want = 0;
    for (long i = 0; i < NE; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (long)r;
        want += i % 2 ? 1 : i + 1; /* a semaphore read takes 1 */
        close(efd[i]);
    }
    printf("eventfd: readers got %ld (want %ld)\n", sum, want);
    CHECK(sum == want, "eventfd sum %ld, want %ld", sum, want);

    current_probe = "2: eventfd_read/eventfd_write";
    sem = eventfd(0, EFD_SEMAPHORE);
    REQUIRE(sem >= 0, "eventfd");
    for (int i = 0; i < READERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, token_reader, NULL) == 0, "create");
    for (int k = 0; k < TOKENS; k += 50) {
        REQUIRE(eventfd_write(sem, 50) == 0, "eventfd_write");
        usleep(100);
    }
    REQUIRE(eventfd_write(sem, READERS) == 0, "eventfd_write");
    long tokens = 0;
    for (int i = 0; i < READERS; i++) {
        void *r;
        pthread_join(t[i], &r);
        tokens += (long)r;
    }
    printf("semaphore: %ld tokens taken\n", tokens);
    CHECK(tokens == TOKENS, "%ld tokens", tokens);

    current_probe = "3: timerfd readers";
    for (int i = 0; i < NT; i++)
        REQUIRE(pthread_create(&t[i], NULL, timer_reader, NULL) == 0, "create");
    long ok = 0;
    for (int i = 0; i < NT; i++) {
        void *r;
        pthread_join(t[i], &r);
        ok += (long)r == 1;
    }
    printf("timerfd: %ld of %d threads read one expiry, then three periods\n", ok, NT);
    CHECK(ok == NT, "%ld", ok);

    current_probe = "4: inotify reader";
    char dir[] = "/tmp/bobbin-anon-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    ino = inotify_init();
    REQUIRE(ino >= 0 && inotify_add_watch(ino, dir, IN_CREATE) >= 0, "inotify");
    REQUIRE(pthread_create(&t[0], NULL, inotify_reader, NULL) == 0, "create");
    char path[64];
    for (int i = 0; i < FILES; i++) {
        usleep(500);
        snprintf(path, sizeof path, "%s/f%d", dir, i);
        FILE *f = fopen(path, "w");
        REQUIRE(f != NULL, "fopen");
        fclose(f);
    }
    void *r;
    pthread_join(t[0], &r);
    printf("inotify: %ld creations seen\n", (long)r);
    CHECK((long)r == FILES, "%ld", (long)r);
    for (int i = 0; i < FILES; i++) {
        snprintf(path, sizeof path, "%s/f%d", dir, i);
        unlink(path);
    }
    rmdir(dir);

    current_probe = "5: EFD_NONBLOCK";
    int nb = eventfd(0, EFD_NONBLOCK);
    uint64_t v;
    errno = 0;
    ssize_t n = read(nb, &v, sizeof v);
    printf("empty non-blocking eventfd: %zd, %s\n", n, errno == EAGAIN ? "EAGAIN" : "other");
    CHECK(n == -1 && errno == EAGAIN, "read %zd errno %d", n, errno);

    current_probe = "6: eventfd on a number pclose freed";
    /* a popen pipe the program read from (and waited on), closed by
     * pclose (glibc's internal close): the eventfd that gets the number
     * next must not be taken for that pipe */
    FILE *pf = popen("sleep 0.05; echo hi", "r");
    REQUIRE(pf != NULL, "popen");
    char line[8] = {0};
    ssize_t k = read(fileno(pf), line, sizeof line - 1);
    int pipefd = fileno(pf);
    pclose(pf);
    int e2 = eventfd(0, 0);
    REQUIRE(e2 >= 0, "eventfd");
    efd[0] = e2;
    REQUIRE(pthread_create(&t[0], NULL, event_reader, (void *)0L) == 0, "create");
    usleep(20 * 1000);
    uint64_t seven = 7;
    REQUIRE(write(e2, &seven, sizeof seven) == sizeof seven, "write");
    pthread_join(t[0], &r);
    printf("popen read %zd bytes; eventfd %s its number, its reader got %ld\n", k,
           e2 == pipefd ? "took" : "did not take", (long)r);
    CHECK(k == 3 && (long)r == 7, "k %zd r %ld", k, (long)r);
    close(e2);
    alarm(0);
    printf("anon_fds: done\n");
    return probe_exit(PROBE_NAME);
}
