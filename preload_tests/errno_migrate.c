/* errno_migrate — errno belongs to the thread, wherever it runs.
 *
 * glibc declares __errno_location() const, so compilers keep &errno in a register
 * across calls; this test does the same on purpose (int *e = &errno). Each thread
 * sets errno to a value of its own, then sched_yield()s and creates/joins helper
 * threads many times — under bobbin each of those is a point where the G may move
 * to another OS thread — and checks that *e, errno and &errno still agree. Each
 * thread also makes failing system calls and checks the error it sees is its own.
 * Successful sched_yield/pthread_join/pthread_create leave errno alone in glibc,
 * and a replacement must too.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

enum { NTHREADS = 64, ROUNDS = 300 };

static void *helper(void *arg)
{
    errno = 7;                         /* the helper's own errno, never the caller's */
    return (void *)(uintptr_t)(errno == 7 ? (uintptr_t)arg + 1 : 0);
}

static void *thread_main(void *arg)
{
    int id = (int)(uintptr_t)arg;
    int mine = 1000 + id;
    int *e = &errno;
    int bad = 0;

    errno = mine;
    for (int r = 0; r < ROUNDS; r++) {
        sched_yield();
        if (r % 10 == 0) {
            pthread_t h;
            void *ret = NULL;
            if (pthread_create(&h, NULL, helper, (void *)(uintptr_t)r) != 0 ||
                pthread_join(h, &ret) != 0 || (uintptr_t)ret != (uintptr_t)r + 1)
                bad++;
        }
        if (*e != mine || errno != mine || e != &errno)
            bad++;
        if (r % 50 == 25) {
            /* A failing call sets this thread's errno and nobody else's. */
            int want = (id & 1) ? EBADF : ENOENT;
            int rc = (id & 1) ? close(-1) : open("/nonexistent/bobbin/errno", O_RDONLY);
            if (rc != -1 || errno != want)
                bad++;
            for (int k = 0; k < 5; k++)
                sched_yield();
            if (*e != want || errno != want)
                bad++;
            errno = mine;
        }
    }
    CHECK(bad == 0, "thread %d: errno lost or changed %d times", id, bad);
    return (void *)(uintptr_t)(bad == 0);
}

int main(void)
{
    pthread_t t[NTHREADS];
    int *e = &errno;
    int ok = 0;

    errno = 42;
    for (int i = 0; i < NTHREADS; i++) {
        int rc = pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)i);
        REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    }
    for (int i = 0; i < NTHREADS; i++) {
        void *ret = NULL;
        int rc = pthread_join(t[i], &ret);
        REQUIRE(rc == 0, "pthread_join: %s", strerror(rc));
        ok += (int)(uintptr_t)ret;
    }
    CHECK(e == &errno && errno == 42, "main's errno is %d (want 42)", errno);

    errno = 0;
    CHECK(write(-1, "", 0) == -1 && errno == EBADF, "write(-1): errno %d", errno);
    printf("errno_migrate: %d/%d threads kept their errno; main errno after write(-1): %s\n",
           ok, NTHREADS, strerrorname_np(errno));
    return probe_exit("errno_migrate");
}
