/* foreign_join — threads joined and detached across the line between green
 * threads and threads bobbin did not make.
 *
 * glibc runs a SIGEV_THREAD timer's callback on a helper thread of its own,
 * which bobbin did not make; a thread that callback creates is NPTL's too,
 * and so is one created from a makecontext coroutine's stack (bobbin runs
 * calls made off a thread's own stack as natively). Under bobbin before
 * 2026-11-25 the callback's pthread_join of a green thread waited for ever
 * (NPTL's join waits for a kernel tid a green thread never has), its
 * pthread_detach was lost, and a green thread's join of an NPTL thread
 * answered ESRCH.
 *
 * 1. From the callback: tryjoin of a running green thread (EBUSY), a timed
 *    join that times out, then a join with its value; a detach, and a
 *    second detach of the same thread answers EINVAL.
 * 2. The callback creates two NPTL threads: green main joins one (value)
 *    and detaches the other; tryjoin while it runs is EBUSY.
 * 3. A green thread's coroutine joins another green thread and creates a
 *    thread, which the green thread joins after switching back; its join
 *    of its own thread is EDEADLK, its tryjoin EBUSY.
 * 4. The callback forks: the child creates and joins a thread and exits 7;
 *    a second child execs true. (Such a thread has the gs base of the M it
 *    was cloned from: bobbin's fork handler took it for that M and crashed
 *    the child with SIGSEGV.)
 * 5. As root: setresgid while a callback waits reaches every thread,
 *    the callback's too (bobbin's SIGSETXID wrapper ran glibc's handler on
 *    that M's TCB instead of the callback thread's own: setresgid hung).
 * A watchdog names the part that hangs.
 */
#define PROBE_NAME "foreign_join"
#include "probe.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <dirent.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static sem_t cb_done, release_b, release_n2;
static pthread_t ga, gb, gd, n1, n2;
static int r_try, r_timed, r_join, r_detach, r_detach2;
static long v_join;

static void *value_after(void *arg)
{
    usleep(20 * 1000);
    return arg;
}

static void *wait_release(void *arg)
{
    sem_wait(arg == (void *)1 ? &release_b : &release_n2);
    return arg;
}

static void *short_life(void *arg)
{
    return arg;
}

/* part 4: a fork from the callback's thread */
static int fork_status[2] = {-1, -1};

static void fork_from_callback(void)
{
    pid_t p = fork();
    if (p == 0) {
        pthread_t t;
        void *r = NULL;
        if (pthread_create(&t, NULL, value_after, (void *)(intptr_t)7) != 0)
            _exit(1);
        pthread_join(t, &r);
        _exit((int)(intptr_t)r);
    }
    int st = 0;
    if (p > 0 && waitpid(p, &st, 0) == p)
        fork_status[0] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    p = fork();
    if (p == 0) {
        execlp("true", "true", (char *)NULL);
        _exit(99);
    }
    if (p > 0 && waitpid(p, &st, 0) == p)
        fork_status[1] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* part 5: every thread's real and effective gid */
static int all_gids(gid_t want)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int ok = d != NULL;
    char path[300], line[256];
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue; /* ended meanwhile */
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "Gid:", 4) == 0) {
                unsigned r, ef;
                ok &= sscanf(line + 4, "%u %u", &r, &ef) == 2 && r == want && ef == want;
            }
        fclose(f);
    }
    if (d)
        closedir(d);
    return ok;
}

static sem_t in_waiting_cb, release_cb;

static void waiting_callback(union sigval sv)
{
    (void)sv;
    sem_post(&in_waiting_cb);
    sem_wait(&release_cb);
}

static void callback(union sigval sv)
{
    (void)sv;
    void *r = NULL;
    r_try = pthread_tryjoin_np(gb, &r);
    struct timespec dl = probe_in_ms(CLOCK_REALTIME, 5);
    r_timed = pthread_timedjoin_np(gb, &r, &dl);
    sem_post(&release_b);
    r_join = pthread_join(ga, &r);
    v_join = (long)(intptr_t)r;
    r_detach = pthread_detach(gd);
    r_detach2 = pthread_detach(gd);
    /* part 2: threads of NPTL's, made here */
    REQUIRE(pthread_create(&n1, NULL, value_after, (void *)(intptr_t)21) == 0, "create n1");
    REQUIRE(pthread_create(&n2, NULL, wait_release, (void *)(intptr_t)2) == 0, "create n2");
    fork_from_callback();
    sem_post(&cb_done);
}

