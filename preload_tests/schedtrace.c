/* schedtrace — BOBBIN_DEBUG=schedtrace=MS lines, scheddetail, and the warning
 * for an unknown BOBBIN_DEBUG key.
 *
 * Under bobbin (LD_PRELOAD names libbobbin) this program re-executes itself
 * (reexec.h) as a short busy child: 4 threads computing and 4 sleeping in
 * 1 ms steps for about 500 ms of wall time (when tracing, until 4 SCHED lines
 * are in its stderr file too, at most 10 s: sysmon may get little CPU on a
 * loaded machine), then "busy child: done" on stdout. Runs, each checked on the child's stderr:
 *  - BOBBIN_DEBUG=schedtrace=50: at least 3 lines
 *    "SCHED <t>ms: gomaxprocs=G idleprocs=I threads=T spinningthreads=S
 *    needspinning=N idlethreads=D runqueue=Q [q0 q1 ...]" with G equal to
 *    BOBBIN_MAXPROCS, 0 <= I <= G, T >= 1, the times not decreasing, and G
 *    numbers in the brackets;
 *  - schedtrace=50,scheddetail=1: as above, plus a "P<i>:" line for every P
 *    and a "G1:" line (main);
 *  - BOBBIN_DEBUG=bogus=1: exactly one line of warning naming "bogus", no
 *    SCHED line, and the child still runs to its end;
 *  - schedtrace=50,bogus=1: one warning, and the trace still on.
 * Each child must exit 0 with its line on stdout. Natively there is no
 * bobbin: this program prints the lines it expects.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"
#include "reexec.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static atomic_int stop;

static void *computer(void *arg)
{
    uint64_t x = (uintptr_t)arg + 1;
    while (!atomic_load_explicit(&stop, memory_order_relaxed))
        for (int i = 0; i < 10000; i++)
            x = x * 6364136223846793005u + 1442695040888963407u;
    return (void *)(uintptr_t)(x & 1);
}

static void *napper(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* SCHED lines written so far on our stderr, when it is a regular file (the
 * parent's temporary file), else -1 */
static int sched_lines_so_far(void)
{
    struct stat st;
    if (fstat(2, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    static char buf[1 << 16];
    ssize_t n = pread(2, buf, sizeof buf - 1, 0);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    int lines = 0;
    for (char *p = buf; (p = strstr(p, "SCHED ")) != NULL; p += 6)
        lines++;
    return lines;
}

/* busy for 500 ms; when tracing, until 4 SCHED lines are out too (sysmon
 * may get little CPU on a loaded machine), at most 10 s */
static int busy_child(void)
{
    const char *dbg = getenv("BOBBIN_DEBUG");
    int tracing = dbg && strstr(dbg, "schedtrace") != NULL;
    int64_t start = now_ms();
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, i < 4 ? computer : napper, (void *)(intptr_t)i);
    for (;;) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
        int64_t el = now_ms() - start;
        if (el >= 10000 || (el >= 500 && (!tracing || sched_lines_so_far() < 0 ||
                                          sched_lines_so_far() >= 4)))
            break;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    printf("busy child: done\n");
    return 0;
}

struct trace {
    int lines, bad, nprocs_lines[64], g1_lines, warnings;
};

/* checks every SCHED line of err against gomaxprocs g */
static void parse(const char *err, int g, struct trace *t, const char *what)
{
    memset(t, 0, sizeof *t);
    long last_ms = -1;
    const char *p = err;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = strndup(p, len);
        p += len + (nl != NULL);
        if (line == NULL)
            continue;
        long ms;
        int gm, idle, thr, spin, need, idlet, rq, off = 0;
        if (strncmp(line, "SCHED ", 6) == 0) {
            t->lines++;
            if (sscanf(line, "SCHED %ldms: gomaxprocs=%d idleprocs=%d threads=%d "
                       "spinningthreads=%d needspinning=%d idlethreads=%d runqueue=%d [%n",
                       &ms, &gm, &idle, &thr, &spin, &need, &idlet, &rq, &off) != 8 ||
                off == 0) {
                CHECK(0, "%s: cannot parse \"%s\"", what, line);
                t->bad++;
            } else {
                int nums = 0, ok = 1;
                char *q = line + off;
                while (*q && *q != ']') {
                    char *end;
                    long v = strtol(q, &end, 10);
                    if (end == q || v < 0) {
                        ok = 0;
                        break;
                    }
                    nums++;
                    q = end;
                    while (*q == ' ')
                        q++;
                }
                ok = ok && *q == ']';
                int good = ok && gm == g && idle >= 0 && idle <= gm && thr >= 1 && spin >= 0 &&
                           idlet >= 0 && rq >= 0 && nums == gm && ms >= last_ms;
                CHECK(good, "%s: bad line \"%s\" (want gomaxprocs=%d, 0 <= idleprocs <= "
                      "gomaxprocs, %d numbers in brackets, times not decreasing)", what, line,
                      g, g);
                if (!good)
                    t->bad++;
                last_ms = ms;
            }
        } else if (line[0] == ' ' && line[1] == ' ' && line[2] == 'P') {
            int i;
            if (sscanf(line + 3, "%d:", &i) == 1 && i >= 0 && i < 64)
                t->nprocs_lines[i]++;
        } else if (strncmp(line, "  G1:", 5) == 0) {
            t->g1_lines++;
        } else if (strstr(line, "bogus")) {
            t->warnings++;
        }
        free(line);
    }
}

