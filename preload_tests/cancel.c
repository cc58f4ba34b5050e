/* cancel — pthread_cancel with deferred cancellation at the cancellation points
 * a thread really waits in, and the cleanup handlers it runs on the way out.
 *
 * Each probe starts a thread that pushes a counting cleanup handler and then
 * blocks for ever at one cancellation point: read on an empty pipe, write on a
 * full pipe, recv on a socketpair, accept on a listening socket,
 * pthread_cond_wait (its cleanup handler unlocks the error-checking mutex: the
 * unlock must succeed, so the mutex was re-acquired before the handler ran, and
 * must be free afterwards), sleep, usleep, nanosleep, clock_nanosleep,
 * sem_wait, pthread_join, poll, select and epoll_wait. main waits until the
 * thread is about to block, gives it 20 ms to get there, cancels it and joins:
 * the join value must be PTHREAD_CANCELED, the handler must have run once, and
 * the code after the blocking call must never run.
 *
 * Also: a thread cancelled before it first runs; a thread joined by another
 * that is cancelled (the target stays joinable by main); nested handlers run
 * last-pushed first; pthread_cleanup_pop(1) runs a handler and pop(0) does
 * not; pthread_exit runs the handlers and keeps its own value; cancelling
 * oneself; pthread_setcancelstate(DISABLE) holds a request back across
 * cancellation points, ENABLE is not itself one, pthread_testcancel then acts;
 * pthread_cancel of a thread that already returned gives 0 and its join value
 * is its own; 60 threads spread over the blocking points cancelled at once.
 * A watchdog (alarm) turns a hang into exit 1, naming the probe.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PROBE_NAME "cancel"
#include "probe.h"

/* shared by the blocking points: nothing ever arrives on them */
static int pipe_empty[2], pipe_full[2], sockpair[2], listen_fd, epfd;
static sem_t sem_zero;
static pthread_mutex_t cmu;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int never; /* the condition variable's predicate, never true */

/* a thread that blocks until main lets it go: the target of the join probe */
static sem_t release_target;

enum point {
    P_READ, P_WRITE, P_RECV, P_ACCEPT, P_COND, P_SLEEP, P_USLEEP, P_NANOSLEEP,
    P_CLOCK_NANOSLEEP, P_SEM, P_JOIN, P_TIMEDJOIN, P_POLL, P_SELECT, P_EPOLL, NPOINTS
};
static const char *const point_name[NPOINTS] = {
    "read", "write", "recv", "accept", "cond_wait", "sleep", "usleep", "nanosleep",
    "clock_nanosleep", "sem_wait", "pthread_join", "pthread_timedjoin_np", "poll", "select",
    "epoll_wait",
};

struct blocker {
    enum point point;
    pthread_t join_target;  /* P_JOIN, P_TIMEDJOIN */
    atomic_int about_to_block;
    atomic_int cleanups;
    atomic_int after;        /* set after the blocking call: must stay 0 */
    int unlock_rc;           /* P_COND: what the handler's unlock returned */
};

static void count_cleanup(void *arg)
{
    struct blocker *b = arg;
    atomic_fetch_add(&b->cleanups, 1);
}

static void cond_cleanup(void *arg)
{
    struct blocker *b = arg;
    b->unlock_rc = pthread_mutex_unlock(&cmu);
    atomic_fetch_add(&b->cleanups, 1);
}

