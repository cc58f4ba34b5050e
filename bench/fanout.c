/* fanout.c — CPU-bound work split over threads: what preemption costs when
 * nobody waits for anything.
 *
 *   fanout_procs  n work units split over MAXPROCS threads (one per P / CPU)
 *   fanout_1000   the same n units split over 1,000 threads
 *
 * A unit is 1,000 rounds of an integer mix (splitmix64's finaliser), no memory
 * traffic and no calls; thread i of N gets a contiguous share of the units
 * (sizes differing by at most one). The time is the wall time from the first
 * pthread_create to the last join. Natively the kernel time-slices the threads;
 * under bobbin they are green threads that sysmon preempts every time slice
 * (10 ms, or 1 ms while others wait for a P), so with 1,000 threads most run
 * to the end of their share within a few slices. The target (issue "Preemption"): bobbin within 3% of native.
 *
 * MAXPROCS is BOBBIN_MAXPROCS (scripts/bench sets it, and GOMAXPROCS, for every
 * column), else the number of CPUs this process may run on.
 * Checksum: the wrapping sum of every unit's result, the same however the units
 * are split, so both modes must agree; it does not depend on N.
 * Usage: fanout [n]; reports ns per unit, and the wall time on stderr.
 * Go twin: bench/go/fanout.
 */
#include <pthread.h>
#include <sched.h>

#include "bench.h"

#define ROUNDS 1000
#define MANY 1000

struct share {
    uint64_t lo, hi; /* units [lo, hi) */
    uint64_t sum;
};

static uint64_t unit(uint64_t u)
{
    uint64_t x = u * 0x9e3779b97f4a7c15ull;
    for (int r = 0; r < ROUNDS; r++) {
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
    }
    return x;
}

static void *worker(void *arg)
{
    struct share *s = arg;
    uint64_t sum = 0;
    for (uint64_t u = s->lo; u < s->hi; u++)
        sum += unit(u);
    s->sum = sum;
    return NULL;
}

static uint64_t fanout(const char *name, long n, int nthreads)
{
    struct share *shares = calloc((size_t)nthreads, sizeof *shares);
    pthread_t *ts = calloc((size_t)nthreads, sizeof *ts);
    if (!shares || !ts) {
        fprintf(stderr, "fanout: out of memory\n");
        exit(1);
    }
    uint64_t base = (uint64_t)n / (uint64_t)nthreads, extra = (uint64_t)n % (uint64_t)nthreads;
    uint64_t lo = 0;
    for (int i = 0; i < nthreads; i++) {
        shares[i].lo = lo;
        lo += base + ((uint64_t)i < extra);
        shares[i].hi = lo;
    }
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < nthreads; i++)
        bench_check(pthread_create(&ts[i], NULL, worker, &shares[i]), "pthread_create");
    for (int i = 0; i < nthreads; i++)
        bench_check(pthread_join(ts[i], NULL), "pthread_join");
    uint64_t t1 = bench_now_ns();
    uint64_t sum = 0;
    for (int i = 0; i < nthreads; i++)
        sum += shares[i].sum;
    bench_report(name, n, t1 - t0);
    fprintf(stderr, "%s threads=%d wall_ms=%.1f checksum=%016llx\n", name, nthreads,
            (double)(t1 - t0) / 1e6, (unsigned long long)sum);
    free(shares);
    free(ts);
    return sum;
}

static int maxprocs(void)
{
    const char *s = getenv("BOBBIN_MAXPROCS");
    if (s && *s) {
        int n = atoi(s);
        if (n >= 1 && n <= 1024)
            return n;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return 1;
}

int main(int argc, char **argv)
{
    long n = bench_iters(argc, argv, 500000);
    uint64_t a = fanout("fanout_procs", n, maxprocs());
    uint64_t b = fanout("fanout_1000", n, MANY);
    if (a != b) {
        fprintf(stderr, "fanout: checksums differ: %016llx with MAXPROCS threads, %016llx "
                "with %d\n", (unsigned long long)a, (unsigned long long)b, MANY);
        return 1;
    }
    return 0;
}