static int run(const char *what, const char *debug, int g, struct trace *t)
{
    char env[128];
    snprintf(env, sizeof env, "BOBBIN_DEBUG=%s", debug);
    const char *envs[] = {env, NULL};
    struct reexec r;
    REQUIRE(reexec_start(&r, "busy", envs) == 0, "start");
    reexec_finish(&r, 20000);
    int ok = !r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 &&
             strcmp(r.out, "busy child: done\n") == 0;
    CHECK(ok, "%s: the child ended with %s, stdout \"%s\"", what, reexec_how(&r), r.out);
    parse(r.err, g, t, what);
    if (!ok || t->bad)
        reexec_show(what, &r);
    free(r.out);
    free(r.err);
    return ok;
}

int main(void)
{
    const char *mode = reexec_mode();
    if (mode)
        return busy_child();

    const char *lines[] = {
        "schedtrace=50: child ran, >= 3 SCHED lines, every line consistent",
        "schedtrace=50,scheddetail=1: child ran, P lines for every P, a G1 line",
        "bogus=1: child ran, exactly one warning, no SCHED line",
        "schedtrace=50,bogus=1: child ran, exactly one warning, >= 3 SCHED lines",
    };
    if (!under_bobbin()) {
        for (int i = 0; i < 4; i++)
            printf("%s\n", lines[i]);
        return probe_exit("schedtrace");
    }
    const char *mp = getenv("BOBBIN_MAXPROCS");
    if (mp == NULL) {
        fprintf(stderr, "schedtrace: BOBBIN_MAXPROCS unset: run by the harness\n");
        return PROBE_SKIP;
    }
    int g = atoi(mp);
    struct trace t;
    int ok;

    ok = run("schedtrace=50", "schedtrace=50", g, &t);
    CHECK(t.lines >= 3, "schedtrace=50: %d SCHED lines in ~500 ms", t.lines);
    CHECK(t.warnings == 0, "schedtrace=50: %d warnings", t.warnings);
    printf("%s\n", ok && t.lines >= 3 && t.bad == 0 ? lines[0] : "schedtrace=50: FAILED");

    ok = run("scheddetail", "schedtrace=50,scheddetail=1", g, &t);
    int every_p = 1;
    for (int i = 0; i < g && i < 64; i++)
        every_p = every_p && t.nprocs_lines[i] >= 1;
    CHECK(t.lines >= 3 && every_p && t.g1_lines >= 1,
          "scheddetail: %d SCHED lines, P lines for every P %d, %d G1 lines", t.lines, every_p,
          t.g1_lines);
    printf("%s\n", ok && t.lines >= 3 && t.bad == 0 && every_p && t.g1_lines >= 1
                       ? lines[1] : "schedtrace=50,scheddetail=1: FAILED");

    ok = run("bogus=1", "bogus=1", g, &t);
    CHECK(t.warnings == 1, "bogus=1: %d warning lines naming \"bogus\", want 1", t.warnings);
    CHECK(t.lines == 0, "bogus=1: %d SCHED lines", t.lines);
    printf("%s\n", ok && t.warnings == 1 && t.lines == 0 ? lines[2] : "bogus=1: FAILED");

    ok = run("schedtrace=50,bogus=1", "schedtrace=50,bogus=1", g, &t);
    CHECK(t.warnings == 1, "schedtrace=50,bogus=1: %d warning lines, want 1", t.warnings);
    CHECK(t.lines >= 3, "schedtrace=50,bogus=1: %d SCHED lines", t.lines);
    printf("%s\n", ok && t.warnings == 1 && t.lines >= 3 && t.bad == 0
                       ? lines[3] : "schedtrace=50,bogus=1: FAILED");
    return probe_exit("schedtrace");
}