static void block_at(struct blocker *b)
{
    char c;
    atomic_store(&b->about_to_block, 1);
    switch (b->point) {
    case P_READ:
        (void)!read(pipe_empty[0], &c, 1);
        break;
    case P_WRITE: {
        static char big[65536];
        for (;;)
            (void)!write(pipe_full[1], big, sizeof big);
    }
    case P_RECV:
        (void)!recv(sockpair[0], &c, 1, 0);
        break;
    case P_ACCEPT:
        (void)!accept(listen_fd, NULL, NULL);
        break;
    case P_COND:
        break; /* in cond_thread */
    case P_SLEEP:
        sleep(1000);
        break;
    case P_USLEEP:
        for (;;)
            usleep(900000);
    case P_NANOSLEEP: {
        struct timespec ts = {1000, 0};
        nanosleep(&ts, NULL);
        break;
    }
    case P_CLOCK_NANOSLEEP: {
        struct timespec ts = {1000, 0};
        clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
        break;
    }
    case P_SEM:
        sem_wait(&sem_zero);
        break;
    case P_JOIN:
        pthread_join(b->join_target, NULL);
        break;
    case P_TIMEDJOIN: {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 1000;
        pthread_timedjoin_np(b->join_target, NULL, &dl);
        break;
    }
    case P_POLL: {
        struct pollfd pfd = {.fd = pipe_empty[0], .events = POLLIN};
        poll(&pfd, 1, -1);
        break;
    }
    case P_SELECT: {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(pipe_empty[0], &rd);
        select(pipe_empty[0] + 1, &rd, NULL, NULL, NULL);
        break;
    }
    case P_EPOLL: {
        struct epoll_event ev;
        epoll_wait(epfd, &ev, 1, -1);
        break;
    }
    case NPOINTS:
        break;
    }
    atomic_store(&b->after, 1);
}

static void *block_thread(void *arg)
{
    struct blocker *b = arg;
    if (b->point == P_COND) {
        pthread_mutex_lock(&cmu);
        pthread_cleanup_push(cond_cleanup, b);
        atomic_store(&b->about_to_block, 1);
        while (!never)
            pthread_cond_wait(&cv, &cmu);
        atomic_store(&b->after, 1);
        pthread_cleanup_pop(1);
        return NULL;
    }
    pthread_cleanup_push(count_cleanup, b);
    block_at(b);
    pthread_cleanup_pop(0);
    return (void *)1;
}

