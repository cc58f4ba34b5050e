/*
 * pthread_cond.c — condition variables whose waiters park their G,
 * overlaying glibc's pthread_cond_t (48 bytes; all-zero is a default one).
 *
 * A waiter queues itself on the condvar's address *before* the program's
 * mutex is released (the release runs on g0 after the park, sema.c's
 * `after` hook), so a signal sent by anyone who then takes the mutex always
 * finds it: no lost wake-ups. The word at offset 0 counts queued waiters so
 * a signal with none is one load. glibc's __wrefs word (offset 36) keeps the
 * clock (bit 1: CLOCK_MONOTONIC) and process-shared (bit 0) attributes set
 * by pthread_cond_init; process-shared condvars keep glibc's implementation.
 *
 * A thread that runs no G where it waits (an NPTL thread, code on a
 * coroutine's or a language runtime's own stack) waits on the same condvar
 * in the kernel: it counts itself in nwaiters and kwaiters and sleeps on the
 * futex word kseq, which every signal or broadcast that finds such waiters
 * and wakes too few Gs bumps before its futex wake (foreign_wait).
 */
#include "mutex.h"

#include <errno.h>
#include <linux/futex.h>

typedef struct bb_cond {
	_Atomic uint32_t nwaiters; /* waiting Gs: queued, or out of the queue
				      running a handler (wait_common) */
	_Atomic uint32_t wakes;    /* signals and broadcasts that found waiters */
	_Atomic uint32_t kseq;     /* futex word of the waiters that are not Gs */
	_Atomic uint32_t kwaiters; /* those waiters (counted in nwaiters too) */
	uint32_t unused0[5];
	uint32_t wrefs;            /* glibc's: bit 0 pshared, bit 1 monotonic */
	uint32_t unused1[2];
} bb_cond;
_Static_assert(sizeof(bb_cond) == sizeof(pthread_cond_t), "cond overlay");
_Static_assert(offsetof(bb_cond, wrefs) == 36, "glibc __wrefs");

static bool count_waiter(void *addr, void *arg)
{
	atomic_fetch_add_explicit(&((bb_cond *)addr)->nwaiters, 1, memory_order_relaxed);
	return true;
}

/* the re-park of a waiter a handler took out of the queue: only if no
 * signal or broadcast came since the wait began (it may have been meant for
 * this waiter, which was not in the queue to get it); still counted */
struct quiet {
	bb_cond *c;
	uint32_t seen;
};
static bool still_quiet(void *addr, void *arg)
{
	struct quiet *q = arg;
	return atomic_load_explicit(&q->c->wakes, memory_order_relaxed) == q->seen;
}

static bool pshared(pthread_cond_t *c)
{
	return ((bb_cond *)c)->wrefs & 1;
}

/* The rest of a wait after its first park returned r. A cancel or a
 * pthread_kill took the waiter out of the queue (-3): the handler runs now,
 * before the mutex is taken again, and the wait goes on as natively (a
 * handler never ends it, nor makes it fail with EINTR), unless a cancel is
 * due or a signal or broadcast came meanwhile (then it ends as a spurious
 * wake-up: that one may have been ours). Returns the last park's result. */
static int wait_rest(bb_cond *c, struct quiet *q, int r, int64_t deadline)
{
	while (r == -3) {
		bb_take_eintr();
		if (bb_cancel_due(bb_getg()))
			break;
		r = bb_sema_park(c, still_quiet, q, waitReasonCond, deadline, NULL, NULL);
	}
	bb_getg()->wakeon = 0;
	if (r != 1) /* not taken out by a wake-up, which uncounted us */
		atomic_fetch_sub_explicit(&c->nwaiters, 1, memory_order_relaxed);
	bb_take_eintr(); /* a handler that came with the wake-up */
	return r;
}

