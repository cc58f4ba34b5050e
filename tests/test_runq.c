/*
 * test_runq.c — the per-P ring, runnext, the global run queue and stealing
 * (runtime/runq.c), without running the scheduler.
 *
 * Built against the runtime with BB_TEST_SIZES, so BB_RUNQ_LEN is 8 and the
 * overflow path is reached with a handful of Gs. The Gs are bare calloc'd
 * structs with distinct goids; nothing here switches stacks. Each Criterion
 * test runs in its own process, so bb_sched_ starts zeroed in every test.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define LEN ((int)BB_RUNQ_LEN)

_Static_assert(BB_RUNQ_LEN == 8, "tests are written for the BB_TEST_SIZES ring");

static bb_p *newp(int32_t id)
{
	size_t sz = (sizeof(bb_p) + 63) & ~(size_t)63;
	bb_p *pp = aligned_alloc(64, sz);
	cr_assert_not_null(pp);
	memset(pp, 0, sz);
	bb_p_init(pp, id);
	return pp;
}

/* n fake Gs with goids 1..n, in one array so a G's index is goid - 1 */
static bb_g **newgs(int n)
{
	bb_g **v = calloc((size_t)n, sizeof *v);
	cr_assert_not_null(v);
	for (int i = 0; i < n; i++) {
		v[i] = calloc(1, sizeof(bb_g));
		cr_assert_not_null(v[i]);
		v[i]->goid = (uint64_t)i + 1;
		v[i]->magic = BB_G_MAGIC;
	}
	return v;
}

static void expect_get(bb_p *pp, bb_g *want, bool want_inherit)
{
	bool inherit = !want_inherit;
	bb_g *gp = bb_runqget(pp, &inherit);
	cr_assert_eq(gp, want, "runqget gave G%llu, want G%llu",
		     gp ? (unsigned long long)gp->goid : 0ULL,
		     want ? (unsigned long long)want->goid : 0ULL);
	if (want)
		cr_assert_eq(inherit, want_inherit, "inherit_time for G%llu is %d",
			     (unsigned long long)want->goid, inherit);
}

/* the global queue, walked under sched.lock into v; returns its length */
static int globlist(bb_g **v, int max)
{
	int n = 0;
	bb_lock_acquire(&bb_sched_.lock);
	for (bb_g *gp = bb_sched_.runqhead; gp && n < max; gp = gp->schedlink)
		v[n++] = gp;
	if (n > 0)
		cr_assert_eq(bb_sched_.runqtail, v[n - 1], "global runqtail is not the last G");
	bb_lock_release(&bb_sched_.lock);
	return n;
}

static void setup(void)
{
	bb_gomaxprocs = 4;
}

TestSuite(runq, .init = setup, .timeout = 60); /* a hang is a failure */

Test(runq, fifo_order)
{
	bb_p *pp = newp(0);
	bb_g **g = newgs(LEN);
	cr_assert(bb_runqempty(pp));
	for (int i = 0; i < 5; i++)
		bb_runqput(pp, g[i], false);
	cr_assert_eq(bb_runqlen(pp), 5);
	cr_assert_not(bb_runqempty(pp));
	for (int i = 0; i < 5; i++)
		expect_get(pp, g[i], false);
	expect_get(pp, NULL, false);
	cr_assert(bb_runqempty(pp));
	cr_assert_eq(bb_sched_.runqsize, 0, "nothing may reach the global queue");
}

/* head and tail run past the ring size many times: order must hold */
Test(runq, fifo_across_wraparound)
{
	bb_p *pp = newp(0);
	bb_g **g = newgs(1000);
	int in = 0, out = 0;
	for (int round = 0; round < 300; round++) {
		for (int k = 0; k < 3 && in < 1000 && in - out < LEN; k++)
			bb_runqput(pp, g[in++], false);
		for (int k = 0; k < 2 && out < in; k++)
			expect_get(pp, g[out++], false);
	}
	while (out < in)
		expect_get(pp, g[out++], false);
	cr_assert_gt(atomic_load(&pp->runqtail), 10 * BB_RUNQ_LEN, "the ring did not wrap");
	cr_assert_eq(bb_sched_.runqsize, 0);
}

