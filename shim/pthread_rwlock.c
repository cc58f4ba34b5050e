/*
 * pthread_rwlock.c — reader-writer locks whose waiters park their G,
 * overlaying glibc's pthread_rwlock_t (56 bytes). All-zero and
 * PTHREAD_RWLOCK_INITIALIZER are a default lock; the _NP initialisers and
 * pthread_rwlock_init (glibc's, data only) set __flags and __shared.
 *
 * The lock is one 64-bit word over glibc's __readers (low half) and
 * __writers (high half), so every decision is a single CAS:
 *
 *   bit 0       glibc's WRPHASE. bobbin never sets it; an acquisition clears
 *               it, so a lock that glibc left idle in a write phase (used
 *               before bobbin started) reads as free.
 *   bit 1   W   a writer holds the lock (glibc's WRLOCKED)
 *   bit 2   RW  readers are parked on `rqueue`, or about to park (glibc's
 *               RWAITING); cleared by whoever wakes them all
 *   bits 3-30 R readers holding the lock: glibc's count at glibc's shift, so
 *               the 2^28th reader gets EAGAIN as with NPTL
 *   bit 31  K   threads that run no G here (NPTL threads, code on a
 *               coroutine's or a language runtime's own stack) sleep in the
 *               kernel on this word's low half; cleared, and all of them
 *               woken to try again, by the unlock that may let them in
 *   bits 32-63 WW writers that found the lock busy and will park on
 *               `wqueue`; they leave the count when they get the lock or
 *               give up
 *
 * Kinds: PTHREAD_RWLOCK_PREFER_READER_NP (0, default) and
 * PTHREAD_RWLOCK_PREFER_WRITER_NP (1), which NPTL also lets readers
 * overtake waiting writers with, admit a reader whenever no writer holds the
 * lock (recursive read locks never deadlock). With
 * PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP (2) a reader also waits while
 * WW > 0, so a stream of readers cannot starve a writer.
 *
 * Wake-ups: a write unlock wakes every parked reader when they may enter,
 * else one writer; the last reader out wakes one writer. A woken writer that
 * leaves without the lock (timeout) passes the wake-up on. A waker touches
 * nothing of the lock after its releasing CAS but the queue addresses, so a
 * lock may be destroyed as soon as the last holder has unlocked.
 *
 * Error codes are NPTL's: EINVAL for a timed call's bad clock or tv_nsec
 * (checked first, even if the lock is free, as NPTL does), EDEADLK when the
 * writer that holds the lock asks for it again (glibc's __cur_writer test),
 * EBUSY from the try variants, EAGAIN on reader overflow, ETIMEDOUT; unlock
 * checks nothing and returns 0. Process-shared locks keep glibc's
 * implementation (the real functions; their waits inside entersyscall, so
 * the P moves on).
 */
#include "mutex.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>

typedef struct bb_rwlock {
	_Atomic uint64_t state;  /* 0: __readers | __writers << 32, above */
	uint32_t rqueue;         /* 8: __wrphase_futex: only its address is used,
				    as the queue readers park on */
	uint32_t wqueue;         /* 12: __writers_futex: the writers' queue address */
	uint32_t pad3, pad4;     /* 16 */
	_Atomic int cur_writer;  /* 24: tid of the writer holding the lock, else 0:
				    written by that writer (glibc's meaning) */
	int shared;              /* 28: nonzero = process-shared (glibc's) */
	signed char rwelision;   /* 32 */
	unsigned char pad1[7];
	unsigned long pad2;      /* 40 */
	unsigned flags;          /* 48: the PTHREAD_RWLOCK_PREFER_* kind */
} bb_rwlock;
_Static_assert(sizeof(bb_rwlock) == sizeof(pthread_rwlock_t), "rwlock overlay");
_Static_assert(offsetof(bb_rwlock, cur_writer) == 24, "glibc __cur_writer");
_Static_assert(offsetof(bb_rwlock, shared) == 28, "glibc __shared");
_Static_assert(offsetof(bb_rwlock, flags) == 48, "glibc __flags");

#define RW_WRPHASE 1u
#define RW_W 2u
#define RW_RWAIT 4u
#define RW_READER 8u                  /* one reader in R */
#define RW_K 0x80000000u
#define RW_MAX_READERS ((1u << 28) - 1) /* NPTL: R reaching bit 31 is EAGAIN */
#define RW_WRITER ((uint64_t)1 << 32) /* one writer in WW */

