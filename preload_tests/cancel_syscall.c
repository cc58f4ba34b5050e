/* cancel_syscall — pthread_cancel of a thread blocked in a cancellation point
 * that bobbin runs inside entersyscall (the call really sleeps in the kernel,
 * on its own OS thread): waitpid, pause, sigwait, sigsuspend, open of a FIFO
 * with no writer, msgrcv on an empty SysV queue, mq_receive on an empty POSIX
 * queue, and fcntl(F_SETLKW) and lockf(F_LOCK) on a record another process
 * holds.
 *
 * Natively NPTL's SIGCANCEL interrupts the system call and the thread unwinds
 * at once. Each probe starts a thread that pushes a counting cleanup handler
 * and blocks; main cancels it 20 ms later and joins with a 5 s deadline
 * (pthread_timedjoin_np). Expected: PTHREAD_CANCELED, one cleanup run, the
 * code after the call never reached. When the join times out the probe prints
 * so (never natively), then unblocks the call the way the program can (kills
 * the waited-for child, removes the queue, opens the FIFO for writing) and
 * reports what the thread did then; pause, sigwait and sigsuspend cannot be
 * unblocked without a signal the thread would see, so those threads are left
 * where they are and exit() ends them.
 */
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/msg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "cancel_syscall"
#include "probe.h"

enum point {
    P_WAITPID, P_PAUSE, P_SIGWAIT, P_SIGSUSPEND, P_FIFO_OPEN, P_MSGRCV, P_MQ_RECEIVE,
    P_FCNTL_LOCK, P_LOCKF, NPOINTS
};
static const char *const point_name[NPOINTS] = {
    "waitpid", "pause", "sigwait", "sigsuspend", "open(FIFO)", "msgrcv", "mq_receive",
    "fcntl(SETLKW)", "lockf",
};

static pid_t child;
static char fifo_path[64];
static int msqid = -1;
static mqd_t mq = (mqd_t)-1;
static char mq_name[64], lock_path[64];
static int lock_fd = -1; /* the child holds a write lock on the whole file */

struct blocker {
    enum point point;
    atomic_int about_to_block, cleanups, after;
};

static void count_cleanup(void *arg)
{
    struct blocker *b = arg;
    atomic_fetch_add(&b->cleanups, 1);
}

static void *block_thread(void *arg)
{
    struct blocker *b = arg;
    pthread_cleanup_push(count_cleanup, b);
    atomic_store(&b->about_to_block, 1);
    switch (b->point) {
    case P_WAITPID:
        waitpid(child, NULL, 0);
        break;
    case P_PAUSE:
        pause();
        break;
    case P_SIGWAIT: {
        sigset_t set;
        int sig;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        sigwait(&set, &sig);
        break;
    }
    case P_SIGSUSPEND: {
        sigset_t cur;
        pthread_sigmask(SIG_BLOCK, NULL, &cur); /* SIGUSR1 stays blocked */
        sigsuspend(&cur);
        break;
    }
    case P_FIFO_OPEN: {
        int fd = open(fifo_path, O_RDONLY);
        if (fd >= 0)
            close(fd);
        break;
    }
    case P_MSGRCV: {
        struct {
            long type;
            char text[16];
        } msg;
        msgrcv(msqid, &msg, sizeof msg.text, 0, 0);
        break;
    }
    case P_MQ_RECEIVE: {
        char buf[64];
        mq_receive(mq, buf, sizeof buf, NULL);
        break;
    }
    case P_FCNTL_LOCK: {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        fcntl(lock_fd, F_SETLKW, &fl);
        break;
    }
    case P_LOCKF:
        lockf(lock_fd, F_LOCK, 0);
        break;
    case NPOINTS:
        break;
    }
    atomic_store(&b->after, 1);
    pthread_cleanup_pop(0);
    return (void *)1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int join_within(pthread_t t, void **ret, int seconds)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += seconds;
    return pthread_timedjoin_np(t, ret, &dl);
}

/* lets the call return, if the program can */
static int unblock(enum point pt)
{
    switch (pt) {
    case P_WAITPID:
        kill(child, SIGKILL);
        return 1;
    case P_FIFO_OPEN: {
        int fd = open(fifo_path, O_WRONLY | O_NONBLOCK);
        if (fd >= 0)
            close(fd);
        return 1;
    }
    case P_MSGRCV:
        msgctl(msqid, IPC_RMID, NULL);
        msqid = -1;
        return 1;
    case P_MQ_RECEIVE:
        mq_send(mq, "x", 1, 0);
        return 1;
    case P_FCNTL_LOCK:
    case P_LOCKF:
        kill(child, SIGKILL); /* its lock goes with it */
        return 1;
    default:
        return 0;
    }
}

