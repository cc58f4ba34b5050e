/*
 * pthread_thread.c — thread lifecycle: create, join (plain, try, timed,
 * clock), detach, exit, getattr_np, setname_np/getname_np.
 *
 * A green thread's pthread_t is its G (main's stays its TCB): the TCB and
 * stack go back to the cache as soon as the thread ends, and only the G
 * waits for the join. pthread_self() answers the G; pthread_equal()
 * compares, as glibc's inline one does. Errors are NPTL's: ESRCH for a handle that is no thread of
 * ours, EDEADLK for joining oneself or a thread joining us, EINVAL for a
 * detached thread or one already being joined, EAGAIN when memory runs out.
 */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <unwind.h>

/* glibc 2.36's struct pthread_attr (sysdeps/nptl/internaltypes.h): the only
 * way to tell "no stack address set" from a stack address. */
struct glibc_attr {
	struct sched_param schedparam;
	int schedpolicy;
	int flags;
	size_t guardsize;
	void *stackaddr;
	size_t stacksize;
	void *extension;
	void *unused;
};
_Static_assert(sizeof(struct glibc_attr) <= sizeof(pthread_attr_t), "attr overlay");
#define ATTR_FLAG_STACKADDR 0x0008

/* the process's default thread attributes, as pthread_getattr_default_np
 * gives them: 0 until first read */
static _Atomic size_t default_stacksize, default_guardsize;

static void cache_defaults(void)
{
	pthread_attr_t def;
	size_t ss = 0, gs = 0;
	if (bb_real.pthread_getattr_default_np && bb_real.pthread_getattr_default_np(&def) == 0) {
		pthread_attr_getstacksize(&def, &ss);
		pthread_attr_getguardsize(&def, &gs);
		pthread_attr_destroy(&def);
	}
	atomic_store(&default_guardsize, gs);
	atomic_store(&default_stacksize, ss);
}

BB_EXPORT int pthread_setattr_default_np(const pthread_attr_t *attr)
{
	static int (*real)(const pthread_attr_t *);
	if (real == NULL)
		real = (int (*)(const pthread_attr_t *))dlsym(RTLD_NEXT, "pthread_setattr_default_np");
	int r = real(attr);
	if (r == 0)
		cache_defaults();
	return r;
}

void bb_thread_defaults_init(void)
{
	cache_defaults();
}

BB_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
			     void *arg)
{
	if (!bb_on_g())
		return REAL(pthread_create)(th, attr, fn, arg);
	return bb_thread_create(th, attr, fn, arg, false,
				(uintptr_t)__builtin_return_address(0));
}

/* pthread_create on a G; c11: fn is a C11 thread's int (*)(void *)
 * (thrd_create, c11threads.c); pc: the caller, for dumps */
