/*
 * preempt.c — asynchronous preemption (Go's since 1.14, DESIGN.md §3.7).
 *
 * sysmon asks a G that has run for a time slice (BOBBIN_TIMESLICE, 10 ms)
 * to yield: it sets g->preempt, which every interposed call honours
 * (cooperative), and sends the preemption signal (SIGURG) to the G's M for
 * the G that makes no call. The handler runs on the M's alternate stack and
 * accepts only a safe point: the G is the M's running G, holds no
 * glibc-internal lock bobbin knows of, and was interrupted in the program's
 * own code — not libc, ld.so, bobbin (known by its address, whatever the
 * file's name), the vDSO, or a library named in BOBBIN_NOPREEMPT; code a
 * JIT made at run time is the program's. There it makes the G "call" bb_asyncpreempt (asm/),
 * which saves every register and the xsave state and yields; the G later
 * resumes exactly where it was. At an unsafe point nothing happens and
 * sysmon asks again on its next round.
 *
 * The handler is SA_RESTART and never touches errno; a program's own
 * SIGURG handler turns the signal path off (cooperative preemption stays).
 * BOBBIN_DEBUG=asyncpreemptoff=1 turns it off too.
 */
#include "runtime.h"

#include <cpuid.h>
#include <errno.h>
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

uint64_t bb_xsave_size;
bool bb_async_preempt;
int64_t bb_timeslice_ns = 10 * 1000 * 1000;
bb_stats bb_stats_;
bool bb_stats_on;
void (*bb_sigpoke_hook)(void);
void (*bb_offstack_sig_hook)(bb_g *, uint64_t);
void (*bb_resend_hook)(bb_m *, bb_g *, uint64_t, void *);
void (*bb_async_cancel_hook)(void);

void bb_asyncpreempt(void);

enum { ASYNC_PREEMPT = 1, ASYNC_SIGNAL = 2, ASYNC_NATIVE = 4 }; /* gp->async_why */

/* The code of every loaded object, found at start-up and again after each
 * dlopen: the program's (preemptible) and the excluded ones (libc, ld.so,
 * bobbin, the vDSO, libgcc_s, BOBBIN_NOPREEMPT). Append-only: an entry is
 * written before the count that publishes it, so the signal handler reads
 * them without a lock. A pc in neither is code made at run time (a JIT's):
 * the program's own too. */
#define MAX_RANGES 256
struct range {
	uintptr_t lo, hi;
};
static struct range ranges[MAX_RANGES], excl[MAX_RANGES];
static _Atomic int nranges, nexcl;
static const void *seen[MAX_RANGES]; /* objects already looked at (their phdrs) */
static int nseen;
static bb_lock rangelock;
static void *selfbase;

static const char *nopreempt; /* BOBBIN_NOPREEMPT: comma-separated name parts */

/* libbobbin's own code: an M interrupted there may be using its P */
static struct range self_ranges[8];
uintptr_t bb_self_lo, bb_self_hi; /* their span (runtime.h) */
static int nself;

static bool excluded(const char *name)
{
	static const char *const never[] = {"/libc.so", "/ld-linux", "libbobbin", "linux-vdso",
					     "/libgcc_s", NULL};
	if (name[0] == '\0')
		return false; /* the executable */
	for (int i = 0; never[i]; i++)
		if (strstr(name, never[i]))
			return true;
	if (nopreempt) {
		const char *p = nopreempt;
		while (*p) {
			const char *e = strchr(p, ',');
			size_t n = e ? (size_t)(e - p) : strlen(p);
			if (n > 0) {
				char part[256];
				if (n >= sizeof part)
					n = sizeof part - 1;
				memcpy(part, p, n);
				part[n] = '\0';
				if (strstr(name, part))
					return true;
			}
			p += n + (e != NULL);
		}
	}
	return false;
}

static void add_exec(struct range *tab, _Atomic int *n, const struct dl_phdr_info *info)
{
	int k = atomic_load_explicit(n, memory_order_relaxed);
	for (int i = 0; i < info->dlpi_phnum && k < MAX_RANGES; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			tab[k].lo = info->dlpi_addr + ph->p_vaddr;
			tab[k].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
			k++;
		}
	}
	atomic_store_explicit(n, k, memory_order_release);
}

/* glibc's own code: a system call it makes (inside fwrite, a condvar of
 * its own, its sleeps) is left to the preemption signal as before; only
 * calls made by the program's instruction elsewhere are detached and
 * restarted (bb_preemptone) */
static struct range libc_ranges[4];
static int nlibc;
static void *libcbase;