Test(runq, runnext_first_and_kicks_old_runnext_to_tail)
{
	bb_p *pp = newp(0);
	bb_g **g = newgs(6);
	bb_runqput(pp, g[0], false);
	bb_runqput(pp, g[1], false);
	bb_runqput(pp, g[2], true);  /* runnext = G3 */
	cr_assert_eq(atomic_load(&pp->runnext), g[2]);
	cr_assert_eq(bb_runqlen(pp), 2, "runnext is not in the ring");
	bb_runqput(pp, g[3], true);  /* runnext = G4, G3 goes to the ring's tail */
	cr_assert_eq(atomic_load(&pp->runnext), g[3]);
	cr_assert_eq(bb_runqlen(pp), 3);
	bb_runqput(pp, g[4], false);
	expect_get(pp, g[3], true);  /* runnext first, inheriting the time slice */
	expect_get(pp, g[0], false);
	expect_get(pp, g[1], false);
	expect_get(pp, g[2], false); /* the kicked G, behind those already queued */
	expect_get(pp, g[4], false);
	expect_get(pp, NULL, false);

	/* runnext alone: still inherits */
	bb_runqput(pp, g[5], true);
	cr_assert_not(bb_runqempty(pp), "a P with only runnext is not empty");
	cr_assert_eq(bb_runqlen(pp), 0);
	expect_get(pp, g[5], true);
	cr_assert(bb_runqempty(pp));
}

/* Checks that every G of g[0..n) is in exactly one of the places given */
static void expect_each_once(bb_g **g, int n, bb_g **places, int nplaces)
{
	int *seen = calloc((size_t)n, sizeof *seen);
	for (int i = 0; i < nplaces; i++) {
		cr_assert(places[i]->goid >= 1 && places[i]->goid <= (uint64_t)n);
		seen[places[i]->goid - 1]++;
	}
	for (int i = 0; i < n; i++)
		cr_assert_eq(seen[i], 1, "G%d is queued %d times", i + 1, seen[i]);
	free(seen);
}

Test(runq, overflow_moves_half_plus_new_to_global)
{
	bb_p *pp = newp(0);
	bb_g **g = newgs(LEN + 1);
	for (int i = 0; i < LEN; i++)
		bb_runqput(pp, g[i], false);
	cr_assert_eq(bb_runqlen(pp), (uint32_t)LEN, "the ring holds LEN");
	cr_assert_eq(bb_sched_.runqsize, 0);
	bb_runqput(pp, g[LEN], false);

	cr_assert_eq(bb_sched_.runqsize, LEN / 2 + 1);
	cr_assert_eq(bb_runqlen(pp), (uint32_t)LEN / 2);
	bb_g *glob[2 * LEN];
	int ng = globlist(glob, 2 * LEN);
	cr_assert_eq(ng, LEN / 2 + 1, "list length %d disagrees with runqsize", ng);
	/* the oldest half, in order, then the new G */
	for (int i = 0; i < LEN / 2; i++)
		cr_assert_eq(glob[i], g[i], "global[%d] is G%llu", i,
			     (unsigned long long)glob[i]->goid);
	cr_assert_eq(glob[LEN / 2], g[LEN]);

	bb_g *all[2 * LEN];
	int n = 0;
	for (int i = 0; i < ng; i++)
		all[n++] = glob[i];
	bool inherit;
	for (bb_g *gp; (gp = bb_runqget(pp, &inherit)) != NULL;)
		all[n++] = gp;
	cr_assert_eq(n, LEN + 1);
	expect_each_once(g, LEN + 1, all, n);
	cr_assert_eq(glob[0]->schedlink, glob[1]);
	cr_assert_null(glob[ng - 1]->schedlink);
}

/* a full ring plus runnext: kicking runnext out overflows with the old runnext */
Test(runq, overflow_through_runnext)
{
	bb_p *pp = newp(0);
	bb_g **g = newgs(LEN + 2);
	for (int i = 0; i < LEN; i++)
		bb_runqput(pp, g[i], false);
	bb_runqput(pp, g[LEN], true); /* runnext was empty: no overflow yet */
	cr_assert_eq(bb_sched_.runqsize, 0);
	bb_runqput(pp, g[LEN + 1], true);
	cr_assert_eq(atomic_load(&pp->runnext), g[LEN + 1]);
	cr_assert_eq(bb_sched_.runqsize, LEN / 2 + 1);
	bb_g *glob[2 * LEN];
	int ng = globlist(glob, 2 * LEN);
	cr_assert_eq(ng, LEN / 2 + 1);
	cr_assert_eq(glob[ng - 1], g[LEN], "the kicked runnext goes last");

	bb_g *all[2 * LEN];
	int n = 0;
	for (int i = 0; i < ng; i++)
		all[n++] = glob[i];
	expect_get(pp, g[LEN + 1], true);
	all[n++] = g[LEN + 1];
	bool inherit;
	for (bb_g *gp; (gp = bb_runqget(pp, &inherit)) != NULL;)
		all[n++] = gp;
	expect_each_once(g, LEN + 2, all, n);
}

