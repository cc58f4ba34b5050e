/* libc_mix — everyday libc from many threads at once.
 *
 * Each of 200 threads:
 *  - churns malloc/free (sizes from a per-thread LCG; each block is filled and
 *    verified before it is freed), which exercises malloc's per-thread tcache;
 *  - switches to its own locale with newlocale/uselocale ("C", "POSIX" or
 *    "C.UTF-8", the ones a minimal Debian has) and checks nl_langinfo(CODESET),
 *    MB_CUR_MAX and localeconv() before and after yielding;
 *  - calls strerror on an unknown error number, whose text glibc formats in a
 *    per-thread buffer, and checks the text is still its own after yielding;
 *  - appends two lines to a shared stdio stream under flockfile (stdio's lock is
 *    recursive and keyed by the thread's TCB). Yielding while holding it is
 *    stdio_lock_yield's business, not this test's.
 * The result of each thread goes into its own slot and main prints the slots in
 * order, so stdout does not depend on scheduling.
 */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

enum { NTHREADS = 200, LIVE = 64, ALLOCS = 3000 };

static const char *const locales[] = {"C", "POSIX", "C.UTF-8"};
static char slot[NTHREADS][160];
static FILE *shared;

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* Returns a checksum of everything written, or 0 if a block was corrupted. */
static uint64_t malloc_churn(int id)
{
    unsigned char *live[LIVE] = {0};
    size_t size[LIVE] = {0};
    uint32_t seed = (uint32_t)id * 7919u + 1;
    uint64_t sum = 0;
    int bad = 0;

    for (int n = 0; n < ALLOCS; n++) {
        int k = (int)(lcg(&seed) % LIVE);
        if (live[k]) {
            for (size_t j = 0; j < size[k]; j++)
                if (live[k][j] != (unsigned char)(k + j + id))
                    bad++;
            free(live[k]);
        }
        size[k] = 1 + lcg(&seed) % (n % 100 == 0 ? 200000 : 2000);
        live[k] = malloc(size[k]);
        REQUIRE(live[k] != NULL, "malloc(%zu)", size[k]);
        for (size_t j = 0; j < size[k]; j++)
            live[k][j] = (unsigned char)(k + j + id);
        sum += size[k];
        if (n % 256 == 0)
            sched_yield();
    }
    for (int k = 0; k < LIVE; k++)
        free(live[k]);
    return bad ? 0 : sum;
}

static int locale_ok(const char *name)
{
    int utf8 = strcmp(name, "C.UTF-8") == 0;
    const char *codeset = nl_langinfo(CODESET);
    return strcmp(codeset, utf8 ? "UTF-8" : "ANSI_X3.4-1968") == 0 &&
           MB_CUR_MAX == (utf8 ? 6u : 1u) &&
           strcmp(localeconv()->decimal_point, ".") == 0;
}

static void *thread_main(void *arg)
{
    int id = (int)(uintptr_t)arg;
    const char *lname = locales[id % 3];
    char want[64], copy[64];
    int bad = 0;

    locale_t loc = newlocale(LC_ALL_MASK, lname, (locale_t)0);
    REQUIRE(loc != (locale_t)0, "newlocale(%s): %s", lname, strerror(errno));
    locale_t old = uselocale(loc);
    if (!locale_ok(lname))
        bad++;

    uint64_t sum = malloc_churn(id);
    if (sum == 0)
        bad++;

    snprintf(want, sizeof want, "Unknown error %d", 100000 + id);
    const char *msg = strerror(100000 + id);
    for (int k = 0; k < 10; k++)
        sched_yield();
    if (strcmp(msg, want) != 0)         /* another thread's strerror wrote here */
        bad++;
    snprintf(copy, sizeof copy, "%s", strerror(ENOENT));
    if (strcmp(copy, "No such file or directory") != 0)
        bad++;

    if (!locale_ok(lname))              /* still this thread's locale after migrating */
        bad++;

    flockfile(shared);
    fprintf(shared, "A %d\n", id);
    fprintf(shared, "B %d\n", id);
    funlockfile(shared);

    CHECK(bad == 0, "thread %d (%s): %d bad observations", id, lname, bad);
    snprintf(slot[id], sizeof slot[id], "thread %3d: locale=%-7s codeset=%s malloc_sum=%llu %s",
             id, lname, nl_langinfo(CODESET), (unsigned long long)sum,
             bad ? "BAD" : "ok");
    uselocale(old);
    freelocale(loc);
    return NULL;
}

int main(void)
{
    pthread_t t[NTHREADS];
    char line[64];
    int pairs = 0, lines = 0;

    shared = tmpfile();
    REQUIRE(shared != NULL, "tmpfile: %s", strerror(errno));
    for (int i = 0; i < NTHREADS; i++) {
        int rc = pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)i);
        REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    }
    for (int i = 0; i < NTHREADS; i++) {
        int rc = pthread_join(t[i], NULL);
        REQUIRE(rc == 0, "pthread_join: %s", strerror(rc));
    }

    /* Every thread's A line must be followed directly by its own B line. */
    rewind(shared);
    int pending = -1;
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
    CHECK(pairs == NTHREADS && lines == 2 * NTHREADS,
          "flockfile did not keep lines together: %d pairs in %d lines", pairs, lines);
    CHECK(strcmp(nl_langinfo(CODESET), "ANSI_X3.4-1968") == 0,
          "main's locale changed to %s", nl_langinfo(CODESET));

    for (int i = 0; i < NTHREADS; i++)
        printf("%s\n", slot[i]);
    printf("libc_mix: %d threads, %d locked line pairs\n", NTHREADS, pairs);
    return probe_exit("libc_mix");
}
