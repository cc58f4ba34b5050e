/*
 * signal.c — per-thread signal masks. pthread_sigmask and sigprocmask
 * change the calling G's own mask; its M's kernel mask follows whenever the
 * G runs (runtime/proc.c), so a mask holds across migration and never
 * leaks to the other Gs of an M. As glibc does, SIGCANCEL and SIGSETXID are
 * never blocked; bobbin's preemption signal is not blocked on the M either
 * (it only ever interrupts bobbin's own Gs, never reaches the program).
 */
#include "shim.h"

#include <setjmp.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>


static int change(int how, const sigset_t *set, sigset_t *old)
{
	bb_g *gp = bb_getg();
	uint64_t cur = gp->sigmask;
	if (set) {
		uint64_t s;
		memcpy(&s, set, sizeof s);
		switch (how) {
		case SIG_BLOCK:
			cur |= s;
			break;
		case SIG_UNBLOCK:
			cur &= ~s;
			break;
		case SIG_SETMASK:
			cur = s;
			break;
		default:
			return EINVAL;
		}
		cur &= ~BB_GLIBC_SIGNALS;
	}
	if (old) {
		sigemptyset(old);
		memcpy(old, &gp->sigmask, sizeof gp->sigmask);
	}
	if (set) {
		uint64_t unblocked = gp->sigmask & ~cur;
		gp->sigmask = cur;
		bb_apply_sigmask(bb_getm(), cur | atomic_load(&gp->procsig));
		if (unblocked) {
			/* sysmon stopped watching a signal when no G took it:
			 * this one does now (see bb_sigwatch_add) */
			atomic_thread_fence(memory_order_seq_cst);
			bb_sigwatch_add(unblocked);
			/* given to us and still blocked on our M, or sent to this
			 * thread by pthread_kill: taken now, as the kernel runs a
			 * pending signal's handler at unblock */
			if ((atomic_load(&gp->procsig) | atomic_load(&gp->sigpending)) & unblocked)
				bb_deliver_signals();
		}
	}
	return 0;
}

BB_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	static int (*real)(int, const sigset_t *, sigset_t *);
	if (real == NULL)
		real = (int (*)(int, const sigset_t *, sigset_t *))dlsym(RTLD_NEXT, "pthread_sigmask");
	if (!bb_on_g())
		return real(how, set, old);
	return change(how, set, old);
}

BB_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	static int (*real)(int, const sigset_t *, sigset_t *);
	if (real == NULL)
		real = (int (*)(int, const sigset_t *, sigset_t *))dlsym(RTLD_NEXT, "sigprocmask");
	if (!bb_on_g())
		return real(how, set, old);
	int err = change(how, set, old);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* siglongjmp (and longjmp, the same function in glibc) to a sigsetjmp
 * buffer that saved the mask puts that mask back with glibc's internal
 * sigprocmask, which bobbin does not see: out of a handler (the classic
 * alarm-and-jump time-out) the thread's mask in bobbin then kept the
 * handler's, the signal blocked, and the next alarm never came. The mask
 * is set here first, as the thread's; glibc's then sets the same one. */
typedef void (*longjmp_fn)(struct __jmp_buf_tag *, int);

/* the stack pointer a jmp_buf goes back to: glibc keeps it mangled with
 * the pointer guard (xor, then rotated left by 17) */
static uintptr_t jump_target_sp(const struct __jmp_buf_tag *env)
{
	uintptr_t guard, v = (uintptr_t)env[0].__jmpbuf[6]; /* JB_RSP */
	__asm__("movq %%fs:0x30, %0" : "=r"(guard));      /* header.pointer_guard */
	return ((v >> 17) | (v << 47)) ^ guard;
}

/* A jump out of a handler that the kernel ran over bobbin's own code
 * leaves that code for good, with the state it would have put back: the
 * handler's frame that marks the M (sigframe_fp), and a blocking call
 * made inside entersyscall (the classic alarm-and-jump time-out around a
 * read: the G stayed in Gsyscall, and its next calls ran as a foreign
 * thread's, a socket read answering EAGAIN). Only when the jump goes back
 * above that frame on the G's own stack. */
static void leave_handler(struct __jmp_buf_tag *env)
{
	bb_m *mp = bb_active ? bb_self_m() : NULL;
	if (mp == NULL)
		return;
	bb_g *gp = mp->curg;
	uintptr_t sp = jump_target_sp(env);
	if (gp == NULL || mp->sigframe_fp == 0 || sp < gp->stack_lo || sp >= gp->stack_hi ||
	    sp <= mp->sigframe_fp || !bb_sig_native_live(mp, gp, (uintptr_t)__builtin_frame_address(0)))
		return;
	mp->sigframe_fp = mp->sigframe_ra = 0;
	/* a handler asleep in its own system call may have had the P taken
	 * (preempt.c, detach_p): that Gsyscall is undone by bb_reattach, which
	 * clears the M's note too (may continue on another M) */
	bb_reattach();
	if (atomic_load(&gp->status) == Gsyscall && gp->m == mp) {
		gp->in_cancel_call = false;
		bb_exitsyscall(); /* may continue on another M */
	}
}

__attribute__((noreturn)) static void jump_with_mask(struct __jmp_buf_tag *env, int val,
						    longjmp_fn *real, const char *name)
{
	if (*real == NULL)
		*real = (longjmp_fn)dlsym(RTLD_NEXT, name);
	leave_handler(env);
	if (env[0].__mask_was_saved && bb_on_g()) {
		change(SIG_SETMASK, (const sigset_t *)&env[0].__saved_mask, NULL);
		BB_RT_UNMARK(bb_getg()); /* this frame is left for good */
	}
	(*real)(env, val);
	__builtin_unreachable();
}

BB_EXPORT void siglongjmp(sigjmp_buf env, int val)
{
	static longjmp_fn real;
	jump_with_mask(env, val, &real, "siglongjmp");
}

BB_EXPORT void longjmp(jmp_buf env, int val)
{
	static longjmp_fn real;
	jump_with_mask(env, val, &real, "longjmp");
}

/* what _FORTIFY_SOURCE makes of both */
BB_EXPORT void __longjmp_chk(jmp_buf env, int val)
{
	static longjmp_fn real;
	jump_with_mask(env, val, &real, "__longjmp_chk");
}

/* The alternate signal stack is the thread's, as natively, not its OS
 * thread's: kept in the G and installed on whatever M runs it
 * (bb_alt_enter), bobbin's own back when it leaves. A thread that has none
 * is told so, though its M has bobbin's. Before, one thread's stack stayed
 * on an OS thread that then ran others, and after a Rust thread's exit
 * (SS_DISABLE, then munmap on whichever OS thread it ended on) the next
 * signal there was written into unmapped memory: SIGSEGV. */
