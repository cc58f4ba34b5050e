/* raw_syscalls — waits the program makes with its own syscall instruction, where
 * bobbin cannot interpose them (fio's io_uring engine, liburing, hand-written
 * wrappers), while other threads compute, so that bobbin's monitor wants the
 * processor of the waiting thread. Before 2026-11-27:
 *  - the signal that took the processor from a thread asleep in such a call cut
 *    the call short with EINTR where natively nothing interrupts it: a raw poll
 *    with no time-out returned -EINTR;
 *  - fio's io_uring jobs ended after a few writes (its inline io_uring_enter
 *    returned -EINTR, which fio took for "no events"), or hung;
 *  - a ring made with IORING_SETUP_SINGLE_ISSUER belongs to the OS thread that
 *    made it: once the thread was moved, io_uring_enter failed with EEXIST.
 *
 * 1. poll, ppoll and epoll_wait with no time-out, raw, on a pipe written 300 ms
 *    later: each returns 1.
 * 2. An io_uring (SINGLE_ISSUER|DEFER_TASKRUN where the kernel has them) made
 *    with syscall(): 200 reads of a pipe, each written 1 ms after its submission
 *    by another thread, waited for with a raw io_uring_enter; the thread sleeps
 *    and yields between reads. Every call succeeds and every read gets its byte.
 *    Prints "io_uring unavailable" where the kernel refuses the ring (the same
 *    natively).
 *
 * stdout: one line per call kind and one for the ring, the same natively.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define PROBE_NAME "raw_syscalls"
#include "probe.h"

#include <errno.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <sched.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_int stop_spin;

/* ---- 1. poll, ppoll, epoll_wait ---- */

static int pfd[2], ep;

static void *raw_waiter(void *arg)
{
    int kind = (int)(intptr_t)arg;
    struct pollfd p = {pfd[0], POLLIN, 0};
    struct epoll_event ev;
    long r;
    switch (kind) {
    case 0: r = probe_raw_syscall6(SYS_poll, (long)&p, 1, -1, 0, 0, 0); break;
    case 1: r = probe_raw_syscall6(SYS_ppoll, (long)&p, 1, 0, 0, 8, 0); break;
    default: r = probe_raw_syscall6(SYS_epoll_wait, ep, (long)&ev, 1, -1, 0, 0); break;
    }
    return (void *)(intptr_t)r;
}

static void part1(void)
{
    static const char *const name[3] = {"poll", "ppoll", "epoll_wait"};
    REQUIRE(pipe(pfd) == 0, "pipe");
    ep = epoll_create1(0);
    REQUIRE(ep >= 0, "epoll_create1");
    struct epoll_event e = {.events = EPOLLIN, .data.fd = pfd[0]};
    REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &e) == 0, "epoll_ctl");
    for (int kind = 0; kind < 3; kind++) {
        pthread_t w;
        REQUIRE(pthread_create(&w, NULL, raw_waiter, (void *)(intptr_t)kind) == 0, "create");
        usleep(300000); /* computing threads want the waiter's processor meanwhile */
        char c = 'x';
        REQUIRE(write(pfd[1], &c, 1) == 1, "write");
        void *res;
        pthread_join(w, &res);
        long r = (long)(intptr_t)res;
        CHECK(r == 1, "raw %s: %ld", name[kind], r);
        printf("raw %s: %ld\n", name[kind], r);
        REQUIRE(read(pfd[0], &c, 1) == 1, "read");
    }
    close(ep);
    close(pfd[0]);
    close(pfd[1]);
}

/* ---- 2. io_uring ---- */

static struct {
    int fd;
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
} ring;

static int upfd[2];
static sem_t go;
static atomic_int writer_stop;

static void *writer(void *arg)
{
    (void)arg;
    for (;;) {
        while (sem_wait(&go) != 0)
            ;
        if (atomic_load(&writer_stop))
            return NULL;
        usleep(1000);
        char c = 'y';
        CHECK(write(upfd[1], &c, 1) == 1, "writer: %s", strerror(errno));
    }
}

