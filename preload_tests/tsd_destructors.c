/* tsd_destructors — pthread_key_* and pthread_once as NPTL runs them.
 *
 * Keys (NTHREADS threads, all alive at once, synchronised with atomics + yield):
 *  - k_plain: each thread stores a malloc'd record; the destructor runs once per
 *    thread with that thread's own value, and never for threads that stored NULL;
 *  - k_twice: the destructor stores a value again the first two times, so it runs
 *    3 times per thread;
 *  - k_always: the destructor always stores a value again, so NPTL gives up after
 *    PTHREAD_DESTRUCTOR_ITERATIONS rounds (4 on glibc);
 *  - k_deleted: deleted by main while the threads still hold values; its destructor
 *    must then never run.
 * A key created after a delete reads NULL in every thread, even if it reuses the
 * deleted key's slot. pthread_once: every thread calls it on the same control at
 * the same moment; the (slow, yielding) init runs exactly once and nobody returns
 * before it has finished. Each thread also registers a thread_local-style
 * destructor (__cxa_thread_atexit_impl, what C++ thread_local and Rust's
 * thread_local! use): glibc runs those before any key destructor of the
 * thread (Rust's key destructor tears down thread::current(), which such a
 * destructor may call), so it must find none of the thread's key
 * destructors run yet.
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

enum { NTHREADS = 100 };

struct record { int id; int magic; };

static pthread_key_t k_plain, k_twice, k_always, k_deleted, k_new;
static atomic_int plain_runs, plain_wrong, twice_runs, always_runs, deleted_runs;
static atomic_int ready, released;

static void plain_dtor(void *v)
{
    struct record *r = v;
    atomic_fetch_add(&plain_runs, 1);
    if (r->magic != 0x7e57 || pthread_getspecific(k_plain) != NULL)
        atomic_fetch_add(&plain_wrong, 1);
    r->magic = 0;
    free(r);
}

static __thread int key_dtor_ran; /* a key destructor of this thread ran */
static atomic_int tls_runs, tls_late;
extern int __cxa_thread_atexit_impl(void (*fn)(void *), void *arg, void *dso);
extern void *__dso_handle;

static void tls_dtor(void *v)
{
    (void)v;
    atomic_fetch_add(&tls_runs, 1);
    if (key_dtor_ran)
        atomic_fetch_add(&tls_late, 1);
}

static void twice_dtor(void *v)
{
    uintptr_t n = (uintptr_t)v;        /* 1, 2, 3: how many times we got here */
    key_dtor_ran = 1;
    atomic_fetch_add(&twice_runs, 1);
    if (n < 3)
        pthread_setspecific(k_twice, (void *)(n + 1));
}

static void always_dtor(void *v)
{
    atomic_fetch_add(&always_runs, 1);
    pthread_setspecific(k_always, v);
}

