/* cond_stress — a bounded queue under 4 producers and 4 consumers, and wake-ups
 * that must not be lost.
 *
 * Part 1: 4 producers put 200,000 items (50,000 each) into a 16-slot queue guarded
 * by one mutex and two condvars ("not empty", "not full"); 4 consumers take them.
 * Wake-ups mix pthread_cond_signal and pthread_cond_broadcast (every 8th put or take
 * broadcasts). Each item is taken exactly once: a per-item flag catches duplicates
 * and losses, and the checksum of all values taken must be the checksum of all values
 * put. Consumers end when the queue is empty and all producers are done.
 *
 * Part 2, "a signal is not lost": 64 threads wait on one condvar, each counted as
 * waiting under the mutex; once all 64 are inside pthread_cond_wait, main
 * broadcasts once, and every one of them must wake (100 rounds). Then the same
 * with signals: with all 64 waiting, main sends 64 pthread_cond_signal calls, each
 * handing out one token, and all 64 must wake and take one. A lost wake-up shows as a
 * thread still waiting when main's 10 s timed wait for "all woke" expires; main then
 * reports it and wakes the stragglers, so the test fails rather than hangs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"

/* ---- part 1: bounded queue ---- */

enum { NPROD = 4, NCONS = 4, NITEMS = 200000, QCAP = 16 };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    uint32_t buf[QCAP];
    int head, count;
    int producers_left;
    long puts, takes; /* counters to pick signal vs broadcast */
} q = { .mu = PTHREAD_MUTEX_INITIALIZER, .not_empty = PTHREAD_COND_INITIALIZER,
        .not_full = PTHREAD_COND_INITIALIZER };

static unsigned char *taken;  /* taken[i]: how many times item i was taken */
static uint64_t cons_sum[NCONS];
static long cons_count[NCONS];

static uint64_t value_of(uint32_t item)
{
    uint64_t x = (uint64_t)item * 0x9e3779b97f4a7c15ull + 7;
    x ^= x >> 29;
    return x * 0xbf58476d1ce4e5b9ull;
}

static void *producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (uint32_t item = (uint32_t)p; item < NITEMS; item += NPROD) {
        pthread_mutex_lock(&q.mu);
        while (q.count == QCAP)
            pthread_cond_wait(&q.not_full, &q.mu);
        q.buf[(q.head + q.count) % QCAP] = item;
        q.count++;
        if (++q.puts % 8 == 0)
            pthread_cond_broadcast(&q.not_empty);
        else
            pthread_cond_signal(&q.not_empty);
        pthread_mutex_unlock(&q.mu);
    }
    pthread_mutex_lock(&q.mu);
    if (--q.producers_left == 0)
        pthread_cond_broadcast(&q.not_empty); /* consumers may now end */
    pthread_mutex_unlock(&q.mu);
    return NULL;
}

static void *consumer(void *arg)
{
    int c = (int)(intptr_t)arg;
    for (;;) {
        pthread_mutex_lock(&q.mu);
        while (q.count == 0 && q.producers_left > 0)
            pthread_cond_wait(&q.not_empty, &q.mu);
        if (q.count == 0) {
            pthread_mutex_unlock(&q.mu);
            return NULL;
        }
        uint32_t item = q.buf[q.head];
        q.head = (q.head + 1) % QCAP;
        q.count--;
        if (++q.takes % 8 == 0)
            pthread_cond_broadcast(&q.not_full);
        else
            pthread_cond_signal(&q.not_full);
        pthread_mutex_unlock(&q.mu);

        taken[item]++; /* each item is taken by one consumer only, if all is well */
        cons_sum[c] += value_of(item);
        cons_count[c]++;
    }
}

static void bounded_queue(void)
{
    pthread_t prod[NPROD], cons[NCONS];
    taken = calloc(NITEMS, 1);
    REQUIRE(taken != NULL, "calloc");
    q.producers_left = NPROD;
    for (int i = 0; i < NCONS; i++)
        REQUIRE(pthread_create(&cons[i], NULL, consumer, (void *)(intptr_t)i) == 0,
                "pthread_create");
    for (int i = 0; i < NPROD; i++)
        REQUIRE(pthread_create(&prod[i], NULL, producer, (void *)(intptr_t)i) == 0,
                "pthread_create");
    for (int i = 0; i < NPROD; i++)
        REQUIRE(pthread_join(prod[i], NULL) == 0, "pthread_join");
    for (int i = 0; i < NCONS; i++)
        REQUIRE(pthread_join(cons[i], NULL) == 0, "pthread_join");

    uint64_t sum = 0, want = 0;
    long count = 0, lost = 0, dup = 0;
    for (int i = 0; i < NCONS; i++) {
        sum += cons_sum[i];
        count += cons_count[i];
    }
    for (uint32_t i = 0; i < NITEMS; i++) {
        want += value_of(i);
        lost += taken[i] == 0;
        dup += taken[i] > 1;
    }
    CHECK(count == NITEMS, "consumers took %ld items, want %d", count, NITEMS);
    CHECK(lost == 0, "%ld items never taken", lost);
    CHECK(dup == 0, "%ld items taken more than once", dup);
    CHECK(sum == want, "checksum %llu, want %llu", (unsigned long long)sum,
          (unsigned long long)want);
    CHECK(q.count == 0, "queue still holds %d items", q.count);
    printf("bounded queue: %d producers, %d consumers, %ld items, each taken once: %s, "
           "checksum=%llu\n", NPROD, NCONS, count, lost == 0 && dup == 0 ? "yes" : "no",
           (unsigned long long)sum);
    free(taken);
}

