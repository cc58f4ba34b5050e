/* tls_counters — __thread variables are per thread, wherever the thread runs.
 *
 * 500 threads each bump their own __thread counter a thread-specific number of
 * times, yielding in between (a G may resume on another OS thread, whose fs base
 * must then point at this G's TLS block). Each checks that its TLS started from the
 * initial image (zero-filled .tbss, initialised .tdata), that the address of its
 * counter never changed, and its final count; main's own counter is checked
 * untouched at the end.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

enum { NTHREADS = 500, PAD = 512 };

static __thread long counter;               /* .tbss: starts at 0 in every thread */
static __thread long seeded = 0x5eed;       /* .tdata: starts from the TLS image */
static __thread unsigned char pad[PAD];     /* a larger block, filled per thread */

static long target(int id)
{
    return 100 + (id * 37) % 400;
}

static void *thread_main(void *arg)
{
    int id = (int)(uintptr_t)arg;
    long *where = &counter;
    int bad = 0;

    if (counter != 0 || seeded != 0x5eed)
        bad++;
    for (int k = 0; k < PAD; k++) {
        if (pad[k] != 0)
            bad++;
        pad[k] = (unsigned char)(id + k);
    }
    seeded = id;
    for (long n = 0; n < target(id); n++) {
        counter++;
        if (n % 7 == 0)
            sched_yield();
        if (&counter != where)
            bad++;
    }
    for (int k = 0; k < PAD; k++)
        if (pad[k] != (unsigned char)(id + k))
            bad++;
    if (seeded != id)
        bad++;
    CHECK(bad == 0, "thread %d: TLS not private (%d bad observations)", id, bad);
    CHECK(counter == target(id), "thread %d: counter %ld, want %ld", id, counter, target(id));
    return (void *)(uintptr_t)(bad == 0 ? counter : -1);
}

int main(void)
{
    pthread_t t[NTHREADS];
    long total = 0, want = 0;

    counter = 123456;
    for (int i = 0; i < NTHREADS; i++) {
        int rc = pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)i);
        REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    }
    for (int i = 0; i < NTHREADS; i++) {
        void *ret = NULL;
        int rc = pthread_join(t[i], &ret);
        REQUIRE(rc == 0, "pthread_join: %s", strerror(rc));
        CHECK((long)(intptr_t)ret == target(i), "thread %d returned %ld", i,
              (long)(intptr_t)ret);
        total += (long)(intptr_t)ret;
        want += target(i);
    }
    CHECK(counter == 123456, "main's counter is %ld (want 123456)", counter);
    CHECK(seeded == 0x5eed, "main's seeded is %ld", seeded);
    CHECK(total == want, "total %ld, want %ld", total, want);
    printf("tls_counters: %d threads, total=%ld, main counter=%ld\n", NTHREADS, total, counter);
    return probe_exit("tls_counters");
}
