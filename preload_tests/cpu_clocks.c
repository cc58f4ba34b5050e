/* cpu_clocks — per-thread CPU clocks count each thread's own CPU time.
 *
 * Under bobbin many threads share an OS thread, whose CPU time the kernel
 * keeps. A program that reads CLOCK_THREAD_CPUTIME_ID, the clock
 * pthread_getcpuclockid gives for a thread, or getrusage(RUSAGE_THREAD)
 * must still see its own thread's CPU time, not its OS thread's.
 *
 * NSPIN spinners each burn SPIN_MS of their own CPU time (measured on
 * their own clock), NIDLE idlers only wait; all then meet main at a
 * barrier and stay alive while main reads every thread's clock by its id:
 *  - each spinner's clock shows at least SPIN_MS;
 *  - each idler's is under IDLE_MAX_MS (natively a fraction of a
 *    millisecond; an OS thread's clock under bobbin holds the spinners'
 *    time that ran on it);
 *  - all of them together are no more than the process's CPU clock, read
 *    after them.
 * Then each idler reads its own clock and its RUSAGE_THREAD (under
 * IDLE_MAX_MS), each spinner its RUSAGE_THREAD (at least SPIN_MS / 2: the
 * kernel splits user and system time by ticks), main spins SPIN_MS on its
 * own clock and reads it again through pthread_getcpuclockid(self) (at
 * least SPIN_MS). The clock of a thread joined (and given 50 ms to be
 * gone) fails with EINVAL, and a thread clock's resolution is the
 * kernel's for CPU clocks. A watchdog (alarm) turns a hang into exit 1.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "cpu_clocks"
#include "probe.h"

enum { NSPIN = 3, NIDLE = 2, NTHR = NSPIN + NIDLE };
enum { SPIN_MS = 40, IDLE_MAX_MS = 20 };

static pthread_barrier_t met, done;
static double ms_of(clockid_t c)
{
    struct timespec t;
    if (clock_gettime(c, &t) != 0)
        return -1;
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double rusage_ms(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return -1;
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* a failed check says which and the value it saw */
#define check(ok, what, value) CHECK(ok, "%s (%.3f ms)", what, (double)(value))

static void spin_own(double ms)
{
    double t0 = ms_of(CLOCK_THREAD_CPUTIME_ID);
    volatile unsigned long x = 0;
    while (ms_of(CLOCK_THREAD_CPUTIME_ID) - t0 < ms)
        for (int i = 0; i < 20000; i++)
            x += (unsigned long)i;
}

static void *spinner(void *arg)
{
    (void)arg;
    spin_own(SPIN_MS);
    pthread_barrier_wait(&met);  /* main reads the clocks */
    pthread_barrier_wait(&done);
    double r = rusage_ms();
    check(r >= SPIN_MS / 2, "a spinner's RUSAGE_THREAD is below SPIN_MS / 2", r);
    return NULL;
}

static void *idler(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&met);
    pthread_barrier_wait(&done);
    double own = ms_of(CLOCK_THREAD_CPUTIME_ID), r = rusage_ms();
    check(own >= 0 && own < IDLE_MAX_MS, "an idler's own CPU clock is not under IDLE_MAX_MS", own);
    check(r >= 0 && r < IDLE_MAX_MS, "an idler's RUSAGE_THREAD is not under IDLE_MAX_MS", r);
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm); /* probe.h's watchdog */
    alarm(60);
    pthread_barrier_init(&met, NULL, NTHR + 1);
    pthread_barrier_init(&done, NULL, NTHR + 1);
    pthread_t t[NTHR];
    clockid_t c[NTHR];
    for (int i = 0; i < NTHR; i++) {
        if (pthread_create(&t[i], NULL, i < NSPIN ? spinner : idler, NULL) != 0) {
            printf("pthread_create failed\n");
            return 1;
        }
        int err = pthread_getcpuclockid(t[i], &c[i]);
        if (err != 0) {
            printf("pthread_getcpuclockid: %s\n", strerror(err));
            return 1;
        }
    }
    pthread_barrier_wait(&met);
    double sum = 0;
    for (int i = 0; i < NTHR; i++) {
        double v = ms_of(c[i]);
        if (v < 0)
            printf("clock_gettime of thread %d: %s\n", i, strerror(errno));
        if (i < NSPIN)
            check(v >= SPIN_MS, "a spinner's clock is below SPIN_MS", v);
        else
            check(v >= 0 && v < IDLE_MAX_MS, "an idler's clock is not under IDLE_MAX_MS", v);
        sum += v;
    }
    double proc = ms_of(CLOCK_PROCESS_CPUTIME_ID);
    check(sum <= proc + 0.5, "the threads' clocks add up to more than the process's", sum - proc);
    struct timespec res;
    int r = clock_getres(c[NSPIN], &res);
    printf("clock_getres of a thread's clock: %d, %ld ns\n", r, r == 0 ? res.tv_nsec : -1L);
    pthread_barrier_wait(&done);
    for (int i = 0; i < NTHR; i++)
        pthread_join(t[i], NULL);

    spin_own(SPIN_MS);
    clockid_t self;
    pthread_getcpuclockid(pthread_self(), &self);
    double mine = ms_of(self);
    check(mine >= SPIN_MS, "main's clock through pthread_getcpuclockid is below SPIN_MS", mine);

    r = clock_getres(CLOCK_THREAD_CPUTIME_ID, &res);
    printf("clock_getres(CLOCK_THREAD_CPUTIME_ID): %d, %ld ns\n", r, r == 0 ? res.tv_nsec : -1L);

    struct timespec gap = {0, 50 * 1000 * 1000}, ts;
    nanosleep(&gap, NULL);
    r = clock_gettime(c[0], &ts);
    printf("clock of a joined thread: %d %s\n", r, r ? strerror(errno) : "(read)");

    printf("cpu_clocks: done\n");
    return probe_exit("cpu_clocks");
}