int bb_thread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg,
		     bool c11, uintptr_t pc)
{
	pthread_attr_t def;
	const pthread_attr_t *a = attr;
	if (a == NULL) {
		/* the common case: the process defaults, cached (they change only
		 * through pthread_setattr_default_np, interposed below) */
		bb_g *self = bb_getg();
		bb_gattr ba = {
			.stacksize = atomic_load_explicit(&default_stacksize, memory_order_relaxed),
			.guardsize = atomic_load_explicit(&default_guardsize, memory_order_relaxed),
			.handle = (void **)th,
			.createpc = pc,
			.c11 = c11,
		};
		if (ba.stacksize == 0) {
			if (bb_real.pthread_getattr_default_np(&def) != 0)
				return EAGAIN;
			a = &def;
			goto from_attr;
		}
		ba.schedpolicy = self->schedpolicy; /* inherited, as NPTL's default */
		ba.schedprio = self->schedprio;
		ba.sched_apply = !bb_sched_is_start(ba.schedpolicy, ba.schedprio);
		int err = 0;
		return bb_newproc(fn, arg, &ba, &err) ? 0 : err;
	}
from_attr:;
	const struct glibc_attr *ga = (const struct glibc_attr *)a;
	size_t stacksize = 0, guard = 0;
	int detach = PTHREAD_CREATE_JOINABLE;
	pthread_attr_getstacksize(a, &stacksize);
	pthread_attr_getguardsize(a, &guard);
	pthread_attr_getdetachstate(a, &detach);
	void *stackaddr = NULL;
	if (ga->flags & ATTR_FLAG_STACKADDR)
		stackaddr = (char *)ga->stackaddr - ga->stacksize; /* glibc keeps the top */
	int inherit = PTHREAD_INHERIT_SCHED;
	pthread_attr_getinheritsched(a, &inherit);
	int policy = ga->schedpolicy, prio = ga->schedparam.sched_priority;
	if (inherit == PTHREAD_INHERIT_SCHED) {
		bb_g *self = bb_getg();
		policy = self->schedpolicy;
		prio = self->schedprio;
	} else {
		int err = bb_sched_args_ok(policy, prio); /* NPTL's EINVAL/EPERM */
		if (err) {
			if (a == &def)
				pthread_attr_destroy(&def);
			return err;
		}
	}
	/* the attributes' mask and CPUs, where set (glibc keeps them apart) */
	sigset_t mask;
	uint64_t mask64;
	/* (glibc allocates the attributes' extension for either: without one,
	 * neither was set, and a create need not ask) */
	bool ext = a != &def && ga->extension != NULL;
	bool has_mask = ext && pthread_attr_getsigmask_np(a, &mask) == 0;
	if (has_mask)
		memcpy(&mask64, &mask, sizeof mask64);
	cpu_set_t cpus, all;
	bool has_cpus = false;
	if (ext && pthread_attr_getaffinity_np(a, sizeof cpus, &cpus) == 0) {
		memset(&all, 0xff, sizeof all);
		if (!CPU_EQUAL(&cpus, &all)) { /* glibc's answer when none was set */
			if (!bb_mask_usable(sizeof cpus, &cpus))
				return EINVAL; /* as NPTL's create, which cannot apply it */
			has_cpus = true;
		}
	}
	if (a == &def)
		pthread_attr_destroy(&def);

	bb_gattr ba = {
		.stacksize = stacksize,
		.stackaddr = stackaddr,
		.guardsize = guard,
		.detached = detach == PTHREAD_CREATE_DETACHED,
		.handle = (void **)th,
		.createpc = pc,
		.c11 = c11,
		.sigmask = has_mask ? &mask64 : NULL,
		.affinity = has_cpus ? &cpus : NULL,
		.affsize = sizeof cpus,
		.schedpolicy = policy,
		.schedprio = prio,
		/* a policy other than the one every OS thread starts with: the
		 * thread gets an OS thread of its own that takes it */
		.sched_apply = !bb_sched_is_start(policy, prio),
	};
	int err = 0;
	return bb_newproc(fn, arg, &ba, &err) ? 0 : err;
}

/* a blocking or timed join (mode), a cancellation point: never EINTR */
static int join_waiting(bb_g *gp, void **ret, int mode, int64_t deadline)
{
	for (;;) {
		/* a cancellation point only when it would wait: NPTL joins a
		 * thread that has already ended without looking at a request */
		if (!__atomic_load_n(&gp->exited, __ATOMIC_ACQUIRE))
			bb_testcancel();
		int err = bb_gjoin(gp, ret, mode, deadline);
		if (err != EINTR) {
			if (err == 0 && mode != BB_JOIN_TRY)
				bb_signals_after_wake();
			return err;
		}
		/* EINTR: interrupted by pthread_cancel (checked above) or by a
		 * pthread_kill, whose handler runs now; the join goes on */
		bb_take_eintr();
	}
}

/* A green thread joined by a thread that is not running one: a thread
 * bobbin did not make (glibc's SIGEV_THREAD helper running a callback), a
 * G on a coroutine's stack. NPTL's join would wait for a kernel tid that a
 * G never has: it waits in the kernel on the G's exit word instead. */
