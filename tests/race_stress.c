/*
 * race_stress.c — the runtime's shared data structures hammered from several
 * OS threads at once, as a plain program (exit 0 pass, 1 fail), so that it
 * also runs under ThreadSanitizer: Criterion itself cannot start under TSan
 * (its inheritable arena fails to map), and G switching needs TSan fiber
 * annotations, so this test drives the structures from real threads.
 *
 *  1. run queues: one owner puts and gets on its P while thieves steal into
 *     their own Ps; every G must be taken exactly once.
 *  2. bb_lock: a counter under the lock from every thread.
 *  3. timers: threads arm timers on their own P and cancel some from other
 *     threads while others run expired ones; every timer fires or is
 *     cancelled, exactly once.
 */
#include "runtime.h"

#include <pthread.h>
#include <sys/auxv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NG 200000
#define NTHIEVES 3

static int failures;
#define CHECK(c, ...)                                        \
	do {                                                 \
		if (!(c)) {                                  \
			fprintf(stderr, "FAIL: " __VA_ARGS__); \
			fputc('\n', stderr);                 \
			failures++;                          \
		}                                            \
	} while (0)

static bb_p *newp(int id)
{
	bb_p *pp = aligned_alloc(64, (sizeof(bb_p) + 63) & ~(size_t)63);
	memset(pp, 0, sizeof *pp);
	bb_p_init(pp, id);
	atomic_store(&pp->status, Pidle); /* thieves must not usleep on it */
	return pp;
}

/* ---- 1. run queues ---- */

static bb_g *gs;
static _Atomic int *taken;
static bb_p *owner_p;
static _Atomic int owner_done;

static void take(bb_g *gp)
{
	atomic_fetch_add(&taken[gp->goid], 1);
}

static void *owner(void *arg)
{
	bool inh;
	for (int i = 0; i < NG; i++) {
		bb_runqput(owner_p, &gs[i], (i % 7) == 0);
		if (i % 3 == 0) {
			bb_g *gp = bb_runqget(owner_p, &inh);
			if (gp)
				take(gp);
		}
	}
	bb_g *gp;
	while ((gp = bb_runqget(owner_p, &inh)) != NULL)
		take(gp);
	atomic_store(&owner_done, 1);
	return NULL;
}

static void *thief(void *arg)
{
	bb_p *mine = arg;
	bool inh;
	for (;;) {
		bool done = atomic_load(&owner_done);
		bb_g *gp = bb_runqsteal(mine, owner_p, true);
		if (gp) {
			take(gp);
			while ((gp = bb_runqget(mine, &inh)) != NULL)
				take(gp);
		} else if (done) {
			break;
		}
	}
	return NULL;
}

static void test_runq(void)
{
	bb_gomaxprocs = 1 + NTHIEVES;
	gs = calloc(NG, sizeof *gs);
	taken = calloc(NG, sizeof *taken);
	for (int i = 0; i < NG; i++)
		gs[i].goid = (uint64_t)i;
	owner_p = newp(0);
	pthread_t t[NTHIEVES + 1];
	bb_p *tp[NTHIEVES];
	for (int i = 0; i < NTHIEVES; i++) {
		tp[i] = newp(i + 1);
		pthread_create(&t[i], NULL, thief, tp[i]);
	}
	pthread_create(&t[NTHIEVES], NULL, owner, NULL);
	for (int i = 0; i <= NTHIEVES; i++)
		pthread_join(t[i], NULL);
	/* overflow went to the global queue */
	bb_lock_acquire(&bb_sched_.lock);
	bb_g *gp;
	while ((gp = bb_globrunqget(owner_p, 1)) != NULL)
		take(gp);
	bb_lock_release(&bb_sched_.lock);
	int lost = 0, dup = 0;
	for (int i = 0; i < NG; i++) {
		int n = atomic_load(&taken[i]);
		lost += n == 0;
		dup += n > 1;
	}
	CHECK(lost == 0 && dup == 0, "run queues: %d Gs lost, %d taken twice", lost, dup);
}

/* ---- 2. bb_lock ---- */

static bb_lock lk;
static long counter;

static void *locker(void *arg)
{
	for (int i = 0; i < 100000; i++) {
		bb_lock_acquire(&lk);
		counter++;
		bb_lock_release(&lk);
	}
	return NULL;
}

static void test_lock(void)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, locker, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(counter == 400000, "bb_lock: counter %ld, want 400000", counter);
}

/* ---- 3. timers ---- */

#define NT 20000
#define NTT 3
static bb_timer timers[NTT][NT];
static _Atomic int fired[NTT][NT];
static _Atomic int cancelled[NTT][NT];
static bb_p *tps[NTT];

static void on_fire(void *arg, uintptr_t seq)
{
	atomic_fetch_add((_Atomic int *)arg, 1);
}

static void *timer_thread(void *arg)
{
	int me = (int)(intptr_t)arg;
	bb_m *mp = calloc(1, sizeof *mp);
	mp->self = mp;
	mp->p = tps[me];
	bb_setgsbase((uintptr_t)mp);
	int64_t now = bb_nanotime();
	for (int i = 0; i < NT; i++) {
		bb_timer *t = &timers[me][i];
		t->when = now + (i % 50) * 1000;
		t->fn = on_fire;
		t->arg = &fired[me][i];
		bb_addtimer(t);
		/* cancel a neighbour's timer now and then, from this thread */
		int o = (me + 1) % NTT;
		if (i % 5 == 0 && i > 0 && bb_deltimer(&timers[o][i - 1]))
			atomic_fetch_add(&cancelled[o][i - 1], 1);
		if (i % 64 == 0)
			for (int k = 0; k < NTT; k++)
				bb_runtimers(tps[k], bb_nanotime());
	}
	bb_setgsbase(0);
	return NULL;
}

static void test_timers(void)
{
	bb_gomaxprocs = NTT;
	bb_allp = calloc(NTT, sizeof *bb_allp);
	for (int i = 0; i < NTT; i++)
		bb_allp[i] = tps[i] = newp(i);
	pthread_t t[NTT];
	for (int i = 0; i < NTT; i++)
		pthread_create(&t[i], NULL, timer_thread, (void *)(intptr_t)i);
	for (int i = 0; i < NTT; i++)
		pthread_join(t[i], NULL);
	/* fire what is left, far in the future of all of them */
	for (int k = 0; k < NTT; k++)
		bb_runtimers(tps[k], bb_nanotime() + 1000000000);
	int bad = 0;
	for (int k = 0; k < NTT; k++)
		for (int i = 0; i < NT; i++)
			bad += atomic_load(&fired[k][i]) + atomic_load(&cancelled[k][i]) != 1;
	CHECK(bad == 0, "timers: %d fired or cancelled other than exactly once", bad);
}

int main(void)
{
	bb_have_fsgsbase = (getauxval(AT_HWCAP2) & 2) != 0; /* the timer test sets a fake M in gs */
	test_runq();
	test_lock();
	test_timers();
	if (failures) {
		fprintf(stderr, "race_stress: %d failure(s)\n", failures);
		return 1;
	}
	printf("race_stress: run queues, bb_lock and timers consistent\n");
	return 0;
}
