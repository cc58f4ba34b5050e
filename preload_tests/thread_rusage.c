/* thread_rusage — getrusage(RUSAGE_THREAD) counts the calling thread's own
 * page faults and context switches.
 *
 * fio prints each job's faults and switches as the difference of two
 * RUSAGE_THREAD reads across the job. Under bobbin many threads share an OS
 * thread, whose counts the kernel keeps: such a difference held the faults
 * of every thread that ran on it meanwhile, or was negative after the
 * thread moved to another OS thread.
 *
 * NWORK workers each touch NPAGES fresh pages of a mapping of their own,
 * PER_ROUND per round, with a 1 ms nanosleep after each round (natively a
 * voluntary switch; under bobbin a park, after which the thread may run on
 * another OS thread), reading RUSAGE_THREAD after every round. Beside them
 * NNOISE threads fault in and unmap pages as fast as they can, yielding
 * between rounds. Checked, for each worker:
 *  - no count ever goes down from one read to the next;
 *  - its minor faults grew by at least NPAGES and at most NPAGES + SLACK
 *    (stack, TLS and libc's first touches; the noise threads fault
 *    thousands of pages meanwhile);
 *  - its voluntary switches grew by at least NROUNDS.
 * Main does the same once, without sleeping, while the workers run. The
 * counts themselves (timing-dependent) are never printed.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "thread_rusage"
#include "probe.h"

enum { NWORK = 6, NNOISE = 2, NROUNDS = 40, PER_ROUND = 25, NPAGES = NROUNDS * PER_ROUND };
enum { SLACK = 300, NOISE_PAGES = 256 };

static long pagesz;
static atomic_int stop;

static struct rusage now(void)
{
    struct rusage r;
    REQUIRE(getrusage(RUSAGE_THREAD, &r) == 0, "getrusage: %s", strerror(errno));
    return r;
}

/* every count of b at least a's */
static void monotone(const char *who, int i, const struct rusage *a, const struct rusage *b)
{
    CHECK(b->ru_minflt >= a->ru_minflt, "%s %d: minflt %ld -> %ld", who, i, a->ru_minflt, b->ru_minflt);
    CHECK(b->ru_majflt >= a->ru_majflt, "%s %d: majflt %ld -> %ld", who, i, a->ru_majflt, b->ru_majflt);
    CHECK(b->ru_nvcsw >= a->ru_nvcsw, "%s %d: nvcsw %ld -> %ld", who, i, a->ru_nvcsw, b->ru_nvcsw);
    CHECK(b->ru_nivcsw >= a->ru_nivcsw, "%s %d: nivcsw %ld -> %ld", who, i, a->ru_nivcsw, b->ru_nivcsw);
    CHECK(b->ru_inblock >= a->ru_inblock, "%s %d: inblock %ld -> %ld", who, i, a->ru_inblock, b->ru_inblock);
    CHECK(b->ru_oublock >= a->ru_oublock, "%s %d: oublock %ld -> %ld", who, i, a->ru_oublock, b->ru_oublock);
}

/* touch NPAGES fresh pages in NROUNDS rounds, sleeping 1 ms after each if
 * sleep is set; check the faults and switches counted meanwhile */
static void faulter(const char *who, int id, int sleep)
{
    char *m = mmap(NULL, NPAGES * pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED, "mmap: %s", strerror(errno));
    struct timespec ms = { 0, 1000000 };
    struct rusage first = now(), prev = first;
    for (int r = 0; r < NROUNDS; r++) {
        for (int k = 0; k < PER_ROUND; k++)
            m[(long)(r * PER_ROUND + k) * pagesz] = (char)(r + k + 1);
        if (sleep)
            while (nanosleep(&ms, &ms) != 0 && errno == EINTR)
                ;
        struct rusage cur = now();
        monotone(who, id, &prev, &cur);
        prev = cur;
    }
    long flt = prev.ru_minflt - first.ru_minflt;
    CHECK(flt >= NPAGES && flt <= NPAGES + SLACK, "%s %d: %ld minor faults for %d fresh pages", who, id, flt,
          NPAGES);
    /* (natively a sleep whose timer expires while its thread waits for a
     * CPU, before it blocks, returns with no voluntary switch: 39 of 40
     * seen once on a loaded machine) */
    if (sleep)
        CHECK(prev.ru_nvcsw - first.ru_nvcsw >= NROUNDS - NROUNDS / 10,
              "%s %d: %ld voluntary switches for %d sleeps", who, id, prev.ru_nvcsw - first.ru_nvcsw, NROUNDS);
    long sum = 0;
    for (long p = 0; p < NPAGES; p++)
        sum += m[p * pagesz];
    CHECK(sum > 0, "%s %d: pages lost", who, id);
    munmap(m, NPAGES * pagesz);
}

static void *worker(void *arg)
{
    current_probe = "workers";
    faulter("worker", (int)(intptr_t)arg, 1);
    return NULL;
}

static void *noise(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        char *m = mmap(NULL, NOISE_PAGES * pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(m != MAP_FAILED, "mmap: %s", strerror(errno));
        for (long p = 0; p < NOISE_PAGES; p++)
            m[p * pagesz] = 1;
        munmap(m, NOISE_PAGES * pagesz);
        sched_yield();
    }
    return NULL;
}

int main(void)
{
    pagesz = sysconf(_SC_PAGESIZE);
    signal(SIGALRM, on_alarm);
    alarm(50);
    pthread_t w[NWORK], n[NNOISE];
    for (int i = 0; i < NNOISE; i++)
        REQUIRE(pthread_create(&n[i], NULL, noise, NULL) == 0, "pthread_create");
    for (int i = 0; i < NWORK; i++)
        REQUIRE(pthread_create(&w[i], NULL, worker, (void *)(intptr_t)i) == 0, "pthread_create");
    faulter("main", 0, 0);
    for (int i = 0; i < NWORK; i++)
        pthread_join(w[i], NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < NNOISE; i++)
        pthread_join(n[i], NULL);
    printf("%d workers and main: faults and switches counted per thread\n", NWORK);
    return probe_exit(PROBE_NAME);
}
