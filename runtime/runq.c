/*
 * runq.c — the per-P run queue and the global run queue (Go's runqput,
 * runqget, runqgrab, runqsteal, globrunqget).
 *
 * The local queue is a fixed ring of BB_RUNQ_LEN slots. Only the owner P
 * stores runqtail (with release, so a thief that load-acquires it sees the
 * slot contents); the owner and any thief advance runqhead with a CAS. A thief
 * copies slots first and CASes the head after: if the CAS fails the copy is
 * discarded, so a slot being overwritten under it is harmless. runnext holds
 * one G that runs before the ring (a woken or newly made G inherits the rest
 * of the current time slice); thieves take it only as a last resort.
 *
 * Never blocks, never parks; sched.lock only where a function says so.
 */
#include "runtime.h"

#include <unistd.h>

bb_sched bb_sched_;

void bb_p_init(bb_p *pp, int32_t id)
{
	pp->id = id;
	atomic_store_explicit(&pp->status, Pidle, memory_order_relaxed);
	atomic_store_explicit(&pp->runqhead, 0, memory_order_relaxed);
	atomic_store_explicit(&pp->runqtail, 0, memory_order_relaxed);
	atomic_store_explicit(&pp->runnext, NULL, memory_order_relaxed);
}

static inline _Atomic(bb_g *) *slot(bb_p *pp, uint32_t i)
{
	return &pp->runq[i % BB_RUNQ_LEN];
}

/* Put half of the local ring plus gp on the global queue. Owner P only.
 * Fails (returns false) if a thief moved the head under us. */
static bool runqputslow(bb_p *pp, bb_g *gp, uint32_t h, uint32_t t)
{
	bb_g *batch[BB_RUNQ_LEN / 2 + 1];
	uint32_t n = (t - h) / 2;
	if (n != BB_RUNQ_LEN / 2)
		bb_throw("runqputslow: queue is not full");
	for (uint32_t i = 0; i < n; i++)
		batch[i] = atomic_load_explicit(slot(pp, h + i), memory_order_relaxed);
	/* release: the slots we read may be reused once head moves */
	if (!atomic_compare_exchange_strong_explicit(&pp->runqhead, &h, h + n,
						     memory_order_release, memory_order_relaxed))
		return false;
	batch[n] = gp;
	for (uint32_t i = 0; i < n; i++)
		batch[i]->schedlink = batch[i + 1];
	batch[n]->schedlink = NULL;
	bb_lock_acquire(&bb_sched_.lock);
	bb_globrunqputbatch(batch[0], batch[n], (int32_t)n + 1);
	bb_lock_release(&bb_sched_.lock);
	return true;
}

/* Owner P only. next: put gp in runnext, kicking the old runnext to the ring. */
void bb_runqput(bb_p *pp, bb_g *gp, bool next)
{
	if (next) {
		bb_g *old = atomic_load_explicit(&pp->runnext, memory_order_relaxed);
		while (!atomic_compare_exchange_weak_explicit(&pp->runnext, &old, gp,
							      memory_order_acq_rel,
							      memory_order_relaxed))
			;
		if (old == NULL)
			return;
		gp = old;
	}
	for (;;) {
		/* acquire: pairs with the CAS of consumers, so their slot reads are done */
		uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
		uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
		if (t - h < BB_RUNQ_LEN) {
			atomic_store_explicit(slot(pp, t), gp, memory_order_relaxed);
			/* release: makes the slot visible to consumers */
			atomic_store_explicit(&pp->runqtail, t + 1, memory_order_release);
			return;
		}
		if (runqputslow(pp, gp, h, t))
			return;
		/* a thief took some: the ring has room now */
	}
}

/* Owner P only. *inherit_time is true when the G came from runnext. */
bb_g *bb_runqget(bb_p *pp, bool *inherit_time)
{
	bb_g *next = atomic_load_explicit(&pp->runnext, memory_order_relaxed);
	if (next != NULL &&
	    atomic_compare_exchange_strong_explicit(&pp->runnext, &next, NULL,
						    memory_order_acq_rel, memory_order_relaxed)) {
		*inherit_time = true;
		return next;
	}
	*inherit_time = false;
	for (;;) {
		uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
		uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
		if (t == h)
			return NULL;
		bb_g *gp = atomic_load_explicit(slot(pp, h), memory_order_relaxed);
		/* release: we are done with the slot once head moves past it */
		if (atomic_compare_exchange_weak_explicit(&pp->runqhead, &h, h + 1,
							  memory_order_release,
							  memory_order_relaxed))
			return gp;
	}
}

bool bb_runqempty(bb_p *pp)
{
	/* A G can move between runnext and the ring; read tail twice so a
	 * runqput that kicked runnext into the ring is not missed. */
	for (;;) {
		uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
		uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_acquire);
		bb_g *next = atomic_load_explicit(&pp->runnext, memory_order_acquire);
		if (t == atomic_load_explicit(&pp->runqtail, memory_order_acquire))
			return h == t && next == NULL;
	}
}

uint32_t bb_runqlen(bb_p *pp)
{
	uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
	uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_acquire);
	return t - h;
}

/* Copy half of victim's ring into pp's ring starting at pp's tail (not yet
 * published). Returns how many were taken. Any P. */