static void *join_target_thread(void *arg)
{
    (void)arg;
    sem_wait(&release_target);
    return (void *)77;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void wait_flag(atomic_int *f)
{
    while (!atomic_load(f))
        sleep_ms(1);
}

/* one thread, one blocking point: cancel it there */
static void probe_point(enum point pt)
{
    char what[64];
    snprintf(what, sizeof what, "blocked in %s", point_name[pt]);
    current_probe = point_name[pt];
    struct blocker b = {.point = pt};
    pthread_t target = 0, t;
    int joins = pt == P_JOIN || pt == P_TIMEDJOIN;
    if (joins)
        REQUIRE(pthread_create(&target, NULL, join_target_thread, NULL) == 0, "create");
    b.join_target = target;
    REQUIRE(pthread_create(&t, NULL, block_thread, &b) == 0, "pthread_create");
    wait_flag(&b.about_to_block);
    sleep_ms(20);
    int rc = pthread_cancel(t);
    void *ret = NULL;
    int jr = pthread_join(t, &ret);
    int canceled = jr == 0 && ret == PTHREAD_CANCELED;
    printf("%-28s cancel=%d join=%d canceled=%d cleanups=%d after=%d\n", what, rc, jr,
           canceled, atomic_load(&b.cleanups), atomic_load(&b.after));
    CHECK(rc == 0 && jr == 0 && canceled, "%s: cancel %d join %d ret %p", what, rc, jr, ret);
    CHECK(atomic_load(&b.cleanups) == 1, "%s: %d cleanup runs", what,
          atomic_load(&b.cleanups));
    CHECK(atomic_load(&b.after) == 0, "%s: the code after the call ran", what);
    if (pt == P_COND) {
        int tl = pthread_mutex_trylock(&cmu);
        printf("%-28s handler unlock=%d mutex free afterwards=%d\n", what, b.unlock_rc,
               tl == 0);
        CHECK(b.unlock_rc == 0, "cond_wait: the handler's unlock returned %d (the mutex "
              "was not re-acquired before the cleanup handler)", b.unlock_rc);
        CHECK(tl == 0, "cond_wait: the mutex is still held after the cancel (trylock %d)", tl);
        if (tl == 0)
            pthread_mutex_unlock(&cmu);
    }
    if (joins) {
        /* the cancelled joiner gave up: main can still join the target */
        sem_post(&release_target);
        void *tv = NULL;
        int r2 = pthread_join(target, &tv);
        printf("%-28s target joined by main=%d value=%ld\n", what, r2, (long)(intptr_t)tv);
        CHECK(r2 == 0 && tv == (void *)77, "join target after the cancelled joiner: %d %p",
              r2, tv);
    }
    if (pt == P_WRITE) { /* empty the pipe for nobody: just drain what is there */
        char buf[4096];
        while (read(pipe_full[0], buf, sizeof buf) > 0)
            ;
    }
}

/* cancelled before it ever ran: acts at its first cancellation point */
static atomic_int early_cleanups, early_started;
static void early_cleanup(void *arg)
{
    (void)arg;
    atomic_fetch_add(&early_cleanups, 1);
}
static void *early_thread(void *arg)
{
    (void)arg;
    atomic_store(&early_started, 1);
    pthread_cleanup_push(early_cleanup, NULL);
    sleep_ms(1000);
    atomic_store(&early_started, 2);
    pthread_cleanup_pop(0);
    return NULL;
}

/* nested handlers: order of runs, pop(1) and pop(0) */
static char order[16];
static atomic_int norder;
static void record(void *arg)
{
    order[atomic_fetch_add(&norder, 1)] = (char)(intptr_t)arg;
}
static void *nested_thread(void *arg)
{
    int mode = (int)(intptr_t)arg; /* 0: cancel, 1: pthread_exit, 2: return */
    pthread_cleanup_push(record, (void *)'a');
    pthread_cleanup_push(record, (void *)'b');
    pthread_cleanup_push(record, (void *)'x');
    pthread_cleanup_pop(1); /* runs x now */
    pthread_cleanup_push(record, (void *)'y');
    pthread_cleanup_pop(0); /* y never runs */
    pthread_cleanup_push(record, (void *)'c');
    if (mode == 0) {
        pthread_cancel(pthread_self()); /* self: nothing happens until ... */
        record((void *)'-');
        pthread_testcancel(); /* ... here */
        record((void *)'!');
    } else if (mode == 1) {
        pthread_exit((void *)123);
    }
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    return (void *)456;
}

static void probe_nested(int mode, const char *what, void *want, const char *want_order)
{
    current_probe = what;
    atomic_store(&norder, 0);
    memset(order, 0, sizeof order);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, nested_thread, (void *)(intptr_t)mode) == 0, "create");
    void *ret = NULL;
    int jr = pthread_join(t, &ret);
    const char *rs = ret == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : NULL;
    char num[32];
    if (!rs) {
        snprintf(num, sizeof num, "%ld", (long)(intptr_t)ret);
        rs = num;
    }
    printf("%-28s join=%d value=%s handlers ran: %s\n", what, jr, rs, order);
    CHECK(jr == 0 && ret == want, "%s: join %d value %p", what, jr, ret);
    CHECK(strcmp(order, want_order) == 0, "%s: handlers and marks ran as \"%s\", want \"%s\""
          "%s", what, order, want_order,
          mode == 0 ? " (a '-' is recorded between pthread_cancel(pthread_self()) and "
                      "pthread_testcancel: deferred cancellation must wait for the "
                      "cancellation point)" : "");
}

/* DISABLE holds the request back; ENABLE is no cancellation point; testcancel acts */
static atomic_int dis_ready, dis_go, dis_survived, dis_after_enable, dis_after_test,
    dis_cleanups;
