/*
 * netpoll.c — the epoll network poller (Go's netpoll.go + netpoll_epoll.go).
 *
 * Every fd the program waits on gets a poll descriptor (bb_pd) in a
 * two-level table indexed by fd. The fd is registered edge-triggered for
 * reading and writing on its first would-block; each edge sets a "ready"
 * latch for that direction, or readies the G parked on it. A waiter consumes
 * the latch, retries its call, and parks again on EAGAIN: an edge between
 * the EAGAIN and the park is never lost because both the latch and the
 * parked G are under pd->lock.
 *
 * Who calls epoll_wait: an M with nothing to do becomes the poll sleeper
 * (timer.c, bb_poll_sleep) and blocks in epoll_wait until the next timer;
 * findrunnable polls without blocking when nobody sleeps in it; sysmon polls
 * when nobody has for 10 ms. An eventfd breaks the sleeper out early.
 *
 * close/dup2 on an fd with parked Gs wakes them (bb_netpoll_close); the
 * descriptor's sequence number changes, so events for the old file are
 * dropped. bobbin's own two fds are protected from the program's close().
 */
#include "runtime.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>

#define PD_L1 4096
#define PD_L2 1024 /* fds up to 4M */

static _Atomic(bb_pd *) pdtab[PD_L1];
static bb_lock initlock;
static _Atomic int inited;
int bb_epfd = -1, bb_breakfd = -1;
_Atomic int32_t bb_netpoll_waiters; /* Gs parked on readiness */
_Atomic int64_t bb_lastpoll;        /* last epoll_wait (ns), 0 while one blocks */

static int netpoll_init(void)
{
	if (atomic_load_explicit(&inited, memory_order_acquire))
		return 0;
	bb_lock_acquire(&initlock);
	if (!inited) {
		int ep = (int)bb_sys(SYS_epoll_create1, EPOLL_CLOEXEC, 0, 0);
		int ev = (int)bb_sys(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK, 0);
		if (ep < 0 || ev < 0) {
			if (ep >= 0)
				bb_sys(SYS_close, ep, 0, 0);
			if (ev >= 0)
				bb_sys(SYS_close, ev, 0, 0);
			bb_lock_release(&initlock);
			return -1;
		}
		struct epoll_event e = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
		bb_rawsyscall6(SYS_epoll_ctl, ep, EPOLL_CTL_ADD, ev, (long)&e, 0, 0);
		bb_epfd = ep;
		bb_breakfd = ev;
		atomic_store_explicit(&bb_lastpoll, bb_nanotime(), memory_order_relaxed);
		atomic_store_explicit(&inited, 1, memory_order_release);
		bb_lock_release(&initlock);
		bb_timer_kick(); /* a futex-sleeping M switches to epoll_wait */
		return 0;
	}
	bb_lock_release(&initlock);
	return 0;
}

bool bb_netpoll_inited(void)
{
	return atomic_load_explicit(&inited, memory_order_acquire);
}

/* the descriptor of fd, made on first use; NULL for a bad fd number */
bb_pd *bb_pd_get(int fd)
{
	if (fd < 0 || fd >= PD_L1 * PD_L2)
		return NULL;
	_Atomic(bb_pd *) *slot = &pdtab[fd / PD_L2];
	bb_pd *blk = atomic_load_explicit(slot, memory_order_acquire);
	if (blk == NULL) {
		bb_pd *nb = calloc(PD_L2, sizeof(bb_pd));
		if (nb == NULL)
			return NULL;
		for (int i = 0; i < PD_L2; i++)
			nb[i].fd = fd / PD_L2 * PD_L2 + i;
		bb_pd *none = NULL;
		/* release: the zeroed block is visible before its pointer */
		if (atomic_compare_exchange_strong_explicit(slot, &none, nb, memory_order_acq_rel,
							    memory_order_acquire))
			blk = nb;
		else {
			free(nb);
			blk = none;
		}
	}
	return &blk[fd % PD_L2];
}

/* the descriptor if it exists, without making one */
bb_pd *bb_pd_peek(int fd)
{
	if (fd < 0 || fd >= PD_L1 * PD_L2)
		return NULL;
	bb_pd *blk = atomic_load_explicit(&pdtab[fd / PD_L2], memory_order_acquire);
	return blk ? &blk[fd % PD_L2] : NULL;
}

