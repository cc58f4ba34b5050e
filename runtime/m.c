/*
 * m.c — Ms: OS threads made with the real pthread_create (so glibc knows
 * them: malloc arenas, __libc_single_threaded, their own TCB), parked on a
 * futex when idle and reused. Each M's g0 runs the scheduler on the M's own
 * stack and TCB; gs base points at the M.
 *
 * The number of Ms is capped (BOBBIN_MAXTHREADS, default 10,000): past it,
 * startm fails with one clear line and the P goes back to the idle list.
 */
#include "runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>


int (*bb_real_pthread_create)(void *, const void *, void *(*)(void *), void *);

void bb_acquirep(bb_p *pp);
__attribute__((noreturn)) void bb_schedule(void);

/* every M ever made, for scheddetail and dumps (Ms are never freed) */
bb_m *bb_allm[BB_ALLM_MAX];
/* The M of an OS thread that shares a G's TLS without being an M (a
 * clone(CLONE_VM) child that kept its parent's TLS: shim/exec.c): no G, no
 * P, so every interposed call runs natively, and a signal finds no G. */
bb_m bb_nom = {.self = &bb_nom};
_Atomic int32_t bb_nallm;

/* the records of Ms whose OS threads ended (bb_m_end), for the next Ms:
 * each keeps its place in allm and its alternate signal stack */
static bb_lock mfree_lock;
static bb_m *mfree;

bb_m *bb_allocm(void)
{
	bb_lock_acquire(&mfree_lock);
	bb_m *mp = mfree;
	if (mp)
		mfree = mp->freelink;
	bb_lock_release(&mfree_lock);
	if (mp) {
		/* (sigs_run stays: sysmon reads the sum over allm as a count) */
		void *alt = mp->altstack;
		uint64_t runs = atomic_load_explicit(&mp->sigs_run, memory_order_relaxed);
		memset(mp, 0, sizeof *mp);
		mp->altstack = alt;
		atomic_store_explicit(&mp->sigs_run, runs, memory_order_relaxed);
	} else {
		/* (not the program's malloc: mem.c) */
		mp = bb_alloc(sizeof *mp);
		if (mp == NULL)
			return NULL;
		int32_t slot = atomic_fetch_add(&bb_nallm, 1);
		if (slot < BB_ALLM_MAX)
			bb_allm[slot] = mp;
	}
	mp->self = mp;
	mp->id = atomic_fetch_add_explicit(&bb_sched_.mcount, 1, memory_order_relaxed);
	int32_t peak = atomic_load_explicit(&bb_sched_.mpeak, memory_order_relaxed);
	while (peak < mp->id + 1 &&
	       !atomic_compare_exchange_weak_explicit(&bb_sched_.mpeak, &peak, mp->id + 1,
						      memory_order_relaxed, memory_order_relaxed))
		;
	mp->fastrand[0] = (uint32_t)(0x9e3779b9u * (uint32_t)(mp->id + 1));
	mp->fastrand[1] = (uint32_t)bb_nanotime() | 1;
	return mp;
}

static void m_take_start(void);

void bb_m_on_thread_start(bb_m *mp)
{
	bb_setgsbase((uintptr_t)mp);
	bb_tls_m = true;
	atomic_store((_Atomic pid_t *)&mp->tid, (pid_t)bb_sys(SYS_gettid, 0, 0, 0));
	m_take_start();
	/* the program's timer slack, which a thread made by sysmon (whose own
	 * is 1 µs) would not inherit: the timeouts of the program's calls,
	 * and a child it forks, keep the precision they have natively */
	if (bb_timerslack_ns > 0)
		prctl(PR_SET_TIMERSLACK, (unsigned long)bb_timerslack_ns, 0, 0, 0);
	bb_stack_signal_init(mp);
}

/* mp runs no OS thread (any more): its record to the next M made */
static void m_free(bb_m *mp)
{
	mp->tid = 0; /* (a kernel id another thread may get) */
	atomic_fetch_sub(&bb_sched_.mcount, 1);
	bb_lock_acquire(&mfree_lock);
	mp->freelink = mfree;
	mfree = mp;
	bb_lock_release(&mfree_lock);
}

