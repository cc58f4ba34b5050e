/*
 * pthread_barrier.c — barriers whose waiters park their G, overlaying
 * glibc's pthread_barrier_t (32 bytes). pthread_barrier_init stays glibc's
 * (data only): it checks the count (0 or >= UINT_MAX/2: EINVAL) and leaves
 * zeroed counters, which are also bobbin's initial state. Process-shared
 * barriers (glibc's `shared` word nonzero) keep glibc's implementation, its
 * waits inside entersyscall.
 *
 * A round is one CAS on a 64-bit word over glibc's `in` and
 * `current_round`: the low half counts the threads that have arrived in
 * this round, the high half numbers the round. The thread that completes the
 * round moves the word to (round + 1, 0 arrived) in the same CAS, so arrivals
 * can never be counted in a round that is already over: a fast thread that
 * comes back for the next round while others still sleep counts towards the
 * next round and parks on the same queue, and a wake-up it receives from
 * the previous round only makes it look again. It returns
 * PTHREAD_BARRIER_SERIAL_THREAD, as NPTL's last arrival does.
 *
 * Destruction: POSIX allows pthread_barrier_destroy as soon as one waiter of
 * the last round has returned, while the others may still be on their way
 * out. Each waiter therefore counts itself in `inside` (glibc's `out`) from
 * entry to its last access to the barrier, and destroy waits for that count
 * to drain, as NPTL's destroy waits for its leavers. NPTL never returns EBUSY:
 * a destroy while a round is unfinished waits for the round to complete, and
 * so does this one.
 *
 * A thread that runs no G here (an NPTL thread, code on a coroutine's or a
 * language runtime's own stack) waits in the kernel on the word's high half
 * (the round); it counts itself in `kwaiters` before it arrives, so the
 * round's last arrival, whose CAS sees that arrival, knows to wake the
 * futex too.
 */
#include "mutex.h" /* BB_KERNEL_WAIT */

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>

typedef struct bb_barrier {
	_Atomic uint64_t word;  /* 0: arrived this round | round << 32 (glibc's
				   in, current_round): CAS only */
	unsigned count;         /* 8: threads per round, set by init */
	int shared;             /* 12: 0 private; glibc's FUTEX_SHARED if pshared */
	_Atomic uint32_t inside;/* 16: glibc's out: waiters between their entry and
				   their last access, | DESTROYING */
	_Atomic uint32_t kwaiters; /* 20: waiters in the kernel, this round or the next */
	uint32_t unused[2];
} bb_barrier;
_Static_assert(sizeof(bb_barrier) == sizeof(pthread_barrier_t), "barrier overlay");
_Static_assert(offsetof(bb_barrier, count) == 8, "glibc count");
_Static_assert(offsetof(bb_barrier, shared) == 12, "glibc shared");
_Static_assert(offsetof(bb_barrier, inside) == 16, "glibc out");

#define DESTROYING 0x80000000u /* a destroyer is waiting for `inside` to drain */

static bool same_round(void *addr, void *arg)
{
	/* relaxed: the round-ending CAS happens before the waker takes the
	 * bucket lock this runs under */
	return (atomic_load_explicit((_Atomic uint64_t *)addr, memory_order_relaxed) >> 32) ==
	       (uint32_t)(uintptr_t)arg;
}

static bool still_inside(void *addr, void *arg)
{
	return (atomic_load_explicit((_Atomic uint32_t *)addr, memory_order_relaxed) &
		~DESTROYING) != 0;
}

/* the round's half of the word */
static _Atomic uint32_t *round_word(bb_barrier *b)
{
	return (_Atomic uint32_t *)(void *)((char *)&b->word + 4);
}

