/* deadlock_report — sysmon's "all threads are asleep - deadlock!" report, and
 * no report where a thread can still be woken.
 *
 * Children (this program re-executed, see reexec.h):
 *  - deadlock: threads "lockA" and "lockB" take mutexes A and B in opposite
 *    orders (a barrier makes sure each holds its first), main joins them.
 *    Natively this hangs for ever, so it runs only under bobbin: the child
 *    must exit with status 2 within 10 s, its stderr must hold "all threads
 *    are asleep - deadlock!" and a dump naming both threads (and main).
 *  - timer: the same two threads, but lockB, holding B, waits 300 ms in a
 *    timed condvar wait instead of locking A (B is released meanwhile, so
 *    lockA ends): main and lockB then wait with only a timer pending, which is
 *    no deadlock. Exit 0.
 *  - io: every thread waits on a mutex held by one that reads a pipe the
 *    parent writes to after 300 ms. Exit 0.
 *  - handler: main waits in sem_wait and the program has a SIGUSR1 handler
 *    that posts the semaphore; the parent sends SIGUSR1 after 300 ms. Exit 0.
 * The last three run natively and under bobbin alike; bobbin must not report
 * (it would exit 2 after ~100 ms). A deadline per child turns a hang into a
 * failure.
 */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"
#include "reexec.h"

static pthread_mutex_t A = PTHREAD_MUTEX_INITIALIZER, B = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- children ---- */

static void *lock_a(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "lockA");
    pthread_mutex_lock(&A);
    pthread_barrier_wait(&both_hold);
    pthread_mutex_lock(&B); /* held by lockB for ever */
    pthread_mutex_unlock(&B);
    pthread_mutex_unlock(&A);
    return NULL;
}

static void *lock_b(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "lockB");
    pthread_mutex_lock(&B);
    pthread_barrier_wait(&both_hold);
    pthread_mutex_lock(&A); /* held by lockA for ever */
    pthread_mutex_unlock(&A);
    pthread_mutex_unlock(&B);
    return NULL;
}

static int child_deadlock(void)
{
    pthread_t a, b;
    pthread_barrier_init(&both_hold, NULL, 2);
    pthread_create(&a, NULL, lock_a, NULL);
    pthread_create(&b, NULL, lock_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("deadlock child: not deadlocked?\n");
    return 1;
}

/* timer: lockB waits with a deadline instead of taking A */
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static void *lock_b_timed(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&B);
    pthread_barrier_wait(&both_hold);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += 300 * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    /* wait on a condvar nobody signals, with B released meanwhile: lockA
     * gets B, and we time out; then we let go */
    while (pthread_cond_timedwait(&never, &B, &dl) == 0)
        ;
    pthread_mutex_unlock(&B);
    return NULL;
}

static int child_timer(void)
{
    pthread_t a, b;
    pthread_barrier_init(&both_hold, NULL, 2);
    pthread_create(&a, NULL, lock_a, NULL);
    pthread_create(&b, NULL, lock_b_timed, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("timer child: done\n");
    return 0;
}

/* io: the holder reads a pipe the parent writes to */
static void *io_holder(void *arg)
{
    int fd = *(int *)arg;
    pthread_mutex_lock(&A);
    pthread_barrier_wait(&both_hold);
    char c;
    ssize_t n = read(fd, &c, 1);
    pthread_mutex_unlock(&A);
    return (void *)(intptr_t)n;
}

static void *io_waiter(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&both_hold);
    pthread_mutex_lock(&A);
    pthread_mutex_unlock(&A);
    return NULL;
}

static int child_io(void)
{
    int fd = 0; /* the parent's pipe is our stdin */
    pthread_t h, w[3];
    pthread_barrier_init(&both_hold, NULL, 4);
    pthread_create(&h, NULL, io_holder, &fd);
    for (int i = 0; i < 3; i++)
        pthread_create(&w[i], NULL, io_waiter, NULL);
    reexec_ready();
    void *n;
    pthread_join(h, &n);
    for (int i = 0; i < 3; i++)
        pthread_join(w[i], NULL);
    printf("io child: read %ld byte, done\n", (long)(intptr_t)n);
    return n == (void *)1 ? 0 : 1;
}

/* handler: a signal handler may wake main */
static sem_t sem;
static void on_usr1(int sig)
{
    (void)sig;
    sem_post(&sem);
}

