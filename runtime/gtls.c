/*
 * gtls.c — every G gets its own TLS block and TCB (glibc's struct pthread).
 *
 * Why: unmodified code caches &errno across calls (__errno_location is
 * const), keeps __thread variables, a locale, malloc's tcache and stdio lock
 * owners in TLS. A G that moves between OS threads must carry all of that, so
 * the fs base follows the G (DESIGN.md §3.1).
 *
 * A block comes from ld.so's _dl_allocate_tls, which lays out the static TLS
 * of every loaded module, at the top of the G's stack mapping as NPTL puts
 * it (or malloc'ed, for user stacks and small ones); we then fill in the fields of
 * struct pthread that glibc reads on a running thread. The offsets are those
 * of glibc 2.36 on x86_64; bb_tls_init checks them against glibc's own
 * _thread_db_* descriptors and __rseq_offset, and refuses (bobbin steps aside)
 * on any mismatch.
 *
 * Blocks are never returned to ld.so: glibc exports no way to free a dead
 * thread's malloc tcache, so a block stays in use: with its stack in the
 * stack cache (stack.c; from the thread's exit on) or with its G (a block
 * of the G's own, for other stacks), and is re-initialised when the next
 * thread gets it (libc's own block keeps its tcache,
 * arena and strerror buffers, and what a thread can read there is reset by
 * hand: errno, h_errno, a pending dlerror, the locale, the resolver state;
 * every other module's block is reset to its initial image). Nothing is
 * leaked per thread.
 *
 * Must never be called on a G's TCB from scheduler code (g0 only calls the
 * _alloc/_prepare functions, which write into another G's block).
 */
#include "runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <locale.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <resolv.h>
#undef p_type /* resolv.h maps it to a function name */

/* struct pthread, glibc 2.36 x86_64 (nptl/descr.h, sysdeps/x86_64/nptl/tls.h) */
enum {
	OFF_HEADER_TCB = 0x00,
	OFF_HEADER_SELF = 0x10,
	OFF_MULTIPLE_THREADS = 0x18,
	OFF_SYSINFO = 0x20,
	OFF_STACK_GUARD = 0x28,
	OFF_POINTER_GUARD = 0x30,
	OFF_FEATURE_1 = 0x48,
	OFF_LIST = 704,
	OFF_TID = 720,
	OFF_ROBUST_PREV = 728,
	OFF_ROBUST_HEAD = 736,
	OFF_CANCELHANDLING = BB_OFF_CANCELHANDLING,
	OFF_SPECIFIC_1STBLOCK = 784,
	OFF_SPECIFIC = 1296,
	OFF_USER_STACK = 1554,
	OFF_START_ROUTINE = 1592,
	OFF_STACKBLOCK = 1680,
	OFF_STACKBLOCK_SIZE = 1688,
	OFF_GUARDSIZE = 1696,
	OFF_REPORTED_GUARDSIZE = 1704,
	OFF_RES = 1720,
	OFF_RSEQ = 2336,
	SIZEOF_PTHREAD = 2368,
};

_Atomic bool bb_tsd_used; /* some pthread_key was ever created */
long bb_off_g_in_tcb = OFF_START_ROUTINE; /* struct pthread's start_routine:
					     never read for a G, so it holds the G */

static void *(*dl_allocate_tls)(void *);
static void (*dl_deallocate_tls)(void *, bool);
static size_t tls_static_size, tls_static_align; /* TLS blocks and TCB together */
static void (*ctype_init)(void);
static void (*call_tls_dtors)(void);
static void (*res_iclose)(res_state, bool);
static long resp_off;    /* offset of libc's __resp TLS variable from the tp */
__thread bool bb_tls_m __attribute__((tls_model("initial-exec")));
__thread bool bb_tls_vfork __attribute__((tls_model("initial-exec")));
static long m_off;       /* offset of bb_tls_m from the tp (0: not known yet) */
static char proto[0x50]; /* TCB header words copied from the initial thread */

/* static TLS blocks of modules other than libc, reset when a block is reused */
#define MAX_TLS_MODS 64
static struct tlsmod {
	long off;         /* block address - tp */
	const void *image;
	size_t filesz, memsz;
} mods[MAX_TLS_MODS];
static _Atomic int nmods; /* grows at a dlopen (modslock); read by bb_tcb_prepare */
static bb_lock modslock;
#define MAX_MODID 4096
static uint8_t seen_modid[MAX_MODID]; /* TLS modules already looked at */

