/* gettid_stable — a thread's kernel tid is its own for life, wherever it runs,
 * and a signal sent to that tid reaches that thread.
 *
 * Under bobbin a green thread moves between OS threads whenever it parks or
 * yields; gettid() and syscall(SYS_gettid) must not follow the OS thread it
 * happens to be on. NTHREADS threads each take gettid() at start (equal to
 * syscall(SYS_gettid)), then go through ITERS steps that make a G migrate
 * (sched_yield, usleep, a mutex the others contend for and sometimes yield
 * while holding, a barrier every BARRIER_EVERY steps) and check after each
 * step that both still give the first value. The barriers keep all of them
 * alive together, so their tids must be pairwise distinct, and distinct from
 * main's, which is the pid (the main thread's tid is the process id, under
 * bobbin too: programs compare the two to ask "am I the main thread?").
 *
 * Then delivery by tid: thread 0, after its steps, waits in sem_wait for a
 * SIGUSR1 that main sends with tgkill(getpid(), tid0, SIGUSR1). The handler
 * records pthread_self() and gettid() (lock-free atomics) and posts the
 * semaphore (async-signal-safe), so a signal delivered to the wrong thread
 * still wakes thread 0, which then sees someone else's identity recorded; a
 * signal that never arrives leaves it waiting SIGNAL_WAIT_S seconds (sem_timedwait),
 * then it reports the handler did not run.
 * A watchdog (alarm) turns a hang into exit 1, naming the phase.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { NTHREADS = 8, ITERS = 200, BARRIER_EVERY = 50 };
enum { SIGNAL_WAIT_S = 5 }; /* thread 0 gives up on its signal after this */

static const char *volatile current_phase = "start";

static void on_alarm(int sig)
{
    static const char pre[] = "gettid_stable: watchdog: hung in: ";
    const char *p = current_phase;
    (void)sig;
    (void)!write(2, pre, sizeof pre - 1);
    (void)!write(2, p, strlen(p));
    (void)!write(2, "\n", 1);
    _exit(1);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long shared_count; /* under mu */
static pthread_barrier_t bar;

static pid_t tids[NTHREADS];
static atomic_int unstable[NTHREADS]; /* steps after which a tid had changed */
static atomic_int raw_mismatch[NTHREADS]; /* gettid() != syscall(SYS_gettid) */

/* the SIGUSR1 probe */
static atomic_int target_ready;
static sem_t sig_sem;
static atomic_ulong sig_self;   /* pthread_self() in the handler */
static atomic_long sig_tid;     /* gettid() in the handler */
static atomic_int sig_count;
static int target_same_self, target_same_tid, target_count; /* as thread 0 saw them */
static long target_sig_tid;

static void on_usr1(int sig)
{
    int saved = errno;
    (void)sig;
    atomic_store(&sig_self, (unsigned long)pthread_self());
    atomic_store(&sig_tid, (long)gettid());
    atomic_fetch_add(&sig_count, 1);
    sem_post(&sig_sem);
    errno = saved;
}

static void check_tid(int id, pid_t want)
{
    pid_t a = gettid();
    pid_t b = (pid_t)syscall(SYS_gettid);
    if (a != want)
        atomic_fetch_add(&unstable[id], 1);
    if (a != b)
        atomic_fetch_add(&raw_mismatch[id], 1);
}

static void *worker(void *arg)
{
    int id = (int)(uintptr_t)arg;
    pid_t me = gettid();
    tids[id] = me;
    if ((pid_t)syscall(SYS_gettid) != me)
        atomic_fetch_add(&raw_mismatch[id], 1);

    for (int i = 0; i < ITERS; i++) {
        switch (i % 4) {
        case 0:
            sched_yield();
            break;
        case 1:
            usleep(100);
            break;
        case 2:
        case 3:
            pthread_mutex_lock(&mu);
            shared_count++;
            if (i % 8 == 2)
                sched_yield(); /* the others block on mu meanwhile */
            pthread_mutex_unlock(&mu);
            break;
        }
        check_tid(id, me);
        if (i % BARRIER_EVERY == BARRIER_EVERY - 1) {
            int rc = pthread_barrier_wait(&bar);
            CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD, "barrier: %d", rc);
            check_tid(id, me);
        }
    }

    if (id == 0) {
        /* the target: wait for the signal main sends to this tid */
        check_tid(id, me);
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += SIGNAL_WAIT_S;
        atomic_store(&target_ready, 1);
        while (sem_timedwait(&sig_sem, &dl) != 0) {
            if (errno == EINTR)
                continue;
            CHECK(errno == ETIMEDOUT, "sem_timedwait: %s", strerror(errno));
            CHECK(0, "no SIGUSR1 handler posted the semaphore in %d s", SIGNAL_WAIT_S);
            break;
        }
        target_same_self = atomic_load(&sig_self) == (unsigned long)pthread_self();
        target_sig_tid = atomic_load(&sig_tid);
        target_same_tid = target_sig_tid == (long)me;
        target_count = atomic_load(&sig_count);
        check_tid(id, me);
    }
    return NULL;
}

