/* volatile_flag — a thread that waits by spinning on a volatile flag, with no
 * call in the loop, must see another thread set it: the setter needs a P, and
 * with BOBBIN_MAXPROCS=1 only preempting the spinner gives it one.
 *
 *   child_spins  a new thread spins; main sleeps 20 ms, then sets the flag
 *   main_spins   main (G1, on the process's initial stack) spins; a new thread
 *                sleeps 20 ms, then sets the flag
 *   ring         4 threads pass a turn round a ring 10 times, each spinning on
 *                the volatile turn word until it is its own: every pass needs
 *                the holder of the P to be preempted (40 passes)
 *
 * A watchdog (alarm, 30 s) turns a hang into exit 1, naming the probe.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "heartbeat.h"
#include "probe.h"

#define NRING 4
#define ROUNDS 10

static const char *volatile probe = "start";

static void on_alarm(int sig)
{
    (void)sig;
    const char *p = probe;
    static const char a[] = "volatile_flag: watchdog: hung in ";
    (void)!write(2, a, sizeof a - 1);
    (void)!write(2, p, strlen(p));
    (void)!write(2, "\n", 1);
    _exit(1);
}

/* ---- child_spins / main_spins ---- */

static volatile int flag;

static long spin_until_flag(void)
{
    long n = 0;
    while (!flag)
        n++;
    return n;
}

static void *spinner(void *arg)
{
    (void)arg;
    return (void *)spin_until_flag();
}

static void *setter(void *arg)
{
    (void)arg;
    hb_sleep_ns(20000000);
    flag = 1;
    return NULL;
}

static void child_spins(void)
{
    probe = "child_spins";
    flag = 0;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, spinner, NULL) == 0, "pthread_create");
    hb_sleep_ns(20000000);
    flag = 1;
    void *n;
    REQUIRE(pthread_join(t, &n) == 0, "pthread_join");
    printf("child_spins: the spinner saw the flag\n");
}

static void main_spins(void)
{
    probe = "main_spins";
    flag = 0;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, setter, NULL) == 0, "pthread_create");
    spin_until_flag();
    REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
    printf("main_spins: main saw the flag\n");
}

/* ---- ring ---- */

static volatile int turn;
static long passes[NRING];

static void *ring_member(void *arg)
{
    int me = (int)(long)arg;
    for (int r = 0; r < ROUNDS; r++) {
        while (turn != me)
            ;
        passes[me]++;
        turn = (me + 1) % NRING;
    }
    return NULL;
}

static void ring(void)
{
    probe = "ring";
    turn = 0;
    pthread_t t[NRING];
    for (long i = 0; i < NRING; i++)
        REQUIRE(pthread_create(&t[i], NULL, ring_member, (void *)i) == 0, "pthread_create");
    long total = 0;
    for (int i = 0; i < NRING; i++) {
        REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");
        CHECK(passes[i] == ROUNDS, "member %d passed the turn %ld times", i, passes[i]);
        total += passes[i];
    }
    CHECK(turn == 0, "turn ended at %d", turn);
    printf("ring: %ld passes, turn back at %d\n", total, turn);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(30);
    child_spins();
    main_spins();
    ring();
    return probe_exit("volatile_flag");
}
