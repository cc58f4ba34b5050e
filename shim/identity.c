/*
 * identity.c — per-OS-thread kernel state. A green thread that changes
 * state the kernel keeps per thread (CPU affinity, scheduling policy,
 * namespaces, its name for the kernel) is locked to its own M for the rest
 * of its life (bobbin_lock_os_thread, Go's LockOSThread), so the state stays
 * with the thread that set it; when it ends, its M ends too.
 *
 * pthread_setaffinity_np/pthread_getaffinity_np and pthread_setschedparam on
 * another green thread reach it through the M it is locked to; one that is
 * not locked has no OS thread of its own to change yet: the state is kept
 * in its G and its next schedule() locks it to an M that takes the state
 * (bb_adopt_kstate).
 */
#include "shim.h"

#include <dlfcn.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <dirent.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

/* the CPUs the process could use when bobbin started (its first thread's
 * mask, before the program ran) */
static cpu_set_t start_cpus;
static bool start_cpus_known;

void bb_identity_init(void)
{
	start_cpus_known = bb_sys(SYS_sched_getaffinity, 0, sizeof start_cpus, &start_cpus) > 0;
}

BB_EXPORT void bobbin_lock_os_thread(void)
{
	if (bb_on_g())
		bb_lock_os_thread();
}

BB_EXPORT void bobbin_unlock_os_thread(void)
{
	if (bb_on_g())
		bb_unlock_os_thread();
}

static void *next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

/* What stands for th in a call that changes its kernel state: >0 the tid
 * of the M it is locked to, 0 "this thread" (th is the caller, now
 * locked to its M), TID_GLIBC (not a green thread: glibc's function),
 * TID_ENDED (it has ended: NPTL finds its tid 0, and the kernel takes 0
 * as the caller), TID_NONE (no OS thread of its own yet: the state is
 * kept for it, see defer_kstate). */
enum { TID_GLIBC = -2, TID_ENDED = -3, TID_NONE = -1 };

static pid_t tid_for(pthread_t th)
{
	bb_g *gp = bb_g_of(th);
	if (gp == NULL)
		return TID_GLIBC;
	if (gp == bb_getg()) {
		bb_lock_os_thread();
		return 0;
	}
	if (atomic_load(&gp->status) == Gdead)
		return TID_ENDED;
	bb_lock_acquire(&gp->lock);
	pid_t tid = gp->lockedm ? gp->lockedm->tid : TID_NONE;
	bb_lock_release(&gp->lock);
	return tid;
}

/* Kernel state for a green thread that has no OS thread of its own: kept
 * in its G, and applied by its next schedule(), which locks it to that M
 * for life (bb_adopt_kstate; a running G is asked to yield soon). fill
 * stores it, under gp->lock. Returns 0, or the tid of the M the G was
 * locked to meanwhile (the caller changes that OS thread instead). */
static pid_t defer_kstate(pthread_t th, uint32_t what, void (*fill)(bb_g *, const void *),
			  const void *arg)
{
	bb_g *gp = bb_g_of(th);
	bb_lock_acquire(&gp->lock);
	pid_t tid = gp->lockedm ? gp->lockedm->tid : 0;
	fill(gp, arg);
	if (tid == 0)
		atomic_fetch_or_explicit(&gp->kpending, what, memory_order_relaxed);
	bb_lock_release(&gp->lock);
	if (tid == 0)
		atomic_store_explicit(&gp->preempt, true, memory_order_relaxed);
	return tid;
}

struct mask_arg {
	size_t size;
	const cpu_set_t *set;
};

static void fill_mask(bb_g *gp, const void *arg)
{
	const struct mask_arg *m = arg;
	if (gp->kaff == NULL)
		gp->kaff = bb_alloc(BB_KAFF_MAX);
	if (gp->kaff == NULL)
		return; /* (then nothing is asked for: kaffsize stays) */
	gp->kaffsize = m->size < BB_KAFF_MAX ? m->size : BB_KAFF_MAX;
	memcpy(gp->kaff, m->set, gp->kaffsize);
}

/* set names a CPU this process may run on: one of those it had at start,
 * or of the asking OS thread's own mask. Not that mask alone: a thread
 * pinned to CPU 0 may pin another to CPU 1 (libgomp with OMP_PROC_BIND
 * pins main, then creates its workers with other CPUs; every one failed
 * with EINVAL) */
bool bb_mask_usable(size_t size, const cpu_set_t *set)
{
	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
		return true;
	if (start_cpus_known)
		CPU_OR(&allowed, &allowed, &start_cpus);
	size_t n = size < sizeof allowed ? size : sizeof allowed;
	const unsigned char *a = (const unsigned char *)&allowed, *b = (const unsigned char *)set;
	for (size_t i = 0; i < n; i++)
		if (a[i] & b[i])
			return true;
	return false;
}

