/* handler_sem_post — sem_post (async-signal-safe) from a signal handler
 * that lands anywhere, while other threads wait on that semaphore and two
 * more ping-pong through a pair of semaphores.
 *
 * A timer's SIGALRM (process-directed, every 100 µs) lands on whatever
 * thread runs, in the middle of the program's code or of the threading
 * library's (a semaphore wait halfway through, the switch between two
 * threads); its handler posts once. Checks: every post is taken or still
 * counted in the semaphore (posts + 2 = takes + value, once the timer is
 * off, SIGALRM ignored and no handler running), the ping-pong ran
 * all its rounds, the same stdout natively and under bobbin. A handler
 * whose wake-up touched the run queue or the wait queue the interrupted
 * code was changing crashed here in every run.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "probe.h"

#define ROUNDS 100000

static sem_t s, a, b;
static atomic_long posted, taken, entered, left_handler;
static atomic_int stop;

static void on_alarm(int sig)
{
    (void)sig;
    int e = errno;
    atomic_fetch_add(&entered, 1);
    if (sem_post(&s) == 0)
        atomic_fetch_add(&posted, 1);
    atomic_fetch_add(&left_handler, 1);
    errno = e;
}

static void *waiter(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        if (sem_wait(&s) == 0)
            atomic_fetch_add(&taken, 1);
    return NULL;
}

static void *side_a(void *arg)
{
    (void)arg;
    long n = 0;
    for (long i = 0; i < ROUNDS; i++) {
        sem_post(&a);
        while (sem_wait(&b) != 0)
            CHECK(errno == EINTR, "sem_wait(b): %s", strerror(errno));
        n++;
    }
    return (void *)n;
}

static void *side_b(void *arg)
{
    (void)arg;
    long n = 0;
    for (long i = 0; i < ROUNDS; i++) {
        while (sem_wait(&a) != 0)
            CHECK(errno == EINTR, "sem_wait(a): %s", strerror(errno));
        sem_post(&b);
        n++;
    }
    return (void *)n;
}

int main(void)
{
    REQUIRE(sem_init(&s, 0, 0) == 0 && sem_init(&a, 0, 0) == 0 && sem_init(&b, 0, 0) == 0,
            "sem_init");
    REQUIRE(probe_on_signal(SIGALRM, on_alarm, SA_RESTART) == 0, "sigaction");
    pthread_t w[2], x, y;
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&w[i], NULL, waiter, NULL) == 0, "pthread_create");
    struct itimerval it = {{0, 100}, {0, 100}};
    setitimer(ITIMER_REAL, &it, NULL);
    REQUIRE(pthread_create(&x, NULL, side_a, NULL) == 0, "pthread_create");
    REQUIRE(pthread_create(&y, NULL, side_b, NULL) == 0, "pthread_create");
    void *ra, *rb;
    pthread_join(x, &ra);
    pthread_join(y, &rb);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    /* a SIGALRM still pending is dropped; one whose handler runs is
     * waited for: the counts are final after that */
    signal(SIGALRM, SIG_IGN);
    while (atomic_load(&entered) != atomic_load(&left_handler)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&stop, 1);
    sem_post(&s);
    sem_post(&s);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
    int v = -1;
    sem_getvalue(&s, &v);
    CHECK((long)ra == ROUNDS && (long)rb == ROUNDS, "ping-pong rounds %ld and %ld, want %d",
          (long)ra, (long)rb, ROUNDS);
    CHECK(atomic_load(&posted) > 0, "no SIGALRM was handled");
    CHECK(atomic_load(&posted) + 2 == atomic_load(&taken) + v,
          "%ld posts by handlers + 2, %ld taken, %d left", atomic_load(&posted),
          atomic_load(&taken), v);
    printf("ping-pong %d rounds, every post from a handler taken or counted\n", ROUNDS);
    return probe_exit("handler_sem_post");
}
