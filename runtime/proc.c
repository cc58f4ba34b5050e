/*
 * proc.c — the scheduler: schedule, findrunnable, park/ready, G creation and
 * exit, idle P and M lists, spinning Ms and wakep (Go's proc.go).
 *
 * The rules, as in Go:
 *  - An M runs a G only while it holds a P; at most bb_gomaxprocs Gs run.
 *  - schedule() runs on g0 (the M's own stack and TCB), never on a G.
 *  - A G readied by another (goready, newproc) goes into runnext of the
 *    waker's P and inherits the time slice; then wakep() makes sure some M
 *    spins looking for work while an idle P exists.
 *  - A spinning M that finds work stops spinning and, if it was the last
 *    spinner, wakes another (resetspinning): so no work is stranded while a
 *    P is idle, and at most half of the busy Ps' worth of Ms burn CPU looking.
 *  - An M that drops spinning re-checks every run queue before it sleeps:
 *    a G queued after its last look has seen nmspinning == 0 and woken a
 *    new M, or is seen by this re-check. No wake-up is lost.
 *
 * Lock ranks (HACKING.md): g->lock, then a sema bucket lock, then sched.lock;
 * gflock is a leaf. No lock is held across a G switch except the one that
 * gopark's unlockf releases on g0.
 */
#include "runtime.h"

#include <linux/futex.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

bb_p **bb_allp;
bb_g *bb_main_g;

/* bobbin's own signals stay deliverable whatever the program blocks */
static uint64_t strip_ours(uint64_t mask)
{
	if (bb_async_preempt)
		mask &= ~BB_SIGBIT(bb_presig());
	return mask;
}

void (*bb_reclaim_hook)(bb_g *gp, uint64_t set);

/* A signal the kernel queued for this OS thread itself while its mask
 * blocked it (SIGPIPE for a write to a closed pipe, made by glibc's stdio
 * where bobbin does not see the EPIPE) is the G's that ran here then:
 * natively it waits for that thread. Once the mask lets it in (the next G
 * run here), the kernel would give it to whatever runs: a thread that does
 * not block SIGPIPE died of another's. It goes back to the last G this M
 * ran, if that G still lives, or nowhere, as a thread's pending signals
 * end with it (shim/signal.c's reclaim, as for a signalfd call's). One
 * more system call when the mask opens what that G blocked; a read of
 * /proc only when something in the opening is pending. */
static __attribute__((noinline)) void rescue_own_signals(bb_m *mp, uint64_t opening)
{
	uint64_t pend = 0;
	opening &= ~(BB_GLIBC_SIGNALS | BB_SIGBIT(bb_presig()) | BB_SIGBIT(SIGKILL) | BB_SIGBIT(SIGSTOP));
	if (opening == 0 || bb_reclaim_hook == NULL ||
	    bb_rawsyscall6(SYS_rt_sigpending, (long)&pend, 8, 0, 0, 0, 0) != 0 || !(pend & opening))
		return;
	bb_g *gp = mp->lastg;
	bool lives = gp->goid == mp->lastgoid && atomic_load(&gp->status) != Gdead;
	bb_reclaim_hook(lives ? gp : NULL, opening);
}

/* this M's kernel mask, exactly mask (one system call if it changes) */
void bb_set_sigmask(bb_m *mp, uint64_t mask)
{
	if (mp->sigmask == mask)
		return;
	/* bobbin's signal has moved (preempt.c) and this M has not followed */
	if (__builtin_expect(bb_presig() != SIGURG, 0) && atomic_load(&mp->presig_state) != 2)
		bb_presig_resync(mp);
	/* only what the G that ran here last blocked can wait here for it:
	 * not on its own unblock (then the signal is its own to take) */
	bb_g *lg = mp->lastg;
	uint64_t opening = mp->sigmask & ~mask;
	if (__builtin_expect(opening != 0, 0) && lg && lg != mp->curg &&
	    (__atomic_load_n(&lg->sigmask, __ATOMIC_RELAXED) & opening))
		rescue_own_signals(mp, opening);
	bb_rawsyscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&mask, 0, 8, 0, 0);
	mp->sigmask = mask;
}

void bb_apply_sigmask(bb_m *mp, uint64_t mask)
{
	bb_set_sigmask(mp, strip_ours(mask));
}

/* The kernel's mask of this thread back to what bobbin knows it to be:
 * after a signal handler was left by unwinding (glibc's SIGCANCEL handler
 * cancelling a G in a blocking call), the kernel still blocks what it
 * blocked for the handler, and the M goes on to run other Gs. */
void bb_resync_sigmask(bb_m *mp)
{
	uint64_t mask = mp->sigmask;
	bb_rawsyscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&mask, 0, 8, 0, 0);
}

/* An M about to sleep with no G blocks all a program can block but the
 * faults (a kill of SIGSEGV & co. to the process is as rare as harmless),
 * so no process signal lands on it: see sysmon.c (the callers make sure
 * sysmon runs, outside any lock). */
void bb_idle_sigmask(bb_m *mp)
{
	bb_apply_sigmask(mp, BB_IDLE_MASK);
}
int32_t bb_gomaxprocs;
bool bb_active;
void (*bb_g_exit_hook)(bb_g *gp);
cpu_set_t bb_initial_affinity;
char bb_initial_comm[16];
long bb_timerslack_ns;

static size_t g0_stacksize = BB_G0_STACKSIZE;

bool bb_casgstatus(bb_g *gp, uint32_t from, uint32_t to)
{
	uint32_t old = from;
	/* acq_rel: the status hands ownership of the G's context between Ms */
	if (atomic_compare_exchange_strong_explicit(&gp->status, &old, to, memory_order_acq_rel,
						    memory_order_acquire))
		return true;
	bb_throw("casgstatus: G%llu is in status %u, not %u (to %u)",
		 (unsigned long long)gp->goid, old, from, to);
}

/* A change of status no other thread can make at the same time: gp was
 * just taken off a run queue by this M, or is the G this M runs and is
 * about to publish. A plain release store where bb_casgstatus's locked
 * instruction waits for every earlier store to drain (a direct switch
 * makes two of these right after saving a context); the run queue's own
 * CAS and release store still order the G's context between Ms. */
static inline void own_gstatus(bb_g *gp, uint32_t from, uint32_t to)
{
	if (__builtin_expect(atomic_load_explicit(&gp->status, memory_order_relaxed) != from, 0))
		bb_casgstatus(gp, from, to); /* reports the wrong state */
	atomic_store_explicit(&gp->status, to, memory_order_release);
}

/* ---- idle P list: sched.lock held ---- */

void bb_pidleput(bb_p *pp)
{
	if (!bb_runqempty(pp))
		bb_throw("pidleput: P%d has runnable Gs", pp->id);
	atomic_store_explicit(&pp->status, Pidle, memory_order_relaxed);
	pp->m = NULL;
	pp->link = bb_sched_.pidle;
	bb_sched_.pidle = pp;
	atomic_fetch_add_explicit(&bb_sched_.npidle, 1, memory_order_relaxed);
}

bb_p *bb_pidleget(void)
{
	bb_p *pp = bb_sched_.pidle;
	if (pp) {
		bb_sched_.pidle = pp->link;
		atomic_fetch_sub_explicit(&bb_sched_.npidle, 1, memory_order_relaxed);
	}
	return pp;
}

/* ---- idle M list: sched.lock held ---- */

bb_m *bb_leader_m;
_Atomic bool bb_retiring;

static void mput(bb_m *mp)
{
	mp->schedlink = bb_sched_.midle;
	bb_sched_.midle = mp;
	bb_sched_.nmidle++;
}

static bb_m *mget(void)
{
	bb_m *mp = bb_sched_.midle;
	if (mp) {
		bb_sched_.midle = mp->schedlink;
		bb_sched_.nmidle--;
	}
	return mp;
}

void bb_acquirep(bb_p *pp)
{
	bb_m *mp = bb_getm();
	if (mp->p != NULL || atomic_load_explicit(&pp->status, memory_order_relaxed) != Pidle)
		bb_throw("acquirep: M%lld already has a P, or P%d is not idle",
			 (long long)mp->id, pp->id);
	mp->p = pp;
	pp->m = mp;
	atomic_store_explicit(&pp->status, Prunning, memory_order_relaxed);
}

static bb_p *releasep(void)
{
	bb_m *mp = bb_getm();
	bb_p *pp = mp->p;
	if (pp == NULL || pp->m != mp)
		bb_throw("releasep: inconsistent P");
	mp->p = NULL;
	pp->m = NULL;
	atomic_store_explicit(&pp->status, Pidle, memory_order_relaxed);
	return pp;
}

/* ---- Ms: start, stop ---- */

/* ---- dropping Ms ----
 *
 * An M that has just put its P on the idle list in findrunnable cannot be
 * found by startm until it is on midle or is the timer sleeper. A wakep in
 * that window (the M that ran a G that just exited readies the joiner, say)
 * would start a new OS thread although an M is about to sleep; a create and
 * join loop made two or three extra that way. So such an M is counted as
 * dropping, and startm that finds no idle M leaves its P on the pending
 * list for it. A dropping M looks at that list, under sched.lock, whenever
 * it takes a P or becomes findable; npend <= nmdropping always, so every
 * pending P is taken. */

/* sched.lock held: mp starts dropping */
void bb_drop_begin(bb_m *mp)
{
	mp->dropping = true;
	bb_sched_.nmdropping++;
}

/* sched.lock held: mp stops dropping (if it was) */
void bb_drop_end(bb_m *mp)
{
	if (mp->dropping) {
		mp->dropping = false;
		bb_sched_.nmdropping--;
	}
}

/* sched.lock held: a P left for a dropping M, or NULL. *spin: it comes with
 * a spinning M already counted in nmspinning. */
bb_p *bb_pend_take(bool *spin)
{
	bb_p *pp = bb_sched_.pendp;
	if (pp) {
		bb_sched_.pendp = pp->link;
		bb_sched_.npend--;
		*spin = pp->pendspin;
	}
	return pp;
}

/* sched.lock held: pp left for a dropping M (npend <= nmdropping kept by
 * the caller); spinning: it comes with a spinning M counted */
void bb_pend_put(bb_p *pp, bool spinning)
{
	pp->pendspin = spinning;
	pp->link = bb_sched_.pendp;
	bb_sched_.pendp = pp;
	bb_sched_.npend++;
}

/* Take a P as a dropping M (sched.lock not held): a pending one first, else
 * an idle one. The M holds it on return and is spinning, counted, if the P
 * came that way. NULL: none; the M stays dropping. */
