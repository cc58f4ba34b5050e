/* barrier — pthread barriers: 64 threads through 1,000 rounds, rounds that
 * never mix, one PTHREAD_BARRIER_SERIAL_THREAD per round, NPTL's error codes.
 *
 * Each round every thread adds (round * 64 + its index) into the round's
 * slot, then waits; after the barrier every thread checks the slot holds the
 * full sum: all 64 arrived before anyone left. A thread that leaves a
 * barrier immediately enters the next one, so a fast thread is often in
 * round r + 1 while others still sleep in round r; if a wake-up of round r
 * released it from round r + 1, it would see that round's sum incomplete.
 * The serial thread of a round counts itself in that round, so exactly one
 * per round shows up.
 *
 * Then: count 0 (EINVAL), count 1 (every wait is the serial thread),
 * pthread_barrier_destroy right after the serial thread returns while the
 * others may still be on their way out (POSIX allows it; the memory is then
 * scribbled on), the same barrier used again after init, and a
 * process-shared barrier (glibc's own implementation under bobbin).
 * A watchdog (alarm) turns a hang into exit 1 naming the probe.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PROBE_NAME "barrier"
#include "expect.h"

#define NTHREADS 64
#define ROUNDS 1000

/* ---- rounds ---- */

static pthread_barrier_t bar;
static atomic_long sums[ROUNDS];
static atomic_int serials[ROUNDS];
static atomic_long bad_sum, bad_rc;

static void *runner(void *arg)
{
    long me = (long)arg;
    for (int r = 0; r < ROUNDS; r++) {
        atomic_fetch_add(&sums[r], (long)r * NTHREADS + me);
        int rc = pthread_barrier_wait(&bar);
        if (rc == PTHREAD_BARRIER_SERIAL_THREAD)
            atomic_fetch_add(&serials[r], 1);
        else if (rc != 0)
            atomic_fetch_add(&bad_rc, 1);
        long want = (long)r * NTHREADS * NTHREADS + (long)NTHREADS * (NTHREADS - 1) / 2;
        if (atomic_load(&sums[r]) != want)
            atomic_fetch_add(&bad_sum, 1);
    }
    return NULL;
}

static void rounds(void)
{
    current_probe = "64 threads x 1000 rounds";
    expect("init count 64", pthread_barrier_init(&bar, NULL, NTHREADS), 0);
    pthread_t t[NTHREADS];
    for (long i = 0; i < NTHREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, runner, (void *)i) == 0, "pthread_create");
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    long one_serial = 0, sum_ok = 0;
    for (int r = 0; r < ROUNDS; r++) {
        one_serial += atomic_load(&serials[r]) == 1;
        long want = (long)r * NTHREADS * NTHREADS + (long)NTHREADS * (NTHREADS - 1) / 2;
        sum_ok += atomic_load(&sums[r]) == want;
    }
    expect_val("rounds with exactly one serial thread", one_serial, ROUNDS);
    expect_val("rounds with the full checksum", sum_ok, ROUNDS);
    expect_val("threads that saw a partial checksum", atomic_load(&bad_sum), 0);
    expect_val("unexpected return values", atomic_load(&bad_rc), 0);
    expect("destroy", pthread_barrier_destroy(&bar), 0);
}

/* ---- destroy as soon as the serial thread is out ---- */

struct reuse {
    pthread_barrier_t *b;
    atomic_int serial_seen;
};

static void *reuse_waiter(void *arg)
{
    struct reuse *u = arg;
    int rc = pthread_barrier_wait(u->b);
    if (rc == PTHREAD_BARRIER_SERIAL_THREAD) {
        /* POSIX: the barrier may be destroyed now, with the other waiters
         * of this round possibly not yet returned */
        int d = pthread_barrier_destroy(u->b);
        CHECK(d == 0, "destroy by the serial thread: %s", ename(d));
        memset(u->b, 0xa5, sizeof *u->b); /* and its memory reused */
        atomic_fetch_add(&u->serial_seen, 1);
    } else {
        CHECK(rc == 0, "barrier_wait: %d", rc);
    }
    return NULL;
}

