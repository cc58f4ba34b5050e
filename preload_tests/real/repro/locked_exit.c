/* repro: threads locked to their OS thread (here by prctl(PR_SET_TIMERSLACK); the
 * stressor named itself with PR_SET_NAME, which pinned until names stopped pinning) that end
 * while new threads are being created.
 *
 * Bug found by stress_ng.sh (its stressor threads name themselves and change their
 * scheduling priority). goexit0 (runtime/proc.c) readies the joiner, or frees a
 * detached G, before it clears gp->lockedm. The joiner can free the G, and
 * pthread_create can reuse it, while it still names the exiting M as its locked M:
 * the M that picks the new G up hands its P to that M (startlockedm) and sleeps,
 * the exiting M then clears the new G's lockedm and goes idle, and the new G, taken
 * off every run queue, never runs: the program hangs (or bobbin aborts with
 * "notewakeup: double wakeup" / "startm: idle M is spinning or has a P").
 *
 * Two creators, one joining and one detaching, 10,000 named threads each. Natively
 * it ends in well under a second.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/prctl.h>

enum { ROUNDS = 10000 };

static void *named(void *arg)
{
    prctl(PR_SET_TIMERSLACK, 50000UL, 0, 0, 0);
    if (arg)
        sem_post(arg);
    return NULL;
}

static void *creator(void *arg)
{
    long detached = (long)arg;
    sem_t done;
    sem_init(&done, 0, 0);
    for (int i = 0; i < ROUNDS; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, named, detached ? &done : NULL) != 0)
            return (void *)1;
        if (detached) {
            pthread_detach(t);
            sem_wait(&done);
        } else {
            pthread_join(t, NULL);
        }
    }
    return NULL;
}

int main(void)
{
    pthread_t c[2];
    void *r0, *r1;
    pthread_create(&c[0], NULL, creator, (void *)0L);
    pthread_create(&c[1], NULL, creator, (void *)1L);
    pthread_join(c[0], &r0);
    pthread_join(c[1], &r1);
    if (r0 || r1)
        return 1;
    printf("%d joined and %d detached named threads ended\n", ROUNDS, ROUNDS);
    return 0;
}
