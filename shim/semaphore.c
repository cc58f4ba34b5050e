/*
 * semaphore.c — unnamed POSIX semaphores whose waiters park their G,
 * overlaying glibc 2.36's x86_64 sem_t (32 bytes, of which struct new_sem
 * uses 16).
 *
 * The word is glibc's own: the low 32 bits of `data` are the value (the
 * tokens), the high 32 bits count the waiters that may be parked. sem_post
 * adds a token and learns whether anyone waits in one CAS; a waiter
 * registers in the high half before it looks for a token, so either the
 * poster sees it or it sees the token: no lost wake-up. A waiter parks on the
 * word's address (sema.c), only while the value is 0. After its CAS a poster
 * touches nothing but that address, so a semaphore may be destroyed as soon
 * as the last waiter has returned (POSIX's rule).
 *
 * sem_init stays glibc's (data only): it sets `private` to 0 for a
 * process-private semaphore and to FUTEX_SHARED (128) for pshared = 1;
 * sem_open's named semaphores are shared as well. Those keep glibc's
 * implementation (kernel futexes another process can wake; waits inside
 * entersyscall, so the P moves on), as does a
 * waiter that is not a G; a post from any thread uses ours, and falls back to
 * glibc's futex wake when it finds a waiter it could not unpark.
 *
 * Errors through errno, as NPTL: EINVAL (sem_init value > SEM_VALUE_MAX;
 * a bad tv_nsec, or clock for sem_clockwait, checked before the value is),
 * EAGAIN (sem_trywait at 0), ETIMEDOUT, EOVERFLOW (sem_post at SEM_VALUE_MAX).
 *
 * sem_post is async-signal-safe: from a handler that the kernel ran over
 * bobbin's code (which may hold the queue's bucket lock on this very
 * thread) the wake-up goes through sysmon, in a ring of 1,024; with that
 * ring full (sysmon kept off the CPU for as many posts) sysmon wakes every
 * semaphore waiter whose word is not 0 instead (runtime/sysmon.c).
 */
#include "mutex.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <semaphore.h>

typedef struct bb_sem {
	_Atomic uint64_t data; /* value | nwaiters << 32: CAS, fetch_add */
	int private;           /* 0: process-private (ours); else glibc's */
	int pad;
	uint64_t unused[2];
} bb_sem;
_Static_assert(sizeof(bb_sem) == sizeof(sem_t), "sem overlay");
_Static_assert(offsetof(bb_sem, private) == 8, "glibc new_sem.private");

#define VALUE_MASK 0xffffffffu
#define WAITER ((uint64_t)1 << 32)

static bool ours(sem_t *sem)
{
	return bb_on_g() && ((bb_sem *)sem)->private == 0;
}

/* glibc's wait for a semaphore that is not ours: inside entersyscall on a
 * G (a shared semaphore's poster may be another process), errno kept */
#define KERNEL_SEM_WAIT(expr)                 \
	({                                    \
		int r_, e_;                   \
		if (bb_on_g()) {              \
			bb_entersyscall();    \
			r_ = (expr);          \
			e_ = errno;           \
			bb_exitsyscall();     \
			errno = e_;           \
		} else {                      \
			r_ = (expr);          \
		}                             \
		r_;                           \
	})

/* take a token if there is one */
static bool try_take(bb_sem *s)
{
	uint64_t d = atomic_load_explicit(&s->data, memory_order_relaxed);
	while ((d & VALUE_MASK) != 0) {
		/* acquire: pairs with the release CAS of the post that made the
		 * token (and, through the release sequence, earlier ones) */
		if (atomic_compare_exchange_weak_explicit(&s->data, &d, d - 1, memory_order_acquire,
							  memory_order_relaxed))
			return true;
	}
	return false;
}

static bool empty(void *addr, void *arg)
{
	/* relaxed: a poster's CAS happens before it takes this bucket lock */
	return (atomic_load_explicit((_Atomic uint64_t *)addr, memory_order_relaxed) &
		VALUE_MASK) == 0;
}

static int wait_registered(bb_sem *s, int64_t deadline, bool timed);

/* 0, or -1 with errno ETIMEDOUT or EINTR */
static int wait_slow(bb_sem *s, clockid_t clock, const struct timespec *abstime)
{
	int64_t deadline = abstime ? bb_abs_deadline(clock, abstime) : 0;
	/* a cancellation point, cut short by a signal: from before it shows
	 * as a waiter (a process signal that lands on bobbin's code from then
	 * on is handed to a thread that takes it, shim/signal.c) */
	bb_g *gp = bb_getg();
	gp->wakeon = BB_WAKE_CANCEL | BB_WAKE_SIGNAL;
	int ret = wait_registered(s, deadline, abstime != NULL);
	bb_getg()->wakeon = 0;
	if (ret == 0)
		bb_signals_after_wake();
	return ret;
}

