/*
 * cancel.c — pthread_cancel, and pthread_exit through glibc's own unwinder.
 *
 * A G's TCB is glibc's struct pthread, so glibc's cancellation machinery
 * works on it once a G has what NPTL's start_thread gives a thread: a
 * setjmp landing pad in cleanup_jmp_buf (bb_gmain sets it). Then glibc's
 * pthread_exit, pthread_testcancel and pthread_setcanceltype unwind the G's
 * stack as NPTL does — running cleanup handlers of both ABIs (the C
 * __pthread_register_cancel buffers and the unwinding one, so C++
 * destructors run) — and land in bb_gmain, which ends the G with the
 * result: the value given to pthread_exit, or PTHREAD_CANCELED.
 *
 * pthread_cancel sets the target's cancelhandling bits as glibc does and
 * wakes it if it is parked in a cancellable wait (condvar, semaphore, sleep,
 * I/O, join); every interposed cancellation point calls bb_testcancel.
 * With the asynchronous type a running G is stopped by bobbin's preemption
 * signal at the next safe point in the program's own code and unwinds from
 * there (preempt.c); one that is not running acts when it next runs into a
 * preemption or a cancellation point. The main thread (G1) keeps the initial
 * thread's own landing pad in __libc_start_call_main, whose code would end
 * the OS thread (an M here) or the process: before main unwinds, that pad's
 * saved pc is pointed at bb_main_landing (asm/), which ends the G instead.
 */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define OFF_CANCELHANDLING BB_OFF_CANCELHANDLING
#define OFF_CLEANUP 760
#define OFF_CLEANUP_JMP_BUF 768
#define OFF_POINTER_GUARD 0x30
#define CANCELSTATE_BITMASK 0x01
#define CANCELTYPE_BITMASK 0x02
#define CANCELING_BITMASK 0x04
#define CANCELED_BITMASK 0x08
#define EXITING_BITMASK 0x10
#define TERMINATED_BITMASK 0x20

static void (*real_testcancel)(void);
static int (*real_cancel)(pthread_t);

void bb_cancel_init(void)
{
	real_testcancel = (void (*)(void))dlsym(RTLD_NEXT, "pthread_testcancel");
	real_cancel = (int (*)(pthread_t))dlsym(RTLD_NEXT, "pthread_cancel");
	bb_async_cancel_hook = bb_testcancel_slow;
}

/* ---- main's end ----
 *
 * glibc's __libc_start_call_main puts a setjmp buffer at the bottom of the
 * initial thread's cleanup chain (struct pthread.cleanup_jmp_buf, linked
 * through priv.data.prev); unwinding ends with a longjmp to it. Its pc is
 * stored mangled with the thread's pointer guard, as glibc's setjmp does
 * (xor, then rotate left 17). */

void bb_main_landing(void); /* asm/mainland_x86_64_sysv_elf.S */

static uintptr_t rol17(uintptr_t v)
{
	return v << 17 | v >> 47;
}

static uintptr_t ror17(uintptr_t v)
{
	return v >> 17 | v << 47;
}

/* Point the bottom buffer of main's chain at bb_main_landing. False (and
 * nothing changed) if the chain does not end in glibc's own buffer. */
bool bb_redirect_main_unwind(bb_g *gp)
{
	char *tcb = gp->tcb;
	uintptr_t *b = *(uintptr_t **)(tcb + OFF_CLEANUP_JMP_BUF);
	for (int n = 0; b != NULL && b[9] != 0 && n < 1000000; n++)
		b = (uintptr_t *)b[9]; /* __pad[0]: priv.data.prev */
	if (b == NULL || b[9] != 0)
		return false;
	uintptr_t guard = *(uintptr_t *)(tcb + OFF_POINTER_GUARD);
	uintptr_t pc = ror17(b[7]) ^ guard;
	if (pc == (uintptr_t)bb_main_landing)
		return true;
	Dl_info di;
	if (dladdr((void *)pc, &di) == 0 || di.dli_fname == NULL ||
	    strstr(di.dli_fname, "/libc.so") == NULL)
		return false;
	b[7] = rol17((uintptr_t)bb_main_landing ^ guard);
	return true;
}

/* What an unwound G ends with: pthread_exit's value or PTHREAD_CANCELED. A
 * G cancelled out of a blocking call (from glibc's SIGCANCEL handler) is
 * still between entersyscall and exitsyscall. */
static void *unwound_result(void)
{
	/* a cleanup handler that slept in its own system call had the P taken
	 * (preempt.c, detach_p: Gsyscall too, but no cancelled call): take one
	 * back the way every other return into bobbin does, which also clears
	 * the M's detached flag (an exitsyscall here left it set, and the
	 * thread's exit ran a second exitsyscall on a running G) */
	bb_reattach();
	bb_g *gp = bb_getg();
	if (atomic_load(&gp->status) == Gsyscall) {
		gp->in_cancel_call = false;
		atomic_store(&gp->masked_wait, false); /* cancelled in sigsuspend & co. */
		/* the handler never returned: unblock what it blocked (SIGCANCEL
		 * itself) on this M before the M runs anything else */
		bb_resync_sigmask(bb_getm());
		bb_exitsyscall();
		gp = bb_getg();
	}
	return gp->exit_called ? gp->result : PTHREAD_CANCELED;
}

void bb_main_landed(void)
{
	bb_goexit(unwound_result());
}