static inline uint32_t nreaders(uint64_t s) { return ((uint32_t)s & ~RW_K) >> 3; }
static inline uint32_t nwriters(uint64_t s) { return (uint32_t)(s >> 32); }

static bool prefer_writer(bb_rwlock *l)
{
	return l->flags == PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP;
}

/* may a new reader enter in state s? */
static bool readable(bb_rwlock *l, uint64_t s)
{
	if (s & RW_W)
		return false;
	return !(prefer_writer(l) && nwriters(s) > 0);
}

static bool writable(uint64_t s)
{
	return !(s & RW_W) && nreaders(s) == 0;
}

/* take a read lock without waiting: 0, EBUSY (*sp: the state seen) or EAGAIN */
static int try_read(bb_rwlock *l, uint64_t *sp)
{
	uint64_t s = atomic_load_explicit(&l->state, memory_order_relaxed);
	for (;;) {
		if (!readable(l, s)) {
			*sp = s;
			return EBUSY;
		}
		if (nreaders(s) >= RW_MAX_READERS)
			return EAGAIN;
		/* acquire: pairs with the release CAS of the last write unlock */
		if (atomic_compare_exchange_weak_explicit(&l->state, &s,
							  (s + RW_READER) & ~(uint64_t)RW_WRPHASE,
							  memory_order_acquire, memory_order_relaxed))
			return 0;
	}
}

/* take the write lock without waiting; `registered`: leave WW too */
static bool try_write(bb_rwlock *l, uint64_t *sp, bool registered)
{
	uint64_t s = *sp;
	while (writable(s)) {
		uint64_t n = (s | RW_W) & ~(uint64_t)RW_WRPHASE;
		if (registered)
			n -= RW_WRITER;
		/* acquire: pairs with the release CAS of the previous unlock */
		if (atomic_compare_exchange_weak_explicit(&l->state, &s, n, memory_order_acquire,
							  memory_order_relaxed)) {
			atomic_store_explicit(&l->cur_writer, bb_self_tid(), memory_order_relaxed);
			return true;
		}
	}
	*sp = s;
	return false;
}

/* NPTL's test, done before anything else by the timed calls */
static bool valid_abstime(clockid_t clock, const struct timespec *abstime)
{
	return (clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC) &&
	       abstime->tv_nsec >= 0 && abstime->tv_nsec < 1000000000;
}

/* the monotonic deadline of a timed call, computed once, when it first
 * has to wait (abstime was validated on entry); 0 = untimed */
static int64_t deadline_of(clockid_t clock, const struct timespec *abstime, int64_t *cached)
{
	if (abstime != NULL && *cached == 0)
		*cached = bb_abs_deadline(clock, abstime);
	return *cached;
}

/* a few pauses while the holder likely runs on another P */
static void spin_while(bb_rwlock *l, bool reader)
{
	if (bb_gomaxprocs <= 1)
		return;
	for (int i = 0; i < 64; i++) {
		__builtin_ia32_pause();
		uint64_t s = atomic_load_explicit(&l->state, memory_order_relaxed);
		if (reader ? readable(l, s) : writable(s))
			return;
	}
}

/* ---- waiting in the kernel: a thread that runs no G here ---- */

/* after a CAS from state s to n: if it cleared RW_K, its sleepers try
 * again (only the address is used: l may be gone) */
static void k_wake(bb_rwlock *l, uint64_t s, uint64_t n)
{
	if ((s & RW_K) && !(n & RW_K))
		bb_futex((_Atomic uint32_t *)(void *)&l->state, FUTEX_WAKE, INT_MAX, NULL);
}

/* take the lock, sleeping on the state word's low half with RW_K set (a
 * writer does not register in WW: it only tries again when woken) */
static int kernel_lock(bb_rwlock *l, bool reader, clockid_t clock,
		       const struct timespec *abstime)
{
	uint64_t s = atomic_load(&l->state);
	for (;;) {
		if (reader) {
			int err = try_read(l, &s);
			if (err != EBUSY)
				return err;
		} else if (try_write(l, &s, false)) {
			return 0;
		}
		if (!(s & RW_K) && !atomic_compare_exchange_strong(&l->state, &s, s | RW_K))
			continue;
		long r = bb_futex_wait_abs((_Atomic uint32_t *)(void *)&l->state,
					   (uint32_t)(s | RW_K), clock, abstime);
		if (r == -ETIMEDOUT)
			return ETIMEDOUT;
		s = atomic_load(&l->state);
	}
}