static int foreign_join(bb_g *gp, void **ret, int mode, int64_t deadline)
{
	if (mode != BB_JOIN_TRY)
		pthread_testcancel(); /* a cancellation point, before it waits */
	return bb_gjoin_foreign(gp, ret, mode, deadline);
}

/* One join of th: mode BB_JOIN_BLOCK, _TRY, or _TIMED until abstime on
 * clock. A thread that is not a G (made by NPTL: from a coroutine's stack,
 * by a callback of glibc's) is joined by NPTL, inside entersyscall when a G
 * waits for it. */
static int join(pthread_t th, void **ret, int mode, clockid_t clock,
		const struct timespec *abstime)
{
	bool on_g = bb_on_g();
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	if (gp == NULL) {
		if (mode == BB_JOIN_TRY)
			return REAL(pthread_tryjoin_np)(th, ret);
		if (!on_g)
			return REAL(pthread_clockjoin_np)(th, ret, clock, abstime);
		return BB_IN_SYSCALL(int, REAL(pthread_clockjoin_np)(th, ret, clock, abstime), true);
	}
	if (mode == BB_JOIN_TRY)
		return on_g ? bb_gjoin(gp, ret, BB_JOIN_TRY, 0) : foreign_join(gp, ret, mode, 0);
	int (*wait)(bb_g *, void **, int, int64_t) = on_g ? join_waiting : foreign_join;
	if (abstime == NULL)
		return wait(gp, ret, BB_JOIN_BLOCK, 0);
	if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC)
		return EINVAL;
	/* NPTL's join loops while its futex wait fails with anything but
	 * ETIMEDOUT: a time with tv_nsec out of range waits, untimed, for the
	 * thread to end (and joins one that has ended) */
	if (abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000)
		return wait(gp, ret, BB_JOIN_BLOCK, 0);
	/* the deadline, moved onto the monotonic clock the runtime's timers use */
	struct timespec now;
	clock_gettime(clock, &now);
	int64_t left = (int64_t)(abstime->tv_sec - now.tv_sec) * 1000000000 +
		       (abstime->tv_nsec - now.tv_nsec);
	return wait(gp, ret, BB_JOIN_TIMED, bb_nanotime() + left);
}

BB_EXPORT int pthread_join(pthread_t th, void **ret)
{
	return join(th, ret, BB_JOIN_BLOCK, CLOCK_REALTIME, NULL);
}

BB_EXPORT int pthread_tryjoin_np(pthread_t th, void **ret)
{
	return join(th, ret, BB_JOIN_TRY, CLOCK_REALTIME, NULL);
}

BB_EXPORT int pthread_clockjoin_np(pthread_t th, void **ret, clockid_t clock,
				   const struct timespec *abstime)
{
	return join(th, ret, BB_JOIN_TIMED, clock, abstime);
}

BB_EXPORT int pthread_timedjoin_np(pthread_t th, void **ret, const struct timespec *abstime)
{
	return join(th, ret, BB_JOIN_TIMED, CLOCK_REALTIME, abstime);
}

/* a G from any thread; NPTL's thread by NPTL */
/* The caller's pthread_t: its G's, or glibc's (the TCB) on main, on a
 * thread bobbin did not make and on an M's own stack. Read from the TCB
 * that is installed, so a signal handler or a coroutine gets the thread
 * it interrupts or runs on, as natively. */
BB_EXPORT pthread_t pthread_self(void)
{
	uintptr_t self;
	__asm__("mov %%fs:0x10, %0" : "=r"(self)); /* tcbhead_t.self */
	if (bb_active && bb_tls_m) {
		bb_g *gp = bb_g_from_tcb((void *)self);
		if (gp && !gp->is_main)
			return (pthread_t)gp;
	}
	return self;
}

BB_EXPORT int pthread_detach(pthread_t th)
{
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	if (gp == NULL)
		return REAL(pthread_detach)(th);
	return bb_on_g() ? bb_gdetach(gp) : bb_gdetach_foreign(gp);
}

