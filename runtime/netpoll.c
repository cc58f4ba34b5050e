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
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>

#define PD_L1 4096
#define PD_L2 1024 /* fds up to 4M */

static _Atomic(bb_pd *) pdtab[PD_L1];
static _Atomic int pdtab_top; /* blocks in use are below: a fork child looks no further */
static bb_lock initlock;
static _Atomic int inited;
int bb_epfd = -1, bb_breakfd = -1;
_Atomic int32_t bb_netpoll_waiters; /* Gs parked on readiness */
_Atomic int64_t bb_lastpoll;        /* last epoll_wait (ns), 0 while one blocks */

/* Edges carry the epoch of the poll that found them: each epoll_wait that
 * returns events takes the next epoch, and every fd it reports keeps it
 * per direction (pd->edge). A G notes the epoch before it tries a call
 * (gp->polllook: bb_netpoll_look, and again whenever a wait ends); when
 * the call would block, it parks only if no edge of that fd and direction
 * has a later epoch, which may be for data that came after its try.
 * Every G that looked before an edge sees it (four threads polling one
 * pipe: the edge of the last bytes woke three, and the fourth, which
 * looked before it and linked after, must not sleep with its byte
 * unread), and the G an edge woke does not take it again as a reason to
 * retry (a latch set by every edge cost each wait on a pipe one more
 * read that failed). */
static _Atomic uint64_t poll_epoch = 1;

void bb_netpoll_look(void)
{
	bb_getg()->polllook = atomic_load(&poll_epoch);
}

static int netpoll_init(void)
{
	if (atomic_load_explicit(&inited, memory_order_acquire))
		return 0;
	bb_lock_acquire(&initlock);
	if (!inited) {
		int ep = bb_fd_out_of_way((int)bb_sys(SYS_epoll_create1, EPOLL_CLOEXEC, 0, 0));
		int ev = bb_fd_out_of_way(
			(int)bb_sys(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK, 0));
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
		bb_pd *nb = bb_alloc(PD_L2 * sizeof(bb_pd));
		if (nb == NULL)
			return NULL;
		for (int i = 0; i < PD_L2; i++)
			nb[i].fd = fd / PD_L2 * PD_L2 + i;
		bb_pd *none = NULL;
		/* release: the zeroed block is visible before its pointer */
		if (atomic_compare_exchange_strong_explicit(slot, &none, nb, memory_order_acq_rel,
							    memory_order_acquire)) {
			blk = nb;
			int top = atomic_load(&pdtab_top), i = fd / PD_L2 + 1;
			while (top < i && !atomic_compare_exchange_weak(&pdtab_top, &top, i))
				;
		}
		else {
			bb_free(nb);
			blk = none;
		}
	}
	return &blk[fd % PD_L2];
}

