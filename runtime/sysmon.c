/*
 * sysmon.c — the system monitor: an OS thread of its own, without a P
 * (Go's sysmon). It wakes every 20 µs, backing off to 10 ms while there is
 * nothing to do, and retakes Ps whose M has been in a system call since its
 * last look: at once (≥ 20 µs) when other work waits for a P, after 10 ms
 * otherwise. It also asks a G that has run a whole time slice to yield
 * (preempt.c): 10 ms, or less while every P is busy and Gs wait (slice_for).
 *
 * It also hands the process's pending signals to the Gs that take them
 * (route_pending below): it sleeps in ppoll on a signalfd for that.
 *
 * Started on the first entersyscall or when an M first goes idle (an idle
 * M blocks signals, so someone must watch them); a program that does
 * neither never pays for the thread. Never holds a lock while it sleeps.
 */
#include "runtime.h"

#include <errno.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SYSCALL_RETAKE_NS (10 * 1000 * 1000)

typedef struct pstate {
	uint32_t syscalltick;
	int64_t syscallwhen;
	uint32_t switchtick;
	int64_t switchwhen;
	int64_t firstask;   /* when preemption was first asked for this slice */
	int64_t cpuwhen;    /* stalled(): when cpu was read in this slice; -1 done */
	uint64_t cpu;       /* the CPU time of the P's OS thread then */
	int64_t window;     /* how long to wait before the next look */
} pstate;

static pstate *pd;

/* ---- process signals: see runtime.h ----
 *
 * The signalfd is only polled, never read: a signal is dequeued by the G
 * it is given to, so nothing of it (its siginfo, the queue of a real-time
 * signal) is lost on the way. watch is what the signalfd reports: every
 * signal a program can catch, but those handed to a G and not yet taken
 * (they stay pending meanwhile), and those no G takes, which stay pending
 * as they would natively, until a G unblocks them (bb_sigwatch_add).
 * Changes of watch happen under watchlock, with the signalfd's mask. */
#define NOT_OURS (BB_SIGBIT(SIGKILL) | BB_SIGBIT(SIGSTOP) | BB_SIGBIT(bb_presig()) | BB_GLIBC_SIGNALS)
int bb_sigfd = -1;
static _Atomic uint64_t watch;
static bb_lock watchlock;

static void set_watch(uint64_t w) /* watchlock held */
{
	atomic_store(&watch, w);
	if (bb_sigfd >= 0)
		bb_rawsyscall6(SYS_signalfd4, bb_sigfd, (long)&w, 8, SFD_NONBLOCK | SFD_CLOEXEC, 0, 0);
}

/* bobbin's signal moved (preempt.c): SIGURG is a signal like the others */
void bb_sigwatch_moved(void)
{
	bb_lock_acquire(&watchlock);
	set_watch((atomic_load(&watch) | BB_SIGBIT(SIGURG)) & ~NOT_OURS);
	bb_lock_release(&watchlock);
}

void bb_sigwatch_add(uint64_t sigs)
{
	sigs &= ~NOT_OURS;
	if ((atomic_load(&watch) & sigs) == sigs)
		return;
	bb_lock_acquire(&watchlock);
	set_watch(atomic_load(&watch) | sigs);
	bb_lock_release(&watchlock);
}

/* ---- wake-ups from the program's signal handlers ----
 *
 * A handler the kernel runs on an M outside any G (between two Gs, or over
 * bobbin's own code: shim/signal.c marks those, bb_m_in_handler) may neither
 * put a G on a run queue nor take a lock: the code it interrupted may be
 * changing that queue, or hold that lock, on this very thread (a sem_post
 * from such a handler broke a P's run queue: "pidleput: P0 has runnable
 * Gs"). Its wake-ups come here instead: the Gs it made runnable on a
 * lock-free list, the semaphores it posted to in a ring. sysmon, kicked
 * through an eventfd, puts the Gs on the global queue and wakes Ms. */
static int kickfd = -1;
static _Atomic bool sysmon_live; /* sysmon runs and polls kickfd */
static bb_m *sysmon_mp;
static _Atomic bool sysmon_quit;  /* bb_sysmon_stop: end at the next wake-up */
void bb_sysmon_mark_stopped(void); /* syscall.c: the next bb_sysmon_ensure starts one */
/* sysmon's thread runs (it looks at its work at least every 10 ms, at
 * once when kicked) */
static _Atomic bool sysmon_runs;
static _Atomic(bb_g *) sigready;
#ifndef NSEMWAKE
#define NSEMWAKE 1024
#endif
static _Atomic uintptr_t semwake[NSEMWAKE];
static _Atomic uint32_t semwake_head, semwake_tail;
static _Atomic bool semwake_lost; /* a post found the ring full */

static void kick(void)
{
	uint64_t one = 1;
	bb_rawsyscall6(SYS_write, kickfd, (long)&one, sizeof one, 0, 0, 0);
}


bool bb_sysmon_runs(void)
{
	return atomic_load(&sysmon_runs);
}

/* sysmon's thread ends (bb_go_single: no thread of the program's but the
 * caller is left); sysmon_runs goes false once it is on its way out */
void bb_sysmon_stop(void)
{
	atomic_store(&sysmon_quit, true);
	kick();
}

void bb_sysmon_kick(void)
{
	kick();
}

