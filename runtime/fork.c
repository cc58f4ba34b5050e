/*
 * fork.c — fork from any thread (DESIGN.md §3.8).
 *
 * In the child only the calling OS thread survives, and with it only the
 * calling G; every other G and M is gone. bobbin registers fork handlers
 * first thing, so glibc runs its prepare handler after the program's own
 * (which may still park and switch Gs freely) and its child and parent
 * handlers before the program's. The prepare handler takes every runtime
 * lock, so no other M is half-way through a run queue, timer heap or wait
 * queue when the address space is copied; the parent handler lets go; the
 * child handler rebuilds the runtime for one M, one G: all Ps empty and idle
 * but ours, no idle Ms, a fresh netpoller (the epoll instance is shared with
 * the parent), sysmon to be started again on demand.
 *
 * Runs on the forking G; never parks.
 */
#include "runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>

void bb_sema_forkchild(void);
void bb_stack_forkchild(void);
void bb_netpoll_lock(void);
void bb_netpoll_unlock(void);
void bb_netpoll_forkchild(void);
void bb_sysmon_forkchild(void);
void bb_allgs_forkchild(bb_g *self);

void (*bb_fork_prepare_hook)(void); /* shim: sockets the child shares go blocking */

static void prepare(void)
{
	if (!bb_active)
		return;
	if (bb_fork_prepare_hook) /* before any runtime lock: it takes fd locks */
		bb_fork_prepare_hook();
	/* rank order: timer heaps, sched, dead-G list, netpoll init. Not the
	 * wait queues: the child empties those whatever state they are in
	 * (bb_sema_forkchild), and locking their 4 pages made each side of
	 * every fork copy them */
	for (int32_t i = 0; i < bb_gomaxprocs; i++)
		bb_lock_acquire(&bb_allp[i]->timerslock);
	bb_lock_acquire(&bb_sched_.lock);
	bb_lock_acquire(&bb_sched_.gflock);
	bb_netpoll_lock();
}

static void parent(void)
{
	if (!bb_active)
		return;
	bb_netpoll_unlock();
	bb_lock_release(&bb_sched_.gflock);
	bb_lock_release(&bb_sched_.lock);
	for (int32_t i = bb_gomaxprocs - 1; i >= 0; i--)
		bb_lock_release(&bb_allp[i]->timerslock);
}