static int check_desc(const char *name, uint32_t want_off)
{
	const uint32_t *d = dlvsym(RTLD_DEFAULT, name, "GLIBC_PRIVATE");
	/* DB_STRUCT_FIELD descriptors are {size in bits, count, offset} */
	if (d == NULL || d[2] != want_off) {
		bb_printf("bobbin: glibc's %s is %s, expected offset %u; not a glibc bobbin "
			  "knows, running natively\n",
			  name, d ? "at another offset" : "missing", want_off);
		return -1;
	}
	return 0;
}

static int find_mods(struct dl_phdr_info *info, size_t size, void *data)
{
	uintptr_t tp = (uintptr_t)data;
	if (info->dlpi_tls_modid > 0 && info->dlpi_tls_modid < MAX_MODID)
		seen_modid[info->dlpi_tls_modid] = 1;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_TLS || info->dlpi_tls_data == NULL)
			continue;
		if (strstr(info->dlpi_name, "/libc.so.6") != NULL)
			continue; /* libc's block is kept: see the file comment */
		if (nmods == MAX_TLS_MODS)
			return 1;
		mods[nmods].off = (long)((uintptr_t)info->dlpi_tls_data - tp);
		mods[nmods].image = (const void *)(info->dlpi_addr + ph->p_vaddr);
		mods[nmods].filesz = ph->p_filesz;
		mods[nmods].memsz = ph->p_memsz;
		nmods++;
	}
	return 0;
}

int bb_tls_init(void)
{
	const char *v = gnu_get_libc_version();
	if (strcmp(v, "2.36") != 0) {
		bb_printf("bobbin: glibc %s is not one bobbin knows (2.36); running natively\n", v);
		return -1;
	}
	const uint32_t *sz = dlvsym(RTLD_DEFAULT, "_thread_db_sizeof_pthread", "GLIBC_PRIVATE");
	if (sz == NULL || *sz != SIZEOF_PTHREAD) {
		bb_printf("bobbin: glibc's struct pthread has an unexpected size; running natively\n");
		return -1;
	}
	if (check_desc("_thread_db_pthread_tid", OFF_TID) ||
	    check_desc("_thread_db_pthread_list", OFF_LIST) ||
	    check_desc("_thread_db_pthread_specific", OFF_SPECIFIC) ||
	    check_desc("_thread_db_pthread_cancelhandling", OFF_CANCELHANDLING) ||
	    check_desc("_thread_db_pthread_start_routine", OFF_START_ROUTINE))
		return -1;
	const long *rseq_off = dlsym(RTLD_DEFAULT, "__rseq_offset");
	if (rseq_off == NULL || *rseq_off != OFF_RSEQ) {
		bb_printf("bobbin: glibc's rseq area is not where bobbin expects it; running natively\n");
		return -1;
	}
	dl_allocate_tls = (void *(*)(void *))dlvsym(RTLD_DEFAULT, "_dl_allocate_tls", "GLIBC_PRIVATE");
	dl_deallocate_tls =
		(void (*)(void *, bool))dlvsym(RTLD_DEFAULT, "_dl_deallocate_tls", "GLIBC_PRIVATE");
	ctype_init = (void (*)(void))dlvsym(RTLD_DEFAULT, "__ctype_init", "GLIBC_PRIVATE");
	call_tls_dtors = (void (*)(void))dlvsym(RTLD_DEFAULT, "__call_tls_dtors", "GLIBC_PRIVATE");
	res_iclose = (void (*)(res_state, bool))dlvsym(RTLD_DEFAULT, "__res_iclose", "GLIBC_PRIVATE");
	void *resp = dlvsym(RTLD_DEFAULT, "__resp", "GLIBC_PRIVATE");
	void (*static_info)(size_t *, size_t *) = (void (*)(size_t *, size_t *))dlvsym(
		RTLD_DEFAULT, "_dl_get_tls_static_info", "GLIBC_PRIVATE");
	if (static_info)
		static_info(&tls_static_size, &tls_static_align);
	if (!dl_allocate_tls || !ctype_init || !call_tls_dtors || !resp || !static_info ||
	    tls_static_size < SIZEOF_PTHREAD || tls_static_align == 0 ||
	    (tls_static_align & (tls_static_align - 1))) {
		bb_printf("bobbin: glibc's private TLS entry points are missing; running natively\n");
		return -1;
	}
	uintptr_t tp = bb_getfsbase();
	resp_off = (long)((uintptr_t)resp - tp);
	m_off = (long)((uintptr_t)&bb_tls_m - tp);
	memcpy(proto, (void *)tp, sizeof proto);
	if (dl_iterate_phdr(find_mods, (void *)tp) != 0) {
		bb_printf("bobbin: more than %d modules with TLS; running natively\n", MAX_TLS_MODS);
		return -1;
	}
	return 0;
}

