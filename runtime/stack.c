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
 * Per P: one LIFO list of any sizes (the warmest first), of which a new
 * thread looks at the first few; past BB_STACK_LOCAL_MAX the colder half
 * spills to the global cache under sched.gflock. The global cache keeps
 * one list pair per size (BB_STACK_CLASSES of them), so a size is found at
 * once however many stacks of other sizes wait there; a stack of a ninth
 * size at once is unmapped instead. Beyond BB_STACK_WARM_MAX stacks of its
 * size there, a spilled stack gives its pages back, all but the top few a
 * new thread touches at once.
 *
 * Stacks no thread has taken for a while are unmapped, as Go frees unused
 * stack spans: sysmon calls bb_stack_trim about once a second, which
 * unmaps each size's cold list (stacks that waited since the trim before)
 * and makes the hot one (spilled since) cold. A program that once had
 * 10,000 threads, or whose sizes change, keeps no memory for them 1-2 s
 * later. Nothing reads a cached stack's TCB: a G gives it up under its
 * lock (pthread_cancel, pthread_getcpuclockid and dlopen's TLS fill look
 * there), and a thread id is matched without it (bb_g_by_tid).
 *
 * A stack's entry sits in the top cache line of the stack itself, below
 * its TCB's block: a page every used stack has touched, and that the
 * release keeps. */
typedef struct stk {
	struct stk *next;
	void *map;      /* the mapping, guard first */
	void *tcb;      /* the TCB at its top, or NULL */
	uintptr_t hi;   /* the stack's end (its TCB's block above) */
	size_t mapsize; /* the whole mapping */
	size_t guard;   /* the guard at its bottom */
} stk;

/* Pages below the top few go back to the kernel, if the thread went down
 * that far: the page just below them tells (mincore, which changes
 * nothing). A MADV_DONTNEED of a range with no page in it still flushed
 * the TLBs of every CPU the process ran on, an IPI each and a VM exit
 * here: 10,000 sleepers ending spent a fifth of their CPU time releasing
 * stacks whose threads never left the top (and a mincore of the whole
 * stack, 2,048 entries, a tenth). A thread that reached deeper without
 * touching that page (a big array written at its far end only) keeps
 * those pages cached until the stack is unmapped (bb_stack_trim). */
static void stk_release(stk *s)
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