BB_EXPORT int sigaltstack(const stack_t *ss, stack_t *old)
{
	stack_t kold;
	bool on_g = bb_on_g();
	long r = bb_sys(SYS_sigaltstack, ss, old && !on_g ? old : &kold, 0);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	if (!on_g)
		return 0;
	bb_g *gp = bb_getg();
	bb_m *mp = bb_getm();
	if (old) {
		if (gp->alt_sp) /* its own, with SS_ONSTACK when on the kernel's */
			*old = (stack_t){.ss_sp = gp->alt_sp, .ss_size = gp->alt_size,
					 .ss_flags = gp->alt_flags | (kold.ss_flags & SS_ONSTACK)};
		else
			*old = (stack_t){.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
	}
	if (ss) {
		bool off = ss->ss_flags & SS_DISABLE;
		gp->alt_sp = off ? NULL : ss->ss_sp;
		gp->alt_size = off ? 0 : ss->ss_size;
		gp->alt_flags = off ? 0 : ss->ss_flags;
		gp->alt_kern = gp->alt_sp;
		mp->alt_cur = gp->alt_sp; /* none at all now, when disabled */
		if (gp->alt_sp && !bb_alt_claim(gp, gp->alt_sp)) {
			/* another thread's too: this one gets its M's own */
			gp->alt_kern = NULL;
			bb_alt_install(mp, NULL, 0, 0);
		}
	}
	return 0;
}

/* ---- signals sent to one thread ----
 *
 * pthread_kill to another G: a G running on an M is poked with bobbin's
 * signal, whose handler makes it call the program's handler on its own
 * stack, out of the signal's context (preempt.c, ASYNC_SIGNAL); a G in a blocking call
 * gets the real signal on its M, which interrupts the call as the kernel
 * would; a parked G keeps it pending, is woken from a cancellable wait, and
 * runs the handler on itself at its next interposed call. A handler without
 * SA_RESTART makes the interrupted call fail with EINTR. */

#include <sys/syscall.h>
#include <unistd.h>

struct kaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

#define KSA_RESTART 0x10000000
#define KSA_NODEFER 0x40000000
#define KSA_RESETHAND 0x80000000
#define KSA_SIGINFO 0x4

static bool default_ignores(int sig)
{
	return sig == SIGCHLD || sig == SIGURG || sig == SIGWINCH || sig == SIGCONT;
}

#define SIGQ_MAX 8 /* values queued to one thread; more: EAGAIN */

/* a value queued for sig to gp (sigqlock held); false when the queue is
 * full or cannot be made */
static bool sigq_add(bb_g *gp, int sig, uint64_t value)
{
	if (gp->sigq == NULL)
		gp->sigq = bb_alloc(SIGQ_MAX * sizeof *gp->sigq); /* kept with the G */
	if (gp->sigq == NULL || gp->nsigq >= SIGQ_MAX)
		return false;
	gp->sigq[gp->nsigq++] = (struct bb_sigq){sig, value};
	return true;
}

/* The siginfo of a signal sent to this thread: pthread_sigqueue's value
 * (SI_QUEUE) if one waits for sig in gp->sigq, in order, else what the
 * kernel gives a pthread_kill (code). A real-time signal queues every
 * instance: if another of sig waits, sig stays pending for it. */
static void own_siginfo(bb_g *gp, int sig, siginfo_t *si, int code)
{
	memset(si, 0, sizeof *si);
	si->si_signo = sig;
	si->si_code = code;
	si->si_pid = getpid(); /* sent from this process, whichever way */
	si->si_uid = getuid();
	if (gp == NULL || gp->sigq == NULL)
		return;
	bb_lock_acquire(&gp->sigqlock);
	int i = 0, n = gp->nsigq;
	while (i < n && gp->sigq[i].sig != sig)
		i++;
	if (i < n) {
		si->si_code = SI_QUEUE;
		si->si_value.sival_ptr = (void *)(uintptr_t)gp->sigq[i].value;
		memmove(&gp->sigq[i], &gp->sigq[i + 1], (size_t)(n - i - 1) * sizeof gp->sigq[0]);
		gp->nsigq = (uint8_t)--n;
		while (i < n && gp->sigq[i].sig != sig)
			i++;
		if (i < n) /* the next instance is delivered on its own */
			atomic_fetch_or(&gp->sigpending, BB_SIGBIT(sig));
	}
	bb_lock_release(&gp->sigqlock);
}

/* Take one signal of want sent to this thread (pthread_kill,
 * pthread_sigqueue) for sigwait and friends: its number, or 0. */
static int take_own(bb_g *gp, uint64_t want, siginfo_t *si)
{
	for (;;) {
		uint64_t own = atomic_load(&gp->sigpending) & want;
		if (own == 0)
			return 0;
		int sig = __builtin_ctzll(own) + 1;
		if (!(atomic_fetch_and(&gp->sigpending, ~BB_SIGBIT(sig)) & BB_SIGBIT(sig)))
			continue; /* taken meanwhile */
		own_siginfo(gp, sig, si, SI_USER); /* glibc folds the kernel's SI_TKILL into it */
		return sig;
	}
}

/* A process signal sysmon gave this G: dequeue it from the process's
 * pending set (it is blocked on our M until now), with its siginfo. False
 * if another thread took it first (an M running a G that takes it). */
/* sig dequeued now if pending, with its siginfo: the thread's own queue is
 * taken before the process's (the kernel's order) */
static bool take_now(int sig, siginfo_t *si)
{
	uint64_t set = BB_SIGBIT(sig);
	struct timespec zero = {0, 0};
	return bb_rawsyscall6(SYS_rt_sigtimedwait, (long)&set, (long)si, (long)&zero, 8, 0, 0) == sig;
}

static bool take_process_signal(int sig, siginfo_t *si)
{
	if (bb_take_stashed(sig, si))
		return true; /* kept by a handler that could not run it (trampoline) */
	return take_now(sig, si);
}

static void program_action(int sig, struct kaction *ka);
static int get_kaction(int sig, struct kaction *ka);
static void reset_hand(int sig);

/* Run sig's action on the G as the kernel would on its thread, si its
 * siginfo: the G's own handler, under its mask plus the action's */
static void run_action(int sig, siginfo_t *si)
{
	bb_g *gp = bb_getg();
	struct kaction ka;
	if (get_kaction(sig, &ka) != 0)
		return;
	program_action(sig, &ka);
	if (ka.handler == SIG_IGN) {
		gp->sig_ignored = true;
		return;
	}
	if (ka.handler == SIG_DFL) {
		if (!default_ignores(sig)) /* the default action is the process's */
			bb_rawsyscall6(SYS_tgkill, getpid(), bb_getm()->tid, sig, 0, 0, 0);
		else
			gp->sig_ignored = true;
		return;
	}
	uint64_t saved = gp->sigmask;
	uint64_t during = saved | ka.mask;
	if (!(ka.flags & KSA_NODEFER))
		during |= 1ull << (sig - 1);
	gp->sigmask = during;
	bb_apply_sigmask(bb_getm(), during);
	if (ka.flags & KSA_RESETHAND)
		reset_hand(sig);
	int saved_errno = errno;
	if (ka.flags & KSA_SIGINFO) {
		/* the third argument is never NULL from the kernel: a
		 * context of this point, with the mask the G had */
		ucontext_t uc;
		getcontext(&uc);
		sigemptyset(&uc.uc_sigmask);
		memcpy(&uc.uc_sigmask, &saved, sizeof saved);
		((void (*)(int, siginfo_t *, void *))ka.handler)(sig, si, &uc);
	} else {
		((void (*)(int))ka.handler)(sig);
	}
	errno = saved_errno;
	gp = bb_getg();
	gp->sigmask = saved;
	bb_apply_sigmask(bb_getm(), saved | atomic_load(&gp->procsig));
	gp->sig_ran = true;
	if (!(ka.flags & KSA_RESTART))
		gp->sig_eintr = true;
}

void bb_deliver_outside_wait(int sig, siginfo_t *si)
{
	bb_g *gp = bb_getg();
	bool ran = gp->sig_ran, eintr = gp->sig_eintr;
	if (sig > 0)
		run_action(sig, si);
	else
		bb_deliver_signals();
	gp = bb_getg();
	gp->sig_ran = ran;
	gp->sig_eintr = eintr;
}

void bb_deliver_signals(void)
{
	bb_g *gp = bb_getg();
	for (;;) {
		uint64_t own = atomic_load(&gp->sigpending) & ~gp->sigmask;
		uint64_t proc = atomic_load(&gp->procsig) & ~gp->sigmask;
		if ((own | proc) == 0)
			return;
		siginfo_t si;
		int sig;
		if (own) {
			sig = __builtin_ctzll(own) + 1;
			atomic_fetch_and(&gp->sigpending, ~BB_SIGBIT(sig));
			own_siginfo(gp, sig, &si, SI_TKILL); /* as the kernel fills it in */
		} else {
			sig = __builtin_ctzll(proc) + 1;
			bool taken = take_process_signal(sig, &si);
			atomic_fetch_and(&gp->procsig, ~BB_SIGBIT(sig));
			bb_sigwatch_add(BB_SIGBIT(sig)); /* sysmon may route the next one */
			bb_apply_sigmask(bb_getm(), gp->sigmask | atomic_load(&gp->procsig));
			if (!taken)
				continue;
		}
		run_action(sig, &si);
		gp = bb_getg();
	}
}

static void poke(void)
{
	bb_deliver_signals();
}

/* ---- signals with a handler, and sleeps ----
 *
 * A sleep ends with EINTR when a handler runs while it waits. A process
 * signal the kernel hands to this M while its G is still entering the sleep
 * (bobbin's code, before the G parks) would run the handler right there,
 * and the sleep would then last its whole time: natively that window is a
 * few instructions before the system call, here it is the whole entry.
 * (POSIX AIO with SIGEV_SIGNAL around a usleep, as stress-ng --aio does,
 * slept its full 250 ms in about one wait of 16.) So a G entering a sleep
 * blocks on its M the signals that have a handler and that it lets in:
 * one that comes meanwhile stays pending until sysmon hands it to a G that
 * takes it, the sleeper first once parked (main first, as the kernel
 * prefers), and the sleep ends with EINTR. The next G the M runs, or this
 * one when it runs again, has its own mask put back (bb_execute).
 *
 * handled: the signals whose action is a handler, as set by the calls that
 * change actions (from their own arguments) or read from the kernel at
 * start-up. */
static _Atomic uint64_t handled;

/* sig's action is now h (on success of the call that set it) */
static void note_handler(int sig, void *h)
{
	if (sig < 1 || sig > 64)
		return;
	if (h != (void *)SIG_DFL && h != (void *)SIG_IGN)
		atomic_fetch_or(&handled, BB_SIGBIT(sig));
	else
		atomic_fetch_and(&handled, ~BB_SIGBIT(sig));
}

/* sig's action as the kernel has it (at start-up) */
static void note_action(int sig)
{
	struct kaction ka;
	if (sig >= 1 && sig <= 64 && get_kaction(sig, &ka) == 0)
		note_handler(sig, ka.handler);
}

/* Of the process signals sigs, those that go to main rather than gp, as
 * the kernel gives them to the main thread first when it lets them in.
 * Not SIGCHLD: the kernel prefers the thread that forked the child (its
 * parent task), which is the OS thread it lands on or is pending for. */
static uint64_t main_takes(bb_g *gp, uint64_t sigs)
{
	uint64_t r = 0;
	if (gp == bb_main_g || bb_main_g == NULL)
		return 0;
	for (uint64_t s = sigs & ~BB_SIGBIT(SIGCHLD); s; s &= s - 1)
		if (bb_g_takes(bb_main_g, s & -s))
			r |= s & -s;
	return r;
}

bool bb_block_handled_for_wait(void)
{
	bb_g *gp = bb_getg();
	uint64_t catch = atomic_load_explicit(&handled, memory_order_relaxed) & BB_IDLE_MASK &
			 ~gp->sigmask;
	if (catch == 0)
		return false;
	bb_sysmon_ensure(); /* someone must hand on what stays pending */
	bb_m *mp = bb_getm();
	bb_apply_sigmask(mp, mp->sigmask | catch);
	/* sysmon stops watching a signal it found no taker for (this G ran
	 * its handler with it blocked, say): what stays pending now must be
	 * seen again */
	bb_sigwatch_add(catch);
	/* one already pending ends the sleep before it starts, as the
	 * kernel's nanosleep returns EINTR at once: its handler runs here.
	 * Not one main takes: the kernel gives it to main first (sysmon
	 * hands it on) */
	uint64_t pend = 0;
	if (bb_rawsyscall6(SYS_rt_sigpending, (long)&pend, 8, 0, 0, 0, 0) == 0)
		pend &= catch & ~main_takes(gp, pend & catch);
	if (pend) {
		atomic_fetch_or(&gp->procsig, pend);
		bb_deliver_signals();
		if (bb_getg()->sig_ran)
			return true;
		mp = bb_getm(); /* none ran after all (ignored meanwhile): block again */
		bb_apply_sigmask(mp, mp->sigmask | catch);
	}
	return false;
}

/* after the sleep, on whatever M the G runs now: its own mask again (a
 * sleep that never parked, or a G resumed in place, saw no bb_execute) */
void bb_unblock_after_wait(void)
{
	bb_g *gp = bb_getg();
	bb_apply_sigmask(bb_getm(), gp->sigmask | atomic_load(&gp->procsig));
}

/* ---- the program's handlers, as the kernel runs them ----
 *
 * The kernel runs a handler on whatever M takes a process signal, at any
 * instruction of the G running there, bobbin's own code included, inside a
 * signal frame on that OS thread. Two things follow.
 * - Over bobbin's own code (an interposed call halfway through, a system
 *   call made for the G, the switch to another G) nothing the handler calls
 *   may switch the G or touch the scheduler: the code below may hold the M
 *   and P in registers, or be changing a run queue. Such a handler runs
 *   natively: its interposed calls run as on a thread bobbin did not make
 *   (mp->sigframe_fp, bb_on_g).
 * - Over the program's own code the handler is the G's and may wait as the
 *   G's code may: a blocking call lets the P go, and the G may come back on
 *   another M. Its signal frame then ends on another OS thread than it
 *   began on, and the kernel's return from it (rt_sigreturn) installs the
 *   first thread's alternate signal stack, saved in the frame, on the
 *   second: two Ms shared one alternate stack, and two signals taken at
 *   once on it overwrote each other's frames (an M resumed another M's
 *   registers; selfpipe_signals crashed in ~5 runs of 100). The saved
 *   stack is made this thread's own before the frame returns, and bobbin's
 *   record of the thread's mask what the return will set.
 *
 * So a handler the program installs is installed as `trampoline`, which
 * looks at where it landed and calls the program's. The calls that read an
 * action back see the program's own handler and flags. A handler installed
 * by a raw rt_sigaction system call is not seen. */
struct progact {
	void *fn;
	uint64_t mask; /* sa_mask: blocked while it runs, with the signal */
	bool siginfo;  /* SA_SIGINFO: fn takes three arguments */
	bool nodefer;
	_Atomic bool ready;
};
#define NPROGACT 4096
/* interned (handler, mask, flags), never freed: a handler running may
 * still read one that a later sigaction replaced */
static struct progact progacts[NPROGACT];
static _Atomic int nprogacts;
static _Atomic(const struct progact *) acts[65];
static _Atomic uint64_t interrupting; /* siginterrupt(sig, 1): signal() leaves out SA_RESTART */

/* lock-free, so that a handler may call sigaction (it is async-signal-safe) */
static const struct progact *intern(void *fn, uint64_t mask, bool siginfo, bool nodefer)
{
	int n = atomic_load(&nprogacts);
	for (int i = 0; i < n && i < NPROGACT; i++) {
		const struct progact *a = &progacts[i];
		if (atomic_load_explicit(&a->ready, memory_order_acquire) && a->fn == fn &&
		    a->mask == mask && a->siginfo == siginfo && a->nodefer == nodefer)
			return a;
	}
	int i = atomic_fetch_add(&nprogacts, 1);
	if (i >= NPROGACT)
		return NULL;
	struct progact *a = &progacts[i];
	a->fn = fn;
	a->mask = mask;
	a->siginfo = siginfo;
	a->nodefer = nodefer;
	atomic_store_explicit(&a->ready, true, memory_order_release);
	return a;
}

static void call_program(const struct progact *a, int sig, siginfo_t *si, void *uc)
{
	if (a->siginfo)
		((void (*)(int, siginfo_t *, void *))a->fn)(sig, si, uc);
	else
		((void (*)(int))a->fn)(sig);
}


static void trampoline(int sig, siginfo_t *si, void *ucv);

/* A process signal that lands on an M between two Gs (the M keeps the mask
 * of the G it ran last; curg may still name the G that is parking), or on a
 * G in bobbin's code on its way into a wait that a signal cuts short, is
 * kept for sysmon, which gives it to a G that takes it (runtime/sysmon.c):
 * its handler runs on that thread and the wait ends with EINTR. Run here,
 * it would run as on a thread bobbin did not make, and the wait would go
 * on. (A wait marks itself with waitkind as it parks, a semaphore's with
 * wakeon from before it shows as a waiter.) Not kept: what the kernel sends
 * a thread of its own (the faults, SIGPIPE, SIGXFSZ, a tgkill), an action
 * SA_RESETHAND reset on delivery (the handler must run now), and a second
 * one of a signal already kept. */
/* kept for sysmon unless SA_RESETHAND reset the action on delivery (the
 * handler must run now) */
static bool keep_handled(int sig, const siginfo_t *si)
{
	struct kaction ka;
	if (get_kaction(sig, &ka) != 0 || ka.handler != (void *)trampoline)
		return false;
	return bb_stash_signal(sig, si);
}

/* sent to the process, not to this thread (a tgkill, or a fault of its own) */
static bool process_directed(int sig, const siginfo_t *si)
{
	const uint64_t own_thread = BB_SIGBIT(SIGSEGV) | BB_SIGBIT(SIGBUS) | BB_SIGBIT(SIGFPE) |
				    BB_SIGBIT(SIGILL) | BB_SIGBIT(SIGTRAP) | BB_SIGBIT(SIGSYS) |
				    BB_SIGBIT(SIGPIPE) | BB_SIGBIT(SIGXFSZ) | BB_SIGBIT(bb_presig());
	return si != NULL && si->si_code != SI_TKILL && !(BB_SIGBIT(sig) & own_thread);
}

static bool keep_for_sysmon(bb_m *mp, bb_g *gp, int sig, const siginfo_t *si)
{
	if (!process_directed(sig, si))
		return false;
	uint32_t st = gp ? atomic_load(&gp->status) : Gdead;
	if (st == Gsyscall)
		return false; /* the signal cuts that call short: as natively */
	if (st == Grunning && atomic_load(&gp->waitkind) == BB_WAIT_NONE &&
	    !(gp->wakeon & BB_WAKE_SIGNAL))
		return false; /* not waiting: it runs over bobbin's code */
	if (gp == NULL && mp->sigframe_fp != 0)
		return false; /* inside another such handler: it runs here */
	return keep_handled(sig, si);
}

static void trampoline(int sig, siginfo_t *si, void *ucv)
{
	const struct progact *a = atomic_load_explicit(&acts[sig], memory_order_acquire);
	if (a == NULL)
		return; /* cannot be: set before the action */
	if (sig == SIGURG && bb_urg_ours(si))
		return; /* bobbin's, sent before its signal left SIGURG */
	ucontext_t *uc = ucv;
	bb_m *mp = bb_active ? bb_self_m() : NULL;
	bb_g *gp = mp ? mp->curg : NULL;
	uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
	if (mp) /* owner only: sysmon reads it (runtime/sysmon.c) */
		atomic_store_explicit(&mp->sigs_run,
				      atomic_load_explicit(&mp->sigs_run, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	/* the G's own handler: on its stack, over the program's code. Not over
	 * glibc's: that code may hold one of glibc's locks (a malloc arena's),
	 * and a G switched away inside the handler (a preemption, a wait in an
	 * interposed call) kept it while the thread that needed it waited in
	 * the kernel: a fork's prepare handlers, which run after bobbin's has
	 * taken the scheduler's lock, waited for ever (Node's worker threads
	 * spawning children while SIGCHLD's handler ran over malloc) */
	bool own = false;
	if (gp && fp >= gp->stack_lo && fp < gp->stack_hi) {
		uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
		uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
		own = !bb_pc_in_bobbin(pc) && !bb_pc_lockable(pc) && gp->libclocks == 0 &&
		      !bb_rt_live(gp, sp) &&
		      !bb_sig_native_live(mp, gp, sp);
	}
	if (!own && mp && keep_for_sysmon(mp, gp, sig, si))
		return;
	/* The kernel gives a process signal to the main thread first when it
	 * lets it in; the OS thread it picked here (often the process's first,
	 * which runs any G) may run another. Main takes it instead, through
	 * sysmon, as a signal kept above: a main that waits in pause() for its
	 * SIGINT while workers run would otherwise wait on. */
	if (mp && process_directed(sig, si) && main_takes(gp, BB_SIGBIT(sig)) &&
	    keep_handled(sig, si))
		return;
	if (!own) {
		/* not the G's: on no G's stack (a thread bobbin did not make,
		 * an M between two Gs, an alternate signal stack), or over
		 * bobbin's code or such a handler. Its interposed calls run
		 * natively and its wake-ups go through sysmon: the code below
		 * may be halfway through switching Gs or changing a run
		 * queue. Nothing switches the G meanwhile: mp stays the M */
		if (mp == NULL) {
			call_program(a, sig, si, uc);
			return;
		}
		uintptr_t ofp = mp->sigframe_fp, ora = mp->sigframe_ra;
		mp->sigframe_ra = (uintptr_t)__builtin_return_address(0);
		atomic_signal_fence(memory_order_seq_cst);
		mp->sigframe_fp = fp;
		atomic_signal_fence(memory_order_seq_cst);
		call_program(a, sig, si, uc);
		atomic_signal_fence(memory_order_seq_cst);
		mp->sigframe_fp = ofp;
		mp->sigframe_ra = ora;
		return;
	}
	/* the G's own handler: while it runs, the G's mask blocks what the
	 * kernel blocked for it (bobbin sets the G's mask on whatever M it
	 * runs, and would otherwise let the signal in again) */
	uint64_t saved = gp->sigmask, ucmask;
	memcpy(&ucmask, &uc->uc_sigmask, sizeof ucmask);
	gp->sigmask = (saved | a->mask | (a->nodefer ? 0 : BB_SIGBIT(sig))) & ~BB_GLIBC_SIGNALS;
	call_program(a, sig, si, uc);
	bb_m *now = bb_getm();
	now->curg->sigmask = saved;
	if (now != mp) {
		/* the frame returns on another OS thread: with its stack */
		stack_t ss;
		if (bb_sys(SYS_sigaltstack, NULL, &ss, 0) == 0) /* the kernel's, raw */
			uc->uc_stack = ss;
	}
	now->sigmask = ucmask; /* the kernel's mask once the frame returns */
}

/* A kept signal whose taker sleeps in a system call (main in pause(),
 * waiting for the SIGALRM that ends stress-ng's stressor): sysmon names it
 * in mp->resend and sends the G's M bobbin's SIGURG (runtime/sysmon.c). On
 * that thread, over the call, the program's handler runs here as the
 * kernel would have run it, had the signal landed there: with the siginfo
 * kept, under the mask the call waits with plus the action's. Bobbin's
 * SIGURG restarts what it interrupts: without SA_RESTART the call fails
 * with EINTR instead, as the signal itself would have made it (the context
 * the kernel rewound to the system call instruction goes past it). An
 * action no longer a handler, or a G on its way into a masked wait (whose
 * call will let the signal in): the kernel's again, pending on this
 * thread, siginfo and all (a thread may queue any code to itself). */
static void run_resent(bb_m *mp, bb_g *gp, uint64_t bits, void *ucv)
{
	ucontext_t *uc = ucv;
	if (atomic_load(&gp->status) != Gsyscall)
		return; /* it left the call: sysmon hands them on again */
	/* where the SIGURG landed: at the program's system call instruction
	 * (the kernel rewound the call to restart it, or it was about to be
	 * made), or just past one that failed with EINTR */
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	bool ours = !bb_pc_in_bobbin(pc);
	bool at_call = ours && *(const uint16_t *)pc == 0x050f; /* syscall */
	bool cut = ours && *(const uint16_t *)(pc - 2) == 0x050f &&
		   uc->uc_mcontext.gregs[REG_RAX] == -EINTR;
	/* the thread's mask there: the wait's in a masked wait */
	uint64_t ucmask;
	memcpy(&ucmask, &uc->uc_sigmask, sizeof ucmask);
	uint64_t base = gp->masked_wait ? gp->waitmask : ucmask;
	while (bits) {
		int sig = __builtin_ctzll(bits) + 1;
		bits &= bits - 1;
		siginfo_t si;
		struct kaction ka;
		if (!bb_g_takes(gp, BB_SIGBIT(sig)) || get_kaction(sig, &ka) != 0 ||
		    !bb_take_stashed(sig, &si))
			continue;
		/* blocked there, apart from the signals handed to the G, which
		 * bobbin blocks on its M until taken */
		bool blocked = !gp->masked_wait &&
			       (ucmask & ~atomic_load(&gp->procsig) & BB_SIGBIT(sig));
		if (ka.handler != (void *)trampoline || (gp->masked_wait && !at_call && !cut) ||
		    blocked) {
			/* the kernel's on this thread: an action no longer a
			 * handler, a masked wait not yet in its call, which
			 * will take it there, or a thread that blocks it now
			 * (inside a handler of the signal that runs natively,
			 * over glibc's code: a second one ran inside the first,
			 * and a token the two passed round was lost) */
			bb_rawsyscall6(SYS_rt_tgsigqueueinfo, getpid(), mp->tid, sig, (long)&si, 0, 0);
			continue;
		}
		uint64_t old, during = base | ka.mask | ((ka.flags & KSA_NODEFER) ? 0 : BB_SIGBIT(sig));
		during &= ~(BB_SIGBIT(SIGKILL) | BB_SIGBIT(SIGSTOP));
		bb_rawsyscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&during, (long)&old, 8, 0, 0);
		trampoline(sig, &si, uc);
		bb_rawsyscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
		if (at_call && !(ka.flags & KSA_RESTART)) {
			uc->uc_mcontext.gregs[REG_RAX] = -EINTR;
			uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(pc + 2);
		}
	}
}

/* an action as the kernel has it, back to what the program installed */
static void show_program(struct sigaction *old, const struct progact *a)
{
	bb_segv_show(old);
	if (old->sa_sigaction != trampoline || a == NULL)
		return;
	old->sa_sigaction = (void (*)(int, siginfo_t *, void *))a->fn;
	if (!a->siginfo)
		old->sa_flags &= ~SA_SIGINFO;
}

/* the kernel's action for sig (read raw), with the program's handler */
static void program_action(int sig, struct kaction *ka)
{
	if (ka->handler != (void *)trampoline)
		return;
	const struct progact *a = atomic_load_explicit(&acts[sig], memory_order_acquire);
	if (a == NULL)
		return;
	ka->handler = a->fn;
	ka->flags = a->siginfo ? ka->flags | KSA_SIGINFO : ka->flags & ~(unsigned long)KSA_SIGINFO;
}

/* SIGURG while it is bobbin's preemption signal in the kernel
 * (bb_async_preempt): the program's action for it lives here, never in the
 * kernel. Go's run time (cgo programs) and haproxy install handlers for it,
 * which replaced bobbin's: threads asleep in raw system calls then never
 * gave up their P, and a cgo program hung at BOBBIN_MAXPROCS=1 and 2. A
 * SIGURG that bobbin did not send (bb_urg_ours) runs this action
 * (urg_program); pthread_kill's reach it through bb_deliver_signals. */
/* Lock-free (a handler may read it over a sigaction that changes it, on
 * the same thread): records are written once into a ring of slots and
 * published by pointer; a reader copies the one it loaded */
#define NURGACT 16
static struct sigaction urg_slots[NURGACT];
static _Atomic unsigned urg_nslot;
static const struct sigaction urg_dfl; /* all zero: SIG_DFL */
static _Atomic(const struct sigaction *) urg_act = &urg_dfl;

static bool urg_virtual(int sig)
{
	return sig == bb_presig() && bb_async_preempt && !bb_in_vm_child();
}

static int get_kaction(int sig, struct kaction *ka)
{
	if (!urg_virtual(sig))
		return (int)bb_rawsyscall6(SYS_rt_sigaction, sig, 0, (long)ka, 8, 0, 0);
	const struct sigaction *a = atomic_load_explicit(&urg_act, memory_order_acquire);
	ka->handler = (void *)a->sa_handler;
	ka->flags = (unsigned long)a->sa_flags;
	ka->restorer = NULL;
	memcpy(&ka->mask, &a->sa_mask, sizeof ka->mask);
	return 0;
}

/* SA_RESETHAND: the action goes back to SIG_DFL as the handler starts */
static void reset_hand(int sig)
{
	if (urg_virtual(sig)) {
		atomic_store_explicit(&urg_act, &urg_dfl, memory_order_release);
		note_handler(sig, (void *)SIG_DFL);
		return;
	}
	struct kaction dfl = {SIG_DFL, 0, NULL, 0};
	bb_rawsyscall6(SYS_rt_sigaction, sig, (long)&dfl, 0, 8, 0, 0);
}

static int set_urg(int sig, const struct sigaction *act, struct sigaction *old)
{
	const struct progact *a = NULL;
	void *h = act ? (void *)act->sa_handler : NULL;
	if (act && h != (void *)SIG_DFL && h != (void *)SIG_IGN) {
		uint64_t mask;
		memcpy(&mask, &act->sa_mask, sizeof mask);
		a = intern(h, mask, act->sa_flags & SA_SIGINFO, act->sa_flags & SA_NODEFER);
		if (a == NULL) {
			errno = ENOMEM;
			return -1;
		}
		bb_sysmon_ensure();
		atomic_store_explicit(&acts[sig], a, memory_order_release);
	}
	const struct sigaction *prev;
	if (act) {
		struct sigaction *slot = &urg_slots[atomic_fetch_add(&urg_nslot, 1) % NURGACT];
		*slot = *act;
		prev = atomic_exchange_explicit(&urg_act, slot, memory_order_acq_rel);
	} else {
		prev = atomic_load_explicit(&urg_act, memory_order_acquire);
	}
	if (old)
		*old = *prev;
	if (act)
		note_handler(sig, h);
	return 0;
}

/* a SIGURG the kernel delivered that bobbin did not send (preempt.c) */
static void trampoline(int sig, siginfo_t *si, void *ucv);
static void urg_program(int sig, siginfo_t *si, void *uc)
{
	struct kaction ka;
	get_kaction(sig, &ka);
	if (ka.handler == (void *)SIG_DFL || ka.handler == (void *)SIG_IGN)
		return; /* SIGURG's default action: ignored */
	bb_m *mp = bb_active ? bb_self_m() : NULL;
	bb_g *gp = mp ? mp->curg : NULL;
	if (gp && (__atomic_load_n(&gp->sigmask, __ATOMIC_RELAXED) & BB_SIGBIT(sig))) {
		/* the thread blocks it (in bobbin's mask, not the kernel's):
		 * pending for it, taken when it unblocks */
		atomic_fetch_or(&gp->sigpending, BB_SIGBIT(sig));
		return;
	}
	if (ka.flags & KSA_RESETHAND)
		reset_hand(sig);
	trampoline(sig, si, uc);
}

static int set_action(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (urg_virtual(sig))
		return set_urg(sig, act, old);
	/* a vfork child's actions are its own (the kernel's table is its
	 * own), bobbin's records of the program's handlers the parent's */
	bool child = bb_in_vm_child();
	void *h = act ? (void *)act->sa_handler : NULL;
	const struct progact *a = NULL;
	if (act && bb_active && !child && sig >= 1 && sig <= 64 && h != (void *)SIG_DFL &&
	    h != (void *)SIG_IGN) {
		uint64_t mask;
		memcpy(&mask, &act->sa_mask, sizeof mask);
		a = intern(h, mask, act->sa_flags & SA_SIGINFO, act->sa_flags & SA_NODEFER);
		if (a == NULL) {
			static _Atomic int warned;
			if (!atomic_exchange(&warned, 1))
				bb_printf("bobbin: more than %d distinct signal actions; later "
					  "handlers run unguarded\n", NPROGACT);
		}
	}
	if (a == NULL) {
		int r = bb_real_sigaction(sig, act, old);
		if (r == 0 && old && sig >= 1 && sig <= 64)
			show_program(old, atomic_load(&acts[sig]));
		if (r == 0 && act && !child)
			note_handler(sig, h);
		return r;
	}
	bb_sysmon_ensure(); /* it takes the handlers' wake-ups (runtime/sysmon.c) */
	struct sigaction w = *act;
	w.sa_sigaction = trampoline;
	w.sa_flags |= SA_SIGINFO;
	/* published before the kernel can run the trampoline for it */
	const struct progact *prev = atomic_exchange(&acts[sig], a);
	int r = bb_real_sigaction(sig, &w, old);
	if (r != 0) {
		atomic_compare_exchange_strong(&acts[sig], &a, prev);
		return r;
	}
	if (old)
		show_program(old, prev);
	note_handler(sig, h);
	return 0;
}

BB_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return set_action(sig, act, old);
}

BB_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return set_action(sig, act, old);
}