/* the executable segments of one object (libbobbin, libc), read once */
static void object_code(const struct dl_phdr_info *info, struct range *tab, int *n, int max)
{
	for (int i = 0; i < info->dlpi_phnum && *n < max; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			tab[*n].lo = info->dlpi_addr + ph->p_vaddr;
			tab[*n].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
			(*n)++;
		}
	}
}

/* pc in tab[0..n); unknown (n == 0): true, assume the worst */
static bool in_code(const struct range *tab, int n, uintptr_t pc)
{
	for (int i = 0; i < n; i++)
		if (pc >= tab[i].lo && pc < tab[i].hi)
			return true;
	return n == 0;
}

/* a call made by the program's own syscall instruction: neither bobbin's
 * nor glibc's */
static bool programs_call(const struct bb_kcall *kc)
{
	return !in_code(libc_ranges, nlibc, kc->pc) && !in_code(self_ranges, nself, kc->pc);
}

static int add_ranges(struct dl_phdr_info *info, size_t size, void *data)
{
	if (libcbase && info->dlpi_addr == (uintptr_t)libcbase && nlibc == 0)
		object_code(info, libc_ranges, &nlibc, 4);
	for (int i = 0; i < nseen; i++)
		if (seen[i] == info->dlpi_phdr)
			return 0;
	if (nseen < MAX_RANGES)
		seen[nseen++] = info->dlpi_phdr;
	if (info->dlpi_addr == (uintptr_t)data)
		object_code(info, self_ranges, &nself, 8);
	/* bobbin itself by its address: the library may have any file name */
	if (info->dlpi_addr == (uintptr_t)data || excluded(info->dlpi_name))
		add_exec(excl, &nexcl, info);
	else
		add_exec(ranges, &nranges, info);
	return 0;
}

static bool in_table(const struct range *tab, _Atomic int *n, uintptr_t pc)
{
	int k = atomic_load_explicit(n, memory_order_acquire);
	for (int i = 0; i < k; i++)
		if (pc >= tab[i].lo && pc < tab[i].hi)
			return true;
	return false;
}

static bool safe_pc(uintptr_t pc)
{
	if (in_table(ranges, &nranges, pc))
		return true;
	return !in_table(excl, &nexcl, pc); /* in no object: a JIT's code */
}

/* a dlopen just loaded objects: learn their code (shim/dl.c) */
void bb_preempt_after_dlopen(const void *ns_gadget)
{
	if (!bb_async_preempt)
		return;
	bb_lock_acquire(&rangelock);
	bb_dl_iterate(ns_gadget, add_ranges, selfbase);
	bb_lock_release(&rangelock);
}

static bool in_bobbin(uintptr_t pc)
{
	return in_code(self_ranges, nself, pc);
}

bool bb_pc_in_bobbin(uintptr_t pc)
{
	return in_bobbin(pc);
}

/* pc is in code that may hold a lock a switch of its G must not carry
 * away (glibc's malloc arenas, ld.so's): glibc's, ld.so's, those that
 * BOBBIN_NOPREEMPT names, bobbin's; never preempted. A program's handler
 * that runs over it runs as the kernel would run it there, without
 * switching its G (shim/signal.c, bb_asyncpreempt2) */
bool bb_pc_lockable(uintptr_t pc)
{
	return !safe_pc(pc);
}

static bool in_range(uintptr_t sp, uintptr_t lo, size_t size)
{
	return lo != 0 && sp >= lo && sp < lo + size;
}

/* sp is on none of the stacks bobbin knows gp and mp by (the G's own, its
 * alternate signal stack, the M's g0 and alternate stacks): the G runs
 * code on a stack of the program's own (a coroutine's, a language
 * runtime's: SBCL's main thread runs all its Lisp code so) */
static bool foreign_stack(bb_m *mp, bb_g *gp, uintptr_t sp)
{
	/* (g0sp is 512 bytes under mstart's frame) */
	return !in_range(sp, gp->stack_lo, gp->stack_hi - gp->stack_lo) &&
	       !in_range(sp, (uintptr_t)gp->alt_sp, gp->alt_size) &&
	       !in_range(sp, (uintptr_t)mp->altstack, BB_ALTSTACK_SIZE) &&
	       !in_range(sp, mp->g0sp - BB_G0_STACKSIZE, BB_G0_STACKSIZE + 1024);
}

/* bobbin's code is live on the G's own stack under sp (bb_rt_live). On a
 * stack of the program's own the mark says nothing: the G's stack stays
 * as it was when it switched away, and a mark left there by a call that
 * returned kept passing bb_rt_live's tests (qemu-img's coroutines: the
 * main thread asleep in glibc's mutex wait on a coroutine's stack kept the
 * only P for ever at P=1, its mark a pthread_mutex_lock made earlier at the
 * same depth of its own stack) */
