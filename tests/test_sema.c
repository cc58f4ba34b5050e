/*
 * test_sema.c — address-keyed wait queues (runtime/sema.c) with the whole
 * runtime started in the test process (rt_start.h).
 *
 * Most tests run with one P: G1 holds it, so a G parks only while G1 yields
 * and a woken G stays Grunnable until G1 yields again. Which G a wake
 * readied is then read straight from the statuses.
 */
#include "rt_start.h"

#include <stdint.h>

TestSuite(sema, .timeout = 60); /* a hang (a lost wake-up) is a failure */

#define NBUCKETS 251 /* runtime/sema.c: (addr >> 3) % NBUCKETS */

struct waiter {
	void *addr;
	int id;
	int parked; /* what bb_sema_park returned */
};

static _Atomic int order[64], norder;

static void *wait_on(void *arg)
{
	struct waiter *w = arg;
	w->parked = bb_sema_park(w->addr, NULL, NULL, waitReasonSema, 0, NULL, NULL);
	order[atomic_fetch_add(&norder, 1)] = w->id;
	return (void *)(intptr_t)w->id;
}

/* make a G that parks on addr, and wait until it has */
static bb_g *park_one(struct waiter *w, void *addr, int id)
{
	w->addr = addr;
	w->id = id;
	bb_g *gp = rt_go(wait_on, w);
	rt_wait_status(gp, Gwaiting);
	cr_assert_eq(gp->waitaddr, addr);
	return gp;
}

static int count_status(bb_g **gs, int n, uint32_t st)
{
	int c = 0;
	for (int i = 0; i < n; i++)
		c += atomic_load(&gs[i]->status) == st;
	return c;
}

static long word_a, word_b;

Test(sema, wake_order_is_fifo)
{
	rt_start(1);
	enum { N = 6 };
	struct waiter w[N];
	bb_g *gs[N];
	for (int i = 0; i < N; i++)
		gs[i] = park_one(&w[i], &word_a, i);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(bb_sema_wake(&word_a, 1), 1);
		for (int j = 0; j < N; j++)
			cr_assert_eq(atomic_load(&gs[j]->status), j <= i ? Grunnable : Gwaiting,
				     "after %d wakes G of waiter %d has status %u", i + 1, j,
				     atomic_load(&gs[j]->status));
	}
	cr_assert_eq(bb_sema_wake(&word_a, 1), 0, "the queue is empty");
	for (int i = 0; i < N; i++) {
		cr_assert_eq(rt_join(gs[i]), (void *)(intptr_t)i);
		cr_assert_eq(w[i].parked, 1);
	}
}

Test(sema, wake_n_wakes_exactly_n)
{
	rt_start(1);
	enum { N = 7 };
	struct waiter w[N];
	bb_g *gs[N];
	for (int i = 0; i < N; i++)
		gs[i] = park_one(&w[i], &word_a, i);
	cr_assert_eq(bb_sema_wake(&word_a, 3), 3);
	cr_assert_eq(count_status(gs, N, Grunnable), 3);
	cr_assert_eq(count_status(gs, N, Gwaiting), 4);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(atomic_load(&gs[i]->status), Grunnable, "the oldest three");
	cr_assert_eq(bb_sema_wake(&word_a, 0), 0, "wake(0) wakes none");
	cr_assert_eq(count_status(gs, N, Gwaiting), 4);
	cr_assert_eq(bb_sema_wake(&word_a, -1), 4, "n < 0 wakes all the rest");
	cr_assert_eq(count_status(gs, N, Grunnable), N);
	cr_assert_eq(bb_sema_wake(&word_a, -1), 0);
	for (int i = 0; i < N; i++)
		rt_join(gs[i]);
	cr_assert_eq(atomic_load(&norder), N, "every waiter returned from park once");
}

Test(sema, wake_without_waiters_returns_zero)
{
	rt_start(1);
	cr_assert_eq(bb_sema_wake(&word_a, 1), 0);
	cr_assert_eq(bb_sema_wake(&word_a, -1), 0);
	cr_assert_eq(bb_sema_wake(&word_b, 100), 0);

	/* a G parked elsewhere is not a waiter of this word */
	struct waiter w;
	bb_g *gp = park_one(&w, &word_b, 1);
	cr_assert_eq(bb_sema_wake(&word_a, -1), 0);
	cr_assert_eq(atomic_load(&gp->status), Gwaiting);
	cr_assert_eq(bb_sema_wake(&word_b, 1), 1);
	rt_join(gp);
}