int main(void)
{
    pthread_t th[NTHREADS];

    signal(SIGALRM, on_alarm);
    alarm(50);

    pid_t main_tid = gettid();
    int main_is_pid = main_tid == getpid() && (pid_t)syscall(SYS_gettid) == main_tid;
    printf("gettid_stable: main's gettid() is the pid: %s\n", main_is_pid ? "yes" : "no");
    CHECK(main_is_pid, "main: gettid()=%d syscall(SYS_gettid)=%ld getpid()=%d",
          (int)main_tid, (long)syscall(SYS_gettid), (int)getpid());

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
    REQUIRE(sem_init(&sig_sem, 0, 0) == 0, "sem_init");
    REQUIRE(pthread_barrier_init(&bar, NULL, NTHREADS) == 0, "barrier_init");

    current_phase = "migrating threads";
    for (int i = 0; i < NTHREADS; i++) {
        int rc = pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
        REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    }

    /* thread 0 waits for its signal; give it time to be parked in sem_wait */
    current_phase = "waiting for thread 0 to wait";
    while (!atomic_load(&target_ready))
        usleep(1000);
    usleep(20 * 1000);
    current_phase = "tgkill";
    long krc = syscall(SYS_tgkill, getpid(), tids[0], SIGUSR1);
    CHECK(krc == 0, "tgkill(%d, %d, SIGUSR1): %s", (int)getpid(), (int)tids[0],
          strerror(errno));
    if (krc != 0)
        sem_post(&sig_sem); /* let thread 0 go: it will see no handler ran */

    current_phase = "joining";
    for (int i = 0; i < NTHREADS; i++)
        REQUIRE(pthread_join(th[i], NULL) == 0, "join %d", i);
    alarm(0);

    int stable = 1, distinct = 1;
    for (int i = 0; i < NTHREADS; i++) {
        if (atomic_load(&unstable[i]) != 0 || atomic_load(&raw_mismatch[i]) != 0)
            stable = 0;
        CHECK(atomic_load(&unstable[i]) == 0,
              "thread %d: gettid() changed after %d of its steps", i,
              atomic_load(&unstable[i]));
        CHECK(atomic_load(&raw_mismatch[i]) == 0,
              "thread %d: gettid() != syscall(SYS_gettid) %d times", i,
              atomic_load(&raw_mismatch[i]));
        if (tids[i] <= 0 || tids[i] == main_tid)
            distinct = 0;
        CHECK(tids[i] > 0 && tids[i] != main_tid, "thread %d: tid %d (main's %d)", i,
              (int)tids[i], (int)main_tid);
        for (int j = 0; j < i; j++) {
            if (tids[i] == tids[j])
                distinct = 0;
            CHECK(tids[i] != tids[j], "threads %d and %d share tid %d", j, i, (int)tids[i]);
        }
    }
    CHECK(shared_count == (long)NTHREADS * (ITERS / 2), "mutex count %ld, want %ld",
          shared_count, (long)NTHREADS * (ITERS / 2));
    printf("gettid_stable: %d threads, stable and distinct: %s\n", NTHREADS,
           stable && distinct ? "yes" : "no");

    int reached = target_same_self && target_same_tid && target_count == 1;
    CHECK(target_count == 1, "the SIGUSR1 handler had run %d times when thread 0 woke, "
          "want 1 (%d times by the end)", target_count, atomic_load(&sig_count));
    if (target_count >= 1) {
        CHECK(target_same_self, "the SIGUSR1 handler ran on another thread (pthread_self)");
        CHECK(target_same_tid, "the SIGUSR1 handler saw gettid()=%ld, the target's tid "
              "is %d", target_sig_tid, (int)tids[0]);
    }
    printf("tgkill reached its thread: %s\n", reached ? "yes" : "no");

    return probe_exit("gettid_stable");
}
