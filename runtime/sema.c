/*
 * sema.c — address-keyed wait queues (a parking lot, like Go's semaTable):
 * any word in memory can have Gs parked on it, without a kernel futex and
 * without an OS thread per waiter.
 *
 * bb_sema_park checks its condition under the bucket lock and parks; the
 * bucket lock is released by gopark's unlockf on g0, after the G is marked
 * waiting. A waker takes the same lock to dequeue, so no wake-up is lost.
 * Waiters are served in FIFO order per address.
 */
#include "runtime.h"

#define NBUCKETS 251

typedef struct bucket {
	bb_lock lock;
	bb_g *head, *tail; /* waiters of every address hashing here: bucket lock */
	char pad[64 - sizeof(bb_lock) - 2 * sizeof(void *)];
} bucket;

static bucket table[NBUCKETS];

static bucket *bucket_of(void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	return &table[(a >> 3) % NBUCKETS];
}

static bool unlock_bucket(bb_g *gp, void *arg)
{
	bb_lock_release(&((bucket *)arg)->lock);
	return true;
}

int bb_sema_park(void *addr, bool (*validate)(void *, void *), void *arg, uint32_t reason)
{
	bucket *b = bucket_of(addr);
	bb_g *gp = bb_getg();
	bb_lock_acquire(&b->lock);
	if (validate && !validate(addr, arg)) {
		bb_lock_release(&b->lock);
		return 0;
	}
	gp->waitaddr = addr;
	gp->waitnext = NULL;
	if (b->tail)
		b->tail->waitnext = gp;
	else
		b->head = gp;
	b->tail = gp;
	bb_gopark(unlock_bucket, b, reason);
	return 1;
}

int bb_sema_wake(void *addr, int n)
{
	bucket *b = bucket_of(addr);
	bb_g *woken = NULL, **wtail = &woken;
	int count = 0;
	bb_lock_acquire(&b->lock);
	bb_g *prev = NULL;
	for (bb_g *gp = b->head; gp && (n < 0 || count < n);) {
		bb_g *next = gp->waitnext;
		if (gp->waitaddr == addr) {
			if (prev)
				prev->waitnext = next;
			else
				b->head = next;
			if (b->tail == gp)
				b->tail = prev;
			gp->waitaddr = NULL;
			gp->waitnext = NULL;
			*wtail = gp;
			wtail = &gp->schedlink;
			gp->schedlink = NULL;
			count++;
		} else {
			prev = gp;
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
