/*
 * pthread_mutex.c — mutexes whose waiters park their G (normal, recursive,
 * errorcheck, adaptive), overlaying glibc's pthread_mutex_t.
 *
 * The lock word is the classic three-state futex mutex; where a futex would
 * sleep, the G parks on the word's address (sema.c) and its M runs other Gs.
 * Robust, priority-inherit/-protect and process-shared mutexes keep glibc's
 * kernel implementation (the real functions). Error codes are NPTL's:
 * EDEADLK (errorcheck relock), EPERM (unlock by a non-owner), EBUSY
 * (trylock, destroy while held), EAGAIN (recursion overflow), EINVAL (a
 * destroyed or unknown kind, a bad timeout), ETIMEDOUT.
 */
#include "mutex.h"

#include <errno.h>
#include <linux/futex.h>

static bool still_contended(void *addr, void *arg)
{
	return atomic_load_explicit((_Atomic int *)addr, memory_order_relaxed) == 2;
}

/* A waiter that has waited this long makes the mutex "starving": from then
 * on an unlock hands the lock straight to the first waiter instead of
 * letting a newcomer barge in (Go's sync.Mutex starvation mode). */
#define STARVE_NS (1000 * 1000)

/* take the lock word; 0 or ETIMEDOUT */
int bb_mutex_lock_until(bb_mutex *m, int64_t deadline)
{
	int c = 0;
	if (atomic_compare_exchange_strong_explicit(&m->lock, &c, 1, memory_order_acquire,
						    memory_order_relaxed))
		return 0;
	/* the holder is likely running on another P: spin a little first, with
	 * 30, 60, 120, 240 pauses (~22 ns each here) between looks at the word:
	 * few looks steal the holder's cache line, and a waiter parks only
	 * after ~10 µs, less than a park and wake-up cost the holder */
	if (bb_gomaxprocs > 1 && !atomic_load_explicit(&m->starving, memory_order_relaxed)) {
		for (int i = 0; i < 4; i++) {
			for (int k = 0; k < 30 << i; k++)
				__builtin_ia32_pause();
			c = 0;
			if (atomic_load_explicit(&m->lock, memory_order_relaxed) == 0 &&
			    atomic_compare_exchange_weak_explicit(&m->lock, &c, 1, memory_order_acquire,
								  memory_order_relaxed))
				return 0;
		}
	}
	int64_t start = 0;
	bb_g *gp = bb_getg();
	for (;;) {
		/* acquire: pairs with the release exchange in unlock */
		if (atomic_exchange_explicit(&m->lock, 2, memory_order_acquire) == 0)
			return 0;
		if (start == 0)
			start = bb_nanotime();
		gp->wakeon = BB_WAKE_SIGNAL;
		int r = bb_sema_park(&m->lock, still_contended, NULL, waitReasonMutex, deadline, NULL,
				     NULL);
		gp->wakeon = 0;
		if (r == -3) {
			/* pthread_kill'ed: run its handler, then wait on (a mutex
			 * wait never fails with EINTR) */
			bb_take_eintr();
			gp = bb_getg();
			continue;
		}
		if (r > 0 && gp->handoff) {
			/* handed over by unlock: the word is still 2 and ours */
			gp->handoff = false;
			if (bb_nanotime() - start < STARVE_NS || !bb_sema_has_waiters(&m->lock))
				atomic_store_explicit(&m->starving, 0, memory_order_relaxed);
			return 0;
		}
		if (r < 0)
			return ETIMEDOUT;
		if (bb_nanotime() - start >= STARVE_NS)
			atomic_store_explicit(&m->starving, 1, memory_order_relaxed);
	}
}

/* the lock word went from 2 to 0: wake a waiter */
static void wake_waiter(bb_mutex *m)
{
	/* no G parked: the one who set 2 may be a thread waiting in glibc's
	 * own lock on the kernel futex (code that runs outside the scheduler:
	 * a signal handler, glibc inside entersyscall) */
	if (bb_sema_wake(&m->lock, 1) == 0)
		bb_futex((_Atomic uint32_t *)&m->lock, FUTEX_WAKE, 1, NULL); /* private */
}

/* the holder's fields cleared (glibc's), before the lock word goes */
static inline void clear_holder(bb_mutex *m)
{
	atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
	m->nusers--;
}

/* the lock word set free: true if a waiter may need a wake-up */
static inline bool free_word(bb_mutex *m)
{
	return atomic_exchange_explicit(&m->lock, 0, memory_order_release) == 2;
}

