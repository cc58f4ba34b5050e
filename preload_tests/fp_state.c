/* fp_state — floating-point and vector state survives preemption bit for bit.
 *
 * Six threads each set their own rounding mode (fesetround: MXCSR and the x87
 * control word), raise their own set of sticky exception flags, and then run
 * four long call-free loops whose accumulators live in registers the whole
 * time: scalar double (SSE2), x87 long double, SSE2 intrinsics on 16 xmm
 * registers' worth of doubles and integers, and AVX/AVX2 on ymm registers
 * (only when the CPU has AVX2: __builtin_cpu_supports). Every loop divides,
 * so each result depends on the rounding mode in force at every step.
 *
 * With BOBBIN_MAXPROCS=1 the threads take turns on one OS thread, preempted
 * by the signal in the middle of their loops many times: a preemption that
 * lost an upper ymm half, an x87 register, the MXCSR rounding bits or the
 * sticky flags, or that resumed a thread with another's, changes a result.
 *
 * Checks: before starting any thread, main computes every thread's results
 * itself (nothing can preempt it yet), and each thread's must equal them; the
 * rounding mode (fegetround and MXCSR) and the exception flags are the
 * thread's own at the end. stdout has every result in hex, so the harness
 * also compares them with the native run.
 */
#include <fenv.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

#define NTHREADS 6
#define ITERS 6000000L

struct result {
    uint64_t dbl, ld_lo, ld_hi, sse, avx;
    int round_after, mxcsr_round_after, flags;
};

struct job {
    int index;
    int mode;
    int raise; /* exceptions raised before the loops */
    struct result want, got;
};

static int have_avx2;

static const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
static const char *const mode_names[] = {"nearest", "upward", "downward", "towardzero"};
static const int raises[] = {0, FE_DIVBYZERO, FE_OVERFLOW, FE_DIVBYZERO | FE_OVERFLOW,
                             FE_INVALID, FE_UNDERFLOW};

static uint64_t bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* folds vector lanes into one word; the order of lanes matters */
static uint64_t fold(uint64_t h, uint64_t v)
{
    h ^= v;
    return (h << 23 | h >> 41) * 0x100000001b3ull;
}

__attribute__((noinline)) static uint64_t loop_double(double seed, long n)
{
    double a = seed, b = 1.0 / seed, c = 0.0;
    for (long i = 1; i <= n; i++) {
        double x = (double)i;
        a = a / 1.0000001 + 1.0 / x;
        b = b * 0.9999999 + a / (x + 0.5);
        c += b / (a + 3.0);
    }
    return bits(a) ^ (bits(b) << 1) ^ (bits(c) << 2);
}

__attribute__((noinline)) static void loop_x87(long double seed, long n, uint64_t *lo,
                                               uint64_t *hi)
{
    long double a = seed, b = 1.0L / seed;
    for (long i = 1; i <= n; i++) {
        long double x = (long double)i;
        a = a / 1.0000001L + 1.0L / x;
        b = b * 0.9999999L + a / (x + 0.25L);
    }
    long double r = a + b * 3.0L;
    unsigned char buf[16] = {0};
    memcpy(buf, &r, 10);
    memcpy(lo, buf, 8);
    memcpy(hi, buf + 8, 8);
    *hi &= 0xffff;
}

