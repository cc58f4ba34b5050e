/* signal_waits — pthread_kill of a thread blocked in a synchronisation wait runs
 * the handler during the wait, on that thread, and the wait then goes on.
 *
 * Natively the kernel interrupts the futex wait, the handler runs on the
 * thread, and glibc waits again (a mutex, rwlock, barrier or condvar wait never
 * fails with EINTR; sem_wait is restarted under SA_RESTART). Under bobbin the
 * green thread is parked: it must be woken to run the handler, then park again.
 * For each kind of wait a thread blocks, main sends SIGUSR1 (SA_RESTART), waits
 * up to 5 s for the handler to have run on that thread, then releases the wait
 * and checks the wait ended as it should (the lock taken, the barrier passed,
 * the predicate seen, the token taken, the join value).
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum kind { K_MUTEX, K_RDLOCK, K_WRLOCK, K_BARRIER, K_COND, K_SEM, K_JOIN, NKINDS };
static const char *const kind_name[NKINDS] = {
    "mutex", "rwlock read", "rwlock write", "barrier", "condvar", "sem_wait", "join",
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t bar;
static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready_flag; /* under cmu */
static sem_t sem;
static pthread_t join_target;

static pthread_t target;
static atomic_int handler_runs, handler_on_target, about_to_wait, wait_result;

static void on_usr1(int sig)
{
    (void)sig;
    if (pthread_equal(pthread_self(), target))
        atomic_fetch_add(&handler_on_target, 1);
    atomic_fetch_add(&handler_runs, 1);
}

static void *slow_exit(void *arg)
{
    (void)arg;
    while (atomic_load(&wait_result) != -2) /* main sets -2 to release it */
        usleep(1000);
    return (void *)42;
}

static void *waiter(void *arg)
{
    enum kind k = (enum kind)(intptr_t)arg;
    int r = -1;
    atomic_store(&about_to_wait, 1);
    switch (k) {
    case K_MUTEX:
        r = pthread_mutex_lock(&mu);
        if (r == 0)
            pthread_mutex_unlock(&mu);
        break;
    case K_RDLOCK:
        r = pthread_rwlock_rdlock(&rw);
        if (r == 0)
            pthread_rwlock_unlock(&rw);
        break;
    case K_WRLOCK:
        r = pthread_rwlock_wrlock(&rw);
        if (r == 0)
            pthread_rwlock_unlock(&rw);
        break;
    case K_BARRIER:
        r = pthread_barrier_wait(&bar);
        if (r == PTHREAD_BARRIER_SERIAL_THREAD)
            r = 0;
        break;
    case K_COND:
        pthread_mutex_lock(&cmu);
        while (!ready_flag)
            pthread_cond_wait(&cv, &cmu);
        r = 0;
        pthread_mutex_unlock(&cmu);
        break;
    case K_SEM:
        while ((r = sem_wait(&sem)) != 0 && errno == EINTR)
            ; /* natively restarted under SA_RESTART; accepted either way */
        break;
    case K_JOIN: {
        void *v = NULL;
        r = pthread_join(join_target, &v);
        if (r == 0 && v != (void *)42)
            r = -3;
        break;
    }
    case NKINDS:
        break;
    }
    atomic_store(&wait_result, r);
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void hold(enum kind k)
{
    switch (k) {
    case K_MUTEX: pthread_mutex_lock(&mu); break;
    case K_RDLOCK: pthread_rwlock_wrlock(&rw); break;
    case K_WRLOCK: pthread_rwlock_rdlock(&rw); break;
    case K_COND: ready_flag = 0; break;
    case K_JOIN:
        atomic_store(&wait_result, -1);
        REQUIRE(pthread_create(&join_target, NULL, slow_exit, NULL) == 0, "pthread_create");
        break;
    default: break;
    }
}

static void release(enum kind k)
{
    switch (k) {
    case K_MUTEX: pthread_mutex_unlock(&mu); break;
    case K_RDLOCK: pthread_rwlock_unlock(&rw); break;
    case K_WRLOCK: pthread_rwlock_unlock(&rw); break;
    case K_BARRIER: pthread_barrier_wait(&bar); break;
    case K_COND:
        pthread_mutex_lock(&cmu);
        ready_flag = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&cmu);
        break;
    case K_SEM: sem_post(&sem); break;
    case K_JOIN: atomic_store(&wait_result, -2); break;
    case NKINDS: break;
    }
}

/* A timed condvar wait that a handler interrupts goes on to its deadline:
 * NPTL waits again after the handler, so the call ends with ETIMEDOUT, not
 * with an early 0. */
static pthread_cond_t tcv = PTHREAD_COND_INITIALIZER;
static atomic_int timed_rc = -1;
static void *timed_cond_waiter(void *arg)
{
    (void)arg;
    struct timespec dl = probe_in_ms(CLOCK_REALTIME, 300);
    pthread_mutex_lock(&cmu);
    atomic_store(&about_to_wait, 1);
    int rc = pthread_cond_timedwait(&tcv, &cmu, &dl);
    pthread_mutex_unlock(&cmu);
    atomic_store(&timed_rc, rc);
    return NULL;
}