/* gp (already Grunnable) to a run queue, by sysmon; false: do it yourself */
bool bb_defer_ready(bb_g *gp)
{
	if (!atomic_load(&sysmon_live))
		return false;
	bb_g *old = atomic_load(&sigready);
	do
		gp->schedlink = old;
	while (!atomic_compare_exchange_weak(&sigready, &old, gp));
	kick();
	return true;
}

/* one waiter of the semaphore word at addr woken, by sysmon; false: sysmon
 * is not running, do it yourself */
bool bb_defer_sema_wake(void *addr)
{
	if (!atomic_load(&sysmon_live))
		return false;
	uint32_t t = atomic_load(&semwake_tail);
	do {
		if (t - atomic_load(&semwake_head) >= NSEMWAKE) {
			/* full (sysmon kept off the CPU for as many posts): it
			 * wakes every semaphore waiter that may have a token */
			atomic_store(&semwake_lost, true);
			kick();
			return true;
		}
	} while (!atomic_compare_exchange_weak(&semwake_tail, &t, t + 1));
	atomic_store_explicit(&semwake[t % NSEMWAKE], (uintptr_t)addr, memory_order_release);
	kick();
	return true;
}

/* ---- process signals a handler could not take where it landed ----
 *
 * The kernel gives a process signal to any thread whose mask lets it in.
 * An M keeps the mask of the G it last ran while it looks for the next one
 * (changing it costs a system call at every switch), and a G parking in a
 * wait that a signal cuts short is on bobbin's code for a while. A signal
 * that lands there can run its handler only as on a thread bobbin did not
 * make: not as the parked G's (its pthread_self was the M's), and its wait
 * went on (process_signals: a sem_wait that never saw its EINTR). The
 * handler (shim/signal.c) keeps such a signal here instead, with its
 * siginfo, one per signal number, and sysmon hands it to a G that takes
 * it, as it hands the pending ones; the G takes it with bb_take_stashed. */
static siginfo_t stash_info[65];
static _Atomic int stash_state[65]; /* 0 empty, 1 being written, 2 full, 3 being read */
static _Atomic uint64_t stashed;    /* the full ones */
static _Atomic uint32_t stash_seq[65]; /* counts what was kept, per signal */
static uint32_t handed_seq[65];     /* the one sysmon gave to a G: sysmon only */
static bb_g *handed_g[65];          /* ... and that G */

bool bb_stash_signal(int sig, const siginfo_t *si)
{
	if (sig < 1 || sig > 64 || !atomic_load(&sysmon_live))
		return false;
	int empty = 0;
	if (!atomic_compare_exchange_strong(&stash_state[sig], &empty, 1))
		return false; /* one already kept: this one runs where it landed */
	stash_info[sig] = *si;
	atomic_fetch_add(&stash_seq[sig], 1);
	atomic_store(&stash_state[sig], 2);
	atomic_fetch_or(&stashed, BB_SIGBIT(sig));
	kick();
	return true;
}

bool bb_take_stashed(int sig, siginfo_t *si)
{
	if (sig < 1 || sig > 64 || !(atomic_load(&stashed) & BB_SIGBIT(sig)))
		return false;
	int full = 2;
	if (!atomic_compare_exchange_strong(&stash_state[sig], &full, 3))
		return false;
	*si = stash_info[sig];
	atomic_fetch_and(&stashed, ~BB_SIGBIT(sig));
	atomic_store(&stash_state[sig], 0);
	return true;
}

/* in a fork child: sysmon is gone (until started again), and with it
 * whatever the parent's handlers had left for it */
void bb_sysmon_deferred_forkchild(void)
{
	/* (stores only where something is left: each would copy a page) */
	if (atomic_load(&sysmon_live))
		atomic_store(&sysmon_live, false);
	/* no sysmon here until one is started: Ms that bb_newm would leave to
	 * it start at once (a forked stressor of stress-ng that set its nice
	 * value queued its Ms for a sysmon that did not exist, and hung) */
	if (atomic_load(&sysmon_runs))
		atomic_store(&sysmon_runs, false);
	if (atomic_load(&sigready))
		atomic_store(&sigready, NULL);
	uint32_t h = atomic_load(&semwake_head), t = atomic_load(&semwake_tail);
	for (; h != t; h++)
		atomic_store(&semwake[h % NSEMWAKE], 0);
	if (atomic_load(&semwake_head) != t)
		atomic_store(&semwake_head, t);
	if (atomic_load(&semwake_lost))
		atomic_store(&semwake_lost, false);
	if (atomic_load(&stashed)) { /* the parent's, as its pending signals */
		for (int sig = 1; sig <= 64; sig++)
			atomic_store(&stash_state[sig], 0);
		atomic_store(&stashed, 0);
	}
}

static void run_deferred(void)
{
	bb_g *list = atomic_exchange(&sigready, NULL);
	while (list) {
		bb_g *gp = list;
		list = gp->schedlink;
		gp->schedlink = NULL;
		bb_lock_acquire(&bb_sched_.lock);
		bb_globrunqput(gp);
		bb_lock_release(&bb_sched_.lock);
		bb_wakep();
	}
	uint32_t h = atomic_load(&semwake_head);
	while (h != atomic_load(&semwake_tail)) {
		uintptr_t a = atomic_exchange(&semwake[h % NSEMWAKE], 0);
		if (a == 0)
			break; /* taken, not yet written: its writer kicks again */
		atomic_store(&semwake_head, ++h);
		/* as sem_post: the waiter parked, or one that is not a G in
		 * glibc's futex on the same word */
		if (bb_sema_wake((void *)a, 1) == 0)
			bb_futex((_Atomic uint32_t *)a, FUTEX_WAKE, 1, NULL);
	}
	if (atomic_load(&semwake_lost) && atomic_exchange(&semwake_lost, false))
		bb_sema_wake_nonzero();
}

