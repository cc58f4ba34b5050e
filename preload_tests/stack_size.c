/* stack_size — threads get the stacks their attributes ask for.
 *
 * Three threads: pthread_attr_setstacksize 64 KiB and 16 MiB, and
 * pthread_attr_setstack with a stack main mmaps itself. Each recurses through
 * frames of FRAME bytes to a depth that fits its stack with room to spare (so a
 * runtime that hands out a smaller stack crashes here), checks every frame on the
 * way back up, and checks with pthread_getattr_np that the reported stack is the
 * requested size and contains its own locals — and, for the user stack, is exactly
 * the memory main supplied.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "probe.h"

enum { FRAME = 1024 };

struct job {
    const char *name;
    size_t size;          /* requested stack size */
    size_t use;           /* bytes of recursion to do */
    void *user_stack;     /* non-NULL for pthread_attr_setstack */
    uint64_t sum;         /* result */
    int ok;
};

/* Recurse depth frames, each with FRAME bytes filled and checked after the call:
 * nothing here can become a loop or drop its array. */
static __attribute__((noinline)) uint64_t dig(int depth, uint64_t salt)
{
    volatile unsigned char frame[FRAME];
    for (int i = 0; i < FRAME; i += 64)
        frame[i] = (unsigned char)(depth + salt + i);
    uint64_t below = depth > 0 ? dig(depth - 1, salt) : 0;
    uint64_t here = 0;
    for (int i = 0; i < FRAME; i += 64) {
        if (frame[i] != (unsigned char)(depth + salt + i))
            return UINT64_MAX / 2;     /* the frame was overwritten */
        here += frame[i];
    }
    return below + here;
}

static uint64_t expected_sum(int depth, uint64_t salt)
{
    uint64_t s = 0;
    for (int d = 0; d <= depth; d++)
        for (int i = 0; i < FRAME; i += 64)
            s += (unsigned char)(d + salt + i);
    return s;
}

static void *thread_main(void *arg)
{
    struct job *j = arg;
    pthread_attr_t got;
    void *lo = NULL;
    size_t size = 0;
    int local = 0;

    j->ok = 1;
    if (pthread_getattr_np(pthread_self(), &got) != 0) {
        j->ok = 0;
        return NULL;
    }
    pthread_attr_getstack(&got, &lo, &size);
    pthread_attr_destroy(&got);

    CHECK(size == j->size, "%s: getattr_np stack size %zu, want %zu", j->name, size, j->size);
    CHECK((char *)&local >= (char *)lo && (char *)&local < (char *)lo + size,
          "%s: local %p outside reported stack [%p, %p)", j->name, (void *)&local, lo,
          (void *)((char *)lo + size));
    if (j->user_stack)
        CHECK(lo == j->user_stack, "%s: getattr_np stack %p, user gave %p", j->name, lo,
              j->user_stack);
    if (size != j->size || (char *)&local < (char *)lo || (char *)&local >= (char *)lo + size ||
        (j->user_stack && lo != j->user_stack))
        j->ok = 0;

    int depth = (int)(j->use / (FRAME + 128)); /* frame + call overhead, generously */
    j->sum = dig(depth, j->size);
    CHECK(j->sum == expected_sum(depth, j->size), "%s: recursion checksum wrong", j->name);
    if (j->sum != expected_sum(depth, j->size))
        j->ok = 0;
    return NULL;
}

static void run(struct job *j)
{
    pthread_attr_t a;
    pthread_t t;

    pthread_attr_init(&a);
    if (j->user_stack)
        REQUIRE(pthread_attr_setstack(&a, j->user_stack, j->size) == 0, "setstack");
    else
        REQUIRE(pthread_attr_setstacksize(&a, j->size) == 0, "setstacksize %zu", j->size);
    int rc = pthread_create(&t, &a, thread_main, j);
    REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    REQUIRE(pthread_join(t, NULL) == 0, "join");
    pthread_attr_destroy(&a);
    printf("%-16s size=%-9zu recursed=%-9zu checksum=%llu %s\n", j->name, j->size, j->use,
           (unsigned long long)j->sum, j->ok ? "ok" : "BAD");
}

int main(void)
{
    size_t user_size = 1 << 20;
    void *user = mmap(NULL, user_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    REQUIRE(user != MAP_FAILED, "mmap: %s", strerror(errno));

    struct job jobs[] = {
        {"setstacksize-64K", 64 << 10, 32 << 10, NULL, 0, 0},
        {"setstacksize-16M", 16 << 20, 12 << 20, NULL, 0, 0},
        {"setstack-user-1M", user_size, 512 << 10, user, 0, 0},
    };
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++)
        run(&jobs[i]);
    munmap(user, user_size);
    return probe_exit("stack_size");
}