/* ---- part 2: wake-ups that must not be lost ---- */

enum { NWAITERS = 64, ROUNDS = 100 };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* the waiters wait here */
    pthread_cond_t main_cv; /* main waits here for "all waiting" / "all woke" */
    int generation;         /* broadcast rounds: bumped by main */
    int tokens;             /* signal round: handed out by main, one per signal */
    int waiting;            /* waiters inside their wait loop */
    int woke;               /* waiters that finished the current round */
    int mode;               /* 0: broadcast rounds, 1: the signal round, 2: leave */
} w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
        .main_cv = PTHREAD_COND_INITIALIZER };

static void *waiter(void *arg)
{
    pthread_mutex_lock(&w.mu);
    for (int r = 0; r < ROUNDS; r++) {
        int gen = w.generation;
        if (++w.waiting == NWAITERS)
            pthread_cond_signal(&w.main_cv);
        while (w.generation == gen)
            pthread_cond_wait(&w.cv, &w.mu);
        w.waiting--;
        if (++w.woke == NWAITERS)
            pthread_cond_signal(&w.main_cv);
    }
    /* the signal round: one token per signal */
    if (++w.waiting == NWAITERS)
        pthread_cond_signal(&w.main_cv);
    while (w.tokens == 0 && w.mode != 2)
        pthread_cond_wait(&w.cv, &w.mu);
    if (w.tokens > 0)
        w.tokens--;
    w.waiting--;
    if (++w.woke == NWAITERS)
        pthread_cond_signal(&w.main_cv);
    pthread_mutex_unlock(&w.mu);
    return arg;
}

/* wait (mu held) until *v == want, at most 10 s; true if reached */
static int wait_count(int *v, int want)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    while (*v != want) {
        int rc = pthread_cond_timedwait(&w.main_cv, &w.mu, &dl);
        if (rc == ETIMEDOUT)
            return *v == want;
    }
    return 1;
}

static void not_lost(void)
{
    pthread_t t[NWAITERS];
    for (int i = 0; i < NWAITERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, waiter, NULL) == 0, "pthread_create");

    int rounds_ok = 0, stuck_rounds = 0;
    pthread_mutex_lock(&w.mu);
    for (int r = 0; r < ROUNDS; r++) {
        /* all NWAITERS counted themselves under mu and then waited, releasing mu
         * inside pthread_cond_wait: holding mu now, all are inside the wait */
        if (!wait_count(&w.waiting, NWAITERS)) {
            fprintf(stderr, "cond_stress: round %d: only %d of %d threads came to wait\n", r,
                    w.waiting, NWAITERS);
            REQUIRE(0, "waiters did not arrive");
        }
        w.woke = 0;
        w.generation++;
        pthread_cond_broadcast(&w.cv); /* one broadcast must wake all 64 */
        if (wait_count(&w.woke, NWAITERS)) {
            rounds_ok++;
        } else {
            stuck_rounds++;
            fprintf(stderr, "cond_stress: round %d: a broadcast woke only %d of %d waiters\n",
                    r, w.woke, NWAITERS);
            /* wake the stragglers again, so the test can go on and report */
            pthread_cond_broadcast(&w.cv);
            REQUIRE(wait_count(&w.woke, NWAITERS), "waiters stuck after a second broadcast");
        }
    }
    CHECK(stuck_rounds == 0, "%d broadcast rounds lost wake-ups", stuck_rounds);
    printf("broadcast: %d rounds of %d waiters, every waiter woke: %s\n", ROUNDS, NWAITERS,
           rounds_ok == ROUNDS ? "yes" : "no");

    /* the signal round */
    REQUIRE(wait_count(&w.waiting, NWAITERS), "waiters did not arrive for the signal round");
    w.woke = 0;
    for (int i = 0; i < NWAITERS; i++) {
        w.tokens++;
        pthread_cond_signal(&w.cv); /* each signal wakes at least one waiter */
        /* let the woken one run sometimes before the next signal */
        if (i % 4 == 3) {
            pthread_mutex_unlock(&w.mu);
            sched_yield();
            pthread_mutex_lock(&w.mu);
        }
    }
    int all = wait_count(&w.woke, NWAITERS);
    if (!all) {
        fprintf(stderr, "cond_stress: %d signals woke only %d of %d waiters (%d tokens left)\n",
                NWAITERS, w.woke, NWAITERS, w.tokens);
        w.mode = 2;
        pthread_cond_broadcast(&w.cv);
        REQUIRE(wait_count(&w.woke, NWAITERS), "waiters stuck after the final broadcast");
    }
    CHECK(all, "signals were lost");
    CHECK(w.tokens == 0, "%d tokens left over", w.tokens);
    printf("signal: %d signals to %d waiters, every waiter woke: %s\n", NWAITERS, NWAITERS,
           all && w.tokens == 0 ? "yes" : "no");
    pthread_mutex_unlock(&w.mu);
    for (int i = 0; i < NWAITERS; i++)
        REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");
}

int main(void)
{
    bounded_queue();
    not_lost();
    return probe_exit("cond_stress");
}
