/* vector_preempt — the vector and mask registers of a thread interrupted by
 * the preemption signal (or a pthread_kill) survive, whatever the
 * interrupted stack pointer's alignment.
 *
 * 3 threads (more than MAXPROCS: sysmon preempts them) and a fourth that
 * sends them SIGPROF every 200 µs (a CPU profiler's way; the handler does
 * nothing): each, with its stack pointer at each of the 8 residues mod 64
 * in turn, loads a known value into the upper half of ymm1 (AVX2) and, on
 * a CPU with AVX-512, into zmm17 and the mask register k1, spins, and reads
 * them back. stdout: the count of values lost, per residue.
 *
 * Under bobbin the preemption handler wrote the interrupted pc right below
 * the red zone while the kernel's signal frame was still there: with the
 * stack at 8 mod 64 it overwrote the end marker of the frame's xsave area,
 * and the kernel's sigreturn then put back only the SSE state (ymm upper
 * halves, zmm16-31 and k0-7 zeroed: 263 of ~2,000 tries at that residue,
 * every run). Node's parser crashed under its CPU profiler so (glibc's AVX
 * string functions).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { NSPIN = 3, ROUNDS = 1600 };

static pthread_t spinners[NSPIN];
static atomic_int done;
static long lost[8][3]; /* [rsp residue / 8][ymm upper, zmm17, k1] */
static pthread_mutex_t lost_lock = PTHREAD_MUTEX_INITIALIZER;
static int avx512;

static void nothing(int sig)
{
    (void)sig;
}

/* rsp at residue*8 mod 64 while the registers hold v; 1 per value lost */
__attribute__((target("avx2"), noinline)) static void ymm_round(int residue, long v, long out[3])
{
    long got;
    __asm__ volatile("mov %%rsp, %%r12\n\t"
                     "mov %%rsp, %%rax\n\tand $-64, %%rax\n\tsub $512, %%rax\n\t"
                     "add %[off], %%rax\n\tmov %%rax, %%rsp\n\t"
                     "vmovq %[v], %%xmm1\n\tvpbroadcastq %%xmm1, %%ymm1\n\t"
                     "mov $200000, %%rcx\n1:\tdec %%rcx\n\tjnz 1b\n\t"
                     "mov %%r12, %%rsp\n\t"
                     "vextracti128 $1, %%ymm1, %%xmm2\n\tvmovq %%xmm2, %[got]\n\t"
                     "vzeroupper"
                     : [got] "=&r"(got)
                     : [v] "r"(v), [off] "r"((long)residue * 8)
                     : "rax", "rcx", "r12", "xmm1", "xmm2", "memory", "cc");
    out[0] += got != v;
}

__attribute__((target("avx512f"), noinline)) static void zmm_round(int residue, long v, long out[3])
{
    long gz, gk;
    __asm__ volatile("mov %%rsp, %%r12\n\t"
                     "mov %%rsp, %%rax\n\tand $-64, %%rax\n\tsub $512, %%rax\n\t"
                     "add %[off], %%rax\n\tmov %%rax, %%rsp\n\t"
                     "vpbroadcastq %[v], %%zmm17\n\t"
                     "mov $0x5a5a, %%eax\n\tkmovw %%eax, %%k1\n\t"
                     "mov $200000, %%rcx\n1:\tdec %%rcx\n\tjnz 1b\n\t"
                     "mov %%r12, %%rsp\n\t"
                     "valignq $7, %%zmm17, %%zmm17, %%zmm3\n\tvmovq %%xmm3, %[gz]\n\t"
                     "kmovw %%k1, %%eax\n\tmovzwl %%ax, %%eax\n\tmov %%rax, %[gk]\n\t"
                     "vzeroupper"
                     : [gz] "=&r"(gz), [gk] "=&r"(gk)
                     : [v] "r"(v), [off] "r"((long)residue * 8)
                     : "rax", "rcx", "r12", "xmm3", "xmm17", "k1", "memory", "cc");
    out[1] += gz != v;
    out[2] += gk != 0x5a5a;
}

static void *spin(void *arg)
{
    long mine[8][3];
    memset(mine, 0, sizeof mine);
    for (long i = 0; i < ROUNDS; i++) {
        long v = 0x1122334455667788L ^ (i * 0x9e3779b97f4a7c15L) ^ (long)arg;
        ymm_round((int)(i & 7), v, mine[i & 7]);
        if (avx512)
            zmm_round((int)(i & 7), v, mine[i & 7]);
    }
    pthread_mutex_lock(&lost_lock);
    for (int r = 0; r < 8; r++)
        for (int k = 0; k < 3; k++)
            lost[r][k] += mine[r][k];
    pthread_mutex_unlock(&lost_lock);
    return NULL;
}

static void *sender(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 200000};
    while (!atomic_load(&done)) {
        for (int i = 0; i < NSPIN; i++)
            pthread_kill(spinners[i], SIGPROF);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int main(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) {
        puts("skip: no AVX2");
        return 0;
    }
    avx512 = __builtin_cpu_supports("avx512f");
    REQUIRE(probe_on_signal(SIGPROF, nothing, SA_RESTART) == 0, "sigaction");
    for (long i = 0; i < NSPIN; i++)
        REQUIRE(pthread_create(&spinners[i], NULL, spin, (void *)i) == 0, "create");
    pthread_t s;
    REQUIRE(pthread_create(&s, NULL, sender, NULL) == 0, "create");
    for (int i = 0; i < NSPIN; i++)
        pthread_join(spinners[i], NULL);
    atomic_store(&done, 1);
    pthread_join(s, NULL);
    for (int r = 0; r < 8; r++) {
        printf("rsp %% 64 = %2d: lost ymm upper %ld, zmm17 %ld, k1 %ld\n", r * 8, lost[r][0],
               lost[r][1], lost[r][2]);
        CHECK(lost[r][0] + lost[r][1] + lost[r][2] == 0, "values lost at residue %d", r * 8);
    }
    return probe_exit("vector_preempt");
}