/* ---- waiting (validate hooks run under the queue's bucket lock) ---- */

static bool reader_must_wait(void *addr, void *arg)
{
	bb_rwlock *l = arg;
	/* relaxed: a waker's CAS happens before it takes this bucket lock */
	uint64_t s = atomic_load_explicit(&l->state, memory_order_relaxed);
	/* RW cleared means the wake-all already ran: parking now would be
	 * parking without a flag nobody will look at */
	return (s & RW_RWAIT) && !readable(l, s);
}

static bool writer_must_wait(void *addr, void *arg)
{
	bb_rwlock *l = arg;
	return !writable(atomic_load_explicit(&l->state, memory_order_relaxed));
}

/* park on a queue; a pthread_kill wakes the G, runs its handler and
 * returns -3 (the caller waits on: a lock wait never fails with EINTR) */
static int park_sig(void *queue, bool (*must_wait)(void *, void *), bb_rwlock *l, int64_t deadline)
{
	bb_getg()->wakeon = BB_WAKE_SIGNAL;
	int r = bb_sema_park(queue, must_wait, l, waitReasonMutex, deadline, NULL, NULL);
	bb_getg()->wakeon = 0;
	if (r == -3)
		bb_take_eintr();
	return r;
}

static int rdlock_slow(bb_rwlock *l, clockid_t clock, const struct timespec *abstime)
{
	int64_t deadline = 0;
	uint64_t s;
	spin_while(l, true);
	if (!bb_on_g())
		return kernel_lock(l, true, clock, abstime);
	for (;;) {
		int err = try_read(l, &s);
		if (err != EBUSY)
			return err;
		/* announce a parked reader; relaxed: the flag orders nothing, it
		 * only has to be in the same word the unlocker CASes */
		if (!(s & RW_RWAIT) &&
		    !atomic_compare_exchange_strong_explicit(&l->state, &s, s | RW_RWAIT,
							     memory_order_relaxed, memory_order_relaxed))
			continue;
		int r = park_sig(&l->rqueue, reader_must_wait, l, deadline_of(clock, abstime, &deadline));
		if (r == -3)
			continue; /* a pthread_kill's handler ran: wait on */
		if (r < 0)
			return ETIMEDOUT; /* a stale RW costs the next unlock one empty wake */
	}
}

/* a registered writer leaves WW without the lock; it may have been the one
 * woken, and may have been what held readers back */
static void writer_give_up(bb_rwlock *l)
{
	uint64_t s = atomic_load_explicit(&l->state, memory_order_relaxed), n;
	bool wake_readers;
	do {
		n = s - RW_WRITER;
		wake_readers = prefer_writer(l) && nwriters(n) == 0 && (n & RW_RWAIT) &&
			       !(n & RW_W);
		if (wake_readers)
			n &= ~(uint64_t)RW_RWAIT;
		if (prefer_writer(l) && nwriters(n) == 0)
			n &= ~(uint64_t)RW_K;
	} while (!atomic_compare_exchange_weak_explicit(&l->state, &s, n, memory_order_relaxed,
							memory_order_relaxed));
	k_wake(l, s, n);
	if (wake_readers)
		bb_sema_wake(&l->rqueue, -1);
	if (writable(n) && nwriters(n) > 0)
		bb_sema_wake(&l->wqueue, 1);
}