static bool rt_live_at(bb_m *mp, bb_g *gp, uintptr_t sp)
{
	return bb_rt_live(gp, sp) && !foreign_stack(mp, gp, sp);
}

/* A stuck M (blocked in the kernel in code bobbin cannot see, e.g. glibc's
 * own write inside fwrite) gives up its P from its own thread: the handler
 * runs on that M, so nothing else of the M can be using the P meanwhile.
 * It performs entersyscall for the G; sysmon then hands the P on; the next
 * interposed call of the G does exitsyscall (bb_on_g). Never while bobbin's
 * own code is on the G's stack (bb_rt_live): it may be in libc on bobbin's
 * behalf, holding the P in its locals. */
static void detach_p(bb_m *mp, bb_g *gp, uintptr_t pc, uintptr_t sp)
{
	mp->detach_req = false;
	bb_p *pp = mp->p;
	if (pp == NULL || in_bobbin(pc) || rt_live_at(mp, gp, sp) ||
	    atomic_load_explicit(&gp->status, memory_order_relaxed) != Grunning)
		return;
	bb_syscall_release_p(mp, gp);
	mp->detached = true;
	atomic_fetch_add_explicit(&bb_stats_.stuck_detached, 1, memory_order_relaxed);
}

/* The signal that asks for the P found the thread in the call sysmon saw
 * it asleep in (pc after its syscall instruction; rax -EINTR, or the
 * call's number with rip back on the instruction when the kernel restarts
 * it; the same six arguments), on the same G; true too when sysmon could
 * not tell the call. A thread that left it meanwhile keeps its P:
 * detached in its own code, or in a handler that bobbin's code called, it
 * went on as if it had one. */
static bool in_kcall(bb_m *mp, bb_g *gp, const ucontext_t *uc, uintptr_t pc)
{
	if (!mp->kcall_set)
		return true;
	const struct bb_kcall *kc = &mp->kcall;
	greg_t rax = uc->uc_mcontext.gregs[REG_RAX];
	if (mp->kcall_g != gp ||
	    !((pc == kc->pc && rax == -EINTR) || (pc == kc->pc - 2 && rax == (greg_t)kc->nr)))
		return false;
	static const int argreg[6] = {REG_RDI, REG_RSI, REG_RDX, REG_R10, REG_R8, REG_R9};
	for (int i = 0; i < 6; i++)
		if (uc->uc_mcontext.gregs[argreg[i]] != (greg_t)kc->args[i])
			return false;
	return true;
}

/* The system call sysmon found this M's OS thread asleep in before it
 * asked for the P (mp->kcall, bb_kernel_call) is run again if the signal
 * cut it short with EINTR, as the kernel does itself for the calls it
 * restarts (SA_RESTART): io_uring_enter, poll, epoll_wait and the like
 * made by the program's own instruction would otherwise fail where
 * natively nothing interrupts them (fio's io_uring jobs took an EINTR
 * from its inline io_uring_enter for the end of their work). Only that
 * very call (in_kcall). Relative sleeps are left to end early with EINTR
 * and their remaining time, as a handler would make them: a restart
 * would sleep longer than asked. */
static void restart_call(bb_m *mp, ucontext_t *uc, uintptr_t pc)
{
	if (!mp->kcall_set)
		return;
	mp->kcall_set = false;
	const struct bb_kcall *kc = &mp->kcall;
	greg_t *r = uc->uc_mcontext.gregs;
	/* in_kcall found that very call; the kernel restarts it itself
	 * unless it answered -EINTR */
	if (r[REG_RAX] != -EINTR || in_bobbin(pc))
		return;
	/* A wait for a signal ends only with one handled: the kernel may
	 * deliver that signal and this SIGURG at the same return, and the
	 * EINTR is then the program's (a Boehm-GC thread's sigsuspend, its
	 * restart signal handled, was made again and waited for ever). Its
	 * callers loop on such a wait: an EINTR of bobbin's costs them a
	 * look at their flag. */
	if (kc->nr == SYS_rt_sigsuspend || kc->nr == SYS_pause)
		return;
	if (kc->nr == SYS_nanosleep ||
	    (kc->nr == SYS_clock_nanosleep && !(kc->args[1] & TIMER_ABSTIME)))
		return;
	r[REG_RAX] = (greg_t)kc->nr;
	r[REG_RIP] = (greg_t)(pc - 2); /* the syscall instruction again */
	atomic_fetch_add_explicit(&bb_stats_.calls_restarted, 1, memory_order_relaxed);
}

