/* nowait_calls — calls that cannot wait (a zero timeout, MSG_DONTWAIT) made in a
 * loop beside other threads.
 *
 * 1. EINTR: a thread calls poll, ppoll, select, pselect and epoll_wait with a zero
 *    timeout on idle sockets (and recv with MSG_DONTWAIT) in a loop while two
 *    threads spin, for a fixed number of calls. Natively nothing interrupts them,
 *    so none fails. Under bobbin before 2026-11-26 the preemption signal that
 *    sysmon sends to a thread that keeps its processor landed inside such calls
 *    and the kernel made poll, select and epoll_wait fail with EINTR, whatever
 *    SA_RESTART says (privoxy's poll failed so and its client got an empty reply).
 * 2. A sleeper among such loops: main sleeps 50 ms (nanosleep) while a thread loops
 *    on one kind of call until main, awake, tells it to stop. With
 *    BOBBIN_MAXPROCS=1 the loop held the only processor for ever: those calls were
 *    no preemption point and the signal always found the thread in libc or the
 *    kernel, so main's expired timer never ran (the watchdog fails the test).
 *
 * 3. A sleeper beside three threads that loop on pread of a regular file (inside
 *    entersyscall, so mostly in the kernel): under bobbin before 2026-11-26, at
 *    BOBBIN_MAXPROCS=1 one of them kept the processor for ever (sysmon asked only a
 *    running thread to yield, and these were in a system call whenever it looked):
 *    the other two never started and the sleeper never woke (fio's psync jobs).
 *
 * stdout: the EINTR count of each kind (0) and one line per sleeper round; no times.
 */
#define PROBE_NAME "nowait_calls"
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

enum { CALLS = 200000, KINDS = 6 };
static const char *const kind_name[KINDS] = {"poll", "ppoll", "select", "pselect", "epoll_wait",
                                             "recv_dontwait"};

static int sv[2][2], ep;
static atomic_int stop_spin, stop_loop;

/* one call of a kind on the idle sockets: 0 nothing ready, -1 with errno */
static int one_call(int kind)
{
    struct pollfd p[2] = {{sv[0][0], POLLIN, 0}, {sv[1][0], POLLIN, 0}};
    struct timespec zts = {0, 0};
    struct timeval ztv = {0, 0};
    fd_set r;
    FD_ZERO(&r);
    FD_SET(sv[0][0], &r);
    FD_SET(sv[1][0], &r);
    int nfds = (sv[0][0] > sv[1][0] ? sv[0][0] : sv[1][0]) + 1;
    struct epoll_event ev;
    char c;
    switch (kind) {
    case 0: return poll(p, 2, 0);
    case 1: return ppoll(p, 2, &zts, NULL);
    case 2: return select(nfds, &r, NULL, NULL, &ztv);
    case 3: return pselect(nfds, &r, NULL, NULL, &zts, NULL);
    case 4: return epoll_wait(ep, &ev, 1, 0);
    default: {
        ssize_t n = recv(sv[0][0], &c, 1, MSG_DONTWAIT);
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : (int)n;
    }
    }
}

static int filefd;

static void *preader(void *arg)
{
    (void)arg;
    char buf[4096];
    long n = 0;
    while (!atomic_load(&stop_loop)) {
        ssize_t r = pread(filefd, buf, sizeof buf, (off_t)(n++ % 4) * 4096);
        CHECK(r > 0, "pread: %zd (%s)", r, strerror(errno));
    }
    return NULL;
}

static void *looper(void *arg)
{
    int kind = (int)(intptr_t)arg;
    while (!atomic_load(&stop_loop)) {
        int r = one_call(kind);
        CHECK(r == 0, "%s in the sleeper's round: %d (%s)", kind_name[kind], r, strerror(errno));
    }
    return NULL;
}

int main(void)
{
    REQUIRE(probe_on_signal(SIGALRM, on_alarm, 0) == 0, "sigaction");
    alarm(60);
    for (int i = 0; i < 2; i++)
        REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]) == 0, "socketpair");
    ep = epoll_create1(0);
    REQUIRE(ep >= 0, "epoll_create1");
    struct epoll_event e = {.events = EPOLLIN, .data.fd = sv[0][0]};
    REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, sv[0][0], &e) == 0, "epoll_ctl");

    /* 1. no EINTR from anybody's signal but the program's (it sends none) */
    pthread_t sp[2];
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&sp[i], NULL, probe_spin, &stop_spin) == 0, "pthread_create");
    for (int kind = 0; kind < KINDS; kind++) {
        current_probe = kind_name[kind];
        long eintr = 0, other = 0;
        for (long i = 0; i < CALLS; i++) {
            int r = one_call(kind);
            if (r < 0 && errno == EINTR)
                eintr++;
            else if (r != 0)
                other++;
        }
        CHECK(eintr == 0, "%s: %ld of %d calls failed with EINTR", kind_name[kind], eintr, CALLS);
        CHECK(other == 0, "%s: %ld calls found something or failed", kind_name[kind], other);
        printf("%s: eintr %ld other %ld\n", kind_name[kind], eintr, other);
    }
    atomic_store(&stop_spin, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(sp[i], NULL);

    /* 2. a sleeper wakes beside a thread that loops on each kind */
    for (int kind = 0; kind < KINDS; kind++) {
        current_probe = kind_name[kind];
        atomic_store(&stop_loop, 0);
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, looper, (void *)(intptr_t)kind) == 0, "pthread_create");
        struct timespec ts = {0, 50 * 1000 * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        atomic_store(&stop_loop, 1);
        pthread_join(t, NULL);
        printf("sleeper beside %s: woke\n", kind_name[kind]);
    }
    /* 3. a sleeper beside threads looping on pread */
    current_probe = "pread";
    filefd = open("/proc/self/exe", O_RDONLY);
    REQUIRE(filefd >= 0, "open");
    atomic_store(&stop_loop, 0);
    pthread_t pr[3];
    for (int i = 0; i < 3; i++)
        REQUIRE(pthread_create(&pr[i], NULL, preader, NULL) == 0, "pthread_create");
    struct timespec ts = {0, 50 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    atomic_store(&stop_loop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(pr[i], NULL);
    printf("sleeper beside 3 pread loops: woke\n");
    close(filefd);
    return probe_exit(PROBE_NAME);
}