static int wait_round(bb_barrier *b)
{
	bool on_g = bb_on_g();
	/* relaxed: destroy learns of this entry through the round's CASes
	 * (acq_rel) that order it before any waiter can return */
	atomic_fetch_add_explicit(&b->inside, 1, memory_order_relaxed);
	if (!on_g)
		atomic_fetch_add(&b->kwaiters, 1); /* before the arrival's CAS */
	unsigned count = b->count;
	uint64_t w = atomic_load_explicit(&b->word, memory_order_relaxed), n;
	bool last;
	do {
		last = (uint32_t)w + 1 >= count;
		n = last ? ((w >> 32) + 1) << 32 : w + 1;
		/* release: this thread's work before the barrier is seen by every
		 * thread leaving the round; acquire (for the last): it sees all of it */
	} while (!atomic_compare_exchange_weak_explicit(&b->word, &w, n, memory_order_acq_rel,
							memory_order_relaxed));
	uint32_t round = (uint32_t)(w >> 32);
	if (last) {
		bb_sema_wake(&b->word, -1);
		if (atomic_load(&b->kwaiters) != 0)
			bb_futex(round_word(b), FUTEX_WAKE, INT_MAX, NULL);
	} else if (!on_g) {
		while (atomic_load(round_word(b)) == round)
			bb_futex(round_word(b), FUTEX_WAIT, round, NULL); /* EINTR: look again */
		atomic_thread_fence(memory_order_acquire);
	} else {
		/* 0: validate saw the round over; 1: woken (maybe by an earlier
		 * round's late wake-up: look again) */
		for (;;) {
			bb_g *gp = bb_getg();
			gp->wakeon = BB_WAKE_SIGNAL; /* a pthread_kill's handler runs meanwhile */
			int r = bb_sema_park(&b->word, same_round, (void *)(uintptr_t)round,
					     waitReasonSema, 0, NULL, NULL);
			bb_getg()->wakeon = 0;
			if (r == -3)
				bb_take_eintr(); /* then wait on: never EINTR */
			if (r == 0 || !same_round(&b->word, (void *)(uintptr_t)round))
				break;
		}
		/* acquire: synchronises with the round-ending CAS (the release
		 * sequence of later arrivals' CASes carries it) */
		atomic_thread_fence(memory_order_acquire);
	}
	if (!on_g)
		atomic_fetch_sub(&b->kwaiters, 1);
	/* the last access: release orders everything above before destroy */
	if (atomic_fetch_sub_explicit(&b->inside, 1, memory_order_release) == (DESTROYING | 1))
		bb_sema_wake(&b->inside, -1); /* only the address: b may be gone */
	return last ? PTHREAD_BARRIER_SERIAL_THREAD : 0;
}

BB_EXPORT int pthread_barrier_wait(pthread_barrier_t *bar)
{
	bb_barrier *b = (bb_barrier *)bar;
	if (!bb_active || b->shared != 0)
		return BB_KERNEL_WAIT(REAL(pthread_barrier_wait)(bar));
	return wait_round(b);
}

BB_EXPORT int pthread_barrier_init(pthread_barrier_t *bar, const pthread_barrierattr_t *attr,
				   unsigned count)
{
	return REAL(pthread_barrier_init)(bar, attr, count); /* data only: our zero state */
}

BB_EXPORT int pthread_barrier_destroy(pthread_barrier_t *bar)
{
	bb_barrier *b = (bb_barrier *)bar;
	if (!bb_active || b->shared != 0)
		return REAL(pthread_barrier_destroy)(bar);
	/* acquire: pairs with the leavers' release decrements */
	uint32_t v = atomic_fetch_or_explicit(&b->inside, DESTROYING, memory_order_acquire);
	while ((v & ~DESTROYING) != 0) {
		if (bb_on_g())
			bb_sema_park(&b->inside, still_inside, NULL, waitReasonSema, 0, NULL, NULL);
		else
			REAL(sched_yield)();
		v = atomic_load_explicit(&b->inside, memory_order_acquire);
	}
	atomic_store_explicit(&b->inside, 0, memory_order_relaxed);
	return 0;
}