static int dis_old_state = -1, dis_old_state2 = -1;
static void dis_cleanup(void *arg)
{
    (void)arg;
    atomic_fetch_add(&dis_cleanups, 1);
}
static void *disable_thread(void *arg)
{
    (void)arg;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &dis_old_state);
    pthread_cleanup_push(dis_cleanup, NULL);
    atomic_store(&dis_ready, 1);
    while (!atomic_load(&dis_go))
        sleep_ms(1); /* cancellation points, all disabled */
    /* more of them, with the request pending */
    sleep_ms(5);
    usleep(1000);
    struct pollfd pfd = {.fd = pipe_empty[0], .events = POLLIN};
    poll(&pfd, 1, 5);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += 5000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    sem_timedwait(&sem_zero, &dl);
    pthread_testcancel();
    atomic_store(&dis_survived, 1);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &dis_old_state2);
    atomic_store(&dis_after_enable, 1);
    pthread_testcancel();
    atomic_store(&dis_after_test, 1);
    pthread_cleanup_pop(0);
    return NULL;
}

static void probe_disable(void)
{
    current_probe = "setcancelstate";
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, disable_thread, NULL) == 0, "create");
    wait_flag(&dis_ready);
    int rc = pthread_cancel(t);
    atomic_store(&dis_go, 1);
    void *ret = NULL;
    int jr = pthread_join(t, &ret);
    printf("%-28s cancel=%d join=%d canceled=%d old states %s,%s survived disabled points=%d "
           "ran after ENABLE=%d after testcancel=%d cleanups=%d\n",
           "setcancelstate DISABLE", rc, jr, ret == PTHREAD_CANCELED,
           dis_old_state == PTHREAD_CANCEL_ENABLE ? "ENABLE" : "?",
           dis_old_state2 == PTHREAD_CANCEL_DISABLE ? "DISABLE" : "?",
           atomic_load(&dis_survived), atomic_load(&dis_after_enable),
           atomic_load(&dis_after_test), atomic_load(&dis_cleanups));
    CHECK(rc == 0 && jr == 0 && ret == PTHREAD_CANCELED, "disable: cancel %d join %d %p", rc,
          jr, ret);
    CHECK(atomic_load(&dis_survived) == 1, "disable: cancelled while disabled");
    CHECK(atomic_load(&dis_after_enable) == 1, "disable: ENABLE acted as a cancellation point");
    CHECK(atomic_load(&dis_after_test) == 0, "disable: testcancel after ENABLE did not act");
    CHECK(atomic_load(&dis_cleanups) == 1, "disable: %d cleanups", atomic_load(&dis_cleanups));
}

static void *finished_thread(void *arg)
{
    (void)arg;
    return (void *)99;
}

static void probe_finished(void)
{
    current_probe = "cancel a finished thread";
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, finished_thread, NULL) == 0, "create");
    /* wait until it has certainly returned: tryjoin would reap it, so poll
     * its state by sleeping a while */
    sleep_ms(50);
    int rc = pthread_cancel(t);
    void *ret = NULL;
    int jr = pthread_join(t, &ret);
    printf("%-28s cancel=%d join=%d value=%ld\n", "cancel a finished thread", rc, jr,
           (long)(intptr_t)ret);
    CHECK(rc == 0, "cancel of a finished thread returned %d", rc);
    CHECK(jr == 0 && ret == (void *)99, "finished: join %d value %p", jr, ret);
}

/* A request held back: the thread disables cancellation, says it is ready,
 * waits until main has cancelled it, and enables it again (no cancellation
 * point), so its next call meets a request already pending. */
static atomic_int held_ready, held_go;
static void hold_back_request(void)
{
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    atomic_store(&held_ready, 1);
    while (!atomic_load(&held_go))
        sched_yield();
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
}

/* main's side: start fn, cancel it once it holds the request back, let it
 * go on, join it. Returns pthread_cancel's result; *jr and *ret the join's. */
