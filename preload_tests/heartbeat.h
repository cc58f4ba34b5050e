/* heartbeat.h — what the preemption tests share: a heartbeat that sleeps
 * 10 ms at a time and records the largest gap between two beats, and a
 * spinner that makes no call at all.
 *
 * The bound on a gap is the ("Preemption"): under 50 ms. Natively the
 * kernel wakes a sleeper within about a millisecond of its 10 ms; under bobbin
 * with one P the heartbeat runs only when the spinner is preempted, which
 * sysmon asks for after a time slice (BOBBIN_TIMESLICE, 10 ms). The gaps go to
 * stderr only: stdout must not depend on timing.
 *
 * What the bound is checked against. The machine these tests run on may be
 * shared and overloaded (a load of 20 on 2 CPUs is common while others build
 * and test): then the kernel alone holds a runnable thread back for 50-100 ms,
 * natively as under bobbin. So when the program keeps `par` CPUs busy with
 * spinners, a gap is charged only with the time the program had its CPUs:
 *     stolen  = gap - (process CPU time during the gap) / par   (if > 0)
 *     charged = gap - stolen
 * and the bound applies to `charged`. A runtime that does not preempt keeps
 * its CPU busy with the spinner, so the whole gap is charged; only time in
 * which the kernel ran something else instead is excused. With par = 0 (no
 * spinners) the program's threads mostly sleep, and what the kernel took away
 * is read from its own account instead: the run delay of each OS thread (time
 * spent runnable but not running, the second field of
 * /proc/self/task/TID/schedstat). The largest growth of one thread's delay
 * during the gap is excused. A runtime that strands the heartbeat behind a
 * blocked call keeps it off every kernel run queue, so that wait stays
 * charged. Both the raw and the charged gap are printed.
 *
 * The spinner's loop reads a volatile stop flag and stores its progress with a
 * plain store every 2^16 steps: no call, no lock, no atomic read-modify-write,
 * so only the preemption signal can take its P away. It keeps a snapshot of
 * its state after exactly SPIN_SNAPSHOT steps, a checksum that does not depend
 * on how long it ran.
 */
#ifndef BOBBIN_HEARTBEAT_H
#define BOBBIN_HEARTBEAT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define HB_PERIOD_NS 10000000LL /* one beat every 10 ms */
#define HB_BOUND_NS 50000000LL  /* the largest gap allowed (the bound) */
#define SPIN_SNAPSHOT (1u << 20)

static inline int64_t hb_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t hb_now_ns(void)
{
    return hb_clock_ns(CLOCK_MONOTONIC);
}

static inline void hb_sleep_ns(int64_t ns)
{
    struct timespec ts = {ns / 1000000000, ns % 1000000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* How many CPUs nspin spinners keep busy: no more than the CPUs this process
 * may use, nor than BOBBIN_MAXPROCS when it is set (under bobbin). */
static inline int hb_par(int nspin)
{
    int n = nspin;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 &&
        CPU_COUNT(&set) < n)
        n = CPU_COUNT(&set);
    const char *mp = getenv("BOBBIN_MAXPROCS");
    if (mp && atoi(mp) >= 1 && atoi(mp) < n)
        n = atoi(mp);
    return n;
}

/* Run delays of the process's OS threads, by tid, from one reading to the
 * next (a heartbeat test has a handful of threads; more are not tracked). */
#define HB_MAX_TASKS 64
struct hb_delays {
    int n;
    long tid[HB_MAX_TASKS];
    int64_t delay[HB_MAX_TASKS];
};

/* Reads every thread's run delay into *d and returns the largest growth of
 * one thread's delay since the previous reading (a thread seen for the first
 * time counts from 0: it was born during the gap). 0 if schedstat is absent. */
static inline int64_t hb_delay_growth(struct hb_delays *d)
{
    struct hb_delays now = {0};
    int64_t most = 0;
    DIR *dir = opendir("/proc/self/task");
    if (!dir)
        return 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL && now.n < HB_MAX_TASKS) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[64], text[128];
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, text, sizeof text - 1);
        close(fd);
        unsigned long long run, wait;
        if (len <= 0)
            continue;
        text[len] = 0;
        if (sscanf(text, "%llu %llu", &run, &wait) != 2)
            continue;
        long tid = atol(e->d_name);
        int64_t before = 0;
        for (int i = 0; i < d->n; i++)
            if (d->tid[i] == tid)
                before = d->delay[i];
        if ((int64_t)wait - before > most)
            most = (int64_t)wait - before;
        now.tid[now.n] = tid;
        now.delay[now.n++] = (int64_t)wait;
    }
    closedir(dir);
    *d = now;
    return most;
}

struct heartbeat {
    int64_t max_gap_ns;     /* largest wall time between two consecutive beats */
    int64_t max_charged_ns; /* largest gap minus the time the kernel took away */
    int64_t stolen_at_max;  /* what was taken away in that gap */
    int64_t stolen_total;
    long worst_beat;        /* the beat that ended the largest charged gap */
    long late;              /* charged gaps of HB_BOUND_NS or more */
    long beats;
};

static inline int hb_ok(const struct heartbeat *hb)
{
    return hb->max_charged_ns < HB_BOUND_NS;
}

/* Beat nbeats times (sleeping HB_PERIOD_NS before each); then, if
 * keep_going is not NULL, on until keep_going() is false. par: CPUs the
 * program keeps busy meanwhile (0: none; see the top of this file). */
static inline void hb_run(struct heartbeat *hb, long nbeats, int (*keep_going)(void), int par)
{
    int64_t prev = hb_now_ns();
    int64_t prevcpu = hb_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    static struct hb_delays delays;
    *hb = (struct heartbeat){0};
    if (par == 0)
        hb_delay_growth(&delays);
    while (hb->beats < nbeats || (keep_going && keep_going())) {
        hb_sleep_ns(HB_PERIOD_NS);
        int64_t now = hb_now_ns();
        int64_t cpu = hb_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        int64_t gap = now - prev, stolen = 0;
        if (par > 0) {
            stolen = gap - (cpu - prevcpu) / par;
            if (stolen < 0)
                stolen = 0;
        } else {
            stolen = hb_delay_growth(&delays);
            if (stolen > gap)
                stolen = gap;
        }
        prev = now;
        prevcpu = cpu;
        hb->beats++;
        hb->stolen_total += stolen;
        if (gap > hb->max_gap_ns)
            hb->max_gap_ns = gap;
        if (gap - stolen > hb->max_charged_ns) {
            hb->max_charged_ns = gap - stolen;
            hb->stolen_at_max = stolen;
            hb->worst_beat = hb->beats;
        }
        if (gap - stolen >= HB_BOUND_NS)
            hb->late++;
    }
}

/* One line on stderr: what was measured */
static inline void hb_report(const char *name, const struct heartbeat *hb)
{
    fprintf(stderr, "%s: %ld beats; largest gap %.1f ms; largest charged gap %.1f ms "
            "(beat %ld, %.1f ms taken by the kernel in it); %ld charged gap(s) >= %lld ms; "
            "%.1f ms taken by the kernel in all\n", name, hb->beats, hb->max_gap_ns / 1e6,
            hb->max_charged_ns / 1e6, hb->worst_beat, hb->stolen_at_max / 1e6, hb->late,
            HB_BOUND_NS / 1000000, hb->stolen_total / 1e6);
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
