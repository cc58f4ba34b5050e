/* expect.h — the probe helpers shared by the tests that print one line per
 * probe and check its result against NPTL's (mutex_errors, rwlock, barrier,
 * semaphore): errno names and deadlines on a clock (the watchdog that names
 * the probe that hung is probe.h's). Define PROBE_NAME before including it.
 */
#ifndef BOBBIN_EXPECT_H
#define BOBBIN_EXPECT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"


static const char *ename(int rc)
{
    const char *n = rc == 0 ? "0" : strerrorname_np(rc);
    return n ? n : "?";
}

#ifndef EXPECT_OWN_EXPECT
/* a call returning an error number: print it, check it */
static void expect(const char *what, int rc, int want)
{
    current_probe = what;
    printf("%s: %s\n", what, ename(rc));
    fflush(stdout);
    CHECK(rc == want, "%s: got %s, want %s", what, ename(rc), ename(want));
}
#endif

static void expect_val(const char *what, long got, long want)
{
    current_probe = what;
    printf("%s: %ld\n", what, got);
    fflush(stdout);
    CHECK(got == want, "%s: got %ld, want %ld", what, got, want);
}

static inline int64_t ns_of(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* the time ns from now on clock, as an absolute timespec */
static inline struct timespec after(clockid_t clock, int64_t ns)
{
    int64_t t = ns_of(clock) + ns;
    return (struct timespec){t / 1000000000, t % 1000000000};
}

#endif