/* glibc's signal() and its relatives set their actions through an
 * internal sigaction that no interposition reaches: done here, as they do */
static sighandler_t set_handler(int sig, sighandler_t h, int flags, bool block_self)
{
	if (h == SIG_ERR || sig < 1 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sigemptyset(&sa.sa_mask);
	if (block_self)
		sigaddset(&sa.sa_mask, sig);
	sa.sa_flags = flags;
	if (set_action(sig, &sa, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* BSD semantics, glibc's signal(): restarting, unless siginterrupt said not */
static sighandler_t bsd_handler(int sig, sighandler_t h)
{
	bool intr = sig >= 1 && sig <= 64 && (atomic_load(&interrupting) & BB_SIGBIT(sig));
	return set_handler(sig, h, intr ? 0 : SA_RESTART, true);
}

BB_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	return bsd_handler(sig, h);
}

BB_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return bsd_handler(sig, h);
}

BB_EXPORT sighandler_t ssignal(int sig, sighandler_t h)
{
	return bsd_handler(sig, h);
}

/* System V semantics: reset at delivery, not blocked while it runs */
BB_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, SA_RESETHAND | SA_NODEFER, false);
}

BB_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, SA_RESETHAND | SA_NODEFER, false);
}

BB_EXPORT int siginterrupt(int sig, int interrupt)
{
	struct sigaction a;
	if (sig < 1 || sig >= NSIG) {
		errno = EINVAL;
		return -1;
	}
	if (set_action(sig, NULL, &a) < 0)
		return -1;
	if (interrupt) {
		atomic_fetch_or(&interrupting, BB_SIGBIT(sig));
		a.sa_flags &= ~SA_RESTART;
	} else {
		atomic_fetch_and(&interrupting, ~BB_SIGBIT(sig));
		a.sa_flags |= SA_RESTART;
	}
	return set_action(sig, &a, NULL);
}