/* with one of bobbin's mutexes, released on g0 once the G is queued */
static int wait_bb_mutex(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline)
{
	bb_cond *c = (bb_cond *)cv;
	bb_mutex *m = (bb_mutex *)mu;
	int kind = atomic_load_explicit(&m->kind, memory_order_relaxed);
	if (kind < 0)
		return EINVAL;
	if ((kind & BB_MUTEX_KIND_MASK) == PTHREAD_MUTEX_RECURSIVE ||
	    (kind & BB_MUTEX_KIND_MASK) == PTHREAD_MUTEX_ERRORCHECK) {
		if (atomic_load_explicit(&m->owner, memory_order_relaxed) != bb_self_tid())
			return EPERM;
	}
	unsigned depth = m->count; /* a recursive mutex comes back as deep as it was */
	bb_testcancel();
	bb_g *gp = bb_getg();
	struct quiet q = {c, atomic_load_explicit(&c->wakes, memory_order_relaxed)};
	gp->wakeon = BB_WAKE_CANCEL | BB_WAKE_SIGNAL; /* a cancellation point */
	int r = bb_sema_park(c, count_waiter, NULL, waitReasonCond, deadline, bb_mutex_release, m);
	if (r == -2) {
		gp->wakeon = 0;
		return ETIMEDOUT; /* deadline already passed: the mutex was never released */
	}
	r = wait_rest(c, &q, r, deadline);
	bb_mutex_lock_until(m, 0);
	atomic_store_explicit(&m->owner, bb_self_tid(), memory_order_relaxed);
	m->count = depth;
	m->nusers++;
	bb_testcancel(); /* cancelled while waiting: unwind with the mutex held, as POSIX says */
	return r == -1 || r == -2 ? ETIMEDOUT : 0;
}

static bool kernel_mutex(pthread_mutex_t *mu)
{
	int kind = atomic_load_explicit(&((bb_mutex *)mu)->kind, memory_order_relaxed);
	return kind > 0 && (kind & BB_MUTEX_KERNEL_FLAGS) != 0;
}

/* A condvar of this process waited on with a mutex that keeps its kernel
 * semantics (process-shared, robust, priority-inheritance: kernel_mutex).
 * The condvar is still bobbin's, since its signals are (pthread_cond_signal
 * cannot tell which mutex its waiters hold): glibc's own wait on it, which
 * this once was, read and wrote bobbin's words as its own and was never
 * woken (fio, whose mutexes are process-shared and its condvars not, hung).
 * The waiter counts itself and notes the wake-ups so far, releases the
 * mutex through glibc on the G (the owner is the G's thread id), and parks
 * unless a signal came meanwhile; then takes the mutex back as glibc's. */
static int wait_kernel_mutex(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline)
{
	bb_cond *c = (bb_cond *)cv;
	bb_testcancel();
	atomic_fetch_add_explicit(&c->nwaiters, 1, memory_order_relaxed);
	struct quiet q = {c, atomic_load_explicit(&c->wakes, memory_order_relaxed)};
	int e = REAL(pthread_mutex_unlock)(mu);
	if (e != 0) { /* not the owner (EPERM): nothing was released */
		atomic_fetch_sub_explicit(&c->nwaiters, 1, memory_order_relaxed);
		return e;
	}
	bb_getg()->wakeon = BB_WAKE_CANCEL | BB_WAKE_SIGNAL; /* a cancellation point */
	int r = bb_sema_park(c, still_quiet, &q, waitReasonCond, deadline, NULL, NULL);
	r = wait_rest(c, &q, r, deadline);
	e = BB_KERNEL_WAIT(REAL(pthread_mutex_lock)(mu));
	bb_testcancel(); /* cancelled while waiting: unwind with the mutex held */
	if (e != 0) /* EOWNERDEAD, ENOTRECOVERABLE: the program's to see */
		return e;
	return r == -1 || r == -2 ? ETIMEDOUT : 0;
}

static int wait_common(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline)
{
	return kernel_mutex(mu) ? wait_kernel_mutex(cv, mu, deadline) : wait_bb_mutex(cv, mu, deadline);
}

struct kwait {
	bb_cond *c;
	pthread_mutex_t *mu;
};

static void kwait_leave(bb_cond *c)
{
	atomic_fetch_sub(&c->kwaiters, 1);
	atomic_fetch_sub(&c->nwaiters, 1);
}

/* cancelled in its sleep: the mutex is taken again before the cleanup
 * handlers run, as POSIX says */
static void kwait_cancelled(void *arg)
{
	struct kwait *k = arg;
	kwait_leave(k->c);
	pthread_mutex_lock(k->mu);
}

/* A wait by a thread that runs no G here. It is a waiter, and has read
 * kseq, before the mutex goes: a signal from anyone who takes the mutex
 * after that either wakes its futex wait or changes kseq before it begins.
 * A cancellation point as NPTL's: the asynchronous type for the sleep only.
 * abstime: on `clock`, NULL for none. A wake-up by a signal handler is a
 * spurious one (0), as NPTL's. */