static void probe(enum point pt)
{
    current_probe = point_name[pt];
    static struct blocker bs[NPOINTS];
    struct blocker *b = &bs[pt];
    b->point = pt;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, block_thread, b) == 0, "pthread_create");
    while (!atomic_load(&b->about_to_block))
        sleep_ms(1);
    sleep_ms(20);
    int rc = pthread_cancel(t);
    void *ret = NULL;
    int jr = join_within(t, &ret, 5);
    if (jr == 0) {
        printf("%-12s cancel=%d canceled=%d cleanups=%d after=%d\n", point_name[pt], rc,
               ret == PTHREAD_CANCELED, atomic_load(&b->cleanups), atomic_load(&b->after));
        CHECK(ret == PTHREAD_CANCELED && atomic_load(&b->cleanups) == 1 &&
                  atomic_load(&b->after) == 0,
              "%s: join value %p, %d cleanups, after=%d", point_name[pt], ret,
              atomic_load(&b->cleanups), atomic_load(&b->after));
    } else {
        printf("%-12s cancel=%d NOT CANCELLED within 5 s (join %s)\n", point_name[pt], rc,
               strerrorname_np(jr));
        CHECK(0, "%s: the thread blocked in the call was not cancelled within 5 s "
              "(pthread_cancel did not interrupt the system call)", point_name[pt]);
        if (unblock(pt)) {
            jr = join_within(t, &ret, 3);
            printf("%-12s after unblocking it: join=%s canceled=%d cleanups=%d after=%d\n",
                   point_name[pt], jr ? strerrorname_np(jr) : "0", jr == 0 &&
                   ret == PTHREAD_CANCELED, atomic_load(&b->cleanups), atomic_load(&b->after));
            CHECK(jr == 0 && ret == PTHREAD_CANCELED && atomic_load(&b->after) == 0,
                  "%s: once the call returned, the pending cancel still did not act "
                  "(join %d, value %p, after=%d)", point_name[pt], jr, ret,
                  atomic_load(&b->after));
        }
    }
    fflush(stdout);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(110);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL); /* inherited: sigwait's signal */

    snprintf(lock_path, sizeof lock_path, "/tmp/bobbin-cancel-lock-%d", (int)getpid());
    lock_fd = open(lock_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    REQUIRE(lock_fd >= 0, "open %s: %s", lock_path, strerror(errno));
    fflush(stdout);
    child = fork();
    REQUIRE(child >= 0, "fork");
    if (child == 0) {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(lock_fd, F_SETLK, &fl) != 0)
            _exit(1);
        sleep(60);
        _exit(0);
    }
    for (int i = 0; i < 5000; i++) { /* until the child holds its lock */
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(lock_fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK)
            break;
        sleep_ms(1);
    }
    snprintf(mq_name, sizeof mq_name, "/bobbin-cancel-%d", (int)getpid());
    struct mq_attr ma = {.mq_maxmsg = 4, .mq_msgsize = 64};
    mq = mq_open(mq_name, O_RDWR | O_CREAT | O_EXCL, 0600, &ma);
    REQUIRE(mq != (mqd_t)-1, "mq_open %s: %s", mq_name, strerror(errno));
    snprintf(fifo_path, sizeof fifo_path, "/tmp/bobbin-cancel-fifo-%d", (int)getpid());
    unlink(fifo_path);
    REQUIRE(mkfifo(fifo_path, 0600) == 0, "mkfifo %s: %s", fifo_path, strerror(errno));
    msqid = msgget(IPC_PRIVATE, 0600 | IPC_CREAT);
    if (msqid < 0) {
        fprintf(stderr, "cancel_syscall: msgget: %s (no SysV IPC: skipped)\n",
                strerror(errno));
        unlink(fifo_path);
        unlink(lock_path);
        mq_unlink(mq_name);
        kill(child, SIGKILL);
        return PROBE_SKIP;
    }

    for (int pt = 0; pt < NPOINTS; pt++)
        probe((enum point)pt);

    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    unlink(fifo_path);
    unlink(lock_path);
    mq_close(mq);
    mq_unlink(mq_name);
    if (msqid >= 0)
        msgctl(msqid, IPC_RMID, NULL);
    alarm(0);
    /* threads still blocked in pause/sigwait/sigsuspend end with the process */
    exit(probe_exit("cancel_syscall"));
}
