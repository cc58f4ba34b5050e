/* stats — the BOBBIN_STATS=1 table printed at exit.
 *
 * Under bobbin (LD_PRELOAD names libbobbin) this program re-executes itself
 * (reexec.h) as a child that creates exactly N = 12 threads: 6 alive at once
 * (they wait on a barrier), then 6 one after another; each returns a value the
 * child sums; then PINNED = 4 more, each with a CPU mask of its own
 * (pthread_attr_setaffinity_np: each gets an OS thread of its own), alive
 * at once. From the child's stderr with BOBBIN_STATS=1:
 *  - the header names the child's BOBBIN_MAXPROCS;
 *  - "threads created" is N + PINNED (pthread_create calls that made a
 *    thread; older tables said "thread ids handed out", main included: then
 *    >= N + PINNED + 1);
 *  - "peak live threads" is at most N + PINNED + 1 and at least 7 (main and
 *    the 6 alive at once);
 *  - "peak OS threads" is at least PINNED + 1: the most at once, not those
 *    left at exit (the table printed the count at exit, after the pinned
 *    threads' OS threads had ended with them: 3 to 6). 
 * With BOBBIN_STATS unset, and with BOBBIN_STATS=0, there is no table.
 * Each child must exit 0 with its sum on stdout. Natively there is no
 * bobbin: this program prints the lines it expects.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"
#include "reexec.h"

enum { N = 12, AT_ONCE = 6, PINNED = 4 };

static pthread_barrier_t bar, pinned_bar;

static void *pinned(void *arg)
{
    pthread_barrier_wait(&pinned_bar);
    return arg;
}

static void *worker(void *arg)
{
    intptr_t i = (intptr_t)arg;
    if (i < AT_ONCE)
        pthread_barrier_wait(&bar);
    return (void *)(i * i);
}

static int child(void)
{
    pthread_t t[N];
    intptr_t sum = 0;
    pthread_barrier_init(&bar, NULL, AT_ONCE);
    for (int i = 0; i < AT_ONCE; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) != 0)
            return 1;
    for (int i = 0; i < AT_ONCE; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (intptr_t)r;
    }
    for (int i = AT_ONCE; i < N; i++) {
        void *r;
        if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) != 0)
            return 1;
        pthread_join(t[i], &r);
        sum += (intptr_t)r;
    }
    cpu_set_t all, one;
    pthread_attr_t a;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || pthread_attr_init(&a) != 0)
        return 1;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    pthread_attr_setaffinity_np(&a, sizeof one, &one);
    pthread_barrier_init(&pinned_bar, NULL, PINNED + 1);
    pthread_t p[PINNED];
    for (int i = 0; i < PINNED; i++)
        if (pthread_create(&p[i], &a, pinned, NULL) != 0)
            return 1;
    pthread_barrier_wait(&pinned_bar);
    for (int i = 0; i < PINNED; i++)
        pthread_join(p[i], NULL);
    usleep(50000); /* their OS threads have ended by the time the table is printed */
    printf("child: %d threads, sum of squares %ld\n", N, (long)sum);
    return 0;
}

/* the number after label on its line of text, or -1 */
static long field(const char *text, const char *label)
{
    const char *p = strstr(text, label);
    if (p == NULL)
        return -1;
    p += strlen(label);
    while (*p == ' ' || *p == '\t' || *p == ':')
        p++;
    char *end;
    long v = strtol(p, &end, 10);
    return end == p ? -1 : v;
}

static const char child_out[] = "child: 12 threads, sum of squares 506\n";

static int run(const char *stats, struct reexec *r)
{
    char env[64];
    const char *envs[] = {env, NULL};
    if (stats)
        snprintf(env, sizeof env, "BOBBIN_STATS=%s", stats);
    else
        snprintf(env, sizeof env, "-BOBBIN_STATS");
    REQUIRE(reexec_start(r, "child", envs) == 0, "start");
    reexec_finish(r, 20000);
    int ok = !r->timed_out && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0 &&
             strcmp(r->out, child_out) == 0;
    CHECK(ok, "BOBBIN_STATS=%s: the child ended with %s, stdout \"%s\"", stats ? stats : "unset",
          reexec_how(r), r->out);
    return ok;
}