/* A G that the preemption signal finds in the same few bytes of code time
 * after time spins in a loop waiting for another thread (redis's I/O
 * threads and main thread wait for one another so); one found all over
 * its code computes. sysmon gives a spinner short slices when others wait
 * (slice_for), so that the thread it waits for gets a P soon, and a
 * computing thread longer ones, so that its caches stay warm. */
static void note_spin(bb_g *gp, uintptr_t pc)
{
	uint8_t n = atomic_load_explicit(&gp->spinning, memory_order_relaxed);
	if (pc - gp->preempt_pc + 32 <= 64)
		n = 4; /* a spinner for this and the next 3 slices at least */
	else if (n > 0)
		n--;
	atomic_store_explicit(&gp->spinning, n, memory_order_relaxed);
	gp->preempt_pc = pc;
}

/* SIGURG is bobbin's in the kernel while preemption by signal is on; the
 * program's own action for it is kept apart (shim/signal.c). bobbin's own
 * are queued with a value no other sender can know: the address below. */
static void send_marked(pid_t tid, int sig)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = sig;
	si.si_code = SI_QUEUE;
	si.si_pid = getpid();
	si.si_value.sival_ptr = (void *)bb_urg_send;
	bb_rawsyscall6(SYS_rt_tgsigqueueinfo, si.si_pid, tid, sig, (long)&si, 0, 0);
}

void bb_urg_send(pid_t tid)
{
	send_marked(tid, bb_presig());
}

/* no getpid() per signal: only this process's bobbin sends SI_QUEUE with
 * that address to its own threads (a fork child sends to its own) */
bool bb_urg_ours(const siginfo_t *si)
{
	return si->si_code == SI_QUEUE && si->si_value.sival_ptr == (void *)bb_urg_send;
}

void (*bb_urg_program_hook)(int, siginfo_t *, void *);

/* On a stack of the program's own, bobbin cannot run a handler on the
 * running G (its calls there run as a foreign thread's): its signals go to
 * the kernel, which runs them when this handler returns, as it would
 * natively (SBCL's stop-for-GC signal to its main thread, which waited in
 * a futex in Lisp code: the collector waited for ever). True if so. */
static bool offstack_signals(bb_m *mp, bb_g *gp, const ucontext_t *uc, uintptr_t sp)
{
	/* the mask there is the kernel's: the program's code on that stack
	 * changes it with the real calls (pthread_sigmask: bb_on_g says no),
	 * which bobbin's copy for the G never sees */
	uint64_t kmask;
	memcpy(&kmask, &uc->uc_sigmask, sizeof kmask);
	if (!(atomic_load(&gp->sigpending) & ~kmask) || bb_offstack_sig_hook == NULL ||
	    !foreign_stack(mp, gp, sp))
		return false;
	bb_offstack_sig_hook(gp, kmask);
	return true;
}

static void resync_here(bb_m *mp, ucontext_t *uc);