bool bb_own_fd(int fd)
{
	return fd >= 0 && ((bb_netpoll_inited() && (fd == bb_epfd || fd == bb_breakfd)) ||
			   fd == bb_sigfd || fd == kickfd);
}

/* bobbin's own fds, ascending, into out[BB_OWN_FDS_MAX]; returns how many */
int bb_own_fds(int *out)
{
	int cand[BB_OWN_FDS_MAX] = {bb_epfd, bb_breakfd, bb_sigfd, kickfd}, n = 0;
	for (int i = 0; i < BB_OWN_FDS_MAX; i++)
		if (bb_own_fd(cand[i])) {
			int k = n++;
			while (k > 0 && out[k - 1] > cand[i]) { /* insertion sort */
				out[k] = out[k - 1];
				k--;
			}
			out[k] = cand[i];
		}
	return n;
}

struct taker {
	uint64_t bit;
	bb_g *found;
};

bool bb_g_takes(bb_g *gp, uint64_t bit)
{
	uint32_t st = atomic_load(&gp->status);
	if (st == Gdead || st == Gidle)
		return false;
	/* one in sigsuspend (or a masked poll) takes what that call lets in */
	uint64_t mask = st == Gsyscall && gp->masked_wait ? gp->waitmask : gp->sigmask;
	return !(mask & bit);
}

static void find_taker(bb_g *gp, void *arg)
{
	struct taker *t = arg;
	if (t->found == NULL && gp != bb_main_g && bb_g_takes(gp, t->bit))
		t->found = gp;
}

/* a G that does not block the signal: the main thread first, as the
 * kernel prefers it */
static bb_g *taker_of(uint64_t bit)
{
	bb_g *mg = bb_main_g;
	if (mg && bb_g_takes(mg, bit))
		return mg;
	struct taker t = {bit, NULL};
	bb_allgs_each(find_taker, &t);
	return t.found;
}

/* signals left to the kernel on the last look: their taker was on an M
 * (running, or in a system call) whose mask lets them in. recheck_soon:
 * one of those takers was running, and may have been parking with the
 * signal blocked (shim/signal.c): look again in 50 µs, not after a nap of
 * up to 10 ms. (One in a system call, a sigwaitinfo, takes it there.) */
static uint64_t deferred;
static bool recheck_soon;
static bool handed; /* route_pending gave a signal to a G since the rate's last look */

/* Give each pending watched signal to a G that takes it, or stop watching
 * it. A taker on an M that lets it in gets it from the kernel: left alone
 * once (it is only pending until that M dequeues it). Otherwise its bit
 * leaves watch first: of a G that unblocks it meanwhile (which then finds
 * it unwatched and adds it back) and our second look at the masks, one
 * sees the other. */
/* A kept signal no G takes now (they all block it since) is the process's
 * pending signal again, as it would be natively; tid > 0: that thread's
 * (its G sleeps in a system call, and preemption by signal is off). The
 * kernel refuses a kill's or its own siginfo codes from any thread but the
 * one they go to: such a signal goes back as sigqueue's (SI_QUEUE, the
 * sender's pid and uid kept). */
static void requeue_stashed(int sig, pid_t tid)
{
	siginfo_t si;
	if (!bb_take_stashed(sig, &si))
		return;
	for (int i = 0; i < 2; i++) {
		long r = tid > 0 ? bb_rawsyscall6(SYS_rt_tgsigqueueinfo, getpid(), tid, sig, (long)&si, 0, 0)
				 : bb_rawsyscall6(SYS_rt_sigqueueinfo, getpid(), sig, (long)&si, 0, 0, 0);
		if (r != -EPERM)
			return;
		si.si_code = SI_QUEUE;
	}
}

/* hand each kept signal to a G that takes it, once (the number read
 * first: one kept again meanwhile is at worst handed twice) */
static void route_stashed(void)
{
	uint64_t st = atomic_load(&stashed);
	while (st) {
		uint64_t bit = st & -st;
		st &= ~bit;
		int sig = __builtin_ctzll(bit) + 1;
		uint32_t seq = atomic_load(&stash_seq[sig]);
		bool again = handed_seq[sig] == seq;
		bb_g *gp = again ? handed_g[sig] : taker_of(bit);
		if (again && (atomic_load(&gp->status) != Gsyscall || !bb_g_takes(gp, bit)))
			continue; /* it takes it at its next call into bobbin */
		if (gp == NULL) {
			requeue_stashed(sig, 0);
			continue;
		}
		bb_m *sm = gp->m;
		if (atomic_load(&gp->status) == Gsyscall && sm && sm->tid > 0) {
			/* asleep in the kernel (main in pause, waiting for its
			 * SIGALRM), perhaps since it was handed the signal
			 * below: the signal must cut that call short, as it
			 * would have had it landed there. Its M's SIGURG handler
			 * runs the handler over the call (bb_resend_hook); not
			 * marked handed: looked at again until taken (the G may
			 * have left the call before the SIGURG came) */
			if (bb_async_preempt) {
				/* one SIGURG until its handler has looked: a
				 * second would cut short the call it restarts */
				if (!(atomic_fetch_or(&sm->resend, bit) & bit))
					bb_urg_send(sm->tid);
			} else {
				requeue_stashed(sig, sm->tid);
			}
			continue;
		}
		if (again)
			continue;
		handed_seq[sig] = seq;
		handed_g[sig] = gp;
		atomic_fetch_or(&gp->procsig, bit);
		handed = true;
		bb_interrupt(gp, BB_WAKE_SIGNAL);
		/* running: the preemption signal makes it take it (preempt.c),
		 * as it does a pthread_kill's */
		bb_m *mp = gp->m;
		if (atomic_load(&gp->status) == Grunning && mp && mp->tid > 0 && bb_async_preempt)
			bb_urg_send(mp->tid);
	}
}

