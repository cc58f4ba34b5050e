/*
 * timer.c — per-P timer heaps (Go's timers, simplified): what wakes a
 * sleeping G, a timed wait that expires, a timed join.
 *
 * Each P owns a 4-ary min-heap of timers ordered by `when` (monotonic ns),
 * guarded by the P's timerslock so that an idle P can run another P's
 * expired timers ("stealing" them) and a G can cancel its timer from any M.
 * p->timer0when mirrors the earliest deadline (0: none) so schedule() checks
 * it with one load.
 *
 * Who wakes up for a timer when every M is idle: at most one M, the timer
 * sleeper, sleeps with a futex timeout until the earliest deadline of all Ps
 * (Go lets one M block in netpoll for this). Adding an earlier timer wakes
 * it; with no sleeper, adding a timer makes sure an M is looking for work
 * (it will become the sleeper). sched.timergen closes the race between an M
 * computing the next deadline and a timer added just after.
 *
 * A timer's function runs on g0 or on the G that cancels nothing; it must not
 * block: it readies a G, nothing else.
 */
#include "runtime.h"

#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>

#define HEAP_ARITY 4

/* The heap holds (when, timer) pairs: comparisons read only the heap's own
 * array, never the timers (which live in Gs all over memory): with 10,000
 * sleepers that is the difference between a cache miss per comparison and
 * none. A timer's idx field tracks its slot for deletion. */

static void place(bb_p *pp, int i, bb_timerslot ts)
{
	pp->timers[i] = ts;
	ts.t->idx = i;
}

static void siftup(bb_p *pp, int i)
{
	bb_timerslot *h = pp->timers;
	bb_timerslot ts = h[i];
	while (i > 0) {
		int parent = (i - 1) / HEAP_ARITY;
		if (h[parent].when <= ts.when)
			break;
		place(pp, i, h[parent]);
		i = parent;
	}
	place(pp, i, ts);
}

static void siftdown(bb_p *pp, int i)
{
	bb_timerslot *h = pp->timers;
	int n = pp->ntimers;
	bb_timerslot ts = h[i];
	for (;;) {
		int c = i * HEAP_ARITY + 1;
		if (c >= n)
			break;
		int best = c;
		for (int k = 1; k < HEAP_ARITY && c + k < n; k++)
			if (h[c + k].when < h[best].when)
				best = c + k;
		if (h[best].when >= ts.when)
			break;
		place(pp, i, h[best]);
		i = best;
	}
	place(pp, i, ts);
}

static void update_timer0(bb_p *pp)
{
	atomic_store_explicit(&pp->timer0when, pp->ntimers ? pp->timers[0].when : 0,
			      memory_order_release);
}

/* remove the timer at index i: timerslock held */
static void heap_remove(bb_p *pp, int i)
{
	bb_timer *t = pp->timers[i].t;
	int last = --pp->ntimers;
	if (i != last) {
		bb_timer *moved = pp->timers[last].t;
		place(pp, i, pp->timers[last]);
		siftup(pp, i);
		siftdown(pp, moved->idx); /* wherever siftup left it */
	}
	t->idx = -1;
	atomic_store_explicit(&t->pp, NULL, memory_order_release);
	update_timer0(pp);
}

/* Arm t on the current P. t must not be armed. Returns false if out of memory. */
bool bb_addtimer(bb_timer *t)
{
	bb_m *mp = bb_getm();
	bb_p *pp = mp->p;
	bb_lock_acquire(&pp->timerslock);
	if (pp->ntimers == pp->timerscap) {
		int cap = pp->timerscap ? pp->timerscap * 2 : 64;
		bb_timerslot *h = bb_realloc(pp->timers, (size_t)cap * sizeof *h);
		if (h == NULL) {
			bb_lock_release(&pp->timerslock);
			return false;
		}
		pp->timers = h;
		pp->timerscap = cap;
	}
	atomic_store_explicit(&t->pp, pp, memory_order_relaxed);
	pp->timers[pp->ntimers++] = (bb_timerslot){t->when, t};
	siftup(pp, pp->ntimers - 1);
	update_timer0(pp);
	bb_lock_release(&pp->timerslock);

	/* seq_cst, pairs with the sleeper's re-check in bb_timer_sleep */
	atomic_fetch_add(&bb_sched_.timergen, 1);
	bb_m *sleeper = atomic_load(&bb_sched_.timersleeper);
	if (sleeper != NULL) {
		if (t->when < atomic_load(&bb_sched_.sleepuntil))
			bb_timer_kick();
	} else if (!bb_alone()) {
		bb_wakep();
	}
	/* else the process's only G arms its own timer as it parks (every
	 * caller does): its M finds nothing else to run and becomes the timer
	 * sleeper itself (or, pinned, runs the timer as it waits), so waking
	 * another M to sleep until the timer would be for nothing */
	return true;
}

