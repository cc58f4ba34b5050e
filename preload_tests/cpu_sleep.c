/* cpu_sleep — clock_nanosleep on CPU-time clocks.
 *
 * A sleep on CLOCK_PROCESS_CPUTIME_ID lasts until the process has used
 * that much CPU time; one on another thread's clock (pthread_getcpuclockid)
 * until that thread has. Under bobbin before 2026-11-25 the first went to
 * the kernel holding the processor, and a preemption signal to its OS
 * thread ended it at once with EINTR; the second was EINVAL (the kernel
 * does not know a green thread's clock).
 *
 * A spinner burns CPU until told to stop. Main sleeps 30 ms of the
 * process's CPU time (relative, then absolute) and 30 ms of the spinner's,
 * checking each time that the clock got there. Its own thread's clock is
 * EINVAL, as the kernel answers. A sleep of 10 s of process CPU time cut
 * short by a signal (handler without SA_RESTART) fails with EINTR and
 * gives the CPU time left. A watchdog names the part that hangs.
 */
#define PROBE_NAME "cpu_sleep"
#include "probe.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static volatile sig_atomic_t handled;

static void *spinner(void *arg)
{
    (void)arg;
    while (!stop)
        ;
    return NULL;
}

static void on_usr1(int sig)
{
    (void)sig;
    handled = 1;
}

static void *interrupter(void *arg)
{
    usleep(30 * 1000);
    pthread_kill(*(pthread_t *)arg, SIGUSR1);
    return NULL;
}

static long long ns_of(clockid_t c)
{
    struct timespec t;
    if (clock_gettime(c, &t) != 0)
        return -1;
    return (long long)t.tv_sec * 1000000000 + t.tv_nsec;
}

static const char *err_name(int e)
{
    return e == 0 ? "0" : e == EINVAL ? "EINVAL" : e == EINTR ? "EINTR" : strerror(e);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    pthread_t sp;
    REQUIRE(pthread_create(&sp, NULL, spinner, NULL) == 0, "create");
    struct timespec d = {0, 30 * 1000000};

    current_probe = "the process's CPU clock, relative";
    long long c0 = ns_of(CLOCK_PROCESS_CPUTIME_ID);
    int r = clock_nanosleep(CLOCK_PROCESS_CPUTIME_ID, 0, &d, NULL);
    long long c1 = ns_of(CLOCK_PROCESS_CPUTIME_ID);
    printf("process clock, 30 ms: %s, reached %d\n", err_name(r), c1 - c0 >= 30 * 1000000LL);

    current_probe = "the process's CPU clock, absolute";
    struct timespec abs = probe_in_ms(CLOCK_PROCESS_CPUTIME_ID, 30);
    r = clock_nanosleep(CLOCK_PROCESS_CPUTIME_ID, TIMER_ABSTIME, &abs, NULL);
    struct timespec now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    printf("process clock, absolute: %s, reached %d\n", err_name(r),
           now.tv_sec > abs.tv_sec || (now.tv_sec == abs.tv_sec && now.tv_nsec >= abs.tv_nsec));

    current_probe = "another thread's CPU clock";
    clockid_t sc;
    REQUIRE(pthread_getcpuclockid(sp, &sc) == 0, "pthread_getcpuclockid");
    c0 = ns_of(sc);
    r = clock_nanosleep(sc, 0, &d, NULL);
    c1 = ns_of(sc);
    printf("the spinner's clock, 30 ms: %s, reached %d\n", err_name(r),
           c0 >= 0 && c1 - c0 >= 30 * 1000000LL);

    clockid_t own;
    pthread_getcpuclockid(pthread_self(), &own);
    printf("own thread's clock: %s, CLOCK_THREAD_CPUTIME_ID: %s\n",
           err_name(clock_nanosleep(own, 0, &d, NULL)),
           err_name(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &d, NULL)));

    current_probe = "cut short by a signal";
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1; /* no SA_RESTART */
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t self = pthread_self(), in;
    pthread_create(&in, NULL, interrupter, &self);
    struct timespec ten = {10, 0}, rem = {0, 0};
    r = clock_nanosleep(CLOCK_PROCESS_CPUTIME_ID, 0, &ten, &rem);
    pthread_join(in, NULL);
    printf("10 s of process time cut short: %s, handler %d, left between 5 and 10 s %d\n",
           err_name(r), (int)handled, rem.tv_sec >= 5 && rem.tv_sec < 10);

    stop = 1;
    pthread_join(sp, NULL);
    alarm(0);
    return probe_exit("cpu_sleep");
}
