/*
 * pthread_spin.c — spin locks that let a descheduled holder run.
 *
 * The lock word is glibc's x86_64 one (sysdeps/x86_64/nptl): 1 is unlocked,
 * 0 or less is locked. pthread_spin_init and pthread_spin_unlock store 1, a
 * locker takes the lock by decrementing it from 1 to 0 (a losing decrement
 * leaves it negative until the unlock), trylock CASes 1 to 0. Note that an
 * all-zero pthread_spinlock_t is therefore *locked*, with NPTL as here.
 * Keeping the protocol bit for bit lets a thread that is not a G (which gets
 * glibc's real functions) share a lock with Gs.
 *
 * What differs from NPTL: with fewer OS threads than Gs, the holder may be
 * a runnable G waiting for the very P its spinner occupies, and a spinner
 * that never yields would then spin forever. So a spinner that has not got
 * the lock after SPIN_LIMIT pauses yields its P (bb_gosched) and tries again
 * when it is next scheduled. With one P there is nobody to wait for: it
 * yields at once.
 */
#include "shim.h"

#include <errno.h>

#define SPIN_LIMIT 100

static bool take(_Atomic int *l)
{
	/* acquire: pairs with the release store of the unlock */
	return atomic_fetch_sub_explicit(l, 1, memory_order_acquire) == 1;
}

BB_EXPORT int pthread_spin_lock(pthread_spinlock_t *lock)
{
	/* a free lock is taken as glibc takes it, whoever the caller (a
	 * failed try leaves the word as glibc's own failed try would) */
	if (take((_Atomic int *)lock))
		return 0;
	if (!bb_on_g())
		return REAL(pthread_spin_lock)(lock);
	_Atomic int *l = (_Atomic int *)lock;
	int limit = bb_gomaxprocs > 1 ? SPIN_LIMIT : 0;
	while (!take(l)) {
		/* wait for the unlock with plain loads, as NPTL, so the line
		 * stays shared while the holder runs */
		for (int spins = 0; atomic_load_explicit(l, memory_order_relaxed) <= 0;) {
			if (++spins > limit) {
				bb_gosched();
				spins = 0;
			} else {
				__builtin_ia32_pause();
			}
		}
	}
	return 0;
}

BB_EXPORT int pthread_spin_trylock(pthread_spinlock_t *lock)
{
	if (!bb_on_g())
		return REAL(pthread_spin_trylock)(lock);
	int one = 1;
	/* acquire on success: pairs with the release store of the unlock */
	return atomic_compare_exchange_strong_explicit((_Atomic int *)lock, &one, 0,
						       memory_order_acquire, memory_order_relaxed)
		       ? 0
		       : EBUSY;
}

BB_EXPORT int pthread_spin_unlock(pthread_spinlock_t *lock)
{
	/* release: the critical section happens before the next holder. The
	 * same store as glibc's, whoever calls */
	atomic_store_explicit((_Atomic int *)lock, 1, memory_order_release);
	return 0;
}

BB_EXPORT int pthread_spin_init(pthread_spinlock_t *lock, int pshared)
{
	return REAL(pthread_spin_init)(lock, pshared); /* stores 1; pshared needs nothing */
}

BB_EXPORT int pthread_spin_destroy(pthread_spinlock_t *lock)
{
	return REAL(pthread_spin_destroy)(lock);
}