static int foreign_wait(pthread_cond_t *cv, pthread_mutex_t *mu, clockid_t clock,
			const struct timespec *abstime)
{
	bb_cond *c = (bb_cond *)cv;
	if (abstime && (abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000))
		return EINVAL;
	atomic_fetch_add(&c->kwaiters, 1);
	atomic_fetch_add(&c->nwaiters, 1);
	uint32_t seq = atomic_load(&c->kseq);
	int e = pthread_mutex_unlock(mu); /* errorcheck's EPERM, as NPTL's */
	if (e != 0) {
		kwait_leave(c);
		return e;
	}
	struct kwait k = {c, mu};
	long r;
	int type;
	pthread_cleanup_push(kwait_cancelled, &k);
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &type);
	r = bb_futex_wait_abs(&c->kseq, seq, clock, abstime);
	pthread_setcanceltype(type, NULL);
	pthread_cleanup_pop(0);
	kwait_leave(c);
	e = pthread_mutex_lock(mu); /* a robust mutex's EOWNERDEAD */
	return e != 0 ? e : r == -ETIMEDOUT ? ETIMEDOUT : 0;
}

/* the waits that are not bobbin's: glibc's own (bobbin inactive, a
 * process-shared condvar), or a thread's that runs no G here */
#define NOT_ON_G(cv, foreign, real)                                \
	do {                                                       \
		if (!bb_active || pshared(cv))                     \
			return BB_KERNEL_WAIT(real);               \
		if (!bb_on_g())                                    \
			return foreign;                            \
	} while (0)

BB_EXPORT int pthread_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mu)
{
	NOT_ON_G(cv, foreign_wait(cv, mu, CLOCK_REALTIME, NULL), REAL(pthread_cond_wait)(cv, mu));
	return wait_common(cv, mu, 0);
}

BB_EXPORT int pthread_cond_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu,
				     const struct timespec *abstime)
{
	clockid_t clock = (((bb_cond *)cv)->wrefs & 2) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
	NOT_ON_G(cv, foreign_wait(cv, mu, clock, abstime),
		 REAL(pthread_cond_timedwait)(cv, mu, abstime));
	int64_t deadline = bb_abs_deadline(clock, abstime);
	if (deadline < 0)
		return EINVAL;
	return wait_common(cv, mu, deadline);
}

BB_EXPORT int pthread_cond_clockwait(pthread_cond_t *cv, pthread_mutex_t *mu, clockid_t clock,
				     const struct timespec *abstime)
{
	if (bb_active && !pshared(cv) && clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC)
		return EINVAL;
	NOT_ON_G(cv, foreign_wait(cv, mu, clock, abstime),
		 REAL(pthread_cond_clockwait)(cv, mu, clock, abstime));
	int64_t deadline = bb_abs_deadline(clock, abstime);
	if (deadline < 0)
		return EINVAL;
	return wait_common(cv, mu, deadline);
}

static int wake(pthread_cond_t *cv, int n)
{
	bb_cond *c = (bb_cond *)cv;
	if (atomic_load_explicit(&c->nwaiters, memory_order_relaxed) == 0)
		return 0;
	/* before the queue is looked at: a waiter out of it (running a
	 * handler) sees this when it parks again, under the queue's lock */
	atomic_fetch_add_explicit(&c->wakes, 1, memory_order_relaxed);
	int woken = bb_sema_wake(c, n);
	if (woken)
		atomic_fetch_sub_explicit(&c->nwaiters, (uint32_t)woken, memory_order_relaxed);
	if ((n < 0 || woken < n) && atomic_load(&c->kwaiters) != 0) {
		atomic_fetch_add(&c->kseq, 1);
		bb_futex(&c->kseq, FUTEX_WAKE, n < 0 ? INT32_MAX : (uint32_t)(n - woken), NULL);
	}
	return 0;
}

BB_EXPORT int pthread_cond_signal(pthread_cond_t *cv)
{
	if (!bb_active || pshared(cv))
		return REAL(pthread_cond_signal)(cv);
	return wake(cv, 1);
}

BB_EXPORT int pthread_cond_broadcast(pthread_cond_t *cv)
{
	if (!bb_active || pshared(cv))
		return REAL(pthread_cond_broadcast)(cv);
	return wake(cv, -1);
}

BB_EXPORT int pthread_cond_init(pthread_cond_t *cv, const pthread_condattr_t *attr)
{
	return REAL(pthread_cond_init)(cv, attr); /* data only: sets the clock bits */
}

BB_EXPORT int pthread_cond_destroy(pthread_cond_t *cv)
{
	if (!bb_active || pshared(cv))
		return REAL(pthread_cond_destroy)(cv);
	return 0;
}
