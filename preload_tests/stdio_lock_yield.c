/* stdio_lock_yield — a thread may block while it holds a stdio lock.
 *
 * flockfile() takes glibc's internal stdio lock (a recursive lock keyed by the
 * thread's TCB, waited on with a kernel futex that bobbin does not see). Programs
 * legitimately hold it across calls that block or yield — here sched_yield and a
 * pthread_mutex hand-off. Natively that is harmless; under a green-thread runtime,
 * a G that parks while holding the lock must not leave other Gs blocking every M
 * in the lock's futex with the holder stuck in a run queue (a deadlock, seen as a
 * timeout). Every thread writes an "A id" and a "B id" line under the lock; main
 * checks each pair stayed together.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

enum { NTHREADS = 50, REPS = 20 };

static FILE *shared;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *thread_main(void *arg)
{
    int id = (int)(uintptr_t)arg;
    for (int r = 0; r < REPS; r++) {
        flockfile(shared);
        fprintf(shared, "A %d\n", id);
        sched_yield();
        pthread_mutex_lock(&mu);
        counter++;
        pthread_mutex_unlock(&mu);
        sched_yield();
        fprintf(shared, "B %d\n", id);
        funlockfile(shared);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[NTHREADS];
    char line[64];
    int pairs = 0, lines = 0, pending = -1;

    shared = tmpfile();
    REQUIRE(shared != NULL, "tmpfile");
    for (int i = 0; i < NTHREADS; i++) {
        int rc = pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)i);
        REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    }
    for (int i = 0; i < NTHREADS; i++)
        REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");

    rewind(shared);
    while (fgets(line, sizeof line, shared)) {
        int id;
        lines++;
        if (sscanf(line, "A %d", &id) == 1 && pending < 0)
            pending = id;
        else if (sscanf(line, "B %d", &id) == 1 && id == pending) {
            pairs++;
            pending = -1;
        } else
            pending = -2;
    }
    fclose(shared);
    CHECK(pairs == NTHREADS * REPS && lines == 2 * NTHREADS * REPS,
          "%d pairs in %d lines", pairs, lines);
    CHECK(counter == NTHREADS * REPS, "counter %ld", counter);
    printf("stdio_lock_yield: %d threads x %d locked pairs, %d intact\n", NTHREADS, REPS, pairs);
    return probe_exit("stdio_lock_yield");
}
