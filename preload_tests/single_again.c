/* single_again — a process whose threads have all ended has one thread
 * again, as it has natively: the kernel lists one task in /proc/self/task
 * (its link count through stat and through fstatat of "self/task/" from
 * an open /proc, as Chromium's sandbox counts before its zygote forks; its
 * entries through opendir), and unshare(CLONE_NEWUSER), which the kernel
 * refuses to a process with more than one thread, answers as natively.
 *
 * 4 rounds: 8 threads (4 that sleep 2 ms three times, 2 that ping-pong 200
 * bytes over pipes, 2 that sum 1..1,000,000), joined (round 2: detached,
 * waited for through a semaphore); then the three counts, each after a
 * wait of at most 1 s for the kernel to drop ended threads (natively a
 * thread may still be listed a moment after its join). Then unshare, and
 * one more round in the namespace; then a fork child does a round of its
 * own and exits with its count.
 *
 * Under bobbin before 2026-11-28: 3 or 4 tasks (bobbin's idle OS threads
 * and sysmon) after every round, and unshare(CLONE_NEWUSER) failed with
 * EINVAL where natively it succeeds.
 *
 * stdout: one line per round, the unshare result, the child's count.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_NAME "single_again"
#include "probe.h"

static int procfd;
static sem_t done;
static int detached_round;

static int by_stat(void)
{
    struct stat st;
    return stat("/proc/self/task", &st) == 0 ? (int)st.st_nlink - 2 : -1;
}

static int by_fstatat(void)
{
    struct stat st;
    return fstatat(procfd, "self/task/", &st, 0) == 0 ? (int)st.st_nlink - 2 : -1;
}

static int by_dir(void)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* the count once it is 1, or after 1 s what it is then */
static int settled(int (*count)(void))
{
    int n = count();
    for (int i = 0; i < 1000 && n != 1; i++) {
        usleep(1000);
        n = count();
    }
    return n;
}

static void finish(void)
{
    if (detached_round)
        sem_post(&done);
}

static void *sleeper(void *arg)
{
    for (int i = 0; i < 3; i++)
        usleep(2000);
    finish();
    return arg;
}

static int pp[2][2]; /* ping, pong */

static void *pinger(void *arg)
{
    long sum = 0;
    for (int i = 0; i < 200; i++) {
        unsigned char c = (unsigned char)i;
        REQUIRE(write(pp[0][1], &c, 1) == 1 && read(pp[1][0], &c, 1) == 1, "ping");
        sum += c;
    }
    *(long *)arg = sum;
    finish();
    return NULL;
}

static void *ponger(void *arg)
{
    for (int i = 0; i < 200; i++) {
        unsigned char c;
        REQUIRE(read(pp[0][0], &c, 1) == 1, "pong read");
        c++;
        REQUIRE(write(pp[1][1], &c, 1) == 1, "pong write");
    }
    finish();
    return arg;
}

static void *summer(void *arg)
{
    long s = 0;
    for (long i = 1; i <= 1000000; i++)
        s += i;
    *(long *)arg = s;
    finish();
    return NULL;
}

/* one round: 8 threads, all ended; returns the pinger's and summers' results */
static long round_of_threads(int detach)
{
    detached_round = detach;
    REQUIRE(pipe(pp[0]) == 0 && pipe(pp[1]) == 0, "pipe");
    long ping = 0, sums[2] = {0, 0};
    pthread_t t[8];
    pthread_attr_t a;
    pthread_attr_init(&a);
    if (detach)
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], &a, sleeper, NULL) == 0, "create");
    REQUIRE(pthread_create(&t[4], &a, pinger, &ping) == 0, "create");
    REQUIRE(pthread_create(&t[5], &a, ponger, NULL) == 0, "create");
    REQUIRE(pthread_create(&t[6], &a, summer, &sums[0]) == 0, "create");
    REQUIRE(pthread_create(&t[7], &a, summer, &sums[1]) == 0, "create");
    pthread_attr_destroy(&a);
    for (int i = 0; i < 8; i++) {
        if (detach)
            while (sem_wait(&done) != 0)
                ;
        else
            REQUIRE(pthread_join(t[i], NULL) == 0, "join");
    }
    for (int i = 0; i < 2; i++) {
        close(pp[i][0]);
        close(pp[i][1]);
    }
    long want = 0;
    for (int i = 0; i < 200; i++)
        want += (unsigned char)(i + 1);
    CHECK(ping == want, "ping sum %ld, want %ld", ping, want);
    CHECK(sums[0] == 500000500000L && sums[1] == 500000500000L, "sums %ld %ld", sums[0], sums[1]);
    return ping + sums[0] + sums[1];
}

static void counts(const char *what)
{
    int s = settled(by_stat), f = settled(by_fstatat), d = settled(by_dir);
    CHECK(s == 1 && f == 1 && d == 1, "%s: tasks %d %d %d", what, s, f, d);
    printf("%s: tasks by stat %d, by fstatat %d, in the directory %d\n", what, s, f, d);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    procfd = open("/proc", O_RDONLY | O_DIRECTORY);
    REQUIRE(procfd >= 0, "open /proc");
    REQUIRE(sem_init(&done, 0, 0) == 0, "sem_init");
    char what[64];
    for (int r = 0; r < 4; r++) {
        long v = round_of_threads(r == 2);
        snprintf(what, sizeof what, "round %d (%s, %ld)", r, r == 2 ? "detached" : "joined", v);
        counts(what);
    }

    int u = unshare(CLONE_NEWUSER);
    printf("unshare(CLONE_NEWUSER): %s\n", u == 0 ? "0" : strerror(errno));
    long v = round_of_threads(0);
    snprintf(what, sizeof what, "after unshare (%ld)", v);
    counts(what);

    int before = atomic_load(&probe_failures);
    pid_t c = fork();
    REQUIRE(c >= 0, "fork");
    if (c == 0) {
        round_of_threads(0);
        int n = settled(by_stat);
        _exit(n == 1 && atomic_load(&probe_failures) == before ? 1 : 2 + (n > 0 ? n : 0));
    }
    int st = 0;
    REQUIRE(waitpid(c, &st, 0) == c, "waitpid");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1, "child: status %#x", st);
    printf("fork child after a round: tasks %d\n", WIFEXITED(st) && WEXITSTATUS(st) == 1 ? 1 : -1);
    return probe_exit(PROBE_NAME);
}