/* one past the highest fd number that may have a descriptor */
int bb_pd_limit(void)
{
	return atomic_load(&pdtab_top) * PD_L2;
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

/* ---- waiting ----
 *
 * A wait is a session of one G over one or more (fd, direction) nodes: a
 * read or write waits on one node, the program's poll/select/epoll_wait on
 * one node per fd. Nodes live on the waiting G's stack (or a buffer it owns)
 * and are linked into the pd's list under pd->lock. Whoever wakes the G —
 * an event, a close, the timer — must win a CAS on g->pollticket (the
 * session's ticket), so the G is readied exactly once; the G unlinks its
 * remaining nodes itself before it returns. A waker copies what it needs out
 * of a node while it holds pd->lock, since the node's memory is the G's.
 */

/* g->pollticket = ticket << 2 | CLAIMED | PARKED. A waker (event, close,
 * timer) sets CLAIMED once per session; whoever sets it readies the G if it
 * has PARKED, and otherwise the G sees CLAIMED before it parks and does not. */
#define PT_CLAIMED 1u
#define PT_PARKED 2u
#define PT_TIMEDOUT 4u /* with CLAIMED: the timer won */
#define PT_SHIFT 3

/* 1: won and the G is parked (ready it); 0: lost or not parked yet (the G
 * will notice); the winner also accounts the waiter count */
static int claim_bits(bb_g *gp, uintptr_t ticket, uintptr_t bits)
{
	uintptr_t w = atomic_load(&gp->pollticket);
	for (;;) {
		if ((w >> PT_SHIFT) != ticket || (w & PT_CLAIMED))
			return 0;
		if (atomic_compare_exchange_weak(&gp->pollticket, &w, w | PT_CLAIMED | bits))
			break;
	}
	atomic_fetch_sub(&bb_netpoll_waiters, 1);
	return (w & PT_PARKED) ? 1 : 0;
}

static int claim(bb_g *gp, uintptr_t ticket)
{
	return claim_bits(gp, ticket, 0);
}

static void node_link(bb_pd *pd, bb_pollnode *n, int mode)
{
	n->mode = mode;
	n->pd = pd;
	n->prev = NULL;
	n->next = pd->waiters[mode];
	if (n->next)
		n->next->prev = n;
	pd->waiters[mode] = n;
	n->linked = true;
}

static void node_unlink(bb_pollnode *n)
{
	bb_pd *pd = n->pd;
	if (n->prev)
		n->prev->next = n->next;
	else
		pd->waiters[n->mode] = n->next;
	if (n->next)
		n->next->prev = n->prev;
	n->linked = false;
}

/* Pop every node of pd/mode and collect the parked Gs this caller wins,
 * linked by schedlink onto *list. pd->lock held. Returns how many. */
static int fire(bb_pd *pd, int mode, bb_g **list)
{
	int n = 0;
	while (pd->waiters[mode]) {
		bb_pollnode *nd = pd->waiters[mode];
		bb_g *gp = nd->g;
		uintptr_t ticket = nd->ticket;
		node_unlink(nd);
		if (claim(gp, ticket)) {
			gp->schedlink = *list;
			*list = gp;
			n++;
		}
	}
	return n;
}

static void poll_timeout(void *arg, uintptr_t seq)
{
	bb_g *gp = arg;
	if (claim_bits(gp, seq, PT_TIMEDOUT))
		bb_goready(gp);
}

/* Register fd in the epoll set if it is not yet. pd->lock held.
 * 0, EBADF, or EPERM (a file epoll cannot watch: always ready). */
_Atomic uint64_t bb_sigfd_sigs;

static bool is_signalfd(int fd)
{
	char path[40], link[32];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	long n = bb_rawsyscall6(SYS_readlinkat, AT_FDCWD, (long)path, (long)link, sizeof link - 1, 0, 0);
	if (n <= 0)
		return false;
	link[n] = '\0';
	return strcmp(link, "anon_inode:[signalfd]") == 0;
}

static int ensure_registered(bb_pd *pd)
{
	if (pd->registered)
		return 0;
	if (atomic_load_explicit(&bb_sigfd_sigs, memory_order_relaxed) && is_signalfd(pd->fd))
		return EPERM; /* the caller waits in the kernel, on its own thread */
	struct epoll_event e = {
		.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET,
		.data.u64 = (uint64_t)(uint32_t)pd->fd | (uint64_t)pd->seq << 32,
	};
	long r = bb_rawsyscall6(SYS_epoll_ctl, bb_epfd, EPOLL_CTL_ADD, pd->fd, (long)&e, 0, 0);
	if (r == -EEXIST)
		r = bb_rawsyscall6(SYS_epoll_ctl, bb_epfd, EPOLL_CTL_MOD, pd->fd, (long)&e, 0, 0);
	if (r < 0)
		return r == -EBADF ? EBADF : EPERM;
	pd->registered = true;
	return 0;
}

static bool park_unless_claimed(bb_g *gp, void *arg)
{
	uintptr_t ticket = (uintptr_t)arg;
	bool timed = gp->timer.fn == poll_timeout && gp->timer.seq == ticket;
	if (timed)
		bb_addtimer(&gp->timer);
	uintptr_t w = ticket << PT_SHIFT;
	/* seq_cst: pairs with claim's CAS */
	if (atomic_compare_exchange_strong(&gp->pollticket, &w, w | PT_PARKED))
		return true;
	return false; /* a waker came first: run on */
}

/* Park the current G until one of the nodes' fds may be ready for its
 * direction, the deadline passes, or one is closed. Returns 0, ETIMEDOUT. */
static int session_wait(bb_pollnode *nodes, int n, int64_t deadline)
{
	bb_g *gp = bb_getg();
	uintptr_t ticket = atomic_load_explicit(&gp->waitticket, memory_order_relaxed) + 1;
	atomic_store_explicit(&gp->waitticket, ticket, memory_order_relaxed);
	gp->timer.fn = NULL;
	atomic_store(&gp->pollticket, ticket << PT_SHIFT);
	atomic_fetch_add(&bb_netpoll_waiters, 1);
	/* link every node while we still run: a waker only flips bits in
	 * pollticket and never readies a G that has not parked */
	for (int i = 0; i < n; i++) {
		bb_pollnode *nd = &nodes[i];
		nd->g = gp;
		nd->ticket = ticket;
		nd->linked = false;
		bb_pd *pd = nd->pd;
		bb_lock_acquire(&pd->lock);
		if (pd->seq != nd->seq || pd->edge[nd->mode] > gp->polllook) {
			/* closed meanwhile, or an edge came since we looked */
			bb_lock_release(&pd->lock);
			claim(gp, ticket);
			break;
		}
		node_link(pd, nd, nd->mode);
		bb_lock_release(&pd->lock);
	}
	if (deadline != 0) {
		gp->timer.when = deadline;
		gp->timer.fn = poll_timeout;
		gp->timer.arg = gp;
		gp->timer.seq = ticket;
	}
	bool claimed = atomic_load(&gp->pollticket) & PT_CLAIMED;
	atomic_store(&gp->waitkind, BB_WAIT_NETPOLL);
	if (!claimed)
		bb_gopark(park_unless_claimed, (void *)ticket, waitReasonIO);
	atomic_store(&gp->waitkind, BB_WAIT_NONE);
	if (deadline != 0)
		bb_deltimer(&gp->timer);
	/* nobody claimed us (only possible if we never parked)? close the session */
	claim(gp, ticket);
	for (int i = 0; i < n; i++) {
		bb_pollnode *nd = &nodes[i];
		if (nd->pd == NULL || nd->g != gp)
			continue;
		bb_lock_acquire(&nd->pd->lock);
		if (nd->linked)
			node_unlink(nd);
		bb_lock_release(&nd->pd->lock);
	}
	bb_netpoll_look(); /* the caller tries again after this */
	return (atomic_load(&gp->pollticket) & PT_TIMEDOUT) ? ETIMEDOUT : 0;
}

/* prepare a node for fd/mode: 0, EBADF, EPERM (never waits: always ready),
 * or EAGAIN (an edge came since the G looked: look again and retry) */
static int node_prepare(bb_pollnode *nd, int fd, int mode)
{
	nd->pd = NULL;
	bb_pd *pd = bb_pd_get(fd);
	if (pd == NULL)
		return EBADF;
	bb_lock_acquire(&pd->lock);
	int err = ensure_registered(pd);
	if (err == 0 && pd->edge[mode] > bb_getg()->polllook)
		err = EAGAIN;
	if (err == 0) {
		nd->pd = pd;
		nd->seq = pd->seq;
		nd->mode = mode;
	}
	bb_lock_release(&pd->lock);
	return err;
}

/* Wait until fd may be ready for mode (0 read, 1 write). Returns 0 (retry
 * the call), ETIMEDOUT, EBADF if the fd was closed meanwhile, or EPERM if
 * the file cannot be polled (a regular file: the caller blocks instead). */
int bb_netpoll_wait(int fd, int mode, int64_t deadline)
{
	if (netpoll_init() != 0)
		return EPERM;
	if (deadline != 0 && deadline <= bb_nanotime())
		return ETIMEDOUT;
	bb_pollnode nd;
	int err = node_prepare(&nd, fd, mode);
	if (err == EAGAIN) {
		bb_netpoll_look();
		return 0;
	}
	if (err)
		return err;
	uint32_t seq = nd.seq;
	bb_pd *pd = nd.pd;
	err = session_wait(&nd, 1, deadline);
	if (err)
		return err;
	bb_lock_acquire(&pd->lock);
	bool closed = pd->seq != seq;
	bb_lock_release(&pd->lock);
	return closed ? EBADF : 0;
}

/* The program's poll: wait until any of fds may be ready for what it asks
 * (POLLIN/POLLPRI/POLLRDHUP → read, POLLOUT → write) or the deadline passes.
 * The caller then asks the kernel with a zero timeout. Returns 0 or
 * ETIMEDOUT (EPERM: a file that cannot be watched, i.e. is always ready). */
int bb_netpoll_wait_many(const int *fds, const short *events, int n, int64_t deadline)
{
	if (netpoll_init() != 0)
		return EPERM;
	if (deadline != 0 && deadline <= bb_nanotime())
		return ETIMEDOUT;
	bb_pollnode stackn[16];
	bb_pollnode *nodes = n * 2 <= 16 ? stackn : bb_alloc((size_t)n * 2 * sizeof *nodes);
	if (nodes == NULL)
		return EPERM;
	int k = 0, err = 0;
	for (int i = 0; i < n && err == 0; i++) {
		if (fds[i] < 0)
			continue;
		if (events[i] & (POLLIN | POLLPRI | POLLRDHUP)) {
			err = node_prepare(&nodes[k], fds[i], 0);
			if (err == 0)
				k++;
		}
		if (err == 0 && (events[i] & POLLOUT)) {
			err = node_prepare(&nodes[k], fds[i], 1);
			if (err == 0)
				k++;
		}
		if (err == 0 && !(events[i] & (POLLIN | POLLPRI | POLLRDHUP | POLLOUT))) {
			/* only errors/hang-ups asked for: they come as read edges */
			err = node_prepare(&nodes[k], fds[i], 0);
			if (err == 0)
				k++;
		}
	}
	if (err == EAGAIN || err == EBADF) {
		err = 0; /* something to report at once: let the kernel say what */
		bb_netpoll_look();
	}
	else if (err == 0)
		err = session_wait(nodes, k, deadline);
	if (nodes != stackn)
		bb_free(nodes);
	return err;
}

/* ready each G of a list made by fire; wake false: no idle P is woken for
 * them (bb_goready_here) */
static void goready_list(bb_g *list, bool wake)
{
	while (list) {
		bb_g *gp = list;
		list = gp->schedlink;
		gp->schedlink = NULL;
		if (wake)
			bb_goready(gp);
		else
			bb_goready_here(gp);
	}
}

/* fd is being closed (or replaced by dup2): wake its waiters, forget its
 * registration (the kernel drops it with the last reference to the file) */

void bb_netpoll_close(int fd)
{
	bb_pd *pd = bb_pd_peek(fd);
	if (pd == NULL)
		return;
	bb_g *list = NULL;
	bb_lock_acquire(&pd->lock);
	if (pd->registered && bb_netpoll_inited())
		bb_rawsyscall6(SYS_epoll_ctl, bb_epfd, EPOLL_CTL_DEL, fd, 0, 0, 0);
	pd->registered = false;
	pd->seq++;
	pd->edge[0] = pd->edge[1] = 0;
	fire(pd, 0, &list);
	fire(pd, 1, &list);
	pd->known = false; /* the number may be reused for another kind of file */
	pd->peerfd1 = 0;
	bb_lock_release(&pd->lock);
	goready_list(list, true);
}

/* Both ends of a pipe or socketpair just made here (each fd fresh): what
 * one end transfers may make the other ready (bb_netpoll_kick). */
void bb_netpoll_link_peers(int fd0, int fd1)
{
	bb_pd *a = bb_pd_get(fd0), *b = bb_pd_get(fd1);
	if (a == NULL || b == NULL)
		return;
	bb_lock_acquire(&b->lock);
	uint32_t bseq = b->seq;
	bb_lock_release(&b->lock);
	bb_lock_acquire(&a->lock);
	a->peerfd1 = fd1 + 1;
	a->peerseq = bseq;
	uint32_t aseq = a->seq;
	bb_lock_release(&a->lock);
	bb_lock_acquire(&b->lock);
	if (b->seq == bseq) {
		b->peerfd1 = fd0 + 1;
		b->peerseq = aseq;
	}
	bb_lock_release(&b->lock);
}

/* One end of an in-process pipe or socketpair (fd, as it was at seq) just
 * moved data: wake the Gs waiting on it in mode (read after a write, write
 * after a read) now, on this P, rather than after the epoll edge makes its
 * way through a poll. Only a hint: a woken G retries its call and parks
 * again if there is nothing for it (another reader was first, the number
 * was reused); the edge itself still comes and is handled as ever. */
void bb_netpoll_kick(int fd, uint32_t seq, int mode)
{
	/* A spinning M, or an idle P's M asleep in epoll_wait (the edge
	 * wakes it), finds the edge and runs the waiter there, in parallel
	 * with this G (a wake-up here would put both on this P and wake an M
	 * for nothing). Every P busy: this is the way the waiter gets to run
	 * soonest. An idle P whose M sleeps elsewhere: nobody would see the
	 * edge before this M polls, once its G gives up the P; the waiter
	 * goes to this P's runnext instead, and no M is woken for it (a
	 * ping-pong's G blocks right after: two epoll_waits a round trip
	 * saved, 3.3 -> 2.3 us over two pipes). A G that runs on instead lets
	 * it run at its next switch, as the edge would have. */
	bool idle = atomic_load_explicit(&bb_sched_.npidle, memory_order_relaxed) > 0;
	if (atomic_load_explicit(&bb_sched_.nmspinning, memory_order_relaxed) > 0 ||
	    (idle && atomic_load_explicit(&bb_lastpoll, memory_order_relaxed) == 0))
		return;
	bb_pd *pd = bb_pd_peek(fd);
	/* a racy look first: a waiter linking meanwhile gets the edge */
	if (pd == NULL || __atomic_load_n(&pd->waiters[mode], __ATOMIC_RELAXED) == NULL)
		return;
	bb_g *list = NULL;
	bb_lock_acquire(&pd->lock);
	if (pd->seq == seq)
		fire(pd, mode, &list);
	bb_lock_release(&pd->lock);
	goready_list(list, !idle);
}

/* ---- polling ---- */

/* Poll once, waiting at most delay ns (<0: forever, 0: not at all). The Gs
 * made ready are returned as a list linked by schedlink (not yet readied:
 * the caller puts them on a run queue). */
bb_g *bb_netpoll(int64_t delay, int *count)
{
	return bb_netpoll_masked(delay, count, NULL);
}

/* the same, with the signal mask *mask (if not NULL) during the wait only */
bb_g *bb_netpoll_masked(int64_t delay, int *count, const uint64_t *mask)
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
	long n = bb_rawsyscall6(SYS_epoll_pwait2, bb_epfd, (long)evs, 128, (long)tsp, (long)mask, 8);
	if (n == -ENOSYS) {
		int ms = delay < 0 ? -1 : (int)((delay + 999999) / 1000000);
		n = bb_rawsyscall6(SYS_epoll_pwait, bb_epfd, (long)evs, 128, ms, (long)mask, 8);
	}
	atomic_store_explicit(&bb_lastpoll, bb_nanotime(), memory_order_relaxed);
	uint64_t epoch = n > 0 ? atomic_fetch_add(&poll_epoch, 1) + 1 : 0;
	bb_g *list = NULL;
	int before = *count;
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
		bool rd = ev & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR);
		bool wr = ev & (EPOLLOUT | EPOLLHUP | EPOLLERR);
		bb_lock_acquire(&pd->lock);
		if (pd->seq != seq) { /* an event of a file since closed */
			bb_lock_release(&pd->lock);
			continue;
		}
		for (int mode = 0; mode < 2; mode++) {
			if (!(mode ? wr : rd))
				continue;
			/* (also when it wakes the Gs linked: see poll_epoch).
			 * Never back: a poller that took its epoch before
			 * another's may get here after it */
			if (epoch > pd->edge[mode])
				pd->edge[mode] = epoch;
			if (pd->waiters[mode])
				*count += fire(pd, mode, &list);
		}
		bb_lock_release(&pd->lock);
	}
	atomic_fetch_add_explicit(&bb_stats_.netpoll_ready, (uint64_t)(*count - before),
				  memory_order_relaxed);
	return list;
}