static void handler(int sig, siginfo_t *si, void *uctxv)
{
	if (!bb_urg_ours(si)) { /* the program's, or another process's, kill */
		if (bb_urg_program_hook)
			bb_urg_program_hook(sig, si, uctxv);
		return;
	}
	bb_m *mp = bb_self_m();
	if (mp == NULL)
		return;
	if (__builtin_expect(sig != bb_presig(), 0)) {
		resync_here(mp, uctxv); /* a move's last SIGURG (or one sent before it) */
		return;
	}
	bb_g *gp = mp->curg;
	ucontext_t *uc = uctxv;
	if (__builtin_expect(atomic_load_explicit(&mp->resend, memory_order_relaxed) != 0, 0)) {
		uint64_t rs = atomic_exchange(&mp->resend, 0);
		if (gp != NULL && bb_resend_hook)
			bb_resend_hook(mp, gp, rs, uc); /* may cut the call short */
	}
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	if (gp != NULL && mp->detach_req) {
		if (in_kcall(mp, gp, uc, pc)) {
			detach_p(mp, gp, pc, sp);
			restart_call(mp, uc, pc);
		} else { /* it left that call (or the G) since: not stuck */
			mp->detach_req = false;
			mp->kcall_set = false;
		}
		/* (this SIGURG may stand for a pthread_kill's too; the G is
		 * still this M's, in Gsyscall if detach_p let the P go) */
		offstack_signals(mp, gp, uc, sp);
		return;
	}
	/* a pthread_kill for the G running here: its handler runs on the G
	 * as a call bb_asyncpreempt makes, out of this signal's context (a
	 * handler that waits parks the G like any other wait). Anywhere in the
	 * program's code, as the kernel would run it, but never while bobbin's
	 * own code is on the stack: it takes the signal when it leaves. */
	unsigned why = 0;
	bool running = gp != NULL &&
		       atomic_load_explicit(&gp->status, memory_order_relaxed) == Grunning;
	/* never inside a program's handler that the kernel ran over bobbin's
	 * code (shim/signal.c marks it): the code under it may hold a wait
	 * queue's lock, and a G switched away there left it held (a sem_post
	 * of handler_sem_post spun on it for ever) */
	if (running && bb_sigframe_live(mp, sp)) {
		if (gp->preempt)
			atomic_fetch_add_explicit(&bb_stats_.preempt_refused, 1, memory_order_relaxed);
		return;
	}
	if (running && offstack_signals(mp, gp, uc, sp))
		return;
	if (running && ((atomic_load(&gp->sigpending) | atomic_load(&gp->procsig)) & ~gp->sigmask) &&
	    bb_sigpoke_hook &&
	    !in_bobbin(pc) && !rt_live_at(mp, gp, sp)) {
		why |= ASYNC_SIGNAL;
		/* over glibc's code (inside malloc, holding an arena's lock):
		 * the handler must not switch the G away (a fork's prepare
		 * handler waited for that lock for ever, Node's SIGCHLD
		 * handler calling read over malloc) */
		if (!safe_pc(pc) || gp->libclocks > 0)
			why |= ASYNC_NATIVE;
	}
	/* preemption, or an asynchronous pthread_cancel (it takes the same way
	 * out: bb_asyncpreempt2 acts on it), only at a safe point */
	if (running && (gp->preempt || (bb_async_cancel_hook && bb_async_cancel_due(gp)))) {
		if (gp->preempt)
			note_spin(gp, pc);
		if (gp->libclocks == 0 && safe_pc(pc))
			why |= ASYNC_PREEMPT;
		else
			atomic_fetch_add_explicit(&bb_stats_.preempt_refused, 1, memory_order_relaxed);
	}
	if (why == 0)
		return;
	/* room for the red zone, the saves and the scheduler's frames */
	uintptr_t need = 128 + 8 + 17 * 8 + bb_xsave_size + 64 + 16 * 1024;
	if (sp > gp->stack_hi || sp < gp->stack_lo + need) {
		atomic_fetch_add_explicit(&bb_stats_.preempt_refused, 1, memory_order_relaxed);
		return;
	}
	gp->async_why = (uint8_t)why;
	/* below the red zone bb_asyncpreempt pushes the interrupted pc
	 * itself: this handler must not write it there, where the kernel's
	 * signal frame ends (the xsave area and its end marker, which it
	 * checks at sigreturn: with the stack at 8 mod 64 the pc overwrote
	 * the marker, and the kernel put back only the SSE state, zeroing
	 * the upper halves of ymm, zmm16-31 and the mask registers -- Node's
	 * parser crashed under its CPU profiler's signals) */
	mp->async_pc = pc;
	uc->uc_mcontext.gregs[REG_RSP] = (greg_t)(sp - 128);
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)bb_asyncpreempt;
	if (why & ASYNC_PREEMPT)
		atomic_fetch_add_explicit(&bb_stats_.preempt_async, 1, memory_order_relaxed);
	if (why & ASYNC_SIGNAL)
		atomic_fetch_add_explicit(&bb_stats_.signals_async, 1, memory_order_relaxed);
}

/* called by bb_asyncpreempt on the G, every register saved */
void bb_asyncpreempt2(void)
{
	bb_g *gp = bb_getg();
	unsigned why = gp->async_why;
	gp->async_why = 0;
	/* the program's handlers for pthread_kill, with every register of
	 * the code they interrupted saved below. Over code that may hold a
	 * lock, as the kernel's trampoline runs a handler over bobbin's code:
	 * this frame marks the M, and the handler's calls run natively */
	if (why & ASYNC_NATIVE) {
		bb_m *mp = bb_getm();
		uintptr_t ofp = mp->sigframe_fp, ora = mp->sigframe_ra;
		mp->sigframe_ra = (uintptr_t)__builtin_return_address(0);
		atomic_signal_fence(memory_order_seq_cst);
		mp->sigframe_fp = (uintptr_t)__builtin_frame_address(0);
		atomic_signal_fence(memory_order_seq_cst);
		bb_sigpoke_hook();
		atomic_signal_fence(memory_order_seq_cst);
		mp->sigframe_fp = ofp;
		mp->sigframe_ra = ora;
	} else if (why & ASYNC_SIGNAL) {
		bb_sigpoke_hook();
	}
	if (!(why & ASYNC_PREEMPT))
		return;
	/* cancelled asynchronously: glibc unwinds from here, through
	 * bb_asyncpreempt's frame (a signal frame to unwinders) into the code
	 * it interrupted; also if the cancel came while it waited its turn */
	if (bb_async_cancel_hook && bb_async_cancel_due(bb_getg()))
		bb_async_cancel_hook();
	bb_gopreempt();
	if (bb_async_cancel_hook && bb_async_cancel_due(bb_getg()))
		bb_async_cancel_hook();
}