/* the fields of a fresh block (zeroed by ld.so or by mmap) that a running
 * thread's glibc reads */
static void *tcb_setup(char *t)
{
	memcpy(t + OFF_SYSINFO, proto + OFF_SYSINFO, 8);
	memcpy(t + OFF_STACK_GUARD, proto + OFF_STACK_GUARD, 8);
	memcpy(t + OFF_POINTER_GUARD, proto + OFF_POINTER_GUARD, 8);
	memcpy(t + OFF_FEATURE_1, proto + OFF_FEATURE_1, 4);
	*(void **)(t + OFF_HEADER_TCB) = t;
	*(void **)(t + OFF_HEADER_SELF) = t;
	*(int *)(t + OFF_MULTIPLE_THREADS) = 1; /* else malloc drops its lock prefix */
	void **list = (void **)(t + OFF_LIST);
	list[0] = list[1] = list; /* a list_del on it is harmless */
	*(void **)(t + OFF_ROBUST_PREV) = t + OFF_ROBUST_HEAD;
	void **rh = (void **)(t + OFF_ROBUST_HEAD);
	rh[0] = rh;              /* empty robust list */
	rh[1] = (void *)-32L;    /* futex_offset, as NPTL sets it */
	rh[2] = NULL;
	*(void **)(t + OFF_SPECIFIC) = t + OFF_SPECIFIC_1STBLOCK;
	*(uint8_t *)(t + OFF_USER_STACK) = 1; /* glibc must never free "its" stack */
	*(uint32_t *)(t + OFF_RSEQ + 4) = (uint32_t)-2; /* cpu_id: not registered */
	*(void **)(t + resp_off) = t + OFF_RES;
	if (m_off)
		*(bool *)(t + m_off) = true; /* a G's or an M's */
	return t;
}

/* a block of its own, from ld.so (malloc) */
void *bb_tcb_alloc(void)
{
	char *t = dl_allocate_tls(NULL);
	return t ? tcb_setup(t) : NULL;
}

/* Before the stack mapping a block was carved from is unmapped: what ld.so
 * allocated for the block (its DTV, the dynamic TLS blocks of dlopen'ed
 * modules the thread touched) goes back to malloc, as NPTL frees it when
 * it unmaps a cached stack. */
void bb_tcb_free_below(void *tcb)
{
	if (dl_deallocate_tls)
		dl_deallocate_tls(tcb, false);
}

/* Bytes a block carved from the top of a stack mapping takes, alignment
 * slack included. */
size_t bb_tcb_footprint(void)
{
	return tls_static_size + tls_static_align;
}

/* A block laid out, as NPTL does, at the top of a fresh (zero) stack
 * mapping ending at top: the TCB last, the static TLS blocks below it.
 * *tls_lo: where the block starts (the stack ends below). One mapping, one
 * page fault for the TCB and the first stack frames, no malloc. */
void *bb_tcb_alloc_below(uintptr_t top, uintptr_t *tls_lo)
{
	uintptr_t base = (top - tls_static_size) & ~(uintptr_t)(tls_static_align - 1);
	char *t = dl_allocate_tls((void *)(base + tls_static_size - SIZEOF_PTHREAD));
	if (t == NULL)
		return NULL;
	*tls_lo = base;
	return tcb_setup(t);
}