static void deleted_dtor(void *v)
{
    (void)v;
    atomic_fetch_add(&deleted_runs, 1);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int once_runs, once_done, once_early, once_go;

static void once_init(void)
{
    atomic_fetch_add(&once_runs, 1);
    for (int k = 0; k < 200; k++)      /* give the other callers time to pile up */
        sched_yield();
    atomic_store(&once_done, 1);
}

static void *thread_main(void *arg)
{
    int id = (int)(uintptr_t)arg;

    if (id % 10 != 0) {                /* every 10th thread leaves k_plain NULL */
        struct record *r = malloc(sizeof *r);
        REQUIRE(r != NULL, "malloc");
        r->id = id;
        r->magic = 0x7e57;
        CHECK(pthread_setspecific(k_plain, r) == 0, "setspecific");
    }
    CHECK(pthread_setspecific(k_twice, (void *)1) == 0, "setspecific");
    CHECK(__cxa_thread_atexit_impl(tls_dtor, NULL, &__dso_handle) == 0, "__cxa_thread_atexit_impl");
    CHECK(pthread_setspecific(k_always, (void *)(uintptr_t)(id + 1)) == 0, "setspecific");
    CHECK(pthread_setspecific(k_deleted, (void *)(uintptr_t)(id + 1)) == 0, "setspecific");

    /* Yield between set and get so a G may read its values on another OS thread. */
    for (int k = 0; k < 5; k++)
        sched_yield();
    if (id % 10 != 0) {
        struct record *r = pthread_getspecific(k_plain);
        CHECK(r != NULL && r->id == id, "thread %d: k_plain holds another value", id);
    } else {
        CHECK(pthread_getspecific(k_plain) == NULL, "thread %d: k_plain not NULL", id);
    }
    CHECK(pthread_getspecific(k_always) == (void *)(uintptr_t)(id + 1),
          "thread %d: k_always holds another value", id);

    atomic_fetch_add(&ready, 1);
    while (!atomic_load(&once_go))
        sched_yield();
    CHECK(pthread_once(&once, once_init) == 0, "pthread_once");
    if (!atomic_load(&once_done))
        atomic_fetch_add(&once_early, 1);

    while (!atomic_load(&released))    /* main deletes k_deleted meanwhile */
        sched_yield();
    CHECK(pthread_getspecific(k_new) == NULL,
          "thread %d: a new key inherited a deleted key's value", id);
    return NULL;
}

int main(void)
{
    pthread_t t[NTHREADS];

    REQUIRE(pthread_key_create(&k_plain, plain_dtor) == 0, "key_create");
    REQUIRE(pthread_key_create(&k_twice, twice_dtor) == 0, "key_create");
    REQUIRE(pthread_key_create(&k_always, always_dtor) == 0, "key_create");
    REQUIRE(pthread_key_create(&k_deleted, deleted_dtor) == 0, "key_create");
    CHECK(pthread_setspecific(k_deleted, (void *)1) == 0, "main setspecific");

    for (int i = 0; i < NTHREADS; i++) {
        int rc = pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)i);
        REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    }
    while (atomic_load(&ready) != NTHREADS)
        sched_yield();
    atomic_store(&once_go, 1);

    CHECK(pthread_key_delete(k_deleted) == 0, "key_delete");
    REQUIRE(pthread_key_create(&k_new, deleted_dtor) == 0, "key_create after delete");
    CHECK(pthread_getspecific(k_new) == NULL, "a new key inherited a deleted key's value");
    atomic_store(&released, 1);

    for (int i = 0; i < NTHREADS; i++) {
        int rc = pthread_join(t[i], NULL);
        REQUIRE(rc == 0, "pthread_join: %s", strerror(rc));
    }

    int want_plain = NTHREADS - NTHREADS / 10;
    CHECK(atomic_load(&plain_runs) == want_plain, "k_plain destructor ran %d times, want %d",
          atomic_load(&plain_runs), want_plain);
    CHECK(atomic_load(&plain_wrong) == 0, "k_plain destructor saw a bad value %d times",
          atomic_load(&plain_wrong));
    CHECK(atomic_load(&twice_runs) == 3 * NTHREADS, "k_twice destructor ran %d times",
          atomic_load(&twice_runs));
    CHECK(atomic_load(&always_runs) == PTHREAD_DESTRUCTOR_ITERATIONS * NTHREADS,
          "k_always destructor ran %d times, want %d", atomic_load(&always_runs),
          PTHREAD_DESTRUCTOR_ITERATIONS * NTHREADS);
    CHECK(atomic_load(&deleted_runs) == 0, "deleted key's destructor ran %d times",
          atomic_load(&deleted_runs));
    CHECK(atomic_load(&once_runs) == 1, "pthread_once init ran %d times",
          atomic_load(&once_runs));
    CHECK(atomic_load(&once_early) == 0, "%d threads returned from pthread_once early",
          atomic_load(&once_early));

    CHECK(atomic_load(&tls_runs) == NTHREADS, "thread_local destructor ran %d times",
          atomic_load(&tls_runs));
    CHECK(atomic_load(&tls_late) == 0, "%d threads ran a key destructor before their thread_local one",
          atomic_load(&tls_late));
    printf("tsd_destructors: %d threads\n", NTHREADS);
    printf("  thread_local destructors: %d, after a key destructor: %d\n", atomic_load(&tls_runs),
           atomic_load(&tls_late));
    printf("  plain destructor runs:   %d\n", atomic_load(&plain_runs));
    printf("  twice destructor runs:   %d\n", atomic_load(&twice_runs));
    printf("  always destructor runs:  %d (PTHREAD_DESTRUCTOR_ITERATIONS=%d)\n",
           atomic_load(&always_runs), PTHREAD_DESTRUCTOR_ITERATIONS);
    printf("  deleted key destructor:  %d\n", atomic_load(&deleted_runs));
    printf("  pthread_once init runs:  %d\n", atomic_load(&once_runs));
    return probe_exit("tsd_destructors");
}
