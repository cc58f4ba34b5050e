/* preempt_stats — the signal path really preempts: a call-free spinner and a
 * heartbeat on one P, and bobbin's own count of signal preemptions.
 *
 * The harness does not read stderr, so when this program finds it runs under
 * bobbin (LD_PRELOAD names libbobbin) it re-executes itself with
 * BOBBIN_STATS=1 BOBBIN_MAXPROCS=1 (and without BOBBIN_DEBUG, which could turn
 * the signal path off), reads the child's stderr, and checks bobbin's line
 * "preempted at signal N" with N >= 1. The spinner makes no call, so with a
 * single P the heartbeat can beat only after the signal preempted it. The
 * child's stdout is this program's stdout; natively there is no child and the
 * same spinner and heartbeat run in-process, printing the same lines.
 *
 * Checks: the heartbeat's largest gap is under 50 ms (time the kernel gave to
 * other processes not charged, see heartbeat.h), and (under bobbin) N >= 1.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heartbeat.h"
#include "probe.h"

#define NBEATS 100
#define CHILD_ENV "PREEMPT_STATS_CHILD"

static volatile int stop;
static struct spinner spin = {.index = 0, .stop = &stop};
static struct heartbeat hb;

static void on_alarm(int sig)
{
    static const char msg[] = "preempt_stats: watchdog: no end after 30 s\n";
    (void)sig;
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void *heartbeat_main(void *arg)
{
    (void)arg;
    while (!spin.started)
        hb_sleep_ns(1000000);
    hb_run(&hb, NBEATS, NULL, hb_par(1));
    stop = 1;
    return NULL;
}

/* the spinner and the heartbeat: what the child does, or the native run */
static int spin_and_beat(void)
{
    signal(SIGALRM, on_alarm);
    alarm(30);
    pthread_t ts, th;
    REQUIRE(pthread_create(&ts, NULL, spinner_main, &spin) == 0, "pthread_create");
    REQUIRE(pthread_create(&th, NULL, heartbeat_main, NULL) == 0, "pthread_create");
    REQUIRE(pthread_join(th, NULL) == 0, "pthread_join");
    REQUIRE(pthread_join(ts, NULL) == 0, "pthread_join");
    hb_report("preempt_stats", &hb);
    CHECK(hb_ok(&hb), "largest charged heartbeat gap %.1f ms, bound %lld ms",
          hb.max_charged_ns / 1e6, HB_BOUND_NS / 1000000);
    CHECK(spin.snapshot == spin_expected(0), "spinner checksum %016llx",
          (unsigned long long)spin.snapshot);
    printf("heartbeat %s\n", hb_ok(&hb) ? "ok" : "late");
    return probe_exit("preempt_stats");
}

static int under_bobbin(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "libbobbin");
}

/* Runs this program again with BOBBIN_STATS=1; returns its exit status and
 * leaves its stderr in err (NUL-terminated). Called before any thread exists. */
static int run_child(char *err, size_t size)
{
    int pfd[2];
    REQUIRE(pipe(pfd) == 0, "pipe");
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        dup2(pfd[1], 2);
        close(pfd[0]);
        close(pfd[1]);
        setenv(CHILD_ENV, "1", 1);
        setenv("BOBBIN_STATS", "1", 1);
        setenv("BOBBIN_MAXPROCS", "1", 1);
        unsetenv("BOBBIN_DEBUG");
        execl("/proc/self/exe", "preempt_stats", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(pfd[0], err + len, size - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == size - 1) { /* full: keep only the end, where the stats are */
            memmove(err, err + size / 2, len - size / 2);
            len -= size / 2;
        }
    }
    err[len] = '\0';
    close(pfd[0]);
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
    return status;
}

int main(void)
{
    if (getenv(CHILD_ENV) || !under_bobbin())
        return spin_and_beat();

    static char err[16384];
    int status = run_child(err, sizeof err);
    fputs(err, stderr); /* the child's diagnostics and bobbin's table */
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child ended with status %#x",
          status);
    const char *line = strstr(err, "preempted at signal");
    CHECK(line != NULL, "no \"preempted at signal\" line in the child's stderr "
          "(not run under bobbin, or BOBBIN_STATS changed format?)");
    if (line) {
        unsigned long long n = 0;
        CHECK(sscanf(line + strlen("preempted at signal"), "%llu", &n) == 1,
              "cannot read the count in \"%.40s\"", line);
        CHECK(n >= 1, "preempted at signal %llu: the spinner was never preempted by the signal",
              n);
    }
    return probe_exit("preempt_stats");
}