int main(void)
{
    if (reexec_mode())
        return child();

    const char *lines[] = {
        "BOBBIN_STATS=1: child ran, table at exit",
        "  header names BOBBIN_MAXPROCS: yes",
        "  threads created: 16",
        "  peak live threads within [7, 17]: yes",
        "  peak OS threads >= 5: yes",
        "BOBBIN_STATS unset: child ran, no table",
        "BOBBIN_STATS=0: child ran, no table",
    };
    if (!under_bobbin()) {
        for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
            printf("%s\n", lines[i]);
        return probe_exit("stats");
    }
    const char *mp = getenv("BOBBIN_MAXPROCS");

    struct reexec r;
    int ok = run("1", &r);
    const char *table = strstr(r.err, "bobbin stats");
    printf("%s\n", ok && table ? lines[0] : "BOBBIN_STATS=1: FAILED");
    CHECK(table != NULL, "no \"bobbin stats\" table on the child's stderr");
    if (table == NULL)
        table = "";

    char want_hdr[64];
    snprintf(want_hdr, sizeof want_hdr, "BOBBIN_MAXPROCS=%s)", mp ? mp : "?");
    int hdr = mp == NULL || strstr(table, want_hdr) != NULL;
    printf("  header names BOBBIN_MAXPROCS: %s\n", hdr ? "yes" : "no");
    CHECK(hdr, "the table's header does not say %s", want_hdr);

    long created = field(table, "threads created");
    long ids = field(table, "thread ids handed out");
    if (created >= 0) {
        printf("  threads created: %ld\n", created);
        CHECK(created == N + PINNED, "threads created %ld, want %d", created, N + PINNED);
    } else {
        /* the older table: ids handed out, main's included */
        printf("  threads created: %s\n", ids >= N + PINNED + 1 ? "16" : "wrong");
        CHECK(ids >= N + PINNED + 1, "no \"threads created\", and \"thread ids handed out\" %ld < %d",
              ids, N + PINNED + 1);
    }
    long peak = field(table, "peak live threads");
    int peak_ok = peak >= AT_ONCE + 1 && peak <= N + PINNED + 1;
    printf("  peak live threads within [%d, %d]: %s\n", AT_ONCE + 1, N + PINNED + 1,
           peak_ok ? "yes" : "no");
    CHECK(peak_ok, "peak live threads %ld, want within [%d, %d]", peak, AT_ONCE + 1, N + PINNED + 1);
    long os = field(table, "peak OS threads");
    printf("  peak OS threads >= %d: %s\n", PINNED + 1, os >= PINNED + 1 ? "yes" : "no");
    CHECK(os >= PINNED + 1, "peak OS threads %ld, want at least %d", os, PINNED + 1);
    if (!ok || !peak_ok || os < PINNED + 1 || !hdr)
        reexec_show("BOBBIN_STATS=1", &r);
    free(r.out);
    free(r.err);

    ok = run(NULL, &r);
    int none = strstr(r.err, "bobbin stats") == NULL;
    printf("BOBBIN_STATS unset: %s\n", ok && none ? "child ran, no table" : "FAILED");
    CHECK(none, "a table without BOBBIN_STATS");
    free(r.out);
    free(r.err);

    ok = run("0", &r);
    none = strstr(r.err, "bobbin stats") == NULL;
    printf("BOBBIN_STATS=0: %s\n", ok && none ? "child ran, no table" : "FAILED");
    CHECK(none, "a table with BOBBIN_STATS=0");
    free(r.out);
    free(r.err);
    return probe_exit("stats");
}