static bb_p *drop_takep(void)
{
	bb_m *mp = bb_getm();
	bool spin = false;
	bb_lock_acquire(&bb_sched_.lock);
	bb_p *pp = bb_pend_take(&spin);
	if (pp == NULL)
		pp = bb_pidleget();
	if (pp)
		bb_drop_end(mp);
	bb_lock_release(&bb_sched_.lock);
	if (pp) {
		bb_acquirep(pp);
		mp->spinning = spin;
	}
	return pp;
}

/* sched.lock held, for the timer sleeper (timer.c): a P left pending for
 * the dropping mp, which then stops dropping; or NULL */
bb_p *bb_drop_pending(bb_m *mp, bool *spin)
{
	bb_p *pp = bb_pend_take(spin);
	if (pp)
		bb_drop_end(mp);
	return pp;
}

/* Park this M until startm hands it a P (or take one left pending). */
void bb_stopm(void)
{
	bb_m *mp = bb_getm();
	if (mp->p || mp->spinning)
		bb_throw("stopm: M holds a P or is spinning");
	bb_sysmon_ensure(); /* it routes the process signals this M will block */
	bb_lock_acquire(&bb_sched_.lock);
	bool spin = false;
	bb_p *pp = mp->lockedg ? NULL : bb_pend_take(&spin);
	bb_drop_end(mp);
	if (pp) {
		bb_lock_release(&bb_sched_.lock);
		bb_acquirep(pp);
		mp->spinning = spin;
		return;
	}
	if (atomic_load(&bb_retiring) && mp != bb_leader_m && mp->lockedg == NULL) {
		bb_lock_release(&bb_sched_.lock);
		bb_m_end(mp); /* bb_go_single */
	}
	bb_idle_sigmask(mp);
	mput(mp);
	bb_lock_release(&bb_sched_.lock);
	bb_notesleep(&mp->park);
	bb_noteclear(&mp->park);
	if (mp->nextp == NULL)
		bb_m_end(mp); /* woken with no P: bb_go_single ends it */
	bb_acquirep(mp->nextp);
	mp->nextp = NULL;
	if (mp->nextg) { /* handed over with the P (to_leader) */
		bb_g *gp = mp->nextg;
		mp->nextg = NULL;
		bb_execute(gp, false);
	}
}

/* no OS thread to be had for pp: the work stays queued for the Ms that
 * exist, and the P goes back to the idle list */
void bb_startm_failed(bb_p *pp, bool spinning)
{
	bb_lock_acquire(&bb_sched_.lock);
	bool inherit;
	bb_g *gp;
	while ((gp = bb_runqget(pp, &inherit)) != NULL)
		bb_globrunqput(gp);
	bb_pidleput(pp);
	bb_lock_release(&bb_sched_.lock);
	if (spinning)
		atomic_fetch_sub_explicit(&bb_sched_.nmspinning, 1, memory_order_relaxed);
}

/* sched.lock held, for startm with no idle M: an M asleep in stoplockedm
 * (or about to be) whose locked G waits in pp's queue or the global one,
 * which could run nothing else, is the one to take pp (as startlockedm
 * does), and no OS thread need be made for it; its G is off the queue
 * then. The Gs of pp's queue looked at before it go to the tail. NULL if
 * there is none: an unlocked G needs an M that may run anything. While a
 * new OS thread is made for that one, these go on running: the thread that
 * holds the lock of the program's malloc, which pthread_create needs, may
 * be one of them. */
static bb_m *locked_next(bb_p *pp)
{
	/* not with timers of pp's due (an M must run them: schedule), nor
	 * for a G of the caller's own (it was preempted: the others' turn) */
	int64_t t0 = atomic_load_explicit(&pp->timer0when, memory_order_acquire);
	if (t0 != 0 && t0 <= bb_nanotime())
		return NULL;
	bb_m *self = bb_self_m();
	bool inherit;
	for (uint32_t n = bb_runqlen(pp) + 1; n > 0; n--) {
		bb_g *gp = bb_runqget(pp, &inherit);
		if (gp == NULL)
			break;
		if (gp->lockedm != NULL && gp->lockedm != self)
			return gp->lockedm;
		bb_runqput(pp, gp, false);
	}
	bb_g *gp = bb_globrunq_take_locked(256, self);
	return gp ? gp->lockedm : NULL;
}

/* Run some M on pp (or on an idle P if pp is NULL). spinning: the caller
 * already counted the new M in nmspinning. */
void bb_startm(bb_p *pp, bool spinning)
{
	bb_lock_acquire(&bb_sched_.lock);
	if (pp == NULL) {
		pp = bb_pidleget();
		if (pp == NULL) {
			bb_lock_release(&bb_sched_.lock);
			if (spinning)
				atomic_fetch_sub_explicit(&bb_sched_.nmspinning, 1, memory_order_relaxed);
			return;
		}
	}
	bb_m *nmp = mget();
	if (nmp == NULL) {
		bb_m *taken = bb_timer_sleeper_take(pp, spinning);
		if (taken) {
			bb_lock_release(&bb_sched_.lock);
			bb_timer_kick_taken(taken);
			return;
		}
		bb_m *lm = spinning ? NULL : locked_next(pp);
		if (lm) {
			bb_lock_release(&bb_sched_.lock);
			lm->nextp = pp;
			bb_notewakeup(&lm->park); /* it runs its locked G */
			return;
		}
		if (bb_sched_.npend < bb_sched_.nmdropping) {
			bb_pend_put(pp, spinning);
			bb_lock_release(&bb_sched_.lock);
			return;
		}
		bb_lock_release(&bb_sched_.lock);
		int saved = errno;
		bb_newm(pp, spinning);
		errno = saved;
		return;
	}
	bb_lock_release(&bb_sched_.lock);
	if (nmp->spinning || nmp->nextp)
		bb_throw("startm: idle M is spinning or has a P");
	nmp->spinning = spinning;
	nmp->nextp = pp;
	bb_notewakeup(&nmp->park);
}

/* Make sure an M is looking for work when a G was just made runnable. */
void bb_wakep(void)
{
	if (atomic_load_explicit(&bb_sched_.npidle, memory_order_relaxed) == 0)
		return;
	int32_t zero = 0;
	if (atomic_load_explicit(&bb_sched_.nmspinning, memory_order_relaxed) != 0 ||
	    !atomic_compare_exchange_strong_explicit(&bb_sched_.nmspinning, &zero, 1,
						     memory_order_acq_rel, memory_order_relaxed))
		return;
	bb_startm(NULL, true);
}

static void resetspinning(void)
{
	bb_m *mp = bb_getm();
	mp->spinning = false;
	int32_t n = atomic_fetch_sub_explicit(&bb_sched_.nmspinning, 1, memory_order_acq_rel) - 1;
	if (n < 0)
		bb_throw("resetspinning: negative nmspinning");
	/* we were the last spinner and found work: there may be more, so let
	 * another M look (the spinning M "hands the baton" on) */
	bb_wakep();
}

/* the spin-th wait for another thread that holds no lock we need: a pause
 * for the first hundred, then a yield of the OS thread (it may be waiting
 * for this CPU) */
static void spin_pause(unsigned spin)
{
	if (spin < 100)
		__builtin_ia32_pause();
	else
		bb_sys(SYS_sched_yield, 0, 0, 0);
}

/* ---- running a G ---- */

/* ---- a new G's TCB ----
 *
 * A new G's TCB (one at the top of its stack) is filled in when the G
 * first runs, not by its creator: on the CPU that runs it, and on the
 * stack that CPU ran a thread on last, if its P has one of the same size
 * cached (bb_stack_swap: the stack the creator picked goes to that cache
 * in its place, never touched). A burst of threads that one CPU makes and
 * another runs then runs on a few stacks warm in the runner's caches; the
 * creator had written each new TCB (its lines last in the other CPU's
 * cache) and the G's first steps missed on every line again.
 *
 * Until then its TCB and stack bounds are not the thread's yet: another
 * thread that looks at them (pthread_cancel, pthread_getattr_np,
 * pthread_getcpuclockid, dlopen's TLS fill) pins them first
 * (bb_tcb_pin), which fills the TCB in where it is. tcbstate orders the
 * two: whoever moves it from UNSET to FILLING fills, the other waits for
 * READY (a few hundred nanoseconds, no lock held by the filler). */

/* fill in gp's TCB; pp: the P about to run it, whose warmest stack of its
 * size it may take. As a block a thread used before (its module images
 * copied again): a fresh one already holds them, and which of the two the
 * G ends up on is only known here. */
static void tcb_fill(bb_g *gp, bb_p *pp)
{
	if (pp && bb_stack_swap(pp, gp)) {
		gp->ctx.rsp = gp->stack_hi & ~(uintptr_t)15;
		gp->ctx.fsbase = (uint64_t)(uintptr_t)gp->tcb;
	}
	bb_tcb_prepare(gp, true);
	atomic_store_explicit(&gp->tcbstate, BB_TCB_READY, memory_order_release);
}

/* true: the caller fills gp's TCB in; false: it is ready */
static bool tcb_claim(bb_g *gp)
{
	uint8_t s = atomic_load_explicit(&gp->tcbstate, memory_order_acquire);
	for (unsigned spins = 0; s != BB_TCB_READY;) {
		if (s == BB_TCB_UNSET) {
			if (atomic_compare_exchange_weak_explicit(&gp->tcbstate, &s, BB_TCB_FILLING,
								  memory_order_acquire,
								  memory_order_acquire))
				return true;
			continue;
		}
		spin_pause(spins++);
		s = atomic_load_explicit(&gp->tcbstate, memory_order_acquire);
	}
	return false;
}

void bb_tcb_pin(bb_g *gp)
{
	if (tcb_claim(gp))
		tcb_fill(gp, NULL);
}

void *bb_g_tcb(bb_g *gp)
{
	bb_tcb_pin(gp);
	return gp->tcb;
}

static __attribute__((noinline)) void first_run(bb_p *pp, bb_g *gp)
{
	if (tcb_claim(gp))
		tcb_fill(gp, pp);
}

