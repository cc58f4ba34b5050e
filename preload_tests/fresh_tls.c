/* fresh_tls — a new thread starts with a fresh thread's state, whatever the
 * threads before it left behind.
 *
 * Under bobbin a thread's TLS block is reused by the next thread once it
 * ends (with its stack, from the cache). Every module's block but libc's
 * goes back to its initial image; libc's keeps its malloc cache, so what a
 * thread can read from it is reset by hand. Before 2026-11-26 a dlopen
 * error not fetched with dlerror() and h_errno leaked into the next
 * thread: its dlerror() reported the other thread's error.
 *
 * ROUNDS times, one at a time and then 50 at once: a thread leaves a
 * dlopen error pending, sets h_errno, errno, a locale (uselocale), a
 * __thread variable and a pthread key's value, and ends; the next threads
 * count what they find of that. Natively every count is 0.
 */
#define PROBE_NAME "fresh_tls"
#include "probe.h"

#include <dlfcn.h>
#include <errno.h>
#include <locale.h>
#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

enum { ROUNDS = 200, WIDE = 50 };

static __thread int mark;
static pthread_key_t key;
static locale_t loc;
static _Atomic int stale_dlerror, stale_herrno, stale_errno, stale_locale, stale_tls, stale_key;

static void *dirty(void *arg)
{
    (void)arg;
    void *h = dlopen("/nonexistent/bobbin-fresh-tls.so", RTLD_NOW);
    if (h)
        dlclose(h);
    h_errno = TRY_AGAIN;
    errno = EIO;
    uselocale(loc);
    mark = 42;
    pthread_setspecific(key, (void *)(intptr_t)7);
    return NULL;
}

static void *check(void *arg)
{
    (void)arg;
    if (errno != 0)
        atomic_fetch_add(&stale_errno, 1);
    if (h_errno != 0)
        atomic_fetch_add(&stale_herrno, 1);
    if (dlerror() != NULL)
        atomic_fetch_add(&stale_dlerror, 1);
    if (uselocale((locale_t)0) != LC_GLOBAL_LOCALE)
        atomic_fetch_add(&stale_locale, 1);
    if (mark != 0)
        atomic_fetch_add(&stale_tls, 1);
    if (pthread_getspecific(key) != NULL)
        atomic_fetch_add(&stale_key, 1);
    return NULL;
}

static void run(void *(*fn)(void *), int n)
{
    pthread_t t[WIDE];
    for (int i = 0; i < n; i++)
        REQUIRE(pthread_create(&t[i], NULL, fn, NULL) == 0, "pthread_create");
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    REQUIRE(pthread_key_create(&key, NULL) == 0, "pthread_key_create");
    loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    REQUIRE(loc != (locale_t)0, "newlocale");
    current_probe = "one at a time";
    for (int r = 0; r < ROUNDS; r++) {
        run(dirty, 1);
        run(check, 1);
    }
    current_probe = "fifty at once";
    for (int r = 0; r < ROUNDS / 10; r++) {
        run(dirty, WIDE);
        run(check, WIDE);
    }
    alarm(0);
    printf("stale in new threads: dlerror %d, h_errno %d, errno %d, locale %d, __thread %d, key %d\n",
           atomic_load(&stale_dlerror), atomic_load(&stale_herrno), atomic_load(&stale_errno),
           atomic_load(&stale_locale), atomic_load(&stale_tls), atomic_load(&stale_key));
    CHECK(atomic_load(&stale_dlerror) + atomic_load(&stale_herrno) + atomic_load(&stale_errno) +
              atomic_load(&stale_locale) + atomic_load(&stale_tls) + atomic_load(&stale_key) == 0,
          "a new thread saw an ended thread's state");
    freelocale(loc);
    printf("fresh_tls: done\n");
    return probe_exit(PROBE_NAME);
}