/* 12 vectors of doubles and 4 of integers: every xmm register in use */
__attribute__((noinline)) static uint64_t loop_sse(double seed, long n)
{
    __m128d d0 = _mm_set_pd(seed, seed + 1), d1 = _mm_set_pd(seed + 2, seed + 3);
    __m128d d2 = _mm_set_pd(seed + 4, seed + 5), d3 = _mm_set_pd(seed + 6, seed + 7);
    __m128d d4 = _mm_set_pd(1.5, 2.5), d5 = _mm_set_pd(3.5, 4.5);
    __m128d d6 = _mm_set_pd(5.5, 6.5), d7 = _mm_set_pd(7.5, 8.5);
    __m128i i0 = _mm_set_epi64x((long long)(seed * 7), 1), i1 = _mm_set_epi64x(3, 5);
    __m128i i2 = _mm_set_epi32(7, 11, 13, 17), i3 = _mm_set_epi32(19, 23, 29, 31);
    const __m128d k = _mm_set1_pd(1.0000001), third = _mm_set1_pd(1.0 / 3.0);
    __m128d x = _mm_set_pd(1.0, 2.0);
    const __m128d two = _mm_set1_pd(2.0);
    for (long i = 0; i < n; i++) {
        d0 = _mm_add_pd(_mm_div_pd(d0, k), _mm_div_pd(third, x));
        d1 = _mm_add_pd(_mm_mul_pd(d1, third), d0);
        d2 = _mm_sub_pd(_mm_div_pd(d2, k), _mm_div_pd(d1, x));
        d3 = _mm_add_pd(_mm_mul_pd(d3, third), d2);
        d4 = _mm_add_pd(_mm_div_pd(d4, k), _mm_div_pd(d3, x));
        d5 = _mm_add_pd(_mm_mul_pd(d5, third), d4);
        d6 = _mm_sub_pd(_mm_div_pd(d6, k), _mm_div_pd(d5, x));
        d7 = _mm_add_pd(_mm_mul_pd(d7, third), d6);
        i0 = _mm_add_epi64(_mm_xor_si128(i0, _mm_slli_epi64(i0, 13)), i1);
        i1 = _mm_xor_si128(i1, _mm_srli_epi64(i0, 7));
        i2 = _mm_add_epi32(_mm_mullo_epi16(i2, i3), i1);
        i3 = _mm_xor_si128(_mm_slli_epi32(i3, 5), _mm_srli_epi32(i2, 3));
        x = _mm_add_pd(x, two);
    }
    uint64_t h = 0, u[2];
    __m128d ds[] = {d0, d1, d2, d3, d4, d5, d6, d7};
    for (int j = 0; j < 8; j++) {
        _mm_storeu_pd((double *)u, ds[j]);
        h = fold(fold(h, u[0]), u[1]);
    }
    __m128i is[] = {i0, i1, i2, i3};
    for (int j = 0; j < 4; j++) {
        _mm_storeu_si128((__m128i *)u, is[j]);
        h = fold(fold(h, u[0]), u[1]);
    }
    return h;
}

/* the same shape on 256-bit registers: the upper halves carry half the state */
__attribute__((noinline, target("avx2"))) static uint64_t loop_avx(double seed, long n)
{
    __m256d d0 = _mm256_set_pd(seed, seed + 1, seed + 2, seed + 3);
    __m256d d1 = _mm256_set_pd(seed + 4, seed + 5, seed + 6, seed + 7);
    __m256d d2 = _mm256_set_pd(1.5, 2.5, 3.5, 4.5), d3 = _mm256_set_pd(5.5, 6.5, 7.5, 8.5);
    __m256d d4 = _mm256_set_pd(9.5, 10.5, 11.5, 12.5), d5 = _mm256_set_pd(0.1, 0.2, 0.3, 0.4);
    __m256i i0 = _mm256_set_epi64x((long long)(seed * 7), 1, 2, 3);
    __m256i i1 = _mm256_set_epi64x(5, 7, 11, 13);
    const __m256d k = _mm256_set1_pd(1.0000001), third = _mm256_set1_pd(1.0 / 3.0);
    __m256d x = _mm256_set_pd(1.0, 2.0, 3.0, 4.0);
    const __m256d four = _mm256_set1_pd(4.0);
    for (long i = 0; i < n; i++) {
        d0 = _mm256_add_pd(_mm256_div_pd(d0, k), _mm256_div_pd(third, x));
        d1 = _mm256_add_pd(_mm256_mul_pd(d1, third), d0);
        d2 = _mm256_sub_pd(_mm256_div_pd(d2, k), _mm256_div_pd(d1, x));
        d3 = _mm256_add_pd(_mm256_mul_pd(d3, third), d2);
        d4 = _mm256_add_pd(_mm256_div_pd(d4, k), _mm256_div_pd(d3, x));
        d5 = _mm256_add_pd(_mm256_mul_pd(d5, third), d4);
        i0 = _mm256_add_epi64(_mm256_xor_si256(i0, _mm256_slli_epi64(i0, 13)), i1);
        i1 = _mm256_xor_si256(i1, _mm256_srli_epi64(i0, 7));
        x = _mm256_add_pd(x, four);
    }
    uint64_t h = 0, u[4];
    __m256d ds[] = {d0, d1, d2, d3, d4, d5};
    for (int j = 0; j < 6; j++) {
        _mm256_storeu_pd((double *)u, ds[j]);
        for (int l = 0; l < 4; l++)
            h = fold(h, u[l]);
    }
    __m256i is[] = {i0, i1};
    for (int j = 0; j < 2; j++) {
        _mm256_storeu_si256((__m256i *)u, is[j]);
        for (int l = 0; l < 4; l++)
            h = fold(h, u[l]);
    }
    return h;
}