static _Atomic int validate_calls;
static void *validate_addr, *validate_arg;

static bool refuse(void *addr, void *arg)
{
	atomic_fetch_add(&validate_calls, 1);
	validate_addr = addr;
	validate_arg = arg;
	return false;
}

Test(sema, validate_false_does_not_park)
{
	rt_start(1);
	int token;
	/* on G1, with nothing else to run: parking here would never return */
	int r = bb_sema_park(&word_a, refuse, &token, waitReasonSema, 0, NULL, NULL);
	cr_assert_eq(r, 0, "bb_sema_park returned %d without parking", r);
	cr_assert_eq(atomic_load(&validate_calls), 1);
	cr_assert_eq(validate_addr, &word_a, "validate gets the address");
	cr_assert_eq(validate_arg, &token, "validate gets the argument");
	cr_assert_eq(atomic_load(&bb_getg()->status), Grunning);
	cr_assert_null(bb_getg()->waitaddr, "not queued");
	cr_assert_eq(bb_sema_wake(&word_a, -1), 0, "nothing was left on the queue");
}

/* ---- addresses in one bucket ---- */

static char arena[16 * NBUCKETS * 8] __attribute__((aligned(64)));

/* the k-th address of the bucket of arena[0] */
static void *same_bucket(int k)
{
	return arena + (size_t)k * NBUCKETS * 8;
}

Test(sema, same_bucket_addresses_do_not_interfere)
{
	rt_start(1);
	void *a = same_bucket(0), *b = same_bucket(1), *c = same_bucket(2);
	cr_assert_eq(((uintptr_t)a >> 3) % NBUCKETS, ((uintptr_t)b >> 3) % NBUCKETS);
	cr_assert_eq(((uintptr_t)a >> 3) % NBUCKETS, ((uintptr_t)c >> 3) % NBUCKETS);

	/* bucket: a0 b0 a1 b1 a2 */
	struct waiter w[8];
	bb_g *a0 = park_one(&w[0], a, 0), *b0 = park_one(&w[1], b, 1);
	bb_g *a1 = park_one(&w[2], a, 2), *b1 = park_one(&w[3], b, 3);
	bb_g *a2 = park_one(&w[4], a, 4);

	cr_assert_eq(bb_sema_wake(c, -1), 0, "no waiter on c");
	cr_assert_eq(bb_sema_wake(b, 1), 1);
	cr_assert_eq(atomic_load(&b0->status), Grunnable);
	cr_assert_eq(atomic_load(&b1->status), Gwaiting);
	cr_assert_eq(atomic_load(&a0->status), Gwaiting, "a wake of b woke a waiter of a");

	/* remove the head and the tail of the bucket (a0, a2 are a's first and
	 * last), leaving b1 alone: then a new waiter must queue behind it */
	cr_assert_eq(bb_sema_wake(a, 1), 1);
	cr_assert_eq(atomic_load(&a0->status), Grunnable);
	cr_assert_eq(atomic_load(&a1->status), Gwaiting);
	cr_assert_eq(bb_sema_wake(a, -1), 2);
	cr_assert_eq(atomic_load(&a1->status), Grunnable);
	cr_assert_eq(atomic_load(&a2->status), Grunnable);
	cr_assert_eq(atomic_load(&b1->status), Gwaiting);

	/* let the woken ones finish before parking more, so joins are clean */
	rt_join(a0);
	rt_join(a1);
	rt_join(a2);
	rt_join(b0);

	bb_g *c0 = park_one(&w[5], c, 5), *b2 = park_one(&w[6], b, 6);
	bb_g *a3 = park_one(&w[7], a, 7);
	cr_assert_eq(bb_sema_wake(b, -1), 2, "b1 and b2, in order");
	cr_assert_eq(atomic_load(&b1->status), Grunnable);
	cr_assert_eq(atomic_load(&b2->status), Grunnable);
	cr_assert_eq(atomic_load(&c0->status), Gwaiting);
	cr_assert_eq(atomic_load(&a3->status), Gwaiting);
	cr_assert_eq(bb_sema_wake(a, -1), 1);
	cr_assert_eq(bb_sema_wake(c, -1), 1);
	cr_assert_eq(bb_sema_wake(a, -1), 0);
	cr_assert_eq(bb_sema_wake(b, -1), 0);
	cr_assert_eq(bb_sema_wake(c, -1), 0);
	bb_g *rest[] = {b1, b2, c0, a3};
	for (int i = 0; i < 4; i++)
		rt_join(rest[i]);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(w[i].parked, 1);
}