/* Disarm t. True if it was still armed (its function will not run); false
 * if it already fired or is firing right now. Any M. */
bool bb_deltimer(bb_timer *t)
{
	for (;;) {
		bb_p *pp = atomic_load_explicit(&t->pp, memory_order_acquire);
		if (pp == NULL)
			return false;
		bb_lock_acquire(&pp->timerslock);
		if (atomic_load_explicit(&t->pp, memory_order_relaxed) != pp) {
			bb_lock_release(&pp->timerslock); /* moved or fired meanwhile */
			continue;
		}
		heap_remove(pp, t->idx);
		bb_lock_release(&pp->timerslock);
		return true;
	}
}

/* Run pp's expired timers. Any M holding some P. Returns how many ran.
 * Expired timers are taken off in batches under one lock hold, then fired
 * with no lock held. */
int bb_runtimers(bb_p *pp, int64_t now)
{
	int n = 0;
	for (;;) {
		int64_t w = atomic_load_explicit(&pp->timer0when, memory_order_acquire);
		if (w == 0 || w > now)
			return n;
		struct {
			void (*fn)(void *, uintptr_t);
			void *arg;
			uintptr_t seq;
		} batch[32];
		int k = 0;
		bb_lock_acquire(&pp->timerslock);
		while (k < 32 && pp->ntimers > 0 && pp->timers[0].when <= now) {
			bb_timer *t = pp->timers[0].t;
			batch[k].fn = t->fn;
			batch[k].arg = t->arg;
			batch[k].seq = t->seq;
			k++;
			heap_remove(pp, 0);
		}
		bb_lock_release(&pp->timerslock);
		if (k == 0)
			return n;
		for (int i = 0; i < k; i++)
			batch[i].fn(batch[i].arg, batch[i].seq); /* the timer may be reused now */
		n += k;
		atomic_fetch_add_explicit(&bb_stats_.timer_fires, (uint64_t)k, memory_order_relaxed);
	}
}

/* earliest deadline over all Ps, 0 if none */
int64_t bb_nexttimer(void)
{
	int64_t next = 0;
	for (int32_t i = 0; i < bb_gomaxprocs; i++) {
		int64_t w = atomic_load_explicit(&bb_allp[i]->timer0when, memory_order_acquire);
		if (w != 0 && (next == 0 || w < next))
			next = w;
	}
	return next;
}

/* Stop being the timer sleeper, unless startm took this M already (then
 * it hands over a P). Dropping again: see proc.c. */
static bool leave_sleeper(bb_m *mp)
{
	bb_lock_acquire(&bb_sched_.lock);
	bb_m *me = mp;
	bool ok = atomic_compare_exchange_strong(&bb_sched_.timersleeper, &me, NULL);
	if (ok)
		bb_drop_begin(mp);
	bb_lock_release(&bb_sched_.lock);
	return ok;
}

/* Called by an M with no P and no work. If timers are pending, or Gs wait
 * on the network poller, and no other M is the sleeper, block until the
 * earliest timer (in epoll_wait once the poller exists, else on a futex).
 * Returns BB_SLEEP_NONE if this M should just stop; BB_SLEEP_WOKE when it
 * slept and the caller should find a P for the timers and the Gs in *list
 * (made ready by the poller, not yet on a run queue); BB_SLEEP_GOTP when
 * startm handed this sleeping M a P (bb_timer_sleeper_take): it holds it. */