static uint32_t runqgrab(bb_p *victim, bb_p *pp, uint32_t batchhead, bool steal_runnext)
{
	for (;;) {
		uint32_t h = atomic_load_explicit(&victim->runqhead, memory_order_acquire);
		/* acquire: pairs with the owner's release store of runqtail */
		uint32_t t = atomic_load_explicit(&victim->runqtail, memory_order_acquire);
		uint32_t n = t - h;
		n = n - n / 2;
		if (n == 0) {
			if (!steal_runnext)
				return 0;
			bb_g *next = atomic_load_explicit(&victim->runnext, memory_order_acquire);
			if (next == NULL)
				return 0;
			if (atomic_load_explicit(&victim->status, memory_order_relaxed) == Prunning) {
				/* The victim is probably about to run its runnext G (it
				 * was just readied by the running G, which is about to
				 * block). Give it a moment rather than bounce the G
				 * between cores: usleep(3), as Go, which with the
				 * default timer slack lasts ~50 µs (spinning 3 µs
				 * instead stole too early: condvar ping-pong 250 ->
				 * 520 ns and erratic). */
				usleep(3);
			}
			if (!atomic_compare_exchange_strong_explicit(&victim->runnext, &next, NULL,
								     memory_order_acq_rel,
								     memory_order_relaxed))
				continue;
			atomic_store_explicit(slot(pp, batchhead), next, memory_order_relaxed);
			return 1;
		}
		if (n > BB_RUNQ_LEN / 2)
			continue; /* h and t read at different times: inconsistent */
		for (uint32_t i = 0; i < n; i++) {
			bb_g *gp = atomic_load_explicit(slot(victim, h + i), memory_order_relaxed);
			atomic_store_explicit(slot(pp, batchhead + i), gp, memory_order_relaxed);
		}
		/* release: our reads of the victim's slots happen before it reuses them */
		if (atomic_compare_exchange_strong_explicit(&victim->runqhead, &h, h + n,
							    memory_order_release,
							    memory_order_relaxed))
			return n;
	}
}

/* Steal half of victim's Gs into pp (owner of pp only); returns one to run. */
bb_g *bb_runqsteal(bb_p *pp, bb_p *victim, bool steal_runnext)
{
	uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
	uint32_t n = runqgrab(victim, pp, t, steal_runnext);
	if (n == 0)
		return NULL;
	n--;
	bb_g *gp = atomic_load_explicit(slot(pp, t + n), memory_order_relaxed);
	if (n == 0)
		return gp;
	uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_acquire);
	if (t - h + n >= BB_RUNQ_LEN)
		bb_throw("runqsteal: runq overflow");
	atomic_store_explicit(&pp->runqtail, t + n, memory_order_release);
	return gp;
}

/* ---- global run queue: sched.lock must be held ---- */

void bb_globrunqput(bb_g *gp)
{
	gp->schedlink = NULL;
	if (bb_sched_.runqtail)
		bb_sched_.runqtail->schedlink = gp;
	else
		bb_sched_.runqhead = gp;
	bb_sched_.runqtail = gp;
	atomic_store_explicit(&bb_sched_.runqsize, bb_sched_.runqsize + 1, memory_order_relaxed);
}

void bb_globrunqputbatch(bb_g *head, bb_g *tail, int32_t n)
{
	tail->schedlink = NULL;
	if (bb_sched_.runqtail)
		bb_sched_.runqtail->schedlink = head;
	else
		bb_sched_.runqhead = head;
	bb_sched_.runqtail = tail;
	atomic_store_explicit(&bb_sched_.runqsize, bb_sched_.runqsize + n, memory_order_relaxed);
}

static bb_g *globrunqpop(void)
{
	bb_g *gp = bb_sched_.runqhead;
	bb_sched_.runqhead = gp->schedlink;
	if (bb_sched_.runqhead == NULL)
		bb_sched_.runqtail = NULL;
	gp->schedlink = NULL;
	return gp;
}

/* The first G in the global queue that is locked to an M other than
 * notm, taken out of it (at most max looked at), or NULL. */
bb_g *bb_globrunq_take_locked(int32_t max, const bb_m *notm)
{
	bb_g *prev = NULL;
	for (bb_g *gp = bb_sched_.runqhead; gp && max-- > 0; prev = gp, gp = gp->schedlink) {
		if (gp->lockedm == NULL || gp->lockedm == notm)
			continue;
		if (prev)
			prev->schedlink = gp->schedlink;
		else
			bb_sched_.runqhead = gp->schedlink;
		if (bb_sched_.runqtail == gp)
			bb_sched_.runqtail = prev;
		gp->schedlink = NULL;
		atomic_store_explicit(&bb_sched_.runqsize, bb_sched_.runqsize - 1,
				      memory_order_relaxed);
		return gp;
	}
	return NULL;
}

/* Take a fair share of the global queue: one G to run now, the rest (up to
 * max if max > 0, and at most half a ring) into pp's ring. */
bb_g *bb_globrunqget(bb_p *pp, int32_t max)
{
	int32_t size = atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed);
	if (size == 0)
		return NULL;
	int32_t n = size / bb_gomaxprocs + 1;
	if (n > size)
		n = size;
	if (max > 0 && n > max)
		n = max;
	if (n > (int32_t)BB_RUNQ_LEN / 2)
		n = BB_RUNQ_LEN / 2;
	atomic_store_explicit(&bb_sched_.runqsize, size - n, memory_order_relaxed);
	bb_g *gp = globrunqpop();
	for (n--; n > 0; n--)
		bb_runqput(pp, globrunqpop(), false);
	return gp;
}