/* This OS thread ends, from anywhere on g0 of mp (an idle M that
 * bb_go_single retires, sysmon's thread): back in mstart's frame, which
 * returns to glibc, whose thread exit gives its stack back to glibc's
 * cache. mp's record goes to the next M made. */
void bb_m_end(bb_m *mp)
{
	uint64_t all = ~0ull;
	bb_rawsyscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, 0, 8, 0, 0);
	stack_t off = {.ss_flags = SS_DISABLE};
	bb_sys(SYS_sigaltstack, &off, NULL, 0);
	intptr_t jb[5];
	memcpy(jb, mp->exitjb, sizeof jb);
	/* its own TCB, as glibc's exit expects; from here not an M (anything
	 * glibc's exit calls runs as on a thread bobbin did not make) */
	bb_setfsbase((uintptr_t)mp->tcb);
	bb_tls_m = false;
	bb_setgsbase(0);
	m_free(mp); /* (the record is another M's from here) */
	__builtin_longjmp(jb, 1);
}

static void *mstart(void *arg)
{
	bb_m *mp = arg;
	if (__builtin_setjmp(mp->exitjb))
		return NULL; /* bb_m_end */
	mp->tcb = (void *)bb_getfsbase();
	/* g0's stack starts just below this frame; mstart never returns */
	mp->g0sp = ((uintptr_t)__builtin_frame_address(0) - 512) & ~(uintptr_t)15;
	bb_m_on_thread_start(mp);
	/* blocked until now (bb_newm); from here the G it runs decides */
	mp->sigmask = ~0ull;
	bb_sysmon_ensure();
	if (mp->nextp == NULL) {
		bb_stopm(); /* the P left pending for it (bb_newm), or any later */
	} else {
		bb_idle_sigmask(mp);
		bb_acquirep(mp->nextp);
		mp->nextp = NULL;
	}
	bb_schedule();
}

/* glibc's SIGSETXID handler (setuid & co. from any thread) works on
 * THREAD_SELF, which must be the OS thread's own struct pthread, the one in
 * glibc's thread list, not the running G's: run it there (DESIGN.md §3.1).
 * glibc installs it with its first real pthread_create (sysmon or an M). */
#define SIGSETXID 33
struct kaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};
static void (*glibc_setxid)(int, siginfo_t *, void *);

static void setxid_wrapper(int sig, siginfo_t *si, void *uc)
{
	uintptr_t own = 0;
	bb_m *mp = bb_self_m();
	if (mp) {
		/* M0's own TCB is the initial thread's, which G1 kept */
		own = (uintptr_t)(mp->id == 0 && bb_main_g ? bb_main_g->tcb : mp->tcb);
	}
	uintptr_t fs = bb_getfsbase();
	if (mp && mp->cred_seen != atomic_load_explicit(&bb_cred_n, memory_order_relaxed))
		bb_cred_catchup(mp); /* the caps the set*id needs, first */
	if (own && own != fs)
		bb_setfsbase(own);
	glibc_setxid(sig, si, uc);
	if (own && own != fs)
		bb_setfsbase(fs);
}

static void wrap_setxid_once(void)
{
	static _Atomic int done;
	if (atomic_load(&done) || atomic_exchange(&done, 1))
		return;
	struct kaction ka;
	if (bb_rawsyscall6(SYS_rt_sigaction, SIGSETXID, 0, (long)&ka, 8, 0, 0) != 0 ||
	    ka.handler == NULL || ka.handler == (void *)SIG_IGN || ka.handler == (void *)setxid_wrapper)
		return;
	glibc_setxid = (void (*)(int, siginfo_t *, void *))ka.handler;
	ka.handler = (void *)setxid_wrapper;
	bb_rawsyscall6(SYS_rt_sigaction, SIGSETXID, (long)&ka, 0, 8, 0, 0);
}

/* A detached OS thread of bobbin's own, made with the real pthread_create,
 * that starts with every signal blocked but glibc's SIGCANCEL and SIGSETXID
 * (which must always get through, as glibc's pthread_sigmask ensures). The
 * mask is switched with the raw system call: pthread_sigmask is interposed. */
