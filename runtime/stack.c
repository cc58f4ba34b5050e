/*
 * stack.c — G stacks: mmap'ed with a guard page below, reserved but not
 * touched (MAP_NORESERVE), so an 8 MiB default costs only the pages a thread
 * really uses. A fault in a guard page is reported with the thread and its
 * stack bounds before the process dies with SIGSEGV, as it would natively.
 *
 * Never called on a G's stack for that G's own stack (g0 frees stacks).
 */
#include "runtime.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096ul
#define BB_STACK_SWAP_AFTER 4
#define ALTSTACK_SIZE BB_ALTSTACK_SIZE

static size_t default_stacksize;
static struct sigaction prev_segv;

size_t bb_default_stacksize(void)
{
	if (default_stacksize == 0) {
		struct rlimit rl;
		size_t sz = 8ul << 20; /* NPTL's fallback (ARCH_STACK_DEFAULT_SIZE is 32 MiB
					  only when RLIMIT_STACK is unlimited) */
		if (getrlimit(RLIMIT_STACK, &rl) == 0) {
			if (rl.rlim_cur == RLIM_INFINITY)
				sz = 32ul << 20;
			else if (rl.rlim_cur >= 16384)
				sz = rl.rlim_cur;
		}
		default_stacksize = (sz + PAGE - 1) & ~(PAGE - 1);
	}
	return default_stacksize;
}

/* Stacks are carved from chunks of up to STACK_CHUNK made at once: one
 * mmap, then every guard in a row while no thread runs on the chunk yet. A
 * burst of thread creation then makes no system call for 15 stacks in 16
 * (a separate mapping and guard cost about 3 us here, a guard in a chunk
 * half that: the guard shares its page-table page with the stack below),
 * and the first faults on a new stack never wait behind a split of the
 * mapping they are in. Each stack is still unmapped on its own (munmap
 * takes any page range). One chunk is open for the default size and one
 * for another size (a program that sets its own size, as Rust's threads
 * do, asks for one): the size that finds that chunk used up takes it over,
 * and a third size meanwhile maps its stacks alone. A chunk takes at most
 * STACK_CHUNK_SPAN of address space, and a stack bigger than half of it is
 * mapped alone. */
#define STACK_CHUNK 16
#define STACK_CHUNK_SPAN (256ul << 20)
static bb_lock chunklock;
struct chunk {
	size_t unit, guard; /* each stack's mapping and its guard */
	uintptr_t next, end;
};
static struct chunk chunks[2]; /* [0] the default size, [1] another */

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102 /* Linux 6.13 */
#endif
static _Atomic bool no_guard_madvise;

/* A guard of len bytes at p. Where the kernel has guard regions
 * (MADV_GUARD_INSTALL), a marker in the page table: the mapping stays one
 * VMA (no split per stack, so no vm.max_map_count limit near 32,000
 * threads as natively), and the page-table page it takes is the one the
 * stack below already needs for its top. Otherwise PROT_NONE, as NPTL.
 * Either way a touch gets SIGSEGV, and the guard survives MADV_DONTNEED. */
static int make_guard(void *p, size_t len)
{
	if (!atomic_load_explicit(&no_guard_madvise, memory_order_relaxed)) {
		if (bb_sys(SYS_madvise, p, len, MADV_GUARD_INSTALL) == 0)
			return 0;
		atomic_store_explicit(&no_guard_madvise, true, memory_order_relaxed);
	}
	return mprotect(p, len, PROT_NONE);
}