/* gp becomes mp's G: the bookkeeping of every switch to a G */
static inline void take_g(bb_m *mp, bb_g *gp, bool inherit_time)
{
	if (atomic_load_explicit(&gp->tcbstate, memory_order_acquire) != BB_TCB_READY)
		first_run(mp->p, gp);
	bb_cpuclock_switch(mp, gp);
	mp->curg = gp;
	mp->lastg = gp; /* whose the kernel's signals for this thread are (rescue_own_signals) */
	mp->lastgoid = gp->goid;
	gp->m = mp;
	own_gstatus(gp, Grunnable, Grunning);
	atomic_store_explicit(&gp->preempt, false, memory_order_relaxed);
	atomic_store_explicit(&gp->hog, false, memory_order_relaxed);
	/* owner P only writes it; sysmon reads it */
	atomic_store_explicit(&mp->p->switchtick,
			      atomic_load_explicit(&mp->p->switchtick, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	mp->switches++;
	if (__builtin_expect(bb_trace_on, 0))
		bb_trace_slice_start(mp->p, gp, mp);
	if (inherit_time) {
		mp->p->inherited++;
	} else {
		mp->p->schedtick++;
		mp->p->inherited = 0;
	}
}

static inline uint64_t g_mask(const bb_g *gp)
{
	return gp->sigmask | atomic_load_explicit(&gp->procsig, memory_order_relaxed);
}

/* The G a G about to yield or park may switch to directly (bb_gswitch),
 * without the round through g0: the P's own next G, when schedule() would
 * take it with nothing else to do first. NULL: go through g0, which runs
 * due timers, the 61st tick's look at the global queue, the end of an
 * inherited slice, Gs and Ms locked to each other, the trace, and a G
 * whose signal mask this M must install first. */
static bb_g *direct_next(bb_m *mp, bb_p *pp, bool *inherit)
{
	if (mp->lockedg != NULL || bb_trace_on || pp->inherited >= BB_SLICE_INHERITS)
		return NULL;
	if (pp->schedtick % 61 == 0 &&
	    atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) > 0)
		return NULL;
	bb_g *next = bb_runqget(pp, inherit);
	if (next && (next->lockedm != NULL || mp->sigmask != strip_ours(g_mask(next)) ||
		     next->alt_kern != NULL || mp->alt_cur != mp->altstack ||
		     atomic_load_explicit(&next->kpending, memory_order_relaxed))) {
		bb_runqput(pp, next, true); /* back in front: it runs next */
		return NULL;
	}
	return next;
}

/* A G leaving its M for good or for a wait: the G to switch to directly,
 * made mp's G already, or NULL (schedule on g0, which runs due timers first) */
static bb_g *switch_target(bb_m *mp)
{
	bb_p *pp = mp->p;
	int64_t t0 = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
	if (t0 != 0 && t0 <= bb_nanotime())
		return NULL;
	bool inherit;
	bb_g *next = direct_next(mp, pp, &inherit);
	if (next)
		take_g(mp, next, inherit);
	return next;
}

__attribute__((noreturn)) void bb_execute(bb_g *gp, bool inherit_time)
{
	bb_m *mp = bb_getm();
	if (__builtin_expect(mp->cred_seen != atomic_load_explicit(&bb_cred_n, memory_order_relaxed), 0))
		bb_cred_catchup(mp); /* what the only thread gave every thread */
	/* the G's mask first, while this M has no G: a pending process signal
	 * it lets in is delivered at once, and its handler must find no G
	 * half-switched to (it runs as on a thread bobbin did not make) */
	uint64_t mask = g_mask(gp);
	if (__builtin_expect(mp->sigmask != strip_ours(mask), 0))
		bb_apply_sigmask(mp, mask);
	bb_alt_enter(mp, gp);
	take_g(mp, gp, inherit_time);
	bb_gogo(&gp->ctx);
}

static int run_all_timers(bb_p *pp)
{
	int64_t now = 0;
	int n = 0;
	for (int32_t i = 0; i < bb_gomaxprocs; i++) {
		bb_p *p2 = bb_allp[i];
		int64_t w = atomic_load_explicit(&p2->timer0when, memory_order_acquire);
		if (w == 0)
			continue;
		if (now == 0)
			now = bb_nanotime();
		if (w <= now)
			n += bb_runtimers(p2, now);
	}
	return n;
}

static bb_g *stealwork(bb_p *pp)
{
	for (int round = 0; round < 4; round++) {
		bool last = round == 3; /* runnext only as a last resort */
		uint32_t start = bb_fastrand();
		for (int32_t k = 0; k < bb_gomaxprocs; k++) {
			bb_p *p2 = bb_allp[(start + (uint32_t)k) % (uint32_t)bb_gomaxprocs];
			if (p2 == pp)
				continue;
			bb_g *gp = bb_runqsteal(pp, p2, last);
			if (gp) {
				atomic_fetch_add_explicit(&bb_stats_.steals, 1, memory_order_relaxed);
				if (__builtin_expect(bb_trace_on, 0))
					bb_trace_steal(pp, p2, 1 + (int)bb_runqlen(pp));
				return gp;
			}
		}
	}
	return NULL;
}

/* the first G of a poller list that can run here (pinned ones are made
 * runnable for their own M and skipped) */
static bb_g *take_one(bb_g **list)
{
	while (*list) {
		bb_g *gp = *list;
		*list = gp->schedlink;
		gp->schedlink = NULL;
		bool pinned = gp->pinned_wait;
		bb_casgstatus(gp, Gwaiting, Grunnable);
		if (!pinned)
			return gp;
	}
	return NULL;
}

/* The Gs whose sockets are ready, from a look at the network that does not
 * wait, or NULL; none while an M is blocked polling it (that M hands them
 * out itself) or no G waits on it. */
static bb_g *netpoll_now(void)
{
	if (!bb_netpoll_inited() || atomic_load(&bb_netpoll_waiters) == 0 ||
	    atomic_load(&bb_lastpoll) == 0)
		return NULL;
	int n;
	return bb_netpoll(0, &n);
}

/* The network, looked at without waiting when nobody has for
 * BB_POLL_BUSY_NS while Gs wait on it: findrunnable looks only when a P
 * has nothing else to run, and sysmon every 10 ms, so while every P is
 * busy a G whose socket became ready waited that long where the kernel
 * wakes a thread at once. A thread-per-connection server on one P whose
 * clients were started in a row accepted nothing until all had connected:
 * its listen backlog overflowed, and the dropped connections came back
 * after the kernel's 1, 2, 4, 8 s SYN retries (CPython's socketserver,
 * backlog 5: 15 to 28 s instead of 2). The Gs go to the back of the run
 * queue. */
#define BB_POLL_BUSY_NS (50 * 1000)
static void poll_while_busy(void)
{
	if (atomic_load_explicit(&bb_netpoll_waiters, memory_order_relaxed) == 0)
		return;
	int64_t last = atomic_load_explicit(&bb_lastpoll, memory_order_relaxed);
	int64_t now = bb_nanotime();
	/* one P polls (0: an M blocks in epoll_wait and hands them out) */
	if (last == 0 || now - last < BB_POLL_BUSY_NS ||
	    !atomic_compare_exchange_strong_explicit(&bb_lastpoll, &last, now, memory_order_relaxed,
						     memory_order_relaxed))
		return;
	bb_g *list = netpoll_now();
	if (list)
		bb_injectglist(list);
}

/* Find a runnable G; blocks (parks the M) until there is one. On return the
 * M holds a P. */
static bb_g *findrunnable(bool *inherit_time)
{
	bb_m *mp = bb_getm();
top:;
	bb_p *pp = mp->p;
	bb_g *gp = bb_runqget(pp, inherit_time);
	if (gp)
		return gp;
	/* expired timers, ours and other Ps' (a busy P's G may run long) */
	mp->runs_next = true;
	int fired = run_all_timers(pp);
	mp->runs_next = false;
	if (fired) {
		gp = bb_runqget(pp, inherit_time);
		if (gp)
			return gp;
	}
	*inherit_time = false;
	if (atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) > 0) {
		bb_lock_acquire(&bb_sched_.lock);
		gp = bb_globrunqget(pp, 0);
		bb_lock_release(&bb_sched_.lock);
		if (gp)
			return gp;
	}
	/* the network, if nobody is blocked polling it */
	bb_g *ready = netpoll_now();
	if (ready) {
		gp = take_one(&ready);
		bb_injectglist(ready);
		if (gp)
			return gp;
	}
	/* steal, if not too many Ms are already spinning */
	int32_t busy = bb_gomaxprocs - atomic_load_explicit(&bb_sched_.npidle, memory_order_relaxed);
	if (mp->spinning ||
	    2 * atomic_load_explicit(&bb_sched_.nmspinning, memory_order_relaxed) < busy) {
		if (!mp->spinning) {
			mp->spinning = true;
			atomic_fetch_add_explicit(&bb_sched_.nmspinning, 1, memory_order_relaxed);
		}
		gp = stealwork(pp);
		if (gp)
			return gp;
	}
	/* nothing: give up the P */
	bb_lock_acquire(&bb_sched_.lock);
	if (bb_sched_.runqsize > 0) {
		gp = bb_globrunqget(pp, 0);
		bb_lock_release(&bb_sched_.lock);
		return gp;
	}
	releasep();
	bb_pidleput(pp);
	bb_drop_begin(mp);
	bb_lock_release(&bb_sched_.lock);

	if (mp->spinning) {
		mp->spinning = false;
		if (atomic_fetch_sub_explicit(&bb_sched_.nmspinning, 1, memory_order_acq_rel) <= 0)
			bb_throw("findrunnable: negative nmspinning");
		/* re-check after dropping spinning: see the file comment */
		for (int32_t i = 0; i < bb_gomaxprocs; i++) {
			if (!bb_runqempty(bb_allp[i]) ||
			    atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) > 0) {
				if (drop_takep()) {
					if (!mp->spinning) {
						mp->spinning = true;
						atomic_fetch_add_explicit(&bb_sched_.nmspinning, 1,
									  memory_order_relaxed);
					}
					goto top;
				}
				break;
			}
		}
	}
	bb_g *list;
	int slept = bb_timer_sleep(&list);
	if (slept == BB_SLEEP_GOTP) {
		bb_injectglist(list); /* mp->spinning was set, and counted, by startm */
		goto top;
	}
	if (slept == BB_SLEEP_WOKE) {
		/* a deadline passed, an earlier timer came, or the poller readied
		 * Gs: find a P for them */
		if (drop_takep()) {
			gp = take_one(&list);
			bb_injectglist(list);
			if (gp)
				return gp;
			goto top;
		}
		bb_injectglist(list);
	}
	bb_stopm();
	goto top;
}

/* ---- Gs locked to their M (Go's LockOSThread) ----
 *
 * A G whose thread-level kernel state matters (affinity, namespaces, its
 * name, scheduling policy) is locked to its M: that M runs no other G, and
 * the G runs on no other M. When the G blocks, its M lends its P and
 * sleeps; whichever M later picks the G from a run queue hands it its own
 * P and wakes the locked M. */

