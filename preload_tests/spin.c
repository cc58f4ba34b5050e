/* spin — pthread spin locks: a counter incremented under a spin lock by many
 * more threads than OS threads, holders that yield while they hold it, and
 * NPTL's return values.
 *
 * Under bobbin 16 Gs share 2 OS threads: a spinner that never let its P go
 * would spin forever while the holder waits for that P. Holders call
 * sched_yield inside the critical section now and then to make that happen.
 * The counter is a plain long: a lost update means the lock let two in.
 * A watchdog (alarm) turns a hang into exit 1.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

#define NTHREADS 16
#define ITERS 20000

static pthread_spinlock_t lock;
static long counter;        /* protected by lock */
static atomic_int inside;   /* threads in the critical section: must stay <= 1 */
static atomic_long overlaps;

static void on_alarm(int sig)
{
    static const char msg[] = "spin: watchdog: hung\n";
    (void)sig;
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static const char *ename(int rc)
{
    const char *n = rc == 0 ? "0" : strerrorname_np(rc);
    return n ? n : "?";
}

static void expect(const char *what, int rc, int want)
{
    printf("%s: %s\n", what, ename(rc));
    CHECK(rc == want, "%s: got %s, want %s", what, ename(rc), ename(want));
}

static void expect_val(const char *what, long got, long want)
{
    printf("%s: %ld\n", what, got);
    CHECK(got == want, "%s: got %ld, want %ld", what, got, want);
}

static void *worker(void *arg)
{
    long me = (long)arg;
    for (int i = 0; i < ITERS; i++) {
        int rc;
        if (i % 7 == 0) {
            /* yield between tries: a busy trylock loop would need
             * preemption to let a descheduled holder run */
            while ((rc = pthread_spin_trylock(&lock)) == EBUSY)
                sched_yield();
        } else {
            rc = pthread_spin_lock(&lock);
        }
        CHECK(rc == 0, "lock: %s", ename(rc));
        if (atomic_fetch_add(&inside, 1) != 0)
            atomic_fetch_add(&overlaps, 1);
        long c = counter;
        if ((i + me) % 1000 == 0)
            sched_yield(); /* descheduled while holding the lock */
        counter = c + 1;
        atomic_fetch_sub(&inside, 1);
        pthread_spin_unlock(&lock);
    }
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(50);

    pthread_spinlock_t s;
    expect("spin_init", pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE), 0);
    expect("trylock free", pthread_spin_trylock(&s), 0);
    expect("trylock held", pthread_spin_trylock(&s), EBUSY);
    expect("unlock", pthread_spin_unlock(&s), 0);
    expect("lock", pthread_spin_lock(&s), 0);
    expect("trylock held", pthread_spin_trylock(&s), EBUSY);
    expect("unlock", pthread_spin_unlock(&s), 0);
    expect("destroy", pthread_spin_destroy(&s), 0);
    expect("spin_init pshared", pthread_spin_init(&s, PTHREAD_PROCESS_SHARED), 0);
    expect("trylock pshared", pthread_spin_trylock(&s), 0);
    expect("unlock", pthread_spin_unlock(&s), 0);
    expect("destroy", pthread_spin_destroy(&s), 0);

    expect("spin_init", pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE), 0);
    pthread_t t[NTHREADS];
    for (long i = 0; i < NTHREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, worker, (void *)i) == 0, "pthread_create");
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    expect_val("counter", counter, (long)NTHREADS * ITERS);
    expect_val("overlapping holders", atomic_load(&overlaps), 0);
    expect("destroy", pthread_spin_destroy(&lock), 0);

    alarm(0);
    return probe_exit("spin");
}
