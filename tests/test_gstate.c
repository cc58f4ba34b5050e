/*
 * test_gstate.c — the G state machine (bb_casgstatus), then the whole
 * runtime started in the test process: the statuses a G goes through,
 * results through join, many Gs, the scheduler's fairness rules, and that
 * __thread variables belong to each G.
 *
 * See rt_start.h: Gs record what they see, G1 asserts.
 */
#include "rt_start.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

TestSuite(gstate, .timeout = 60); /* a hang (a lost wake-up) is a failure */

/* ---- bb_casgstatus, no runtime ---- */

Test(gstate, casgstatus_follows_transitions)
{
	bb_g *gp = calloc(1, sizeof *gp);
	atomic_store(&gp->status, Gdead);
	static const uint32_t path[] = {Gdead,    Grunnable, Grunning, Gwaiting,
					Grunnable, Grunning, Gsyscall, Grunning, Gdead};
	for (size_t i = 0; i + 1 < sizeof path / sizeof path[0]; i++) {
		cr_assert(bb_casgstatus(gp, path[i], path[i + 1]));
		cr_assert_eq(atomic_load(&gp->status), path[i + 1]);
	}
	free(gp);
}

Test(gstate, casgstatus_wrong_from_aborts, .signal = SIGABRT)
{
	bb_g *gp = calloc(1, sizeof *gp);
	gp->goid = 7;
	atomic_store(&gp->status, Grunnable);
	bb_casgstatus(gp, Gwaiting, Grunning); /* not waiting: bb_throw */
	cr_assert_fail("casgstatus accepted a wrong from state (status now %u)",
		       atomic_load(&gp->status));
}

Test(gstate, casgstatus_same_state_aborts_on_mismatch, .signal = SIGABRT)
{
	bb_g *gp = calloc(1, sizeof *gp);
	atomic_store(&gp->status, Gdead);
	bb_casgstatus(gp, Grunning, Gdead); /* a double exit */
}

/* ---- statuses in a running runtime ---- */

struct seen {
	bb_g *self;
	uint32_t status;
	uint64_t goid;
	bool has_m;
	int parked; /* what bb_sema_park returned */
};

static long parkword;

static void *parker(void *arg)
{
	struct seen *s = arg;
	s->self = bb_getg();
	s->status = atomic_load(&s->self->status);
	s->goid = s->self->goid;
	s->has_m = s->self->m == bb_getm();
	s->parked = bb_sema_park(&parkword, NULL, NULL, waitReasonSema, 0, NULL, NULL);
	return (void *)(uintptr_t)(s->goid * 10 + 1);
}

Test(gstate, statuses_through_a_gs_life)
{
	rt_start(1);
	bb_g *self = bb_getg();
	cr_assert_eq(atomic_load(&self->status), Grunning, "G1 runs");
	cr_assert_eq(self->goid, 1);

	struct seen s = {0};
	bb_g *gp = rt_go(parker, &s);
	cr_assert_eq(atomic_load(&gp->status), Grunnable, "made, not yet run (one P, we hold it)");
	cr_assert_eq(atomic_load(&bb_allp[0]->runnext), gp, "a new G goes to runnext");
	cr_assert_null(s.self);

	rt_wait_status(gp, Gwaiting);
	cr_assert_eq(s.self, gp, "bb_getg() on the G is the G newproc returned");
	cr_assert_eq(s.status, Grunning, "a G sees itself Grunning");
	cr_assert_eq(s.goid, gp->goid);
	cr_assert(s.has_m, "a running G has g->m set to its M");
	cr_assert_neq(gp->goid, self->goid);
	cr_assert_eq(gp->waitreason, waitReasonSema);
	cr_assert_eq(gp->waitaddr, &parkword);
	cr_assert_null(gp->m, "a parked G has no M");

	cr_assert_eq(bb_sema_wake(&parkword, 1), 1);
	cr_assert_eq(atomic_load(&gp->status), Grunnable, "woken, queued behind us");
	cr_assert_eq(atomic_load(&bb_allp[0]->runnext), gp, "goready puts it in runnext");

	void *res = rt_join(gp);
	cr_assert_eq(res, (void *)(uintptr_t)(s.goid * 10 + 1), "result through join");
	cr_assert_eq(s.parked, 1);
	cr_assert_eq(atomic_load(&gp->status), Gdead, "joined");
	cr_assert_eq(atomic_load(&self->status), Grunning, "G1 runs again after the join");
	cr_assert_eq(bb_getg(), self);
}