static void *map_one(size_t total, size_t guard)
{
	void *p = mmap(NULL, total, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (p != MAP_FAILED && guard && make_guard(p, guard) != 0) {
		munmap(p, total);
		p = MAP_FAILED;
	}
	return p;
}

/* a new chunk of stacks of total bytes each into ck (chunklock held):
 * false if not even its first could be mapped */
static bool chunk_refill(struct chunk *ck, size_t total, size_t guard)
{
	size_t n = STACK_CHUNK_SPAN / total;
	if (n > STACK_CHUNK)
		n = STACK_CHUNK;
	char *c = map_one(total * n, guard);
	if (c == MAP_FAILED)
		return false;
	size_t i = guard ? 1 : n; /* (the first's guard map_one made) */
	for (; i < n; i++)
		if (make_guard(c + i * total, guard) != 0)
			break;
	if (i < n) /* the stacks whose guards are in place */
		munmap(c + i * total, (n - i) * total);
	ck->unit = total;
	ck->guard = guard;
	ck->next = (uintptr_t)c;
	ck->end = ck->next + i * total;
	return true;
}

static void *map_stack(size_t total, size_t guard)
{
	if (total > STACK_CHUNK_SPAN / 2)
		return map_one(total, guard);
	bool dflt = total == bb_default_stacksize() + PAGE && guard == PAGE;
	struct chunk *ck = &chunks[dflt ? 0 : 1];
	void *p = NULL;
	bb_lock_acquire(&chunklock);
	bool mine = ck->unit == total && ck->guard == guard;
	/* a chunk of another size with stacks left keeps its slot: this stack
	 * is mapped alone (two sizes in turn must not remap a chunk each) */
	if ((ck->next != ck->end && mine) || (ck->next == ck->end && chunk_refill(ck, total, guard))) {
		p = (void *)ck->next;
		ck->next += total;
	}
	bb_lock_release(&chunklock);
	return p ? p : map_one(total, guard);
}

/* another thread may have held chunklock at the fork, mid-update: the child
 * starts chunks of its own (the parent's rest is only address space) */
void bb_stack_forkchild(void)
{
	/* (stores only where needed: each copies a page shared with the parent) */
	if (atomic_load(&chunklock.key))
		atomic_store(&chunklock.key, 0);
	for (int i = 0; i < 2; i++)
		if (chunks[i].next || chunks[i].end)
			chunks[i] = (struct chunk){0};
}

/* A stack of size bytes above a guard. with_tcb: the G's TCB and static
 * TLS go at the top of the mapping, as NPTL lays out a thread (one
 * mapping, one page fault for the TCB and the first stack frames, no
 * malloc); gp->tcb is set and gp->unit_tcb marks it as the stack's. */
int bb_stackalloc(bb_g *gp, size_t size, size_t guard, bool with_tcb)
{
	size = (size + PAGE - 1) & ~(PAGE - 1);
	guard = (guard + PAGE - 1) & ~(PAGE - 1);
	size_t total = size + guard;
	void *p = map_stack(total, guard);
	if (p == MAP_FAILED)
		return -1;
	uintptr_t top = (uintptr_t)p + total, hi = top;
	gp->unit_tcb = false;
	if (with_tcb && size >= bb_tcb_footprint() + 64 * 1024) {
		uintptr_t tls_lo;
		void *tcb = bb_tcb_alloc_below(top, &tls_lo);
		if (tcb == NULL) {
			munmap(p, total);
			return -1;
		}
		hi = tls_lo & ~(uintptr_t)63;
		gp->tcb = tcb;
		gp->unit_tcb = true;
	}
	gp->stack_map = p;
	gp->stack_mapsize = total;
	gp->guardsize = guard;
	gp->stack_lo = (uintptr_t)p + guard;
	gp->stack_hi = hi;
	gp->stack_top = top;
	gp->user_stack = false;
	return 0;
}

/* ---- the stack cache ----
 *
 * A thread's stack is free the moment the thread has ended, long before
 * the join that frees its pthread_t (the G). Stacks that bobbin mapped go
 * back to their P's cache then, as Go's stacks go back at goexit, together
 * with the TCB and TLS block at their top: a burst of short threads runs
 * on a few warm stacks instead of faulting in fresh memory for every
 * thread not yet joined. Any size is cached (a program that asks for its
 * own stack size, as Rust's threads do, mapped and unmapped one per
 * thread); a new thread takes one of exactly its size and guard.
 *
 * Per P: an array of BB_STACK_LOCAL_MAX entries of any sizes (the warmest
 * last), searched from the warm end; a full one gives its colder half to
 * the global cache under sched.gflock. The global cache keeps one array
 * per size (BB_STACK_CLASSES of them), so a size is found at once however
 * many stacks of other sizes wait there; a stack of a ninth size at once
 * is unmapped instead. Beyond BB_STACK_WARM_MAX stacks of its size there,
 * a spilled stack gives its pages back, all but the top few a new thread
 * touches at once. A P that finds none of its own takes up to half its
 * array's worth from there in one copy.
 *
 * The entries are arrays, not lists threaded through the stacks: a burst
 * whose threads end on one P and start on another moves every stack
 * through the global cache, and a list walk there was a chain of cache
 * (and TLB) misses, one per stack, each in the other CPU's cache, under
 * gflock (a tenth of spawn_batch's time at P=2).
 *
 * Stacks no thread has taken for a while are unmapped, as Go frees unused
 * stack spans: sysmon calls bb_stack_trim about once a second, which
 * unmaps each size's cold entries (stacks that waited since the trim
 * before: the array's bottom, which no take has reached since) and makes
 * the rest cold. A program that once had 10,000 threads, or whose sizes
 * change, keeps no memory for them 1-2 s later. Nothing reads a cached
 * stack's TCB: a G gives it up under its lock (pthread_cancel,
 * pthread_getcpuclockid and dlopen's TLS fill look there), and a thread
 * id is matched without it (bb_g_by_tid). */

/* Pages below the top few go back to the kernel, if the thread went down
 * that far: the page just below them tells (mincore, which changes
 * nothing). A MADV_DONTNEED of a range with no page in it still flushed
 * the TLBs of every CPU the process ran on, an IPI each and a VM exit
 * here: 10,000 sleepers ending spent a fifth of their CPU time releasing
 * stacks whose threads never left the top (and a mincore of the whole
 * stack, 2,048 entries, a tenth). A thread that reached deeper without
 * touching that page (a big array written at its far end only) keeps
 * those pages cached until the stack is unmapped (bb_stack_trim). */
static void stk_release(const bb_stack_unit *s)
{
	const size_t keep = 16 * 1024;
	char *lo = (char *)s->map + s->guard;
	size_t len = s->hi - (uintptr_t)lo;
	unsigned char in = 1;
	/* (hi is not a page boundary: the page that holds hi - keep - 1) */
	uintptr_t below = (s->hi - keep - 1) & ~(PAGE - 1);
	if (len > keep && (mincore((void *)below, PAGE, &in) != 0 || (in & 1)))
		madvise(lo, len - keep, MADV_DONTNEED);
}

/* unmap n stacks no cache holds any more */
static void stk_unmap(const bb_stack_unit *s, int32_t n)
{
	for (int32_t i = 0; i < n; i++) {
		if (s[i].tcb)
			bb_tcb_free_below(s[i].tcb);
		munmap(s[i].map, s[i].mapsize);
	}
}

/* Take the ended gp's stack, no longer run on, into *u for the cache
 * (bb_stack_put), its TCB with it if that sits at its top: false for a
 * user's stack (pthread_attr_setstack), left alone. gp keeps its old
 * bounds for pthread_getattr_np, but owns no stack, and gp->tcb is for
 * the caller to clear (under gp->lock: pthread_cancel reads it there). */
bool bb_stack_take(bb_g *gp, bb_stack_unit *u)
{
	void *map = gp->stack_map;
	if (map == NULL || gp->user_stack)
		return false;
	gp->stack_map = NULL;
	u->map = map;
	u->tcb = gp->unit_tcb ? gp->tcb : NULL;
	u->hi = gp->stack_hi;
	u->mapsize = gp->stack_mapsize;
	u->guard = gp->guardsize;
	return true;
}

/* the global class for a size: its own, else a free one made its own
 * (create), else NULL. gflock held. */
static struct bb_stkclass *stk_class(size_t mapsize, size_t guard, bool create)
{
	struct bb_stkclass *spare = NULL;
	for (int i = 0; i < BB_STACK_CLASSES; i++) {
		struct bb_stkclass *c = &bb_sched_.stkc[i];
		if (c->n == 0) {
			if (spare == NULL)
				spare = c;
		} else if (c->mapsize == mapsize && c->guard == guard) {
			return c;
		}
	}
	if (spare == NULL || !create)
		return NULL;
	spare->mapsize = mapsize;
	spare->guard = guard;
	return spare;
}

/* room for one more entry in c: false if its array cannot grow. gflock
 * held (bobbin's allocator takes only its own lock). */
static bool stk_room(struct bb_stkclass *c)
{
	if (c->n < c->cap)
		return true;
	int32_t cap = c->cap ? 2 * c->cap : 64;
	bb_stack_unit *ent = bb_realloc(c->ent, (size_t)cap * sizeof *ent);
	if (ent == NULL)
		return false;
	c->ent = ent;
	c->cap = cap;
	return true;
}

/* Add n stacks to the global cache; the ones it does not take are packed
 * into rest (which may be s itself) and counted in the return value. warm:
 * a stack past its size's BB_STACK_WARM_MAX is left out too, for its pages
 * to be given back before it goes in. */
static int32_t stk_insert(const bb_stack_unit *s, int32_t n, bool warm, bb_stack_unit *rest)
{
	int32_t in = 0, out = 0;
	bb_lock_acquire(&bb_sched_.gflock);
	for (int32_t i = 0; i < n; i++) {
		struct bb_stkclass *c = stk_class(s[i].mapsize, s[i].guard, true);
		if (c == NULL || (warm && c->n >= BB_STACK_WARM_MAX) || !stk_room(c)) {
			rest[out++] = s[i];
			continue;
		}
		c->ent[c->n++] = s[i];
		in++;
	}
	atomic_store_explicit(&bb_sched_.nstkfree, bb_sched_.nstkfree + in, memory_order_relaxed);
	bb_lock_release(&bb_sched_.gflock);
	return out;
}

/* Give n stacks (n <= BB_STACK_LOCAL_MAX / 2) to the global cache. One
 * past its size's warm ones gives its pages back first (outside gflock,
 * no thread can take it meanwhile); one of a size there is no room for is
 * unmapped. */
static void stk_spill(const bb_stack_unit *s, int32_t n)
{
	bb_stack_unit rest[BB_STACK_LOCAL_MAX / 2];
	int32_t nrest = stk_insert(s, n, true, rest);
	for (int32_t i = 0; i < nrest; i++)
		stk_release(&rest[i]);
	if (nrest)
		nrest = stk_insert(rest, nrest, false, rest);
	stk_unmap(rest, nrest);
}

void bb_stack_put(bb_p *pp, const bb_stack_unit *u)
{
	if (pp->nstkfree == BB_STACK_LOCAL_MAX) {
		/* keep the warmer half, spill the rest */
		const int32_t half = BB_STACK_LOCAL_MAX / 2;
		stk_spill(pp->stkfree, half);
		memmove(pp->stkfree, pp->stkfree + half,
			(size_t)(BB_STACK_LOCAL_MAX - half) * sizeof *u);
		pp->nstkfree -= half;
	}
	pp->stkfree[pp->nstkfree++] = *u;
	pp->stkputs++;
}

/* the warmest entry of pp's cache of mapsize and guard, or -1 */
static int32_t stk_local_find(const bb_p *pp, size_t mapsize, size_t guard)
{
	int32_t i = pp->nstkfree - 1;
	while (i >= 0 && (pp->stkfree[i].mapsize != mapsize || pp->stkfree[i].guard != guard))
		i--;
	return i;
}

/* gp runs on the cached stack s (with the TCB at its top if it has one) */
static void stk_assign(bb_g *gp, const bb_stack_unit *s)
{
	gp->stack_map = s->map;
	gp->stack_mapsize = s->mapsize;
	gp->guardsize = s->guard;
	gp->stack_lo = (uintptr_t)s->map + s->guard;
	gp->stack_hi = s->hi;
	gp->stack_top = (uintptr_t)s->map + s->mapsize;
	gp->user_stack = false;
	gp->unit_tcb = s->tcb != NULL;
	if (s->tcb)
		gp->tcb = s->tcb;
}

/* A cached stack of mapsize bytes with a guard of guard bytes for gp, with
 * the TCB at its top if it has one (gp->tcb, gp->unit_tcb): false if none.
 * From the global cache, up to half a P's worth of them come along. */
bool bb_stack_get(bb_p *pp, bb_g *gp, size_t mapsize, size_t guard)
{
	bb_stack_unit s;
	int32_t i = stk_local_find(pp, mapsize, guard);
	if (i >= 0) {
		s = pp->stkfree[i];
		pp->nstkfree--;
		memmove(&pp->stkfree[i], &pp->stkfree[i + 1], (size_t)(pp->nstkfree - i) * sizeof s);
	} else {
		if (atomic_load_explicit(&bb_sched_.nstkfree, memory_order_relaxed) == 0)
			return false;
		int32_t take = 0;
		bb_lock_acquire(&bb_sched_.gflock);
		struct bb_stkclass *c = stk_class(mapsize, guard, false);
		if (c) {
			/* the warmest come along, as warmest in pp's array too */
			take = c->n < BB_STACK_LOCAL_MAX / 2 ? c->n : BB_STACK_LOCAL_MAX / 2;
			if (take - 1 > BB_STACK_LOCAL_MAX - pp->nstkfree)
				take = BB_STACK_LOCAL_MAX - pp->nstkfree + 1;
			int32_t lo = c->n - take;
			s = c->ent[c->n - 1];
			memcpy(&pp->stkfree[pp->nstkfree], &c->ent[lo], (size_t)(take - 1) * sizeof s);
			pp->nstkfree += take - 1;
			c->n = lo;
			if (c->ncold > lo)
				c->ncold = lo;
			atomic_store_explicit(&bb_sched_.nstkfree, bb_sched_.nstkfree - take,
					      memory_order_relaxed);
		}
		bb_lock_release(&bb_sched_.gflock);
		if (take == 0)
			return false;
	}
	stk_assign(gp, &s);
	return true;
}

/* A new G, about to run first on pp, whose TCB is not filled in yet:
 * give it pp's warmest cached stack of its size (with the TCB at its
 * top), and its own stack, never run on, to pp's cache as the coldest.
 * False: none there, it keeps its own. */
bool bb_stack_swap(bb_p *pp, bb_g *gp)
{
	if (!gp->unit_tcb || gp->user_stack || gp->stack_map == NULL)
		return false;
	/* a stack this P handed out since its last few ends is as warm */
	if (gp->stkp == pp && pp->stkputs - gp->stkputs < BB_STACK_SWAP_AFTER)
		return false;
	int32_t i = stk_local_find(pp, gp->stack_mapsize, gp->guardsize);
	if (i < 0 || pp->stkfree[i].tcb == NULL)
		return false;
	bb_stack_unit own, s = pp->stkfree[i];
	bb_stack_take(gp, &own);
	memmove(&pp->stkfree[1], &pp->stkfree[0], (size_t)i * sizeof s);
	pp->stkfree[0] = own;
	stk_assign(gp, &s);
	return true;
}

/* Unmap the global cache's stacks that no thread took since the trim
 * before, if that was BB_STACK_TRIM_NS ago or more (sysmon, about once a
 * second); the ones spilled since wait for the next. Returns how many
 * were unmapped. A class keeps its warm entries in a new array, sized to
 * them, and the unmapping happens outside gflock. */
int32_t bb_stack_trim(int64_t now)
{
	static int64_t last;
	if (now - last < BB_STACK_TRIM_NS)
		return 0;
	last = now;
	if (atomic_load_explicit(&bb_sched_.nstkfree, memory_order_relaxed) == 0)
		return 0;
	bb_stack_unit *drop[BB_STACK_CLASSES];
	int32_t ndrop[BB_STACK_CLASSES], n = 0;
	bb_lock_acquire(&bb_sched_.gflock);
	for (int i = 0; i < BB_STACK_CLASSES; i++) {
		struct bb_stkclass *c = &bb_sched_.stkc[i];
		drop[i] = NULL;
		ndrop[i] = 0;
		if (c->ncold > 0) {
			int32_t keep = c->n - c->ncold, cap = keep ? 64 : 0;
			while (cap < keep)
				cap *= 2;
			bb_stack_unit *ent = cap ? bb_alloc((size_t)cap * sizeof *ent) : NULL;
			if (cap && ent == NULL)
				continue; /* the next trim, then */
			if (keep)
				memcpy(ent, c->ent + c->ncold, (size_t)keep * sizeof *ent);
			drop[i] = c->ent;
			ndrop[i] = c->ncold;
			n += c->ncold;
			c->ent = ent;
			c->n = keep;
			c->cap = cap;
		}
		c->ncold = c->n;
	}
	atomic_store_explicit(&bb_sched_.nstkfree, bb_sched_.nstkfree - n, memory_order_relaxed);
	bb_lock_release(&bb_sched_.gflock);
	for (int i = 0; i < BB_STACK_CLASSES; i++) {
		stk_unmap(drop[i], ndrop[i]);
		bb_free(drop[i]);
	}
	return n;
}

static void segv_handler(int sig, siginfo_t *si, void *uctx)
{
	uintptr_t addr = (uintptr_t)si->si_addr;
	bb_m *mp = bb_self_m();
	bb_g *gp = mp ? mp->curg : NULL;
	if (gp && !gp->is_main && addr < gp->stack_lo && addr + 256 * 1024 >= gp->stack_lo) {
		bb_printf("bobbin: stack overflow in thread %llu%s%s%s (G%llu): fault at %p, "
			  "stack [%p, %p) of %zu bytes, guard %zu bytes below\n",
			  (unsigned long long)gp->goid, gp->name[0] ? " \"" : "", gp->name,
			  gp->name[0] ? "\"" : "", (unsigned long long)gp->goid, (void *)addr,
			  (void *)gp->stack_lo, (void *)gp->stack_hi, gp->stack_hi - gp->stack_lo,
			  gp->guardsize);
		signal(SIGSEGV, SIG_DFL); /* returning re-executes the fault: killed by SIGSEGV */
		return;
	}
	if (prev_segv.sa_flags & SA_SIGINFO) {
		if (prev_segv.sa_sigaction) {
			prev_segv.sa_sigaction(sig, si, uctx);
			return;
		}
	} else if (prev_segv.sa_handler != SIG_DFL && prev_segv.sa_handler != SIG_IGN) {
		prev_segv.sa_handler(sig);
		return;
	}
	signal(SIGSEGV, SIG_DFL);
}

/* An action read from the kernel for SIGSEGV that is bobbin's overflow
 * report becomes the one it replaced (SIG_DFL, usually): a program that
 * installs its own handler only where it finds the default (Rust's
 * stack-overflow message) saw bobbin's and installed none */
void bb_segv_show(struct sigaction *old)
{
	if (old->sa_sigaction == segv_handler)
		*old = prev_segv;
}

/* sp NULL: bobbin's own alternate stack of the M (none if it has none) */
void bb_alt_install(bb_m *mp, void *sp, size_t size, int flags)
{
	stack_t ss = {.ss_sp = sp, .ss_size = size, .ss_flags = flags};
	if (sp == NULL) {
		ss.ss_sp = mp->altstack;
		ss.ss_size = ALTSTACK_SIZE;
		ss.ss_flags = mp->altstack ? 0 : SS_DISABLE;
	}
	/* raw: sigaltstack is interposed (shim/signal.c) */
	if (bb_sys(SYS_sigaltstack, &ss, NULL, 0) == 0)
		mp->alt_cur = sp ? sp : mp->altstack;
}

/* The alternate stacks threads installed, by address, each with the first
 * live thread that did (Gs are never freed: a thread that ended or moved to
 * another stack leaves a stale entry, which the next claim takes over).
 * bobbin's preemption signal runs on the alternate stack installed (a
 * language runtime's own stacks under the interrupted sp take no frame:
 * BEAM's Erlang stacks), so two threads may not have the same one in the
 * kernel at once: two OS threads taking the signal together wrote their
 * frames over each other there. */
#define ALT_CLAIMS 16384
#define ALT_PROBES 64
static struct alt_claim {
	void *sp;
	bb_g *owner;
} alt_claims[ALT_CLAIMS];
static bb_lock alt_claim_lock;

static bool alt_claim_live(const struct alt_claim *c)
{
	bb_g *o = c->owner;
	return o && o->alt_sp == c->sp && atomic_load_explicit(&o->status, memory_order_relaxed) != Gdead;
}

bool bb_alt_claim(bb_g *gp, void *sp)
{
	uintptr_t h = ((uintptr_t)sp >> 12) * 0x9e3779b97f4a7c15ull;
	bool mine = false;
	bb_lock_acquire(&alt_claim_lock);
	struct alt_claim *free_slot = NULL;
	for (int i = 0; i < ALT_PROBES; i++) {
		struct alt_claim *c = &alt_claims[(h + (uintptr_t)i) % ALT_CLAIMS];
		if (c->sp == sp) {
			if (c->owner == gp || !alt_claim_live(c)) {
				c->owner = gp;
				mine = true;
			}
			free_slot = NULL;
			goto out;
		}
		if (free_slot == NULL && (c->sp == NULL || !alt_claim_live(c)))
			free_slot = c;
	}
	if (free_slot) { /* (none free nearby: shared, to be safe) */
		free_slot->sp = sp;
		free_slot->owner = gp;
		mine = true;
	}
out:
	bb_lock_release(&alt_claim_lock);
	return mine;
}

/* Per M: an alternate signal stack, so a G that ran out of stack can still
 * be reported. The handler is installed once (mp == the first M). */
void bb_stack_signal_init(bb_m *mp)
{
	if (mp->altstack == NULL) /* (an ended M's record keeps its own) */
		mp->altstack = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mp->altstack == MAP_FAILED) {
		mp->altstack = NULL;
		mp->alt_cur = NULL;
		return;
	}
	stack_t ss = {.ss_sp = mp->altstack, .ss_size = ALTSTACK_SIZE, .ss_flags = 0};
	bb_sys(SYS_sigaltstack, &ss, NULL, 0);
	mp->alt_cur = mp->altstack;
	if (mp->id == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = segv_handler;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		bb_real_sigaction(SIGSEGV, &sa, &prev_segv);
	}
}