static int cancel_held(void *(*fn)(void *), void *arg, int *jr, void **ret)
{
    atomic_store(&held_ready, 0);
    atomic_store(&held_go, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, fn, arg) == 0, "create");
    wait_flag(&held_ready);
    int rc = pthread_cancel(t);
    atomic_store(&held_go, 1);
    *ret = NULL;
    *jr = pthread_join(t, ret);
    return rc;
}

/* sem_wait and sem_timedwait are cancellation points even when a token is
 * there (POSIX "shall occur"; NPTL tests before it takes one), and so is a
 * clock_nanosleep of 0: a thread with a request pending (held back by
 * DISABLE until then) is cancelled at the call and leaves the token */
static sem_t sem_one;
static atomic_int tok_took;
static void *token_thread(void *arg)
{
    int timed = (int)(intptr_t)arg;
    hold_back_request();
    if (timed == 2) {
        struct timespec zero = {0, 0};
        clock_nanosleep(CLOCK_MONOTONIC, 0, &zero, NULL); /* no wait, still a point */
    } else if (timed) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 5;
        if (sem_timedwait(&sem_one, &dl) == 0)
            atomic_store(&tok_took, 1);
    } else if (sem_wait(&sem_one) == 0) {
        atomic_store(&tok_took, 1);
    }
    return NULL;
}

static void probe_token(int timed)
{
    const char *what = timed == 2 ? "clock_nanosleep of 0"
                       : timed    ? "sem_timedwait with a token"
                                  : "sem_wait with a token";
    current_probe = what;
    sem_init(&sem_one, 0, 1);
    atomic_store(&tok_took, 0);
    int jr;
    void *ret;
    int rc = cancel_held(token_thread, (void *)(intptr_t)timed, &jr, &ret);
    int left = -1;
    sem_getvalue(&sem_one, &left);
    printf("%-28s cancel=%d join=%d canceled=%d took=%d tokens left=%d\n", what, rc, jr,
           ret == PTHREAD_CANCELED, atomic_load(&tok_took), left);
    CHECK(rc == 0 && jr == 0 && ret == PTHREAD_CANCELED, "%s: not cancelled (%d %d %p)", what,
          rc, jr, ret);
    CHECK(left == 1, "%s: the token was taken", what);
    sem_destroy(&sem_one);
}

/* pthread_join of a thread that has already ended waits for nothing and is
 * no cancellation point then (NPTL looks at the request only while it
 * waits): a joiner with a request pending gets the value, then is
 * cancelled at its next cancellation point */
static pthread_t ended;
static atomic_int ej_joined;
static void *ended_thread(void *arg)
{
    (void)arg;
    return (void *)77;
}
static void *ended_joiner(void *arg)
{
    (void)arg;
    hold_back_request();
    void *v = NULL;
    if (pthread_join(ended, &v) == 0 && v == (void *)77)
        atomic_store(&ej_joined, 1);
    pthread_testcancel();
    return NULL;
}

static void probe_join_ended(void)
{
    current_probe = "join an ended thread, cancel pending";
    REQUIRE(pthread_create(&ended, NULL, ended_thread, NULL) == 0, "create");
    sleep_ms(50); /* it has certainly returned */
    int jr;
    void *ret;
    int rc = cancel_held(ended_joiner, NULL, &jr, &ret);
    printf("%-28s cancel=%d join=%d canceled=%d joined first=%d\n", "join ended, cancel pending",
           rc, jr, ret == PTHREAD_CANCELED, atomic_load(&ej_joined));
    CHECK(rc == 0 && jr == 0 && ret == PTHREAD_CANCELED, "join ended: %d %d %p", rc, jr, ret);
    CHECK(atomic_load(&ej_joined) == 1, "join ended: cancelled in a join that did not wait");
}

