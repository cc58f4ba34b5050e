/* stack_overflow — a thread that recurses forever must die loudly. EXPECTED TO CRASH.
 *
 * A thread named "overflower" with a 256 KiB stack recurses without end. Natively
 * it runs into the guard page and the process dies of SIGSEGV. Under bobbin the G's
 * stack has a guard page too, and the runtime must kill the process (SIGSEGV or
 * SIGABRT) with a message on stderr saying "stack overflow" and naming the thread
 * and its stack bounds, rather than scribble over a neighbouring G's memory.
 * The harness is told (--expect-crash) that a signal death is the passing outcome;
 * if the program ever gets to exit normally, it exits 1.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

static volatile int never;            /* an exit the compiler cannot rule out */

static __attribute__((noinline)) uint64_t forever(uint64_t depth)
{
    volatile unsigned char frame[512];
    if (never)
        return depth;
    frame[0] = (unsigned char)depth;
    frame[511] = (unsigned char)(depth >> 8);
    return forever(depth + 1) + frame[0] + frame[511];   /* not a tail call */
}

static void *overflower(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "overflower");
    return (void *)(uintptr_t)forever(0);
}

int main(void)
{
    pthread_attr_t a;
    pthread_t t;

    printf("stack_overflow: starting a thread that recurses forever\n");
    fflush(stdout);                   /* the process will not get to flush it */
    pthread_attr_init(&a);
    REQUIRE(pthread_attr_setstacksize(&a, 256 << 10) == 0, "setstacksize");
    int rc = pthread_create(&t, &a, overflower, NULL);
    REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    pthread_join(t, NULL);
    printf("stack_overflow: the thread returned, which cannot happen\n");
    return PROBE_FAIL;
}
