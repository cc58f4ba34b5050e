/*
 * shim.h — what the interposed symbols share: the table of real functions
 * and the test that says whether the caller is a G of ours.
 */
#ifndef BB_SHIM_H
#define BB_SHIM_H

#include "runtime.h"

#include <pthread.h>
#include <semaphore.h>
#include <sched.h>
#include <time.h>
#include <stdio.h>

#define BB_EXPORT __attribute__((visibility("default")))

typedef struct bb_real_fns {
	int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	int (*pthread_join)(pthread_t, void **);
	int (*pthread_tryjoin_np)(pthread_t, void **);
	int (*pthread_timedjoin_np)(pthread_t, void **, const struct timespec *);
	int (*pthread_clockjoin_np)(pthread_t, void **, clockid_t, const struct timespec *);
	int (*pthread_detach)(pthread_t);
	void (*pthread_exit)(void *) __attribute__((noreturn));
	int (*pthread_getattr_np)(pthread_t, pthread_attr_t *);
	int (*pthread_getattr_default_np)(pthread_attr_t *);
	int (*pthread_setname_np)(pthread_t, const char *);
	int (*pthread_getname_np)(pthread_t, char *, size_t);
	int (*pthread_key_create)(pthread_key_t *, void (*)(void *));
	int (*pthread_key_delete)(pthread_key_t);
	void *(*pthread_getspecific)(pthread_key_t);
	int (*pthread_setspecific)(pthread_key_t, const void *);
	int (*pthread_once)(pthread_once_t *, void (*)(void));
	int (*sched_yield)(void);
	int (*nanosleep)(const struct timespec *, struct timespec *);
	int (*clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
	int (*clock_gettime)(clockid_t, struct timespec *);
	int (*clock_getres)(clockid_t, struct timespec *);
	int (*pthread_getcpuclockid)(pthread_t, clockid_t *);
	int (*usleep)(unsigned int);
	unsigned int (*sleep)(unsigned int);
	int (*pthread_mutex_lock)(pthread_mutex_t *);
	int (*pthread_mutex_trylock)(pthread_mutex_t *);
	int (*pthread_mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
	int (*pthread_mutex_clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
	int (*pthread_mutex_unlock)(pthread_mutex_t *);
	int (*pthread_mutex_init)(pthread_mutex_t *, const pthread_mutexattr_t *);
	int (*pthread_mutex_destroy)(pthread_mutex_t *);
	int (*pthread_mutex_consistent)(pthread_mutex_t *);
	int (*pthread_cond_wait)(pthread_cond_t *, pthread_mutex_t *);
	int (*pthread_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
	int (*pthread_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
				      const struct timespec *);
	int (*pthread_cond_signal)(pthread_cond_t *);
	int (*pthread_cond_broadcast)(pthread_cond_t *);
	int (*pthread_cond_init)(pthread_cond_t *, const pthread_condattr_t *);
	int (*pthread_cond_destroy)(pthread_cond_t *);
	void (*flockfile)(FILE *);
	int (*ftrylockfile)(FILE *);
	void (*funlockfile)(FILE *);
	int (*pthread_rwlock_rdlock)(pthread_rwlock_t *);
	int (*pthread_rwlock_tryrdlock)(pthread_rwlock_t *);
	int (*pthread_rwlock_timedrdlock)(pthread_rwlock_t *, const struct timespec *);
	int (*pthread_rwlock_clockrdlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
	int (*pthread_rwlock_wrlock)(pthread_rwlock_t *);
	int (*pthread_rwlock_trywrlock)(pthread_rwlock_t *);
	int (*pthread_rwlock_timedwrlock)(pthread_rwlock_t *, const struct timespec *);
	int (*pthread_rwlock_clockwrlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
	int (*pthread_rwlock_unlock)(pthread_rwlock_t *);
	int (*pthread_rwlock_init)(pthread_rwlock_t *, const pthread_rwlockattr_t *);
	int (*pthread_rwlock_destroy)(pthread_rwlock_t *);
	int (*pthread_barrier_init)(pthread_barrier_t *, const pthread_barrierattr_t *, unsigned);
	int (*pthread_barrier_wait)(pthread_barrier_t *);
	int (*pthread_barrier_destroy)(pthread_barrier_t *);
	int (*pthread_spin_lock)(pthread_spinlock_t *);
	int (*pthread_spin_trylock)(pthread_spinlock_t *);
	int (*pthread_spin_unlock)(pthread_spinlock_t *);
	int (*pthread_spin_init)(pthread_spinlock_t *, int);
	int (*pthread_spin_destroy)(pthread_spinlock_t *);
	int (*sem_wait)(sem_t *);
	int (*sem_trywait)(sem_t *);
	int (*sem_timedwait)(sem_t *, const struct timespec *);
	int (*sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
	int (*sem_post)(sem_t *);
	int (*sem_getvalue)(sem_t *, int *);
	int (*sem_init)(sem_t *, int, unsigned);
	int (*sem_destroy)(sem_t *);
} bb_real_fns;

extern bb_real_fns bb_real;
int bb_real_init(void);

/* pthread_create on a G (pthread_thread.c); c11: thrd_create's int-returning fn */
int bb_thread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg,
		     bool c11, uintptr_t pc);

/* the real function; resolves the table first if a constructor that ran
 * before bobbin's calls in (bobbin is not active then) */
#define REAL(name) (__builtin_expect(bb_real.name != NULL, 1) ? bb_real.name : (bb_real_init(), bb_real.name))

/* true when the caller is a G run by bobbin (not g0, not a thread bobbin
 * did not make, and bobbin did not step aside); marks the G as running
 * bobbin code from the calling function's frame down (bb_rt_live) */
#define bb_on_g() bb_on_g_at((uintptr_t)__builtin_frame_address(0), \
			     (uintptr_t)__builtin_return_address(0))
static inline __attribute__((always_inline)) bool bb_on_g_at(uintptr_t fp, uintptr_t ra)
{
	if (!bb_active || !bb_tls_m)
		return false;
	bb_m *mp = bb_getm();
	if (mp->curg == NULL)
		return false;
	/* not on the G's stack: a signal handler on this M's own stack (the
	 * scheduler's, between two Gs) or its signal stack: the G is not
	 * really running here, so the call runs as on a foreign thread */
	if (__builtin_expect(fp < mp->curg->stack_lo || fp >= mp->curg->stack_hi, 0))
		return false;
	/* inside a program's handler that the kernel ran over bobbin's own
	 * code: that code may be halfway through switching Gs or changing a
	 * run queue, so nothing here may (shim/signal.c) */
	if (__builtin_expect(mp->sigframe_fp != 0, 0) && bb_sig_native_live(mp, mp->curg, fp))
		return false;
	/* bobbin code from here (runtime.h). A helper of the call that made
	 * the live mark asking again: that mark stands, and so does what it
	 * found (marked again, the entry's own frame made the helper look
	 * nested: a pipe write woke no reader, a write loop had no
	 * preemption point) */
	bool inner = bb_rt_inner(mp->curg, fp);
	bool nested = inner || bb_rt_mark(mp->curg, fp, ra);
	if (__builtin_expect(mp->detached, 0)) {
		bb_reattach();   /* the P was taken while this M was stuck: runtime.h */
		mp = bb_getm(); /* exitsyscall may have moved the G to another M */
	} else if (__builtin_expect(atomic_load_explicit(&mp->curg->status, memory_order_relaxed) ==
					    Gsyscall,
				    0)) {
		/* a signal handler that interrupted this G in a system call
		 * (waitpid, a FIFO's open, glibc code run inside entersyscall):
		 * its M is already out of the scheduler, so the call runs as on
		 * a thread bobbin did not make */
		return false;
	}
	if (__builtin_expect((atomic_load_explicit(&mp->curg->sigpending, memory_order_relaxed) |
			      atomic_load_explicit(&mp->curg->procsig, memory_order_relaxed)) != 0, 0) &&
	    !nested)
		bb_deliver_signals(); /* pthread_kill'ed while parked: run the handler here
					 (at the entry, not in its helpers) */
	return true;
}

/* Before a call that may block: what was handed to the G while it waited
 * for a P (a yield at the preemption point, after bb_on_g looked) runs
 * first. A process signal sysmon gave it stays blocked on its M until the
 * G takes it (procsig): main, preempted on its way into pause() just after
 * unblocking SIGALRM, was handed the alarm meanwhile and slept in pause()
 * for ever with it blocked there (wait_not_cut) */
/* signals sent to gp, or handed to it, that it lets in now and may run
 * here (not inside a nested interposed call) */
static inline bool bb_signals_due(bb_g *gp)
{
	return __builtin_expect(((atomic_load_explicit(&gp->sigpending, memory_order_relaxed) |
				  atomic_load_explicit(&gp->procsig, memory_order_relaxed)) &
				 ~gp->sigmask) != 0,
				0) &&
	       !gp->rt_nested;
}

static inline void bb_signals_before_call(bb_g *gp)
{
	if (bb_signals_due(gp))
		bb_deliver_signals();
}

/* A call that may block in the kernel for long, inside entersyscall so the
 * P moves on; errno is the call's own. The value of the expression is the
 * call's. cancel: glibc makes the call a cancellation point (its wrapper
 * turns on asynchronous cancellation around the system call), so
 * pthread_cancel may interrupt it with SIGCANCEL (cancel.c). */
#define BB_IN_SYSCALL(ret, call, cancel) BB_IN_SYSCALL_AT(ret, call, cancel, (void)0, (void)0)

/* the same, with enter run once the G is in Gsyscall (it stays on this OS
 * thread from there) and leave before it takes a P back (it may move) */
#define BB_IN_SYSCALL_AT(ret, call, cancel, enter, leave)                         \
	({                                                                       \
		bb_preempt_point(); /* a loop of short calls must yield too */ \
		bb_testcancel();                                                 \
		bb_g *g_ = bb_getg();                                            \
		bb_signals_before_call(g_);                                      \
		bb_entersyscall();                                               \
		enter;                                                           \
		g_->in_cancel_call = (cancel);                                   \
		ret r_ = call;                                                   \
		g_->in_cancel_call = false;                                      \
		int e_ = errno;                                                  \
		leave;                                                           \
		bb_exitsyscall();                                                \
		errno = e_;                                                      \
		r_;                                                              \
	})

/* A call that cannot wait (a zero time-out), made on a G: bobbin's
 * preemption signal may land in it, and poll, select and epoll_wait then
 * fail with EINTR whatever SA_RESTART says (natively nothing interrupts
 * them: privoxy's poll failed so, and its client got an empty reply). The
 * EINTR is bobbin's when no handler of the program's ran on this M since
 * sigs (mp->sigs_run before the call) and no signal waits for the G: the
 * call is made again (BB_NOWAIT; also pause(), which nothing else ends). */
static inline bool bb_eintr_ours_under(bb_m *mp, uint64_t sigs, uint64_t mask)
{
	if (bb_getm() != mp || atomic_load_explicit(&mp->sigs_run, memory_order_relaxed) != sigs)
		return false;
	bb_g *gp = mp->curg;
	return gp != NULL && !((atomic_load_explicit(&gp->sigpending, memory_order_relaxed) |
				atomic_load_explicit(&gp->procsig, memory_order_relaxed)) &
			       ~mask);
}

static inline bool bb_eintr_ours(bb_m *mp, uint64_t sigs)
{
	return bb_eintr_ours_under(mp, sigs, 0);
}

#define BB_NOWAIT(ret, call)                                                           \
	({                                                                             \
		ret r_;                                                                \
		for (;;) {                                                             \
			bb_m *m_ = bb_getm();                                          \
			uint64_t s_ = atomic_load_explicit(&m_->sigs_run, memory_order_relaxed); \
			r_ = (call);                                                   \
			if (r_ >= 0 || errno != EINTR || !bb_eintr_ours(m_, s_))       \
				break;                                                 \
		}                                                                      \
		r_;                                                                    \
	})

/* The same for a call of the program's own, which may loop on it: a
 * preemption point first (the signal alone finds such a loop in libc or the
 * kernel every time; at BOBBIN_MAXPROCS=1 it kept its P for ever) */
#define BB_NOWAIT_POINT(ret, call)    \
	({                            \
		bb_preempt_point();   \
		BB_NOWAIT(ret, call); \
	})

/* the calling thread's id as glibc keeps it (a G's own, see gettid) */
static inline int bb_self_tid(void)
{
	int tid;
	__asm__ volatile("movl %%fs:720, %0" : "=r"(tid)); /* struct pthread.tid */
	return tid;
}

/* The G behind a pthread_t, or NULL if it is not one of ours. A G's
 * pthread_t is the G itself (proc.c, "G structs"); main's is its TCB, as
 * it was before bobbin started. A live G is also found by its TCB. */
static inline bb_g *bb_g_of(pthread_t th)
{
	bb_g *gp = bb_g_at((uintptr_t)th);
	return gp ? gp : bb_g_from_tcb((void *)th);
}

/* the pthread_t of a G */
static inline pthread_t bb_handle(bb_g *gp)
{
	return gp->is_main ? (pthread_t)gp->tcb : (pthread_t)gp;
}

void bb_tsd_run_destructors(bb_g *gp);
int bb_tid_kill(pid_t tgid, pid_t tid, int sig); /* identity.c */
void bb_fd_inherit_timeouts(int fd, int listener); /* fd.c */
bool bb_own_ioprio(long *r, long nr, long which, long who, long prio); /* identity.c */
bool bb_own_cred_call(long *r, long nr, long a1, long a2, long a3);      /* identity.c */
bool bb_own_sched_call(long *r, long nr, long a1, long a2, long a3, long a4); /* identity.c */
bool bb_mask_usable(size_t size, const cpu_set_t *set); /* identity.c */
int bb_sched_args_ok(int policy, int prio);             /* identity.c */
void bb_name_process(const char *name);           /* identity.c: main renamed */
/* a deadline on the monotonic clock for an absolute time on clock, -1 if
 * the time is invalid (pthread_mutex.c) */
int64_t bb_abs_deadline(clockid_t clock, const struct timespec *abstime);
bool bb_redirect_main_unwind(bb_g *gp);         /* cancel.c */
void bb_clone_child(uint64_t flags);             /* exec.c: first thing in a clone child */

/* a cancellation point: act on a pending pthread_cancel (cancel.c) */
void bb_testcancel_slow(void);
/* after a wait: a signal handler without SA_RESTART ran: fail with EINTR */
static inline bool bb_take_eintr(void)
{
	bb_g *gp = bb_getg();
	if (atomic_load_explicit(&gp->sigpending, memory_order_relaxed) |
	    atomic_load_explicit(&gp->procsig, memory_order_relaxed))
		bb_deliver_signals();
	if (!gp->sig_eintr)
		return false;
	gp->sig_eintr = false;
	return true;
}

/* Run the G's pending signals (sig 0), or sig's action with si, where no
 * wait of the G's is under way (after one ended, in kill): they leave no
 * EINTR or cut-short sleep for its next wait (signal.c) */
void bb_deliver_outside_wait(int sig, siginfo_t *si);

/* A wait that a wake-up ended: the signals sent to the G while it was
 * runnable (pthread_kill leaves them pending for a G that is not running)
 * run now, before the program goes on, as the kernel runs them on the way
 * out of a futex wait. The wait's result stands: no EINTR. */
static inline void bb_signals_after_wake(void)
{
	if (bb_signals_due(bb_getg()))
		bb_deliver_outside_wait(0, NULL);
}

static inline void bb_testcancel(void)
{
	/* struct pthread.cancelhandling: CANCELED (8) set, and not disabled (1),
	 * exiting (16) or terminated (32) */
	int ch;
	__asm__ volatile("movl %%fs:%c1, %0" : "=r"(ch) : "i"(BB_OFF_CANCELHANDLING));
	if (__builtin_expect((ch & (1 | 8 | 16 | 32)) == 8, 0))
		bb_testcancel_slow();
}

/* signal.c: run the handlers of the signals sent to this thread that mask
 * lets in; true if one ran */
bool bb_run_own_signals_under(uint64_t mask);
/* signal.c: the kernel just queued sig for this G's OS thread (EPIPE) */
void bb_keep_own_signal(int sig);

/* signals sent to this thread, lent to its OS thread around a call that
 * may read or poll a signalfd (shim/signal.c) */
void bb_sigfd_add(const sigset_t *mask);
typedef struct bb_sigfd_state {
	bool on, lent, locked; /* locked: the lend locked a running G to its M */
	bb_m *m;
	uint64_t runs;
} bb_sigfd_state;
void bb_sigfd_begin_slow(bb_sigfd_state *st);
bool bb_sigfd_again_slow(bb_sigfd_state *st, bool failed);
/* on a G's own stack, running or in a system call (bb_on_g says no to
 * the latter), outside a handler that runs natively */
static inline bool bb_sigfd_on_g(uintptr_t fp)
{
	if (!bb_active || !bb_tls_m)
		return false;
	bb_m *mp = bb_getm();
	bb_g *gp = mp->curg;
	return gp != NULL && fp >= gp->stack_lo && fp < gp->stack_hi &&
	       !(mp->sigframe_fp != 0 && bb_sig_native_live(mp, gp, fp));
}
static inline void bb_sigfd_begin(bb_sigfd_state *st)
{
	st->on = __builtin_expect(atomic_load_explicit(&bb_sigfd_sigs, memory_order_relaxed) != 0, 0) &&
		 bb_sigfd_on_g((uintptr_t)__builtin_frame_address(0));
	if (st->on)
		bb_sigfd_begin_slow(st);
}
/* after the call: take back what it left; true to make it again (it
 * failed with EINTR because a signal was sent to the thread as it began) */
static inline bool bb_sigfd_again(bb_sigfd_state *st, bool failed)
{
	return st->on && bb_sigfd_again_slow(st, failed);
}
#define BB_SIGFD_CALL(type, call)                                   \
	({                                                          \
		type sc_;                                           \
		bb_sigfd_state ss_;                                 \
		bb_sigfd_begin(&ss_);                               \
		do                                                  \
			sc_ = (call);                               \
		while (bb_sigfd_again(&ss_, sc_ < 0));              \
		sc_;                                                \
	})

/* A call that waits in the kernel under a mask of its own (sigsuspend,
 * ppoll, pselect, epoll_pwait with a mask), inside entersyscall. The kernel
 * never had what pthread_kill left pending in bobbin: what the mask lets in
 * is handled first and the call fails with EINTR, as the kernel would make
 * it. From the moment the wait is published (masked_wait, waitmask, in
 * Gsyscall: the G stays on this OS thread until the call returns), a
 * signal the mask lets in goes to the kernel on this OS thread: the
 * sender's own (pthread_kill, post_blocked), or, for one that reached
 * bobbin's pending set first, the wait's (bb_pending_to_kernel). A signal
 * handler's sigsuspend waiting for its restart signal (Boehm GC's stop of
 * the world) lost one sent just before the call: bobbin's SIGURG poke was
 * blocked there. Handled after the call (EINTR if it failed) what came
 * once it was over. A wait that only bobbin's own SIGURG cut short (no
 * handler of the program's ran on its M, nothing pending the mask lets in:
 * bb_eintr_ours_under) is made again if the expression again, evaluated
 * then, is true (it may set what is left of a time-out: shim/poll.c):
 * natively nothing would have ended it (signal_to_waiter's sigsuspend
 * returned EINTR for a preemption signal that landed as it began, and the
 * round's real signal was taken by the next round's wait) */
#define BB_MASKED_WAIT(ret, call, set, cancel, again)                          \
	({                                                                     \
		uint64_t m_;                                                   \
		memcpy(&m_, (set), sizeof m_);                                 \
		bb_testcancel();                                               \
		ret w_ = -1;                                                   \
		for (;;) {                                                     \
			if (bb_run_own_signals_under(m_)) {                    \
				errno = EINTR;                                 \
				break;                                         \
			}                                                      \
			bb_g *mg_ = bb_getg();                                 \
			bb_m *mm_ = NULL;                                      \
			uint64_t runs_ = 0;                                    \
			bool ours_ = false;                                    \
			w_ = BB_IN_SYSCALL_AT(ret, call, cancel,               \
				(mg_->waitmask = m_,                           \
				 atomic_store(&mg_->masked_wait, true),        \
				 mm_ = bb_getm(),                              \
				 runs_ = atomic_load(&mm_->sigs_run),          \
				 bb_pending_to_kernel(mg_, m_)),               \
				(atomic_store(&mg_->masked_wait, false),       \
				 ours_ = bb_eintr_ours_under(mm_, runs_, m_)));   \
			int we_ = errno;                                       \
			if (w_ < 0 && we_ == EINTR && ours_ && (again))        \
				continue; /* bobbin's SIGURG alone */          \
			if (bb_run_own_signals_under(m_) && w_ < 0)            \
				we_ = EINTR;                                   \
			errno = we_;                                           \
			break;                                                 \
		}                                                              \
		w_;                                                            \
	})

/* what is left of time-out ts (NULL: none, returned) until its deadline,
 * in *left: 0 once passed */
static inline struct timespec *bb_ts_left(int64_t deadline, const struct timespec *ts,
					  struct timespec *left)
{
	if (ts == NULL)
		return NULL;
	int64_t l = deadline - bb_nanotime();
	l = l > 0 ? l : 0;
	left->tv_sec = l / 1000000000;
	left->tv_nsec = l % 1000000000;
	return left;
}

/* signal.c: the signals of gp's pending set that mask lets in, to the
 * kernel queue of its OS thread (gp in Gsyscall there, its masked wait
 * published) */
void bb_pending_to_kernel(bb_g *gp, uint64_t mask);

/* signal.c: before a sleep parks, block on the M the signals with a
 * handler that the G lets in (sysmon hands them on once it is parked) */
bool bb_block_handled_for_wait(void); /* true: a pending one's handler ran */
void bb_unblock_after_wait(void); /* and the G's own mask back after it */

/* identity.c: before the program looks at /proc/.../task (its thread count) */
void bb_task_look(int dirfd, const char *path);

#endif