/* Everything one job computes, in its own FP environment; leaves the caller's
 * environment as it was. */
static void compute(const struct job *j, struct result *r)
{
    fenv_t saved;
    fegetenv(&saved);
    fesetround(modes[j->mode]);
    feclearexcept(FE_ALL_EXCEPT);
    if (j->raise)
        feraiseexcept(j->raise);
    double seed = 1.0 + j->index / 7.0;
    r->dbl = loop_double(seed, ITERS);
    loop_x87(seed, ITERS, &r->ld_lo, &r->ld_hi);
    r->sse = loop_sse(seed, ITERS / 2);
    r->avx = have_avx2 ? loop_avx(seed, ITERS / 2) : 0;
    r->round_after = fegetround();
    r->mxcsr_round_after = (int)(_mm_getcsr() >> 13 & 3);
    r->flags = fetestexcept(FE_ALL_EXCEPT);
    fesetenv(&saved);
}

static void *worker(void *arg)
{
    struct job *j = arg;
    compute(j, &j->got);
    return NULL;
}

static void flag_names(int f, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s%s%s%s", f & FE_INEXACT ? " inexact" : "",
             f & FE_DIVBYZERO ? " divbyzero" : "", f & FE_OVERFLOW ? " overflow" : "",
             f & FE_UNDERFLOW ? " underflow" : "", f & FE_INVALID ? " invalid" : "",
             f ? "" : " none");
}

int main(void)
{
    __builtin_cpu_init();
    have_avx2 = __builtin_cpu_supports("avx2");
    printf("avx2: %s\n", have_avx2 ? "tested" : "not supported by this CPU, skipped");

    static struct job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i].index = i;
        jobs[i].mode = i % 4;
        jobs[i].raise = raises[i];
        compute(&jobs[i], &jobs[i].want); /* no other thread yet: never preempted */
    }
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, worker, &jobs[i]) == 0, "pthread_create");
    for (int i = 0; i < NTHREADS; i++)
        REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");

    for (int i = 0; i < NTHREADS; i++) {
        const struct result *g = &jobs[i].got, *w = &jobs[i].want;
        char fl[80];
        flag_names(g->flags, fl, sizeof fl);
        printf("thread %d %-10s double %016llx x87 %04llx%016llx sse %016llx avx %016llx "
               "flags%s\n", i, mode_names[jobs[i].mode], (unsigned long long)g->dbl,
               (unsigned long long)g->ld_hi, (unsigned long long)g->ld_lo,
               (unsigned long long)g->sse, (unsigned long long)g->avx, fl);
        CHECK(g->dbl == w->dbl, "thread %d: double %016llx, want %016llx", i,
              (unsigned long long)g->dbl, (unsigned long long)w->dbl);
        CHECK(g->ld_lo == w->ld_lo && g->ld_hi == w->ld_hi, "thread %d: x87 result differs", i);
        CHECK(g->sse == w->sse, "thread %d: sse %016llx, want %016llx", i,
              (unsigned long long)g->sse, (unsigned long long)w->sse);
        CHECK(g->avx == w->avx, "thread %d: avx %016llx, want %016llx", i,
              (unsigned long long)g->avx, (unsigned long long)w->avx);
        CHECK(g->round_after == modes[jobs[i].mode], "thread %d: rounding mode %#x at the end, "
              "want %#x", i, g->round_after, modes[jobs[i].mode]);
        /* MXCSR.RC (bits 13-14) encodes the modes as the x87 RC bits do (10-11) */
        CHECK(g->mxcsr_round_after == modes[jobs[i].mode] >> 10, "thread %d: MXCSR rounding %d "
              "at the end, want %d", i, g->mxcsr_round_after, modes[jobs[i].mode] >> 10);
        CHECK(g->flags == w->flags, "thread %d: exception flags %#x, want %#x", i, g->flags,
              w->flags);
        CHECK(g->flags == (FE_INEXACT | jobs[i].raise), "thread %d: exception flags %#x, "
              "want %#x", i, g->flags, FE_INEXACT | jobs[i].raise);
    }
    /* the results really depend on the rounding mode */
    CHECK(jobs[0].want.dbl != jobs[1].want.dbl || jobs[1].want.dbl != jobs[2].want.dbl,
          "the double loop does not depend on the rounding mode");
    return probe_exit("fp_state");
}
