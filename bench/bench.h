/* bench.h — helpers shared by the C benchmarks in bench/.
 *
 * Each benchmark is an ordinary pthread program: the same binary runs natively and
 * under LD_PRELOAD=libbobbin.so, so it must use only plain POSIX/glibc calls and
 * never know which one it runs under. It prints one machine-readable line per mode,
 *     <name> n=<iterations> ns_per_op=<float>
 * which scripts/bench parses, and exits 1 when its checksum is wrong (or a call
 * fails), 2 on a usage error. Its Go twin in bench/go/<name>/ prints the same lines.
 */
#ifndef BOBBIN_BENCH_H
#define BOBBIN_BENCH_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The iteration count from argv[1], or dflt when absent. */
static inline long bench_iters(int argc, char **argv, long dflt)
{
    if (argc < 2)
        return dflt;
    char *end;
    errno = 0;
    long n = strtol(argv[1], &end, 10);
    if (argc > 2 || errno || *end || n <= 0) {
        fprintf(stderr, "usage: %s [iterations > 0]\n", argv[0]);
        exit(2);
    }
    return n;
}

static inline void bench_report(const char *name, long n, uint64_t elapsed_ns)
{
    printf("%s n=%ld ns_per_op=%.1f\n", name, n, (double)elapsed_ns / (double)n);
    fflush(stdout);
}

/* A failed pthread call: the benchmark measures nothing meaningful after it. */
static inline void bench_check(int err, const char *what)
{
    if (err) {
        fprintf(stderr, "bench: %s: %s\n", what, strerror(err));
        exit(1);
    }
}

static inline void bench_verify(const char *name, long long got, long long want)
{
    if (got != want) {
        fprintf(stderr, "%s: checksum %lld, want %lld\n", name, got, want);
        exit(1);
    }
}

#endif
