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
#define ALTSTACK_SIZE (64 * 1024)

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

/* with_tcb: the G has no TCB yet; if the stack is roomy, its TLS block and
 * TCB go at the top of the mapping, as NPTL lays out a thread (gp->tcb set) */
/* Stacks of the default size with a one-page guard are carved from chunks
 * of STACK_CHUNK made at once: one mmap, then every guard in a row while
 * no thread runs on the chunk yet. A burst of thread creation
 * then makes no system call for 15 stacks in 16, and the first faults on
 * a new stack never wait behind a split of the mapping they are in. Each
 * stack is still unmapped on its own (munmap takes any page range). */
#define STACK_CHUNK 16
static bb_lock chunklock;
static uintptr_t chunk_next, chunk_end;

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

static void *map_stack(size_t total, size_t guard)
{
	size_t unit = bb_default_stacksize() + PAGE;
	if (total != unit || guard != PAGE)
		return map_one(total, guard);
	void *p = NULL;
	bb_lock_acquire(&chunklock);
	if (chunk_next == chunk_end) {
		char *c = map_one(unit * STACK_CHUNK, PAGE);
		int i = 1;
		if (c != MAP_FAILED)
			for (; i < STACK_CHUNK; i++)
				if (make_guard(c + i * unit, PAGE) != 0)
					break;
		if (c != MAP_FAILED) { /* the stacks whose guards are in place */
			if (i < STACK_CHUNK)
				munmap(c + i * unit, (STACK_CHUNK - i) * unit);
			chunk_next = (uintptr_t)c;
			chunk_end = chunk_next + i * unit;
		}
	}
	if (chunk_next != chunk_end) {
		p = (void *)chunk_next;
		chunk_next += unit;
	}
	bb_lock_release(&chunklock);
	return p ? p : map_one(total, guard);
}

/* another thread may have held chunklock at the fork, mid-update: the child
 * starts a chunk of its own (the parent's rest is only address space) */
void bb_stack_forkchild(void)
{
	/* (stores only where needed: each copies a page shared with the parent) */
	if (atomic_load(&chunklock.key))
		atomic_store(&chunklock.key, 0);
	if (chunk_next || chunk_end)
		chunk_next = chunk_end = 0;
}

int bb_stackalloc(bb_g *gp, size_t size, size_t guard, bool with_tcb)
{
	size = (size + PAGE - 1) & ~(PAGE - 1);
	guard = (guard + PAGE - 1) & ~(PAGE - 1);
	size_t total = size + guard;
	void *p = map_stack(total, guard);
	if (p == MAP_FAILED)
		return -1;
	uintptr_t top = (uintptr_t)p + total, hi = top, tcb_pages = 0;
	void *tcb = NULL;
	if (with_tcb && size >= bb_tcb_footprint() + 64 * 1024) {
		uintptr_t tls_lo;
		tcb = bb_tcb_alloc_below(top, &tls_lo);
		if (tcb == NULL) {
			munmap(p, total);
			return -1;
		}
		hi = tls_lo & ~(uintptr_t)63;
		tcb_pages = tls_lo & ~(PAGE - 1);
		gp->tcb = tcb;
	}
	gp->stack_map = p;
	gp->stack_mapsize = total;
	gp->guardsize = guard;
	gp->stack_lo = (uintptr_t)p + guard;
	gp->stack_hi = hi;
	gp->stack_top = top;
	gp->tcb_pages = tcb_pages;
	gp->user_stack = false;
	return 0;
}

/* Unmap the stack; the pages holding the G's TCB stay (it lives as long as
 * the G). */
void bb_stackfree(bb_g *gp)
{
	if (gp->stack_map && !gp->user_stack) {
		size_t len = gp->tcb_pages ? gp->tcb_pages - (uintptr_t)gp->stack_map
					   : gp->stack_mapsize;
		munmap(gp->stack_map, len);
	}
	gp->tcb_pages = 0;
	gp->stack_map = NULL;
	gp->stack_lo = gp->stack_hi = gp->stack_top = 0;
}

/* Give back the pages of a cached stack, keeping the top few that a new
 * thread touches at once. */
void bb_stackrelease(bb_g *gp)
{
	const size_t keep = 16 * 1024;
	if (gp->user_stack || gp->stack_hi - gp->stack_lo <= keep)
		return;
	madvise((void *)gp->stack_lo, gp->stack_hi - gp->stack_lo - keep, MADV_DONTNEED);
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

/* Per M: an alternate signal stack, so a G that ran out of stack can still
 * be reported. The handler is installed once (mp == the first M). */
void bb_stack_signal_init(bb_m *mp)
{
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