BB_EXPORT int pthread_setaffinity_np(pthread_t th, size_t size, const cpu_set_t *set)
{
	static int (*real)(pthread_t, size_t, const cpu_set_t *);
	if (real == NULL)
		real = (int (*)(pthread_t, size_t, const cpu_set_t *))next("pthread_setaffinity_np");
	pid_t tid = bb_on_g() ? tid_for(th) : TID_GLIBC;
	if (tid == TID_GLIBC)
		return real(th, size, set);
	if (tid == TID_ENDED)
		return pthread_setaffinity_np(pthread_self(), size, set);
	if (tid == TID_NONE) {
		if (!bb_mask_usable(size, set))
			return EINVAL; /* the kernel's answer for a mask of no usable CPU */
		struct mask_arg m = {size, set};
		tid = defer_kstate(th, BB_KP_AFFINITY, fill_mask, &m);
		if (tid == 0)
			return 0;
	}
	long r = bb_sys(SYS_sched_setaffinity, tid, size, set);
	return r < 0 ? (int)-r : 0;
}

BB_EXPORT int pthread_getaffinity_np(pthread_t th, size_t size, cpu_set_t *set)
{
	static int (*real)(pthread_t, size_t, cpu_set_t *);
	if (real == NULL)
		real = (int (*)(pthread_t, size_t, cpu_set_t *))next("pthread_getaffinity_np");
	bb_g *gp = bb_on_g() ? bb_g_of(th) : NULL;
	if (gp == NULL)
		return real(th, size, set);
	/* a G not locked runs wherever the process may: the caller's M's mask
	 * (a G that has ended too: NPTL asks the kernel about tid 0, the
	 * caller), or the one asked for it that it has not taken up yet */
	bb_lock_acquire(&gp->lock);
	bool ended = atomic_load(&gp->status) == Gdead;
	pid_t tid = gp->lockedm && !ended ? gp->lockedm->tid : 0;
	bb_lock_release(&gp->lock);
	long r = bb_sys(SYS_sched_getaffinity, tid, size, set);
	if (r < 0)
		return (int)-r;
	if ((size_t)r < size)
		memset((char *)set + r, 0, size - (size_t)r);
	if (tid == 0 && !ended && gp != bb_getg()) {
		bb_lock_acquire(&gp->lock);
		if (gp->kaffsize && gp->lockedm == NULL) {
			size_t n = gp->kaffsize < (size_t)r ? gp->kaffsize : (size_t)r;
			memset(set, 0, (size_t)r);
			memcpy(set, gp->kaff, n);
		}
		bb_lock_release(&gp->lock);
	}
	return 0;
}

/* ---- thread ids ----
 *
 * A green thread's id is the one glibc keeps in its TCB (mutex owners, the
 * robust list): for main the initial thread's (the process id), for the
 * others an id no kernel thread can have (gtls.c). gettid returns it, so it
 * is the same for the thread's whole life whichever M runs it, and distinct
 * from every other thread's. Calls that name a thread by that id reach the
 * green thread: tgkill/tkill deliver the signal to it (pthread_kill), and
 * the affinity calls take the caller's own id as "this thread". */

static bool own_tid(pid_t pid)
{
	return pid == 0 || (bb_on_g() && pid == bb_self_tid());
}

BB_EXPORT pid_t gettid(void)
{
	if (bb_on_g())
		return bb_self_tid();
	return (pid_t)bb_sys(SYS_gettid, 0, 0, 0);
}

/* tgkill/tkill: a green thread named by its id gets the signal as from
 * pthread_kill (0 or an errno); -1: a real OS thread, for the kernel */
/* the green thread whose id tid is, or NULL; *green: the id is no kernel
 * thread's (a green thread's that has ended: ESRCH) */
static bb_g *g_by_id(pid_t tid, bool *green)
{
	*green = tid & 0x20000000; /* such an id is never a kernel thread's */
	if (*green)
		return bb_g_by_tid(tid);
	bb_g *gp = bb_main_g; /* main's id is the initial thread's */
	if (gp == NULL || atomic_load(&gp->status) == Gdead || bb_g_tid(gp) != tid)
		return NULL; /* a real OS thread: the kernel's */
	return gp;
}

int bb_tid_kill(pid_t tgid, pid_t tid, int sig)
{
	if (!bb_active)
		return -1;
	bool green;
	bb_g *gp = g_by_id(tid, &green);
	if ((gp == NULL && !green) || (tgid != -1 && tgid != getpid()))
		return -1;
	return gp ? pthread_kill(bb_handle(gp), sig) : ESRCH;
}