/* bobbin's handler as sig's action */
static bool install_handler(int sig)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = handler;
	/* SA_ONSTACK: the frame goes on the alternate stack installed, the
	 * running thread's own (shim/signal.c) or its M's, never under the
	 * interrupted sp, which may be on a stack of the program's own that
	 * has no room for it: BEAM runs Erlang code with rsp in a process's
	 * stack, right above its heap, and gives every handler SA_ONSTACK;
	 * the frame written there corrupted its heap (SIGSEGV, "size_object:
	 * bad tag" in 6 of 6 runs of a crypto test at P=2). Threads that
	 * share one alternate stack (varnish's workers) do not all get it in
	 * the kernel (bb_alt_claim): two OS threads taking SIGURG together
	 * wrote their frames over each other there */
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	return bb_real_sigaction(sig, &sa, NULL) == 0;
}

void bb_preempt_init(void)
{
	const char *ts = getenv("BOBBIN_TIMESLICE");
	if (ts && *ts) {
		char *end;
		long ms = strtol(ts, &end, 10);
		if (*end == '\0' && ms >= 1 && ms <= 10000)
			bb_timeslice_ns = ms * 1000000L;
		else
			bb_printf("bobbin: ignoring BOBBIN_TIMESLICE=%s (want milliseconds, 1..10000)\n", ts);
	}
	nopreempt = getenv("BOBBIN_NOPREEMPT");
	/* bobbin's own code ranges: also for the program's signal handlers
	 * (shim/signal.c), with or without asynchronous preemption */
	Dl_info self;
	if (dladdr((void *)bb_preempt_init, &self))
		selfbase = self.dli_fbase;
	Dl_info lc;
	if (dladdr((void *)getpid, &lc))
		libcbase = lc.dli_fbase;
	dl_iterate_phdr(add_ranges, selfbase);
	for (int i = 0; i < nself; i++) {
		if (bb_self_lo == 0 || self_ranges[i].lo < bb_self_lo)
			bb_self_lo = self_ranges[i].lo;
		if (self_ranges[i].hi > bb_self_hi)
			bb_self_hi = self_ranges[i].hi;
	}
	if (bb_debug.asyncpreemptoff)
		return;
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
		return; /* no xsave: cooperative preemption only */
	__cpuid_count(0xd, 0, a, b, c, d);
	bb_xsave_size = b;
	struct sigaction old;
	if (bb_real_sigaction(SIGURG, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
	    (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN))
		return; /* the program's own signal: leave it alone */
	if (install_handler(SIGURG))
		bb_async_preempt = true;
}

/* ---- moving off SIGURG ----
 *
 * A program that reads SIGURG from a signalfd (PostgreSQL's latch: other
 * processes kill() it with SIGURG, which it blocks and polls a signalfd
 * for) needs the kernel to keep the signal pending, and bobbin never lets
 * its OS threads block its own signal: every one was delivered to
 * bobbin's handler and the signalfd never became readable. Once such a
 * signalfd is made, bobbin's signal becomes SIGWINCH (ignored by default
 * too, so one left pending across an exec harms nothing), if the program
 * has no action of its own for it; SIGURG is the program's from then on.
 * Every M's kernel mask is made right from its own thread, by one last
 * marked SIGURG (new_mask): the new signal let in, SIGURG blocked as its
 * G or an idle M wants it (a program's SIGURG let in on one thread with
 * the default action would be lost there). */
_Atomic int bb_presig_ = SIGURG;

/* the kernel mask k of mp after the move */
static uint64_t new_mask(bb_m *mp, uint64_t k)
{
	bb_g *gp = mp->curg;
	bool block = gp == NULL || ((gp->sigmask | atomic_load(&gp->procsig)) & BB_SIGBIT(SIGURG));
	k &= ~BB_SIGBIT(bb_presig());
	return block ? k | BB_SIGBIT(SIGURG) : k & ~BB_SIGBIT(SIGURG);
}

/* mp's first mask change since the move, before the mover's SIGURG came
 * (its mask made with the new signal): no SIGURG of the mover's then, and
 * one of bobbin's sent before the move lands now, while SIGURG is still
 * let in here (after, it would wait here for a signalfd to show it). Or
 * the mover's is on its way: wait for it, let in here too. */
void bb_presig_resync(bb_m *mp)
{
	uint8_t st = 0;
	if (atomic_compare_exchange_strong(&mp->presig_state, &st, 2)) {
		bb_rawsyscall6(SYS_getpid, 0, 0, 0, 0, 0, 0);
		return;
	}
	for (int i = 0; i < 5000 && atomic_load(&mp->presig_state) != 2; i++) {
		struct timespec ts = {0, 20000};
		bb_rawsyscall6(SYS_nanosleep, (long)&ts, 0, 0, 0, 0, 0);
	}
	atomic_store(&mp->presig_state, 2); /* (100 ms: blocked here after all) */
}

/* a marked SIGURG after the move, on mp: the mask the kernel puts back
 * when the handler returns */
static void resync_here(bb_m *mp, ucontext_t *uc)
{
	uint64_t k;
	memcpy(&k, &uc->uc_sigmask, sizeof k);
	k = new_mask(mp, k);
	memcpy(&uc->uc_sigmask, &k, sizeof k);
	mp->sigmask = k;
	atomic_store(&mp->presig_state, 2);
}

bool bb_presig_move(void)
{
	static bb_lock movelock;
	if (!bb_async_preempt || bb_presig() != SIGURG)
		return false;
	bb_lock_acquire(&movelock);
	struct sigaction cur;
	bool moved = false;
	if (bb_presig() == SIGURG && bb_real_sigaction(SIGWINCH, NULL, &cur) == 0 &&
	    cur.sa_handler == SIG_DFL && !(cur.sa_flags & SA_SIGINFO) && install_handler(SIGWINCH)) {
		atomic_store(&bb_presig_, SIGWINCH);
		moved = true;
	}
	bb_lock_release(&movelock);
	if (!moved)
		return false;
	/* every M's mask, from its own thread, unless it did it itself
	 * first (bb_presig_resync); at most 200 ms (an M that ends meanwhile
	 * never answers, one asleep in the timer's masked epoll_pwait answers
	 * when that wait ends) */
	int32_t n = atomic_load(&bb_nallm);
	for (int32_t i = 0; i < n; i++) {
		bb_m *mp = bb_allm[i];
		uint8_t st = 0;
		if (mp && mp->tid > 0 && atomic_compare_exchange_strong(&mp->presig_state, &st, 1))
			send_marked(mp->tid, SIGURG);
	}
	for (int tries = 0; tries < 2000; tries++) {
		bool all = true;
		for (int32_t i = 0; i < n && all; i++) {
			bb_m *mp = bb_allm[i];
			all = mp == NULL || mp->tid <= 0 || atomic_load(&mp->presig_state) == 2;
		}
		if (all)
			break;
		struct timespec ts = {0, 100000};
		bb_rawsyscall6(SYS_nanosleep, (long)&ts, 0, 0, 0, 0, 0);
	}
	bb_sigwatch_moved();
	return true;
}

/* sysmon: ask the G running on pp to yield */
static void ask_detach(bb_m *mp, const struct bb_kcall *kc);
static void note_rawcall(bb_g *gp, const struct bb_kcall *kc);

void bb_preemptone(bb_p *pp)
{
	bb_m *mp = pp->m;
	if (mp == NULL)
		return;
	bb_g *gp = mp->curg;
	if (gp == NULL)
		return;
	uint32_t st = atomic_load_explicit(&gp->status, memory_order_relaxed);
	if (st != Grunning && st != Gsyscall)
		return;
	/* in a system call: the flag only, which its return to the program
	 * meets at the next interposed call (a signal would cut the call
	 * short). A G that makes short calls one after another is mostly
	 * there: 4 threads looping on pread at BOBBIN_MAXPROCS=1 kept one of
	 * them on the P for ever when only a running G was asked. */
	gp->preempt = true;
	atomic_fetch_add_explicit(&bb_stats_.preempt_requested, 1, memory_order_relaxed);
	if (st == Grunning && bb_async_preempt && mp->tid > 0) {
		/* asleep in a call made by the program's own instruction: the
		 * signal takes the P instead, and the call goes on (a
		 * preemption now would cut it short with EINTR). A G seen so
		 * once in a call the kernel does not restart (note_rawcall)
		 * gets no preemption signal while it runs: its next such call
		 * could begin before the signal lands (fio's io_uring jobs
		 * make one every few microseconds); it yields at its next
		 * call into bobbin, or gives up its P asleep in one. */
		struct bb_kcall kc;
		if (bb_kernel_call(mp->tid, &kc) == 1 && programs_call(&kc)) {
			note_rawcall(gp, &kc);
			ask_detach(mp, &kc);
			return;
		}
		if (gp->rawcalls)
			return;
		atomic_fetch_add_explicit(&bb_stats_.preempt_signals, 1, memory_order_relaxed);
		bb_urg_send(mp->tid);
	}
}

/* sysmon: the G on pp has ignored preemption for a whole slice more. If its
 * thread sleeps in the kernel, ask that M to give up the P (see detach_p). */
/* the kernel's state letter of an OS thread (R running or runnable, S/D
 * sleeping in the kernel), or 0 if it cannot be read */
char bb_thread_state(pid_t tid)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
	if (bb_read_small(path, buf, sizeof buf) < 0)
		return 0;
	char *paren = strrchr(buf, ')'); /* the name may hold spaces */
	if (paren == NULL || paren[1] != ' ')
		return 0;
	return paren[2];
}