/* The CPU affinity and scheduling policy the process started with: a new
 * OS thread gets them, not those of the thread that starts it, which may
 * be locked to a green thread that changed its own (Go hands such starts
 * to a template thread for the same reason). */
static int start_policy = -1;
static struct sched_param start_param;
static _Atomic long start_nice = -100, start_ioprio = -1; /* -100, -1: unknown */
static _Atomic bool start_changed; /* bb_m_each_tid changed them */

/* Whether malloc is not glibc's: the program's (or a preloaded one), whose
 * lock its threads hold, and which ld.so calls for a new OS thread's DTV.
 * glibc's own is never a problem: bobbin does not preempt a G inside glibc,
 * and glibc's malloc never waits through an interposed call. Known from
 * start-up on (bb_m_kstate_init: dlopen takes ld.so's lock, which a G may
 * hold later). */
static bool foreign_malloc;

static void foreign_malloc_init(void)
{
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	void *own = libc ? dlsym(libc, "calloc") : NULL;
	foreign_malloc = own != NULL && dlsym(RTLD_DEFAULT, "calloc") != own;
}

/* after bb_initial_affinity is read (bb_sched_init) */
void bb_m_kstate_init(void)
{
	foreign_malloc_init();
	long nice = bb_sys(SYS_getpriority, PRIO_PROCESS, 0, 0); /* 20 - nice */
	start_nice = nice > 0 ? 20 - nice : -100;
	start_ioprio = bb_sys(SYS_ioprio_get, 1, 0, 0);
	start_policy = sched_getscheduler(0);
	if (sched_getparam(0, &start_param) != 0)
		start_policy = -1;
}

static void cred_restore_m0(void);

/* the initial OS thread, which cannot end with the locked G that changed
 * it, takes the starting policy back */
void bb_m_reset_sched(void)
{
	if (start_policy >= 0)
		bb_rawsyscall6(SYS_sched_setscheduler, 0, start_policy, (long)&start_param, 0, 0, 0);
	/* (lowering a nice value back may need a privilege the program has
	 * not got: then that OS thread keeps it) */
	bb_m *self = bb_self_m();
	if (self == NULL || !self->kdirty)
		return; /* no G changed this thread's nice value or I/O priority */
	cred_restore_m0();
	if (start_nice != -100)
		bb_sys(SYS_setpriority, PRIO_PROCESS, 0, start_nice);
	if (start_ioprio >= 0)
		bb_sys(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0, start_ioprio);
}

/* The process's only thread changed its nice value or I/O priority
 * (SYS_setpriority or SYS_ioprio_set, which, value): every other M takes it
 * too, and it is the one a thread gets back (bb_m_reset_sched). Ms whose
 * OS thread has ended have tid 0. */
void bb_m_each_tid(long nr, long which, long value)
{
	/* first, against an M starting meanwhile: it stores its tid, then
	 * reads these (m_take_start); one of the two sees the other */
	if (nr == SYS_setpriority)
		atomic_store(&start_nice, value);
	else
		atomic_store(&start_ioprio, value);
	atomic_store(&start_changed, true);
	int32_t n = atomic_load(&bb_nallm);
	bb_m *self = bb_self_m();
	for (int32_t i = 0; i < n && i < BB_ALLM_MAX; i++) {
		bb_m *mp = bb_allm[i];
		if (mp && mp != self && mp->tid > 0)
			bb_sys(nr, which, mp->tid, value);
	}
}

/* a new M's OS thread takes the process's nice value and I/O priority
 * (bb_m_each_tid), which the thread that made it may not have had yet */
static void m_take_start(void)
{
	if (!atomic_load(&start_changed))
		return; /* it has what the thread that made it had: the start's */
	long nice = atomic_load(&start_nice), io = atomic_load(&start_ioprio);
	if (nice != -100 && 20 - bb_sys(SYS_getpriority, PRIO_PROCESS, 0, 0) != nice)
		bb_sys(SYS_setpriority, PRIO_PROCESS, 0, nice);
	if (io >= 0 && bb_sys(SYS_ioprio_get, 1, 0, 0) != io)
		bb_sys(SYS_ioprio_set, 1, 0, io);
}