static void route_pending(void)
{
	route_stashed();
	uint64_t pend = 0;
	if (bb_rawsyscall6(SYS_rt_sigpending, (long)&pend, 8, 0, 0, 0, 0) != 0)
		return;
	pend &= atomic_load(&watch);
	deferred &= pend;
	recheck_soon = false;
	while (pend) {
		uint64_t bit = pend & -pend;
		pend &= ~bit;
		bb_g *gp = taker_of(bit);
		if (gp && !(deferred & bit)) {
			uint32_t st = atomic_load(&gp->status);
			if (st == Grunning || st == Gsyscall) {
				deferred |= bit;
				recheck_soon |= st == Grunning;
				continue;
			}
		}
		deferred &= ~bit;
		bb_lock_acquire(&watchlock);
		set_watch(atomic_load(&watch) & ~bit);
		bb_lock_release(&watchlock);
		atomic_thread_fence(memory_order_seq_cst);
		gp = taker_of(bit);
		if (gp == NULL)
			continue; /* pending until someone unblocks it */
		/* a running G takes it at its next call into bobbin (not from
		 * inside a preemption signal's handler: the program's handler
		 * could switch Gs there, on that signal's frame) */
		atomic_fetch_or(&gp->procsig, bit);
		handed = true;
		bb_interrupt(gp, BB_WAKE_SIGNAL);
	}
}

/* A program that takes signals by the hundred thousand a second on
 * running threads (stress-ng --signal, --sigsegv), or reads them from a
 * signalfd of its own (--sigfd), woke sysmon's signalfd poll for every one:
 * the kernel wakes every poller of a process's signalfds at each signal
 * sent, and sysmon's poll went back to sleep in the kernel (the signal was
 * taken by then, or is not one it watches). A context switch per signal:
 * half the program's speed on two CPUs. So while such wake-ups (sysmon's
 * voluntary context switches beyond its polls' returns) or the program's
 * handler runs (mp->sigs_run) come at LAZY_RATE a millisecond or more, and
 * no signal needed handing on, sysmon leaves the signalfd out and looks at
 * the pending signals after naps of at most LAZY_NAP_US instead: handing a
 * signal on to a parked thread may then take up to that. Every LAZY_SPAN
 * without handler runs to go by it polls the signalfd again for a
 * millisecond, to see whether the storm goes on. */
#define LAZY_RATE 5
#define LAZY_NAP_US 1000
#define LAZY_SPAN (16 * 1000 * 1000)
static bool lazy;
static int64_t lazy_until;
static int64_t rate_since; /* counted from then: */
static uint64_t rate_runs, rate_switches, rate_polls;
static uint64_t polls;     /* sysmon's polls that returned */

static uint64_t handler_runs(void)
{
	uint64_t n = 0;
	int32_t k = atomic_load(&bb_nallm);
	for (int32_t i = 0; i < k && i < BB_ALLM_MAX; i++) {
		bb_m *mp = bb_allm[i];
		if (mp)
			n += atomic_load_explicit(&mp->sigs_run, memory_order_relaxed);
	}
	return n;
}

static uint64_t own_switches(void)
{
	struct rusage ru;
	if (bb_rawsyscall6(SYS_getrusage, RUSAGE_THREAD, (long)&ru, 0, 0, 0, 0) != 0)
		return 0;
	return (uint64_t)ru.ru_nvcsw;
}

static void look_at_rate(void)
{
	int64_t now = bb_nanotime();
	int64_t span = now - rate_since;
	if (span < 1000000)
		return;
	uint64_t runs = handler_runs(), sw = own_switches();
	int64_t runs_ms = (int64_t)(runs - rate_runs) * 1000000 / span;
	int64_t extra = (int64_t)(sw - rate_switches) - (int64_t)(polls - rate_polls);
	int64_t wakes_ms = extra > 0 ? extra * 1000000 / span : 0;
	if (handed) {
		lazy = false; /* one needed handing on: watch */
	} else if (runs_ms >= LAZY_RATE) {
		lazy = true; /* handlers in a storm: as long as it lasts */
		lazy_until = now + LAZY_SPAN;
	} else if (!lazy && wakes_ms >= LAZY_RATE) {
		lazy = true; /* empty wake-ups: for a span, then look again */
		lazy_until = now + LAZY_SPAN;
	} else if (lazy && now >= lazy_until) {
		lazy = false;
	}
	handed = false;
	rate_since = now;
	rate_runs = runs;
	rate_switches = sw;
	rate_polls = polls;
}

