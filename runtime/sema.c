/*
 * sema.c — address-keyed wait queues (a parking lot, like Go's semaTable):
 * any word in memory can have Gs parked on it, without a kernel futex and
 * without an OS thread per waiter.
 *
 * bb_sema_park checks its condition under the bucket lock, enqueues the G
 * and parks; the bucket lock is released by gopark's unlockf on g0, after
 * the G is marked waiting, and only then does the optional `after` hook run
 * (a condvar releases the program's mutex there). A waker takes the same
 * bucket lock to dequeue, so no wake-up is lost. Waiters of one address are
 * served in FIFO order.
 *
 * A timed park arms the G's timer; the timer and a waker race for the G
 * under the bucket lock, and a per-park ticket tells a late timer that the
 * wait it belonged to is over.
 */
#include "runtime.h"

#define NBUCKETS 251

typedef struct bucket {
	bb_lock lock;
	bb_g *head, *tail; /* waiters of every address hashing here: bucket lock */
} __attribute__((aligned(64))) bucket;

static bucket table[NBUCKETS];

static bucket *bucket_of(void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	return &table[(a >> 3) % NBUCKETS];
}

/* bucket lock held */
static void enqueue(bucket *b, bb_g *gp)
{
	gp->waitnext = NULL;
	gp->waitprev = b->tail;
	if (b->tail)
		b->tail->waitnext = gp;
	else
		b->head = gp;
	b->tail = gp;
}

/* bucket lock held */
static void unlink_g(bucket *b, bb_g *gp)
{
	if (gp->waitprev)
		gp->waitprev->waitnext = gp->waitnext;
	else
		b->head = gp->waitnext;
	if (gp->waitnext)
		gp->waitnext->waitprev = gp->waitprev;
	else
		b->tail = gp->waitprev;
	gp->waitnext = gp->waitprev = NULL;
	gp->waitaddr = NULL;
}

typedef struct parkctx {
	bucket *b;
	bool timed;
	void (*after)(void *);
	void *after_arg;
} parkctx;

static bool park_unlock(bb_g *gp, void *arg)
{
	parkctx *pc = arg;
	/* pc lives on the G's stack: once the bucket is unlocked a waker may
	 * run the G on another M and reuse that frame, so copy it first */
	void (*after)(void *) = pc->after;
	void *after_arg = pc->after_arg;
	if (pc->timed)
		bb_addtimer(&gp->timer); /* out of memory: the wait is untimed */
	bb_lock_release(&pc->b->lock);
	if (after)
		after(after_arg);
	return true;
}

static void sema_timeout(void *arg, uintptr_t seq)
{
	bb_g *gp = arg;
	bucket *b = atomic_load_explicit(&gp->waitbucket, memory_order_acquire);
	if (b == NULL)
		return;
	bb_lock_acquire(&b->lock);
	bool mine = atomic_load_explicit(&gp->waitticket, memory_order_relaxed) == seq &&
		    gp->waitaddr != NULL && atomic_load_explicit(&gp->waitbucket,
								 memory_order_relaxed) == b;
	if (mine) {
		unlink_g(b, gp);
		gp->timedout = true;
	}
	bb_lock_release(&b->lock);
	if (mine)
		bb_goready(gp);
}

int bb_sema_park(void *addr, bool (*validate)(void *, void *), void *varg, uint32_t reason,
		 int64_t deadline, void (*after)(void *), void *after_arg)
{
	bucket *b = bucket_of(addr);
	bb_g *gp = bb_getg();
	if (deadline != 0 && deadline <= bb_nanotime())
		return -2;
	bb_lock_acquire(&b->lock);
	if (validate && !validate(addr, varg)) {
		bb_lock_release(&b->lock);
		return 0;
	}
	gp->waitaddr = addr;
	gp->timedout = false;
	uintptr_t ticket = atomic_load_explicit(&gp->waitticket, memory_order_relaxed) + 1;
	atomic_store_explicit(&gp->waitticket, ticket, memory_order_relaxed);
	atomic_store_explicit(&gp->waitbucket, b, memory_order_release);
	enqueue(b, gp);
	gp->interrupted = false;
	atomic_store(&gp->waitkind, BB_WAIT_SEMA);
	parkctx pc = {b, deadline != 0, after, after_arg};
	if (deadline != 0) {
		gp->timer.when = deadline;
		gp->timer.fn = sema_timeout;
		gp->timer.arg = gp;
		gp->timer.seq = ticket;
	}
	bb_gopark(park_unlock, &pc, reason);
	atomic_store(&gp->waitkind, BB_WAIT_NONE);
	if (deadline != 0)
		bb_deltimer(&gp->timer);
	if (gp->interrupted)
		return -3;
	return gp->timedout ? -1 : 1;
}