/* pthread_exit unwinds the thread's stack as NPTL's does, so C++
 * destructors and cleanup handlers compiled with unwind tables run; the stop
 * function ends the G when the unwinder reaches bb_gstart (whose return
 * address is marked undefined: the end of the stack). */
static _Unwind_Reason_Code exit_stop(int version, _Unwind_Action actions,
				     _Unwind_Exception_Class cls, struct _Unwind_Exception *exc,
				     struct _Unwind_Context *ctx, void *param)
{
	if (actions & _UA_END_OF_STACK)
		bb_goexit(bb_getg()->result);
	return _URC_NO_REASON;
}

static void exit_cleanup(_Unwind_Reason_Code code, struct _Unwind_Exception *exc)
{
}

BB_EXPORT void pthread_exit(void *ret)
{
	if (!bb_on_g())
		REAL(pthread_exit)(ret);
	bb_g *gp = bb_getg();
	gp->result = ret;
	if (!gp->is_main || bb_redirect_main_unwind(gp)) {
		/* glibc's own pthread_exit: it unwinds to bb_gmain's landing pad
		 * (main: to its own, redirected to bb_main_landing), running
		 * cleanup handlers of both ABIs on the way (cancel.c) */
		gp->exit_called = true;
		REAL(pthread_exit)(ret);
	}
	/* main whose cleanup chain is not glibc's as expected: unwind with
	 * libgcc's forced unwind (C++ destructors run, C cleanup buffers do
	 * not) and end the G ourselves */
	struct _Unwind_Exception *exc = &gp->exit_exc;
	memset(exc, 0, sizeof *exc);
	memcpy(&exc->exception_class, "BOBBEXIT", 8);
	exc->exception_cleanup = exit_cleanup;
	_Unwind_ForcedUnwind(exc, exit_stop, NULL);
	/* only if the unwinder gave up (a frame without unwind tables) */
	bb_goexit(ret);
}

BB_EXPORT int pthread_getattr_np(pthread_t th, pthread_attr_t *attr)
{
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	if (gp == NULL || gp->is_main)
		return REAL(pthread_getattr_np)(th, attr);
	int err = pthread_attr_init(attr);
	if (err)
		return err;
	/* as NPTL: the whole block, its TLS and TCB at the top included (the
	 * stack it runs on: a new thread's is settled here if not yet) */
	bb_tcb_pin(gp);
	pthread_attr_setstack(attr, (void *)gp->stack_lo, gp->stack_top - gp->stack_lo);
	pthread_attr_setguardsize(attr, gp->guardsize);
	bb_lock_acquire(&gp->lock);
	bool detached = gp->detached;
	bb_lock_release(&gp->lock);
	pthread_attr_setdetachstate(attr, detached ? PTHREAD_CREATE_DETACHED
						   : PTHREAD_CREATE_JOINABLE);
	struct glibc_attr *ga = (struct glibc_attr *)attr;
	ga->schedpolicy = gp->schedpolicy;
	ga->schedparam.sched_priority = gp->schedprio;
	return 0;
}

BB_EXPORT int pthread_setname_np(pthread_t th, const char *name)
{
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	if (gp == NULL)
		return REAL(pthread_setname_np)(th, name);
	size_t n = strlen(name);
	if (n > 15)
		return ERANGE;
	if (atomic_load(&gp->status) == Gdead)
		return ENOENT; /* NPTL's, from /proc/self/task/0/comm */
	memcpy(gp->name, name, n + 1);
	if (gp->is_main)
		bb_name_process(name);
	return 0;
}

BB_EXPORT int pthread_getname_np(pthread_t th, char *buf, size_t len)
{
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	if (gp == NULL)
		return REAL(pthread_getname_np)(th, buf, len);
	if (len < 16)
		return ERANGE; /* NPTL's check, before it looks for the thread */
	if (atomic_load(&gp->status) == Gdead)
		return ENOENT;
	size_t n = strlen(gp->name);
	if (len < n + 1)
		return ERANGE;
	memcpy(buf, gp->name, n + 1);
	return 0;
}
