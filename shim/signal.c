/*
 * signal.c — per-thread signal masks. pthread_sigmask and sigprocmask
 * change the calling G's own mask; its M's kernel mask follows whenever the
 * G runs (runtime/proc.c), so a mask holds across migration and never
 * leaks to the other Gs of an M. As glibc does, SIGCANCEL and SIGSETXID are
 * never blocked; bobbin's preemption signal is not blocked on the M either
 * (it only ever interrupts bobbin's own Gs, never reaches the program).
 */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
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
			/* given to us and still blocked on our M: taken now, as
			 * the kernel runs a pending signal's handler at unblock */
			if (atomic_load(&gp->procsig) & unblocked)
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

/* A process signal sysmon gave this G: dequeue it from the process's
 * pending set (it is blocked on our M until now), with its siginfo. False
 * if another thread took it first (an M running a G that takes it). */
static bool take_process_signal(int sig, siginfo_t *si)
{
	uint64_t set = 1ull << (sig - 1);
	struct timespec zero = {0, 0};
	long r = bb_rawsyscall6(SYS_rt_sigtimedwait, (long)&set, (long)si, (long)&zero, 8, 0, 0);
	return r == sig;
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
		bool have_si = false;
		int sig;
		if (own) {
			sig = __builtin_ctzll(own) + 1;
			atomic_fetch_and(&gp->sigpending, ~(1ull << (sig - 1)));
		} else {
			sig = __builtin_ctzll(proc) + 1;
			have_si = take_process_signal(sig, &si);
			atomic_fetch_and(&gp->procsig, ~(1ull << (sig - 1)));
			bb_sigwatch_add(1ull << (sig - 1)); /* sysmon may route the next one */
			bb_apply_sigmask(bb_getm(), gp->sigmask | atomic_load(&gp->procsig));
			if (!have_si)
				continue;
		}
		struct kaction ka;
		if (bb_rawsyscall6(SYS_rt_sigaction, sig, 0, (long)&ka, 8, 0, 0) != 0)
			continue;
		if (ka.handler == SIG_IGN) {
			gp->sig_ignored = true;
			continue;
		}
		if (ka.handler == SIG_DFL) {
			if (!default_ignores(sig)) /* the default action is the process's */
				bb_rawsyscall6(SYS_tgkill, getpid(), bb_getm()->tid, sig, 0, 0, 0);
			else
				gp->sig_ignored = true;
			continue;
		}
		uint64_t saved = gp->sigmask;
		uint64_t during = saved | ka.mask;
		if (!(ka.flags & KSA_NODEFER))
			during |= 1ull << (sig - 1);
		gp->sigmask = during;
		bb_apply_sigmask(bb_getm(), during);
		if (ka.flags & KSA_RESETHAND) {
			struct kaction dfl = {SIG_DFL, 0, NULL, 0};
			bb_rawsyscall6(SYS_rt_sigaction, sig, (long)&dfl, 0, 8, 0, 0);
		}
		int saved_errno = errno;
		if (ka.flags & KSA_SIGINFO) {
			if (!have_si) { /* pthread_kill's, as the kernel fills it in */
				memset(&si, 0, sizeof si);
				si.si_signo = sig;
				si.si_code = SI_TKILL;
				si.si_pid = getpid();
				si.si_uid = getuid();
			}
			/* the third argument is never NULL from the kernel: a
			 * context of this point, with the mask the G had */
			ucontext_t uc;
			getcontext(&uc);
			sigemptyset(&uc.uc_sigmask);
			memcpy(&uc.uc_sigmask, &saved, sizeof saved);
			((void (*)(int, siginfo_t *, void *))ka.handler)(sig, &si, &uc);
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
}

static void poke(void)
{
	bb_deliver_signals();
}

void bb_signal_init(void)
{
	bb_sigpoke_hook = poke;
}

BB_EXPORT int pthread_kill(pthread_t th, int sig)
{
	static int (*real)(pthread_t, int);
	if (real == NULL)
		real = (int (*)(pthread_t, int))dlsym(RTLD_NEXT, "pthread_kill");
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	if (gp == NULL || (bb_on_g() && gp == bb_getg()))
		return real(th, sig); /* itself (glibc signals its own kernel thread), or not ours */
	if (sig < 0 || sig > 64)
		return EINVAL;
	uint32_t st = atomic_load(&gp->status);
	if (st == Gdead)
		return 0; /* a finished thread not yet joined: as NPTL */
	if (sig == 0)
		return 0;
	bb_m *mp = gp->m;
	if (st == Gsyscall && mp && mp->tid > 0) {
		/* blocked in the kernel on its M: the kernel interrupts the call */
		long r = bb_rawsyscall6(SYS_tgkill, getpid(), mp->tid, sig, 0, 0, 0);
		return r < 0 ? (int)-r : 0;
	}
	atomic_fetch_or(&gp->sigpending, 1ull << (sig - 1));
	if (st == Grunning && mp && mp->tid > 0 && bb_async_preempt)
		bb_rawsyscall6(SYS_tgkill, getpid(), mp->tid, SIGURG, 0, 0, 0);
	/* parked, or about to park (still running, it may be past its last
	 * look at sigpending): let it wake and run the handler */
	bb_interrupt(gp, BB_WAKE_SIGNAL);
	return 0;
}