/* whether a thread with this policy needs an OS thread of its own: not if
 * it is the one every OS thread starts with */
bool bb_sched_is_start(int policy, int prio)
{
	return start_policy < 0 || (policy == start_policy && prio == start_param.sched_priority);
}

static void start_kstate(pthread_attr_t *attr)
{
	cpu_set_t now;
	if (CPU_COUNT(&bb_initial_affinity) > 0 && sched_getaffinity(0, sizeof now, &now) == 0 &&
	    !CPU_EQUAL(&now, &bb_initial_affinity))
		pthread_attr_setaffinity_np(attr, sizeof bb_initial_affinity, &bb_initial_affinity);
	struct sched_param p;
	if (start_policy >= 0 &&
	    (sched_getscheduler(0) != start_policy ||
	     (sched_getparam(0, &p) == 0 && p.sched_priority != start_param.sched_priority))) {
		pthread_attr_setinheritsched(attr, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(attr, start_policy);
		pthread_attr_setschedparam(attr, &start_param);
	}
}

_Atomic int32_t bb_nosstarting; /* OS threads being made (bb_start_os_thread) */

static int start_os_thread(void *(*fn)(void *), void *arg, size_t stacksize, bool on_g);

int bb_start_os_thread(void *(*fn)(void *), void *arg, size_t stacksize)
{
	return start_os_thread(fn, arg, stacksize, false);
}

/* on_g: called on a G, which may move to another M inside (glibc's
 * pthread_create allocates with the program's malloc, where a G may wait):
 * the new thread's mask then comes with the attributes, not from ours */
static int start_os_thread(void *(*fn)(void *), void *arg, size_t stacksize, bool on_g)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, stacksize);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	start_kstate(&attr);
	uint64_t all = ~((1ull << (32 - 1)) | (1ull << (33 - 1))), old;
	if (on_g) {
		sigset_t set;
		memset(&set, 0, sizeof set);
		memcpy(&set, &all, sizeof all);
		pthread_attr_setsigmask_np(&attr, &set);
	} else {
		bb_rawsyscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, 8, 0, 0);
	}
	pthread_t th;
	/* (glibc allocates with the program's malloc meanwhile, whose lock a
	 * waiting G may need: no deadlock report while it is held here) */
	atomic_fetch_add(&bb_nosstarting, 1);
	int err = bb_real_pthread_create(&th, &attr, fn, arg);
	atomic_fetch_sub(&bb_nosstarting, 1);
	if (!on_g)
		bb_rawsyscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
	pthread_attr_destroy(&attr);
	if (err == 0)
		wrap_setxid_once(); /* installed by glibc's first pthread_create */
	return err;
}

/* ---- per-thread security state, made every OS thread's ----
 *
 * capset and prctl's PR_SET_KEEPCAPS, PR_SET_SECUREBITS, PR_CAPBSET_DROP,
 * PR_CAP_AMBIENT and PR_SET_NO_NEW_PRIVS change the calling OS thread only.
 * Natively, the process's only thread that calls them gives them to every
 * thread it makes afterwards; and glibc's set*id then runs on every thread
 * (SIGSETXID), so a root program's PR_SET_KEEPCAPS, setresuid, capset,
 * setresgid (setpriv's way) needs the caps on each: bobbin's OS threads
 * without them failed the setresgid and glibc aborted. So such a change by
 * the only green thread is logged, and each M applies the log in order
 * before it runs a G (bb_execute) and before glibc's set*id work on its
 * thread (setxid_wrapper); a new M starts from what its creator had
 * applied, which its OS thread inherits. The entries are replayed as made:
 * one that no longer applies (a capability dropped later) fails as it
 * would, and the later ones set what the caller ended with. */
#define CRED_LOG_MAX 256
struct cred_op {
	long nr, a1, a2, a3;
	uint32_t capdata[6]; /* SYS_capset: up to two __user_cap_data_structs */
};
static struct cred_op cred_log[CRED_LOG_MAX];
_Atomic uint32_t bb_cred_n; /* published entries: never changed again */
static bb_lock cred_lock;   /* between loggers */