void bb_tcb_prepare(bb_g *gp, bool reused)
{
	char *t = gp->tcb;
	if (reused) {
		int n = atomic_load_explicit(&nmods, memory_order_acquire);
		for (int i = 0; i < n; i++) {
			char *blk = t + mods[i].off;
			memcpy(blk, mods[i].image, mods[i].filesz);
			memset(blk + mods[i].filesz, 0, mods[i].memsz - mods[i].filesz);
		}
		if (bb_tsd_used) /* no key ever made: nothing to clear */
			memset(t + OFF_SPECIFIC_1STBLOCK, 0, OFF_SPECIFIC - OFF_SPECIFIC_1STBLOCK);
		*(int *)(t + OFF_CANCELHANDLING) = 0;
		if (m_off)
			*(bool *)(t + m_off) = true; /* the image just copied cleared it */
	}
	*(int *)(t + OFF_TID) = bb_g_green_tid(gp);
	*(void **)(t + OFF_START_ROUTINE) = gp;
	*(void **)(t + OFF_STACKBLOCK) = (void *)(gp->stack_lo);
	*(size_t *)(t + OFF_STACKBLOCK_SIZE) = gp->stack_top - gp->stack_lo;
	*(size_t *)(t + OFF_GUARDSIZE) = gp->guardsize;
	*(size_t *)(t + OFF_REPORTED_GUARDSIZE) = gp->guardsize;
}

/* the initial thread's TCB becomes G1's: only the G back-pointer is ours */
void bb_tcb_adopt_main(bb_g *gp)
{
	*(void **)((char *)gp->tcb + OFF_START_ROUTINE) = gp;
}

void bb_tcb_on_g_start(bb_g *gp)
{
	errno = 0;
	ctype_init();
}

/* What the kernel does for a thread that exits holding robust mutexes
 * (kernel/futex handle_futex_death): the G's robust list lives in its own
 * TCB, which the kernel does not know, so bobbin walks it. Each lock word
 * still owned by this G gets FUTEX_OWNER_DIED, and one waiter is woken. */
static void robust_release(bb_g *gp)
{
	char *t = gp->tcb;
	void **head = (void **)(t + OFF_ROBUST_HEAD);
	long off = (long)head[1];
	uint32_t tid = (uint32_t)bb_g_tid(gp);
	void *pending = head[2];
	void *e = (void *)((uintptr_t)head[0] & ~(uintptr_t)1);
	for (int n = 0; e != (void *)head && e != NULL && n < 2048; n++) {
		void *next = (void *)((uintptr_t)(*(void **)e) & ~(uintptr_t)1);
		_Atomic uint32_t *w = (_Atomic uint32_t *)((char *)e + off);
		uint32_t v = atomic_load(w);
		while ((v & 0x3fffffff) == tid) {
			uint32_t nv = (v & 0x80000000u) | 0x40000000u;
			if (atomic_compare_exchange_weak(w, &v, nv)) {
				if (v & 0x80000000u)
					bb_rawsyscall6(202 /* futex */, (long)w, 1 /* WAKE */, 1, 0, 0, 0);
				break;
			}
		}
		e = next;
	}
	(void)pending;
	head[0] = head;
	head[2] = NULL;
}

/* C++ thread_local destructors (and Rust's thread_local!), which glibc
 * runs before the pthread key destructors: Rust's key destructor tears
 * down thread::current(), which a thread_local's Drop may still call */
void bb_tcb_tls_dtors(void)
{
	call_tls_dtors();
}

void bb_tcb_on_g_exit(bb_g *gp)
{
	robust_release(gp);
	/* glibc's TSD second-level blocks (calloc'd by its setspecific on this
	 * G); the first block is inside the TCB and is cleared on reuse */
	void **specific = (void **)((char *)gp->tcb + OFF_SPECIFIC);
	for (int i = 1; i < 32 && bb_tsd_used; i++) {
		if (specific[i]) {
			free(specific[i]);
			specific[i] = NULL;
		}
	}
	uselocale(LC_GLOBAL_LOCALE);
	/* libc's own TLS block is not reset for the next thread (it keeps
	 * its malloc tcache and arena): what a new thread could read from it
	 * goes back to a fresh thread's state here. A dlopen/dlsym error not
	 * yet fetched (dlerror() takes it), and h_errno: both left a new
	 * thread seeing the ended one's error. */
	(void)dlerror();
	h_errno = 0;
	res_state rs = (res_state)((char *)gp->tcb + OFF_RES);
	if (rs->options & RES_INIT) {
		if (res_iclose)
			res_iclose(rs, true);
		memset(rs, 0, sizeof *rs);
	}
}

/* ---- dlopen of a module with static TLS ----
 *
 * A module loaded by dlopen that uses the initial-exec TLS model gets a
 * slot in the static TLS area (so does every libc.so a dlmopen loads into a
 * new namespace: its errno, locale and malloc state); glibc then copies its initial image into
 * that slot of every thread it knows (its thread lists: the Ms, the
 * initial thread), not into the Gs' blocks. So after each dlopen
 * (shim/dl.c) the new modules are looked at: a static one's image is
 * copied into every G's block and the module joins mods[], so that a
 * reused block is reset too. The caller's own block is filled only if it
 * is still all zero (the module's constructors ran on it). A module whose
 * TLS is dynamic needs nothing: each G has its own DTV. */