/* unmap every stack of the list (none is in any cache any more) */
static int32_t stk_unmap_list(stk *s)
{
	int32_t n = 0;
	while (s) {
		stk *next = s->next; /* s lives in the mapping */
		if (s->tcb)
			bb_tcb_free_below(s->tcb);
		munmap(s->map, s->mapsize);
		s = next;
		n++;
	}
	return n;
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

/* the global list pair for a size: its own, else a free one made its own
 * (create), else NULL. gflock held. */
static struct bb_stkclass *stk_class(size_t mapsize, size_t guard, bool create)
{
	struct bb_stkclass *spare = NULL;
	for (int i = 0; i < BB_STACK_CLASSES; i++) {
		struct bb_stkclass *c = &bb_sched_.stkc[i];
		if (c->nhot + c->ncold == 0) {
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

/* Give the list to the global cache. warm: a stack past its size's
 * BB_STACK_WARM_MAX is left out and returned, for its pages to be given
 * back before it goes in (a second call, warm false). A stack of a size
 * there is no room for is unmapped. */
static stk *stk_spill(stk *list, bool warm)
{
	stk *drop = NULL, *cold = NULL;
	int32_t n = 0;
	bb_lock_acquire(&bb_sched_.gflock);
	while (list) {
		stk *t = list;
		list = t->next;
		struct bb_stkclass *c = stk_class(t->mapsize, t->guard, true);
		stk **to = c == NULL ? &drop : warm && c->nhot + c->ncold >= BB_STACK_WARM_MAX ? &cold : NULL;
		if (to) {
			t->next = *to;
			*to = t;
			continue;
		}
		t->next = c->hot;
		c->hot = t;
		c->nhot++;
		n++;
	}
	atomic_store_explicit(&bb_sched_.nstkfree, bb_sched_.nstkfree + n, memory_order_relaxed);
	bb_lock_release(&bb_sched_.gflock);
	stk_unmap_list(drop);
	return cold;
}

void bb_stack_put(bb_p *pp, const bb_stack_unit *u)
{
	stk *s = (stk *)(u->hi - 64);
	s->map = u->map;
	s->tcb = u->tcb;
	s->hi = u->hi;
	s->mapsize = u->mapsize;
	s->guard = u->guard;
	s->next = pp->stkfree;
	pp->stkfree = s;
	if (++pp->nstkfree < BB_STACK_LOCAL_MAX)
		return;
	/* keep the warmer half, spill the rest */
	stk *keep = pp->stkfree;
	for (int32_t i = 1; i < BB_STACK_LOCAL_MAX / 2; i++)
		keep = keep->next;
	stk *spill = keep->next;
	keep->next = NULL;
	pp->nstkfree = BB_STACK_LOCAL_MAX / 2;
	stk *cold = stk_spill(spill, true); /* past its size's warm stacks */
	if (cold) {
		for (stk *t = cold; t; t = t->next)
			stk_release(t); /* no thread can take it meanwhile */
		stk_spill(cold, false);
	}
}

/* unlink and return the first entry of a P's list (BB_STACK_LOCAL_MAX at
 * most) that is of mapsize and guard, or NULL */
static stk *stk_find(stk **list, size_t mapsize, size_t guard)
{
	for (; *list; list = &(*list)->next) {
		stk *s = *list;
		if (s->mapsize == mapsize && s->guard == guard) {
			*list = s->next;
			return s;
		}
	}
	return NULL;
}

/* the warmest stack of a class, or NULL. gflock held. */
static stk *stk_pop(struct bb_stkclass *c)
{
	stk *s = c->hot;
	if (s) {
		c->hot = s->next;
		c->nhot--;
	} else if ((s = c->cold) != NULL) {
		c->cold = s->next;
		c->ncold--;
	}
	return s;
}

/* A cached stack of mapsize bytes with a guard of guard bytes for gp, with
 * the TCB at its top if it has one (gp->tcb, gp->unit_tcb): false if none.
 * From the global cache, up to half a P's worth of them come along. */
bool bb_stack_get(bb_p *pp, bb_g *gp, size_t mapsize, size_t guard)
{
	stk *s = stk_find((stk **)&pp->stkfree, mapsize, guard);
	if (s)
		pp->nstkfree--;
	else if (atomic_load_explicit(&bb_sched_.nstkfree, memory_order_relaxed)) {
		bb_lock_acquire(&bb_sched_.gflock);
		int32_t n = 0;
		struct bb_stkclass *c = stk_class(mapsize, guard, false);
		s = c ? stk_pop(c) : NULL;
		for (stk *more; s && n < BB_STACK_LOCAL_MAX / 2 - 1 && (more = stk_pop(c)); n++) {
			more->next = pp->stkfree;
			pp->stkfree = more;
		}
		atomic_store_explicit(&bb_sched_.nstkfree, bb_sched_.nstkfree - n - (s != NULL),
				      memory_order_relaxed);
		bb_lock_release(&bb_sched_.gflock);
		pp->nstkfree += n;
	}
	if (s == NULL)
		return false;
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
	return true;
}

/* Unmap the global cache's stacks that no thread took since the trim
 * before, if that was BB_STACK_TRIM_NS ago or more (sysmon, about once a
 * second); the ones spilled since wait for the next. Returns how many
 * were unmapped. The unmapping happens outside gflock. */
int32_t bb_stack_trim(int64_t now)
{
	static int64_t last;
	if (now - last < BB_STACK_TRIM_NS)
		return 0;
	last = now;
	if (atomic_load_explicit(&bb_sched_.nstkfree, memory_order_relaxed) == 0)
		return 0;
	stk *drop[BB_STACK_CLASSES];
	int32_t n = 0;
	bb_lock_acquire(&bb_sched_.gflock);
	for (int i = 0; i < BB_STACK_CLASSES; i++) {
		struct bb_stkclass *c = &bb_sched_.stkc[i];
		drop[i] = c->cold;
		n += c->ncold;
		c->cold = c->hot;
		c->ncold = c->nhot;
		c->hot = NULL;
		c->nhot = 0;
	}
	atomic_store_explicit(&bb_sched_.nstkfree, bb_sched_.nstkfree - n, memory_order_relaxed);
	bb_lock_release(&bb_sched_.gflock);
	for (int i = 0; i < BB_STACK_CLASSES; i++)
		stk_unmap_list(drop[i]);
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