static int child_handler(void)
{
    sem_init(&sem, 0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    reexec_ready();
    while (sem_wait(&sem) != 0 && errno == EINTR)
        ;
    printf("handler child: woken by the signal handler, done\n");
    return 0;
}

/* ---- parent ---- */

static void expect_clean_exit(const char *mode, const char *line)
{
    struct reexec r;
    int in[2] = {-1, -1};
    if (strcmp(mode, "io") == 0) {
        REQUIRE(pipe(in) == 0, "pipe");
        /* the child reads our pipe as its stdin */
        int saved = dup(0);
        dup2(in[0], 0);
        REQUIRE(reexec_start(&r, mode, NULL) == 0, "start");
        dup2(saved, 0);
        close(saved);
        close(in[0]);
    } else {
        REQUIRE(reexec_start(&r, mode, NULL) == 0, "start");
    }
    if (strcmp(mode, "io") == 0 || strcmp(mode, "handler") == 0) {
        int ready = reexec_wait_ready(&r, 10000);
        CHECK(ready, "%s child never got ready", mode);
        sleep_ms(300);
        if (in[1] >= 0) {
            (void)!write(in[1], "x", 1);
            close(in[1]);
        } else {
            kill(r.pid, SIGUSR1);
        }
    }
    reexec_finish(&r, 10000);
    int ok = !r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 &&
             strstr(r.out, line) != NULL;
    printf("%-8s child: %s, no report: %s\n", mode, ok ? "exit 0" : "FAILED",
           strstr(r.err, "deadlock") ? "no" : "yes");
    CHECK(ok, "%s child ended with %s, stdout \"%s\"", mode, reexec_how(&r), r.out);
    CHECK(strstr(r.err, "deadlock") == NULL, "%s child: a deadlock was reported", mode);
    if (!ok || strstr(r.err, "deadlock"))
        reexec_show(mode, &r);
    free(r.out);
    free(r.err);
}

static void expect_deadlock_report(void)
{
    const char *want[] = {"deadlock child: exit 2", "report: all threads are asleep",
                          "dump names lockA, lockB and main"};
    if (!under_bobbin()) {
        /* natively the child would hang: print what bobbin must produce */
        for (int i = 0; i < 3; i++)
            printf("%s\n", want[i]);
        return;
    }
    struct reexec r;
    REQUIRE(reexec_start(&r, "deadlock", NULL) == 0, "start");
    reexec_finish(&r, 10000);
    int exit2 = !r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2;
    int report = strstr(r.err, "all threads are asleep - deadlock!") != NULL;
    const char *dump = report ? strstr(r.err, "all threads are asleep - deadlock!") : "";
    int names = strstr(dump, "\"lockA\"") && strstr(dump, "\"lockB\"") && strstr(dump, "main");
    printf("%s\n", exit2 ? want[0] : "deadlock child: NOT exit 2");
    printf("%s\n", report ? want[1] : "report: missing");
    printf("%s\n", names ? want[2] : "dump: threads missing");
    CHECK(exit2, "the deadlocked child ended with %s, want exit 2", reexec_how(&r));
    CHECK(report, "no \"all threads are asleep - deadlock!\" on the child's stderr");
    CHECK(names, "the dump does not name \"lockA\", \"lockB\" and main");
    /* each of the two threads is shown waiting on a mutex */
    CHECK(count_lines_with(dump, "mutex") >= 2, "the dump shows fewer than 2 mutex waits");
    if (!exit2 || !report || !names || count_lines_with(dump, "mutex") < 2)
        reexec_show("deadlock", &r);
    free(r.out);
    free(r.err);
}

int main(void)
{
    const char *mode = reexec_mode();
    if (mode) {
        if (strcmp(mode, "deadlock") == 0)
            return child_deadlock();
        if (strcmp(mode, "timer") == 0)
            return child_timer();
        if (strcmp(mode, "io") == 0)
            return child_io();
        if (strcmp(mode, "handler") == 0)
            return child_handler();
        return 1;
    }
    expect_deadlock_report();
    expect_clean_exit("timer", "timer child: done");
    expect_clean_exit("io", "io child: read 1 byte, done");
    expect_clean_exit("handler", "handler child: woken by the signal handler, done");
    return probe_exit("deadlock_report");
}