static void *quick(void *arg)
{
	return (void *)((uintptr_t)arg * 3 + 1);
}

Test(gstate, exited_g_is_dead_before_join)
{
	rt_start(1);
	bb_g *gp = rt_go(quick, (void *)5);
	rt_wait_status(gp, Gdead);
	cr_assert(gp->exited, "a zombie waiting for its joiner");
	cr_assert_eq(bb_nlive(), 1, "only G1 is live");
	void *res = (void *)-1;
	cr_assert_eq(bb_gjoin(gp, &res, BB_JOIN_TRY, 0), 0);
	cr_assert_eq(res, (void *)16);
}

Test(gstate, ten_thousand_gs_in_batches)
{
	rt_start(0);
	enum { TOTAL = 10000, BATCH = 500 };
	bb_g *gs[BATCH];
	long ok = 0;
	for (int base = 0; base < TOTAL; base += BATCH) {
		for (int i = 0; i < BATCH; i++)
			gs[i] = rt_go(quick, (void *)(uintptr_t)(base + i));
		for (int i = 0; i < BATCH; i++) {
			void *res = rt_join(gs[i]);
			cr_assert_eq(res, (void *)((uintptr_t)(base + i) * 3 + 1),
				     "G for %d returned %p", base + i, res);
			ok++;
		}
	}
	cr_assert_eq(ok, TOTAL);
	cr_assert_eq(bb_nlive(), 1, "every G but G1 has exited");
	cr_assert_geq(atomic_load(&bb_sched_.goidgen), TOTAL + 1);
}

/* ---- the stack cache: an ended thread's stack and TCB are free at once ---- */

struct where {
	uintptr_t sp;  /* a frame of the G, on its stack */
	uintptr_t tcb; /* its fs base */
	bb_g *self;
};

static void *where_am_i(void *arg)
{
	struct where *w = arg;
	w->sp = (uintptr_t)__builtin_frame_address(0);
	w->tcb = bb_getfsbase();
	w->self = bb_getg();
	return arg;
}

/* Each G ends before the next is made, and none is joined until the end:
 * a zombie keeps only its G, so all of them run on the first one's stack
 * and TCB (they went to the P's cache at its exit). Before, every zombie
 * kept its own 8 MiB stack and TCB until its join. */
Test(gstate, an_ended_thread_frees_its_stack_and_tcb_before_the_join)
{
	rt_start(1);
	enum { N = 100 };
	static struct where w[N];
	bb_g *gs[N];
	for (int i = 0; i < N; i++) {
		gs[i] = rt_go(where_am_i, &w[i]);
		rt_wait_status(gs[i], Gdead);
		cr_assert(gs[i]->exited, "G%d: a zombie waiting for its joiner", i);
		cr_assert_null(gs[i]->stack_map, "G%d: the zombie still owns its stack", i);
		cr_assert_null(gs[i]->tcb, "G%d: the zombie still owns its TCB", i);
	}
	for (int i = 1; i < N; i++) {
		cr_assert_eq(w[i].tcb, w[0].tcb, "G%d ran on TCB %#lx, not the freed %#lx", i,
			     (unsigned long)w[i].tcb, (unsigned long)w[0].tcb);
		cr_assert(w[i].sp >> 16 == w[0].sp >> 16, "G%d ran on another stack (%#lx vs %#lx)",
			  i, (unsigned long)w[i].sp, (unsigned long)w[0].sp);
	}
	for (int i = 0; i < N; i++) {
		cr_assert_eq(w[i].self, gs[i]);
		cr_assert_eq(rt_join(gs[i]), &w[i], "the join still gets G%d's result", i);
	}
}

static _Atomic int gate, nparked;
static long gateaddr;

static bool gate_closed(void *addr, void *arg)
{
	return !atomic_load(&gate);
}

static void *park_at_gate(void *arg)
{
	where_am_i(arg);
	atomic_fetch_add(&nparked, 1);
	while (!atomic_load(&gate))
		bb_sema_park(&gateaddr, gate_closed, NULL, waitReasonSema, 0, NULL, NULL);
	return arg;
}