static void timed_cond_probe(void)
{
    atomic_store(&handler_on_target, 0);
    atomic_store(&about_to_wait, 0);
    REQUIRE(pthread_create(&target, NULL, timed_cond_waiter, NULL) == 0, "pthread_create");
    while (!atomic_load(&about_to_wait))
        sleep_ms(1);
    sleep_ms(50);
    CHECK(pthread_kill(target, SIGUSR1) == 0, "timed condvar: pthread_kill");
    pthread_join(target, NULL);
    int rc = atomic_load(&timed_rc);
    printf("%-12s handler ran on the thread during the wait: %s; ended with %s\n",
           "timed cond", atomic_load(&handler_on_target) == 1 ? "yes" : "no",
           rc == ETIMEDOUT ? "ETIMEDOUT" : rc == 0 ? "0" : strerror(rc));
    CHECK(atomic_load(&handler_on_target) == 1, "timed condvar: no handler on the thread");
    CHECK(rc == ETIMEDOUT, "timed condvar: ended with %d before its deadline, want ETIMEDOUT",
          rc);
}

/* A condvar waiter under a storm of pthread_kills misses no wake-up: each
 * of 300 turns is signalled once, while another thread keeps interrupting
 * the waiter's waits; a lost wake-up leaves the waiter asleep (fails after
 * 10 s instead of hanging). */
enum { STORM_TURNS = 300 };
static int storm_turn; /* under cmu */
static atomic_int storm_acked, storm_done;
static pthread_cond_t scv = PTHREAD_COND_INITIALIZER;
static void *storm_waiter(void *arg)
{
    (void)arg;
    for (int i = 1; i <= STORM_TURNS; i++) {
        pthread_mutex_lock(&cmu);
        while (storm_turn != i)
            pthread_cond_wait(&scv, &cmu);
        pthread_mutex_unlock(&cmu);
        atomic_store(&storm_acked, i);
    }
    return NULL;
}
static void *storm_killer(void *arg)
{
    pthread_t w = *(pthread_t *)arg;
    while (!atomic_load(&storm_done)) {
        pthread_kill(w, SIGUSR1);
        usleep(50);
    }
    return NULL;
}

static void cond_storm_probe(void)
{
    pthread_t w, k;
    REQUIRE(pthread_create(&w, NULL, storm_waiter, NULL) == 0, "pthread_create");
    REQUIRE(pthread_create(&k, NULL, storm_killer, &w) == 0, "pthread_create");
    int done = 0;
    for (int i = 1; i <= STORM_TURNS; i++) {
        pthread_mutex_lock(&cmu);
        storm_turn = i;
        pthread_cond_signal(&scv);
        pthread_mutex_unlock(&cmu);
        for (int waited = 0; atomic_load(&storm_acked) != i && waited < 100000; waited++)
            usleep(100); /* up to ~10 s */
        if (atomic_load(&storm_acked) != i)
            break;
        done = i;
    }
    atomic_store(&storm_done, 1);
    pthread_join(k, NULL);
    if (done == STORM_TURNS)
        pthread_join(w, NULL);
    printf("%-12s turns done under the storm: %d of %d\n", "cond storm", done, STORM_TURNS);
    CHECK(done == STORM_TURNS, "condvar storm: turn %d was never seen (a lost wake-up)",
          done + 1);
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
    REQUIRE(pthread_barrier_init(&bar, NULL, 2) == 0, "pthread_barrier_init");
    REQUIRE(sem_init(&sem, 0, 0) == 0, "sem_init");

    for (int k = 0; k < NKINDS; k++) {
        hold((enum kind)k);
        atomic_store(&handler_runs, 0);
        atomic_store(&handler_on_target, 0);
        atomic_store(&about_to_wait, 0);
        if (k != K_JOIN)
            atomic_store(&wait_result, -1);
        REQUIRE(pthread_create(&target, NULL, waiter, (void *)(intptr_t)k) == 0,
                "pthread_create");
        while (!atomic_load(&about_to_wait))
            sleep_ms(1);
        sleep_ms(50); /* parked in the wait by now */
        CHECK(pthread_kill(target, SIGUSR1) == 0, "%s: pthread_kill", kind_name[k]);
        for (int i = 0; i < 5000 && atomic_load(&handler_runs) == 0; i++)
            sleep_ms(1);
        int during = atomic_load(&handler_on_target) == 1;
        int still = atomic_load(&wait_result) == -1 || (k == K_JOIN && atomic_load(&wait_result) < 0);
        release((enum kind)k);
        pthread_join(target, NULL); /* (join_target was joined by target) */
        int r = atomic_load(&wait_result);
        printf("%-12s handler ran on the thread during the wait: %s; wait still on: %s; "
               "ended with %d\n",
               kind_name[k], during ? "yes" : "no", still ? "yes" : "no", r);
        CHECK(during, "%s: the handler had not run on the waiting thread within 5 s",
              kind_name[k]);
        CHECK(still, "%s: the wait ended before it was released", kind_name[k]);
        CHECK(r == 0, "%s: the wait ended with %d, want 0", kind_name[k], r);
    }
    timed_cond_probe();
    cond_storm_probe();
    return probe_exit("signal_waits");
}