/* sleep us microseconds, or until a watched signal is pending */
static void usleep_raw(int64_t us)
{
	/* a deferred signal is expected to be taken by its M at once: look
	 * again soon, not after a nap of up to 10 ms, in case it was not (a
	 * sleeper blocks such signals while it parks: shim/signal.c) */
	if (recheck_soon && us > 50)
		us = 50;
	if (lazy && us > LAZY_NAP_US)
		us = LAZY_NAP_US;
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	/* (deferred: the signalfd would report them at once; a negative fd
	 * is left out of the poll) */
	bool was_deferred = deferred != 0;
	struct pollfd pfd[2] = {{bb_sigfd >= 0 && !was_deferred && !lazy ? bb_sigfd : -1, POLLIN, 0},
				{kickfd, POLLIN, 0}};
	long n = bb_rawsyscall6(SYS_ppoll, (long)pfd, 2, (long)&ts, 0, 8, 0);
	polls++;
	if (n > 0 && pfd[1].revents) {
		uint64_t v;
		if (!(pfd[1].revents & POLLIN) ||
		    bb_rawsyscall6(SYS_read, kickfd, (long)&v, sizeof v, 0, 0, 0) != sizeof v)
			atomic_store(&sysmon_live, false); /* not our eventfd: handlers wake directly */
	}
	if (was_deferred) {
		if (n == 0)
			route_pending(); /* after a whole nap: were they taken? */
	} else if (lazy) {
		route_pending();
		if (handed)
			lazy = false; /* one needed handing on: watch again */
	} else if (n > 0 && pfd[0].fd >= 0 && pfd[0].revents) {
		if (pfd[0].revents & POLLIN)
			route_pending();
		else /* not a signalfd any more: no more signal watching */
			bb_sigfd = -1;
	}
	look_at_rate();
	run_deferred();
	if (atomic_load(&stashed))
		route_stashed();
}

/* before sysmon starts: the signalfd, watching all a program can catch */
static void sigwatch_init(void)
{
	if (bb_sigfd >= 0)
		return; /* a fork child: the parent's signalfd reads our own signals */
	uint64_t w = ~NOT_OURS;
	long fd = bb_fd_out_of_way(
		(int)bb_rawsyscall6(SYS_signalfd4, -1, (long)&w, 8, SFD_NONBLOCK | SFD_CLOEXEC, 0, 0));
	if (fd < 0)
		return;
	atomic_store(&watch, w);
	bb_sigfd = (int)fd;
}

static bool repreempt; /* a preemption request is pending: look again in 1 ms */
static bool waiting;   /* every P busy and Gs queued: look again by slice_due */
static int64_t slice_due; /* the earliest end of a slice that Gs wait for */
static bool insyscall;    /* a P was in a system call at the last look */
static int8_t latency_seen; /* latency_waits() of this look: -1 not asked yet */
#define WAITING_LOOK_NS (2000 * 1000) /* and at least this often meanwhile */
static int64_t watch_ns; /* stalled() looks again this soon (INT64_MAX: none) */
/* the earliest time a running G's slice ends for a timer of its P that
 * comes due (slice_for), INT64_MAX: none */
static int64_t timer_slice_due;

#define STALL_NS (50 * 1000)       /* the first window */
#define STALL_MAX_NS WAITING_LOOK_NS /* windows double up to this while it computes */

static void watch_in(int64_t ns)
{
	if (ns < watch_ns)
		watch_ns = ns;
}

/* Whether the G running on pp, with Gs waiting for a P (queued, or due on
 * its timers), may sit in the kernel without bobbin knowing: its OS thread
 * used under an eighth of the CPU time between two looks STALL_NS or more
 * apart. A system call made by the program's own instruction (libgomp
 * waits on futexes so), not through an interposed function, held its P
 * that way until the slice ended. If the thread does sleep in the kernel
 * (not just wait for a CPU), its P is let go as for a system call
 * (bb_check_stuck); the G goes on without one until its next call into
 * bobbin. Once per slice. */
static bool stalled(bb_p *pp, pstate *ps, int64_t now)
{
	if (ps->cpuwhen < 0)
		return false;
	/* waiting for it: Gs in a run queue, or a due timer of its own */
	int64_t t0 = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
	if (bb_runqempty(pp) && atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) == 0 &&
	    (t0 == 0 || t0 > now)) {
		ps->cpuwhen = 0;
		return false;
	}
	bb_m *m = pp->m; /* racy: only its tid is read, and Ms are never freed */
	if (m == NULL || m->tid <= 0)
		return false;
	if (ps->cpuwhen != 0 && now - ps->cpuwhen < ps->window) {
		watch_in(ps->window - (now - ps->cpuwhen));
		return false;
	}
	uint64_t c = bb_thread_cpu_ns(m->tid);
	if (ps->cpuwhen != 0 && c != 0 && c - ps->cpu < (uint64_t)(now - ps->cpuwhen) / 8) {
		ps->cpuwhen = -1;
		return true;
	}
	/* a first look, or it computes: look again after a window twice as
	 * long (a G that computes for its whole slice costs a few looks) */
	ps->window = ps->cpuwhen == 0 ? STALL_NS
				      : (ps->window * 2 < STALL_MAX_NS ? ps->window * 2 : STALL_MAX_NS);
	ps->cpuwhen = now;
	ps->cpu = c;
	watch_in(ps->window);
	return false;
}

/* Whether a G that waits for a P was readied, created or is back from a
 * system call, rather than preempted or yielding: the first few of each
 * P's queue and of the global queue are looked at (racily: Gs are never
 * freed; a hint), once per look of sysmon's whatever the number of Ps. */
