/* handoff_heartbeat — calls that block in the kernel must not stop the other threads:
 * with BOBBIN_MAXPROCS=1 (the only way the harness runs it), a thread in waitpid and
 * another in open() of a FIFO each hold an OS thread for about a second, while a
 * third keeps a 10 ms heartbeat.
 *
 *   waiter   forks a child that sleeps BLOCK_MS and exits 7, and waits for it
 *            (waitpid blocks about BLOCK_MS);
 *   opener   makes a FIFO in a fresh directory under /tmp and forks a writer process
 *            that sleeps BLOCK_MS before it opens the FIFO for writing; meanwhile
 *            open(O_RDONLY) blocks (a FIFO's open waits for the other end), then
 *            the opener reads the writer's line to EOF;
 *   heart    sleeps 10 ms at a time, counting beats, from the moment both others are
 *            about to block until both have returned.
 * Natively the three are OS threads and the heart beats ~BLOCK_MS / 10 times. Under
 * bobbin waitpid and open run between entersyscall and exitsyscall, so sysmon must
 * hand the single P to another OS thread while they block; if it does not, the heart
 * stops for the whole second. The test wants at least MIN_BEATS beats (half the ideal
 * count: a generous bound), checks the child's status and the FIFO's data, and prints
 * only "heartbeat ok" (the count goes to stderr). On a machine so loaded that the
 * process's threads wait for a CPU (schedstat), MIN_BEATS shrinks by the share of the
 * window they waited: a heart without a processor under bobbin is not runnable in the
 * kernel, so it still fails.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { BLOCK_MS = 1000, BEAT_MS = 10, MIN_BEATS = 50 };

static atomic_int about_to_block, returned;
static char fifo_dir[64], fifo_path[128];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void *waiter(void *arg)
{
    (void)arg;
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        sleep_ms(BLOCK_MS);
        _exit(7);
    }
    atomic_fetch_add(&about_to_block, 1);
    int st;
    pid_t r;
    while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    atomic_fetch_add(&returned, 1);
    CHECK(r == pid, "waitpid: %s", strerror(errno));
    CHECK(r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7, "child status %#x, want exit 7",
          st);
    return NULL;
}

static void *opener(void *arg)
{
    (void)arg;
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        sleep_ms(BLOCK_MS);
        int fd = open(fifo_path, O_WRONLY);
        if (fd < 0)
            _exit(1);
        static const char line[] = "through the fifo\n";
        _exit(write(fd, line, sizeof line - 1) == sizeof line - 1 ? 0 : 2);
    }
    atomic_fetch_add(&about_to_block, 1);
    int fd;
    while ((fd = open(fifo_path, O_RDONLY)) < 0 && errno == EINTR)
        ;
    atomic_fetch_add(&returned, 1);
    CHECK(fd >= 0, "open %s: %s", fifo_path, strerror(errno));
    char buf[64];
    size_t got = 0;
    while (fd >= 0 && got < sizeof buf - 1) {
        ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    CHECK(strcmp(buf, "through the fifo\n") == 0, "read '%s' from the fifo", buf);
    if (fd >= 0)
        close(fd);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "fifo writer failed (status %#x)", st);
    return NULL;
}

/* The time this process's threads spent runnable but waiting for a CPU (the second
 * field of /proc/self/task/TID/schedstat, summed), in ms: what an overloaded machine
 * took from the heart. Blocked threads are not runnable and add nothing. */
static int64_t cpu_wait_ms(void)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return 0;
    long long total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[320];
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        long long run, wait;
        if (fscanf(f, "%lld %lld", &run, &wait) == 2)
            total += wait;
        fclose(f);
    }
    closedir(d);
    return total / 1000000;
}

struct heart_result {
    long beats;
    int64_t window_ms, cpu_wait_ms;
};

static void *heart(void *arg)
{
    struct heart_result *res = arg;
    while (atomic_load(&about_to_block) < 2)
        sleep_ms(1);
    int64_t w0 = cpu_wait_ms();
    int64_t t0 = now_ms(), last = t0, gap = 0, gap_at = 0;
    while (atomic_load(&returned) < 2) {
        sleep_ms(BEAT_MS);
        res->beats++;
        int64_t t = now_ms();
        if (t - last > gap) {
            gap = t - last;
            gap_at = last - t0;
        }
        last = t;
    }
    res->window_ms = now_ms() - t0;
    res->cpu_wait_ms = cpu_wait_ms() - w0;
    /* for diagnosis only: where the heart stopped longest */
    fprintf(stderr, "handoff_heartbeat: %ld beats in %lld ms (threads waited %lld ms for a "
            "CPU); longest gap %lld ms, from %lld ms\n", res->beats, (long long)res->window_ms,
            (long long)res->cpu_wait_ms, (long long)gap, (long long)gap_at);
    return NULL;
}

int main(void)
{
    alarm(55);
    strcpy(fifo_dir, "/tmp/bobbin-fifo.XXXXXX");
    REQUIRE(mkdtemp(fifo_dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(fifo_path, sizeof fifo_path, "%s/fifo", fifo_dir);
    REQUIRE(mkfifo(fifo_path, 0600) == 0, "mkfifo: %s", strerror(errno));

    struct heart_result hr = { 0, 0, 0 };
    pthread_t tw, to, th;
    REQUIRE(pthread_create(&th, NULL, heart, &hr) == 0, "pthread_create");
    REQUIRE(pthread_create(&tw, NULL, waiter, NULL) == 0, "pthread_create");
    REQUIRE(pthread_create(&to, NULL, opener, NULL) == 0, "pthread_create");
    pthread_join(tw, NULL);
    pthread_join(to, NULL);
    pthread_join(th, NULL);
    unlink(fifo_path);
    rmdir(fifo_dir);

    /* MIN_BEATS, less the share of the window the machine did not give us a CPU */
    int64_t window = hr.window_ms > 0 ? hr.window_ms : 1;
    int64_t usable = window - (hr.cpu_wait_ms < window ? hr.cpu_wait_ms : window);
    long want = (long)(MIN_BEATS * usable / window);
    CHECK(hr.beats >= want, "only %ld heartbeats while waitpid and open blocked for %lld ms "
          "(want at least %ld)", hr.beats, (long long)hr.window_ms, want);
    puts(hr.beats >= want ? "heartbeat ok" : "heartbeat too slow");
    return probe_exit("handoff_heartbeat");
}
