/* stack_memory — the memory of ended threads' stacks is not kept for ever.
 *
 * 1. Rounds of NT threads alive at once (a barrier), the stack size
 *    changing from round to round: the default, 2 MiB, 256 KiB, as a
 *    program whose pools or libraries set their own sizes does. Each
 *    thread touches 64 KiB of its stack and returns a checksum of it.
 *    The address space after the last round must be what it was after
 *    the first three (every size seen once): ended threads' stacks are
 *    reused by the next threads of their size, whatever size came
 *    between. (bobbin's stack cache once looked at its first 64 stacks
 *    only: a program alternating two sizes mapped fresh stacks every
 *    round and kept the old ones, 2 GB of address space and 90 MB of
 *    RSS more after 40 rounds of 1,000 threads.)
 * 2. Once every thread is joined, the pages they touched go back to the
 *    system: NPTL unmaps its cached stacks past 40 MiB at once, bobbin
 *    unmaps stacks no thread took for a second or two. The RSS is polled
 *    for up to 30 s until it is back within 16 MiB of where it was
 *    before the first thread (the threads touched 230 MiB at most).
 *
 * stdout: results only (no sizes, no times), the same natively.
 */
#define PROBE_NAME "stack_memory"
#include "probe.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

enum { NT = 300, ROUNDS = 24, TOUCH = 64 * 1024 };

static pthread_barrier_t all_in;

static void *body(void *arg)
{
    volatile unsigned char buf[TOUCH];
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (size_t i = 0; i < sizeof buf; i += 512)
        buf[i] = (unsigned char)(seed + i / 512);
    pthread_barrier_wait(&all_in);
    unsigned long sum = 0;
    for (size_t i = 0; i < sizeof buf; i += 512)
        sum += buf[i];
    return (void *)(uintptr_t)sum;
}

static unsigned long expected(unsigned seed)
{
    unsigned long sum = 0;
    for (size_t i = 0; i < TOUCH; i += 512)
        sum += (unsigned char)(seed + i / 512);
    return sum;
}

/* a field of /proc/self/status, in kB */
static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    REQUIRE(f != NULL, "/proc/self/status");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = atol(line + n + 1);
    fclose(f);
    REQUIRE(v >= 0, "no %s in /proc/self/status", field);
    return v;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(55);
    static const size_t sizes[3] = {0, 2u << 20, 256u << 10};
    static pthread_t t[NT];
    pthread_attr_t attr[3];
    for (int k = 0; k < 3; k++) {
        REQUIRE(pthread_attr_init(&attr[k]) == 0, "attr");
        if (sizes[k])
            REQUIRE(pthread_attr_setstacksize(&attr[k], sizes[k]) == 0, "stack size");
    }
    REQUIRE(pthread_barrier_init(&all_in, NULL, NT + 1) == 0, "barrier");
    long rss0 = status_kb("VmRSS"), vm3 = 0;
    int bad = 0;

    current_probe = "1: rounds of sizes";
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < NT; i++)
            REQUIRE(pthread_create(&t[i], &attr[r % 3], body, (void *)(uintptr_t)(r * NT + i)) == 0,
                    "create %d in round %d", i, r);
        pthread_barrier_wait(&all_in);
        for (int i = 0; i < NT; i++) {
            void *res;
            REQUIRE(pthread_join(t[i], &res) == 0, "join");
            bad += (uintptr_t)res != expected((unsigned)(r * NT + i));
        }
        if (r == 2)
            vm3 = status_kb("VmSize");
    }
    long vm_end = status_kb("VmSize");
    printf("rounds: %d threads with a wrong checksum\n", bad);
    CHECK(bad == 0, "%d wrong checksums", bad);
    /* one more round of each size may have needed a few more stacks (a
     * thread ended on the other P, whose cache its successor does not
     * see): a slack of 64 default-size stacks, far below one round's */
    long slack = 64 * 8 * 1024 + vm3 / 16;
    int stable = vm_end <= vm3 + slack;
    printf("address space after %d rounds as after the first 3: %s\n", ROUNDS,
           stable ? "yes" : "no");
    CHECK(stable, "VmSize %ld kB after round 3, %ld kB after round %d", vm3, vm_end, ROUNDS);

    current_probe = "2: pages given back";
    long rss = 0;
    int back = 0;
    for (int i = 0; i < 300 && !back; i++) {
        rss = status_kb("VmRSS");
        back = rss <= rss0 + 16 * 1024;
        if (!back)
            usleep(100 * 1000);
    }
    printf("ended threads' stack pages given back: %s\n", back ? "yes" : "no");
    CHECK(back, "VmRSS %ld kB before the threads, %ld kB 30 s after the last join", rss0, rss);
    alarm(0);
    printf("stack_memory: done\n");
    return probe_exit(PROBE_NAME);
}