/* put n Gs on the global queue, take a batch, and check the batch rule */
static void check_globrunqget(int32_t procs, int n, int32_t max, int want_batch)
{
	bb_gomaxprocs = procs;
	bb_p *pp = newp(0);
	bb_g **g = newgs(n);
	bb_lock_acquire(&bb_sched_.lock);
	for (int i = 0; i < n; i++)
		bb_globrunqput(g[i]);
	cr_assert_eq(bb_sched_.runqsize, n);
	bb_g *gp = bb_globrunqget(pp, max);
	bb_lock_release(&bb_sched_.lock);

	cr_assert_eq(gp, g[0], "globrunqget returns the oldest G");
	cr_assert_null(gp->schedlink);
	cr_assert_eq(bb_runqlen(pp), (uint32_t)(want_batch - 1),
		     "procs=%d size=%d max=%d: %u Gs went to the ring, want %d", procs, n, max,
		     bb_runqlen(pp), want_batch - 1);
	cr_assert_eq(bb_sched_.runqsize, n - want_batch);
	for (int i = 1; i < want_batch; i++)
		expect_get(pp, g[i], false);
	bb_g *rest[64];
	int nr = globlist(rest, 64);
	cr_assert_eq(nr, n - want_batch);
	for (int i = 0; i < nr; i++)
		cr_assert_eq(rest[i], g[want_batch + i]);
	if (nr == 0)
		cr_assert(bb_sched_.runqhead == NULL && bb_sched_.runqtail == NULL);
	/* empty the global queue for the next case */
	bb_lock_acquire(&bb_sched_.lock);
	bb_sched_.runqhead = bb_sched_.runqtail = NULL;
	atomic_store(&bb_sched_.runqsize, 0);
	bb_lock_release(&bb_sched_.lock);
}

/* n = size/gomaxprocs + 1, capped by size, by max, by half a ring */
Test(runq, globrunqget_batch_rule)
{
	check_globrunqget(4, 6, 0, 2);        /* 6/4 + 1 */
	check_globrunqget(4, 8, 0, 3);        /* 8/4 + 1 */
	check_globrunqget(1, 3, 0, 3);        /* 3/1 + 1 = 4 > size */
	check_globrunqget(1, 3, 1, 1);        /* max = 1: the schedtick % 61 path */
	check_globrunqget(2, 5, 2, 2);        /* 5/2 + 1 = 3 > max */
	check_globrunqget(2, 20, 0, LEN / 2); /* 20/2 + 1 = 11 > half a ring */
	check_globrunqget(1, 1, 0, 1);
}

Test(runq, globrunqget_empty)
{
	bb_p *pp = newp(0);
	bb_lock_acquire(&bb_sched_.lock);
	bb_g *gp = bb_globrunqget(pp, 0);
	bb_lock_release(&bb_sched_.lock);
	cr_assert_null(gp);
	cr_assert(bb_runqempty(pp));
}

Test(runq, steal_takes_half_rounded_up_and_returns_one)
{
	bb_p *victim = newp(0), *thief = newp(1);
	bb_g **g = newgs(5);
	for (int i = 0; i < 5; i++)
		bb_runqput(victim, g[i], false);
	bb_g *gp = bb_runqsteal(thief, victim, false);
	/* 5 - 5/2 = 3 taken: G1, G2 into the thief's ring, G3 returned */
	cr_assert_eq(gp, g[2], "steal returned G%llu", gp ? (unsigned long long)gp->goid : 0ULL);
	cr_assert_eq(bb_runqlen(thief), 2);
	cr_assert_eq(bb_runqlen(victim), 2);
	expect_get(thief, g[0], false);
	expect_get(thief, g[1], false);
	expect_get(thief, NULL, false);
	expect_get(victim, g[3], false);
	expect_get(victim, g[4], false);

	/* one G: it is returned, nothing is left behind */
	bb_runqput(victim, g[0], false);
	cr_assert_eq(bb_runqsteal(thief, victim, false), g[0]);
	cr_assert(bb_runqempty(thief));
	cr_assert(bb_runqempty(victim));
	cr_assert_null(bb_runqsteal(thief, victim, true), "nothing to steal");
}

Test(runq, steal_full_ring)
{
	bb_p *victim = newp(0), *thief = newp(1);
	bb_g **g = newgs(LEN);
	for (int i = 0; i < LEN; i++)
		bb_runqput(victim, g[i], false);
	bb_g *gp = bb_runqsteal(thief, victim, false);
	cr_assert_eq(gp, g[LEN / 2 - 1]);
	cr_assert_eq(bb_runqlen(thief), (uint32_t)LEN / 2 - 1);
	cr_assert_eq(bb_runqlen(victim), (uint32_t)LEN / 2);
	for (int i = 0; i < LEN / 2 - 1; i++)
		expect_get(thief, g[i], false);
	for (int i = LEN / 2; i < LEN; i++)
		expect_get(victim, g[i], false);
}