void bb_mutex_release(void *mv)
{
	bb_mutex *m = mv;
	clear_holder(m);
	/* starving: the first waiter gets the lock as it is (still held) */
	if (atomic_load_explicit(&m->starving, memory_order_relaxed) &&
	    bb_sema_wake_handoff(&m->lock))
		return;
	if (free_word(m))
		wake_waiter(m);
}

/* A default or adaptive mutex (no owner checks, no recursion count, not
 * shared with the kernel's view): its lock and unlock take the same one
 * atomic instruction glibc's fast path takes, before anything else, from
 * any thread, G or not (the lock word, owner and users are glibc's). Only
 * a wait or a wake-up goes through the scheduler. */
static inline bool plain_mutex(const bb_mutex *m)
{
	int kind = atomic_load_explicit(&m->kind, memory_order_relaxed) & ~BB_MUTEX_ELISION_FLAGS;
	return kind == PTHREAD_MUTEX_TIMED_NP || kind == PTHREAD_MUTEX_ADAPTIVE_NP;
}

static inline bool preempt_asked(const bb_g *gp)
{
	return gp != NULL && atomic_load_explicit(&gp->preempt, memory_order_relaxed);
}

/* a plain mutex taken if free, as glibc takes it: true if taken */
static inline bool plain_take(bb_mutex *m)
{
	int c = 0;
	if (!__builtin_expect(bb_active, 1) || !plain_mutex(m) ||
	    !atomic_compare_exchange_strong_explicit(&m->lock, &c, 1, memory_order_acquire,
						     memory_order_relaxed))
		return false;
	atomic_store_explicit(&m->owner, bb_self_tid(), memory_order_relaxed);
	m->count = 1;
	m->nusers++;
	return true;
}

static int lock_common(bb_mutex *m, int64_t deadline, bool try)
{
	int kind = atomic_load_explicit(&m->kind, memory_order_relaxed) & ~BB_MUTEX_ELISION_FLAGS;
	if (kind < 0 || kind > 3)
		return EINVAL;
	int self = bb_self_tid();
	if (atomic_load_explicit(&m->owner, memory_order_relaxed) == self) {
		if (kind == PTHREAD_MUTEX_RECURSIVE) {
			if (m->count + 1 == 0)
				return EAGAIN;
			m->count++;
			return 0;
		}
		if (kind == PTHREAD_MUTEX_ERRORCHECK && !try)
			return EDEADLK;
	}
	if (try) {
		int c = 0;
		if (!atomic_compare_exchange_strong_explicit(&m->lock, &c, 1, memory_order_acquire,
							     memory_order_relaxed))
			return EBUSY;
	} else {
		int err = bb_mutex_lock_until(m, deadline);
		if (err)
			return err;
	}
	atomic_store_explicit(&m->owner, self, memory_order_relaxed);
	m->count = 1;
	m->nusers++;
	if (!try)
		bb_signals_after_wake();
	return 0;
}

static bool kernel_mutex(pthread_mutex_t *mu)
{
	int kind = atomic_load_explicit(&((bb_mutex *)mu)->kind, memory_order_relaxed);
	return kind > 0 && (kind & BB_MUTEX_KERNEL_FLAGS) != 0;
}

/* the rest of pthread_mutex_lock, apart so that the fast path above it
 * needs no stack frame */
static __attribute__((noinline)) int lock_slow(pthread_mutex_t *mu)
{
	if (!bb_on_g())
		return REAL(pthread_mutex_lock)(mu);
	if (kernel_mutex(mu))
		return BB_KERNEL_WAIT(REAL(pthread_mutex_lock)(mu));
	bb_preempt_point();
	return lock_common((bb_mutex *)mu, 0, false);
}

BB_EXPORT int pthread_mutex_lock(pthread_mutex_t *mu)
{
	if (plain_take((bb_mutex *)mu))
		return 0;
	return lock_slow(mu);
}

BB_EXPORT int pthread_mutex_trylock(pthread_mutex_t *mu)
{
	if (plain_take((bb_mutex *)mu))
		return 0;
	if (!bb_on_g() || kernel_mutex(mu))
		return REAL(pthread_mutex_trylock)(mu);
	return lock_common((bb_mutex *)mu, 0, true);
}

/* a deadline on the monotonic clock for an absolute time on `clock`;
 * -1 if abstime is invalid */
int64_t bb_abs_deadline(clockid_t clock, const struct timespec *abstime)
{
	if (abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000)
		return -1;
	struct timespec now;
	clock_gettime(clock, &now);
	int64_t left = (int64_t)(abstime->tv_sec - now.tv_sec) * 1000000000 +
		       (abstime->tv_nsec - now.tv_nsec);
	int64_t mono = bb_nanotime();
	if (left <= 0)
		return mono > 0 ? mono : 1; /* already passed: still a valid deadline */
	return left > INT64_MAX - mono ? INT64_MAX : mono + left;
}