int bb_timer_sleep(bb_g **list)
{
	bb_m *mp = bb_getm();
	*list = NULL;
	for (;;) {
		uint32_t w = atomic_load(&bb_sched_.timerwake);
		uint64_t gen = atomic_load(&bb_sched_.timergen);
		int64_t next = bb_nexttimer();
		bool net = bb_netpoll_inited() && atomic_load(&bb_netpoll_waiters) > 0;
		if (next == 0 && !net)
			return BB_SLEEP_NONE;
		/* becoming the sleeper makes this dropping M findable by startm
		 * (proc.c): under sched.lock, after taking any P left pending */
		bb_lock_acquire(&bb_sched_.lock);
		bool spin = false;
		bb_p *pp = bb_drop_pending(mp, &spin);
		if (pp == NULL) {
			bb_m *none = NULL;
			if (!atomic_compare_exchange_strong(&bb_sched_.timersleeper, &none, mp)) {
				bb_lock_release(&bb_sched_.lock);
				return BB_SLEEP_NONE; /* another M keeps the timers */
			}
			bb_drop_end(mp);
		}
		bb_lock_release(&bb_sched_.lock);
		if (pp) {
			bb_acquirep(pp);
			mp->spinning = spin;
			return BB_SLEEP_GOTP;
		}
		atomic_store(&bb_sched_.sleepuntil, next ? next : INT64_MAX);
		if (atomic_load(&bb_sched_.timergen) != gen) {
			if (leave_sleeper(mp))
				continue; /* a timer was added meanwhile: recompute */
		} else {
			int64_t delay = next ? next - bb_nanotime() : -1;
			if (next && delay < 0)
				delay = 0;
			bb_sysmon_ensure();
			if (bb_netpoll_inited()) {
				atomic_store(&bb_lastpoll, 0); /* someone blocks in epoll_wait */
				/* the idle mask; and startm may take this M from now on
				 * and wake it with SIGURG (bb_timer_kick_taken): blocked
				 * until the wait, which lets it in, so one sent before
				 * is not lost */
				uint64_t during = BB_IDLE_MASK & ~BB_SIGBIT(bb_presig());
				bb_set_sigmask(mp, BB_IDLE_MASK | BB_SIGBIT(bb_presig()));
				int n;
				if (atomic_load_explicit(&mp->handp, memory_order_acquire) == NULL)
					*list = bb_netpoll_masked(delay, &n, &during);
			} else if (delay != 0) {
				struct timespec ts = {delay / 1000000000, delay % 1000000000};
				bb_idle_sigmask(mp);
				bb_futex(&bb_sched_.timerwake, FUTEX_WAIT, w, delay < 0 ? NULL : &ts);
			}
		}
		if (leave_sleeper(mp))
			return BB_SLEEP_WOKE;
		/* startm took this M as its idle M: wait for the P it hands over */
		bb_p *hp;
		while ((hp = atomic_load_explicit(&mp->handp, memory_order_acquire)) == NULL)
			__builtin_ia32_pause();
		atomic_store_explicit(&mp->handp, NULL, memory_order_relaxed);
		bb_acquirep(hp);
		return BB_SLEEP_GOTP;
	}
}

/* startm with no idle M on the list (sched.lock held): take the timer
 * sleeper instead of making a new OS thread, so the M count stays at
 * MAXPROCS + sysmon + 1. Returns the M pp was handed to, or NULL; the
 * caller wakes it (bb_timer_kick_taken) once it has dropped the lock. */
bb_m *bb_timer_sleeper_take(bb_p *pp, bool spinning)
{
	bb_m *mp = atomic_load(&bb_sched_.timersleeper);
	if (mp == NULL || !atomic_compare_exchange_strong(&bb_sched_.timersleeper, &mp, NULL))
		return NULL;
	mp->spinning = spinning;
	atomic_store_explicit(&mp->handp, pp, memory_order_release);
	return mp;
}

/* wake the M bb_timer_sleeper_take took: bb_timer_kick's epoll break may
 * be eaten by the M that became the sleeper after it (both in epoll_wait
 * at once), so it also gets bobbin's signal, which cuts its wait short */
void bb_timer_kick_taken(bb_m *mp)
{
	bb_timer_kick();
	if (mp->tid > 0 && atomic_load_explicit(&mp->handp, memory_order_acquire))
		bb_urg_send(mp->tid);
}

/* wake the sleeper so it recomputes its deadline and mode */
void bb_timer_kick(void)
{
	atomic_fetch_add(&bb_sched_.timerwake, 1);
	bb_futex(&bb_sched_.timerwake, FUTEX_WAKE, 1, NULL);
	bb_netpoll_break();
}

/* ---- sleeping ---- */

static void ready_sleeper(void *arg, uintptr_t seq)
{
	bb_goready((bb_g *)arg);
}

static bool arm_sleep(bb_g *gp, void *arg)
{
	/* armed after the G is Gwaiting; an interrupt that came before is
	 * made again by park_m once this returns (interrupt_if_due) */
	return bb_addtimer(&gp->timer); /* out of memory: do not sleep */
}

/* Park the current G for ns nanoseconds (monotonic). */
void bb_sleep_until(int64_t deadline)
{
	bb_g *gp = bb_getg();
	if (deadline <= bb_nanotime()) {
		bb_gosched();
		return;
	}
	gp->timer.when = deadline;
	gp->timer.fn = ready_sleeper;
	gp->timer.arg = gp;
	gp->timer.seq = 0;
	/* armed on g0 after the G is marked waiting: the timer cannot fire
	 * before the G is parked */
	gp->interrupted = false;
	atomic_store(&gp->waitkind, BB_WAIT_SLEEP);
	bb_gopark(arm_sleep, NULL, waitReasonSleep);
	atomic_store(&gp->waitkind, BB_WAIT_NONE);
}

/* pthread_cancel: a sleeping G whose timer we disarm is ours to ready */
bool bb_sleep_interrupt(bb_g *gp)
{
	if (atomic_load(&gp->waitkind) != BB_WAIT_SLEEP || !bb_deltimer(&gp->timer))
		return false;
	gp->interrupted = true;
	bb_goready(gp);
	return true;
}
