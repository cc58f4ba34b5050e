/* cancel_main — the main thread is cancelled like any other (POSIX), and the
 * process then lives on until its last thread ends.
 *
 * main locks an error-checking mutex, pushes a cleanup handler and waits in
 * pthread_cond_wait on a condition variable nobody signals. A helper thread
 * takes the mutex once (it is free only while main waits), waits 50 ms more and
 * cancels main. The cancellation acts in cond_wait: the mutex is re-acquired,
 * then the handler runs on main (its unlock must succeed: an error-checking
 * mutex refuses an unlock by a non-owner) and prints "main cleanup ran"; main
 * then ends as if by pthread_exit(PTHREAD_CANCELED), without running the code
 * after the wait and without ending the process. The helper joins main (glibc
 * allows joining the main thread), checks the value is PTHREAD_CANCELED and the
 * mutex is free, prints, and returns: the last thread ending exits the process
 * with status 0, running the atexit handler and flushing stdout, as NPTL does.
 * A watchdog (alarm, 10 s) turns a hang into exit 1.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

static pthread_t main_thread;
static pthread_mutex_t mu;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int never;                  /* the predicate: never true */
static atomic_int main_waiting;    /* set under mu just before the wait */
static atomic_int main_cleanups;
static int main_unlock_rc = -1;

static void on_alarm(int sig)
{
    static const char msg[] = "cancel_main: watchdog: hung (main never cancelled, "
                              "or the helper never joined it)\n";
    (void)sig;
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void main_cleanup(void *arg)
{
    (void)arg;
    main_unlock_rc = pthread_mutex_unlock(&mu);
    atomic_fetch_add(&main_cleanups, 1);
    printf("main cleanup ran\n");
    fflush(stdout);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void *helper(void *arg)
{
    (void)arg;
    while (!atomic_load(&main_waiting))
        sleep_ms(1);
    /* mu is free only once main is inside pthread_cond_wait */
    pthread_mutex_lock(&mu);
    pthread_mutex_unlock(&mu);
    sleep_ms(50);

    int rc = pthread_cancel(main_thread);
    CHECK(rc == 0, "pthread_cancel(main): %s", strerror(rc));

    void *ret = NULL;
    rc = pthread_join(main_thread, &ret);
    CHECK(rc == 0, "pthread_join(main): %s", strerror(rc));
    CHECK(ret == PTHREAD_CANCELED, "main's exit value %p, want PTHREAD_CANCELED", ret);
    printf("main joined: %s\n", rc == 0 && ret == PTHREAD_CANCELED ? "PTHREAD_CANCELED"
                                                                   : "something else");

    CHECK(atomic_load(&main_cleanups) == 1, "main's cleanup handler ran %d times",
          atomic_load(&main_cleanups));
    CHECK(main_unlock_rc == 0, "the handler's unlock returned %d (the mutex was not "
          "re-acquired before the cleanup handler ran)", main_unlock_rc);
    int tl = pthread_mutex_trylock(&mu);
    CHECK(tl == 0, "the mutex is still held after main's cancellation (trylock %d)", tl);
    if (tl == 0)
        pthread_mutex_unlock(&mu);
    printf("mutex re-acquired for the handler and free afterwards: %s\n",
           main_unlock_rc == 0 && tl == 0 ? "yes" : "no");

    printf("helper done\n");
    fflush(stdout);
    if (atomic_load(&probe_failures) != 0) {
        fprintf(stderr, "cancel_main: %d check(s) failed\n", atomic_load(&probe_failures));
        exit(1);                   /* a plain return would make the process exit 0 */
    }
    alarm(0);
    return NULL;                   /* the last thread: the process exits 0 */
}

static void at_exit(void)
{
    printf("atexit handler ran\n"); /* flushed by exit() after this */
}

int main(void)
{
    pthread_t h;

    signal(SIGALRM, on_alarm);
    alarm(10);

    main_thread = pthread_self();
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    REQUIRE(pthread_mutex_init(&mu, &ma) == 0, "mutex_init");
    REQUIRE(atexit(at_exit) == 0, "atexit");

    int rc = pthread_create(&h, NULL, helper, NULL);
    REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    rc = pthread_detach(h);
    REQUIRE(rc == 0, "pthread_detach: %s", strerror(rc));

    printf("main waits in pthread_cond_wait\n");
    fflush(stdout);
    pthread_mutex_lock(&mu);
    pthread_cleanup_push(main_cleanup, NULL);
    atomic_store(&main_waiting, 1);
    while (!never)
        pthread_cond_wait(&cv, &mu);
    pthread_cleanup_pop(1);

    /* never reached: the cancellation ends main inside the wait */
    fprintf(stderr, "cancel_main: pthread_cond_wait returned in the main thread\n");
    _exit(1);
}