static int wrlock_slow(bb_rwlock *l, clockid_t clock, const struct timespec *abstime)
{
	int64_t deadline = 0;
	bool registered = false;
	spin_while(l, false);
	if (!bb_on_g())
		return kernel_lock(l, false, clock, abstime);
	uint64_t s = atomic_load_explicit(&l->state, memory_order_relaxed);
	for (;;) {
		if (try_write(l, &s, registered))
			return 0;
		if (!registered) {
			/* relaxed: registration publishes nothing; readers and
			 * unlockers see it through this word's CASes */
			if (atomic_compare_exchange_weak_explicit(&l->state, &s, s + RW_WRITER,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				registered = true;
				s += RW_WRITER;
			}
			continue;
		}
		int r = park_sig(&l->wqueue, writer_must_wait, l, deadline_of(clock, abstime, &deadline));
		if (r < 0 && r != -3) {
			writer_give_up(l);
			return ETIMEDOUT;
		}
		s = atomic_load_explicit(&l->state, memory_order_relaxed);
	}
}

/* give back the write lock; *wake_readers: parked readers may enter now.
 * Returns the state it left. */
static uint64_t wr_release(bb_rwlock *l, bool *wake_readers)
{
	atomic_store_explicit(&l->cur_writer, 0, memory_order_relaxed);
	uint64_t s = atomic_load_explicit(&l->state, memory_order_relaxed), n;
	do {
		n = s & ~(uint64_t)(RW_W | RW_K);
		*wake_readers = (s & RW_RWAIT) && (!prefer_writer(l) || nwriters(s) == 0);
		if (*wake_readers)
			n &= ~(uint64_t)RW_RWAIT;
		/* release: the critical section happens before the next holder */
	} while (!atomic_compare_exchange_weak_explicit(&l->state, &s, n, memory_order_release,
							memory_order_relaxed));
	k_wake(l, s, n);
	return n;
}

/* the wake-ups an unlock that left state n owes: the parked readers if
 * they may enter, else one writer */
static void wr_wake(bb_rwlock *l, uint64_t n, bool wake_readers)
{
	/* from here on the lock may be freed: only its addresses are used */
	int woken = wake_readers ? bb_sema_wake(&l->rqueue, -1) : 0;
	/* woken readers take the lock and their last one wakes a writer; if
	 * none were really parked (RW was stale), a writer goes now */
	if (woken == 0 && nwriters(n) > 0)
		bb_sema_wake(&l->wqueue, 1);
}

/* give back a read lock; *np: the state it left. false: it was not
 * read-locked (undefined; NPTL corrupts the lock, we ignore the call) */
static bool rd_release(bb_rwlock *l, uint64_t *np)
{
	uint64_t s = atomic_load_explicit(&l->state, memory_order_relaxed);
	do {
		if (nreaders(s) == 0)
			return false;
		*np = s - RW_READER;
		if (writable(*np)) /* the last reader: a writer may enter */
			*np &= ~(uint64_t)RW_K;
		/* release: the read section happens before the next writer */
	} while (!atomic_compare_exchange_weak_explicit(&l->state, &s, *np, memory_order_release,
							memory_order_relaxed));
	k_wake(l, s, *np);
	return true;
}

/* ---- the interposed functions ---- */

static bool kernel_rwlock(pthread_rwlock_t *rw)
{
	return ((bb_rwlock *)rw)->shared != 0;
}

static bool self_writes(bb_rwlock *l)
{
	return atomic_load_explicit(&l->cur_writer, memory_order_relaxed) == bb_self_tid();
}

/* The caller runs a G (or a handler on its M) and the lock is bobbin's:
 * what needs no wait is done on the lock word at once, without the rest of
 * bb_on_g(); a wait or a wake-up goes the whole way. */
static inline bool g_lock(pthread_rwlock_t *rw)
{
	return bb_tls_m && bb_getm()->curg != NULL && !kernel_rwlock(rw);
}

/* a read lock taken on the spot by a G: true if taken */
static inline bool fast_read(pthread_rwlock_t *rw)
{
	bb_rwlock *l = (bb_rwlock *)rw;
	uint64_t s;
	return g_lock(rw) && !self_writes(l) && try_read(l, &s) == 0;
}

/* the write lock taken on the spot by a G: true if taken */
static inline bool fast_write(pthread_rwlock_t *rw)
{
	bb_rwlock *l = (bb_rwlock *)rw;
	if (!g_lock(rw))
		return false;
	uint64_t s = atomic_load_explicit(&l->state, memory_order_relaxed);
	return try_write(l, &s, false);
}

static int rdlock(pthread_rwlock_t *rw, clockid_t clock, const struct timespec *abstime)
{
	bb_rwlock *l = (bb_rwlock *)rw;
	if (abstime != NULL && !valid_abstime(clock, abstime))
		return EINVAL;
	if (self_writes(l))
		return EDEADLK;
	uint64_t s;
	int err = try_read(l, &s);
	if (err != EBUSY)
		return err;
	return rdlock_slow(l, clock, abstime);
}

static int wrlock(pthread_rwlock_t *rw, clockid_t clock, const struct timespec *abstime)
{
	bb_rwlock *l = (bb_rwlock *)rw;
	if (abstime != NULL && !valid_abstime(clock, abstime))
		return EINVAL;
	if (self_writes(l))
		return EDEADLK;
	uint64_t s = atomic_load_explicit(&l->state, memory_order_relaxed);
	if (try_write(l, &s, false))
		return 0;
	return wrlock_slow(l, clock, abstime);
}

/* the rest of pthread_rwlock_rdlock, apart so that its fast path needs no
 * stack frame */
static __attribute__((noinline)) int rdlock_slow_entry(pthread_rwlock_t *rw)
{
	if (!bb_active || kernel_rwlock(rw))
		return BB_KERNEL_WAIT(REAL(pthread_rwlock_rdlock)(rw));
	return rdlock(rw, CLOCK_REALTIME, NULL);
}

BB_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *rw)
{
	if (fast_read(rw))
		return 0;
	return rdlock_slow_entry(rw);
}