void bb_testcancel_slow(void)
{
	bb_g *gp = bb_on_g() ? bb_getg() : NULL;
	if (gp == NULL || real_testcancel == NULL || (gp->is_main && !bb_redirect_main_unwind(gp)))
		return;
	real_testcancel(); /* glibc's: sets result = PTHREAD_CANCELED and unwinds */
}

/* the start_thread part bb_gmain needs: run fn under a landing pad */
void *bb_run_with_landing_pad(bb_g *gp)
{
	__pthread_unwind_buf_t ub;
	bb_g *volatile g = gp;
	/* glibc's start_thread does the same: the sigmask part of the buffer is
	 * never touched with savemask 0 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
	int first = __sigsetjmp((struct __jmp_buf_tag *)(void *)ub.__cancel_jmp_buf, 0) == 0;
#pragma GCC diagnostic pop
	if (first) {
		for (int i = 0; i < 4; i++)
			ub.__pad[i] = NULL; /* priv.data: prev, cleanup, canceltype */
		char *tcb = g->tcb;
		*(void **)(tcb + OFF_CLEANUP) = NULL;
		*(void **)(tcb + OFF_CLEANUP_JMP_BUF) = &ub;
		g->exit_called = false;
		if (g->c11) /* as NPTL: the int, through uintptr_t */
			return (void *)(uintptr_t)((int (*)(void *))(void *)g->fn)(g->arg);
		return g->fn(g->arg);
	}
	/* glibc unwound the stack: pthread_exit or cancellation */
	return unwound_result();
}

/* glibc installs its SIGCANCEL handler on the first pthread_cancel: make
 * that call on a dummy thread already marked cancelled (nothing else done) */
static void sigcancel_handler_installed(void)
{
	static _Atomic bool done;
	static _Alignas(64) char dummy[2368];
	if (atomic_load(&done))
		return;
	*(int *)(dummy + 720) = 1; /* tid: not exited */
	*(int *)(dummy + OFF_CANCELHANDLING) = CANCELING_BITMASK | CANCELED_BITMASK;
	real_cancel((pthread_t)dummy);
	atomic_store(&done, true);
}

BB_EXPORT int pthread_cancel(pthread_t th)
{
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	if (gp == NULL || real_cancel == NULL)
		return real_cancel ? real_cancel(th) : ESRCH;
	bb_m *mp = gp->m;
	/* blocked in the kernel inside glibc's cancellable wrapper, which made
	 * it asynchronously cancellable: glibc's SIGCANCEL handler, run on the
	 * G's TCB by a signal to its M, unwinds it out of the call. (glibc's
	 * own pthread_cancel would aim the signal at the thread's id: nowhere
	 * for a G, and for main an M that may be running another G.) */
	bool in_call = gp->in_cancel_call && mp && mp->tid > 0 &&
		       (!gp->is_main || bb_redirect_main_unwind(gp));
	if (in_call)
		sigcancel_handler_installed();
	/* its TCB goes back to the stack cache with its stack when it ends
	 * (under gp->lock): an ended thread's cancellation is a no-op, as
	 * NPTL's of a thread that has exited */
	bb_lock_acquire(&gp->lock);
	char *tcb = bb_g_tcb(gp);
	if (tcb == NULL) {
		bb_lock_release(&gp->lock);
		return 0;
	}
	_Atomic int *ch = (_Atomic int *)(tcb + OFF_CANCELHANDLING);
	int old = atomic_load(ch);
	for (;;) {
		if (old & (EXITING_BITMASK | TERMINATED_BITMASK)) {
			bb_lock_release(&gp->lock);
			return 0; /* already on its way out */
		}
		/* as glibc marks it: asynchronous in the call, CANCELING only
		 * (the handler sets CANCELED and unwinds); else both, deferred */
		int nv = old | CANCELING_BITMASK;
		if (!in_call || !(old & CANCELTYPE_BITMASK))
			nv |= CANCELED_BITMASK;
		if (nv == old || atomic_compare_exchange_weak(ch, &old, nv))
			break;
	}
	int state = atomic_load(ch);
	bb_lock_release(&gp->lock);
	if (in_call) {
		bb_rawsyscall6(SYS_tgkill, getpid(), mp->tid, 32 /* SIGCANCEL */, 0, 0, 0);
		return 0;
	}
	bool async = (state & (CANCELSTATE_BITMASK | CANCELTYPE_BITMASK)) == CANCELTYPE_BITMASK;
	if (bb_on_g() && gp == bb_getg()) {
		if (async)
			bb_testcancel_slow(); /* asynchronous: now */
		return 0; /* deferred: it acts at its next cancellation point */
	}
	if (state & CANCELSTATE_BITMASK)
		return 0;
	if (async && atomic_load(&gp->status) == Grunning && mp && mp->tid > 0 &&
	    bb_async_preempt) {
		/* running on another M: its preemption signal stops it at the
		 * next safe point (program code), where it unwinds (preempt.c) */
		bb_urg_send(mp->tid);
	}
	/* parked at a cancellation point, or about to park in one: let it act */
	bb_interrupt(gp, BB_WAKE_CANCEL);
	return 0;
}

/* setcancelstate(ENABLE) does not act on a pending request (deferred); a
 * program that waits for it calls a cancellation point, which we check */
BB_EXPORT void pthread_testcancel(void)
{
	if (!bb_on_g()) {
		if (real_testcancel)
			real_testcancel();
		return;
	}
	bb_testcancel();
}