static void destroy_early(void)
{
    current_probe = "destroy by the serial thread";
    long ok = 0;
    for (int iter = 0; iter < 200; iter++) {
        pthread_barrier_t *b = malloc(sizeof *b);
        REQUIRE(b != NULL, "malloc");
        struct reuse u = { .b = b };
        REQUIRE(pthread_barrier_init(b, NULL, 8) == 0, "init");
        pthread_t t[8];
        for (int i = 0; i < 8; i++)
            REQUIRE(pthread_create(&t[i], NULL, reuse_waiter, &u) == 0, "pthread_create");
        for (int i = 0; i < 8; i++)
            pthread_join(t[i], NULL);
        ok += atomic_load(&u.serial_seen) == 1;
        free(b);
    }
    expect_val("destroy-by-serial iterations with one serial thread", ok, 200);
}

/* ---- small probes ---- */

static void *count1(void *arg)
{
    return (void *)(long)pthread_barrier_wait(arg);
}

static void probes(void)
{
    pthread_barrier_t b;
    expect("init count 0", pthread_barrier_init(&b, NULL, 0), EINVAL);
    expect("init count 1", pthread_barrier_init(&b, NULL, 1), 0);
    long serial = 0;
    for (int i = 0; i < 10; i++)
        serial += pthread_barrier_wait(&b) == PTHREAD_BARRIER_SERIAL_THREAD;
    expect_val("count 1: serial returns out of 10", serial, 10);
    expect("destroy", pthread_barrier_destroy(&b), 0);

    /* re-initialised after destroy, count 2, with a thread */
    expect("init count 2", pthread_barrier_init(&b, NULL, 2), 0);
    long serial2 = 0;
    for (int i = 0; i < 20; i++) {
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, count1, &b) == 0, "pthread_create");
        int mine = pthread_barrier_wait(&b);
        void *theirs;
        pthread_join(t, &theirs);
        serial2 += (mine == PTHREAD_BARRIER_SERIAL_THREAD) + ((long)theirs == PTHREAD_BARRIER_SERIAL_THREAD);
        CHECK((mine == 0 || mine == PTHREAD_BARRIER_SERIAL_THREAD) &&
                  ((long)theirs == 0 || (long)theirs == PTHREAD_BARRIER_SERIAL_THREAD),
              "count 2 return values %d %ld", mine, (long)theirs);
    }
    expect_val("count 2: serial returns in 20 rounds", serial2, 20);
    expect("destroy", pthread_barrier_destroy(&b), 0);

    pthread_barrierattr_t a;
    int ps = -1;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_getpshared(&a, &ps);
    expect_val("attr default pshared is PRIVATE", ps == PTHREAD_PROCESS_PRIVATE, 1);
    expect("attr setpshared 7", pthread_barrierattr_setpshared(&a, 7), EINVAL);
    pthread_barrierattr_destroy(&a);
}

/* ---- process-shared: glibc's implementation, waits inside entersyscall ---- */

static void *pshared_waiter(void *arg)
{
    long serial = 0;
    for (int i = 0; i < 200; i++)
        serial += pthread_barrier_wait(arg) == PTHREAD_BARRIER_SERIAL_THREAD;
    return (void *)serial;
}

/* count 2, main and one thread: each wait may block an OS thread in the
 * kernel under bobbin, so keep them within the harness's thread limit */
static void pshared(void)
{
    current_probe = "pshared barrier";
    pthread_barrier_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(b != MAP_FAILED, "mmap: %s", strerror(errno));
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    expect("attr setpshared SHARED", pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED), 0);
    expect("pshared init count 2", pthread_barrier_init(b, &a, 2), 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, pshared_waiter, b) == 0, "pthread_create");
    long serial = (long)pshared_waiter(b);
    void *s;
    pthread_join(t, &s);
    serial += (long)s;
    expect_val("pshared: serial returns in 200 rounds", serial, 200);
    expect("pshared destroy", pthread_barrier_destroy(b), 0);
    pthread_barrierattr_destroy(&a);
    munmap(b, sizeof *b);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(50);
    probes();
    rounds();
    destroy_early();
    pshared();
    alarm(0);
    return probe_exit("barrier");
}