Test(runq, steal_runnext_only_when_allowed_and_ring_empty)
{
	bb_p *victim = newp(0), *thief = newp(1);
	bb_g **g = newgs(3);
	atomic_store(&victim->status, Pidle); /* no 3 µs courtesy sleep */
	bb_runqput(victim, g[0], true);
	cr_assert_null(bb_runqsteal(thief, victim, false), "runnext stolen without leave");
	cr_assert_eq(atomic_load(&victim->runnext), g[0]);

	/* a non-empty ring protects runnext even with steal_runnext */
	bb_runqput(victim, g[1], false);
	cr_assert_eq(bb_runqsteal(thief, victim, true), g[1]);
	cr_assert_eq(atomic_load(&victim->runnext), g[0]);

	cr_assert_eq(bb_runqsteal(thief, victim, true), g[0]);
	cr_assert_null(atomic_load(&victim->runnext));
	cr_assert(bb_runqempty(victim));
	cr_assert(bb_runqempty(thief), "the stolen runnext is returned, not queued");

	/* a running victim's runnext is still taken, after the pause */
	atomic_store(&victim->status, Prunning);
	bb_runqput(victim, g[2], true);
	cr_assert_eq(bb_runqsteal(thief, victim, true), g[2]);
	cr_assert(bb_runqempty(victim));
}

/* ---- concurrent steal: one owner, three thieves, every G taken once ---- */

#define CN 200000
#define NTHIEVES 3

static bb_g **cg;
static _Atomic uint32_t *taken; /* per G */
static _Atomic int ntaken, nbogus;
static bb_p *owner_p;

/* runs on the test's own threads: count, never assert here */
static void take(bb_g *gp)
{
	if (gp->goid >= 1 && gp->goid <= CN)
		atomic_fetch_add(&taken[gp->goid - 1], 1);
	else
		atomic_fetch_add(&nbogus, 1);
	atomic_fetch_add(&ntaken, 1);
}

/* take from the global queue into pp (whose ring is empty), then drain pp */
static void drain(bb_p *pp)
{
	bool inherit;
	for (bb_g *gp; (gp = bb_runqget(pp, &inherit)) != NULL;)
		take(gp);
	if (atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) > 0) {
		bb_lock_acquire(&bb_sched_.lock);
		bb_g *gp = bb_globrunqget(pp, 0);
		bb_lock_release(&bb_sched_.lock);
		if (gp)
			take(gp);
		for (; (gp = bb_runqget(pp, &inherit)) != NULL;)
			take(gp);
	}
}

static void *owner(void *arg)
{
	for (int i = 0; i < CN; i++) {
		bb_runqput(owner_p, cg[i], i % 5 == 0);
		if (i % 3 == 0) {
			bool inherit;
			bb_g *gp = bb_runqget(owner_p, &inherit);
			if (gp)
				take(gp);
		}
		if (i % 1000 == 999 && bb_runqempty(owner_p))
			drain(owner_p);
	}
	while (atomic_load(&ntaken) < CN)
		drain(owner_p);
	return NULL;
}

static void *thief(void *arg)
{
	bb_p *pp = arg;
	while (atomic_load(&ntaken) < CN) {
		bb_g *gp = bb_runqsteal(pp, owner_p, true);
		if (gp)
			take(gp);
		drain(pp);
	}
	return NULL;
}

Test(runq, concurrent_steal_takes_every_g_once)
{
	cg = newgs(CN);
	taken = calloc(CN, sizeof *taken);
	owner_p = newp(0);
	atomic_store(&owner_p->status, Pidle); /* thieves take runnext at once */
	bb_p *tp[NTHIEVES];
	pthread_t th[NTHIEVES + 1];
	for (int i = 0; i < NTHIEVES; i++) {
		tp[i] = newp(i + 1);
		cr_assert_eq(pthread_create(&th[i + 1], NULL, thief, tp[i]), 0);
	}
	cr_assert_eq(pthread_create(&th[0], NULL, owner, NULL), 0);
	for (int i = 0; i <= NTHIEVES; i++)
		pthread_join(th[i], NULL);

	cr_assert_eq(atomic_load(&nbogus), 0, "Gs that were never queued came out");
	cr_assert_eq(atomic_load(&ntaken), CN);
	for (int i = 0; i < CN; i++)
		cr_assert_eq(atomic_load(&taken[i]), 1, "G%d taken %u times", i + 1,
			     atomic_load(&taken[i]));
	cr_assert(bb_runqempty(owner_p));
	for (int i = 0; i < NTHIEVES; i++)
		cr_assert(bb_runqempty(tp[i]));
	cr_assert_eq(bb_sched_.runqsize, 0);
	cr_assert_null(bb_sched_.runqhead);
}