/* take off b up to n (n < 0: all) of the Gs match accepts, under b's lock,
 * and ready them after it */
static int wake_matching(bucket *b, bool (*match)(bb_g *, void *), void *arg, int n,
			 bool handoff)
{
	bb_g *woken = NULL, **wtail = &woken;
	int count = 0;
	bb_lock_acquire(&b->lock);
	for (bb_g *gp = b->head; gp && (n < 0 || count < n);) {
		bb_g *next = gp->waitnext;
		if (match(gp, arg)) {
			unlink_g(b, gp);
			gp->handoff = handoff;
			*wtail = gp;
			wtail = &gp->schedlink;
			gp->schedlink = NULL;
			count++;
		}
		gp = next;
	}
	bb_lock_release(&b->lock);
	while (woken) {
		bb_g *next = woken->schedlink;
		woken->schedlink = NULL;
		bb_goready(woken);
		woken = next;
	}
	return count;
}

static bool parked_on(bb_g *gp, void *addr)
{
	return gp->waitaddr == addr;
}

static int wake(void *addr, int n, bool handoff)
{
	return wake_matching(bucket_of(addr), parked_on, addr, n, handoff);
}

int bb_sema_wake(void *addr, int n)
{
	return wake(addr, n, false);
}

/* wake the first waiter and tell it that what it waited for is now its own
 * (a starving mutex waiter gets the lock handed over) */
bool bb_sema_wake_handoff(void *addr)
{
	return wake(addr, 1, true) == 1;
}

/* sysmon, when handlers' posts overflowed its ring (sysmon.c): every G
 * parked in a semaphore-like wait whose word is not 0 wakes and looks
 * again (a wake-up with nothing for it is one its waits allow: a
 * semaphore's parks again, a barrier's looks at its round, an emulated
 * futex wait returns 0) */
static bool word_not_zero(bb_g *gp, void *arg)
{
	(void)arg;
	return gp->waitreason == waitReasonSema &&
	       atomic_load_explicit((_Atomic uint32_t *)gp->waitaddr, memory_order_relaxed) != 0;
}

void bb_sema_wake_nonzero(void)
{
	for (int i = 0; i < NBUCKETS; i++)
		wake_matching(&table[i], word_not_zero, NULL, -1, false);
}

bool bb_sema_has_waiters(void *addr)
{
	bucket *b = bucket_of(addr);
	bool any = false;
	bb_lock_acquire(&b->lock);
	for (bb_g *gp = b->head; gp; gp = gp->waitnext)
		if (gp->waitaddr == addr) {
			any = true;
			break;
		}
	bb_lock_release(&b->lock);
	return any;
}

/* at start-up: the table's pages made present (stored into once), so
 * that a fork child reads them without faulting in zero pages */
void bb_sema_init(void)
{
	for (int i = 0; i < NBUCKETS; i++)
		atomic_store(&table[i].lock.key, 0);
}

/* in a fork child: no G of the parent's waits here any more. A bucket
 * another thread was changing as it forked may be locked or half-linked:
 * emptied too (the table is not locked around fork). Only those written:
 * a store to a page the child shares with its parent copies it */
void bb_sema_forkchild(void)
{
	for (int i = 0; i < NBUCKETS; i++)
		if (table[i].head || table[i].tail || atomic_load(&table[i].lock.key)) {
			table[i].head = table[i].tail = NULL;
			atomic_store(&table[i].lock.key, 0);
		}
}

/* pthread_cancel: take gp off the queue it is parked on, if it still is
 * (the same race as a timer's: whoever unlinks it under the lock readies it) */
bool bb_sema_interrupt(bb_g *gp)
{
	bucket *b = atomic_load_explicit(&gp->waitbucket, memory_order_acquire);
	if (b == NULL)
		return false;
	bb_lock_acquire(&b->lock);
	bool mine = gp->waitaddr != NULL &&
		    atomic_load_explicit(&gp->waitbucket, memory_order_relaxed) == b &&
		    atomic_load(&gp->waitkind) == BB_WAIT_SEMA;
	if (mine) {
		unlink_g(b, gp);
		gp->interrupted = true;
	}
	bb_lock_release(&b->lock);
	if (mine)
		bb_goready(gp);
	return mine;
}
