/* thread_priority — a thread's nice value and I/O priority are its own.
 *
 * On Linux setpriority(PRIO_PROCESS, 0), nice() and ioprio_set(
 * IOPRIO_WHO_PROCESS, 0) change the calling thread only, and a thread
 * inherits its creator's values (a database lowers the priority of its
 * background threads so). Under bobbin the call changed the OS thread the
 * green thread ran on: the other threads it ran later had the low
 * priority, and the caller lost it after a move.
 *
 *  - main, the only thread, calls nice(NICE_MAIN): it answers NICE_MAIN
 *    and every thread made afterwards reads NICE_MAIN (inherited);
 *  - a background thread sets its own nice value to NICE_BG (by
 *    setpriority with 0, then with its gettid()) and its I/O priority
 *    through syscall(SYS_ioprio_set), then sleeps 1 ms ROUNDS times and
 *    reads both after each sleep: always its own values;
 *  - NFG other threads, running meanwhile, sleep and read theirs: always
 *    NICE_MAIN and main's I/O priority, never the background thread's;
 *  - after the background thread ended, NFG more threads read NICE_MAIN.
 * A thread that saw a wrong value prints which; the counts are not printed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "thread_priority"
#include "probe.h"

enum { NICE_MAIN = 2, NICE_BG = 7, NFG = 6, ROUNDS = 150 };
#define IOPRIO_WHO_PROCESS 1
#define IOPRIO_BG ((2 << 13) | 6) /* best-effort class, level 6 */

static long ioprio_main;
static pthread_barrier_t set;

static long ioprio_now(void)
{
    return syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0);
}

static void nap(void)
{
    struct timespec ms = { 0, 1000000 };
    while (nanosleep(&ms, &ms) != 0 && errno == EINTR)
        ;
}

static void *background(void *arg)
{
    (void)arg;
    CHECK(setpriority(PRIO_PROCESS, 0, NICE_BG - 1) == 0, "setpriority: %s", strerror(errno));
    CHECK(setpriority(PRIO_PROCESS, (id_t)gettid(), NICE_BG) == 0, "setpriority(gettid()): %s",
          strerror(errno));
    CHECK(syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_BG) == 0, "ioprio_set: %s", strerror(errno));
    pthread_barrier_wait(&set);
    int wrong = 0, wrong_io = 0;
    for (int i = 0; i < ROUNDS; i++) {
        nap();
        errno = 0;
        wrong += getpriority(PRIO_PROCESS, 0) != NICE_BG;
        wrong += getpriority(PRIO_PROCESS, (id_t)gettid()) != NICE_BG;
        wrong_io += ioprio_now() != IOPRIO_BG;
    }
    CHECK(wrong == 0, "background thread: its nice value wrong %d times", wrong);
    CHECK(wrong_io == 0, "background thread: its I/O priority wrong %d times", wrong_io);
    return NULL;
}

static void *foreground(void *arg)
{
    int n = (int)(intptr_t)arg, wrong = 0, wrong_io = 0;
    pthread_barrier_wait(&set);
    for (int i = 0; i < n; i++) {
        nap();
        int p = getpriority(PRIO_PROCESS, 0);
        wrong += p != NICE_MAIN;
        wrong_io += ioprio_now() != ioprio_main;
    }
    CHECK(wrong == 0, "a thread has another thread's nice value %d times of %d", wrong, n);
    CHECK(wrong_io == 0, "a thread has another thread's I/O priority %d times of %d", wrong_io, n);
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(50);
    current_probe = "nice";
    errno = 0;
    int base = getpriority(PRIO_PROCESS, 0);
    REQUIRE(base == 0 || errno == 0, "getpriority: %s", strerror(errno));
    if (base != 0) {
        printf("skipped: started with nice %d\n", base);
        return PROBE_SKIP;
    }
    int r = nice(NICE_MAIN);
    printf("nice(%d): %d\n", NICE_MAIN, r);
    CHECK(r == NICE_MAIN, "nice answered %d", r);
    ioprio_main = ioprio_now();
    REQUIRE(ioprio_main >= 0, "ioprio_get: %s", strerror(errno));

    current_probe = "background and foreground";
    pthread_barrier_init(&set, NULL, NFG + 1);
    pthread_t bg, fg[NFG];
    REQUIRE(pthread_create(&bg, NULL, background, NULL) == 0, "pthread_create");
    for (int i = 0; i < NFG; i++)
        REQUIRE(pthread_create(&fg[i], NULL, foreground, (void *)(intptr_t)ROUNDS) == 0, "pthread_create");
    pthread_join(bg, NULL);
    for (int i = 0; i < NFG; i++)
        pthread_join(fg[i], NULL);

    current_probe = "after";
    pthread_barrier_destroy(&set);
    pthread_barrier_init(&set, NULL, NFG);
    for (int i = 0; i < NFG; i++)
        REQUIRE(pthread_create(&fg[i], NULL, foreground, (void *)(intptr_t)10) == 0, "pthread_create");
    for (int i = 0; i < NFG; i++)
        pthread_join(fg[i], NULL);
    CHECK(getpriority(PRIO_PROCESS, 0) == NICE_MAIN, "main's nice value is %d", getpriority(PRIO_PROCESS, 0));
    printf("threads' nice values and I/O priorities checked\n");
    return probe_exit(PROBE_NAME);
}