/* Rounds of 40 Gs alive at once on two Ps, then ending at once: with the
 * test sizes (4 stacks per P, 8 kept warm) every round spills stacks to
 * the global list, refills from it and gives pages back. The Gs ask for
 * four stack sizes in turn: the default; 256 KiB; 64 KiB with no guard and
 * 60 KiB with one, two mappings of one size (both too small for the TCB
 * at their top). No stack or TCB may be handed to two live threads, each G
 * gets a stack of the size and guard it asked for, and its frame is inside
 * that stack. */
Test(gstate, cached_stacks_are_never_shared_by_two_live_threads)
{
	rt_start(2);
	enum { N = 40, ROUNDS = 15 };
	static const size_t sizes[4] = {0, 256 * 1024, 64 * 1024, 60 * 1024};
	static struct where w[N];
	bb_g *gs[N];
	for (int r = 0; r < ROUNDS; r++) {
		atomic_store(&gate, 0);
		atomic_store(&nparked, 0);
		for (int i = 0; i < N; i++) {
			size_t size = sizes[(i + r) % 4], guard = size == 64 * 1024 ? 0 : 4096;
			gs[i] = rt_go_sized(park_at_gate, &w[i], size, guard);
			size_t want = size ? size : bb_default_stacksize();
			cr_assert_eq(gs[i]->stack_mapsize, want + guard, "round %d G%d: a %zu-byte mapping for %zu + %zu",
				     r, i, gs[i]->stack_mapsize, want, guard);
			cr_assert_eq(gs[i]->guardsize, guard);
		}
		for (long k = 0; atomic_load(&nparked) < N; k++) {
			cr_assert(k < 10 * 1000 * 1000, "round %d: only %d of %d Gs parked", r,
				  atomic_load(&nparked), N);
			bb_gosched();
		}
		for (int i = 0; i < N; i++) {
			cr_assert(w[i].sp >= gs[i]->stack_lo && w[i].sp < gs[i]->stack_hi,
				  "round %d G%d: frame %#lx outside its stack [%#lx, %#lx)", r, i,
				  (unsigned long)w[i].sp, (unsigned long)gs[i]->stack_lo,
				  (unsigned long)gs[i]->stack_hi);
			cr_assert_eq(w[i].tcb, (uintptr_t)gs[i]->tcb);
			for (int j = 0; j < i; j++) {
				cr_assert_neq(gs[i]->stack_lo, gs[j]->stack_lo,
					      "round %d: G%d and G%d live on one stack", r, i, j);
				cr_assert_neq(w[i].tcb, w[j].tcb,
					      "round %d: G%d and G%d live on one TCB", r, i, j);
			}
		}
		atomic_store(&gate, 1);
		bb_sema_wake(&gateaddr, N);
		for (int i = 0; i < N; i++)
			cr_assert_eq(rt_join(gs[i]), &w[i]);
	}
	cr_assert_eq(bb_nlive(), 1, "every G but G1 has exited");
}

/* n Gs of one stack size alive at once (parked at the gate), then ended
 * and joined; their stacks' bottoms in lo[] */
static void alive_at_once(int n, size_t size, uintptr_t *lo)
{
	static struct where w[200];
	bb_g *gs[200];
	atomic_store(&gate, 0);
	atomic_store(&nparked, 0);
	for (int i = 0; i < n; i++) {
		gs[i] = rt_go_sized(park_at_gate, &w[i], size, 4096);
		lo[i] = gs[i]->stack_lo;
	}
	for (long k = 0; atomic_load(&nparked) < n; k++) {
		cr_assert(k < 10 * 1000 * 1000, "only %d of %d Gs parked", atomic_load(&nparked), n);
		bb_gosched();
	}
	atomic_store(&gate, 1);
	bb_sema_wake(&gateaddr, n);
	for (int i = 0; i < n; i++)
		cr_assert_eq(rt_join(gs[i]), &w[i]);
}

static bool mapped(uintptr_t a)
{
	unsigned char v;
	return mincore((void *)(a & ~(uintptr_t)4095), 4096, &v) == 0;
}

/* The global stack cache keeps each size apart, and unmaps what no thread
 * took for a while. 20 stacks of 256 KiB go to the cache, then 150 of 128
 * KiB after them: the next 20 threads of 256 KiB must get the first 20
 * back, not fresh mappings (the cache once looked at its first 64 stacks
 * only, so a program alternating two sizes mapped new stacks for ever and
 * never unmapped the others). Then two trims (sysmon's, a second apart)
 * unmap every stack of the global cache; the few a P keeps stay. */