BB_EXPORT int tgkill(pid_t tgid, pid_t tid, int sig)
{
	int err = bb_tid_kill(tgid, tid, sig);
	if (err < 0) {
		long r = bb_sys(SYS_tgkill, tgid, tid, sig);
		err = r < 0 ? (int)-r : 0;
	}
	if (err > 0) {
		errno = err;
		return -1;
	}
	return 0;
}

BB_EXPORT int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *set)
{
	static int (*real)(pid_t, size_t, const cpu_set_t *);
	if (real == NULL)
		real = (int (*)(pid_t, size_t, const cpu_set_t *))next("sched_setaffinity");
	if (bb_on_g() && own_tid(pid)) {
		bb_lock_os_thread(); /* "this thread": keep it on this M */
		pid = 0;
	}
	return real(pid, size, set);
}

BB_EXPORT int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *set)
{
	static int (*real)(pid_t, size_t, cpu_set_t *);
	if (real == NULL)
		real = (int (*)(pid_t, size_t, cpu_set_t *))next("sched_getaffinity");
	if (bb_on_g() && own_tid(pid)) {
		int err = pthread_getaffinity_np(pthread_self(), size, set);
		if (err) {
			errno = err;
			return -1;
		}
		return 0;
	}
	return real(pid, size, set);
}

/* ---- a thread's nice value and I/O priority ----
 *
 * On Linux both belong to the kernel thread: setpriority(PRIO_PROCESS, 0)
 * (and nice, which glibc builds on it without going through the interposed
 * name) and ioprio_set(IOPRIO_WHO_PROCESS, 0) change the calling thread
 * only, as a database lowers its compaction threads. On a green thread they
 * changed its OS thread, which then ran other threads at that priority
 * while the caller went on elsewhere without it. As for sched_setaffinity,
 * the thread now stays on its OS thread from then on (locked before the
 * call, so that it cannot move between the change and the lock; let go
 * again if the call failed), and the caller's own id means "this thread". */
static int own_thread_call(long nr, long a1, long a2, long a3)
{
	long r;
	if (bb_alone()) {
		/* the process's only thread: natively every thread it makes
		 * from now on inherits the change (nice(10) at start-up), so
		 * every M takes it (they may run any thread) */
		r = bb_sys(nr, a1, 0, a3);
		if (r == 0)
			bb_m_each_tid(nr, a1, a3);
	} else {
		bb_kstate_begin();
		r = bb_sys(nr, a1, 0, a3);
		if (r == 0)
			bb_getm()->kdirty = true;
		else
			bb_unlock_os_thread();
	}
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return (int)r;
}

BB_EXPORT int setpriority(__priority_which_t which, id_t who, int prio)
{
	if (bb_on_g() && which == PRIO_PROCESS && own_tid((pid_t)who))
		return own_thread_call(SYS_setpriority, PRIO_PROCESS, 0, prio);
	long r = bb_sys(SYS_setpriority, which, who, prio);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return 0;
}

BB_EXPORT int getpriority(__priority_which_t which, id_t who)
{
	if (bb_on_g() && which == PRIO_PROCESS && own_tid((pid_t)who))
		who = 0;
	/* the system call answers 20 - nice, never negative */
	long r = bb_sys(SYS_getpriority, which, who, 0);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return 20 - (int)r;
}

/* nice: the caller's nice value plus inc, the new value returned (-1 with
 * errno for an error; EPERM where the kernel says EACCES), as glibc's */
BB_EXPORT int nice(int inc)
{
	int saved = errno;
	errno = 0;
	int cur = getpriority(PRIO_PROCESS, 0);
	if (cur == -1 && errno != 0)
		return -1;
	errno = saved;
	if (setpriority(PRIO_PROCESS, 0, cur + inc) != 0) {
		if (errno == EACCES)
			errno = EPERM;
		return -1;
	}
	return getpriority(PRIO_PROCESS, 0);
}

/* syscall(SYS_ioprio_set or _get, IOPRIO_WHO_PROCESS, who, ...) from a
 * green thread, true with *r when the call names the caller itself */
bool bb_own_ioprio(long *r, long nr, long which, long who, long prio)
{
	if (!bb_on_g() || which != 1 /* IOPRIO_WHO_PROCESS */ || !own_tid((pid_t)who))
		return false;
	*r = nr == SYS_ioprio_set ? own_thread_call(nr, which, 0, prio) : bb_sys(nr, which, 0, 0);
	if (nr != SYS_ioprio_set && *r < 0) {
		errno = (int)-*r;
		*r = -1;
	}
	return true;
}

struct sched_arg {
	int policy, prio;
};

static void fill_sched(bb_g *gp, const void *arg)
{
	const struct sched_arg *a = arg;
	gp->schedpolicy = a->policy;
	gp->schedprio = a->prio;
}

