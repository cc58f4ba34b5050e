/* setuid_threads — set*id calls with 100 threads alive.
 *
 * Linux credentials belong to each kernel thread; glibc makes setuid and the
 * like process-wide by signalling every thread it knows (SIGSETXID) and
 * waiting until each has made the same system call. Under bobbin those are
 * the OS threads (Ms), whatever green threads they run.
 *
 * 100 threads: 10 spin on a counter (sched_yield now and then), 50 sleep in a
 * loop of 1 ms nanosleeps, 39 wait in a condition variable, 1 waits in
 * waitpid for a child that sleeps until it is killed. Then, from main and from
 * one more thread: setuid(getuid()), setgid(getgid()), seteuid(geteuid()),
 * setegid(getegid()), setreuid, setregid, setresuid, setresgid, each 3
 * times: every call must return 0, and not hang (alarm watchdog, 50 s).
 * When run as root, also setresgid(-1, 4242, -1) (a change the kernel makes
 * per thread): every task in /proc/self/task must then show effective gid
 * 4242, and 0 again after it is set back. The spinners' counters must keep
 * moving, and every thread ends when told.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "setuid_threads"
#include "probe.h"

enum { NSPIN = 10, NSLEEP = 50, NCOND = 39, NTHREADS = NSPIN + NSLEEP + NCOND + 1, REPEAT = 3 };

static atomic_int stop;
static atomic_int started;
static _Atomic uint64_t spins[NSPIN];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pid_t child;

static void *spinner(void *arg)
{
    int i = (int)(intptr_t)arg;
    atomic_fetch_add(&started, 1);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&spins[i], 1, memory_order_relaxed);
        if ((atomic_load_explicit(&spins[i], memory_order_relaxed) & 0xffff) == 0)
            sched_yield();
    }
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    atomic_fetch_add(&started, 1);
    while (!atomic_load(&stop)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void *cond_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    atomic_fetch_add(&started, 1);
    while (!atomic_load(&stop))
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void *child_waiter(void *arg)
{
    (void)arg;
    atomic_fetch_add(&started, 1);
    int st = 0;
    pid_t w;
    while ((w = waitpid(child, &st, 0)) < 0 && errno == EINTR)
        ;
    return (void *)(intptr_t)(w == child && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* every set*id call, REPEAT times; returns the number that failed */
static int set_ids(const char *who)
{
    int bad = 0;
    uid_t u = getuid(), eu = geteuid();
    gid_t g = getgid(), eg = getegid();
#define TRY(call)                                                                   \
    do {                                                                            \
        current_probe = #call;                                                      \
        errno = 0;                                                                  \
        if ((call) != 0) {                                                          \
            bad++;                                                                  \
            fprintf(stderr, "setuid_threads: %s: %s failed: %s\n", who, #call,      \
                    strerror(errno));                                               \
        }                                                                           \
    } while (0)
    for (int k = 0; k < REPEAT; k++) {
        TRY(setuid(u));
        TRY(setgid(g));
        TRY(seteuid(eu));
        TRY(setegid(eg));
        TRY(setreuid(u, eu));
        TRY(setregid(g, eg));
        TRY(setresuid(u, eu, (uid_t)-1));
        TRY(setresgid(g, eg, (gid_t)-1));
    }
#undef TRY
    return bad;
}

static void *set_ids_thread(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)set_ids("thread");
}