static bool look_for_latency(void);

static bool latency_waits(void)
{
	if (latency_seen < 0)
		latency_seen = look_for_latency();
	return latency_seen;
}

static bool look_for_latency(void)
{
	enum { LOOK = 8 };
	for (int32_t i = 0; i < bb_gomaxprocs; i++) {
		bb_p *pp = bb_allp[i];
		bb_g *gp = atomic_load_explicit(&pp->runnext, memory_order_relaxed);
		if (gp && !atomic_load_explicit(&gp->hog, memory_order_relaxed))
			return true;
		uint32_t h = atomic_load_explicit(&pp->runqhead, memory_order_relaxed);
		uint32_t t = atomic_load_explicit(&pp->runqtail, memory_order_relaxed);
		for (uint32_t k = 0; k < LOOK && h + k != t && t - h <= BB_RUNQ_LEN; k++) {
			gp = atomic_load_explicit(&pp->runq[(h + k) % BB_RUNQ_LEN], memory_order_relaxed);
			if (gp && !atomic_load_explicit(&gp->hog, memory_order_relaxed))
				return true;
		}
	}
	if (atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) == 0)
		return false;
	bool found = false;
	bb_lock_acquire(&bb_sched_.lock);
	bb_g *gp = bb_sched_.runqhead;
	for (int k = 0; k < LOOK && gp && !found; k++, gp = gp->schedlink)
		found = !atomic_load_explicit(&gp->hog, memory_order_relaxed);
	bb_lock_release(&bb_sched_.lock);
	return found;
}

/* the shortest slice slice_for gives: a tenth of BOBBIN_TIMESLICE, at
 * least 1 ms (or the whole slice if that is shorter) */
static int64_t slice_min(void)
{
	int64_t s = bb_timeslice_ns / 10;
	return s < 1000000 ? (bb_timeslice_ns < 1000000 ? bb_timeslice_ns : 1000000) : s;
}

/* The time slice of the G running on pp: BOBBIN_TIMESLICE (10 ms, as Go)
 * while nobody waits for its P. While every P is busy and Gs wait in a run
 * queue, shorter, as the kernel's scheduler slices finer with more
 * runnable threads and lets a woken thread in soon:
 * - a tenth of it (at least 1 ms) if the G spins (preempt.c, note_spin):
 *   threads that spin waiting for one another (redis's I/O threads and
 *   main thread) otherwise hold both Ps for whole slices while the one they
 *   wait for is queued;
 * - a third of it if a G readied (woken, new, back from the kernel) waits;
 * - the whole slice if only preempted or yielding Gs wait: a computing
 *   thread keeps its caches warm (pbzip2 -p8 on 2 Ps: 12% slower than
 *   natively with 1 ms slices, 4% with 10 ms). */
/* the slice of a G while a woken one waits for its P */
static int64_t slice_woken(void)
{
	return bb_timeslice_ns / 3 > slice_min() ? bb_timeslice_ns / 3 : slice_min();
}

static int64_t slice_for(bb_p *pp, int64_t ran, int64_t now)
{
	/* a due timer of its own is a thread woken (a timed wait or sleep
	 * that ends) that only this P's next schedule() can run */
	int64_t t0 = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
	bool timer_due = t0 != 0 && t0 <= now;
	if (atomic_load_explicit(&bb_sched_.npidle, memory_order_relaxed) > 0 ||
	    (bb_runqempty(pp) && atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) == 0 &&
	     !timer_due))
		return bb_timeslice_ns;
	waiting = true;
	if (ran < slice_min())
		return slice_min(); /* too soon to tell (and to look) */
	bb_m *m = pp->m; /* racy: Ms and Gs are never freed; a hint */
	bb_g *gp = m ? m->curg : NULL;
	if (gp && atomic_load_explicit(&gp->spinning, memory_order_relaxed) > 0)
		return slice_min();
	if (timer_due)
		return slice_min();
	if (latency_waits())
		return slice_woken();
	return bb_timeslice_ns;
}