static void child(void)
{
	bb_m *mp = bb_active ? bb_self_m() : NULL;
	if (mp == NULL)
		return;
	bb_p *mine = mp->p;
	bb_trace_on = false; /* the trace file is the parent's */
	bb_sema_forkchild();
	bb_stack_forkchild();
	bb_netpoll_forkchild();
	bb_sysmon_forkchild();
	bb_mem_forkchild();
	bb_cpuclock_forkchild(mp, mp->curg);
	atomic_store(&bb_sched_.lock.key, 0);
	atomic_store(&bb_sched_.gflock.key, 0);
	bb_sched_.runqhead = bb_sched_.runqtail = NULL;
	atomic_store(&bb_sched_.runqsize, 0);
	bb_sched_.midle = NULL;
	bb_sched_.nmidle = 0;
	bb_sched_.nmdropping = 0;
	bb_sched_.npend = 0;
	bb_sched_.pendp = NULL;
	mp->dropping = false;
	atomic_store(&bb_sched_.mcount, 1);
	atomic_store(&bb_sched_.mpeak, 1);
	bb_leader_m = mp; /* the child's initial thread */
	if (atomic_load(&bb_retiring))
		atomic_store(&bb_retiring, false);
	atomic_store(&bb_sched_.nmspinning, 0);
	atomic_store(&bb_sched_.timersleeper, NULL);
	atomic_store(&bb_sched_.timerwake, 0);
	bb_allgs_forkchild(mp->curg);
	/* a child forked off another thread has no main: its one thread's
	 * exit is the last */
	atomic_store(&bb_sched_.main_gone, !mp->curg->is_main);
	bb_sched_.pidle = NULL;
	atomic_store(&bb_sched_.npidle, 0);
	for (int32_t i = 0; i < bb_gomaxprocs; i++) {
		bb_p *pp = bb_allp[i];
		atomic_store(&pp->timerslock.key, 0);
		for (int k = 0; k < pp->ntimers; k++)
			atomic_store(&pp->timers[k].t->pp, NULL);
		pp->ntimers = 0;
		atomic_store(&pp->timer0when, 0);
		atomic_store(&pp->runqhead, 0);
		atomic_store(&pp->runqtail, 0);
		atomic_store(&pp->runnext, NULL);
		atomic_store(&pp->live, pp == mine); /* the one thread left */
		if (pp != mine) {
			/* its M may have been mid-update: the child drops them */
			pp->nstkfree = 0;
			pp->m = NULL;
			atomic_store(&pp->status, Pidle);
			bb_pidleput(pp);
		}
	}
	/* glibc's child side took THREAD_SELF (the G's TCB) for the surviving
	 * thread and moved every other thread's stack, this OS thread's own
	 * included, to its stack cache, where the next pthread_create would
	 * reuse the stack we run on. Take ours back out (list_t at 704). */
	if (mp->id != 0 && mp->tcb) {
		void **l = (void **)((char *)mp->tcb + 704);
		void **next = l[0], **prev = l[1];
		if (next && prev && next != (void *)l) {
			prev[0] = next;
			next[1] = prev;
			l[0] = l[1] = l;
		}
	}
	/* glibc's list of threads is that G's TCB alone, with this OS thread's
	 * id: set*id runs on it as this OS thread's (shim/identity.c; on the
	 * M's own TCB, absent from the list, glibc signalled the G's entry,
	 * this very thread, and waited for ever for an answer marked on the
	 * other TCB) */
	mp->ostcb = mp->curg->tcb;
	mp->spinning = false;
	mp->nextp = NULL;
	mp->detach_req = mp->detached = false;
	mp->tid = (pid_t)bb_sys(SYS_gettid, 0, 0, 0);
	/* the parent's other OS threads are not here: their ids are the
	 * parent's threads' (a nice value set for every M, bb_m_each_tid,
	 * must not reach them) */
	int32_t n = atomic_load(&bb_nallm);
	for (int32_t i = 0; i < n && i < BB_ALLM_MAX; i++)
		if (bb_allm[i] && bb_allm[i] != mp)
			bb_allm[i]->tid = 0;
}

/* bobbin's prepare handler must run after every other (glibc runs them
 * last-registered first): it takes the scheduler's locks, and a program's
 * handler run after it, with them held, that is preempted or waits for a
 * thread (Chromium's PartitionAlloc takes its allocator's lock) left the
 * forking thread's M waiting for ever on sched.lock. A program's handler
 * may be registered before bobbin starts (PartitionAlloc's, at its first
 * malloc, from ld.so's start-up): so every registration goes through
 * here (the library's __register_atfork), and bobbin's handlers are
 * registered before the first one. */
typedef int (*register_fn)(void (*)(void), void (*)(void), void (*)(void), void *);
extern void *__dso_handle;

static register_fn real_register(void)
{
	static _Atomic(register_fn) real;
	register_fn r = atomic_load_explicit(&real, memory_order_acquire);
	if (r == NULL) {
		r = (register_fn)dlsym(RTLD_NEXT, "__register_atfork");
		atomic_store_explicit(&real, r, memory_order_release);
	}
	return r;
}

static int register_ours_first(register_fn r)
{
	static _Atomic int done;
	if (r == NULL || atomic_exchange(&done, 1))
		return 0;
	return r(prepare, parent, child, &__dso_handle);
}

/* glibc's __register_atfork, bobbin's handlers first (shim/exec.c exports it) */
int bb_register_atfork(void (*prep)(void), void (*par)(void), void (*chi)(void), void *dso)
{
	register_fn r = real_register();
	if (r == NULL)
		return ENOMEM;
	register_ours_first(r);
	return r(prep, par, chi, dso);
}

void bb_fork_init(void)
{
	register_ours_first(real_register());
}