static int timed(pthread_mutex_t *mu, clockid_t clock, const struct timespec *abstime)
{
	bb_mutex *m = (bb_mutex *)mu;
	/* NPTL checks the time only when it would have to wait */
	int err = lock_common(m, 0, true);
	if (err != EBUSY)
		return err;
	int64_t deadline = bb_abs_deadline(clock, abstime);
	if (deadline < 0)
		return EINVAL;
	return lock_common(m, deadline, false);
}

BB_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *mu, const struct timespec *abstime)
{
	if (!bb_on_g())
		return REAL(pthread_mutex_timedlock)(mu, abstime);
	if (kernel_mutex(mu))
		return BB_KERNEL_WAIT(REAL(pthread_mutex_timedlock)(mu, abstime));
	return timed(mu, CLOCK_REALTIME, abstime);
}

BB_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *mu, clockid_t clock,
				      const struct timespec *abstime)
{
	if (!bb_on_g())
		return REAL(pthread_mutex_clocklock)(mu, clock, abstime);
	if (kernel_mutex(mu))
		return BB_KERNEL_WAIT(REAL(pthread_mutex_clocklock)(mu, clock, abstime));
	if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC)
		return EINVAL;
	return timed(mu, clock, abstime);
}

/* out of line, so that pthread_mutex_unlock's fast path needs no frame */
static __attribute__((noinline)) void unlock_wake(bb_mutex *m)
{
	(void)bb_on_g(); /* on a G: its bobbin frame is marked for the wake */
	wake_waiter(m);
}

/* sysmon asked this G to give way while the pc was in bobbin's code: a
 * loop of plain locks and unlocks gives way here, as it did at every lock */
static __attribute__((noinline)) void unlock_give_way(void)
{
	if (bb_on_g())
		bb_preempt_point();
}

static int unlock_slow(pthread_mutex_t *mu);

BB_EXPORT int pthread_mutex_unlock(pthread_mutex_t *mu)
{
	bb_mutex *m = (bb_mutex *)mu;
	if (__builtin_expect(bb_active, 1) && plain_mutex(m) &&
	    !atomic_load_explicit(&m->starving, memory_order_relaxed)) {
		clear_holder(m);
		if (free_word(m))
			unlock_wake(m);
		else if (bb_tls_m && preempt_asked(bb_getm()->curg))
			unlock_give_way();
		return 0;
	}
	return unlock_slow(mu);
}

/* pthread_mutex_unlock of a mutex with owner checks, a starving one, or
 * one glibc keeps */
static __attribute__((noinline)) int unlock_slow(pthread_mutex_t *mu)
{
	/* not only Gs: a thread bobbin did not make (or a signal handler on an
	 * idle M) may unlock a mutex Gs are parked on: the wake must be ours */
	if (!bb_active || kernel_mutex(mu))
		return REAL(pthread_mutex_unlock)(mu);
	bb_mutex *m = (bb_mutex *)mu;
	if (!bb_on_g()) {
		bb_mutex_release(m);
		return 0;
	}
	int kind = atomic_load_explicit(&m->kind, memory_order_relaxed) & ~BB_MUTEX_ELISION_FLAGS;
	if (kind < 0 || kind > 3)
		return EINVAL;
	if (kind == PTHREAD_MUTEX_RECURSIVE || kind == PTHREAD_MUTEX_ERRORCHECK) {
		if (atomic_load_explicit(&m->owner, memory_order_relaxed) != bb_self_tid() ||
		    atomic_load_explicit(&m->lock, memory_order_relaxed) == 0)
			return EPERM;
		if (kind == PTHREAD_MUTEX_RECURSIVE && --m->count != 0)
			return 0;
	}
	bb_mutex_release(m);
	return 0;
}

BB_EXPORT int pthread_mutex_init(pthread_mutex_t *mu, const pthread_mutexattr_t *attr)
{
	return REAL(pthread_mutex_init)(mu, attr); /* data only: glibc's layout is ours */
}

BB_EXPORT int pthread_mutex_destroy(pthread_mutex_t *mu)
{
	if (!bb_active || kernel_mutex(mu))
		return REAL(pthread_mutex_destroy)(mu);
	bb_mutex *m = (bb_mutex *)mu;
	if (m->nusers != 0)
		return EBUSY;
	atomic_store_explicit(&m->kind, -1, memory_order_relaxed);
	return 0;
}