/* The BSD and System V mask calls: glibc's make its own sigprocmask call,
 * past bobbin's, so the kernel's mask changed and the thread's in bobbin
 * did not (a G's mask is bobbin's, applied to whatever OS thread runs it).
 * dash clears its mask with sigsetmask(0) after a vfork: the next
 * sigprocmask answered the old mask, every signal blocked, and its `wait`
 * suspended with SIGCHLD blocked for ever. */
static int bsd_mask(int how, const int *mask)
{
	sigset_t set, old;
	sigemptyset(&set);
	if (mask) {
		uint64_t m = (uint32_t)*mask; /* the first 32 signals */
		memcpy(&set, &m, sizeof m);
	}
	if (sigprocmask(how, mask ? &set : NULL, &old) < 0)
		return -1;
	uint64_t o;
	memcpy(&o, &old, sizeof o);
	return (int)(uint32_t)o;
}

BB_EXPORT int sigsetmask(int mask)
{
	return bsd_mask(SIG_SETMASK, &mask);
}

BB_EXPORT int sigblock(int mask)
{
	return bsd_mask(SIG_BLOCK, &mask);
}

BB_EXPORT int siggetmask(void)
{
	return bsd_mask(SIG_BLOCK, NULL);
}

static int one_signal(int how, int sig)
{
	sigset_t set;
	sigemptyset(&set);
	if (sigaddset(&set, sig) < 0)
		return -1;
	return sigprocmask(how, &set, NULL);
}