static int ring_setup(void)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int fd = (int)syscall(SYS_io_uring_setup, 4, &p);
    if (fd < 0 && errno == EINVAL) { /* a kernel before 6.1 */
        memset(&p, 0, sizeof p);
        fd = (int)syscall(SYS_io_uring_setup, 4, &p);
    }
    if (fd < 0)
        return -1;
    size_t sqlen = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cqlen = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(NULL, sqlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                    IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cqlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                    IORING_OFF_CQ_RING);
    void *sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    REQUIRE(sq != MAP_FAILED && cq != MAP_FAILED && sqes != MAP_FAILED, "mmap ring");
    ring.fd = fd;
    ring.sq_tail = (unsigned *)(sq + p.sq_off.tail);
    ring.sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    ring.sq_array = (unsigned *)(sq + p.sq_off.array);
    ring.cq_head = (unsigned *)(cq + p.cq_off.head);
    ring.cq_tail = (unsigned *)(cq + p.cq_off.tail);
    ring.cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    ring.sqes = sqes;
    ring.cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
}

static void *uring_thread(void *arg)
{
    (void)arg;
    if (ring_setup() != 0) {
        printf("io_uring unavailable\n");
        return NULL;
    }
    int reads = 0, failed = 0, wrong = 0;
    char buf[8];
    for (int i = 0; i < 200; i++) {
        unsigned tail = *ring.sq_tail, idx = tail & *ring.sq_mask;
        struct io_uring_sqe *s = &ring.sqes[idx];
        memset(s, 0, sizeof *s);
        s->opcode = IORING_OP_READ;
        s->fd = upfd[0];
        s->addr = (uintptr_t)buf;
        s->len = 1;
        s->off = (uint64_t)-1;
        s->user_data = (uint64_t)i + 1;
        ring.sq_array[idx] = idx;
        __atomic_store_n(ring.sq_tail, tail + 1, __ATOMIC_RELEASE);
        long r = probe_raw_syscall6(SYS_io_uring_enter, ring.fd, 1, 0, IORING_ENTER_GETEVENTS, 0, 0);
        if (r != 1) {
            failed++;
            CHECK(0, "submit %d: %ld", i, r);
            break;
        }
        sem_post(&go);
        for (;;) {
            unsigned head = *ring.cq_head;
            if (head != __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE)) {
                struct io_uring_cqe *c = &ring.cqes[head & *ring.cq_mask];
                if (c->user_data == (uint64_t)i + 1 && c->res == 1)
                    reads++;
                else
                    wrong++;
                __atomic_store_n(ring.cq_head, head + 1, __ATOMIC_RELEASE);
                break;
            }
            r = probe_raw_syscall6(SYS_io_uring_enter, ring.fd, 0, 1, IORING_ENTER_GETEVENTS, 0, 0);
            if (r < 0) {
                failed++;
                CHECK(0, "wait %d: %ld", i, r);
                if (failed > 5)
                    goto out;
            }
        }
        if (i % 2)
            sched_yield();
        else
            usleep(200); /* may come back on another OS thread */
    }
out:
    CHECK(wrong == 0, "%d completions not the read's", wrong);
    printf("io_uring: %d reads, %d failed calls\n", reads, failed);
    close(ring.fd);
    return NULL;
}

static void part2(void)
{
    REQUIRE(pipe(upfd) == 0, "pipe");
    REQUIRE(sem_init(&go, 0, 0) == 0, "sem_init");
    pthread_t w, u;
    REQUIRE(pthread_create(&w, NULL, writer, NULL) == 0, "create");
    REQUIRE(pthread_create(&u, NULL, uring_thread, NULL) == 0, "create");
    pthread_join(u, NULL);
    atomic_store(&writer_stop, 1);
    sem_post(&go);
    pthread_join(w, NULL);
}

int main(void)
{
    pthread_t sp[2];
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&sp[i], NULL, probe_spin, &stop_spin) == 0, "pthread_create");
    part1();
    part2();
    atomic_store(&stop_spin, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(sp[i], NULL);
    return probe_exit(PROBE_NAME);
}