void bb_netpoll_break(void)
{
	if (!bb_netpoll_inited())
		return;
	uint64_t one = 1;
	bb_sys(SYS_write, bb_breakfd, &one, sizeof one);
}

/* ---- waiting ---- */

typedef struct waitctx {
	bb_pd *pd;
	bool timed;
} waitctx;

static bool unlock_pd(bb_g *gp, void *arg)
{
	waitctx *wc = arg;
	if (wc->timed)
		bb_addtimer(&gp->timer);
	bb_lock_release(&wc->pd->lock);
	return true;
}

static void pd_timeout(void *arg, uintptr_t seq)
{
	bb_pd *pd = arg;
	bb_g *gp = NULL;
	bb_lock_acquire(&pd->lock);
	for (int mode = 0; mode < 2; mode++) {
		bb_g *w = pd->waiter[mode];
		if (w && atomic_load_explicit(&w->waitticket, memory_order_relaxed) == seq) {
			pd->waiter[mode] = NULL;
			w->timedout = true;
			gp = w;
		}
	}
	bb_lock_release(&pd->lock);
	if (gp) {
		atomic_fetch_sub(&bb_netpoll_waiters, 1);
		bb_goready(gp);
	}
}

/* Wait until fd may be ready for mode (0 read, 1 write). Returns 0 (retry
 * the call), ETIMEDOUT, EBADF if the fd was closed meanwhile, or EPERM if
 * the file cannot be polled (a regular file: the caller blocks instead). */
int bb_netpoll_wait(int fd, int mode, int64_t deadline)
{
	if (netpoll_init() != 0)
		return EPERM;
	bb_pd *pd = bb_pd_get(fd);
	if (pd == NULL)
		return EBADF;
	bb_g *gp = bb_getg();
	bb_lock_acquire(&pd->lock);
	if (!pd->registered) {
		struct epoll_event e = {
			.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
			.data.u64 = (uint64_t)(uint32_t)fd | (uint64_t)pd->seq << 32,
		};
		long r = bb_rawsyscall6(SYS_epoll_ctl, bb_epfd, EPOLL_CTL_ADD, fd, (long)&e, 0, 0);
		if (r == -EEXIST)
			r = bb_rawsyscall6(SYS_epoll_ctl, bb_epfd, EPOLL_CTL_MOD, fd, (long)&e, 0, 0);
		if (r < 0) {
			bb_lock_release(&pd->lock);
			return r == -EBADF ? EBADF : EPERM;
		}
		pd->registered = true;
	}
	if (pd->ready[mode]) {
		pd->ready[mode] = false;
		bb_lock_release(&pd->lock);
		return 0;
	}
	if (deadline != 0 && deadline <= bb_nanotime()) {
		bb_lock_release(&pd->lock);
		return ETIMEDOUT;
	}
	if (pd->waiter[mode] != NULL)
		bb_throw("netpoll: two Gs wait to %s fd %d", mode ? "write" : "read", fd);
	uint32_t seq = pd->seq;
	pd->waiter[mode] = gp;
	gp->timedout = false;
	uintptr_t ticket = atomic_load_explicit(&gp->waitticket, memory_order_relaxed) + 1;
	atomic_store_explicit(&gp->waitticket, ticket, memory_order_relaxed);
	if (deadline != 0) {
		gp->timer.when = deadline;
		gp->timer.fn = pd_timeout;
		gp->timer.arg = pd;
		gp->timer.seq = ticket;
	}
	atomic_fetch_add(&bb_netpoll_waiters, 1);
	waitctx wc = {pd, deadline != 0};
	bb_gopark(unlock_pd, &wc, waitReasonIO);
	if (deadline != 0)
		bb_deltimer(&gp->timer);
	if (gp->timedout)
		return ETIMEDOUT;
	bb_lock_acquire(&pd->lock);
	bool closed = pd->seq != seq;
	bb_lock_release(&pd->lock);
	return closed ? EBADF : 0;
}

/* fd is being closed (or replaced by dup2): wake its waiters, forget its
 * registration (the kernel drops it with the last reference to the file) */
