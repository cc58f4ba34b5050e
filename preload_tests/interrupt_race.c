/* interrupt_race — pthread_cancel and pthread_kill aimed at a thread in the very
 * moment it enters a blocking call, not after it has settled there.
 *
 * Each iteration starts a victim that marks itself ready and at once blocks in
 * one of: pthread_cond_wait, pthread_mutex_lock (on a mutex main holds), sem_wait,
 * nanosleep, read on an empty pipe, poll on it, pthread_join of a thread that
 * does not end. main waits for the mark (yielding, no sleep) and strikes at once,
 * so the request lands anywhere from just before the call to deep inside it.
 *
 * - cancel: every one of those but the mutex is a cancellation point, so the
 *   victim must end cancelled (join value PTHREAD_CANCELED) whether the request
 *   came before or during the call; a request that fell between the victim's
 *   last look and its park used to be lost under bobbin, and the join hung.
 * - signal: the SIGUSR1 handler posts a semaphore; main waits for it while the
 *   victim is still blocked (nothing has released it yet), so the handler must
 *   run during the wait, as the kernel runs it natively. Then main releases the
 *   victim and joins it. (Not nanosleep: natively a signal landing just before
 *   the call runs its handler, and then the sleep lasts its whole length.)
 *
 * A watchdog (alarm) turns a hang into exit 1 naming the probe. stdout: one line
 * per probe with the number of iterations that ended as they must.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "interrupt_race"
#include "probe.h"

enum point { P_COND, P_MUTEX, P_SEM, P_SLEEP, P_READ, P_POLL, P_JOIN, NPOINTS };
static const char *const point_name[NPOINTS] = {
    "cond_wait", "mutex_lock", "sem_wait", "nanosleep", "read", "poll", "join",
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER; /* main holds it */
static sem_t sem, handled, helper_go;
static int pipefd[2];
static pthread_t helper; /* the thread victims join: it waits on helper_go */
static atomic_int ready, released;

static void on_usr1(int sig)
{
    (void)sig;
    sem_post(&handled); /* async-signal-safe */
}

static void unlock_mu(void *arg)
{
    pthread_mutex_unlock(arg);
}

static void *helper_main(void *arg)
{
    (void)arg;
    while (sem_wait(&helper_go) != 0)
        ;
    return NULL;
}

static void *victim(void *arg)
{
    enum point p = (enum point)(intptr_t)arg;
    char c;
    switch (p) {
    case P_COND:
        pthread_mutex_lock(&mu);
        pthread_cleanup_push(unlock_mu, &mu);
        atomic_store(&ready, 1);
        while (!atomic_load(&released))
            pthread_cond_wait(&cv, &mu);
        pthread_cleanup_pop(1);
        break;
    case P_MUTEX:
        atomic_store(&ready, 1);
        pthread_mutex_lock(&held);
        pthread_mutex_unlock(&held);
        break;
    case P_SEM:
        atomic_store(&ready, 1);
        while (sem_wait(&sem) != 0 && errno == EINTR)
            ;
        break;
    case P_SLEEP: {
        struct timespec ts = {30, 0};
        atomic_store(&ready, 1);
        nanosleep(&ts, NULL);
        break;
    }
    case P_READ:
        atomic_store(&ready, 1);
        while (read(pipefd[0], &c, 1) < 0 && errno == EINTR)
            ;
        break;
    case P_POLL: {
        struct pollfd pfd = {pipefd[0], POLLIN, 0};
        atomic_store(&ready, 1);
        while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
            ;
        CHECK(read(pipefd[0], &c, 1) == 1, "poll: read after readiness");
        break;
    }
    case P_JOIN:
        atomic_store(&ready, 1);
        pthread_join(helper, NULL);
        break;
    default:
        break;
    }
    return (void *)1;
}

static pthread_t start_victim(enum point p)
{
    pthread_t t;
    atomic_store(&ready, 0);
    atomic_store(&released, 0);
    REQUIRE(pthread_create(&t, NULL, victim, (void *)(intptr_t)p) == 0, "pthread_create");
    while (!atomic_load(&ready))
        sched_yield();
    return t;
}

static void start_helper(void)
{
    REQUIRE(pthread_create(&helper, NULL, helper_main, NULL) == 0, "pthread_create helper");
}

static void end_helper(void)
{
    sem_post(&helper_go);
    pthread_join(helper, NULL);
}

static int cancel_probe(enum point p, int iters)
{
    int good = 0;
    if (p == P_JOIN)
        start_helper(); /* stays joinable: a cancelled join leaves it so */
    for (int i = 0; i < iters; i++) {
        pthread_t t = start_victim(p);
        CHECK(pthread_cancel(t) == 0, "%s: pthread_cancel", point_name[p]);
        void *r = NULL;
        CHECK(pthread_join(t, &r) == 0, "%s: join", point_name[p]);
        if (r == PTHREAD_CANCELED)
            good++;
        else
            CHECK(0, "%s: iteration %d ended with %p, not cancelled", point_name[p], i, r);
    }
    if (p == P_JOIN)
        end_helper();
    return good;
}

static void release(enum point p)
{
    char c = 'x';
    switch (p) {
    case P_COND:
        pthread_mutex_lock(&mu);
        atomic_store(&released, 1);
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
        break;
    case P_MUTEX:
        pthread_mutex_unlock(&held);
        break;
    case P_SEM:
        sem_post(&sem);
        break;
    case P_READ:
    case P_POLL:
        CHECK(write(pipefd[1], &c, 1) == 1, "write");
        break;
    case P_JOIN:
        sem_post(&helper_go); /* the victim's join returns */
        break;
    default:
        break;
    }
}

static int signal_probe(enum point p, int iters)
{
    int good = 0;
    for (int i = 0; i < iters; i++) {
        if (p == P_MUTEX)
            pthread_mutex_lock(&held);
        if (p == P_JOIN)
            start_helper();
        pthread_t t = start_victim(p);
        CHECK(pthread_kill(t, SIGUSR1) == 0, "%s: pthread_kill", point_name[p]);
        /* the victim is still blocked: only its handler can post this */
        while (sem_wait(&handled) != 0)
            ;
        release(p);
        void *r = NULL;
        CHECK(pthread_join(t, &r) == 0, "%s: join", point_name[p]);
        if (r == (void *)1)
            good++;
        else
            CHECK(0, "%s: iteration %d ended with %p", point_name[p], i, r);
    }
    return good;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 400;
    REQUIRE(pipe(pipefd) == 0, "pipe");
    sem_init(&sem, 0, 0);
    sem_init(&handled, 0, 0);
    sem_init(&helper_go, 0, 0);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1; /* no SA_RESTART: interrupted calls fail with EINTR */
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    signal(SIGALRM, on_alarm);

    static char names[2 * NPOINTS][48];
    for (int p = 0; p < NPOINTS; p++) {
        if (p == P_MUTEX)
            continue; /* not a cancellation point */
        snprintf(names[p], sizeof names[p], "cancel in %s", point_name[p]);
        current_probe = names[p];
        alarm(30);
        printf("cancel in %s: %d of %d cancelled\n", point_name[p], cancel_probe(p, iters), iters);
    }
    for (int p = 0; p < NPOINTS; p++) {
        if (p == P_SLEEP)
            continue; /* see the file comment */
        snprintf(names[NPOINTS + p], sizeof names[0], "signal in %s", point_name[p]);
        current_probe = names[NPOINTS + p];
        alarm(30);
        printf("signal in %s: %d of %d handled while blocked\n", point_name[p],
               signal_probe(p, iters), iters);
    }
    alarm(0);
    return probe_exit(PROBE_NAME);
}