Test(gstate, stack_sizes_are_cached_apart_and_unused_stacks_are_unmapped)
{
	rt_start(1);
	enum { A = 20, B = 150 };
	static uintptr_t a1[A], a2[A], b[B];
	alive_at_once(A, 256 * 1024, a1);
	alive_at_once(B, 128 * 1024, b);
	alive_at_once(A, 256 * 1024, a2);
	for (int i = 0; i < A; i++) {
		bool old = false;
		for (int j = 0; j < A && !old; j++)
			old = a2[i] == a1[j];
		cr_assert(old, "thread %d of the second 256 KiB round got a new stack at %#lx", i,
			  (unsigned long)a2[i]);
	}
	cr_assert_gt(atomic_load(&bb_sched_.nstkfree), 0, "stacks wait in the global cache");
	int64_t t = bb_nanotime() + 10 * BB_STACK_TRIM_NS; /* past sysmon's own trims */
	int32_t n1 = bb_stack_trim(t);
	int32_t n2 = bb_stack_trim(t + BB_STACK_TRIM_NS);
	cr_assert_eq(atomic_load(&bb_sched_.nstkfree), 0, "%d stacks are still cached globally",
		     atomic_load(&bb_sched_.nstkfree));
	cr_assert_geq(n1 + n2, A + B - 2 * BB_STACK_LOCAL_MAX, "only %d + %d stacks unmapped", n1, n2);
	int still = 0;
	for (int i = 0; i < A; i++)
		still += mapped(a1[i]);
	for (int i = 0; i < B; i++)
		still += mapped(b[i]);
	cr_assert_leq(still, BB_STACK_LOCAL_MAX, "%d of %d stacks are still mapped", still, A + B);
	/* and threads still get stacks: from the P's few, then new ones */
	uintptr_t c[40];
	alive_at_once(40, 128 * 1024, c);
	cr_assert_eq(bb_nlive(), 1, "every G but G1 has exited");
}

/* A G that writes 96 KiB of its stack, then parks at the gate */
static void *deep_then_park(void *arg)
{
	volatile char buf[96 * 1024];
	for (size_t i = 0; i < sizeof buf; i += 512)
		buf[i] = (char)i;
	return park_at_gate(arg);
}

/* Past the stacks kept warm, a cached stack gives its pages back but for
 * the top few, if its thread went below them (the page under them says;
 * a release of a stack that never did asked the kernel to flush every
 * CPU's TLB for nothing). 40 Gs of 256 KiB that write 96 KiB deep: with
 * the test sizes (4 per P, 8 kept warm) most of their stacks end past the
 * warm ones and must have no page left 64 KiB below their top. */
Test(gstate, cached_stacks_give_back_the_pages_their_threads_touched)
{
	rt_start(1);
	enum { N = 40 };
	static struct where w[N];
	bb_g *gs[N];
	uintptr_t deep[N];
	atomic_store(&gate, 0);
	atomic_store(&nparked, 0);
	for (int i = 0; i < N; i++) {
		gs[i] = rt_go_sized(deep_then_park, &w[i], 256 * 1024, 4096);
		deep[i] = (gs[i]->stack_hi - 64 * 1024) & ~(uintptr_t)4095;
	}
	for (long k = 0; atomic_load(&nparked) < N; k++) {
		cr_assert(k < 10 * 1000 * 1000, "only %d of %d Gs parked", atomic_load(&nparked), N);
		bb_gosched();
	}
	int touched = 0;
	for (int i = 0; i < N; i++) {
		unsigned char v = 0;
		cr_assert_eq(mincore((void *)deep[i], 4096, &v), 0);
		touched += v & 1;
	}
	cr_assert_eq(touched, N, "only %d of %d stacks have their deep page in memory", touched, N);
	atomic_store(&gate, 1);
	bb_sema_wake(&gateaddr, N);
	for (int i = 0; i < N; i++)
		cr_assert_eq(rt_join(gs[i]), &w[i]);
	int still = 0;
	for (int i = 0; i < N; i++) {
		unsigned char v = 0;
		if (mincore((void *)deep[i], 4096, &v) == 0)
			still += v & 1; /* (unmapped: given back too) */
	}
	cr_assert_leq(still, BB_STACK_WARM_MAX + 2 * BB_STACK_LOCAL_MAX,
		      "%d of %d cached stacks keep the pages 64 KiB below their top", still, N);
}