static int retake(int64_t now)
{
	int n = 0;
	repreempt = waiting = false;
	watch_ns = INT64_MAX;
	slice_due = INT64_MAX;
	timer_slice_due = INT64_MAX;
	insyscall = false;
	latency_seen = -1;
	/* the process's only thread is never preempted: no other thread
	 * waits for its P (timers, the poller and signals all belong to it),
	 * and the signal would only interrupt its system calls that are
	 * never restarted (epoll_wait, poll) with EINTR */
	bool alone = bb_alone();
	for (int32_t i = 0; i < bb_gomaxprocs; i++) {
		bb_p *pp = bb_allp[i];
		uint32_t status = atomic_load_explicit(&pp->status, memory_order_acquire);
		if (status != Prunning && status != Psyscall)
			continue;
		/* the same G for a whole time slice, running or in and out of
		 * short system calls (pread in a loop): ask it to yield */
		int64_t due;
		uint32_t t = atomic_load_explicit(&pp->switchtick, memory_order_relaxed);
		if (alone) {
			pd[i].switchwhen = 0; /* looked at afresh once another G exists */
		} else if (pd[i].switchtick != t || pd[i].switchwhen == 0) { /* or first sight */
			pd[i].switchtick = t;
			pd[i].switchwhen = now;
			pd[i].firstask = 0;
			pd[i].cpuwhen = 0;
		} else if (status == Psyscall) {
			/* the flag only (bb_preemptone), met when it comes back */
			if (pd[i].switchwhen + slice_for(pp, now - pd[i].switchwhen, now) <= now)
				bb_preemptone(pp);
		} else if (stalled(pp, &pd[i], now)) {
			atomic_fetch_add_explicit(&bb_stats_.preempt_stalled, 1, memory_order_relaxed);
			bb_check_stuck(pp); /* if it sleeps there ('S', 'D') */
		} else if ((due = pd[i].switchwhen + slice_for(pp, now - pd[i].switchwhen, now)) <= now) {
			if (pd[i].firstask == 0)
				pd[i].firstask = now;
			else if (pd[i].firstask + bb_timeslice_ns <= now)
				bb_check_stuck(pp); /* asked for a slice in vain */
			bb_preemptone(pp);
			/* not yet switched (an unsafe point)? ask again in 1 ms;
			 * that caps sysmon's sleep at 1 ms but is not activity,
			 * so it does not drop back to 20 µs polling (Go counts
			 * only retaken Ps) */
			pd[i].switchwhen = now - bb_timeslice_ns + 1000000;
			repreempt = true;
		} else if (waiting && due < slice_due) {
			slice_due = due;
		}
		if (status == Prunning && !alone) {
			/* a timer of its P that comes due while its G computes
			 * (CPython's GIL waiters time out every 5 ms so): look
			 * then, as the kernel lets a woken thread in */
			int64_t t0 = atomic_load_explicit(&pp->timer0when, memory_order_relaxed);
			int64_t at = pd[i].switchwhen + slice_min();
			if (t0 > now && pd[i].switchwhen != 0) {
				if (at < t0)
					at = t0;
				if (at < timer_slice_due)
					timer_slice_due = at;
			}
		}
		if (status == Prunning)
			continue;
		/* nobody else needs the P of the only thread in a system call
		 * (a PostgreSQL backend asleep on its semaphore, at each lock
		 * wait): taking it back and the thread's slower return to it
		 * cost more than the call, and each kept sysmon at its 20 µs
		 * naps (a retake is activity) */
		if (alone)
			continue;
		insyscall = true;
		t = pp->syscalltick; /* racy read: only compared for change */
		if (pd[i].syscalltick != t) {
			pd[i].syscalltick = t;
			pd[i].syscallwhen = now;
			continue;
		}
		/* in the same syscall for at least one sysmon tick: retake if
		 * there is work for the P, or if it has been 10 ms */
		if (bb_runqempty(pp) &&
		    atomic_load_explicit(&bb_sched_.nmspinning, memory_order_relaxed) +
				    atomic_load_explicit(&bb_sched_.npidle, memory_order_relaxed) > 0 &&
		    atomic_load_explicit(&bb_sched_.runqsize, memory_order_relaxed) == 0 &&
		    pd[i].syscallwhen + SYSCALL_RETAKE_NS > now)
			continue;
		/* an M that is not asleep in the kernel (R: running, or waiting
		 * for a CPU on a loaded machine) is about to come back: a new OS
		 * thread would not help it; wait for it up to 10 ms */
		bb_m *sm = atomic_load_explicit(&pp->syscallm, memory_order_acquire);
		if (pd[i].syscallwhen + SYSCALL_RETAKE_NS > now && sm && sm->tid > 0 &&
		    bb_thread_state(sm->tid) == 'R')
			continue;
		uint32_t s = Psyscall;
		if (atomic_compare_exchange_strong_explicit(&pp->status, &s, Pidle,
							    memory_order_acq_rel,
							    memory_order_relaxed)) {
			n++;
			atomic_fetch_add_explicit(&bb_stats_.handoffs, 1, memory_order_relaxed);
			bb_handoffp(pp);
		}
	}
	return n;
}

/* sysmon's next nap (µs) no longer than ns, and at least its 20 µs */
static void nap_at_most(int64_t *delay, int64_t ns)
{
	if (*delay > ns / 1000)
		*delay = ns / 1000 > 20 ? ns / 1000 : 20;
}

