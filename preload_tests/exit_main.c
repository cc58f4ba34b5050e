/* exit_main — main calls pthread_exit; the process lives on until the last thread.
 *
 * main starts NWORKERS workers and one reporter, registers an atexit handler,
 * raises a flag and calls pthread_exit((void *)42). The workers only start their
 * work once main has called pthread_exit (they wait for the flag, then a little
 * longer). The reporter joins main (whose exit value must be 42) and every worker,
 * prints the results in order, and returns; the process must then exit with status
 * 0, running the atexit handler and flushing stdout, as NPTL does when the last
 * thread ends.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { NWORKERS = 50, STEPS = 2000 };

static pthread_t main_thread;
static pthread_t workers[NWORKERS];
static atomic_int main_exiting;

static void *worker(void *arg)
{
    uint64_t x = (uintptr_t)arg + 1;
    while (!atomic_load(&main_exiting))
        sched_yield();
    usleep(20 * 1000);                 /* main has now certainly gone */
    for (int s = 0; s < STEPS; s++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        if (s % 100 == 0)
            sched_yield();
    }
    return (void *)(uintptr_t)(x >> 16);
}

static void *reporter(void *arg)
{
    void *ret = NULL;
    uint64_t sum = 0;
    (void)arg;

    int rc = pthread_join(main_thread, &ret);
    CHECK(rc == 0 && ret == (void *)42, "join main: rc=%d ret=%p", rc, ret);
    printf("main thread joined, exit value %ld\n", (long)(intptr_t)ret);
    for (int i = 0; i < NWORKERS; i++) {
        rc = pthread_join(workers[i], &ret);
        REQUIRE(rc == 0, "join worker %d: %s", i, strerror(rc));
        printf("worker %2d: %llx\n", i, (unsigned long long)(uintptr_t)ret);
        sum += (uintptr_t)ret;
    }
    printf("exit_main: %d workers finished after main exited, sum=%llx\n", NWORKERS,
           (unsigned long long)sum);
    if (atomic_load(&probe_failures) != 0)
        exit(1);                       /* a plain return would make the process exit 0 */
    return NULL;
}

static void at_exit(void)
{
    printf("atexit handler ran\n");    /* flushed by exit() after this */
}

int main(void)
{
    pthread_t rep;

    main_thread = pthread_self();
    REQUIRE(atexit(at_exit) == 0, "atexit");
    for (int i = 0; i < NWORKERS; i++) {
        int rc = pthread_create(&workers[i], NULL, worker, (void *)(uintptr_t)i);
        REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    }
    int rc = pthread_create(&rep, NULL, reporter, NULL);
    REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    rc = pthread_detach(rep);
    REQUIRE(rc == 0, "pthread_detach: %s", strerror(rc));

    printf("main calls pthread_exit\n");
    fflush(stdout);                    /* keep the line order independent of buffering */
    atomic_store(&main_exiting, 1);
    pthread_exit((void *)42);
}