/* ---- fairness: a runnext ping-pong pair must not starve other Gs ----
 *
 * Two Gs hand a turn back and forth through bb_sema_wake/bb_sema_park; each
 * wake puts the other in runnext of the one P, so with no bound the pair
 * runs forever. A third G waits, on the global queue or in the local ring,
 * and records how many rounds the pair had played when it finally ran. */

#define PING_LIMIT 10000 /* rounds; the 61-tick rule needs far fewer */

static long pingaddr[2][8]; /* 64 bytes apart: different sema buckets */
static _Atomic int turn, stop, cflag, spawn_failed;
static _Atomic long rounds, rounds_at_c = -1;

static bool not_my_turn(void *addr, void *arg)
{
	return atomic_load(&turn) != ((int)(intptr_t)arg & 1) && !atomic_load(&stop);
}

static void *starved(void *arg)
{
	if (arg) /* to the global run queue, behind the players */
		bb_gosched();
	atomic_store(&rounds_at_c, atomic_load(&rounds));
	atomic_store(&cflag, 1);
	return NULL;
}

static bb_g *ring_c;

/* arg: bit 0 = which player, bit 1 = make the starved G in round 1 */
static void *player(void *arg)
{
	int me = (int)(intptr_t)arg & 1;
	for (;;) {
		while (atomic_load(&turn) != me && !atomic_load(&stop))
			bb_sema_park(&pingaddr[me], not_my_turn, arg, waitReasonSema, 0, NULL, NULL);
		if (atomic_load(&stop))
			break;
		long r = atomic_fetch_add(&rounds, 1) + 1;
		if (atomic_load(&cflag) || r >= PING_LIMIT)
			atomic_store(&stop, 1);
		if (r == 1 && ((intptr_t)arg & 2)) {
			/* in runnext now; our wake below kicks it to the ring */
			bb_gattr attr = {.guardsize = 4096};
			int err;
			ring_c = bb_newproc(starved, NULL, &attr, &err);
			if (ring_c == NULL)
				atomic_store(&spawn_failed, 1);
		}
		atomic_store(&turn, 1 - me);
		bb_sema_wake(&pingaddr[1 - me], 1); /* runnext of our P */
	}
	return NULL;
}

static void check_not_starved(const char *where)
{
	long at = atomic_load(&rounds_at_c);
	cr_assert(at >= 0 && at < PING_LIMIT,
		  "a G in the %s ran only after %ld ping-pong rounds (the pair stopped at %d): "
		  "two Gs readying each other through runnext starve it",
		  where, at, PING_LIMIT);
}

Test(gstate, runnext_pingpong_does_not_starve_global_queue)
{
	rt_start(1);
	bb_g *a = rt_go(player, (void *)0);
	bb_g *b = rt_go(player, (void *)1);
	bb_g *c = rt_go(starved, (void *)1);
	/* Start off a multiple of 61: the very first schedule must not find
	 * the global queue for free, the rule has to do it. */
	bb_allp[0]->schedtick = 1;
	rt_join(c);
	rt_join(a);
	rt_join(b);
	check_not_starved("global run queue");
}

Test(gstate, runnext_pingpong_does_not_starve_local_ring)
{
	rt_start(1);
	/* B is in runnext, so it runs first and parks; then A plays round 1
	 * and makes the G, which its wake of B kicks from runnext to the ring */
	bb_g *a = rt_go(player, (void *)(0 | 2));
	bb_g *b = rt_go(player, (void *)1);
	rt_join(a);
	rt_join(b);
	cr_assert_not(atomic_load(&spawn_failed), "bb_newproc failed on a G");
	cr_assert_not_null(ring_c);
	rt_join(ring_c);
	check_not_starved("local run queue");
}

/* ---- fairness: bb_gosched shares the P among runnable Gs ---- */

#define NYIELDERS 4
#define NYIELDS 1000
static _Atomic int yields[NYIELDERS];
static _Atomic int unfair; /* times a G had twice the turns of another */

static void *yielder(void *arg)
{
	int me = (int)(intptr_t)arg;
	for (int k = 0; k < NYIELDS; k++) {
		/* Go's rule takes one G from the global queue every 61 ticks,
		 * ahead of the local ring, so the order drifts a little; but
		 * nobody may get twice the turns of another */
		for (int j = 0; j < NYIELDERS; j++)
			if (j != me && 2 * atomic_load(&yields[j]) + 4 < k)
				atomic_fetch_add(&unfair, 1);
		atomic_store(&yields[me], k + 1);
		bb_gosched();
	}
	return NULL;
}