BB_EXPORT int sighold(int sig)
{
	return one_signal(SIG_BLOCK, sig);
}

BB_EXPORT int sigrelse(int sig)
{
	return one_signal(SIG_UNBLOCK, sig);
}

BB_EXPORT int sigignore(int sig)
{
	struct sigaction act;
	memset(&act, 0, sizeof act);
	act.sa_handler = SIG_IGN;
	sigemptyset(&act.sa_mask);
	return set_action(sig, &act, NULL);
}

/* BSD's sigpause(mask): wait for a signal under that mask (the symbol
 * sigpause; <signal.h> names System V's, below, so) */
BB_EXPORT int bsd_sigpause(int mask) __asm__("sigpause");
BB_EXPORT int bsd_sigpause(int mask)
{
	sigset_t set;
	sigemptyset(&set);
	uint64_t m = (uint32_t)mask;
	memcpy(&set, &m, sizeof m);
	return sigsuspend(&set);
}

/* System V's (what <signal.h> names sigpause under _XOPEN_SOURCE): wait for
 * a signal with sig unblocked */
BB_EXPORT int __xpg_sigpause(int sig)
{
	sigset_t set;
	if (sigprocmask(SIG_BLOCK, NULL, &set) < 0 || sigdelset(&set, sig) < 0)
		return -1;
	return sigsuspend(&set);
}

