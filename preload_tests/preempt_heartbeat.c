/* preempt_heartbeat — a thread that makes no call at all must not keep the
 * only P: a heartbeat thread sleeping 10 ms at a time keeps beating.
 *
 * One spinner runs a pure integer loop (heartbeat.h: no call, a volatile stop
 * flag) while a second thread beats 200 times, 10 ms apart (~2 s), then sets
 * the flag. Registered with BOBBIN_MAXPROCS=1 only: there the heartbeat can
 * run only when the spinner is preempted asynchronously (the SIGURG path of
 * runtime/preempt.c), since the spinner never reaches an interposed call.
 *
 * Checks: the largest gap between two beats is under 50 ms (the bound;
 * natively ~10 ms; time the kernel gave to other processes is not charged, see
 * heartbeat.h), and the spinner advanced while the heartbeat ran.
 * stdout: "heartbeat ok" and the spinner's checksum; the measured gap goes to
 * stderr. A watchdog (alarm, 30 s) turns a hang — a spinner never preempted —
 * into exit 1.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "heartbeat.h"
#include "probe.h"

#define NBEATS 200

static volatile int stop;
static struct spinner spin = {.index = 0, .stop = &stop};
static struct heartbeat hb;
static uint64_t progress_before, progress_after;

static void on_alarm(int sig)
{
    static const char msg[] = "preempt_heartbeat: watchdog: no end after 30 s "
                              "(the spinner is never preempted?)\n";
    (void)sig;
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void *heartbeat_main(void *arg)
{
    (void)arg;
    while (!spin.started)
        hb_sleep_ns(1000000);
    progress_before = spin.progress;
    hb_run(&hb, NBEATS, NULL, hb_par(1));
    progress_after = spin.progress;
    stop = 1;
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(30);
    uint64_t want = spin_expected(0);

    pthread_t ts, th;
    REQUIRE(pthread_create(&ts, NULL, spinner_main, &spin) == 0, "pthread_create spinner");
    REQUIRE(pthread_create(&th, NULL, heartbeat_main, NULL) == 0, "pthread_create heartbeat");
    REQUIRE(pthread_join(th, NULL) == 0, "pthread_join heartbeat");
    REQUIRE(pthread_join(ts, NULL) == 0, "pthread_join spinner");

    hb_report("preempt_heartbeat", &hb);
    fprintf(stderr, "preempt_heartbeat: spinner: %llu steps, %llu of them during the beats\n",
            (unsigned long long)spin.steps,
            (unsigned long long)(progress_after - progress_before));
    CHECK(hb_ok(&hb), "largest charged heartbeat gap %.1f ms, bound %lld ms",
          hb.max_charged_ns / 1e6, HB_BOUND_NS / 1000000);
    CHECK(progress_after > progress_before, "the spinner did not run during the heartbeats");
    CHECK(spin.snapshot == want, "spinner checksum %016llx, want %016llx",
          (unsigned long long)spin.snapshot, (unsigned long long)want);

    printf("heartbeat %s\n", hb_ok(&hb) ? "ok" : "late");
    printf("spinner checksum %016llx\n", (unsigned long long)spin.snapshot);
    return probe_exit("preempt_heartbeat");
}