bool bb_cred_log(long nr, long a1, long a2, long a3, const void *capdata)
{
	bb_lock_acquire(&cred_lock);
	uint32_t n = atomic_load_explicit(&bb_cred_n, memory_order_relaxed);
	bool room = n < CRED_LOG_MAX;
	if (room) {
		struct cred_op *op = &cred_log[n];
		*op = (struct cred_op){.nr = nr, .a1 = a1, .a2 = a2, .a3 = a3};
		if (capdata)
			memcpy(op->capdata, capdata, sizeof op->capdata);
		atomic_store_explicit(&bb_cred_n, n + 1, memory_order_release);
	}
	bb_lock_release(&cred_lock);
	bb_m *self = bb_self_m();
	if (room && self && self->cred_seen == n)
		self->cred_seen = n + 1; /* the caller's own thread made it */
	return room;
}

/* on mp's own thread; async-signal-safe (raw system calls) */
void bb_cred_catchup(bb_m *mp)
{
	uint32_t n = atomic_load_explicit(&bb_cred_n, memory_order_acquire);
	uint32_t i;
	while ((i = mp->cred_seen) < n) {
		const struct cred_op *op = &cred_log[i];
		if (op->nr == SYS_capset) {
			struct bb_cap_header hdr = {(uint32_t)op->a1, 0};
			bb_rawsyscall6(SYS_capset, (long)&hdr, (long)op->capdata, 0, 0, 0, 0);
		} else {
			bb_rawsyscall6(SYS_prctl, op->a1, op->a2, op->a3, 0, 0, 0);
		}
		/* (a SIGSETXID handler may have gone on meanwhile) */
		if (mp->cred_seen == i)
			mp->cred_seen = i + 1;
	}
}

/* The initial OS thread cannot end with a locked G that changed its
 * security state for itself alone (capset while other threads live): what
 * it had before is put back when that G ends, as far as the kernel lets a
 * thread raise it again (not a permitted or bounding set it dropped). */
static struct {
	bool saved;
	uint32_t caps[6];
	long keepcaps, securebits;
} m0_cred;

void bb_cred_save_m0(void)
{
	bb_m *mp = bb_self_m();
	if (mp == NULL || mp->id != 0 || m0_cred.saved)
		return;
	struct bb_cap_header hdr = {BB_CAP_V3, 0};
	m0_cred.saved = bb_sys(SYS_capget, &hdr, m0_cred.caps, 0) == 0;
	m0_cred.keepcaps = bb_sys(SYS_prctl, PR_GET_KEEPCAPS, 0, 0);
	m0_cred.securebits = bb_sys(SYS_prctl, PR_GET_SECUREBITS, 0, 0);
}

static void cred_restore_m0(void)
{
	if (!m0_cred.saved)
		return;
	m0_cred.saved = false;
	if (m0_cred.securebits >= 0)
		bb_sys(SYS_prctl, PR_SET_SECUREBITS, m0_cred.securebits, 0);
	if (m0_cred.keepcaps >= 0)
		bb_sys(SYS_prctl, PR_SET_KEEPCAPS, m0_cred.keepcaps, 0);
	struct bb_cap_header hdr = {BB_CAP_V3, 0};
	bb_sys(SYS_capset, &hdr, m0_cred.caps, 0);
}

static _Atomic(bb_m *) newmq;
static void start_m(bb_m *mp, bool on_g);

/* sysmon starts mp after its next nap (it empties the list after every
 * nap, kicked or not) */
static void queue_m(bb_m *mp)
{
	bb_m *head = atomic_load(&newmq);
	do
		mp->newmlink = head;
	while (!atomic_compare_exchange_weak(&newmq, &head, mp));
	bb_sysmon_kick();
}

/* Start an OS thread for a new M that will run pp, or whichever P is
 * pending when it gets there. Making a thread may take long: glibc's
 * pthread_create allocates the thread's DTV with the program's malloc,
 * whose lock a preempted G may hold (Chromium's PartitionAlloc). So pp is
 * never held meanwhile: it waits on the pending list, where an M that
 * goes idle takes it (and runs that G), and the new M counts as dropping
 * until it takes a P or becomes idle. */