/* ---- a mutex built on the wait queues, on two Ps ----
 * state: 0 free, 1 held, 2 held with possible waiters. A lost wake-up
 * hangs the test (Criterion's timeout); a broken exclusion loses counts. */

#define NLOCKERS 8
#define NITERS 2000

static _Atomic uint32_t mu;
static long counter; /* guarded by mu, deliberately not atomic */

static bool still_held(void *addr, void *arg)
{
	return atomic_load((_Atomic uint32_t *)addr) == 2;
}

static void mu_lock(void)
{
	uint32_t c = 0;
	if (atomic_compare_exchange_strong(&mu, &c, 1))
		return;
	while (atomic_exchange(&mu, 2) != 0)
		bb_sema_park((void *)&mu, still_held, NULL, waitReasonSema, 0, NULL, NULL);
}

static void mu_unlock(void)
{
	if (atomic_exchange(&mu, 0) == 2)
		bb_sema_wake((void *)&mu, 1);
}

static void *locker(void *arg)
{
	for (int i = 0; i < NITERS; i++) {
		mu_lock();
		long v = counter;
		if (i % 7 == 0)
			bb_gosched(); /* hold the lock across a switch */
		counter = v + 1;
		mu_unlock();
	}
	return arg;
}

Test(sema, mutex_on_two_ps_loses_no_wakeup)
{
	rt_start(2);
	bb_g *gs[NLOCKERS];
	for (int i = 0; i < NLOCKERS; i++)
		gs[i] = rt_go(locker, (void *)(intptr_t)i);
	for (int i = 0; i < NLOCKERS; i++)
		cr_assert_eq(rt_join(gs[i]), (void *)(intptr_t)i);
	cr_assert_eq(counter, (long)NLOCKERS * NITERS);
	cr_assert_eq(atomic_load(&mu), 0);
}

/* ---- the parking G's frame is its own again once it can be woken ----
 * bb_sema_park's locals live on the G's stack. Once the bucket lock is
 * released on g0 a waker on another M may ready the G, and it may run,
 * return from bb_sema_park and reuse that frame: g0 must not read it any
 * more. Pairs of Gs ping-pong across four Ps and, after each wake-up, fill
 * the dead frame with garbage and yield with it still there; a read of the
 * frame after the unlock then calls or uses garbage and the test crashes.
 * Fresh batches of pairs, because each batch spreads over the Ps at first
 * and then tends to settle on one. */

#define RPAIRS 8
#define RROUNDS 2000
#define RBATCHES 16

static _Atomic int rturn[RPAIRS];
struct rplayer {
	int pair, me;
};

static void *raddr(int pair, int me)
{
	return arena + (size_t)(2 * pair + me) * NBUCKETS * 8; /* all in one bucket */
}

static bool not_rturn(void *addr, void *arg)
{
	struct rplayer *p = arg;
	return atomic_load(&rturn[p->pair]) != p->me;
}

__attribute__((noinline)) static void dirty_dead_frame(void)
{
	volatile char junk[2048];
	memset((char *)junk, 0xA5, sizeof junk);
	bb_gosched(); /* the garbage stays while others run */
	junk[0]++;
}

static void *rplayer(void *arg)
{
	struct rplayer *p = arg;
	for (int r = 0; r < RROUNDS; r++) {
		while (atomic_load(&rturn[p->pair]) != p->me) {
			bb_sema_park(raddr(p->pair, p->me), not_rturn, p, waitReasonSema, 0, NULL,
				     NULL);
			dirty_dead_frame();
		}
		atomic_store(&rturn[p->pair], 1 - p->me);
		bb_sema_wake(raddr(p->pair, 1 - p->me), 1);
	}
	return NULL;
}

Test(sema, park_does_not_read_the_gs_frame_after_unlock)
{
	rt_start(4);
	for (int batch = 0; batch < RBATCHES; batch++) {
		struct rplayer pl[RPAIRS][2];
		bb_g *gs[RPAIRS][2];
		for (int i = 0; i < RPAIRS; i++) {
			atomic_store(&rturn[i], 0);
			for (int j = 0; j < 2; j++) {
				pl[i][j] = (struct rplayer){i, j};
				gs[i][j] = rt_go(rplayer, &pl[i][j]);
			}
		}
		for (int i = 0; i < RPAIRS; i++)
			for (int j = 0; j < 2; j++)
				rt_join(gs[i][j]);
	}
}