void bb_stoplockedm(void)
{
	bb_m *mp = bb_getm();
	if (mp->p) /* none when it comes from exitsyscall0 */
		bb_handoffp(releasep());
	bb_notesleep(&mp->park);
	bb_noteclear(&mp->park);
	bb_acquirep(mp->nextp);
	mp->nextp = NULL;
}

static void startlockedm(bb_g *gp)
{
	bb_m *lm = gp->lockedm;
	bb_p *pp = releasep();
	lm->nextp = pp;
	bb_notewakeup(&lm->park); /* it runs its locked G (bb_schedule) */
	bb_stopm();
}

/* on the G: lock it to its M (counted, as Go's LockOSThread) */
void bb_lock_os_thread(void)
{
	bb_m *mp = bb_getm();
	bb_g *gp = mp->curg;
	if (gp->lockcount++ == 0) {
		gp->lockedm = mp;
		mp->lockedg = gp;
	}
}

/* On g0 of mp, about to run gp, which has no M of its own and kernel
 * state another thread set for it (pthread_setaffinity_np,
 * pthread_setschedparam): gp becomes mp's for life, as if it had locked
 * itself, and mp's OS thread takes that state. */
void bb_adopt_kstate(bb_m *mp, bb_g *gp)
{
	unsigned long mask[BB_KAFF_MAX / sizeof(unsigned long)];
	size_t masksize = 0;
	bb_lock_acquire(&gp->lock);
	uint32_t k = atomic_exchange_explicit(&gp->kpending, 0, memory_order_relaxed);
	int policy = gp->schedpolicy;
	struct sched_param sp = {.sched_priority = gp->schedprio};
	if ((k & BB_KP_AFFINITY) && gp->kaffsize) {
		masksize = gp->kaffsize;
		memcpy(mask, gp->kaff, masksize);
	}
	/* under the lock: a setter that finds lockedm set changes mp's OS
	 * thread itself, one that does not leaves its state here */
	if (gp->lockcount++ == 0) {
		gp->lockedm = mp;
		mp->lockedg = gp;
	}
	bb_lock_release(&gp->lock);
	if (masksize)
		bb_sys(SYS_sched_setaffinity, 0, masksize, mask);
	if (k & BB_KP_SCHED)
		bb_sys(SYS_sched_setscheduler, 0, policy, &sp);
}

void bb_unlock_os_thread(void)
{
	bb_m *mp = bb_getm();
	bb_g *gp = mp->curg;
	if (gp->lockcount > 0 && --gp->lockcount == 0) {
		gp->lockedm = NULL;
		mp->lockedg = NULL;
	}
}

/* One round of scheduling: find a G and run it. g0 only; never returns. */
void bb_schedule(void)
{
	bb_m *mp = bb_getm();
	if (mp->p == NULL || mp->curg != NULL)
		bb_throw("schedule: M without a P, or with a G");
	bb_alt_leave(mp);
	if (__builtin_expect(bb_trace_on, 0))
		bb_trace_slice_end(mp->p);
	if (mp->lockedg) {
		/* this M belongs to one G: wait for it, lending the P meanwhile */
		bb_stoplockedm();
		bb_execute(mp->lockedg, false);
	}
top:;
	bb_p *pp = mp->p;
	bb_g *gp = NULL;
	bool inherit = false;
	int64_t t0 = atomic_load_explicit(&pp->timer0when, memory_order_acquire);
	if (t0 != 0) {
		mp->runs_next = true;
		bb_runtimers(pp, bb_nanotime());
		mp->runs_next = false;
	}
	/* Gs that keep readying each other run from runnext and share one time
	 * slice; once it is used up, the runnext G waits its turn at the tail of
	 * the ring like everyone else (Go bounds this with sysmon's 10 ms
	 * preemption; a count bounds it here on every schedule) */
	if (pp->inherited >= BB_SLICE_INHERITS) {
		bb_g *next = atomic_exchange_explicit(&pp->runnext, NULL, memory_order_acq_rel);
		if (next)
			bb_runqput(pp, next, false);
		pp->inherited = 0;
		pp->schedtick++;
	}
	/* fairness: every 61st tick look at the global queue first, so two Gs
	 * that keep readying each other cannot starve it */
	if (pp->schedtick % 61 == 0 &&
	    atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) > 0) {
		bb_lock_acquire(&bb_sched_.lock);
		gp = bb_globrunqget(pp, 1);
		bb_lock_release(&bb_sched_.lock);
	}
	if (gp == NULL)
		poll_while_busy();
	if (gp == NULL)
		gp = findrunnable(&inherit);
	if (mp->spinning)
		resetspinning();
	if (__builtin_expect(atomic_load_explicit(&gp->kpending, memory_order_relaxed) != 0, 0) &&
	    gp->lockedm == NULL)
		bb_adopt_kstate(mp, gp); /* it is locked to mp from here on */
	if (__builtin_expect(gp->lockedm != NULL, 0) && gp->lockedm != mp) {
		/* it runs only on its own M: hand that M our P, and stop */
		startlockedm(gp);
		goto top;
	}
	bb_execute(gp, inherit);
}

/* ---- switching away from a G (these run on g0 through bb_mcall) ---- */

static inline void mcall(void (*fn)(bb_g *))
{
	bb_m *mp = bb_getm();
	bb_g *gp = mp->curg;
	bb_to_g0(mp, gp, fn);
}

/* gp just parked in an interruptible wait (waitkind set): a pthread_kill
 * or pthread_cancel that came before waitkind was published found nothing
 * to wake; make its bb_interrupt now. No fence: the waiter's seq_cst store
 * of waitkind orders these seq_cst loads after it (runtime.h). The G may
 * already be running elsewhere: bb_interrupt is safe on any G, as it is
 * for the interrupters themselves. */
static void interrupt_if_due(bb_g *gp)
{
	if (atomic_load(&gp->waitkind) == BB_WAIT_NONE)
		return;
	int why = 0;
	if ((atomic_load(&gp->sigpending) | atomic_load(&gp->procsig)) & ~gp->sigmask)
		why |= BB_WAKE_SIGNAL;
	if (bb_cancel_due(gp))
		why |= BB_WAKE_CANCEL;
	if (why)
		bb_interrupt(gp, why);
}

/* gp, whose context is saved, waits: Gwaiting, off mp, then the wait's
 * unlock function runs. false: the unlock function says not to wait after
 * all, and gp is still Gwaiting (the caller runs it again) */
static bool parked(bb_m *mp, bb_g *gp)
{
	bool (*unlockf)(bb_g *, void *) = mp->waitunlockf;
	void *arg = mp->waitarg;
	mp->waitunlockf = NULL;
	mp->waitarg = NULL;
	/* once it is Gwaiting, a goready on another M may run it at once, so
	 * nothing of the G is touched after unlockf */
	bb_casgstatus(gp, Grunning, Gwaiting);
	if (mp->curg == gp) /* else a direct switch made the next G curg */
		mp->curg = NULL;
	gp->m = NULL;
	if (unlockf && !unlockf(gp, arg))
		return false;
	interrupt_if_due(gp);
	return true;
}

static void park_m(bb_g *gp)
{
	bb_m *mp = bb_getm();
	if (!parked(mp, gp)) {
		bb_casgstatus(gp, Gwaiting, Grunnable);
		bb_execute(gp, true);
	}
	bb_schedule();
}

/* park_m's work after bb_gopark switched straight to the P's next G, on
 * that G's stack (it is mp->curg already) */
static void park_post(bb_g *gp)
{
	bb_m *mp = bb_getm();
	if (!parked(mp, gp)) {
		/* no wait after all: gp runs on, the other G goes back in
		 * front (its saved context is untouched; this frame on its
		 * stack is abandoned) */
		bb_g *next = mp->curg;
		mp->curg = NULL;
		next->m = NULL;
		bb_casgstatus(next, Grunning, Grunnable);
		bb_runqput(mp->p, next, true);
		bb_casgstatus(gp, Gwaiting, Grunnable);
		bb_execute(gp, true);
	}
}

/* A G that holds a glibc-internal lock (a FILE lock taken by flockfile)
 * must not be switched away: other Gs wait for that lock in the kernel,
 * blocking their Ms, and the holder might never get one back. Such a G
 * waits on its own M instead, still holding its P, running the P's timers. */
static void park_pinned(bb_g *gp, bool (*unlockf)(bb_g *, void *), void *arg)
{
	gp->pinned_wait = true;
	bb_casgstatus(gp, Grunning, Gwaiting);
	if (unlockf && !unlockf(gp, arg)) {
		bb_casgstatus(gp, Gwaiting, Grunning);
		gp->pinned_wait = false;
		return;
	}
	interrupt_if_due(gp);
	for (unsigned spins = 0;
	     atomic_load_explicit(&gp->status, memory_order_acquire) != Grunnable; spins++) {
		bb_m *mp = bb_getm();
		if (atomic_load_explicit(&mp->p->timer0when, memory_order_relaxed) != 0)
			bb_runtimers(mp->p, bb_nanotime());
		spin_pause(spins);
	}
	gp->pinned_wait = false;
	bb_casgstatus(gp, Grunnable, Grunning);
}

void bb_gopark(bool (*unlockf)(bb_g *, void *), void *arg, uint32_t reason)
{
	bb_reattach();
	bb_m *mp = bb_getm();
	bb_g *gp = mp->curg;
	gp->waitreason = reason;
	mp->p->parks[reason & 15]++;
	if (bb_debug.schedtrace_ms || reason == waitReasonJoin || reason == waitReasonMutex)
		gp->waitsince = bb_nanotime_coarse();
	if (gp->libclocks > 0) {
		park_pinned(gp, unlockf, arg);
		gp->waitreason = waitReasonZero;
		return;
	}
	mp->waitunlockf = unlockf; /* read by park_m or park_post */
	mp->waitarg = arg;
	gp->sw_vol++; /* (a pinned park above blocks its OS thread, which counts it) */
	bb_g *next = switch_target(mp);
	if (next) {
		bb_gswitch(&gp->ctx, &next->ctx, park_post, gp);
	} else {
		bb_to_g0(mp, gp, park_m);
	}
	gp->waitreason = waitReasonZero;
}

static void ready(bb_g *gp, bool next, bool wake);

void bb_goready(bb_g *gp)
{
	ready(gp, true, true);
}