static _Atomic int waited_flag;
static _Atomic long waited_yields = -1;

static void *waiter(void *arg)
{
	long i;
	for (i = 0; i < 100000 && !atomic_load(&waited_flag); i++)
		bb_gosched();
	atomic_store(&waited_yields, i);
	return NULL;
}

static void *setter(void *arg)
{
	atomic_store(&waited_flag, 1);
	return NULL;
}

Test(gstate, gosched_lets_others_run)
{
	rt_start(1);
	/* the setter is queued first and the waiter is in runnext: the waiter
	 * runs first and only its yields can let the setter in */
	bb_g *s = rt_go(setter, NULL);
	bb_g *w = rt_go(waiter, NULL);
	rt_join(w);
	rt_join(s);
	long n = atomic_load(&waited_yields);
	cr_assert(n >= 0 && n < 100, "the waiter yielded %ld times before the setter ran", n);

	bb_g *y[NYIELDERS];
	for (int i = 0; i < NYIELDERS; i++)
		y[i] = rt_go(yielder, (void *)(intptr_t)i);
	for (int i = 0; i < NYIELDERS; i++)
		rt_join(y[i]);
	for (int i = 0; i < NYIELDERS; i++)
		cr_assert_eq(atomic_load(&yields[i]), NYIELDS);
	cr_assert_eq(atomic_load(&unfair), 0,
		     "%d times a yielding G had twice the turns of another", atomic_load(&unfair));
}

/* ---- __thread and errno belong to the G ---- */

static __thread int tv = 42;
static _Atomic int tls_bad_init, tls_bad_later, errno_bad;

static void *tls_user(void *arg)
{
	int me = (int)(intptr_t)arg;
	if (tv != 42)
		atomic_fetch_add(&tls_bad_init, 1); /* fresh or reused block: initial image */
	tv = me;
	errno = me;
	for (int k = 0; k < 200; k++) {
		bb_gosched();
		if (tv != me)
			atomic_fetch_add(&tls_bad_later, 1);
		if (errno != me)
			atomic_fetch_add(&errno_bad, 1);
		tv = me; /* a write after a possible move between Ms */
	}
	return (void *)(intptr_t)(tv * 2);
}

Test(gstate, thread_locals_are_per_g)
{
	rt_start(2);
	tv = 7;
	enum { N = 16 };
	for (int round = 0; round < 3; round++) { /* rounds 2 and 3 reuse dead Gs */
		bb_g *gs[N];
		for (int i = 0; i < N; i++)
			gs[i] = rt_go(tls_user, (void *)(intptr_t)(1000 * round + i + 1));
		for (int i = 0; i < N; i++)
			cr_assert_eq(rt_join(gs[i]), (void *)(intptr_t)(2 * (1000 * round + i + 1)));
	}
	cr_assert_eq(atomic_load(&tls_bad_init), 0, "%d Gs started with another G's __thread",
		     atomic_load(&tls_bad_init));
	cr_assert_eq(atomic_load(&tls_bad_later), 0, "%d times a G saw another G's __thread",
		     atomic_load(&tls_bad_later));
	cr_assert_eq(atomic_load(&errno_bad), 0, "%d times a G saw another G's errno",
		     atomic_load(&errno_bad));
	cr_assert_eq(tv, 7, "G1's own __thread was overwritten");
}

/* ---- switching straight from G to G (bb_gswitch) ----
 *
 * A G that yields, parks or exits while its P has a next G of its own
 * switches to that G directly, not through g0. These run on one P, so the
 * next G is always the P's own. */

/* a wait whose unlock function says "do not wait": the G runs on at once,
 * and the G the switch had already made current goes back in front */
static _Atomic int other_ran;
static _Atomic uint32_t status_in_unlockf;
static bb_g *_Atomic refused_g;

static bool refuse_wait(bb_g *gp, void *arg)
{
	(void)arg;
	atomic_store(&status_in_unlockf, atomic_load(&gp->status));
	atomic_store(&refused_g, gp);
	return false;
}

static void *mark_ran(void *arg)
{
	(void)arg;
	atomic_fetch_add(&other_ran, 1);
	return NULL;
}

