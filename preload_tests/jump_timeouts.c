/* jump_timeouts — the classic time-out: a handler that siglongjmp()s out of
 * a blocking call.
 *
 * A sigsetjmp(env, 1) buffer saves the mask, and the jump puts it back
 * with glibc's internal sigprocmask, which bobbin does not see. Under
 * bobbin before 2026-11-25 the thread's mask kept the handler's (the
 * signal blocked), so the second time-out never came and the program hung;
 * and a jump out of a call the process's only thread was blocked in
 * (inside entersyscall) left that thread marked as in the system call, so
 * its later socket reads ran as a foreign thread's and answered EAGAIN.
 *
 * 1. The only thread: ROUNDS rounds of a 2 ms ITIMER_REAL whose SIGALRM
 *    handler jumps out of read (pipe), recv (socket), poll, accept,
 *    usleep, sem_wait and pause; the last kind jumps with longjmp, which
 *    is glibc's siglongjmp too. Every call is jumped out of, none returns.
 * 2. A second thread does the same kinds, each ended by a pthread_kill
 *    from main whose SIGUSR1 handler jumps.
 * 3. Afterwards the pipe, the socket, the semaphore and the mutex work:
 *    a thread writes to each descriptor 20 ms late and the reads get it.
 *    (No mutex or condition variable wait is jumped out of: those calls
 *    are not async-signal-safe, natively either.)
 * A watchdog names the part that hangs.
 */
#define PROBE_NAME "jump_timeouts"
#include "probe.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

enum { ROUNDS = 15, KINDS = 7 };

static int pfd[2], sv[2], lsn;
static sem_t sem;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static __thread sigjmp_buf env;
static __thread int jumps;
static __thread int in_kind = -1;

static void on_signal(int sig)
{
    (void)sig;
    jumps++;
    if (in_kind == KINDS - 1)
        longjmp(env, 1);
    siglongjmp(env, 1);
}

/* one blocking call of the given kind: returns only if nothing jumped */
static void block_in(int kind)
{
    char b[8];
    struct pollfd p = {pfd[0], POLLIN, 0};
    switch (kind) {
    case 0:
        (void)!read(pfd[0], b, sizeof b);
        break;
    case 1:
        (void)!recv(sv[0], b, sizeof b, 0);
        break;
    case 2:
        poll(&p, 1, 5000);
        break;
    case 3:
        close(accept(lsn, NULL, NULL));
        break;
    case 4:
        usleep(5 * 1000 * 1000);
        break;
    case 5:
        sem_wait(&sem);
        break;
    default:
        pause();
        break;
    }
}

static volatile int waiting; /* part 2: the worker is about to block */

/* ROUNDS x KINDS calls, each to be jumped out of; returns how many returned */
static int rounds(int use_timer)
{
    volatile int returned = 0;
    for (volatile int r = 0; r < ROUNDS; r++)
        for (volatile int kind = 0; kind < KINDS; kind++) {
            if (sigsetjmp(env, 1) == 0) {
                in_kind = kind;
                if (use_timer) {
                    struct itimerval it = {{0, 0}, {0, 2000}};
                    setitimer(ITIMER_REAL, &it, NULL);
                } else {
                    waiting = 1;
                }
                block_in(kind);
                returned++;
            }
            in_kind = -1;
        }
    return returned;
}

static void *worker(void *arg)
{
    (void)arg;
    int returned = rounds(0);
    waiting = -1;
    return (void *)(intptr_t)(returned * 1000 + jumps);
}

static void *late_writer(void *arg)
{
    usleep(20 * 1000);
    (void)!write((int)(intptr_t)arg, "late", 4);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    REQUIRE(pipe(pfd) == 0, "pipe");
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    lsn = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "bobbin-jump-%d", (int)getpid());
    REQUIRE(bind(lsn, (struct sockaddr *)&a, sizeof a) == 0 && listen(lsn, 4) == 0, "listen");
    sem_init(&sem, 0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;

    current_probe = "1: the only thread, SIGALRM";
    struct sigaction prev;
    sigaction(SIGALRM, &sa, &prev); /* the watchdog is off meanwhile */
    int returned = rounds(1);
    sigaction(SIGALRM, &prev, NULL);
    alarm(60);
    printf("1: %d calls, %d returned, %d jumped out of\n", ROUNDS * KINDS, returned, jumps);

    current_probe = "2: a second thread, pthread_kill";
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t w;
    REQUIRE(pthread_create(&w, NULL, worker, NULL) == 0, "create");
    for (;;) {
        while (waiting == 0)
            usleep(200);
        if (waiting < 0)
            break;
        waiting = 0;
        usleep(2000); /* it blocks meanwhile */
        pthread_kill(w, SIGUSR1);
    }
    void *r = NULL;
    pthread_join(w, &r);
    printf("2: %d calls, %ld returned, %ld jumped out of\n", ROUNDS * KINDS,
           (long)(intptr_t)r / 1000, (long)(intptr_t)r % 1000);

    current_probe = "3: the objects afterwards";
    char b[8] = {0};
    pthread_t t;
    pthread_create(&t, NULL, late_writer, (void *)(intptr_t)pfd[1]);
    int n = (int)read(pfd[0], b, sizeof b);
    pthread_join(t, NULL);
    printf("3: pipe read %d \"%s\"\n", n, b);
    memset(b, 0, sizeof b);
    pthread_create(&t, NULL, late_writer, (void *)(intptr_t)sv[1]);
    n = (int)recv(sv[0], b, sizeof b, 0);
    pthread_join(t, NULL);
    printf("3: socket recv %d \"%s\"\n", n, b);
    sem_post(&sem);
    printf("3: semaphore %d, mutex %d\n", sem_trywait(&sem), pthread_mutex_trylock(&mu));
    pthread_mutex_unlock(&mu);
    alarm(0);
    return probe_exit("jump_timeouts");
}
