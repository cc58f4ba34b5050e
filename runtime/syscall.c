/*
 * syscall.c — entersyscall / exitsyscall / handoffp (Go's proc.go).
 *
 * A G about to make a call that may block in the kernel (a regular-file
 * read, waitpid, flock, ...) calls bb_entersyscall: its P goes Psyscall and
 * is no longer held by the M. If the call returns quickly, bb_exitsyscall
 * takes the same P back with one CAS. If it blocks, sysmon sees the P stay
 * in Psyscall, CASes it to Pidle and hands it to another M (handoffp), so
 * the other Gs keep running; the OS thread count grows only by the calls
 * actually blocked. Coming back without a P, the G queues itself globally
 * and its M goes idle.
 *
 * Between entersyscall and exitsyscall the G must not touch the scheduler:
 * it has no P.
 */
#include "runtime.h"

#include <errno.h>

static _Atomic int sysmon_started;
void bb_sysmon_start(void);

void bb_sysmon_deferred_forkchild(void);

/* sysmon is gone (it ended, or a fork child has none): the next
 * bb_sysmon_ensure starts one */
void bb_sysmon_mark_stopped(void)
{
	if (atomic_load(&sysmon_started)) /* (a store copies the page) */
		atomic_store(&sysmon_started, 0);
}

void bb_sysmon_forkchild(void)
{
	bb_sysmon_mark_stopped();
	bb_sysmon_deferred_forkchild();
}

void bb_sysmon_ensure(void)
{
	if (__builtin_expect(!atomic_load_explicit(&sysmon_started, memory_order_relaxed), 0) &&
	    !atomic_exchange(&sysmon_started, 1)) {
		int saved = errno;
		bb_sysmon_start();
		errno = saved;
	}
}

/* The P leaves its M for a system call of gp: from entersyscall, or from
 * the M's own signal handler when sysmon finds it stuck (preempt.c). */
void bb_syscall_release_p(bb_m *mp, bb_g *gp)
{
	bb_p *pp = mp->p;
	pp->nsyscalls++;
	bb_casgstatus(gp, Grunning, Gsyscall);
	if (__builtin_expect(bb_trace_on, 0)) {
		bb_trace_slice_end(pp);
		mp->syscallstart = bb_nanotime();
	}
	pp->syscalltick++;
	atomic_store_explicit(&pp->syscallm, mp, memory_order_relaxed);
	mp->oldp = pp;
	mp->p = NULL;
	pp->m = NULL;
	/* release: a sysmon that retakes the P sees it detached from this M */
	atomic_store_explicit(&pp->status, Psyscall, memory_order_release);
}

void bb_entersyscall(void)
{
	bb_reattach();
	bb_sysmon_ensure();
	bb_m *mp = bb_getm();
	bb_syscall_release_p(mp, mp->curg);
}

static void exitsyscall0(bb_g *gp)
{
	bb_m *mp = bb_getm();
	bb_casgstatus(gp, Gsyscall, Grunnable);
	mp->curg = NULL;
	gp->m = NULL;
	bb_alt_leave(mp);
	bb_lock_acquire(&bb_sched_.lock);
	bb_p *pp = bb_pidleget();
	if (pp == NULL)
		bb_globrunqput(gp);
	bb_lock_release(&bb_sched_.lock);
	if (pp) {
		bb_acquirep(pp);
		bb_execute(gp, false);
	}
	if (mp->lockedg == gp) {
		/* gp runs only here: whoever takes it from the global queue hands
		 * this M a P (startlockedm). As an idle M on the list it could be
		 * given a P by startm instead, and then lose that wake-up. */
		bb_stoplockedm();
		bb_execute(gp, false);
	}
	bb_stopm();
	bb_schedule();
}

void bb_exitsyscall(void)
{
	bb_m *mp = bb_getm();
	bb_g *gp = mp->curg;
	bb_p *oldp = mp->oldp;
	mp->oldp = NULL;
	if (__builtin_expect(bb_trace_on, 0) && mp->syscallstart) {
		bb_trace_syscall(mp, gp, mp->syscallstart);
		mp->syscallstart = 0;
	}
	uint32_t s = Psyscall;
	/* fast path: nobody took our P */
	if (oldp && atomic_compare_exchange_strong_explicit(&oldp->status, &s, Prunning,
							    memory_order_acquire,
							    memory_order_relaxed)) {
		mp->p = oldp;
		oldp->m = mp;
		bb_casgstatus(gp, Gsyscall, Grunning);
		if (__builtin_expect(bb_trace_on, 0))
			bb_trace_slice_start(oldp, gp, mp);
		return;
	}
	/* it was handed off: any idle P will do */
	bb_lock_acquire(&bb_sched_.lock);
	bb_p *pp = bb_pidleget();
	bb_lock_release(&bb_sched_.lock);
	if (pp) {
		bb_acquirep(pp);
		bb_casgstatus(gp, Gsyscall, Grunning);
		if (__builtin_expect(bb_trace_on, 0))
			bb_trace_slice_start(pp, gp, mp);
		return;
	}
	/* no P: queue the G, let this M go idle */
	bb_to_g0(mp, gp, exitsyscall0);
	bb_getm()->oldp = NULL;
}

/* Give away a P whose M is blocked (sysmon) or gone. pp is not held by
 * anyone and not on the idle list. */
void bb_handoffp(bb_p *pp)
{
	/* local or global work: start an M on it now */
	if (!bb_runqempty(pp) || atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) > 0) {
		bb_startm(pp, false);
		return;
	}
	/* nobody is looking for work: this P becomes the spinner */
	int32_t zero = 0;
	if (atomic_load_explicit(&bb_sched_.nmspinning, memory_order_relaxed) +
			atomic_load_explicit(&bb_sched_.npidle, memory_order_relaxed) == 0 &&
	    atomic_compare_exchange_strong(&bb_sched_.nmspinning, &zero, 1)) {
		bb_startm(pp, true);
		return;
	}
	bb_lock_acquire(&bb_sched_.lock);
	if (bb_sched_.runqsize > 0) {
		bb_lock_release(&bb_sched_.lock);
		bb_startm(pp, false);
		return;
	}
	/* the last P going idle while Gs wait on the netpoller and nobody is
	 * blocked polling it: an M must poll, or nothing will ready them
	 * (sysmon may not run, e.g. in a forked child; Go's handoffp does the
	 * same) */
	if (atomic_load_explicit(&bb_sched_.npidle, memory_order_relaxed) == bb_gomaxprocs - 1 &&
	    atomic_load(&bb_netpoll_waiters) > 0 && atomic_load(&bb_lastpoll) != 0) {
		bb_lock_release(&bb_sched_.lock);
		bb_startm(pp, false);
		return;
	}
	/* its own timers, or any P's that no M sleeps until: the timer
	 * sleeper may have left to run a G locked to another M
	 * (startlockedm), and that M hands off here when its G parks or ends */
	bool timers = atomic_load_explicit(&pp->timer0when, memory_order_relaxed) != 0 ||
		      (atomic_load(&bb_sched_.timersleeper) == NULL && bb_nexttimer() != 0);
	bb_pidleput(pp);
	bb_lock_release(&bb_sched_.lock);
	if (timers)
		bb_wakep(); /* someone must sleep until those timers */
}