void bb_newm(bb_p *pp, bool spinning)
{
	if (atomic_load_explicit(&bb_sched_.mcount, memory_order_relaxed) >= bb_cfg.maxthreads) {
		static _Atomic int warned;
		if (!atomic_exchange(&warned, 1))
			bb_printf("bobbin: reached BOBBIN_MAXTHREADS=%d OS threads; not starting more\n",
				  bb_cfg.maxthreads);
		bb_startm_failed(pp, spinning);
		return;
	}
	bb_m *mp = bb_allocm();
	if (mp == NULL) {
		bb_startm_failed(pp, spinning);
		return;
	}
	bb_lock_acquire(&bb_sched_.lock);
	bb_drop_begin(mp);
	bb_pend_put(pp, spinning);
	bb_lock_release(&bb_sched_.lock);
	bb_m *self = bb_self_m();
	/* a new thread would inherit what a locked G set on ours; and an M
	 * that holds a P (wakep on a running M) would hold it while it waits
	 * on the program's own malloc: sysmon makes those */
	if (self && self != bb_sysmon_m() && (self->kdirty || (self->p && foreign_malloc)) &&
	    bb_sysmon_runs())
		queue_m(mp);
	else
		start_m(mp, false);
}

/* Ms to start from sysmon's thread, which has the state the process
 * started with: a G that changes its own thread's nice value, I/O priority
 * or namespaces stays on its M (a locked one), and threads that M made
 * would inherit them (a background thread's lowered priority became other
 * threads'). sysmon is started before the first such change. */

/* mstart takes a mask once its gs base is set (a handler may look at the M) */
/* on_g: see start_os_thread */
static void start_m(bb_m *mp, bool on_g)
{
	/* its OS thread inherits the security state of the thread that
	 * starts it (sysmon, for a queued M) */
	bb_m *self = bb_self_m();
	mp->cred_seen = self ? self->cred_seen : 0;
	int err = start_os_thread(mstart, mp, BB_G0_STACKSIZE, on_g);
	if (err == 0)
		return;
	/* a P pending for it that no other M will take goes idle, its Gs
	 * to the global queue for the Ms that exist */
	bb_lock_acquire(&bb_sched_.lock);
	bb_drop_end(mp);
	bool spin = false;
	bb_p *pp = bb_sched_.npend > bb_sched_.nmdropping ? bb_pend_take(&spin) : NULL;
	bb_lock_release(&bb_sched_.lock);
	m_free(mp);
	if (pp)
		bb_startm_failed(pp, spin);
}

void bb_start_queued_ms(void)
{
	bb_m *mp = atomic_exchange(&newmq, NULL);
	while (mp) {
		bb_m *next = mp->newmlink;
		start_m(mp, false);
		mp = next;
	}
}

/* On a G about to lock itself to its M for good (bb_kstate_begin), with a
 * malloc of the program's: with no idle M left, it makes one first, here,
 * unlocked. The M would run nothing else once this G is locked; and an M
 * made later, when one is needed, may wait on the program's malloc for a
 * G preempted with its lock held, which needs an M that can run it: with
 * every M locked there was none (Chromium). Here the G waits instead, as a
 * green thread, and its M runs that one meanwhile. */
static void spare_before_lock(void)
{
	if (!foreign_malloc || bb_getg()->lockcount != 0)
		return;
	bb_lock_acquire(&bb_sched_.lock);
	/* (an M being started does not count: it may be the one waiting) */
	bool need = bb_sched_.midle == NULL &&
		    atomic_load_explicit(&bb_sched_.mcount, memory_order_relaxed) < bb_cfg.maxthreads;
	bb_m *mp = need ? bb_allocm() : NULL;
	if (mp)
		bb_drop_begin(mp); /* it goes idle once it runs (mstart) */
	bb_lock_release(&bb_sched_.lock);
	if (mp)
		start_m(mp, true);
}

void bb_kstate_begin(void)
{
	bb_sysmon_ensure();
	spare_before_lock();
	bb_lock_os_thread();
}