/* System V's sigset: SIG_HOLD blocks; a disposition also unblocks */
BB_EXPORT sighandler_t sigset(int sig, sighandler_t disp)
{
	sigset_t set, oset;
	sigemptyset(&set);
	if (sigaddset(&set, sig) < 0)
		return SIG_ERR;
	struct sigaction act, oact;
	if (disp == SIG_HOLD) {
		if (sigprocmask(SIG_BLOCK, &set, &oset) < 0)
			return SIG_ERR;
		if (sigismember(&oset, sig))
			return SIG_HOLD;
		if (set_action(sig, NULL, &oact) < 0)
			return SIG_ERR;
		return oact.sa_handler;
	}
	memset(&act, 0, sizeof act);
	act.sa_handler = disp;
	sigemptyset(&act.sa_mask);
	if (set_action(sig, &act, &oact) < 0)
		return SIG_ERR;
	if (sigprocmask(SIG_UNBLOCK, &set, &oset) < 0)
		return SIG_ERR;
	return sigismember(&oset, sig) ? SIG_HOLD : oact.sa_handler;
}

static void reclaim_thread_signals(bb_g *gp, uint64_t set);

void bb_signal_init(void)
{
	bb_sigpoke_hook = poke;
	bb_offstack_sig_hook = bb_pending_to_kernel;
	bb_urg_program_hook = urg_program;
	bb_resend_hook = run_resent;
	bb_reclaim_hook = reclaim_thread_signals;
	for (int sig = 1; sig <= 64; sig++)
		note_action(sig); /* actions set before bobbin started */
}

/* once bobbin runs: handlers installed before it started, guarded too */
void bb_signal_guard_existing(void)
{
	for (int sig = 1; sig <= 64; sig++) {
		struct sigaction cur;
		if (sig == 32 || sig == 33 || bb_real_sigaction(sig, NULL, &cur) != 0)
			continue;
		void *h = (void *)cur.sa_handler;
		if (h == (void *)SIG_DFL || h == (void *)SIG_IGN || h == (void *)trampoline)
			continue;
		Dl_info in, self;
		if (dladdr(h, &in) && dladdr((void *)trampoline, &self) && in.dli_fbase == self.dli_fbase)
			continue; /* bobbin's own */
		set_action(sig, &cur, NULL);
	}
}

static bool catch_late_wait(bb_g *gp, int sig, bb_m *mp);

/* Make sig pending for gp, which is not in a system call on its M: a
 * running G takes it at once (the preemption signal makes it call the
 * handler, preempt.c) or at its next call into bobbin, a parked one is
 * woken to run it. */
static void post_signal(bb_g *gp, uint32_t st, int sig)
{
	uint64_t bit = BB_SIGBIT(sig);
	atomic_fetch_or(&gp->sigpending, bit);
	/* a wait entered since the caller read st (a G that waited for a
	 * processor then, and looked before the bit was set), or running:
	 * the preemption signal makes it look */
	bb_m *mp = gp->m;
	if (mp && mp->tid > 0) {
		if (catch_late_wait(gp, sig, mp))
			return;
		if (st == Grunning && bb_async_preempt)
			bb_urg_send(mp->tid);
	}
	/* parked, or about to park (still running, it may be past its last
	 * look at sigpending): let it wake and run the handler. Not for a
	 * signal it blocks: that stays pending (its sigwait, sigpending or an
	 * unblock takes it) and cuts no sleep short. Read after the bit is set
	 * (a full barrier), against pthread_sigmask's store and fence. */
	if (!(__atomic_load_n(&gp->sigmask, __ATOMIC_RELAXED) & BB_SIGBIT(sig)))
		bb_interrupt(gp, BB_WAKE_SIGNAL);
}

/* A signal for gp that it blocks, sent while it is in a system call or by
 * itself: natively it waits in the thread's own kernel queue until the
 * thread unblocks it or waits for it. Sent to the kernel here, it would
 * wait in the queue of an OS thread the thread leaves, and another thread
 * run there would take it (a raise() of a blocked signal ran its handler
 * on another thread, 50 times of 50). Kept in bobbin instead
 * (gp->sigpending, with sigq's value), as for a thread not in a call:
 * unblocking runs it, sigwait and sigpending see it. A thread inside a
 * sigwait made before it is poked to look (bobbin's SIGURG, which that
 * wait takes too): the sigwait_set it stored, against the bit stored
 * here, one side sees the other. */
static bool call_takes(bb_g *gp, int sig);
static void to_kernel(bb_g *gp, bb_m *mp, int sig);

/* One of a thread's own signals (own_siginfo's) into OS thread tid's
 * kernel queue: one with a pthread_sigqueue value as sigqueue's, any other
 * by tgkill, which makes the same siginfo (the kernel takes a siginfo of
 * SI_TKILL or SI_USER only from the thread it goes to: from another, EPERM,
 * and the signal, taken back from the pending set, was lost) */
static void queue_to_thread(pid_t tid, int sig, const siginfo_t *si)
{
	if (si->si_code == SI_QUEUE)
		bb_rawsyscall6(SYS_rt_tgsigqueueinfo, getpid(), tid, sig, (long)si, 0, 0);
	else
		bb_rawsyscall6(SYS_tgkill, getpid(), tid, sig, 0, 0, 0);
}

static void post_blocked(bb_g *gp, int sig)
{
	atomic_fetch_or(&gp->sigpending, BB_SIGBIT(sig));
	bb_m *mp = gp->m;
	if (mp && mp->tid > 0)
		catch_late_wait(gp, sig, mp);
}

/* After sig's bit was set for gp (a full barrier): a wait gp published
 * since the sender looked at it, whose own look at the pending set may
 * have come before the bit. A masked wait that lets sig in, or a call that
 * may wait on a signalfd for it (which sees only its OS thread's signals,
 * unless its lend, bb_sigfd_begin, took it), takes it in the kernel, on
 * that OS thread, by whichever side takes the bit back; a sigwait for it
 * is poked (it takes bobbin's signal too, and looks again). The wait
 * stores what it waits for (or its status) before its look, the sender
 * sets the bit before this read: one side sees the other. True if the
 * signal went to the kernel. */
static bool catch_late_wait(bb_g *gp, int sig, bb_m *mp)
{
	uint64_t bit = BB_SIGBIT(sig);
	bool takes = atomic_load(&gp->masked_wait)
			     ? call_takes(gp, sig)
			     : (bit & atomic_load_explicit(&bb_sigfd_sigs, memory_order_relaxed) &
				__atomic_load_n(&gp->sigmask, __ATOMIC_RELAXED)) != 0;
	if (takes && atomic_load(&gp->status) == Gsyscall &&
	    (atomic_fetch_and(&gp->sigpending, ~bit) & bit)) {
		to_kernel(gp, mp, sig);
		return true;
	}
	if (atomic_load(&gp->sigwait_set) & bit)
		bb_urg_send(mp->tid);
	return false;
}

/* sig, taken from gp's pending set (its pthread_sigqueue value with it),
 * queued to the kernel for mp's OS thread, where gp waits in a call */
static void to_kernel(bb_g *gp, bb_m *mp, int sig)
{
	siginfo_t si;
	own_siginfo(gp, sig, &si, SI_TKILL);
	queue_to_thread(mp->tid, sig, &si);
}

void bb_pending_to_kernel(bb_g *gp, uint64_t mask)
{
	uint64_t in = atomic_load(&gp->sigpending) & ~mask & ~BB_GLIBC_SIGNALS;
	while (in) {
		int sig = __builtin_ctzll(in) + 1;
		in &= in - 1;
		if (atomic_fetch_and(&gp->sigpending, ~BB_SIGBIT(sig)) & BB_SIGBIT(sig))
			to_kernel(gp, gp->m, sig);
	}
}

/* gp runs a handler that the kernel (or bobbin over code that may hold a
 * lock) ran over that code on mp: it cannot leave mp before the handler
 * returns, and its calls go straight to the kernel, which is where a
 * signal for it must go too (a sigsuspend there waited for ever for a
 * restart signal kept in bobbin: Guile's collector) */
static bool in_native_handler(bb_g *gp, uint32_t st, bb_m *mp)
{
	return st == Grunning && mp && mp->curg == gp && mp->sigframe_fp != 0;
}

/* gp, inside a system call on its M, lets the kernel take sig there: it
 * does not block it (the call's own mask in sigsuspend and the like), or
 * the call waits for it (sigwait: its siginfo from the kernel), or a
 * signalfd may (lent signals, bb_sigfd_begin) */