/* Put a list from bb_netpoll on run queues: the first n on the current P
 * if there is one, the rest on the global queue, and wake Ms for them. */
void bb_injectglist(bb_g *list)
{
	bb_m *mp = bb_tls_m ? bb_getm() : NULL;
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

void bb_netpoll_lock(void)
{
	bb_lock_acquire(&initlock);
}

void bb_netpoll_unlock(void)
{
	bb_lock_release(&initlock);
}

/* fork child: the epoll instance is shared with the parent, so the child
 * must not touch it: close our copies and start afresh on first use. What
 * the program's fds are (pd->known, kinds, flags) stays true in the child. */
void bb_netpoll_forkchild(void)
{
	/* (stores only where needed: each copies a page shared with the
	 * parent, and reads only of the blocks in use, below pdtab_top) */
	if (atomic_load(&initlock.key))
		atomic_store(&initlock.key, 0);
	if (atomic_load(&inited)) {
		bb_sys(SYS_close, bb_epfd, 0, 0);
		bb_sys(SYS_close, bb_breakfd, 0, 0);
		bb_epfd = bb_breakfd = -1;
		atomic_store(&inited, 0);
	}
	int top = atomic_load(&pdtab_top);
	for (int i = 0; i < top && i < PD_L1; i++) {
		bb_pd *blk = atomic_load(&pdtab[i]);
		if (blk == NULL)
			continue;
		/* written only where it differs: the table is shared with the
		 * parent copy-on-write, and storing into every entry copied
		 * ~25 pages per block in each child (stress-ng --zombie, a
		 * fork per operation, spent a tenth of its time here) */
		for (int j = 0; j < PD_L2; j++) {
			bb_pd *pd = &blk[j];
			if (atomic_load_explicit(&pd->lock.key, memory_order_relaxed) != 0)
				atomic_store(&pd->lock.key, 0);
			if (pd->registered)
				pd->registered = false;
			if (pd->edge[0] || pd->edge[1])
				pd->edge[0] = pd->edge[1] = 0;
			if (pd->waiters[0] || pd->waiters[1])
				pd->waiters[0] = pd->waiters[1] = NULL;
		}
	}
	if (atomic_load(&bb_netpoll_waiters))
		atomic_store(&bb_netpoll_waiters, 0);
	if (atomic_load(&bb_lastpoll))
		atomic_store(&bb_lastpoll, 0);
}

/* pthread_cancel: end gp's wait session as a waker would */
bool bb_netpoll_interrupt(bb_g *gp)
{
	uintptr_t w = atomic_load(&gp->pollticket);
	if (w == 0 || (w & PT_CLAIMED))
		return false; /* no session, or it is over */
	int r = claim(gp, w >> PT_SHIFT);
	if (r == 1)
		bb_goready(gp);
	return true;
}