/* What OS thread tid is doing, from /proc/self/task/TID/syscall: 1 asleep
 * in system call kc->nr (kc: its arguments, and the pc after its syscall
 * instruction), 2 asleep outside any call (a page fault), 0 running or
 * waiting for a CPU, -1 unreadable. About 13 us, on sysmon. */
int bb_kernel_call(pid_t tid, struct bb_kcall *kc)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	if (bb_read_small(path, buf, sizeof buf) < 0)
		return -1;
	if (strncmp(buf, "running", 7) == 0)
		return 0;
	char *end;
	long nr = strtol(buf, &end, 10);
	if (end == buf)
		return -1;
	if (nr < 0)
		return 2;
	unsigned long v[8]; /* six arguments, sp, pc */
	for (int i = 0; i < 8; i++) {
		char *p = end;
		v[i] = strtoul(p, &end, 16);
		if (end == p)
			return -1;
	}
	kc->nr = nr;
	for (int i = 0; i < 6; i++)
		kc->args[i] = (long)v[i];
	kc->pc = v[7];
	return 1;
}

/* the calls a signal with a handler makes fail with EINTR, which the
 * kernel does not restart (SA_RESTART restarts the others: reads, writes,
 * plain futex waits) */
static bool eintr_prone(long nr)
{
	switch (nr) {
	case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
	case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_epoll_pwait2:
	case SYS_nanosleep: case SYS_clock_nanosleep: case SYS_futex:
	case SYS_rt_sigsuspend: case SYS_pause: case SYS_rt_sigtimedwait:
	case SYS_io_uring_enter: case SYS_io_getevents: case SYS_io_pgetevents:
	case SYS_msgrcv: case SYS_msgsnd: case SYS_semop: case SYS_semtimedop:
	case SYS_mq_timedreceive: case SYS_mq_timedsend:
		return true;
	}
	return false;
}