static int wait_registered(bb_sem *s, int64_t deadline, bool timed)
{
	/* register; relaxed: both this and the posters' CAS are RMWs of one
	 * word, so one of them sees the other */
	uint64_t d = atomic_fetch_add_explicit(&s->data, WAITER, memory_order_relaxed) + WAITER;
	for (;;) {
		if ((d & VALUE_MASK) != 0) {
			/* take a token and unregister at once; acquire as in try_take */
			if (atomic_compare_exchange_weak_explicit(&s->data, &d, d - 1 - WAITER,
								  memory_order_acquire,
								  memory_order_relaxed))
				return 0;
			continue;
		}
		/* wake-ups carry no token, so a timed-out waiter loses nothing
		 * that another waiter needed */
		bb_g *gp = bb_getg();
		gp->wakeon = BB_WAKE_CANCEL | BB_WAKE_SIGNAL;
		int r = bb_sema_park(&s->data, empty, NULL, waitReasonSema, deadline, NULL, NULL);
		if (r == -3) { /* pthread_cancel or pthread_kill: unregister, act */
			atomic_fetch_sub_explicit(&s->data, WAITER, memory_order_relaxed);
			bb_testcancel();
			/* a handler ran: a timed wait fails with EINTR (the kernel
			 * never restarts it), an untimed one unless SA_RESTART */
			gp->sig_ran = false;
			bool eintr = bb_take_eintr();
			if (eintr || (timed && bb_getg()->sig_ran)) {
				bb_getg()->sig_ran = false;
				errno = EINTR;
				return -1;
			}
			d = atomic_fetch_add_explicit(&s->data, WAITER, memory_order_relaxed) + WAITER;
			continue;
		}
		if (r < 0) {
			atomic_fetch_sub_explicit(&s->data, WAITER, memory_order_relaxed);
			errno = ETIMEDOUT;
			return -1;
		}
		d = atomic_load_explicit(&s->data, memory_order_relaxed);
	}
}

static bool valid_nsec(const struct timespec *abstime)
{
	return abstime->tv_nsec >= 0 && abstime->tv_nsec < 1000000000;
}

/* A token taken on the spot is taken as glibc's own fast path takes it
 * (the same word, the same CAS), whoever the caller and whatever the
 * semaphore: only a wait needs to know whose it is. */
BB_EXPORT int sem_wait(sem_t *sem)
{
	/* a cancellation point even when a token is there, as NPTL's */
	bb_testcancel();
	if (__builtin_expect(bb_active, 1) && try_take((bb_sem *)sem))
		return 0;
	if (!ours(sem))
		return KERNEL_SEM_WAIT(REAL(sem_wait)(sem));
	return wait_slow((bb_sem *)sem, CLOCK_REALTIME, NULL); /* looks at the value first */
}

BB_EXPORT int sem_trywait(sem_t *sem)
{
	if (__builtin_expect(bb_active, 1) && try_take((bb_sem *)sem))
		return 0;
	if (!ours(sem))
		return REAL(sem_trywait)(sem);
	errno = EAGAIN;
	return -1;
}

BB_EXPORT int sem_timedwait(sem_t *sem, const struct timespec *abstime)
{
	if (!ours(sem))
		return KERNEL_SEM_WAIT(REAL(sem_timedwait)(sem, abstime));
	if (!valid_nsec(abstime)) {
		errno = EINVAL;
		return -1;
	}
	bb_testcancel(); /* after the EINVAL test, before the token: NPTL's order */
	bb_sem *s = (bb_sem *)sem;
	if (try_take(s))
		return 0;
	return wait_slow(s, CLOCK_REALTIME, abstime);
}

BB_EXPORT int sem_clockwait(sem_t *sem, clockid_t clock, const struct timespec *abstime)
{
	if (!ours(sem))
		return KERNEL_SEM_WAIT(REAL(sem_clockwait)(sem, clock, abstime));
	if ((clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) || !valid_nsec(abstime)) {
		errno = EINVAL;
		return -1;
	}
	bb_testcancel(); /* after the EINVAL test, before the token: NPTL's order */
	bb_sem *s = (bb_sem *)sem;
	if (try_take(s))
		return 0;
	return wait_slow(s, clock, abstime);
}

BB_EXPORT int sem_post(sem_t *sem)
{
	/* not only Gs: any thread may post to a semaphore Gs wait on */
	if (!bb_active || ((bb_sem *)sem)->private != 0)
		return REAL(sem_post)(sem);
	bb_sem *s = (bb_sem *)sem;
	uint64_t d = atomic_load_explicit(&s->data, memory_order_relaxed);
	do {
		if ((d & VALUE_MASK) == SEM_VALUE_MAX) {
			errno = EOVERFLOW;
			return -1;
		}
		/* release: what led to the post happens before the wait that
		 * takes the token */
	} while (!atomic_compare_exchange_weak_explicit(&s->data, &d, d + 1, memory_order_release,
							memory_order_relaxed));
	/* from here on only the address is used: s may be gone */
	if ((d >> 32) == 0)
		return 0;
	/* from a signal handler outside any G (shim/signal.c): the code it
	 * interrupted may hold the wait queue's lock on this very thread */
	if (bb_tls_m && bb_m_in_handler(bb_getm()) && bb_defer_sema_wake(&s->data))
		return 0;
	if (bb_sema_wake(&s->data, 1) == 0) {
		/* the waiter is not parked: a G about to look at the value (it
		 * will see the token), or a thread that is not a G, asleep in
		 * glibc's futex on the same word: wake that one as glibc would */
		bb_futex((_Atomic uint32_t *)&s->data, FUTEX_WAKE, 1, NULL);
	}
	return 0;
}

BB_EXPORT int sem_getvalue(sem_t *sem, int *sval)
{
	/* glibc reports the value alone, never a negative waiter count */
	*sval = (int)(atomic_load_explicit(&((bb_sem *)sem)->data, memory_order_relaxed) &
		      VALUE_MASK);
	return 0;
}

BB_EXPORT int sem_init(sem_t *sem, int pshared, unsigned value)
{
	return REAL(sem_init)(sem, pshared, value); /* data only: glibc's layout is ours */
}

BB_EXPORT int sem_destroy(sem_t *sem)
{
	return REAL(sem_destroy)(sem); /* NPTL checks nothing: neither do we */
}