BB_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *rw)
{
	if (!bb_active || kernel_rwlock(rw))
		return REAL(pthread_rwlock_tryrdlock)(rw);
	uint64_t s;
	return try_read((bb_rwlock *)rw, &s); /* no EDEADLK: NPTL says EBUSY */
}

BB_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *rw, const struct timespec *abstime)
{
	if (!bb_active || kernel_rwlock(rw))
		return BB_KERNEL_WAIT(REAL(pthread_rwlock_timedrdlock)(rw, abstime));
	return rdlock(rw, CLOCK_REALTIME, abstime);
}

BB_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *rw, clockid_t clock,
					 const struct timespec *abstime)
{
	if (!bb_active || kernel_rwlock(rw))
		return BB_KERNEL_WAIT(REAL(pthread_rwlock_clockrdlock)(rw, clock, abstime));
	return rdlock(rw, clock, abstime);
}

/* the rest of pthread_rwlock_wrlock (see rdlock_slow_entry) */
static __attribute__((noinline)) int wrlock_slow_entry(pthread_rwlock_t *rw)
{
	if (!bb_active || kernel_rwlock(rw))
		return BB_KERNEL_WAIT(REAL(pthread_rwlock_wrlock)(rw));
	return wrlock(rw, CLOCK_REALTIME, NULL);
}

BB_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *rw)
{
	if (fast_write(rw))
		return 0;
	return wrlock_slow_entry(rw);
}

BB_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *rw)
{
	if (!bb_active || kernel_rwlock(rw))
		return REAL(pthread_rwlock_trywrlock)(rw);
	bb_rwlock *l = (bb_rwlock *)rw;
	uint64_t s = atomic_load_explicit(&l->state, memory_order_relaxed);
	return try_write(l, &s, false) ? 0 : EBUSY; /* no EDEADLK, as NPTL */
}

BB_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *rw, const struct timespec *abstime)
{
	if (!bb_active || kernel_rwlock(rw))
		return BB_KERNEL_WAIT(REAL(pthread_rwlock_timedwrlock)(rw, abstime));
	return wrlock(rw, CLOCK_REALTIME, abstime);
}

BB_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *rw, clockid_t clock,
					 const struct timespec *abstime)
{
	if (!bb_active || kernel_rwlock(rw))
		return BB_KERNEL_WAIT(REAL(pthread_rwlock_clockwrlock)(rw, clock, abstime));
	return wrlock(rw, clock, abstime);
}

/* the wake-ups an unlock that left state n owes (wr_wake); out of line,
 * so that the unlock needs no frame */
static __attribute__((noinline)) void unlock_wake(bb_rwlock *l, uint64_t n, bool readers)
{
	(void)bb_on_g(); /* on a G: its bobbin frame is marked for the wake */
	wr_wake(l, n, readers);
}

BB_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *rw)
{
	if (!bb_active || kernel_rwlock(rw))
		return REAL(pthread_rwlock_unlock)(rw);
	bb_rwlock *l = (bb_rwlock *)rw;
	/* as NPTL: the holder of the write lock is the thread whose tid is in
	 * cur_writer; anyone else is taken for a reader. Only a wake-up needs
	 * the scheduler (bb_on_g marks this frame for it). */
	bool readers = false;
	uint64_t n;
	if (self_writes(l))
		n = wr_release(l, &readers);
	else if (!rd_release(l, &n) || !writable(n))
		return 0; /* not read-locked, or readers remain: nobody to wake */
	if (readers || nwriters(n) > 0)
		unlock_wake(l, n, readers);
	return 0;
}

BB_EXPORT int pthread_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *attr)
{
	return REAL(pthread_rwlock_init)(rw, attr); /* data only: glibc's layout is ours */
}

BB_EXPORT int pthread_rwlock_destroy(pthread_rwlock_t *rw)
{
	return REAL(pthread_rwlock_destroy)(rw); /* NPTL checks nothing: neither do we */
}