/* many threads over the blocking points, cancelled together */
enum { NMANY = 60 };
static void probe_many(void)
{
    current_probe = "many";
    static struct blocker bs[NMANY];
    static pthread_t ts[NMANY];
    static const enum point pts[] = {P_READ, P_RECV, P_COND, P_SLEEP, P_NANOSLEEP,
                                     P_SEM, P_POLL, P_SELECT, P_EPOLL, P_USLEEP};
    int npts = (int)(sizeof pts / sizeof *pts);
    for (int i = 0; i < NMANY; i++) {
        bs[i].point = pts[i % npts];
        REQUIRE(pthread_create(&ts[i], NULL, block_thread, &bs[i]) == 0, "create");
    }
    for (int i = 0; i < NMANY; i++)
        wait_flag(&bs[i].about_to_block);
    sleep_ms(30);
    int nok = 0, ncleanup = 0, nafter = 0;
    for (int i = 0; i < NMANY; i++)
        CHECK(pthread_cancel(ts[i]) == 0, "cancel %d", i);
    for (int i = 0; i < NMANY; i++) {
        void *ret = NULL;
        if (pthread_join(ts[i], &ret) == 0 && ret == PTHREAD_CANCELED)
            nok++;
        else
            CHECK(0, "many: thread %d (%s) not cancelled: %p", i, point_name[bs[i].point], ret);
        ncleanup += atomic_load(&bs[i].cleanups);
        nafter += atomic_load(&bs[i].after);
    }
    int tl = pthread_mutex_trylock(&cmu);
    if (tl == 0)
        pthread_mutex_unlock(&cmu);
    printf("%d threads over %d points     canceled=%d cleanups=%d after=%d mutex free=%d\n",
           NMANY, npts, nok, ncleanup, nafter, tl == 0);
    CHECK(nok == NMANY && ncleanup == NMANY && nafter == 0 && tl == 0, "many");
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    signal(SIGPIPE, SIG_IGN);

    REQUIRE(pipe(pipe_empty) == 0 && pipe(pipe_full) == 0, "pipe");
    REQUIRE(fcntl(pipe_full[0], F_SETFL, O_NONBLOCK) == 0, "fcntl");
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sockpair) == 0, "socketpair");
    listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "bobbin-cancel-%d", (int)getpid());
    REQUIRE(bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind");
    REQUIRE(listen(listen_fd, 4) == 0, "listen");
    epfd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    REQUIRE(epoll_ctl(epfd, EPOLL_CTL_ADD, pipe_empty[0], &ev) == 0, "epoll_ctl");
    sem_init(&sem_zero, 0, 0);
    sem_init(&release_target, 0, 0);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&cmu, &ma);

    for (int pt = 0; pt < NPOINTS; pt++)
        probe_point((enum point)pt);

    current_probe = "cancelled before it ran";
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, early_thread, NULL) == 0, "create");
    int rc = pthread_cancel(t);
    void *ret = NULL;
    int jr = pthread_join(t, &ret);
    printf("%-28s cancel=%d join=%d canceled=%d cleanups=%d after=%d\n",
           "cancelled before it ran", rc, jr, ret == PTHREAD_CANCELED,
           atomic_load(&early_cleanups), atomic_load(&early_started) == 2);
    /* natively the thread may be cancelled before it starts (no cleanup
     * pushed yet) or at its sleep: both end with PTHREAD_CANCELED */
    CHECK(rc == 0 && jr == 0 && ret == PTHREAD_CANCELED, "early: %d %d %p", rc, jr, ret);
    CHECK(atomic_load(&early_started) != 2, "early: the thread slept through its cancel");

    probe_nested(0, "nested handlers, cancel", PTHREAD_CANCELED, "x-cba");
    probe_nested(1, "nested handlers, pthread_exit", (void *)123, "xcba");
    probe_nested(2, "nested handlers, return", (void *)456, "x");
    probe_disable();
    probe_finished();
    probe_token(0);
    probe_token(1);
    probe_token(2);
    probe_join_ended();
    probe_many();

    alarm(0);
    return probe_exit("cancel");
}
