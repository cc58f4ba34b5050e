/*
 * pthread_once.c — one-time initialisation whose waiters park their G.
 *
 * The control word (glibc's int, PTHREAD_ONCE_INIT = 0): 0 not started,
 * 1 the init routine is running, 2 done (glibc's own "done" bit, so a word
 * finished by either implementation reads as done to the other). A thread
 * that runs no G here (an NPTL thread, code on a coroutine's or a language
 * runtime's own stack) takes part the same way and waits in the kernel on
 * the word, which every end of a run wakes too.
 */
#include "shim.h"

#include <limits.h>
#include <linux/futex.h>

enum { ONCE_NEW = 0, ONCE_RUNNING = 1, ONCE_DONE = 2 };

static bool still_running(void *addr, void *arg)
{
	return atomic_load_explicit((_Atomic int *)addr, memory_order_acquire) == ONCE_RUNNING;
}

/* the word changed: its parked Gs, and its waiters in the kernel */
static void wake_all(_Atomic int *w)
{
	bb_sema_wake(w, -1);
	bb_futex((_Atomic uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL);
}

/* init ended the thread (pthread_exit, a cancel) instead of returning: as
 * if pthread_once had never been called, as POSIX and NPTL have it; a
 * waiter (or a later caller) runs init again */
static void once_abandoned(void *arg)
{
	_Atomic int *w = arg;
	atomic_store_explicit(w, ONCE_NEW, memory_order_release);
	wake_all(w);
}

BB_EXPORT int pthread_once(pthread_once_t *oc, void (*init)(void))
{
	_Atomic int *w = (_Atomic int *)oc;
	/* acquire: pairs with the release below, so init's writes are seen */
	if (atomic_load_explicit(w, memory_order_acquire) & ONCE_DONE)
		return 0;
	if (!bb_active)
		return REAL(pthread_once)(oc, init);
	for (;;) {
		int v = ONCE_NEW;
		if (atomic_compare_exchange_strong_explicit(w, &v, ONCE_RUNNING, memory_order_acquire,
							    memory_order_acquire)) {
			pthread_cleanup_push(once_abandoned, (void *)w);
			if (bb_on_g())
				BB_PROGRAM_CODE(init());
			else
				init();
			pthread_cleanup_pop(0);
			atomic_store_explicit(w, ONCE_DONE, memory_order_release);
			wake_all(w);
			return 0;
		}
		if (v & ONCE_DONE)
			return 0;
		if (bb_on_g())
			bb_sema_park(w, still_running, NULL, waitReasonOnce, 0, NULL, NULL);
		else
			bb_futex((_Atomic uint32_t *)w, FUTEX_WAIT, ONCE_RUNNING, NULL);
	}
}
