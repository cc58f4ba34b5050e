/* heartbeat.h — what the preemption tests share: a heartbeat that sleeps
 * 10 ms at a time and records the largest gap between two beats, and a
 * spinner that makes no call at all.
 *
 * The bound on a gap is the ("Preemption"): under 50 ms. Natively the
 * kernel wakes a sleeper within about a millisecond of its 10 ms; under bobbin
 * with one P the heartbeat runs only when the spinner is preempted, which
 * sysmon asks for after a time slice (BOBBIN_TIMESLICE, 10 ms). The gap itself
 * goes to stderr only: stdout must not depend on timing.
 *
 * The spinner's loop reads a volatile stop flag and stores its progress with a
 * plain store every 2^16 steps: no call, no lock, no atomic read-modify-write,
 * so only the preemption signal can take its P away. It keeps a snapshot of
 * its state after exactly SPIN_SNAPSHOT steps, a checksum that does not depend
 * on how long it ran.
 */
#ifndef BOBBIN_HEARTBEAT_H
#define BOBBIN_HEARTBEAT_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

#define HB_PERIOD_NS 10000000LL /* one beat every 10 ms */
#define HB_BOUND_NS 50000000LL  /* the largest gap allowed (the bound) */
#define SPIN_SNAPSHOT (1u << 20)

static inline int64_t hb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void hb_sleep_ns(int64_t ns)
{
    struct timespec ts = {ns / 1000000000, ns % 1000000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

struct heartbeat {
    int64_t max_gap_ns; /* largest time between two consecutive beats */
    long worst_beat;    /* the beat that ended the largest gap */
    long late;          /* gaps of HB_BOUND_NS or more */
    long beats;
};

/* Beat nbeats times (sleeping HB_PERIOD_NS before each); then, if
 * keep_going is not NULL, on until *keep_going() is false. */
static inline void hb_run(struct heartbeat *hb, long nbeats, int (*keep_going)(void))
{
    int64_t prev = hb_now_ns();
    hb->max_gap_ns = 0;
    hb->worst_beat = 0;
    hb->late = 0;
    hb->beats = 0;
    while (hb->beats < nbeats || (keep_going && keep_going())) {
        hb_sleep_ns(HB_PERIOD_NS);
        int64_t now = hb_now_ns();
        int64_t gap = now - prev;
        prev = now;
        hb->beats++;
        if (gap > hb->max_gap_ns) {
            hb->max_gap_ns = gap;
            hb->worst_beat = hb->beats;
        }
        if (gap >= HB_BOUND_NS)
            hb->late++;
    }
}

/* One step of xorshift64: integer-only, so the spinner never touches the FP
 * state and its checksum is the same on every machine. */
static inline uint64_t spin_step(uint64_t x)
{
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

static inline uint64_t spin_seed(int i)
{
    return 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
}

/* What a spinner's snapshot must be: the same steps, on the main thread. */
static inline uint64_t spin_expected(int i)
{
    uint64_t x = spin_seed(i);
    for (uint32_t n = 0; n < SPIN_SNAPSHOT; n++)
        x = spin_step(x);
    return x;
}

struct spinner {
    int index;
    volatile const int *stop;  /* the loop ends when this is non-zero ... */
    volatile uint64_t progress; /* steps so far, stored every 2^16 steps */
    volatile int started;
    uint64_t snapshot;          /* the state after SPIN_SNAPSHOT steps */
    uint64_t steps;
};

/* The thread body: spins without a single call until *stop, and at least
 * SPIN_SNAPSHOT steps. */
static inline void *spinner_main(void *arg)
{
    struct spinner *s = arg;
    uint64_t x = spin_seed(s->index);
    uint64_t n = 0;
    s->started = 1;
    while (!*s->stop || n < SPIN_SNAPSHOT) {
        x = spin_step(x);
        n++;
        if (n == SPIN_SNAPSHOT)
            s->snapshot = x;
        if ((n & 0xffff) == 0)
            s->progress = n;
    }
    s->steps = n;
    return NULL;
}

#endif
