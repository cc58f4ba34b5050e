/* gdb_gthreads — three named threads parked for good, for the gdb extension.
 *
 * usage: gdb_gthreads PIDFILE [SECONDS]
 *
 * Starts three threads, names them with pthread_setname_np and parks each in a
 * different wait:
 *   "gt-cond"   in pthread_cond_wait (its predicate never becomes true),
 *   "gt-sleep"  in sleep(),
 *   "gt-mutex"  in pthread_mutex_lock on a mutex main holds.
 * Once all three have reached their wait (the condvar waiter is certainly in it:
 * main can lock the condvar's mutex; the other two are given 200 ms more to get
 * there) it writes its pid to PIDFILE (write to a temporary name, then rename, so
 * a reader never sees half a pid), then looks for PIDFILE.go every 20 ms.
 * preload_tests/gdb_gthreads.sh attaches gdb, checks what `info gthreads` and
 * `gthread N bt` say, then creates PIDFILE.go: main releases the condvar and
 * mutex waiters, joins them and exits 0 (the sleeper dies with the process), which
 * shows that gdb left every OS thread's registers as it found them. SECONDS
 * (default 120) is a watchdog: the program exits 1 by itself if nobody says go.
 *
 * Built with -g -fno-omit-frame-pointer so gdb names the park_in_* functions in
 * the parked threads' backtraces. Not a harness test: it waits to be told to end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int ready;

static pthread_mutex_t cond_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static volatile int never_true;

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;

static void arrived(void)
{
    pthread_mutex_lock(&ready_lock);
    ready++;
    pthread_cond_broadcast(&ready_cond);
    pthread_mutex_unlock(&ready_lock);
}

__attribute__((noinline)) static void park_in_cond(void)
{
    pthread_mutex_lock(&cond_lock);
    arrived();
    while (!never_true)
        pthread_cond_wait(&never, &cond_lock);
    pthread_mutex_unlock(&cond_lock);
}

__attribute__((noinline)) static void park_in_sleep(void)
{
    arrived();
    for (;;)
        sleep(3600);
}

__attribute__((noinline)) static void park_in_mutex(void)
{
    arrived();
    pthread_mutex_lock(&held);
    pthread_mutex_unlock(&held);
}

static void *cond_main(void *arg)
{
    pthread_setname_np(pthread_self(), "gt-cond");
    park_in_cond();
    return arg;
}

static void *sleep_main(void *arg)
{
    pthread_setname_np(pthread_self(), "gt-sleep");
    park_in_sleep();
    return arg;
}

static void *mutex_main(void *arg)
{
    pthread_setname_np(pthread_self(), "gt-mutex");
    park_in_mutex();
    return arg;
}

static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "gdb_gthreads: watchdog: nobody killed me, exiting\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(1);
    _exit(1);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gdb_gthreads PIDFILE [SECONDS]\n");
        return 2;
    }
    unsigned secs = argc > 2 ? (unsigned)atoi(argv[2]) : 120;
    signal(SIGALRM, watchdog);
    alarm(secs);
#ifdef PR_SET_PTRACER
    /* Yama ptrace_scope=1: let any process of ours (gdb) attach */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif

    pthread_mutex_lock(&held);
    pthread_t t[3];
    void *(*mains[3])(void *) = {cond_main, sleep_main, mutex_main};
    for (int i = 0; i < 3; i++)
        if (pthread_create(&t[i], NULL, mains[i], NULL) != 0) {
            fprintf(stderr, "gdb_gthreads: pthread_create failed\n");
            return 1;
        }
    pthread_mutex_lock(&ready_lock);
    while (ready < 3)
        pthread_cond_wait(&ready_cond, &ready_lock);
    pthread_mutex_unlock(&ready_lock);
    pthread_mutex_lock(&cond_lock); /* the condvar waiter is in its wait */
    pthread_mutex_unlock(&cond_lock);
    struct timespec settle = {0, 200 * 1000 * 1000};
    nanosleep(&settle, NULL);

    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
        rename(tmp, argv[1]) != 0) {
        perror("gdb_gthreads: pid file");
        return 1;
    }
    snprintf(tmp, sizeof tmp, "%s.go", argv[1]);
    struct timespec poll = {0, 20 * 1000 * 1000};
    while (access(tmp, F_OK) != 0)
        nanosleep(&poll, NULL);

    pthread_mutex_lock(&cond_lock);
    never_true = 1;
    pthread_cond_broadcast(&never);
    pthread_mutex_unlock(&cond_lock);
    pthread_mutex_unlock(&held);
    pthread_join(t[0], NULL);
    pthread_join(t[2], NULL);
    printf("gdb_gthreads: released\n");
    return 0;
}