/* number of tasks, and how many have effective gid want */
static int tasks_with_egid(gid_t want, int *ntasks)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0, with = 0;
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the task ended meanwhile */
        n++;
        while (fgets(line, sizeof line, f)) {
            unsigned r, eff;
            if (sscanf(line, "Gid: %u %u", &r, &eff) == 2) {
                if (eff == want)
                    with++;
                break;
            }
        }
        fclose(f);
    }
    closedir(d);
    *ntasks = n;
    return with;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* what got done shows if the watchdog fires */
    signal(SIGALRM, on_alarm);
    alarm(50);
    fflush(stdout);
    child = fork();
    REQUIRE(child >= 0, "fork");
    if (child == 0) {
        for (;;)
            pause();
    }

    static pthread_t ts[NTHREADS];
    int k = 0;
    for (int i = 0; i < NSPIN; i++)
        REQUIRE(pthread_create(&ts[k++], NULL, spinner, (void *)(intptr_t)i) == 0, "create");
    for (int i = 0; i < NSLEEP; i++)
        REQUIRE(pthread_create(&ts[k++], NULL, sleeper, NULL) == 0, "create");
    for (int i = 0; i < NCOND; i++)
        REQUIRE(pthread_create(&ts[k++], NULL, cond_waiter, NULL) == 0, "create");
    REQUIRE(pthread_create(&ts[k++], NULL, child_waiter, NULL) == 0, "create");
    current_probe = "threads starting";
    while (atomic_load(&started) < NTHREADS)
        sleep_ms(1);
    sleep_ms(20);
    printf("%d threads alive: %d spinning, %d sleeping, %d in cond_wait, 1 in waitpid\n",
           NTHREADS, NSPIN, NSLEEP, NCOND);

    int bad = set_ids("main");
    printf("main: %d rounds of setuid/setgid/seteuid/setegid/setreuid/setregid/setresuid/"
           "setresgid, failures %d\n", REPEAT, bad);
    CHECK(bad == 0, "main: %d set*id calls failed", bad);

    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, set_ids_thread, NULL) == 0, "create");
    void *r;
    current_probe = "joining the set*id thread";
    pthread_join(t, &r);
    printf("a thread: %d rounds, failures %ld\n", REPEAT, (long)(intptr_t)r);
    CHECK(r == 0, "thread: %ld set*id calls failed", (long)(intptr_t)r);

    if (geteuid() == 0) {
        current_probe = "setresgid(-1, 4242, -1)";
        gid_t eg = getegid();
        int rc = setresgid((gid_t)-1, 4242, (gid_t)-1);
        int n = 0, with = tasks_with_egid(4242, &n);
        int rc2 = setresgid((gid_t)-1, eg, (gid_t)-1);
        int n2 = 0, back = tasks_with_egid(eg, &n2);
        printf("as root: setresgid to egid 4242 rc=%d, every task has it=%d; set back rc=%d, "
               "every task has it=%d\n", rc, with == n && n > 0, rc2, back == n2 && n2 > 0);
        CHECK(rc == 0 && with == n, "egid 4242: %d of %d tasks", with, n);
        CHECK(rc2 == 0 && back == n2, "egid back: %d of %d tasks", back, n2);
    } else {
        printf("not root: egid change skipped\n");
    }

    uint64_t before[NSPIN];
    for (int i = 0; i < NSPIN; i++)
        before[i] = atomic_load(&spins[i]);
    sleep_ms(50);
    int moved = 0;
    for (int i = 0; i < NSPIN; i++)
        moved += atomic_load(&spins[i]) != before[i];
    /* with many spinners per CPU some may not get a turn in 50 ms: only
     * report that at least one moved */
    printf("spinners still running: %s\n", moved > 0 ? "yes" : "no");
    CHECK(moved > 0, "no spinner moved in 50 ms after the set*id calls");

    current_probe = "stopping the threads";
    pthread_mutex_lock(&mu);
    atomic_store(&stop, 1);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    kill(child, SIGKILL);
    int reaped = 0;
    for (int i = 0; i < NTHREADS; i++) {
        REQUIRE(pthread_join(ts[i], &r) == 0, "join");
        if (i == NTHREADS - 1)
            reaped = r != NULL;
    }
    printf("all %d threads joined, child reaped by its waiter=%d\n", NTHREADS, reaped);
    CHECK(reaped, "the waitpid thread did not reap the killed child");
    alarm(0);
    return probe_exit("setuid_threads");
}