/* part 3 */
static pthread_t c_target, c_made;
static long c_val;
static int c_join, c_self, c_selftry;

static void coroutine(void)
{
    void *r = NULL;
    c_self = pthread_join(pthread_self(), NULL);
    c_selftry = pthread_tryjoin_np(pthread_self(), NULL);
    c_join = pthread_join(c_target, &r);
    c_val = (long)(intptr_t)r;
    REQUIRE(pthread_create(&c_made, NULL, value_after, (void *)(intptr_t)33) == 0, "create");
}

static void *coroutine_owner(void *arg)
{
    (void)arg;
    probe_on_coroutine(coroutine);
    void *r = NULL;
    int j = pthread_join(c_made, &r);
    return (void *)(intptr_t)(j == 0 ? (long)(intptr_t)r : -j);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(30);
    sem_init(&cb_done, 0, 0);
    sem_init(&release_b, 0, 0);
    sem_init(&release_n2, 0, 0);

    current_probe = "1: a callback joins and detaches green threads";
    REQUIRE(pthread_create(&ga, NULL, value_after, (void *)(intptr_t)11) == 0, "create");
    REQUIRE(pthread_create(&gb, NULL, wait_release, (void *)(intptr_t)1) == 0, "create");
    REQUIRE(pthread_create(&gd, NULL, short_life, (void *)(intptr_t)4) == 0, "create");
    timer_t tm = probe_callback_soon(callback);
    sem_wait(&cb_done);
    timer_delete(tm);
    printf("1: tryjoin %s, timed join %s, join %d value %ld, detach %d, again %s\n",
           r_try == EBUSY ? "EBUSY" : strerror(r_try),
           r_timed == ETIMEDOUT ? "ETIMEDOUT" : strerror(r_timed), r_join, v_join, r_detach,
           r_detach2 == EINVAL ? "EINVAL" : strerror(r_detach2));
    void *r = NULL;
    int jb = pthread_join(gb, &r);
    printf("1: the waiting one joined here: %d value %ld\n", jb, (long)(intptr_t)r);

    current_probe = "2: green main joins the callback's threads";
    r = NULL;
    int j1 = pthread_join(n1, &r);
    printf("2: join %d value %ld\n", j1, (long)(intptr_t)r);
    int t2 = pthread_tryjoin_np(n2, NULL);
    sem_post(&release_n2);
    r = NULL;
    int j2 = pthread_join(n2, &r);
    printf("2: tryjoin while it waits %s, then join %d value %ld\n",
           t2 == EBUSY ? "EBUSY" : strerror(t2), j2, (long)(intptr_t)r);

    current_probe = "3: a coroutine joins and creates";
    REQUIRE(pthread_create(&c_target, NULL, value_after, (void *)(intptr_t)7) == 0, "create");
    pthread_t owner;
    REQUIRE(pthread_create(&owner, NULL, coroutine_owner, NULL) == 0, "create");
    r = NULL;
    pthread_join(owner, &r);
    printf("3: coroutine's join %d value %ld; its thread joined by the owner: %ld\n", c_join,
           c_val, (long)(intptr_t)r);
    printf("3: the coroutine joins its own thread: %s, tryjoin %s\n",
           c_self == EDEADLK ? "EDEADLK" : strerror(c_self),
           c_selftry == EBUSY ? "EBUSY" : strerror(c_selftry));
    printf("4: the callback's fork: child %d, exec'ing child %d\n", fork_status[0],
           fork_status[1]);

    current_probe = "5: setresgid while a callback waits";
    if (geteuid() == 0) {
        sem_init(&in_waiting_cb, 0, 0);
        sem_init(&release_cb, 0, 0);
        tm = probe_callback_soon(waiting_callback);
        sem_wait(&in_waiting_cb);
        int a = setresgid(1, 1, 0);
        int on = all_gids(1);
        int b = setresgid(0, 0, 0);
        int off = all_gids(0);
        sem_post(&release_cb);
        timer_delete(tm);
        printf("5: setresgid %d, every thread's gid 1: %d; back %d, every one 0: %d\n", a, on, b,
               off);
    } else {
        printf("5: not root: setresgid not tried\n");
    }
    alarm(0);
    return probe_exit("foreign_join");
}
