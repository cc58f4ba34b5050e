/* preempt_many — more spinners than Ps: 4 x MAXPROCS threads that make no
 * call at all, and one heartbeat thread sleeping 10 ms at a time.
 *
 * MAXPROCS is BOBBIN_MAXPROCS, or 2 when unset (the native run): 8 spinners
 * with the default registration, 4 in the _p1 variant. Each spinner runs the
 * call-free loop of heartbeat.h until the heartbeat, after 200 beats (~2 s),
 * sets the stop flag. Under bobbin every P is held by a spinner all the time,
 * so the heartbeat's timer is run and the heartbeat scheduled only when sysmon
 * preempts a spinner through the signal.
 *
 * Checks: the largest gap between two beats is under 50 ms (the bound;
 * time the kernel gave to other processes is not charged, see heartbeat.h),
 * every spinner advanced while the heartbeat ran (none starved), and every
 * spinner's checksum. stdout does not depend on the number of spinners.
 * A watchdog (alarm, 30 s) turns a hang into exit 1.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "heartbeat.h"
#include "probe.h"

#define NBEATS 200
#define MAXSPIN 64

static volatile int stop;
static struct spinner spins[MAXSPIN];
static int nspin;
static struct heartbeat hb;
static uint64_t before[MAXSPIN], after[MAXSPIN];

static void on_alarm(int sig)
{
    static const char msg[] = "preempt_many: watchdog: no end after 30 s\n";
    (void)sig;
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void *heartbeat_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < nspin; i++)
        while (!spins[i].started)
            hb_sleep_ns(1000000);
    for (int i = 0; i < nspin; i++)
        before[i] = spins[i].progress;
    hb_run(&hb, NBEATS, NULL, hb_par(nspin));
    for (int i = 0; i < nspin; i++)
        after[i] = spins[i].progress;
    stop = 1;
    return NULL;
}

static int maxprocs(void)
{
    const char *s = getenv("BOBBIN_MAXPROCS");
    int n = s ? atoi(s) : 0;
    return n >= 1 && n <= MAXSPIN / 4 ? n : 2;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(30);
    nspin = 4 * maxprocs();

    pthread_t ts[MAXSPIN], th;
    for (int i = 0; i < nspin; i++) {
        spins[i].index = i;
        spins[i].stop = &stop;
        REQUIRE(pthread_create(&ts[i], NULL, spinner_main, &spins[i]) == 0,
                "pthread_create spinner %d", i);
    }
    REQUIRE(pthread_create(&th, NULL, heartbeat_main, NULL) == 0, "pthread_create heartbeat");
    REQUIRE(pthread_join(th, NULL) == 0, "pthread_join heartbeat");
    for (int i = 0; i < nspin; i++)
        REQUIRE(pthread_join(ts[i], NULL) == 0, "pthread_join spinner %d", i);

    fprintf(stderr, "preempt_many: %d spinners\n", nspin);
    hb_report("preempt_many", &hb);
    CHECK(hb_ok(&hb), "largest charged heartbeat gap %.1f ms, bound %lld ms",
          hb.max_charged_ns / 1e6, HB_BOUND_NS / 1000000);
    int starved = 0;
    for (int i = 0; i < nspin; i++) {
        fprintf(stderr, "  spinner %d: %llu steps during the beats\n", i,
                (unsigned long long)(after[i] - before[i]));
        CHECK(after[i] > before[i], "spinner %d did not run during the heartbeats", i);
        starved += after[i] <= before[i];
        uint64_t want = spin_expected(i);
        CHECK(spins[i].snapshot == want, "spinner %d checksum %016llx, want %016llx", i,
              (unsigned long long)spins[i].snapshot, (unsigned long long)want);
    }

    printf("heartbeat %s\n", hb_ok(&hb) ? "ok" : "late");
    printf("spinners %s\n", starved ? "starved" : "ok");
    return probe_exit("preempt_many");
}