static void *sysmon(void *arg)
{
	bb_m *mp = arg;
	if (__builtin_setjmp(mp->exitjb))
		return NULL; /* bb_sysmon_stop, through bb_m_end */
	mp->tcb = (void *)bb_getfsbase();
	bb_m_on_thread_start(mp);
	/* its 20 µs naps must be that, not 20 µs plus the 50 µs of default
	 * timer slack; sysmon runs none of the program's code */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	atomic_store(&sysmon_live, kickfd >= 0);
	int64_t delay = 20;
	int idle = 0;
	int64_t start = bb_nanotime(), lasttrace = start, suspect = 0;
	uint64_t suspect_ticks = 0;
	for (;;) {
		if (idle == 0)
			delay = 20;
		else if (idle > 50)
			delay *= 2;
		if (delay > 10000)
			delay = 10000;
		if (repreempt && delay > 1000)
			delay = 1000;
		if (waiting) {
			/* until the first slice that Gs wait for may end, and
			 * no longer than WAITING_LOOK_NS (a thread woken
			 * meanwhile shortens the slice: slice_for) */
			int64_t left = slice_due - bb_nanotime();
			if (left > WAITING_LOOK_NS)
				left = WAITING_LOOK_NS;
			/* a P in a system call is retaken within 500 µs */
			if (insyscall && left > 500 * 1000)
				left = 500 * 1000;
			nap_at_most(&delay, left);
		}
		if (timer_slice_due != INT64_MAX)
			nap_at_most(&delay, timer_slice_due - bb_nanotime());
		if (watch_ns != INT64_MAX)
			nap_at_most(&delay, watch_ns);
		if (bb_debug.schedtrace_ms && delay > bb_debug.schedtrace_ms * 1000L)
			delay = bb_debug.schedtrace_ms * 1000L;
		usleep_raw(delay);
		if (atomic_load(&sysmon_quit)) {
			sysmon_mp = NULL; /* (its record may become another M's) */
			atomic_store(&sysmon_live, false);
			atomic_store(&sysmon_runs, false);
			atomic_store(&sysmon_quit, false);
			bb_sysmon_mark_stopped();
			bb_m_end(mp);
		}
		bb_start_queued_ms();
		int64_t now = bb_nanotime();
		int n = retake(now);
		bb_stack_trim(now); /* stacks unused for a second or two: unmapped */
		/* a timer 2 ms overdue while no M sleeps until it and a P is
		 * idle: whoever should have slept until it went elsewhere (as
		 * Go's sysmon, start an M for it) */
		int64_t next = bb_nexttimer();
		if (next != 0 && next + 2 * 1000 * 1000 < now &&
		    atomic_load(&bb_sched_.timersleeper) == NULL &&
		    atomic_load_explicit(&bb_sched_.npidle, memory_order_relaxed) > 0) {
			atomic_fetch_add_explicit(&bb_stats_.timer_rescues, 1, memory_order_relaxed);
			bb_wakep();
		} else if (next != 0 && next + 2 * 1000 * 1000 < now) {
			/* an M sleeps until a later time than a timer 2 ms
			 * overdue: the kick that should have woken it was lost
			 * (process_signals at P=2 left main parked in a 2 ms
			 * sleep while the sleeper waited for a timer a minute
			 * away); wake it, also out of its epoll wait */
			bb_m *sl = atomic_load(&bb_sched_.timersleeper);
			if (sl != NULL && atomic_load(&bb_sched_.sleepuntil) > next + 2 * 1000 * 1000) {
				atomic_fetch_add_explicit(&bb_stats_.timer_rescues, 1,
							  memory_order_relaxed);
				bb_timer_kick();
				if (sl->tid > 0)
					bb_urg_send(sl->tid);
			}
		}
		/* nobody has polled the network for 10 ms: do it, so I/O is not
		 * starved by Ps that are never idle */
		int64_t last = atomic_load(&bb_lastpoll);
		if (last != 0 && last + 10 * 1000 * 1000 < now &&
		    atomic_load(&bb_netpoll_waiters) > 0) {
			int k;
			bb_g *list = bb_netpoll(0, &k);
			if (list) {
				bb_injectglist(list);
				n += k;
			}
		}
		if (n > 0)
			idle = 0;
		else
			idle++;
		if (bb_debug.schedtrace_ms &&
		    now - lasttrace >= (int64_t)bb_debug.schedtrace_ms * 1000000) {
			lasttrace = now;
			bb_schedtrace((now - start) / 1000000);
		}
		/* all asleep, twice 100 ms apart with no switch between: deadlock */
		if (idle > 50 && bb_deadlock_suspect()) {
			uint64_t ticks = 0;
			for (int32_t i = 0; i < bb_gomaxprocs; i++)
				ticks += atomic_load(&bb_allp[i]->switchtick);
			if (suspect == 0 || ticks != suspect_ticks) {
				suspect = now;
				suspect_ticks = ticks;
			} else if (now - suspect >= 100 * 1000 * 1000) {
				bb_deadlock_report();
			}
		} else {
			suspect = 0;
		}
	}
	return NULL;
}

bb_m *bb_sysmon_m(void)
{
	return sysmon_mp;
}

void bb_sysmon_start(void)
{
	/* a fork child's own (the parent's is shared with it) */
	if (kickfd >= 0)
		bb_rawsyscall6(SYS_close, kickfd, 0, 0, 0, 0, 0);
	kickfd = bb_fd_out_of_way(
		(int)bb_rawsyscall6(SYS_eventfd2, 0, EFD_NONBLOCK | EFD_CLOEXEC, 0, 0, 0, 0));
	if (pd == NULL) /* (again after bb_sysmon_stop: the same) */
		pd = bb_alloc((size_t)bb_gomaxprocs * sizeof *pd);
	else
		memset(pd, 0, (size_t)bb_gomaxprocs * sizeof *pd);
	bb_m *mp = bb_allocm();
	if (mp)
		mp->presig_state = 2; /* blocks every signal */
	sysmon_mp = mp;
	sigwatch_init();
	if (pd == NULL || mp == NULL) {
		bb_printf("bobbin: no memory for sysmon; blocked system calls keep their P\n");
		return;
	}
	int err = bb_start_os_thread(sysmon, mp, 128 * 1024); /* takes no signals */
	if (err) {
		bb_printf("bobbin: cannot start sysmon (%d); blocked system calls keep their P\n", err);
		return;
	}
	/* handlers may leave their wake-ups from now on, not only once the
	 * new thread runs: its first poll finds the kick. On a loaded machine
	 * it started milliseconds later, and a handler that ran over bobbin's
	 * code meanwhile woke directly and spun for ever on the wait-queue
	 * lock that code held on the same thread (handler_sem_post at P=1) */
	atomic_store(&sysmon_live, kickfd >= 0);
	atomic_store(&sysmon_runs, true);
}
