/* demo_tokens — the demo `scripts/bobbin compare` runs: many threads, few cores.
 *
 * NTHREADS threads (default 20,000) stand in a ring. Each first sleeps 1 ms (so
 * all of them are alive and blocked at the same moment), then waits for a token on
 * its own mutex + condition variable, folds its index into the token's value and
 * passes it to the next thread; the token goes round ROUNDS times (default 1).
 * Main computes the same fold by itself and checks the result: the printed
 * checksum is deterministic. Usage: demo_tokens [threads [rounds]].
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"

struct slot {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int has_token;        /* protected by mu */
    uint64_t value;       /* protected by mu */
};

static struct slot *ring;
static int nthreads = 20000, rounds = 1;
static uint64_t final_value;

static uint64_t fold(uint64_t v, int i, int r)
{
    return v * 1099511628211u + (uint64_t)i * 31u + (uint64_t)r;
}

static void give(int i, uint64_t v)
{
    struct slot *s = &ring[i];
    pthread_mutex_lock(&s->mu);
    s->value = v;
    s->has_token = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static uint64_t take(int i)
{
    struct slot *s = &ring[i];
    pthread_mutex_lock(&s->mu);
    while (!s->has_token)
        pthread_cond_wait(&s->cv, &s->mu);
    s->has_token = 0;
    uint64_t v = s->value;
    pthread_mutex_unlock(&s->mu);
    return v;
}

static void *member(void *arg)
{
    int i = (int)(intptr_t)arg;
    struct timespec ms = {0, 1000 * 1000};

    nanosleep(&ms, NULL);
    for (int r = 0; r < rounds; r++) {
        uint64_t v = fold(take(i), i, r);
        if (i == nthreads - 1 && r == rounds - 1)
            final_value = v;          /* read by main after joining us */
        else
            give((i + 1) % nthreads, v);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        nthreads = atoi(argv[1]);
    if (argc > 2)
        rounds = atoi(argv[2]);
    REQUIRE(nthreads > 0 && rounds > 0, "usage: demo_tokens [threads [rounds]]");

    ring = calloc((size_t)nthreads, sizeof *ring);
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    REQUIRE(ring && t, "calloc: %s", strerror(errno));
    for (int i = 0; i < nthreads; i++) {
        pthread_mutex_init(&ring[i].mu, NULL);
        pthread_cond_init(&ring[i].cv, NULL);
    }
    for (int i = 0; i < nthreads; i++) {
        int rc = pthread_create(&t[i], NULL, member, (void *)(intptr_t)i);
        REQUIRE(rc == 0, "pthread_create #%d: %s", i, strerror(rc));
    }
    give(0, 1);
    for (int i = 0; i < nthreads; i++)
        REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join #%d", i);

    uint64_t want = 1;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < nthreads; i++)
            want = fold(want, i, r);
    CHECK(final_value == want, "checksum %016llx, want %016llx",
          (unsigned long long)final_value, (unsigned long long)want);
    printf("demo_tokens: threads=%d rounds=%d hand-offs=%d checksum=%016llx\n", nthreads,
           rounds, nthreads * rounds, (unsigned long long)final_value);
    free(t);
    free(ring);
    return probe_exit("demo_tokens");
}
