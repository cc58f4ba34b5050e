/* selfpipe_signals — the self-pipe trick under a storm of signals: a timer
 * (SIGALRM every 200 µs, process-directed, so it lands on whatever OS thread
 * runs, often in the middle of the threading library's own code) whose
 * handler writes one byte into a non-blocking pipe that a thread drains with
 * poll and read, while other threads ping-pong through a mutex and condvar
 * and through a pair of pipes. A handler's interposed write must not switch
 * the interrupted thread or wake another through the run queues the code it
 * interrupted may be changing.
 *
 * Checks: every byte a handler wrote is read (counts compared after the
 * storm), the ping-pongs' checksums, the same stdout natively and under
 * bobbin. SIGALRM is the storm's: a hang ends at the harness's timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "probe.h"

#define ROUNDS 100000

static int selfpipe[2];
static atomic_long written, dropped, drained;
static atomic_int storm_over;

static void on_tick(int sig)
{
    (void)sig;
    int e = errno;
    if (write(selfpipe[1], "x", 1) == 1)
        atomic_fetch_add(&written, 1);
    else
        atomic_fetch_add(&dropped, 1); /* the pipe is full: EAGAIN */
    errno = e;
}

static void *drainer(void *arg)
{
    (void)arg;
    char buf[256];
    for (;;) {
        struct pollfd p = {selfpipe[0], POLLIN, 0};
        int k = poll(&p, 1, 20);
        if (k > 0) {
            ssize_t n = read(selfpipe[0], buf, sizeof buf);
            if (n > 0)
                atomic_fetch_add(&drained, n);
        } else if (k == 0 && atomic_load(&storm_over)) {
            return NULL;
        }
    }
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long turn;

static void *condside(void *arg)
{
    long me = (long)(intptr_t)arg;
    long sum = 0;
    for (long i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&mu);
        while ((turn & 1) != me)
            pthread_cond_wait(&cv, &mu);
        sum += turn++;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
    }
    return (void *)sum;
}

static int ping[2], pong[2];

static void *ponger(void *arg)
{
    (void)arg;
    for (long k = 0; k < ROUNDS; k++) {
        unsigned char c;
        if (read(ping[0], &c, 1) != 1 || write(pong[1], &(unsigned char){c + 1}, 1) != 1) {
            CHECK(0, "ponger: %s", strerror(errno));
            break;
        }
    }
    return NULL;
}

int main(void)
{
    REQUIRE(pipe(selfpipe) == 0 && pipe(ping) == 0 && pipe(pong) == 0, "pipe");
    fcntl(selfpipe[0], F_SETFL, O_NONBLOCK);
    fcntl(selfpipe[1], F_SETFL, O_NONBLOCK);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_tick;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    pthread_t d, a, b, p;
    REQUIRE(pthread_create(&d, NULL, drainer, NULL) == 0, "pthread_create");
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    REQUIRE(pthread_create(&a, NULL, condside, (void *)0) == 0, "pthread_create");
    REQUIRE(pthread_create(&b, NULL, condside, (void *)1) == 0, "pthread_create");
    REQUIRE(pthread_create(&p, NULL, ponger, NULL) == 0, "pthread_create");
    long psum = 0;
    for (long k = 0; k < ROUNDS; k++) {
        unsigned char c = (unsigned char)k;
        if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) {
            CHECK(0, "pinger: %s", strerror(errno));
            break;
        }
        psum += c;
    }
    void *ra, *rb;
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    pthread_join(p, NULL);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    atomic_store(&storm_over, 1);
    pthread_join(d, NULL);
    long n = 2L * ROUNDS;
    CHECK((long)(intptr_t)ra + (long)(intptr_t)rb == n * (n - 1) / 2,
          "condvar turns sum to %ld", (long)(intptr_t)ra + (long)(intptr_t)rb);
    long want = 0;
    for (long k = 0; k < ROUNDS; k++)
        want += (unsigned char)((unsigned char)k + 1);
    CHECK(psum == want, "pipe ping-pong sum %ld, want %ld", psum, want);
    CHECK(atomic_load(&drained) == atomic_load(&written), "handlers wrote %ld bytes, %ld read",
          atomic_load(&written), atomic_load(&drained));
    CHECK(atomic_load(&written) > 0, "no tick was handled");
    printf("condvar turns %ld, pipe round trips %d, every byte the handlers wrote was read\n", n,
           ROUNDS);
    return probe_exit("selfpipe_signals");
}