/* the kernel's checks of sched_setscheduler, for a thread that cannot be
 * asked yet: the policy, its priority range, the right to a real-time one */
int bb_sched_args_ok(int policy, int prio)
{
	int pol = policy & ~SCHED_RESET_ON_FORK;
	int lo = sched_get_priority_min(pol), hi = sched_get_priority_max(pol);
	if (lo < 0 || hi < 0 || prio < lo || prio > hi)
		return EINVAL;
	if ((pol == SCHED_FIFO || pol == SCHED_RR) && geteuid() != 0) {
		struct rlimit rl;
		if (getrlimit(RLIMIT_RTPRIO, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		    (rlim_t)prio > rl.rlim_cur)
			return EPERM;
	}
	return 0;
}

BB_EXPORT int pthread_setschedparam(pthread_t th, int policy, const struct sched_param *param)
{
	static int (*real)(pthread_t, int, const struct sched_param *);
	if (real == NULL)
		real = (int (*)(pthread_t, int, const struct sched_param *))next("pthread_setschedparam");
	/* the policy every OS thread starts with, for a thread that has no
	 * OS thread of its own: nothing for the kernel to change, no OS
	 * thread to take (GNAT's runtime sets it on the main thread at
	 * start-up, and a pinned main made every Ada rendezvous a hand-over
	 * between OS threads) */
	bool on_g = bb_on_g();
	bb_g *own = on_g ? bb_g_of(th) : NULL;
	if (own && bb_sched_is_start(policy, param->sched_priority)) {
		bb_lock_acquire(&own->lock);
		bool kept = own->lockedm == NULL && atomic_load(&own->status) != Gdead;
		if (kept) {
			own->schedpolicy = policy;
			own->schedprio = param->sched_priority;
			atomic_fetch_and_explicit(&own->kpending, ~BB_KP_SCHED, memory_order_relaxed);
		}
		bb_lock_release(&own->lock);
		if (kept)
			return 0;
	}
	pid_t tid = on_g ? tid_for(th) : TID_GLIBC;
	if (tid == TID_GLIBC)
		return real(th, policy, param);
	if (tid == TID_ENDED)
		return ESRCH;
	if (tid == TID_NONE) {
		int err = bb_sched_args_ok(policy, param->sched_priority);
		if (err)
			return err;
		struct sched_arg a = {policy, param->sched_priority};
		tid = defer_kstate(th, BB_KP_SCHED, fill_sched, &a);
		if (tid == 0)
			return 0;
	}
	long r = bb_sys(SYS_sched_setscheduler, tid, policy, param);
	if (r < 0)
		return (int)-r;
	bb_g *gp = bb_g_of(th);
	bb_lock_acquire(&gp->lock);
	gp->schedpolicy = policy;
	gp->schedprio = param->sched_priority;
	bb_lock_release(&gp->lock);
	return 0;
}

BB_EXPORT int pthread_getschedparam(pthread_t th, int *policy, struct sched_param *param)
{
	static int (*real)(pthread_t, int *, struct sched_param *);
	if (real == NULL)
		real = (int (*)(pthread_t, int *, struct sched_param *))next("pthread_getschedparam");
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	if (gp == NULL || gp->is_main)
		return real(th, policy, param);
	if (atomic_load(&gp->status) == Gdead)
		return ESRCH; /* as NPTL's, for a thread that has ended */
	bb_lock_acquire(&gp->lock);
	*policy = gp->schedpolicy;
	memset(param, 0, sizeof *param);
	param->sched_priority = gp->schedprio;
	bb_lock_release(&gp->lock);
	return 0;
}

/* glibc's sets the priority of the thread's kernel tid, which a green
 * thread does not have: the same change through pthread_setschedparam,
 * with the policy the thread has */
BB_EXPORT int pthread_setschedprio(pthread_t th, int prio)
{
	static int (*real)(pthread_t, int);
	if (real == NULL)
		real = (int (*)(pthread_t, int))next("pthread_setschedprio");
	bb_g *gp = bb_on_g() ? bb_g_of(th) : NULL;
	if (gp == NULL || gp->is_main)
		return real(th, prio);
	struct sched_param sp = {.sched_priority = prio};
	return pthread_setschedparam(th, gp->schedpolicy, &sp);
}

/* ---- the sched_* calls, which name a thread by id ----
 *
 * 0, or a green thread's id (gettid()'s, main's the process id), names that
 * green thread: sched_setscheduler, sched_setparam and their getters act
 * as pthread_setschedparam and pthread_getschedparam on it (a policy other
 * than the one every OS thread starts with gives it an OS thread of its
 * own; the OS thread's policy never passes to the threads it runs next, as
 * sched_setscheduler(0, ...) made it). GLib's thread pools read and set
 * each worker's attributes by its gettid() with sched_getattr and
 * sched_setattr (through syscall()): those take the caller's own id as
 * "this thread" (ESRCH before, a GLib-CRITICAL in every GStreamer run).
 * Other ids are the kernel's. */
/* the kernel's struct sched_attr (<linux/sched/types.h> clashes with
 * <sched.h>): the fields up to the deadline policy's */
struct kattr {
	uint32_t size, sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
};

/* a raw call's answer as the libc function's: -1 with errno */
static long sys_ret(long r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

static bool green_of(pid_t pid, pthread_t *th)
{
	if (!bb_on_g())
		return false;
	bool green;
	bb_g *gp = pid == 0 ? bb_getg() : g_by_id(pid, &green);
	if (gp == NULL || atomic_load(&gp->status) == Gdead)
		return false;
	*th = bb_handle(gp);
	return true;
}

static int errno_ret(int err)
{
	if (err == 0)
		return 0;
	errno = err;
	return -1;
}

BB_EXPORT int sched_setscheduler(pid_t pid, int policy, const struct sched_param *param)
{
	pthread_t th;
	if (param == NULL || pid < 0 || !green_of(pid, &th))
		return (int)sys_ret(bb_sys(SYS_sched_setscheduler, pid, policy, param));
	return errno_ret(pthread_setschedparam(th, policy, param));
}

BB_EXPORT int sched_setparam(pid_t pid, const struct sched_param *param)
{
	pthread_t th;
	if (param == NULL || pid < 0 || !green_of(pid, &th))
		return (int)sys_ret(bb_sys(SYS_sched_setparam, pid, param, 0));
	int policy;
	struct sched_param cur;
	int err = pthread_getschedparam(th, &policy, &cur);
	return errno_ret(err ? err : pthread_setschedparam(th, policy, param));
}

BB_EXPORT int sched_getscheduler(pid_t pid)
{
	pthread_t th;
	int policy;
	struct sched_param cur;
	if (pid < 0 || !green_of(pid, &th))
		return (int)sys_ret(bb_sys(SYS_sched_getscheduler, pid, 0, 0));
	int err = pthread_getschedparam(th, &policy, &cur);
	return err ? errno_ret(err) : policy;
}

BB_EXPORT int sched_getparam(pid_t pid, struct sched_param *param)
{
	pthread_t th;
	int policy;
	if (param == NULL || pid < 0 || !green_of(pid, &th))
		return (int)sys_ret(bb_sys(SYS_sched_getparam, pid, param, 0));
	return errno_ret(pthread_getschedparam(th, &policy, param));
}

/* syscall(SYS_sched_*, ...) of a green thread: true with *r when the call
 * names one (see green_of); sched_getattr and sched_setattr only the
 * caller itself: its OS thread's attributes are its own (a thread that
 * changes them keeps that OS thread from then on) */
bool bb_own_sched_call(long *r, long nr, long a1, long a2, long a3, long a4)
{
	pthread_t th;
	if (!green_of((pid_t)a1, &th) || (pid_t)a1 < 0)
		return false;
	switch (nr) {
	case SYS_sched_setscheduler:
		*r = sched_setscheduler((pid_t)a1, (int)a2, (const struct sched_param *)a3);
		return true;
	case SYS_sched_setparam:
		*r = sched_setparam((pid_t)a1, (const struct sched_param *)a2);
		return true;
	case SYS_sched_getscheduler:
		*r = sched_getscheduler((pid_t)a1);
		return true;
	case SYS_sched_getparam:
		*r = sched_getparam((pid_t)a1, (struct sched_param *)a2);
		return true;
	}
	if (th != pthread_self() || (nr != SYS_sched_getattr && nr != SYS_sched_setattr))
		return false;
	if (nr == SYS_sched_getattr) {
		*r = sys_ret(bb_rawsyscall6(SYS_sched_getattr, 0, a2, a3, a4, 0, 0));
		return true;
	}
	/* setattr: what the thread has already (GLib re-applies what it read)
	 * changes nothing and takes no OS thread */
	const struct kattr *want = (const struct kattr *)a2;
	struct kattr cur;
	memset(&cur, 0, sizeof cur);
	if (want != NULL && a3 == 0 &&
	    bb_rawsyscall6(SYS_sched_getattr, 0, (long)&cur, sizeof cur, 0, 0, 0) == 0 &&
	    want->sched_policy == cur.sched_policy && want->sched_flags == cur.sched_flags &&
	    want->sched_nice == cur.sched_nice && want->sched_priority == cur.sched_priority &&
	    (want->size < sizeof cur ||
	     (want->sched_runtime == cur.sched_runtime && want->sched_deadline == cur.sched_deadline &&
	      want->sched_period == cur.sched_period))) {
		*r = 0;
		return true;
	}
	bb_kstate_begin(); /* locked before the change: it cannot move in between */
	long k = bb_sys(SYS_sched_setattr, 0, a2, a3);
	if (k == 0) {
		bb_getm()->kdirty = true;
		bb_g *gp = bb_getg(); /* what pthread_getschedparam answers */
		bb_lock_acquire(&gp->lock);
		gp->schedpolicy = (int)want->sched_policy;
		gp->schedprio = (int)want->sched_priority;
		bb_lock_release(&gp->lock);
	} else {
		bb_unlock_os_thread();
	}
	*r = sys_ret(k);
	return true;
}

/* ---- capabilities and other per-thread security state ----
 *
 * Made every thread's when the process's only thread changes it (the log
 * in m.c: every M applies it, so glibc's set*id finds the capabilities it
 * needs on each of bobbin's OS threads); otherwise the caller's own, and it
 * stays on its OS thread from then on, as for a nice value. The call and
 * the log entry happen on one M (locked meanwhile). */
static long cred_call(long nr, long a1, long a2, long a3, const void *capdata)
{
	bool every = bb_alone();
	if (every) {
		bb_lock_os_thread();
	} else {
		bb_kstate_begin();
		bb_cred_save_m0(); /* (on the initial OS thread: put back later) */
	}
	long r = bb_sys(nr, a1, a2, a3);
	/* (a capset is logged with its header's version) */
	long la1 = nr == SYS_capset ? (long)((const struct bb_cap_header *)a1)->version : a1;
	if (r == 0 && every && !bb_cred_log(nr, la1, a2, a3, capdata))
		every = false; /* (the log is full: the caller's own, as below) */
	if (r == 0 && !every)
		bb_getm()->kdirty = true;
	else
		bb_unlock_os_thread();
	return r;
}

static bool cred_prctl(long option, long a2)
{
	switch (option) {
	case PR_SET_KEEPCAPS:
	case PR_SET_SECUREBITS:
	case PR_CAPBSET_DROP:
	case PR_SET_NO_NEW_PRIVS:
		return true;
	case PR_CAP_AMBIENT:
		return a2 == PR_CAP_AMBIENT_RAISE || a2 == PR_CAP_AMBIENT_LOWER ||
		       a2 == PR_CAP_AMBIENT_CLEAR_ALL;
	}
	return false;
}

/* SYS_capget or SYS_capset from a green thread: the caller's own id (main's
 * is the process id, the others' bobbin's) means its OS thread, as natively;
 * -errno or the kernel's answer. */
static long cap_call(long nr, struct bb_cap_header *uh, void *data)
{
	struct bb_cap_header h = *uh;
	if (h.pid != 0 && own_tid(h.pid))
		h.pid = 0;
	long r;
	bool v1 = h.version == BB_CAP_V1, v23 = h.version == BB_CAP_V2 || h.version == BB_CAP_V3;
	if (nr == SYS_capset && h.pid == 0 && data && (v1 || v23)) {
		/* the data as the kernel reads it: one struct of three
		 * words (version 1) or two */
		uint32_t d[6] = {0};
		memcpy(d, data, (v1 ? 3 : 6) * sizeof *d);
		r = cred_call(nr, (long)&h, (long)d, 0, d);
	} else {
		r = bb_sys(nr, &h, data, 0);
	}
	uh->version = h.version; /* the kernel's preferred one, on EINVAL */
	return r;
}

BB_EXPORT int capset(void *hdr, const void *data)
{
	long r = bb_on_g() ? cap_call(SYS_capset, hdr, (void *)data) : bb_sys(SYS_capset, hdr, data, 0);
	return (int)sys_ret(r);
}

BB_EXPORT int capget(void *hdr, void *data)
{
	long r = bb_on_g() ? cap_call(SYS_capget, hdr, data) : bb_sys(SYS_capget, hdr, data, 0);
	return (int)sys_ret(r);
}

/* syscall(SYS_capset/SYS_capget/SYS_prctl, ...) from a green thread: true
 * with *r (-1 and errno, or the answer) when bobbin handled it */
bool bb_own_cred_call(long *r, long nr, long a1, long a2, long a3)
{
	if (!bb_on_g())
		return false;
	if (nr == SYS_prctl) {
		if (!cred_prctl(a1, a2))
			return false;
		*r = sys_ret(cred_call(nr, a1, a2, a3, NULL));
		return true;
	}
	*r = sys_ret(cap_call(nr, (struct bb_cap_header *)a1, (void *)a2));
	return true;
}

/* The process has one OS thread: nothing was started yet (sysmon, a
 * second M). A namespace its only thread enters then is the one every
 * later thread inherits, as natively, and a new user namespace needs it
 * (the kernel refuses one to a process with several threads: `unshare -U`
 * failed with EINVAL when bobbin started sysmon first). */
static bool one_os_thread(void)
{
	return !bb_sysmon_runs() && atomic_load(&bb_sched_.mcount) == 1;
}

/* The caller is the program's only thread left (bb_alone): the process
 * goes back to one OS thread, as it has natively (runtime/proc.c,
 * bb_go_single). True if it has one. */
static bool back_to_one(void)
{
	return one_os_thread() || (bb_alone() && bb_go_single() && one_os_thread());
}

/* A path the program may look at to count its threads: the task directory
 * of /proc (its link count, its entries), absolute or relative to a
 * directory it opened (Chromium's sandbox: fstatat(proc_fd, "self/task/")).
 * Before the look, a program whose threads have all ended gets the single
 * OS thread it has natively. */
static bool task_dir(int dirfd, const char *path)
{
	if (path == NULL || (dirfd == AT_FDCWD && strncmp(path, "/proc/", 6) != 0))
		return false;
	size_t n = strlen(path);
	while (n > 0 && path[n - 1] == '/')
		n--;
	return n >= 4 && memcmp(path + n - 4, "task", 4) == 0 && (n == 4 || path[n - 5] == '/');
}

void bb_task_look(int dirfd, const char *path)
{
	if (bb_on_g() && task_dir(dirfd, path) && bb_alone())
		back_to_one();
}

/* (named by their symbols: with _FILE_OFFSET_BITS=64 the headers turn
 * stat into stat64, and the program may call either) */
#define LOOK_WRAP(ret, name, params, dirfd, path, args)                 \
	BB_EXPORT ret look_##name params __asm__(#name);                 \
	BB_EXPORT ret look_##name params                                 \
	{                                                                \
		static ret(*real) params;                                \
		if (real == NULL)                                        \
			real = (ret(*) params)next(#name);               \
		bb_task_look(dirfd, path);                               \
		return real args;                                        \
	}

LOOK_WRAP(int, stat, (const char *p, void *st), AT_FDCWD, p, (p, st))
LOOK_WRAP(int, stat64, (const char *p, void *st), AT_FDCWD, p, (p, st))
LOOK_WRAP(int, fstatat, (int d, const char *p, void *st, int f), d, p, (d, p, st, f))
LOOK_WRAP(int, fstatat64, (int d, const char *p, void *st, int f), d, p, (d, p, st, f))
LOOK_WRAP(int, statx, (int d, const char *p, int f, unsigned int m, void *st), d, p, (d, p, f, m, st))
LOOK_WRAP(void *, opendir, (const char *p), AT_FDCWD, p, (p))

/* namespaces: the caller stays on its OS thread, which makes no thread
 * of its own from then on (bb_newm: they would inherit them); but the
 * program's only thread left first gets the process's single OS thread
 * back (the kernel refuses a new user namespace to a process with more) */
#define LOCKING_WRAP(ret, name, params, args)                     \
	BB_EXPORT ret name params                                  \
	{                                                          \
		static ret(*real) params;                          \
		if (real == NULL)                                  \
			real = (ret(*) params)next(#name);         \
		if (!bb_on_g() || back_to_one())                   \
			return real args;                          \
		bb_kstate_begin();                                 \
		ret r = real args;                                 \
		bb_getm()->kdirty = true;                          \
		return r;                                          \
	}

LOCKING_WRAP(int, setns, (int fd, int nstype), (fd, nstype))
LOCKING_WRAP(int, unshare, (int flags), (flags))

BB_EXPORT int prctl(int option, ...)
{
	static int (*real)(int, unsigned long, unsigned long, unsigned long, unsigned long);
	if (real == NULL)
		real = (int (*)(int, unsigned long, unsigned long, unsigned long, unsigned long))next("prctl");
	va_list ap;
	va_start(ap, option);
	unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
	unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (bb_on_g() && option == 40 /* PR_GET_TID_ADDRESS */) {
		/* the G's clear-on-exit address (syscall.c's set_tid_address),
		 * by default its own tid field as NPTL's threads have; never the
		 * M's, which a set_tid_address would then have the G clear */
		bb_g *gp = bb_getg();
		void *a = gp->clear_tid ? (void *)gp->clear_tid : (char *)gp->tcb + 720;
		*(void **)a2 = a;
		return 0;
	}
	if (bb_on_g() && cred_prctl(option, (long)a2))
		return (int)sys_ret(cred_call(SYS_prctl, option, (long)a2, (long)a3, NULL));
	if (bb_on_g() && option == PR_SET_TIMERSLACK) {
		/* per OS thread: the G stays on the one that has it */
		int r = real(option, a2, a3, a4, a5);
		if (r == 0)
			bb_lock_os_thread();
		return r;
	}
	if (bb_on_g() && option == PR_GET_NAME) {
		/* the thread's own name, as pthread_getname_np answers it (a
		 * name set with pthread_setname_np lives in the G: its OS
		 * thread's comm is another thread's, or none) */
		memcpy((char *)a2, bb_getg()->name, 16);
		return 0;
	}
	if (bb_on_g() && option == PR_SET_NAME) {
		/* the thread's name, as pthread_setname_np sets it: in the G,
		 * which PR_GET_NAME and pthread_getname_np answer. It once also
		 * pinned the thread to its OS thread, for that thread's comm:
		 * GNAT names every Ada task so, and each rendezvous became a
		 * hand-over between OS threads, ten times slower than natively. */
		bb_g *gp = bb_getg();
		strncpy(gp->name, (const char *)a2, sizeof gp->name - 1);
		gp->name[sizeof gp->name - 1] = '\0';
		/* main's name is the process's (the initial OS thread's comm,
		 * what ps and pgrep show), wherever main runs */
		if (gp->is_main)
			bb_name_process(gp->name);
		return 0;
	}
	return real(option, a2, a3, a4, a5);
}

/* The process's name (its initial thread's comm, which ps and pgrep show),
 * as a rename of main sets it natively: main may run on another OS thread,
 * so through /proc, as glibc renames another thread. */
void bb_name_process(const char *name)
{
	char path[48];
	snprintf(path, sizeof path, "/proc/self/task/%ld/comm", bb_sys(SYS_getpid, 0, 0, 0));
	long fd = bb_sys(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	bb_sys(SYS_write, fd, name, strlen(name));
	bb_sys(SYS_close, fd, 0, 0);
}

/* A tracer is an OS thread: the kernel answers ptrace requests only from
 * the thread that attached (or forked a PTRACE_TRACEME child), so a green
 * thread that traces stays on its OS thread from its first request on, as
 * Go asks of ptrace users (LockOSThread). */
BB_EXPORT long ptrace(enum __ptrace_request req, ...)
{
	static long (*real)(enum __ptrace_request, ...);
	if (real == NULL)
		real = (long (*)(enum __ptrace_request, ...))next("ptrace");
	va_list ap;
	va_start(ap, req);
	pid_t pid = va_arg(ap, pid_t);
	void *addr = va_arg(ap, void *), *data = va_arg(ap, void *);
	va_end(ap);
	if (bb_on_g() && req != PTRACE_TRACEME)
		bb_lock_os_thread();
	return real(req, pid, addr, data);
}

/* ---- set*id from any thread ----
 *
 * glibc's set*id functions change every thread of the process: they signal
 * each thread in glibc's list except THREAD_SELF, and make the system call
 * themselves. Under bobbin THREAD_SELF would be the calling G's TCB, which
 * for main is the initial thread's entry, so M0 would be skipped whenever
 * main runs elsewhere. So the call runs on the M's own TCB (for M0, the
 * initial thread's), as if the OS thread itself called; errno is carried
 * back to the G. */

static uintptr_t own_tcb(void)
{
	bb_m *mp = bb_getm();
	if (mp->ostcb)
		return (uintptr_t)mp->ostcb; /* a fork child's one OS thread */
	return (uintptr_t)(mp->id == 0 && bb_main_g ? bb_main_g->tcb : mp->tcb);
}

#define SETID_WRAP(name, params, args)                                   \
	BB_EXPORT int name params                                         \
	{                                                                 \
		static int(*real) params;                                 \
		if (real == NULL)                                         \
			real = (int(*) params)next(#name);                \
		if (!bb_on_g())                                           \
			return real args;                                 \
		uintptr_t g_fs = bb_getfsbase(), m_fs = own_tcb();        \
		if (m_fs == g_fs || m_fs == 0)                            \
			return real args;                                 \
		bb_lock_os_thread(); /* no switch while on the M's TCB */ \
		bb_setfsbase(m_fs);                                       \
		int r_ = real args;                                       \
		int e_ = errno;                                           \
		bb_setfsbase(g_fs);                                       \
		bb_unlock_os_thread();                                    \
		errno = e_;                                               \
		return r_;                                                \
	}

SETID_WRAP(setuid, (uid_t u), (u))
SETID_WRAP(setgid, (gid_t g), (g))
SETID_WRAP(seteuid, (uid_t u), (u))
SETID_WRAP(setegid, (gid_t g), (g))
SETID_WRAP(setreuid, (uid_t r, uid_t e), (r, e))
SETID_WRAP(setregid, (gid_t r, gid_t e), (r, e))
SETID_WRAP(setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s))
SETID_WRAP(setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s))
SETID_WRAP(setgroups, (size_t n, const gid_t *l), (n, l))
