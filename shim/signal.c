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

#define GLIBC_INTERNAL ((1ull << (32 - 1)) | (1ull << (33 - 1)))

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
		cur &= ~GLIBC_INTERNAL;
	}
	if (old) {
		sigemptyset(old);
		memcpy(old, &gp->sigmask, sizeof gp->sigmask);
	}
	if (set) {
		gp->sigmask = cur;
		bb_apply_sigmask(bb_getm(), cur);
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