/* Ready gp in this P's runnext and wake no idle P for it: the caller knows
 * its own G is about to give up the P (bb_netpoll_kick) */
void bb_goready_here(bb_g *gp)
{
	ready(gp, true, false);
}

/* Ready gp behind the Gs already queued here, not in runnext: for a joiner
 * woken by an exit, so that a loop joining a batch of threads finds the
 * rest of the batch finished instead of parking once per thread. */
void bb_goready_tail(bb_g *gp)
{
	ready(gp, false, true);
}

static void ready(bb_g *gp, bool next, bool wake)
{
	bool pinned = gp->pinned_wait; /* read before the CAS hands the G over */
	bb_casgstatus(gp, Gwaiting, Grunnable);
	if (pinned)
		return; /* it waits on its own M: see park_pinned */
	bb_m *mp = bb_tls_m ? bb_getm() : NULL;
	/* from a signal handler outside any G: the code it interrupted may be
	 * changing this P's queue or hold sched.lock (runtime/sysmon.c) */
	if (mp && bb_m_in_handler(mp) && bb_defer_ready(gp))
		return;
	if (__builtin_expect(bb_trace_on, 0) && mp && mp->p)
		bb_trace_ready(mp->p, mp->curg, gp);
	if (mp && mp->p) {
		bb_runqput(mp->p, gp, next);
		/* this M runs timers on g0 and takes its P's next G right
		 * after: a G that is the only one queued here needs no other M
		 * (a lone thread's every sleep woke a spinning M for nothing) */
		if (mp->runs_next && next && mp->curg == NULL && bb_runqlen(mp->p) == 0 &&
		    atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) == 0)
			return; /* (with a global G, the 61st tick could run that first) */
		if (!wake)
			return;
	} else {
		bb_lock_acquire(&bb_sched_.lock);
		bb_globrunqput(gp);
		bb_lock_release(&bb_sched_.lock);
	}
	bb_wakep();
}

static void gosched_m(bb_g *gp)
{
	bb_m *mp = bb_getm();
	bb_casgstatus(gp, Grunning, Grunnable);
	mp->curg = NULL;
	gp->m = NULL;
	atomic_store_explicit(&gp->hog, true, memory_order_relaxed);
	bb_lock_acquire(&bb_sched_.lock);
	bb_globrunqput(gp);
	bb_lock_release(&bb_sched_.lock);
	bb_wakep(); /* an idle P may take it: Gs that yield spread over the Ps */
	bb_schedule();
}

/* preempted (cooperatively or by the signal): to the global queue, as Go's
 * gopreempt_m; unlike bb_gosched it always switches, so a spinning G cannot
 * keep the P when others wait on other Ps' queues */
void bb_gopreempt(void)
{
	bb_reattach();
	bb_m *mp = bb_getm();
	atomic_store_explicit(&mp->curg->preempt, false, memory_order_relaxed);
	mp->curg->sw_invol++;
	mcall(gosched_m);
}

/* after bb_gosched's direct switch, on the next G's stack: prev's context
 * is saved, so it may be queued (behind the Gs already here, as a yield
 * asks) and taken by another M */
static void yield_post(bb_g *prev)
{
	bb_m *mp = bb_getm();
	prev->m = NULL;
	atomic_store_explicit(&prev->hog, true, memory_order_relaxed);
	own_gstatus(prev, Grunning, Grunnable);
	bb_runqput(mp->p, prev, false);
	bb_wakep(); /* an idle P may take it: Gs that yield spread over the Ps */
}

/* sched_yield: let every other runnable G go first (Go's Gosched puts the G
 * on the global queue). With nothing else runnable it returns at once, and
 * false: the caller did not give the P away. */
bool bb_gosched(void)
{
	bb_reattach();
	bb_m *mp = bb_getm();
	if (mp->curg->libclocks > 0)
		return false; /* holds a glibc-internal lock: see park_pinned */
	/* a yield loop may be waiting for a sleeper whose timer is due */
	run_all_timers(mp->p);
	bb_p *pp = mp->p;
	bool global = atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) != 0;
	if (!global) {
		if (bb_runqempty(pp)) {
			/* nothing else to run here but, maybe, Gs the network has
			 * made ready: a loop yielding until a thread that waits on
			 * a socket has done its part would otherwise wait for
			 * sysmon's look at the network, every 10 ms, on one P */
			bb_g *list = netpoll_now();
			if (list == NULL)
				return false;
			bb_injectglist(list);
		}
		/* the common case, only local Gs to let go first (this P's
		 * timers ran just above): switch to the next one directly */
		bool inherit;
		bb_g *next = direct_next(mp, pp, &inherit);
		if (next) {
			bb_g *gp = mp->curg;
			gp->sw_invol++;
			take_g(mp, next, inherit);
			bb_gswitch(&gp->ctx, &next->ctx, yield_post, gp);
			return true;
		}
	}
	mp->curg->sw_invol++;
	mcall(gosched_m);
	return true;
}

/* ---- G free lists ---- */

/* Dead Gs in arrays, not in lists through the Gs: a burst of joins spills
 * and refills them by the score, and a list walk was a chain of cache
 * misses, one per G (each last written by the CPU its thread ran on). */

/* n dead Gs onto the global cache. gflock held (bobbin's allocator takes
 * only its own lock). */
static void gfree_global_put(bb_g *const *g, int32_t n)
{
	if (bb_sched_.ngfreev + n > bb_sched_.gfreecap) {
		int32_t cap = bb_sched_.gfreecap ? 2 * bb_sched_.gfreecap : 256;
		while (cap < bb_sched_.ngfreev + n)
			cap *= 2;
		bb_g **v = bb_realloc(bb_sched_.gfreev, (size_t)cap * sizeof *v);
		if (v) {
			bb_sched_.gfreev = v;
			bb_sched_.gfreecap = cap;
		}
	}
	int32_t k = bb_sched_.gfreecap - bb_sched_.ngfreev;
	if (k > n)
		k = n;
	memcpy(bb_sched_.gfreev + bb_sched_.ngfreev, g, (size_t)k * sizeof *g);
	bb_sched_.ngfreev += k;
	for (int32_t i = k; i < n; i++) { /* no memory for the array */
		g[i]->schedlink = bb_sched_.gfree;
		bb_sched_.gfree = g[i];
	}
	bb_sched_.ngfree += n;
}

static void gfput(bb_p *pp, bb_g *gp)
{
	if (pp->gfreecnt == BB_GFREE_LOCAL_MAX) {
		/* the older half to the global cache */
		const int32_t half = BB_GFREE_LOCAL_MAX / 2;
		bb_lock_acquire(&bb_sched_.gflock);
		gfree_global_put(pp->gfree, half);
		bb_lock_release(&bb_sched_.gflock);
		memmove(pp->gfree, pp->gfree + half,
			(size_t)(BB_GFREE_LOCAL_MAX - half) * sizeof *pp->gfree);
		pp->gfreecnt -= half;
	}
	pp->gfree[pp->gfreecnt++] = gp;
}

static bb_g *gfget(bb_p *pp)
{
	if (pp->gfreecnt == 0 && bb_sched_.ngfree > 0) {
		bb_lock_acquire(&bb_sched_.gflock);
		int32_t k = bb_sched_.ngfreev < BB_GFREE_LOCAL_MAX / 2 ? bb_sched_.ngfreev
									: BB_GFREE_LOCAL_MAX / 2;
		bb_sched_.ngfreev -= k;
		memcpy(pp->gfree, bb_sched_.gfreev + bb_sched_.ngfreev, (size_t)k * sizeof *pp->gfree);
		for (bb_g *g1; k < BB_GFREE_LOCAL_MAX / 2 && (g1 = bb_sched_.gfree) != NULL;) {
			bb_sched_.gfree = g1->schedlink;
			pp->gfree[k++] = g1;
		}
		bb_sched_.ngfree -= k;
		pp->gfreecnt = k;
		bb_lock_release(&bb_sched_.gflock);
	}
	if (pp->gfreecnt == 0)
		return NULL;
	bb_g *gp = pp->gfree[--pp->gfreecnt];
	gp->schedlink = NULL;
	return gp;
}

/* A dead, joined or detached G made ready for reuse. Its stack (and the
 * TCB at its top) went to the cache when it ended (g_dead); a TCB of its
 * own stays with it. false: main's, kept. */
static bool g_recycle(bb_g *gp)
{
	if (gp->is_main)
		return false;
	gp->user_stack = false;
	gp->stack_lo = gp->stack_hi = gp->stack_top = 0;
	gp->joiner = NULL;
	gp->exited = gp->joined = gp->fjoin = false;
	atomic_store_explicit(&gp->exitword, 0, memory_order_relaxed);
	/* until bb_newproc reuses it, the dead G answers a join or a detach
	 * with EINVAL, as NPTL's cached descriptor of a detached or joined
	 * thread does (a join would otherwise wait for an exit long past) */
	gp->detached = true;
	return true;
}

/* a dead G goes back to the caller's P */
void bb_gfree(bb_g *gp)
{
	if (g_recycle(gp))
		gfput(bb_getm()->p, gp);
}

/* from a thread that may have no P: onto the global list */
static void gfree_global(bb_g *gp)
{
	if (!g_recycle(gp))
		return;
	bb_lock_acquire(&bb_sched_.gflock);
	gfree_global_put(&gp, 1);
	bb_lock_release(&bb_sched_.gflock);
}

/* ---- creating and ending Gs ---- */

bb_g *bb_g_from_tcb(void *tcb)
{
	if (tcb == NULL)
		return NULL;
	bb_g *gp = *(bb_g **)((char *)tcb + bb_off_g_in_tcb);
	if (gp == NULL || gp->magic != BB_G_MAGIC || gp->tcb != tcb)
		return NULL;
	return gp;
}

void *(*bb_g_run_hook)(bb_g *gp); /* shim: run fn under glibc's unwinding landing pad */

void bb_gmain(bb_g *gp)
{
	bb_tcb_on_g_start(gp);
	void *res = bb_g_run_hook ? bb_g_run_hook(gp) : gp->fn(gp->arg);
	bb_goexit(res);
}

/* gp is dead: off its M, and its joiner readied or the G freed. Runs on
 * another stack (g0's, or the next G's after a direct switch). Returns
 * whether gp was locked to mp. */
