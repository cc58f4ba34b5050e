/*
 * pthread_key.c — thread-specific data. The values live where glibc keeps
 * them, in the TCB of the calling thread, which under bobbin is the G's own
 * (gtls.c): glibc's pthread_getspecific/setspecific already work per G and
 * are not interposed. What glibc cannot do for a G is run the destructors
 * when it ends (its start_thread never runs), so key creation is interposed
 * to learn each key's destructor, and bb_tsd_run_destructors calls them as
 * NPTL does: in key order, up to PTHREAD_DESTRUCTOR_ITERATIONS rounds while
 * destructors store new values.
 *
 * Keys made before bobbin started (another library's constructor) keep
 * their values per G, but bobbin does not know their destructors.
 */
#include "shim.h"

#include <limits.h>
#include <stdlib.h>

#define KEYS_MAX PTHREAD_KEYS_MAX /* 1024 */

/* destructor per key, NULL when none: written by key_create/key_delete */
static void (*_Atomic destructors[KEYS_MAX])(void *);
static _Atomic unsigned keys_hi; /* one past the highest key with a destructor */

BB_EXPORT int pthread_key_create(pthread_key_t *key, void (*destr)(void *))
{
	atomic_store(&bb_tsd_used, true);
	int err = REAL(pthread_key_create)(key, destr);
	if (err == 0 && *key < KEYS_MAX) {
		atomic_store_explicit(&destructors[*key], destr, memory_order_release);
		unsigned hi = atomic_load_explicit(&keys_hi, memory_order_relaxed);
		while (destr && *key + 1 > hi &&
		       !atomic_compare_exchange_weak_explicit(&keys_hi, &hi, *key + 1,
							      memory_order_release,
							      memory_order_relaxed))
			;
	}
	return err;
}

BB_EXPORT int pthread_key_delete(pthread_key_t key)
{
	int err = REAL(pthread_key_delete)(key);
	if (err == 0 && key < KEYS_MAX)
		atomic_store_explicit(&destructors[key], NULL, memory_order_release);
	return err;
}

/* At thread exit, on the G (its TCB is live, so glibc's getspecific reads
 * this G's values). */
void bb_tsd_run_destructors(bb_g *gp)
{
	unsigned hi = atomic_load_explicit(&keys_hi, memory_order_acquire);
	for (int round = 0; round < PTHREAD_DESTRUCTOR_ITERATIONS; round++) {
		bool again = false;
		for (unsigned k = 0; k < hi; k++) {
			void (*d)(void *) = atomic_load_explicit(&destructors[k], memory_order_acquire);
			if (d == NULL)
				continue;
			void *v = REAL(pthread_getspecific)(k);
			if (v == NULL)
				continue;
			REAL(pthread_setspecific)(k, NULL);
			d(v);
			again = true;
		}
		if (!again)
			break;
	}
}
