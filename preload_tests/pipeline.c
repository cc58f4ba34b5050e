/* pipeline — 100 stages, each a thread with a mutex + condvar mailbox, pass 10,000
 * items from the first to the last.
 *
 * Main feeds items 0..9,999 (sequence number and a value) into stage 0's mailbox.
 * Stage s takes an item from its mailbox, folds its own number into the value and
 * puts the item into stage s+1's mailbox; the last stage checks that the sequence
 * numbers arrive in order, without gaps, and that each value is what 100 stages of
 * folding give, and sums the values. A mailbox holds at most MAILBOX items: a full
 * one makes the sender wait on the "not full" condvar, an empty one the receiver on
 * the "not empty" one (two condvars per mailbox; signal, never broadcast, as a
 * hand-written pipeline would). A sequence number of -1 ends the stream.
 *
 * Under bobbin that is 100 Gs waking each other 1,000,000 times in a chain, on
 * MAXPROCS Ps: a lost wake-up would hang the pipeline (the harness's timeout).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

enum { NSTAGES = 100, NITEMS = 10000, MAILBOX = 4 };

struct item {
    long seq;
    uint64_t value;
};

struct mailbox {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    struct item buf[MAILBOX];
    int head, count;
};

static struct mailbox boxes[NSTAGES];
static pthread_t stages[NSTAGES];

/* results of the last stage; read by main after join */
static long received, out_of_order;
static uint64_t sum;

static uint64_t fold(uint64_t v, int stage)
{
    v ^= (uint64_t)(stage + 1) * 0x9e3779b97f4a7c15ull;
    v *= 0xbf58476d1ce4e5b9ull;
    return v ^ (v >> 31);
}

static uint64_t expected(long seq)
{
    uint64_t v = (uint64_t)seq * 2654435761u + 12345;
    for (int s = 0; s < NSTAGES; s++)
        v = fold(v, s);
    return v;
}

static void put(struct mailbox *b, struct item it)
{
    pthread_mutex_lock(&b->mu);
    while (b->count == MAILBOX)
        pthread_cond_wait(&b->not_full, &b->mu);
    b->buf[(b->head + b->count) % MAILBOX] = it;
    b->count++;
    pthread_cond_signal(&b->not_empty);
    pthread_mutex_unlock(&b->mu);
}

static struct item get(struct mailbox *b)
{
    pthread_mutex_lock(&b->mu);
    while (b->count == 0)
        pthread_cond_wait(&b->not_empty, &b->mu);
    struct item it = b->buf[b->head];
    b->head = (b->head + 1) % MAILBOX;
    b->count--;
    pthread_cond_signal(&b->not_full);
    pthread_mutex_unlock(&b->mu);
    return it;
}

static void *stage_main(void *arg)
{
    int s = (int)(intptr_t)arg;
    long next = 0;
    for (;;) {
        struct item it = get(&boxes[s]);
        if (it.seq < 0) {
            if (s + 1 < NSTAGES)
                put(&boxes[s + 1], it);
            break;
        }
        it.value = fold(it.value, s);
        if (s + 1 < NSTAGES) {
            put(&boxes[s + 1], it);
            continue;
        }
        /* the last stage */
        if (it.seq != next || it.value != expected(it.seq)) {
            if (out_of_order++ < 5)
                fprintf(stderr, "pipeline: got item %ld (value %s), expected item %ld\n",
                        it.seq, it.value == expected(it.seq) ? "right" : "wrong", next);
        }
        next = it.seq + 1;
        received++;
        sum += it.value;
    }
    return NULL;
}

int main(void)
{
    for (int s = 0; s < NSTAGES; s++) {
        struct mailbox *b = &boxes[s];
        REQUIRE(pthread_mutex_init(&b->mu, NULL) == 0, "mutex_init");
        REQUIRE(pthread_cond_init(&b->not_empty, NULL) == 0, "cond_init");
        REQUIRE(pthread_cond_init(&b->not_full, NULL) == 0, "cond_init");
    }
    for (int s = 0; s < NSTAGES; s++) {
        int rc = pthread_create(&stages[s], NULL, stage_main, (void *)(intptr_t)s);
        REQUIRE(rc == 0, "pthread_create stage %d: %s", s, strerror(rc));
    }
    for (long i = 0; i < NITEMS; i++)
        put(&boxes[0], (struct item){ i, (uint64_t)i * 2654435761u + 12345 });
    put(&boxes[0], (struct item){ -1, 0 });
    for (int s = 0; s < NSTAGES; s++) {
        int rc = pthread_join(stages[s], NULL);
        REQUIRE(rc == 0, "pthread_join stage %d: %s", s, strerror(rc));
    }

    uint64_t want = 0;
    for (long i = 0; i < NITEMS; i++)
        want += expected(i);
    CHECK(received == NITEMS, "the last stage received %ld items, want %d", received, NITEMS);
    CHECK(out_of_order == 0, "%ld items arrived out of order or changed", out_of_order);
    CHECK(sum == want, "checksum %llu, want %llu", (unsigned long long)sum,
          (unsigned long long)want);
    for (int s = 0; s < NSTAGES; s++) {
        CHECK(boxes[s].count == 0, "mailbox %d still holds %d items", s, boxes[s].count);
        CHECK(pthread_cond_destroy(&boxes[s].not_empty) == 0, "cond_destroy");
        CHECK(pthread_cond_destroy(&boxes[s].not_full) == 0, "cond_destroy");
        CHECK(pthread_mutex_destroy(&boxes[s].mu) == 0, "mutex_destroy");
    }
    printf("pipeline: %d stages, %ld items in order, checksum=%llu\n", NSTAGES, received,
           (unsigned long long)sum);
    return probe_exit("pipeline");
}