static bool call_takes(bb_g *gp, int sig)
{
	uint64_t bit = BB_SIGBIT(sig);
	uint64_t mask = gp->masked_wait ? gp->waitmask : __atomic_load_n(&gp->sigmask, __ATOMIC_RELAXED);
	return !(mask & bit) || (bit & atomic_load(&gp->sigwait_set)) ||
	       (bit & atomic_load_explicit(&bb_sigfd_sigs, memory_order_relaxed));
}

/* the running G sends sig to itself and blocks it (see post_blocked) */
static bool own_blocked(bb_g *gp, int sig)
{
	return sig > 0 && sig <= 64 && !(BB_SIGBIT(sig) & BB_GLIBC_SIGNALS) &&
	       (__atomic_load_n(&gp->sigmask, __ATOMIC_RELAXED) & BB_SIGBIT(sig));
}

BB_EXPORT int pthread_kill(pthread_t th, int sig)
{
	static int (*real)(pthread_t, int);
	if (real == NULL)
		real = (int (*)(pthread_t, int))dlsym(RTLD_NEXT, "pthread_kill");
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	if (gp == NULL)
		return real(th, sig); /* not ours */
	if (bb_on_g() && gp == bb_getg()) {
		if (own_blocked(gp, sig)) {
			post_blocked(gp, sig);
			return 0;
		}
		return real((pthread_t)gp->tcb, sig); /* glibc signals its own kernel thread */
	}
	if (sig < 0 || sig > 64)
		return EINVAL;
	uint32_t st = atomic_load(&gp->status);
	if (st == Gdead)
		return 0; /* a finished thread not yet joined: as NPTL */
	if (sig == 0)
		return 0;
	bb_m *mp = gp->m;
	bool native = in_native_handler(gp, st, mp);
	if ((st == Gsyscall || native) && mp && mp->tid > 0) {
		if (!native && !call_takes(gp, sig)) {
			post_blocked(gp, sig);
			return 0;
		}
		/* blocked in the kernel on its M: the kernel interrupts the call */
		long r = bb_rawsyscall6(SYS_tgkill, getpid(), mp->tid, sig, 0, 0, 0);
		return r < 0 ? (int)-r : 0;
	}
	post_signal(gp, st, sig);
	return 0;
}

/* The running G's call just made the kernel queue sig for its OS thread
 * (a write's EPIPE: SIGPIPE), which it blocks: the signal is the G's, kept
 * in bobbin, where its sigtimedwait (the way to swallow a SIGPIPE), its
 * sigpending and its unblock find it on whatever OS thread it runs next */
void bb_keep_own_signal(int sig)
{
	bb_g *gp = bb_getg();
	siginfo_t si;
	if (own_blocked(gp, sig) && take_now(sig, &si)) /* (let in: the kernel ran it) */
		post_blocked(gp, sig);
}

/* raise (and its old name gsignal): pthread_kill of the calling thread,
 * which glibc makes inside, unseen (see post_blocked) */
static int raise_own(int sig, const char *name)
{
	static int (*real)(int);
	if (real == NULL)
		real = (int (*)(int))dlsym(RTLD_NEXT, name);
	if (bb_active && bb_on_g() && own_blocked(bb_getg(), sig)) {
		post_blocked(bb_getg(), sig);
		return 0;
	}
	return real(sig);
}

BB_EXPORT int raise(int sig)
{
	return raise_own(sig, "raise");
}

BB_EXPORT int gsignal(int sig)
{
	return raise_own(sig, "gsignal");
}

/* kill(getpid(), sig) from main: the kernel gives a process signal to the
 * main thread first, here the caller, whose handler has run by the time
 * kill returns (Python's os.kill of its own pid, then a look at what the
 * handler did). The kernel would pick main's first OS thread, which runs
 * any G: main runs the action itself, with kill's siginfo, as if the
 * kernel had handed it the signal on the way out of the call. */
BB_EXPORT int kill(pid_t pid, int sig)
{
	static int (*real)(pid_t, int);
	if (real == NULL)
		real = (int (*)(pid_t, int))dlsym(RTLD_NEXT, "kill");
	if (pid > 0 && sig > 0 && sig <= 64 && bb_active && bb_on_g()) {
		bb_g *gp = bb_getg();
		uint64_t bit = BB_SIGBIT(sig);
		if (gp == bb_main_g && pid == getpid() && !(bit & BB_GLIBC_SIGNALS) &&
		    !((gp->sigmask | atomic_load(&gp->procsig)) & bit)) {
			siginfo_t si;
			memset(&si, 0, sizeof si);
			si.si_signo = sig;
			si.si_code = SI_USER;
			si.si_pid = pid;
			si.si_uid = getuid();
			bb_deliver_outside_wait(sig, &si);
			return 0;
		}
	}
	return real(pid, sig);
}

/* pthread_sigqueue: pthread_kill with a value (SI_QUEUE). glibc's would
 * send it to the kernel thread its TCB names, which a green thread has not
 * got (ESRCH, and the signal lost). */
BB_EXPORT int pthread_sigqueue(pthread_t th, int sig, const union sigval value)
{
	static int (*real)(pthread_t, int, const union sigval);
	if (real == NULL)
		real = (int (*)(pthread_t, int, const union sigval))dlsym(RTLD_NEXT,
									 "pthread_sigqueue");
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	if (gp == NULL)
		return real(th, sig, value);
	if (sig < 0 || sig > 64 || (sig > 0 && (BB_SIGBIT(sig) & BB_GLIBC_SIGNALS)))
		return EINVAL; /* glibc keeps its own signals to itself */
	uint32_t st = atomic_load(&gp->status);
	if (st == Gdead)
		return ESRCH; /* NPTL's for a thread that has ended (pthread_kill's is 0) */
	if (sig == 0)
		return 0;
	bool self = bb_on_g() && gp == bb_getg();
	bb_m *mp = self ? bb_getm() : gp->m;
	bool kernel = self ? !own_blocked(gp, sig)
			   : (st == Gsyscall && call_takes(gp, sig)) || in_native_handler(gp, st, mp);
	if (kernel && mp && mp->tid > 0) {
		/* itself, or blocked in the kernel on its M: the kernel's queue */
		siginfo_t info;
		own_siginfo(NULL, sig, &info, SI_QUEUE);
		info.si_value = value;
		long r = bb_rawsyscall6(SYS_rt_tgsigqueueinfo, getpid(), mp->tid, sig, (long)&info, 0, 0);
		return r < 0 ? (int)-r : 0;
	}
	int err = 0;
	bool merged; /* a standard signal already pending: one, as the kernel keeps */
	bb_lock_acquire(&gp->sigqlock);
	merged = sig < SIGRTMIN && (atomic_load(&gp->sigpending) & BB_SIGBIT(sig));
	if (!merged) {
		if (!sigq_add(gp, sig, (uintptr_t)value.sival_ptr))
			err = EAGAIN; /* as the kernel's queue limit answers */
	}
	bb_lock_release(&gp->sigqlock);
	if (err == 0 && !merged) {
		if (self || st == Gsyscall)
			post_blocked(gp, sig); /* one it blocks (kernel false) */
		else
			post_signal(gp, st, sig);
	}
	return err;
}

/* ---- signalfd and the signals sent to one thread ----
 *
 * A signalfd shows the signals pending for the OS thread that reads or
 * polls it (and the process's). A pthread_kill or pthread_sigqueue to a
 * green thread that blocks the signal leaves it in bobbin (gp->sigpending),
 * so the thread's own signalfd never showed it: its poll timed out, its
 * read waited for ever. So while a program has a signalfd
 * (bb_sigfd_sigs: the signals of every mask given to signalfd), a G's
 * call that may read or poll one lends those pending signals to its OS
 * thread for the length of the call (bb_sigfd_lend: the kernel's queue of
 * that thread, with their siginfo), and takes back what the call left there
 * (bb_sigfd_reclaim), together with what was sent to it meanwhile (a
 * pthread_kill to a G inside a system call goes to its OS thread). The G
 * stays on that OS thread in between: inside the system call it does not
 * move; on a running G the lend locks it (the call is a short zero-timeout
 * ask). */
/* bobbin's signal has left SIGURG (bb_presig_move): the program's action
 * for SIGURG, kept here until now, goes to the kernel; the one kept from
 * now on is SIGWINCH's, whose action was the default */
static void urg_to_program(void)
{
	struct sigaction act = *atomic_exchange_explicit(&urg_act, &urg_dfl, memory_order_acq_rel);
	set_action(SIGURG, &act, NULL);
}

void bb_sigfd_add(const sigset_t *mask)
{
	uint64_t m;
	memcpy(&m, mask, sizeof m);
	if ((m & BB_SIGBIT(SIGURG)) && !bb_in_vm_child() && bb_presig_move())
		urg_to_program();
	atomic_fetch_or(&bb_sigfd_sigs, m & ~(BB_GLIBC_SIGNALS | BB_SIGBIT(bb_presig())));
}