void bb_netpoll_close(int fd)
{
	bb_pd *pd = bb_pd_peek(fd);
	if (pd == NULL)
		return;
	bb_g *w[2];
	bb_lock_acquire(&pd->lock);
	if (pd->registered && bb_netpoll_inited())
		bb_rawsyscall6(SYS_epoll_ctl, bb_epfd, EPOLL_CTL_DEL, fd, 0, 0, 0);
	pd->registered = false;
	pd->seq++;
	pd->ready[0] = pd->ready[1] = false;
	w[0] = pd->waiter[0];
	w[1] = pd->waiter[1];
	pd->waiter[0] = pd->waiter[1] = NULL;
	pd->known = false; /* the number may be reused for another kind of file */
	bb_lock_release(&pd->lock);
	for (int i = 0; i < 2; i++) {
		if (w[i]) {
			atomic_fetch_sub(&bb_netpoll_waiters, 1);
			bb_goready(w[i]);
		}
	}
}

/* ---- polling ---- */

/* Poll once, waiting at most delay ns (<0: forever, 0: not at all). The Gs
 * made ready are returned as a list linked by schedlink (not yet readied:
 * the caller puts them on a run queue). */
bb_g *bb_netpoll(int64_t delay, int *count)
{
	*count = 0;
	if (!bb_netpoll_inited())
		return NULL;
	struct epoll_event evs[128];
	struct timespec ts, *tsp = NULL;
	if (delay >= 0) {
		ts.tv_sec = delay / 1000000000;
		ts.tv_nsec = delay % 1000000000;
		tsp = &ts;
	}
	long n = bb_rawsyscall6(SYS_epoll_pwait2, bb_epfd, (long)evs, 128, (long)tsp, 0, 8);
	if (n == -ENOSYS) {
		int ms = delay < 0 ? -1 : (int)((delay + 999999) / 1000000);
		n = bb_rawsyscall6(SYS_epoll_wait, bb_epfd, (long)evs, 128, ms, 0, 0);
	}
	atomic_store_explicit(&bb_lastpoll, bb_nanotime(), memory_order_relaxed);
	bb_g *list = NULL;
	for (long i = 0; i < n; i++) {
		uint64_t d = evs[i].data.u64;
		if (d == UINT64_MAX) {
			uint64_t v;
			bb_sys(SYS_read, bb_breakfd, &v, sizeof v);
			continue;
		}
		int fd = (int)(uint32_t)d;
		uint32_t seq = (uint32_t)(d >> 32);
		bb_pd *pd = bb_pd_peek(fd);
		if (pd == NULL)
			continue;
		uint32_t ev = evs[i].events;
		bool rd = ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR);
		bool wr = ev & (EPOLLOUT | EPOLLHUP | EPOLLERR);
		bb_lock_acquire(&pd->lock);
		if (pd->seq != seq) { /* an event of a file since closed */
			bb_lock_release(&pd->lock);
			continue;
		}
		for (int mode = 0; mode < 2; mode++) {
			if (!(mode ? wr : rd))
				continue;
			bb_g *w = pd->waiter[mode];
			if (w) {
				pd->waiter[mode] = NULL;
				w->schedlink = list;
				list = w;
				(*count)++;
			} else {
				pd->ready[mode] = true;
			}
		}
		bb_lock_release(&pd->lock);
	}
	if (*count)
		atomic_fetch_sub(&bb_netpoll_waiters, *count);
	return list;
}

/* Put a list from bb_netpoll on run queues: the first n on the current P
 * if there is one, the rest on the global queue, and wake Ms for them. */
void bb_injectglist(bb_g *list)
{
	bb_m *mp = bb_getgsbase() ? bb_getm() : NULL;
	bb_p *pp = mp ? mp->p : NULL;
	int n = 0;
	while (list) {
		bb_g *gp = list;
		list = gp->schedlink;
		gp->schedlink = NULL;
		if (gp->pinned_wait) { /* it waits on its own M */
			bb_casgstatus(gp, Gwaiting, Grunnable);
			continue;
		}
		bb_casgstatus(gp, Gwaiting, Grunnable);
		if (pp && n < (int)BB_RUNQ_LEN / 2) {
			bb_runqput(pp, gp, false);
		} else {
			bb_lock_acquire(&bb_sched_.lock);
			bb_globrunqput(gp);
			bb_lock_release(&bb_sched_.lock);
		}
		n++;
		if (n > 1 || pp == NULL)
			bb_wakep();
	}
}