extern void *__tls_get_addr(void *ti);

struct newmods {
	uintptr_t tp;
	int first; /* mods[first..] were added by this scan */
};

static int scan_new(struct dl_phdr_info *info, size_t size, void *data)
{
	struct newmods *nm = data;
	size_t modid = info->dlpi_tls_modid;
	if (modid == 0 || modid >= MAX_MODID || seen_modid[modid])
		return 0;
	seen_modid[modid] = 1;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_TLS)
			continue;
		/* this thread's block of it: brings the caller's DTV up to date */
		unsigned long ti[2] = {modid, 0};
		uintptr_t a = (uintptr_t)__tls_get_addr(ti);
		if (a >= nm->tp || a < nm->tp + SIZEOF_PTHREAD - tls_static_size)
			continue; /* dynamic TLS */
		int n = atomic_load_explicit(&nmods, memory_order_relaxed);
		void *img = ph->p_filesz ? bb_alloc(ph->p_filesz) : NULL;
		if (n == MAX_TLS_MODS || (ph->p_filesz && img == NULL)) {
			bb_free(img);
			bb_printf("bobbin: cannot track the static TLS of %s: its initial values "
				  "are missing in threads that existed before the dlopen\n",
				  info->dlpi_name);
			continue;
		}
		if (img) /* our copy: the module may be unloaded later */
			memcpy(img, (const void *)(info->dlpi_addr + ph->p_vaddr), ph->p_filesz);
		mods[n] = (struct tlsmod){(long)(a - nm->tp), img, ph->p_filesz, ph->p_memsz};
		atomic_store_explicit(&nmods, n + 1, memory_order_release);
	}
	return 0;
}

static bool all_zero(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

struct fillmods {
	int first, last;
	void *self_tcb;
};

static void fill_g(bb_g *gp, void *arg)
{
	struct fillmods *f = arg;
	if (gp->is_main) /* main's block glibc filled */
		return;
	/* under the G's lock: an ending G gives its TCB to the stack cache
	 * there, and the cache may unmap it */
	bb_lock_acquire(&gp->lock);
	char *t = bb_g_tcb(gp);
	for (int i = f->first; t && i < f->last; i++) {
		char *blk = t + mods[i].off;
		if (t == f->self_tcb && !all_zero(blk, mods[i].memsz))
			continue;
		memcpy(blk, mods[i].image, mods[i].filesz);
		memset(blk + mods[i].filesz, 0, mods[i].memsz - mods[i].filesz);
	}
	bb_lock_release(&gp->lock);
}

void bb_dl_iterate(const void *ns_gadget, int (*cb)(struct dl_phdr_info *, size_t, void *),
		   void *data)
{
	if (ns_gadget)
		bb_call_as((const void *)cb, data, NULL, (const void *)dl_iterate_phdr, ns_gadget);
	else
		dl_iterate_phdr(cb, data);
}

void bb_tls_after_dlopen(const void *ns_gadget)
{
	bb_lock_acquire(&modslock);
	struct newmods nm = {bb_getfsbase(), atomic_load(&nmods)};
	bb_dl_iterate(ns_gadget, scan_new, &nm);
	struct fillmods f = {nm.first, atomic_load(&nmods), (void *)nm.tp};
	if (f.last > f.first)
		bb_allgs_each(fill_g, &f);
	bb_lock_release(&modslock);
}

/* The id bb_tcb_prepare gives a G's thread, from its goid alone: a tid no
 * kernel thread can have (above pid_max's 2^22 limit, and inside
 * FUTEX_TID_MASK: bit 30 is FUTEX_OWNER_DIED, bit 31 WAITERS; robust
 * mutexes store the tid in the lock word). A racy reader matches a G by it
 * without touching its TCB, which may be on its way to the stack cache. */
int bb_g_green_tid(const bb_g *gp)
{
	return (int)(0x20000000u | (uint32_t)(gp->goid & 0x1fffffff));
}

/* 0 for a G that has ended (its TCB went with its stack) */
int bb_g_tid(bb_g *gp)
{
	char *t = gp->tcb;
	return t ? *(int *)(t + OFF_TID) : 0;
}
