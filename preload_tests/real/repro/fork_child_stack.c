/* repro: fork from a thread running on an OS thread other than the initial one.
 *
 * Bug found by apache.sh and stress_ng.sh (apache's children and stress-ng's
 * stressors are forked by a main thread that bobbin may have moved to another M).
 * In the child, bobbin's fork handler (runtime/fork.c) keeps the forking M and its
 * g0 stack, which is that M's pthread stack. But glibc's fork has already put every
 * thread stack except the calling thread's - and the calling thread, for glibc, is
 * the G's TCB - into its stack cache. The child's next real pthread_create (sysmon,
 * or an M for a blocking call) is handed that very stack: two OS threads then run
 * on one stack and the child crashes (SIGSEGV at a heap address, or "notewakeup:
 * double wakeup").
 *
 * Fixed by 8d3dac4 (the fork child takes its own M's stack back out of glibc's
 * stack cache); kept as a regression test.
 *
 * Each of 20 rounds: a thread waits until it runs on an OS thread other than the
 * initial one (the initial thread is kept busy), forks; the child starts 16 threads
 * that compute and sleep, joins them, exits 0. Natively every child exits 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;

static void *work(void *arg)
{
    volatile unsigned long x = (unsigned long)arg;
    for (int i = 0; i < 200; i++) {
        for (int k = 0; k < 10000; k++)
            x = x * 6364136223846793005UL + 1;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return (void *)(x | 1);
}

static int child_main(void)
{
    pthread_t t[16];
    for (int i = 0; i < 16; i++)
        if (pthread_create(&t[i], NULL, work, (void *)(long)i) != 0)
            return 3;
    for (int i = 0; i < 16; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (r == NULL)
            return 4;
    }
    return 0;
}

static void *forker(void *arg)
{
    (void)arg;
    while (syscall(SYS_gettid) == getpid()) /* not on the initial OS thread yet */
        sched_yield();
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_main());
    int st = 0;
    waitpid(pid, &st, 0);
    atomic_store(&stop, 1);
    return (void *)(long)st;
}

int main(void)
{
    int bad = 0;
    for (int round = 0; round < 20; round++) {
        atomic_store(&stop, 0);
        pthread_t f;
        pthread_create(&f, NULL, forker, NULL);
        while (!atomic_load(&stop)) /* keeps the initial OS thread busy */
            ;
        void *r;
        pthread_join(f, &r);
        int st = (int)(long)r;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "round %d: child %s %d\n", round,
                    WIFSIGNALED(st) ? "killed by signal" : "exited with",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            bad++;
        }
    }
    printf("%d of 20 children failed\n", bad);
    return bad != 0;
}