static uint64_t lendable(bb_g *gp)
{
	return atomic_load(&gp->sigpending) & gp->sigmask & atomic_load(&bb_sigfd_sigs);
}

static bool sigfd_lend(bb_g *gp, bb_sigfd_state *st)
{
	if (lendable(gp) == 0)
		return false;
	st->locked = atomic_load(&gp->status) != Gsyscall;
	if (st->locked)
		bb_lock_os_thread();
	pid_t tid = bb_getm()->tid;
	siginfo_t si;
	int sig;
	while ((sig = take_own(gp, lendable(gp), &si)) != 0)
		queue_to_thread(tid, sig, &si);
	return true;
}

/* the signals pending for this OS thread alone (SigPnd), from /proc */
static uint64_t thread_pending(void)
{
	char buf[2048];
	if (bb_read_small("/proc/thread-self/status", buf, sizeof buf) < 0)
		return 0;
	char *p = strstr(buf, "\nSigPnd:");
	return p ? strtoull(p + 9, NULL, 16) : 0;
}

/* The signals of set pending for this OS thread alone (its kernel queue,
 * not the process's) go back to gp, values and all: pending for it in
 * bobbin. gp NULL: they end there, as a thread's do with it. For a
 * signalfd call's lent signals (below), and for what the kernel queued
 * here for the G that ran last (runtime/proc.c, rescue_own_signals). */
static void reclaim_thread_signals(bb_g *gp, uint64_t set)
{
	uint64_t back = thread_pending() & set;
	while (back) {
		uint64_t bit = back & -back;
		int sig = __builtin_ctzll(bit) + 1;
		siginfo_t si;
		if (!take_now(sig, &si)) {
			back &= ~bit;
			continue;
		}
		if (gp && si.si_code == SI_QUEUE) {
			bb_lock_acquire(&gp->sigqlock);
			sigq_add(gp, sig, (uintptr_t)si.si_value.sival_ptr);
			bb_lock_release(&gp->sigqlock);
		}
		if (gp)
			atomic_fetch_or(&gp->sigpending, bit);
		if (sig < SIGRTMIN || !(thread_pending() & bit))
			back &= ~bit; /* one of a standard signal; all of a real-time one */
	}
}

static void sigfd_reclaim(bb_g *gp, bb_sigfd_state *st)
{
	reclaim_thread_signals(gp, gp->sigmask & atomic_load(&bb_sigfd_sigs));
	if (st->locked) {
		st->locked = false;
		bb_unlock_os_thread();
	}
}

void bb_sigfd_begin_slow(bb_sigfd_state *st)
{
	bb_g *gp = bb_getg();
	st->locked = false;
	st->lent = sigfd_lend(gp, st);
	st->m = bb_getm();
	st->runs = atomic_load_explicit(&st->m->sigs_run, memory_order_relaxed);
}

bool bb_sigfd_again_slow(bb_sigfd_state *st, bool failed)
{
	int e = errno;
	bb_g *gp = bb_getg();
	/* what it lent, and what a pthread_kill sent its OS thread while it
	 * was in the call (the kernel's pending set, the process's with it:
	 * the exact look at the thread's own is a read of /proc) */
	uint64_t pend = 0;
	if (st->lent || (bb_rawsyscall6(SYS_rt_sigpending, (long)&pend, 8, 0, 0, 0, 0) == 0 &&
			 (pend & gp->sigmask & atomic_load(&bb_sigfd_sigs))))
		sigfd_reclaim(gp, st);
	/* cut short by bobbin's own signal (post_signal's poke of a thread
	 * it saw running as the call began), no handler of the program's ran,
	 * and a signal for a signalfd waits: the call is made again with it */
	bool again = failed && e == EINTR && bb_getm() == st->m &&
		     atomic_load_explicit(&st->m->sigs_run, memory_order_relaxed) == st->runs &&
		     lendable(gp) != 0;
	st->lent = again && sigfd_lend(gp, st);
	errno = e;
	return again;
}

/* ---- sigwait, sigwaitinfo, sigtimedwait ----
 *
 * A signal pthread_kill or pthread_sigqueue sent while the thread ran is
 * pending in bobbin (gp->sigpending), not in the kernel: the wait takes
 * those first. Then it waits in the kernel inside entersyscall, where a
 * signal sent meanwhile comes from the kernel; SIGURG is blocked and waited
 * for too, so that one posted to sigpending just before the wait (the
 * sender saw the thread still running) wakes the wait to look again. */
/* SIGURG blocked first: a pthread_kill posted from now on ends the kernel
 * wait, one posted before is seen here (catch_late_wait). In Gsyscall, on
 * the OS thread of the wait: the preemption point before the call may
 * switch the G away, and back under its own mask, SIGURG let in (a poke
 * landing then was lost and the wait never woke) */
static int wait_look(uint64_t want, siginfo_t *si)
{
	bb_g *gp = bb_getg();
	bb_m *mp = bb_getm();
	bb_set_sigmask(mp, mp->sigmask | BB_SIGBIT(bb_presig()));
	atomic_store(&gp->sigwait_set, want); /* before the look (post_blocked) */
	return take_own(gp, want, si);
}

static int wait_signal(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
	static int (*real)(const sigset_t *, siginfo_t *, const struct timespec *);
	if (real == NULL)
		real = (int (*)(const sigset_t *, siginfo_t *, const struct timespec *))dlsym(
			RTLD_NEXT, "sigtimedwait");
	if (!bb_on_g())
		return real(set, info, ts);
	if (ts && (ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000 || ts->tv_sec < 0)) {
		errno = EINVAL;
		return -1;
	}
	uint64_t want;
	memcpy(&want, set, sizeof want);
	int ours = bb_presig();
	bool urg = want & BB_SIGBIT(ours); /* the program's own wait for bobbin's signal */
	int64_t deadline = ts ? bb_nanotime() + ts->tv_sec * 1000000000ll + ts->tv_nsec : 0;
	sigset_t set2;
	memcpy(&set2, set, sizeof set2);
	sigaddset(&set2, ours);
	siginfo_t si;
	for (;;) {
		struct timespec left;
		int sig = 0;
		sig = BB_IN_SYSCALL_AT(int, sig ? sig : real(&set2, &si, bb_ts_left(deadline, ts, &left)),
				       true, sig = wait_look(want, &si), (void)0);
		int e = errno;
		bb_g *gp = bb_getg();
		atomic_store(&gp->sigwait_set, 0);
		bb_apply_sigmask(bb_getm(), gp->sigmask | atomic_load(&gp->procsig));
		if (sig == ours && !urg)
			continue; /* a pthread_kill posted meanwhile (or a stray poke) */
		if (sig > 0 && info)
			*info = si;
		errno = e;
		return sig;
	}
}

BB_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
	return wait_signal(set, info, ts);
}

BB_EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	return wait_signal(set, info, NULL);
}

/* Run, under the mask mask, the handlers of the signals sent to this thread
 * and of the process signals sysmon handed it (procsig) that mask lets in;
 * true if one ran (BB_MASKED_WAIT, shim.h). */
bool bb_run_own_signals_under(uint64_t mask)
{
	bb_g *gp = bb_getg();
	mask &= ~BB_GLIBC_SIGNALS;
	if (!((atomic_load(&gp->sigpending) | atomic_load(&gp->procsig)) & ~mask))
		return false;
	uint64_t saved = gp->sigmask;
	bool was = gp->sig_ran;
	gp->sig_ran = false;
	gp->sigmask = mask;
	bb_deliver_signals();
	gp = bb_getg();
	gp->sigmask = saved;
	bb_apply_sigmask(bb_getm(), saved | atomic_load(&gp->procsig));
	/* (an ignored one, or one another thread took first, ends no wait) */
	bool ran = gp->sig_ran;
	gp->sig_ran = was || ran;
	return ran;
}

/* sigsuspend: as the masked polls (BB_MASKED_WAIT, shim.h) */
BB_EXPORT int sigsuspend(const sigset_t *set)
{
	static int (*real)(const sigset_t *);
	if (real == NULL)
		real = (int (*)(const sigset_t *))dlsym(RTLD_NEXT, "sigsuspend");
	if (!bb_on_g())
		return real(set);
	return BB_MASKED_WAIT(int, real(set), set, true, true);
}

/* what is pending for the thread: the kernel's, and what pthread_kill and
 * pthread_sigqueue left in bobbin for it */
BB_EXPORT int sigpending(sigset_t *set)
{
	static int (*real)(sigset_t *);
	if (real == NULL)
		real = (int (*)(sigset_t *))dlsym(RTLD_NEXT, "sigpending");
	int r = real(set);
	if (r == 0 && bb_on_g()) {
		uint64_t k;
		memcpy(&k, set, sizeof k);
		k |= atomic_load(&bb_getg()->sigpending);
		memcpy(set, &k, sizeof k);
	}
	return r;
}

BB_EXPORT int sigwait(const sigset_t *set, int *sig)
{
	int r;
	do
		r = wait_signal(set, NULL, NULL);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno;
	*sig = r;
	return 0;
}