/* a G found asleep in such a call the program made itself (not bobbin) */
static void note_rawcall(bb_g *gp, const struct bb_kcall *kc)
{
	if (gp && eintr_prone(kc->nr) && programs_call(kc))
		gp->rawcalls = true;
}

/* mp's SIGURG handler lets the P go as if the G had entered the call it
 * sleeps in (detach_p); the call goes on (restarted after the handler: by
 * the kernel, or by restart_call for the call kc names) and the G takes a
 * P again at its next call into bobbin (bb_reattach) */
static void ask_detach(bb_m *mp, const struct bb_kcall *kc)
{
	if (kc) {
		mp->kcall = *kc;
		mp->kcall_g = mp->curg;
	}
	mp->kcall_set = kc != NULL;
	mp->detach_req = true;
	atomic_signal_fence(memory_order_seq_cst);
	bb_urg_send(mp->tid);
}

void bb_check_stuck(bb_p *pp)
{
	bb_m *mp = pp->m;
	if (mp == NULL || mp->tid <= 0 || !bb_async_preempt)
		return;
	struct bb_kcall kc;
	int k = bb_kernel_call(mp->tid, &kc);
	if (k == 0)
		return;
	if (k < 0) { /* no /proc/.../syscall: the state letter */
		char state = bb_thread_state(mp->tid);
		if (state != 'S' && state != 'D')
			return;
	}
	if (k == 1)
		note_rawcall(mp->curg, &kc);
	ask_detach(mp, k == 1 ? &kc : NULL);
}