static bool g_dead(bb_m *mp, bb_g *gp)
{
	gp->m = NULL;
	/* unlock first: once a joiner runs it may free gp and a new G reuse it */
	bool was_locked = gp->lockedm == mp;
	if (was_locked) {
		gp->lockedm = NULL;
		gp->lockcount = 0;
		mp->lockedg = NULL;
	}
	/* nothing runs on its stack any more: the stack, and the TCB at its
	 * top, are free for the next thread now, not at the join (the G is
	 * the pthread_t, and a zombie needs nothing more) */
	bb_stack_unit unit;
	bool cached = !gp->is_main && bb_stack_take(gp, &unit);
	bb_lock_acquire(&gp->lock);
	if (cached && unit.tcb)
		gp->tcb = NULL; /* pthread_cancel looks under the lock */
	bb_casgstatus(gp, Grunning, Gdead);
	bb_g *joiner = NULL;
	bool detached = gp->detached, fjoin = false;
	if (!detached) {
		gp->exited = true;
		atomic_store_explicit(&gp->exitword, 1, memory_order_release);
		fjoin = gp->fjoin;
		joiner = gp->joiner;
		gp->joiner = NULL; /* a timed joiner's timer must not ready it too */
	}
	bb_lock_release(&gp->lock);
	if (cached) /* before gp may be reused below, after it is no thread */
		bb_stack_put(mp->p, &unit);
	if (detached)
		bb_gfree(gp);
	else if (joiner)
		bb_goready_tail(joiner);
	else if (fjoin) /* gp may be reused by now: then a spurious wake-up */
		bb_futex(&gp->exitword, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
	return was_locked;
}

/* after bb_goexit's direct switch, on the next G's stack */
static void exit_post(bb_g *gp)
{
	g_dead(bb_getm(), gp);
}

static void goexit0(bb_g *gp)
{
	bb_m *mp = bb_getm();
	mp->curg = NULL;
	if (g_dead(mp, gp)) {
		/* its thread-level kernel state (affinity, namespaces...) was the
		 * G's: the M dies with it, as in Go, unless it is the initial one */
		if (mp != bb_leader_m) {
			bb_handoffp(releasep());
			bb_m_end(mp);
		}
		/* the initial thread cannot end: give it back its affinity,
		 * policy, name and timer slack (namespaces it entered stay:
		 * README, known limits) */
		bb_rawsyscall6(SYS_sched_setaffinity, 0, sizeof bb_initial_affinity,
			       (long)&bb_initial_affinity, 0, 0, 0);
		bb_m_reset_sched();
		bb_rawsyscall6(SYS_prctl, 15 /* PR_SET_NAME */, (long)bb_initial_comm, 0, 0, 0, 0);
		if (bb_timerslack_ns > 0)
			bb_rawsyscall6(SYS_prctl, PR_SET_TIMERSLACK, bb_timerslack_ns, 0, 0, 0, 0);
	}
	bb_schedule();
}

/* Live Gs: the sum of the per-P counts. Racy while Gs are created and
 * exit elsewhere; exact when every P is idle. */
int32_t bb_nlive(void)
{
	int32_t n = 0;
	for (int32_t i = 0; i < bb_gomaxprocs; i++)
		n += atomic_load(&bb_allp[i]->live);
	return n;
}

/* After main has gone, is this exit the last? Exits count under sched.lock,
 * so of two concurrent last exits the later one sees both decrements (a
 * G is created only by a live G, whose count is still in). */
static bool last_exit(void)
{
	bb_lock_acquire(&bb_sched_.lock);
	bool last = bb_nlive() == 0;
	bb_lock_release(&bb_sched_.lock);
	return last;
}

void bb_goexit(void *result)
{
	bb_reattach(); /* its P was taken while it was stuck: preempt.c */
	bb_m *mp = bb_getm();
	bb_g *gp = mp->curg;
	BB_RT_MARK(gp);
	gp->result = result;
	/* thread_local destructors first, as glibc; then TSD destructors */
	BB_PROGRAM_CODE(bb_tcb_tls_dtors(); if (bb_g_exit_hook) bb_g_exit_hook(gp));
	if (gp->clear_tid) {
		/* as the kernel does for a thread's clear_child_tid at its exit */
		atomic_store(gp->clear_tid, 0);
		int n = bb_sema_wake(gp->clear_tid, 1);
		if (n == 0)
			bb_futex(gp->clear_tid, FUTEX_WAKE, 1, NULL);
		gp->clear_tid = NULL;
	}
	bb_tcb_on_g_exit(gp);
	/* process signals given to it and not taken: sysmon gives them to
	 * another G (they are still pending) */
	if (atomic_load_explicit(&gp->procsig, memory_order_relaxed))
		bb_sigwatch_add(atomic_exchange(&gp->procsig, 0));
	mp = bb_getm(); /* destructors may have moved us to another M */
	/* seq_cst, pairs with main's exit: either this exit sees main_gone,
	 * or main's count (below) sees this exit */
	bb_p *pp = mp->p;
	atomic_store(&pp->live, atomic_load_explicit(&pp->live, memory_order_relaxed) - 1);
	if (gp->is_main)
		atomic_store(&bb_sched_.main_gone, true);
	if (atomic_load(&bb_sched_.main_gone) && last_exit())
		exit(0); /* the last thread ended: as NPTL, the process exits 0 */
	bb_g *next = switch_target(mp); /* none for a G locked to this M (direct_next) */
	if (next)
		bb_gswitch(&gp->ctx, &next->ctx, exit_post, gp);
	else {
		bb_to_g0(mp, gp, goexit0);
	}
	__builtin_unreachable();
}

static void current_fpenv(bb_ctx *c)
{
	__asm__ volatile("stmxcsr %0" : "=m"(c->mxcsr));
	__asm__ volatile("fnstcw %0" : "=m"(c->fpucw));
}

/* a G bb_newproc gave up on, with the stack it had got */
static void newproc_undo(bb_p *pp, bb_g *gp)
{
	bb_stack_unit unit;
	if (bb_stack_take(gp, &unit))
		bb_stack_put(pp, &unit);
	gp->tcb = gp->own_tcb;
	gp->unit_tcb = false;
	gp->user_stack = false;
	gfput(pp, gp);
}

/* ---- G structs ----
 *
 * A G is the pthread_t of its thread: its TCB goes back to the stack
 * cache with its stack when the thread ends, and only the G waits for the
 * join. G structs come from one reserved range, never freed, so that a
 * pthread_t is told from the TCB of a thread bobbin did not make by its
 * address (bb_g_at). */
#define G_SLOT ((sizeof(bb_g) + 63) & ~(size_t)63)
#define G_GROW (2ul << 20)
static bb_lock gregion_lock;
static char *gregion;
static size_t gregion_size, gregion_rw;
static _Atomic size_t gregion_used;
uintptr_t bb_gregion_base;

static bb_g *galloc(void)
{
	bb_g *gp = NULL;
	bb_lock_acquire(&gregion_lock);
	if (gregion == NULL) {
		/* address space only (PROT_NONE is not committed); pages are
		 * made usable 2 MiB at a time */
		for (size_t sz = 16ul << 30; sz >= (64ul << 20) && gregion == NULL; sz /= 4) {
			void *p = mmap(NULL, sz, PROT_NONE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (p != MAP_FAILED) {
				gregion = p;
				gregion_size = sz;
			}
		}
		if (gregion == NULL)
			goto out;
		bb_gregion_base = (uintptr_t)gregion;
	}
	size_t used = atomic_load_explicit(&gregion_used, memory_order_relaxed);
	if (used + G_SLOT > gregion_rw) {
		if (gregion_rw + G_GROW > gregion_size ||
		    mprotect(gregion + gregion_rw, G_GROW, PROT_READ | PROT_WRITE) != 0)
			goto out;
		gregion_rw += G_GROW;
	}
	gp = (bb_g *)(gregion + used);
	atomic_store_explicit(&gregion_used, used + G_SLOT, memory_order_release);
out:
	bb_lock_release(&gregion_lock);
	return gp;
}

/* the G whose pthread_t th is, or NULL if th is no G's (it may still be
 * the TCB of main's, or of a thread bobbin did not make) */
bb_g *bb_g_at(uintptr_t th)
{
	uintptr_t off = th - bb_gregion_base;
	if (bb_gregion_base == 0 || off >= atomic_load_explicit(&gregion_used, memory_order_acquire) ||
	    off % G_SLOT != 0)
		return NULL;
	bb_g *gp = (bb_g *)th;
	return gp->magic == BB_G_MAGIC ? gp : NULL;
}

/* Make a new G running fn(arg). On a G holding a P. *err = errno on failure. */
bb_g *bb_newproc(void *(*fn)(void *), void *arg, const bb_gattr *attr, int *err)
{
	size_t stacksize = attr->stacksize, guardsize = attr->guardsize;
	void *stackaddr = attr->stackaddr;
	bb_m *mp = bb_getm();
	bb_p *pp = mp->p;
	size_t defsize = bb_default_stacksize();
	guardsize = (guardsize + 4095) & ~(size_t)4095;
	bb_g *gp = gfget(pp);
	if (gp == NULL) {
		gp = galloc();
		if (gp == NULL)
			goto nomem;
		bb_allgs_add(gp);
		gp->magic = BB_G_MAGIC;
		atomic_store_explicit(&gp->status, Gdead, memory_order_relaxed);
	}
	/* the stack: the user's, a cached one (with its TCB), or a fresh
	 * mapping (with a new TCB at its top) */
	bool fresh_tcb = false; /* else it ran a thread before: re-initialise it */
	gp->tcb = NULL;
	gp->unit_tcb = false;
	if (stackaddr) {
		gp->stack_map = NULL;
		gp->user_stack = true;
		gp->stack_lo = (uintptr_t)stackaddr;
		gp->stack_hi = gp->stack_top = (uintptr_t)stackaddr + stacksize;
		gp->guardsize = 0;
	} else {
		size_t want = stacksize ? stacksize : defsize;
		want = (want + 4095) & ~(size_t)4095;
		if (!bb_stack_get(pp, gp, want + guardsize, guardsize)) {
			if (bb_stackalloc(gp, want, guardsize, true) != 0) {
				newproc_undo(bb_getm()->p, gp);
				goto nomem;
			}
			fresh_tcb = gp->unit_tcb;
		}
	}
	if (!gp->unit_tcb) {
		if (gp->own_tcb == NULL) {
			gp->own_tcb = bb_tcb_alloc();
			if (gp->own_tcb == NULL) {
				newproc_undo(bb_getm()->p, gp);
				goto nomem;
			}
			fresh_tcb = true;
		}
		gp->tcb = gp->own_tcb;
	}
	/* ld.so allocated a new TCB's DTV with the program's malloc, which
	 * may have waited (a parked G) or been preempted: this G may run on
	 * another M and P now */
	mp = bb_getm();
	pp = mp->p;
	if (pp->goidcache == pp->goidcacheend) {
		pp->goidcache = (uint64_t)atomic_fetch_add_explicit(&bb_sched_.goidgen, BB_GOID_BATCH,
								    memory_order_relaxed) + 1;
		pp->goidcacheend = pp->goidcache + BB_GOID_BATCH;
	}
	gp->goid = pp->goidcache++;
	gp->clear_tid = NULL;
	gp->rt_fp = 0;
	gp->rt_nested = false;
	gp->fn = fn;
	gp->arg = arg;
	gp->result = NULL;
	gp->name[0] = '\0';
	gp->waitreason = waitReasonZero;
	atomic_store_explicit(&gp->spinning, 0, memory_order_relaxed); /* the last thread's */
	gp->preempt_pc = 0;
	gp->rawcalls = false;
	gp->detached = attr->detached;
	gp->c11 = attr->c11;
	gp->alt_sp = gp->alt_kern = NULL; /* a new thread has none, as after clone */
	memcpy(gp->name, mp->curg->name, sizeof gp->name); /* as the kernel copies comm */
	/* as clone copies the mask, or the one pthread_attr_setsigmask_np gave */
	gp->sigmask = attr->sigmask ? *attr->sigmask & ~BB_GLIBC_SIGNALS : mp->curg->sigmask;
	atomic_store_explicit(&gp->sigpending, 0, memory_order_relaxed);
	atomic_store_explicit(&gp->sigwait_set, 0, memory_order_relaxed);
	atomic_store_explicit(&gp->masked_wait, false, memory_order_relaxed);
	gp->nsigq = 0; /* values queued to the thread this G was before */
	atomic_store_explicit(&gp->procsig, 0, memory_order_relaxed);
	gp->createpc = attr->createpc;
	gp->creator = mp->curg->goid;
	atomic_store_explicit(&gp->cpu_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&gp->cpu_m, NULL, memory_order_relaxed);
	gp->sw_vol = gp->sw_invol = 0;
	gp->ru = (bb_rucount){ 0 };
	gp->schedpolicy = attr->schedpolicy;
	gp->schedprio = attr->schedprio;
	/* kernel state of its own (attributes of pthread_create): taken with
	 * an OS thread of its own at its first schedule(), bb_adopt_kstate */
	uint32_t kp = attr->sched_apply ? BB_KP_SCHED : 0;
	gp->kaffsize = 0; /* (its buffer stays for the next mask) */
	if (attr->affinity) {
		if (gp->kaff == NULL)
			gp->kaff = bb_alloc(BB_KAFF_MAX);
		if (gp->kaff == NULL) {
			newproc_undo(pp, gp);
			goto nomem;
		}
		gp->kaffsize = attr->affsize < BB_KAFF_MAX ? attr->affsize : BB_KAFF_MAX;
		memcpy(gp->kaff, attr->affinity, gp->kaffsize);
		kp |= BB_KP_AFFINITY;
	}
	atomic_store_explicit(&gp->kpending, kp, memory_order_relaxed);
	if (gp->unit_tcb) { /* filled in where it first runs */
		gp->stkp = pp;
		gp->stkputs = pp->stkputs;
		atomic_store_explicit(&gp->tcbstate, BB_TCB_UNSET, memory_order_release);
	} else {
		atomic_store_explicit(&gp->tcbstate, BB_TCB_READY, memory_order_relaxed);
		bb_tcb_prepare(gp, !fresh_tcb);
	}

	memset(&gp->ctx, 0, sizeof gp->ctx);
	gp->ctx.rsp = gp->stack_hi & ~(uintptr_t)15;
	gp->ctx.rip = (uint64_t)(uintptr_t)bb_gstart;
	gp->ctx.r12 = (uint64_t)(uintptr_t)gp;
	gp->ctx.fsbase = (uint64_t)(uintptr_t)gp->tcb;
	current_fpenv(&gp->ctx); /* a new thread starts with its creator's FP env */

	pp->ncreated++;
	atomic_store_explicit(&pp->live, atomic_load_explicit(&pp->live, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	bb_sysmon_ensure(); /* from now on someone may need preempting */
	if (__builtin_expect(bb_stats_on, 0)) {
		int32_t live = bb_nlive();
		int32_t peak = atomic_load_explicit(&bb_sched_.nthreadsmax, memory_order_relaxed);
		while (live > peak &&
		       !atomic_compare_exchange_weak_explicit(&bb_sched_.nthreadsmax, &peak, live,
							      memory_order_relaxed,
							      memory_order_relaxed))
			;
	}
	if (attr->handle)
		*attr->handle = gp; /* visible before the G can run, as in NPTL */
	/* a dead G is this creator's alone (gfget): a plain release store, not
	 * a locked CAS, which would wait here for every store above to drain
	 * (the G's and TCB's lines come from the core the G last ran on) */
	if (atomic_load_explicit(&gp->status, memory_order_relaxed) != Gdead)
		bb_throw("newproc: G%llu is not dead", (unsigned long long)gp->goid);
	atomic_store_explicit(&gp->status, Grunnable, memory_order_release);
	bb_runqput(pp, gp, true);
	bb_wakep();
	return gp;
nomem:
	*err = EAGAIN;
	return NULL;
}

/* ---- join ---- */

static bool unlock_g(bb_g *self, void *arg)
{
	bb_lock_release(&((bb_g *)arg)->lock);
	return true;
}

/* timed join: the joiner's timer fired. Unregister it if it still waits. */
static void join_timeout(void *arg, uintptr_t seq)
{
	bb_g *gp = arg, *joiner = (bb_g *)seq;
	bb_lock_acquire(&gp->lock);
	bool wake = gp->joiner == joiner && !gp->exited;
	if (wake) {
		gp->joiner = NULL;
		gp->joined = false;
	}
	bb_lock_release(&gp->lock);
	if (wake)
		bb_goready(joiner);
}

static bool arm_and_unlock_g(bb_g *self, void *arg)
{
	bool ok = bb_addtimer(&self->timer);
	bb_lock_release(&((bb_g *)arg)->lock);
	return ok;
}

/* Wait for gp to end. Returns 0 and its result, or an errno as NPTL gives
 * it (EBUSY for BB_JOIN_TRY, ETIMEDOUT for BB_JOIN_TIMED past deadline). */
/* NPTL's answer to a join of gp that must not wait, in NPTL's order, or 0
 * (gp->lock held): a tryjoin of a running thread, a detached thread, the
 * caller itself or a thread joining it (deadlock), a second joiner. self
 * NULL: the joiner is no G (bb_gjoin_foreign); then the caller is gp only
 * when it runs gp's TLS (gp on a coroutine's stack). */
static int join_refused(bb_g *gp, int mode, bb_g *self)
{
	if (mode == BB_JOIN_TRY && !gp->exited)
		return EBUSY; /* "still running" first */
	if (gp->detached)
		return EINVAL;
	bool itself = self ? gp == self : bb_getfsbase() == (uintptr_t)gp->tcb;
	if (itself || (self && self->joiner == gp && !gp->exited)) /* or it is joining us */
		return EDEADLK;
	if (!gp->exited && gp->joined)
		return EINVAL;
	return 0;
}

int bb_gjoin(bb_g *gp, void **result, int mode, int64_t deadline)
{
	bb_g *self = bb_getg();
	bb_lock_acquire(&gp->lock);
	int err = join_refused(gp, mode, self);
	if (err) {
		bb_lock_release(&gp->lock);
		return err;
	}
	if (!gp->exited) {
		if (mode == BB_JOIN_BLOCK) {
			gp->joined = true;
			gp->joiner = self;
			self->waitobj = gp;
			self->interrupted = false;
			atomic_store(&self->waitkind, BB_WAIT_JOIN);
			bb_gopark(unlock_g, gp, waitReasonJoin);
			atomic_store(&self->waitkind, BB_WAIT_NONE);
			bb_lock_acquire(&gp->lock);
			if (self->interrupted && !gp->exited) {
				bb_lock_release(&gp->lock);
				return EINTR; /* cancelled: the caller acts on it */
			}
			if (!gp->exited)
				bb_throw("join: woken before G%llu exited",
					 (unsigned long long)gp->goid);
		}
		/* timed: a wake-up is either the exit or the timer; a timer of an
		 * earlier wait that fired late may wake us early: then wait again */
		while (!gp->exited) {
			if (bb_nanotime() >= deadline) {
				bb_lock_release(&gp->lock);
				return ETIMEDOUT;
			}
			gp->joined = true;
			gp->joiner = self;
			self->timer.when = deadline;
			self->timer.fn = join_timeout;
			self->timer.arg = gp;
			self->timer.seq = (uintptr_t)self;
			/* interruptible as the untimed wait is (bb_join_interrupt) */
			self->waitobj = gp;
			self->interrupted = false;
			atomic_store(&self->waitkind, BB_WAIT_JOIN);
			bb_gopark(arm_and_unlock_g, gp, waitReasonJoin);
			atomic_store(&self->waitkind, BB_WAIT_NONE);
			bb_deltimer(&self->timer);
			bb_lock_acquire(&gp->lock);
			if (gp->joiner == self) {
				gp->joiner = NULL;
				gp->joined = false;
			}
			if (self->interrupted && !gp->exited) {
				bb_lock_release(&gp->lock);
				return EINTR; /* cancelled or pthread_kill'ed: the caller acts */
			}
		}
	}
	if (result)
		*result = gp->result;
	bb_lock_release(&gp->lock);
	bb_gfree(gp);
	return 0;
}

/* pthread_cancel: a joiner parked on gp->lock's G is woken if still there */
bool bb_join_interrupt(bb_g *self)
{
	bb_g *gp = self->waitobj;
	if (gp == NULL || atomic_load(&self->waitkind) != BB_WAIT_JOIN)
		return false;
	bb_lock_acquire(&gp->lock);
	bool mine = gp->joiner == self && !gp->exited;
	if (mine) {
		gp->joiner = NULL;
		gp->joined = false;
		self->interrupted = true;
	}
	bb_lock_release(&gp->lock);
	if (mine)
		bb_goready(self);
	return mine;
}

bool bb_sleep_interrupt(bb_g *gp);

void bb_interrupt(bb_g *gp, int why)
{
	atomic_thread_fence(memory_order_seq_cst); /* the caller's flag, then waitkind */
	switch (atomic_load(&gp->waitkind)) {
	case BB_WAIT_SEMA:
		if (gp->wakeon & why)
			bb_sema_interrupt(gp);
		break;
	case BB_WAIT_SLEEP:
		bb_sleep_interrupt(gp);
		break;
	case BB_WAIT_NETPOLL:
		bb_netpoll_interrupt(gp);
		break;
	case BB_WAIT_JOIN:
		bb_join_interrupt(gp);
		break;
	}
}

/* 0, or EINVAL if already detached; a finished G is freed at once */
static int gdetach(bb_g *gp, void (*gfree)(bb_g *))
{
	bb_lock_acquire(&gp->lock);
	if (gp->detached || gp->joined) {
		bb_lock_release(&gp->lock);
		return EINVAL;
	}
	gp->detached = true;
	bool done = gp->exited;
	bb_lock_release(&gp->lock);
	if (done)
		gfree(gp);
	return 0;
}

int bb_gdetach(bb_g *gp)
{
	return gdetach(gp, bb_gfree);
}

int bb_gdetach_foreign(bb_g *gp)
{
	return gdetach(gp, gfree_global);
}

/* A joiner that is not a running G (a thread bobbin did not make, such as
 * glibc's SIGEV_THREAD helper running a callback; a G on a coroutine's
 * stack) waits on gp->exitword in the kernel, g_dead waking it; NPTL's own
 * join would wait for a kernel tid that a G never has. deadline: monotonic
 * (bb_nanotime), for BB_JOIN_TIMED. */
int bb_gjoin_foreign(bb_g *gp, void **result, int mode, int64_t deadline)
{
	bb_lock_acquire(&gp->lock);
	int err = join_refused(gp, mode, NULL);
	if (err) {
		bb_lock_release(&gp->lock);
		return err;
	}
	if (!gp->exited) {
		gp->joined = true;
		gp->fjoin = true;
		bb_lock_release(&gp->lock);
		while (atomic_load_explicit(&gp->exitword, memory_order_acquire) == 0) {
			struct timespec rel, *ts = NULL;
			if (mode == BB_JOIN_TIMED) {
				int64_t left = deadline - bb_nanotime();
				if (left <= 0)
					break;
				rel.tv_sec = left / 1000000000;
				rel.tv_nsec = left % 1000000000;
				ts = &rel;
			}
			/* libc's syscall(), not bobbin's interposer: a wait whose pc
			 * is not in bobbin lets sysmon take the P from this M if it
			 * is one (a G on a coroutine's stack), as for any unseen wait */
			static long (*libc_syscall)(long, ...);
			if (libc_syscall == NULL)
				libc_syscall = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
			libc_syscall(SYS_futex, &gp->exitword, FUTEX_WAIT_PRIVATE, 0, ts, NULL, 0);
		}
		bb_lock_acquire(&gp->lock);
		if (!gp->exited) { /* timed out */
			gp->joined = gp->fjoin = false;
			bb_lock_release(&gp->lock);
			return ETIMEDOUT;
		}
	}
	if (result)
		*result = gp->result;
	bb_lock_release(&gp->lock);
	gfree_global(gp);
	return 0;
}

/* ---- start-up ---- */

int bb_sched_init(void)
{
	bb_sema_init();
	bb_gomaxprocs = bb_cfg.maxprocs;
	bb_allp = bb_alloc((size_t)bb_gomaxprocs * sizeof *bb_allp);
	if (bb_allp == NULL)
		return -1;
	for (int32_t i = 0; i < bb_gomaxprocs; i++) {
		bb_allp[i] = aligned_alloc(64, (sizeof(bb_p) + 63) & ~(size_t)63);
		if (bb_allp[i] == NULL)
			return -1;
		memset(bb_allp[i], 0, sizeof(bb_p));
		bb_p_init(bb_allp[i], i);
	}
	/* M0: this OS thread. Its g0 gets a stack and a TCB of its own; the
	 * thread's original stack and TCB stay with main, which becomes G1. */
	bb_m *m0 = bb_allocm();
	bb_leader_m = m0;
	bb_g *g1 = bb_alloc(sizeof *g1);
	void *g0stack = mmap(NULL, g0_stacksize, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (m0 == NULL || g1 == NULL || g0stack == MAP_FAILED)
		return -1;
	m0->tcb = bb_tcb_alloc();
	if (m0->tcb == NULL)
		return -1;
	m0->g0sp = ((uintptr_t)g0stack + g0_stacksize) & ~(uintptr_t)15;

	g1->magic = BB_G_MAGIC;
	g1->is_main = true;
	g1->goid = (uint64_t)atomic_fetch_add(&bb_sched_.goidgen, 1) + 1;
	g1->tcb = (void *)bb_getfsbase();
	g1->ctx.fsbase = (uint64_t)(uintptr_t)g1->tcb;
	pthread_attr_t a;
	void *lo;
	size_t sz;
	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		pthread_attr_getstack(&a, &lo, &sz);
		pthread_attr_destroy(&a);
		g1->stack_lo = (uintptr_t)lo;
		g1->stack_hi = (uintptr_t)lo + sz;
	}
	g1->stack_top = g1->stack_hi;
	g1->user_stack = true;
	bb_tcb_adopt_main(g1);
	bb_allgs_add(g1);
	bb_rawsyscall6(SYS_rt_sigprocmask, SIG_SETMASK, 0, (long)&g1->sigmask, 8, 0, 0);
	m0->sigmask = g1->sigmask;
	bb_main_g = g1;
	atomic_store_explicit(&g1->status, Grunning, memory_order_relaxed);

	bb_lock_acquire(&bb_sched_.lock);
	for (int32_t i = bb_gomaxprocs - 1; i >= 1; i--)
		bb_pidleput(bb_allp[i]);
	bb_lock_release(&bb_sched_.lock);

	bb_timerslack_ns = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	bb_m_on_thread_start(m0);
	sched_getaffinity(0, sizeof bb_initial_affinity, &bb_initial_affinity);
	prctl(PR_GET_NAME, bb_initial_comm, 0, 0, 0);
	bb_debug_init();
	bb_trace_init();
	bb_preempt_init();
	bb_fork_init();
	bb_m_kstate_init();
	bb_debug_signals_init();
	if (bb_debug.schedtrace_ms)
		bb_sysmon_ensure();
	bb_acquirep(bb_allp[0]);
	m0->curg = g1;
	g1->m = m0;
	if (bb_trace_on) /* main is already running on P0: its first slice */
		bb_trace_slice_start(bb_allp[0], g1, m0);
	atomic_store_explicit(&bb_allp[0]->live, 1, memory_order_relaxed); /* main */
	atomic_store_explicit(&bb_sched_.nthreadsmax, 1, memory_order_relaxed);
	if (bb_cfg.cpuclock == 1)
		bb_cpuclock_enable();
	return 0;
}

/* ---- back to one OS thread (bb_go_single) ----
 *
 * Natively a process whose other threads have all ended has one thread
 * again: /proc/self/task lists one task, and the kernel lets it unshare
 * (or setns into) a user namespace, which it refuses to a process with
 * more than one. Under bobbin the idle Ms and sysmon outlive the threads
 * they ran (Chromium's zygote checks /proc/self/task before it forks its
 * children, and they died of the failed check). Where the program looks
 * (shim/identity.c), its only live G moves to the initial OS thread, the
 * process's leader, which cannot end; every other M ends at its next
 * bb_stopm, through glibc's own thread exit (bb_m_end), and sysmon stops.
 * All of it starts again on demand, as at start-up: the next thread made
 * starts an M, the next park sysmon. */

/* sched.lock held: take want off the idle list */
static bool mremove(bb_m *want)
{
	for (bb_m **l = &bb_sched_.midle; *l; l = &(*l)->schedlink) {
		if (*l == want) {
			*l = want->schedlink;
			bb_sched_.nmidle--;
			return true;
		}
	}
	return false;
}

/* on g0 of the M gp ran on: gp and this M's P to the leader M, which
 * bb_go_single took off the idle list; this M stops (and ends) */
static void to_leader_m(bb_g *gp)
{
	bb_m *mp = bb_getm(), *lm = bb_leader_m;
	bb_casgstatus(gp, Grunning, Grunnable);
	mp->curg = NULL;
	gp->m = NULL;
	lm->nextg = gp;
	lm->nextp = releasep();
	bb_notewakeup(&lm->park);
	bb_stopm();
	bb_schedule();
}

/* the tasks the kernel lists for this process */
static int ntasks(void)
{
	struct stat st;
	if (bb_rawsyscall6(SYS_newfstatat, AT_FDCWD, (long)"/proc/self/task", (long)&st, 0, 0, 0) != 0)
		return -1;
	return (int)st.st_nlink - 2;
}

bool bb_go_single(void)
{
	bb_g *gp = bb_getg();
	if (bb_nlive() != 1 || atomic_load(&bb_nosstarting) != 0 ||
	    (gp->lockedm != NULL && gp->lockedm != bb_leader_m))
		return false;
	int n = ntasks();
	if (n == 1 || n < 0)
		return n == 1;
	atomic_store(&bb_retiring, true);
	bool ok = false;
	/* (the kernel lists an ended thread until it is reaped: a few µs) */
	for (int64_t end = bb_nanotime() + 2000000000; bb_nanotime() < end;) {
		if (bb_getm() != bb_leader_m) {
			bb_lock_acquire(&bb_sched_.lock);
			bool got = mremove(bb_leader_m);
			bb_lock_release(&bb_sched_.lock);
			if (got) {
				mcall(to_leader_m); /* back here on the leader */
				continue;
			}
		} else {
			bb_m *list = NULL, *mp;
			bb_lock_acquire(&bb_sched_.lock);
			while ((mp = mget()) != NULL) {
				mp->schedlink = list;
				list = mp;
			}
			bb_lock_release(&bb_sched_.lock);
			for (; list; list = mp) {
				mp = list->schedlink;
				bb_notewakeup(&list->park);
			}
			int32_t others = atomic_load(&bb_sched_.mcount) - 1 - (bb_sysmon_runs() ? 1 : 0);
			if (others == 0 && bb_sysmon_runs())
				bb_sysmon_stop();
			if (others == 0 && !bb_sysmon_runs() && ntasks() == 1) {
				ok = true;
				break;
			}
		}
		bb_timer_kick(); /* the timer sleeper, an M in epoll_wait: to stopm */
		struct timespec nap = {0, 100 * 1000};
		bb_rawsyscall6(SYS_nanosleep, (long)&nap, 0, 0, 0, 0, 0);
	}
	atomic_store(&bb_retiring, false);
	return ok;
}
