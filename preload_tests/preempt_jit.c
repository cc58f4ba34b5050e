/* preempt_jit — threads spinning in code made at run time, as a JIT's is:
 * a few instructions written into an anonymous executable mapping, in no
 * loaded object. 2 x MAXPROCS threads spin there (no call at all) until a
 * flag is set by a heartbeat thread that sleeps 10 ms twenty times first.
 * Under bobbin every P is held by a spinner, so the heartbeat runs only if
 * the preemption signal stops code outside any object file (Java's, node's
 * JIT output): it hung before.
 *
 * Checks: the heartbeat finishes its 20 sleeps, every spinner returns the
 * value it found in the flag; stdout the same natively and under bobbin.
 * A watchdog (alarm, 30 s) turns a hang into exit 1.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "preempt_jit"
#include "probe.h"

#define MAXSPIN 16

typedef int (*spin_fn)(volatile int *flag);
static spin_fn spin;
static volatile int flag;

static void *spinner(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)spin(&flag);
}

static void *heartbeat(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    flag = 7;
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(30);
    /* x86-64: loop: mov (%rdi),%eax; test %eax,%eax; je loop; ret */
    static const unsigned char code[] = {0x8b, 0x07, 0x85, 0xc0, 0x74, 0xfa, 0xc3};
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(page != MAP_FAILED, "mmap");
    memcpy(page, code, sizeof code);
    REQUIRE(mprotect(page, 4096, PROT_READ | PROT_EXEC) == 0, "mprotect");
    spin = (spin_fn)page;
    const char *mp = getenv("BOBBIN_MAXPROCS");
    int nspin = 2 * (mp && atoi(mp) > 0 ? atoi(mp) : 2);
    if (nspin > MAXSPIN)
        nspin = MAXSPIN;
    current_probe = "spin";
    pthread_t t[MAXSPIN], hb;
    for (int i = 0; i < nspin; i++)
        REQUIRE(pthread_create(&t[i], NULL, spinner, NULL) == 0, "pthread_create");
    REQUIRE(pthread_create(&hb, NULL, heartbeat, NULL) == 0, "pthread_create");
    pthread_join(hb, NULL);
    int ok = 0;
    for (int i = 0; i < nspin; i++) {
        void *r;
        pthread_join(t[i], &r);
        ok += (intptr_t)r == 7;
    }
    CHECK(ok == nspin, "%d of %d spinners saw the flag", ok, nspin);
    printf("heartbeat done; every spinner left the run-time code with the flag\n");
    return probe_exit(PROBE_NAME);
}