Test(gstate, park_refused_by_unlockf_runs_on)
{
	rt_start(1);
	for (int round = 0; round < 100; round++) {
		atomic_store(&other_ran, 0);
		bb_g *o = rt_go(mark_ran, NULL); /* queued: the target of the switch */
		bb_gopark(refuse_wait, NULL, waitReasonZero);
		bb_g *self = bb_getg();
		cr_assert_eq(atomic_load(&refused_g), self, "unlockf got another G");
		cr_assert_eq(atomic_load(&status_in_unlockf), Gwaiting,
			     "the G was not waiting when unlockf ran");
		cr_assert_eq(atomic_load(&self->status), Grunning);
		cr_assert_eq(bb_getm()->curg, self);
		cr_assert_eq(atomic_load(&other_ran), 0,
			     "the other G ran although the park was refused");
		cr_assert_eq(atomic_load(&o->status), Grunnable);
		rt_join(o);
		cr_assert_eq(atomic_load(&other_ran), 1);
	}
}

/* Each G keeps its own rounding modes (MXCSR and x87 control word) across
 * switches: the direct switch loads them only when they differ. */
#define FP_ROUNDS 2000
static _Atomic int fp_bad;

static void *fp_keeper(void *arg)
{
	int mode = (int)(intptr_t)arg;
	uint32_t mx;
	uint16_t cw;
	__asm__ volatile("stmxcsr %0" : "=m"(mx));
	__asm__ volatile("fnstcw %0" : "=m"(cw));
	/* rounding control: MXCSR bits 13-14, x87 control word bits 10-11 */
	uint32_t want_mx = (mx & ~0x6000u) | ((uint32_t)mode << 13);
	uint16_t want_cw = (uint16_t)((cw & ~0xc00u) | ((unsigned)mode << 10));
	__asm__ volatile("ldmxcsr %0" ::"m"(want_mx));
	__asm__ volatile("fldcw %0" ::"m"(want_cw));
	for (int i = 0; i < FP_ROUNDS; i++) {
		bb_gosched();
		__asm__ volatile("stmxcsr %0" : "=m"(mx));
		__asm__ volatile("fnstcw %0" : "=m"(cw));
		if (mx != want_mx || cw != want_cw)
			atomic_fetch_add(&fp_bad, 1);
	}
	return NULL;
}

Test(gstate, rounding_modes_are_per_g_across_switches)
{
	rt_start(1);
	bb_g *g[8];
	for (int i = 0; i < 8; i++)
		g[i] = rt_go(fp_keeper, (void *)(intptr_t)(i % 4)); /* 2 Gs per mode */
	for (int i = 0; i < 8; i++)
		rt_join(g[i]);
	cr_assert_eq(atomic_load(&fp_bad), 0, "%d times a G found another G's rounding mode",
		     atomic_load(&fp_bad));
}

/* Each G is charged the CPU time of its own stints (runtime/cpuclock.c):
 * a G that burns BURN_MS while the test's G only yields gets the time,
 * and the two together get no more than their OS thread spent. */
#define BURN_MS 30
static _Atomic int burnt, read_done;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *burner(void *arg)
{
	(void)arg;
	uint64_t t0 = thread_cpu_ns();
	volatile unsigned long x = 0;
	while (thread_cpu_ns() - t0 < BURN_MS * 1000000ull)
		for (int i = 0; i < 10000; i++)
			x += (unsigned long)i;
	atomic_store(&burnt, 1);
	while (!atomic_load(&read_done))
		bb_gosched();
	return NULL;
}

Test(gstate, cpu_time_goes_to_the_g_that_ran)
{
	rt_start(1);
	cr_assert(bb_cpuclock_enable());
	bb_g *self = bb_getg();
	uint64_t m0 = thread_cpu_ns(), self0 = bb_cpuclock_read(self);
	bb_g *b = rt_go(burner, NULL);
	while (!atomic_load(&burnt))
		bb_gosched();
	uint64_t vb = bb_cpuclock_read(b), vs = bb_cpuclock_read(self) - self0;
	uint64_t m1 = thread_cpu_ns();
	atomic_store(&read_done, 1);
	rt_join(b);
	cr_assert_geq(vb, (BURN_MS - 5) * 1000000ull, "the burner was charged %llu ns",
		      (unsigned long long)vb);
	cr_assert_lt(vs, 10 * 1000000ull, "the yielding G was charged %llu ns",
		     (unsigned long long)vs);
	cr_assert_leq(vb + vs, m1 - m0, "charged %llu ns, the OS thread spent %llu",
		      (unsigned long long)(vb + vs), (unsigned long long)(m1 - m0));
}
