/*
 * time.c — nanosleep, clock_nanosleep, usleep, sleep: park the G on a timer
 * of its P instead of putting the OS thread to sleep.
 *
 * Arguments are checked as the kernel checks them (EINVAL for a negative
 * time or tv_nsec outside [0, 1e9)). Absolute sleeps on CLOCK_REALTIME are
 * converted to the monotonic clock when they start: a wall-clock jump during
 * the sleep is not followed (README, known limits). A sleep on a CPU-time
 * clock (the process's, another process's, another thread's, a green
 * thread's included) parks too, in rounds: each sleeps as long as the
 * clock needs at the least to get there (the time left, divided by the CPUs
 * for a process clock) and reads the clock again. Other clocks go to the
 * kernel inside entersyscall.
 */
#include "shim.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static bool ts_valid(const struct timespec *ts)
{
	return ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000 && ts->tv_sec >= 0;
}

/* a cancellable sleep: a pthread_cancel that interrupts it acts at once.
 * Returns the time left (ns) if a signal handler cut it short, else 0:
 * sleeps are never restarted after a handler, whatever SA_RESTART says. */
static int64_t sleep_until(int64_t deadline)
{
	bb_g *gp = bb_getg();
	if (bb_alone()) {
		/* the process's only thread sleeps in the kernel, as natively:
		 * nobody else needs its P, and a process signal then reaches it
		 * directly (its handler runs at once, the sleep fails with
		 * EINTR) instead of through sysmon's hand-over */
		struct timespec ts = {deadline / 1000000000, deadline % 1000000000};
		long r = BB_IN_SYSCALL(long, bb_rawsyscall6(SYS_clock_nanosleep, CLOCK_MONOTONIC,
							    TIMER_ABSTIME, (long)&ts, 0, 0, 0),
				       true);
		if (r != -EINTR)
			return 0;
		int64_t left = deadline - bb_nanotime();
		return left > 0 ? left : 1;
	}
	bb_testcancel(); /* also when a handler ends the sleep before it starts */
	gp->sig_ran = false;
	/* signal.c: a handler must end the sleep, even one already due */
	bool ran = bb_block_handled_for_wait();
	for (; !ran;) { /* each round tests for a cancel after its sleep */
		gp->sig_ignored = false;
		bb_sleep_until(deadline);
		bb_testcancel();
		bb_take_eintr();
		gp = bb_getg();
		if (gp->sig_ran || !gp->sig_ignored || bb_nanotime() >= deadline)
			break;
		/* woken by a pthread_kill of an ignored signal only: the
		 * kernel would sleep on, and so do we */
	}
	bb_unblock_after_wait();
	if (!gp->sig_ran)
		return 0;
	gp->sig_ran = false;
	gp->sig_eintr = false;
	int64_t left = deadline - bb_nanotime();
	return left > 0 ? left : 1;
}

/* a deadline on the runtime's monotonic clock, saturating far in the future */
static int64_t deadline_after(int64_t ns)
{
	int64_t now = bb_nanotime();
	return ns > INT64_MAX - now ? INT64_MAX : now + ns;
}

BB_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
	if (!bb_on_g())
		return REAL(nanosleep)(req, rem);
	if (!ts_valid(req)) {
		errno = EINVAL;
		return -1;
	}
	int64_t left = sleep_until(deadline_after(ts_ns(req)));
	if (left) {
		if (rem) {
			rem->tv_sec = left / 1000000000;
			rem->tv_nsec = left % 1000000000;
		}
		errno = EINTR;
		return -1;
	}
	return 0;
}

/* clock_nanosleep on a CPU-time clock. The kernel's call would sleep in
 * the kernel, holding the P, and a preemption signal to its OS thread cut
 * it short with EINTR; a green thread's clock it does not know at all. */
static int cpu_sleep(clockid_t clock, int flags, const struct timespec *req,
		     struct timespec *rem)
{
	bool per_thread = clock == CLOCK_THREAD_CPUTIME_ID || (clock < 0 && (clock & 4));
	clockid_t own;
	/* the caller's own thread clock: the kernel's EINVAL */
	if (per_thread && (clock == CLOCK_THREAD_CPUTIME_ID || (~(clock >> 3)) == 0 ||
			   (pthread_getcpuclockid(pthread_self(), &own) == 0 && own == clock)))
		return EINVAL;
	if (!ts_valid(req))
		return EINVAL;
	struct timespec now;
	if (clock_gettime(clock, &now) != 0)
		return EINVAL;
	int64_t target = ts_ns(req);
	if (!(flags & TIMER_ABSTIME))
		target = target > INT64_MAX - ts_ns(&now) ? INT64_MAX : target + ts_ns(&now);
	long cpus = per_thread ? 1 : sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 1)
		cpus = 1;
	for (;;) {
		if (clock_gettime(clock, &now) != 0)
			return EINVAL; /* its thread or process is gone */
		int64_t left = target - ts_ns(&now);
		if (left <= 0) {
			bb_testcancel();
			return 0;
		}
		int64_t wall = left / cpus;
		if (sleep_until(deadline_after(wall < 20000 ? 20000 : wall))) {
			if (rem && !(flags & TIMER_ABSTIME)) {
				clock_gettime(clock, &now);
				left = target - ts_ns(&now);
				if (left < 0)
					left = 0;
				rem->tv_sec = left / 1000000000;
				rem->tv_nsec = left % 1000000000;
			}
			return EINTR;
		}
	}
}

BB_EXPORT int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
			      struct timespec *rem)
{
	if (!bb_on_g())
		return REAL(clock_nanosleep)(clock, flags, req, rem);
	switch (clock) {
	case CLOCK_REALTIME:
	case CLOCK_MONOTONIC:
	case CLOCK_BOOTTIME:
	case CLOCK_TAI:
		break;
	case CLOCK_THREAD_CPUTIME_ID:
		return EINVAL; /* as the kernel answers */
	case CLOCK_PROCESS_CPUTIME_ID:
		return cpu_sleep(clock, flags, req, rem);
	default:
		if (clock < 0) /* another process's or thread's CPU clock */
			return cpu_sleep(clock, flags, req, rem);
		return BB_IN_SYSCALL(int, REAL(clock_nanosleep)(clock, flags, req, rem), true);
	}
	if (!ts_valid(req)) /* negative seconds too, absolute or not: the kernel's */
		return EINVAL;
	int64_t ns = ts_ns(req);
	if (flags & TIMER_ABSTIME) {
		struct timespec now;
		clock_gettime(clock, &now);
		ns -= ts_ns(&now);
	}
	if (ns <= 0) {
		bb_testcancel(); /* a cancellation point even with no wait, as natively */
		bb_gosched();
		return 0;
	}
	int64_t left = sleep_until(deadline_after(ns));
	if (left) {
		if (rem && !(flags & TIMER_ABSTIME)) {
			rem->tv_sec = left / 1000000000;
			rem->tv_nsec = left % 1000000000;
		}
		return EINTR;
	}
	return 0;
}

BB_EXPORT int usleep(useconds_t us)
{
	if (!bb_on_g())
		return REAL(usleep)(us);
	if (sleep_until(deadline_after((int64_t)us * 1000))) {
		errno = EINTR;
		return -1;
	}
	return 0;
}

BB_EXPORT unsigned int sleep(unsigned int s)
{
	if (!bb_on_g())
		return REAL(sleep)(s);
	int64_t left = sleep_until(deadline_after((int64_t)s * 1000000000));
	return (unsigned)((left + 999999999) / 1000000000); /* seconds not slept */
}

/* ---- per-thread CPU clocks (runtime/cpuclock.c keeps the accounts) ---- */

/* The green thread a per-thread CPU clock names: its own for
 * CLOCK_THREAD_CPUTIME_ID, the one a clock from pthread_getcpuclockid
 * belongs to, or main for the clock of the initial thread's id. *gone:
 * the clock is a green thread's that has ended (the kernel's EINVAL).
 * NULL otherwise: a clock for the kernel. */
static bb_g *clock_thread(clockid_t clk, bool *gone)
{
	*gone = false;
	if (!bb_active)
		return NULL;
	if (clk == CLOCK_THREAD_CPUTIME_ID)
		return bb_on_g() ? bb_getm()->curg : NULL;
	bb_g *gp = bb_cpuclock_g(clk, gone);
	if (gp || *gone)
		return gp;
	/* glibc's per-thread clocks of a kernel tid: (~tid << 3) | 4..6 */
	if (clk >= 0 || (clk & 4) == 0 || (clk & 3) == 3)
		return NULL;
	pid_t tid = (pid_t)~(clk >> 3);
	bb_g *main_g = bb_main_g; /* main keeps the initial thread's id */
	if (main_g && tid > 0 && atomic_load(&main_g->status) != Gdead && bb_g_tid(main_g) == tid)
		return main_g;
	return NULL;
}

BB_EXPORT int clock_gettime(clockid_t clk, struct timespec *ts)
{
	/* the common clocks first, at the cost of one compare */
	if (__builtin_expect((unsigned)clk < CLOCK_THREAD_CPUTIME_ID, 1))
		return REAL(clock_gettime)(clk, ts);
	bool gone;
	bb_g *gp = clock_thread(clk, &gone);
	if (gp == NULL) {
		if (!gone)
			return REAL(clock_gettime)(clk, ts);
		errno = EINVAL;
		return -1;
	}
	if (!bb_cpuclock_enable()) /* BOBBIN_CPUCLOCK=0 */
		return REAL(clock_gettime)(clk, ts);
	uint64_t ns = bb_cpuclock_read(gp);
	ts->tv_sec = (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
	return 0;
}

BB_EXPORT int clock_getres(clockid_t clk, struct timespec *res)
{
	bool gone;
	bb_g *gp = (unsigned)clk < CLOCK_THREAD_CPUTIME_ID ? NULL : clock_thread(clk, &gone);
	if (gp == NULL) {
		if (clk < 0 && gone) {
			errno = EINVAL;
			return -1;
		}
		return REAL(clock_getres)(clk, res);
	}
	if (res) { /* the kernel's for CPU clocks */
		res->tv_sec = 0;
		res->tv_nsec = 1;
	}
	return 0;
}

/* glibc's makes the clock from the thread's kernel id, which a green
 * thread does not have (main keeps the initial thread's): a green thread
 * gets bb_cpuclock_id's, which clock_gettime above understands. From the
 * first call on, each G's CPU time is counted. */
BB_EXPORT int pthread_getcpuclockid(pthread_t th, clockid_t *clk)
{
	bb_g *gp = bb_active ? bb_g_of(th) : NULL;
	pthread_t tcb = th; /* glibc's takes the TCB (a G's own while it runs) */
	int err;
	if (gp) {
		/* under the G's lock: an ending G gives its TCB to the stack
		 * cache there, which may unmap it */
		bb_lock_acquire(&gp->lock);
		tcb = (pthread_t)bb_g_tcb(gp);
		if (tcb == 0 || atomic_load(&gp->status) == Gdead)
			err = ESRCH; /* as NPTL's, for a thread that has ended */
		else
			err = REAL(pthread_getcpuclockid)(tcb, clk);
		bb_lock_release(&gp->lock);
	} else {
		err = REAL(pthread_getcpuclockid)(tcb, clk);
	}
	if (err != 0 || !bb_on_g())
		return err;
	if (bb_cpuclock_enable() && gp && !gp->is_main)
		*clk = bb_cpuclock_id(gp);
	return 0;
}

/* RUSAGE_THREAD of a green thread: its CPU time, split between user and
 * system time as its OS thread's is split (the kernel counts the OS
 * thread), and its own faults, blocks and context switches
 * (bb_rusage_fill); ru_maxrss stays the process's, as the kernel gives it */
BB_EXPORT int getrusage(int who, struct rusage *ru)
{
	long r = bb_sys(SYS_getrusage, who, ru, 0);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	if (who != RUSAGE_THREAD || !bb_on_g() || !bb_cpuclock_enable())
		return 0;
	uint64_t g = bb_cpuclock_read(bb_getm()->curg) / 1000; /* µs */
	uint64_t ut = (uint64_t)ru->ru_utime.tv_sec * 1000000u + (uint64_t)ru->ru_utime.tv_usec;
	uint64_t st = (uint64_t)ru->ru_stime.tv_sec * 1000000u + (uint64_t)ru->ru_stime.tv_usec;
	uint64_t gu = ut + st ? (uint64_t)((unsigned __int128)g * ut / (ut + st)) : g;
	uint64_t gs = g - gu;
	ru->ru_utime.tv_sec = (time_t)(gu / 1000000u);
	ru->ru_utime.tv_usec = (suseconds_t)(gu % 1000000u);
	ru->ru_stime.tv_sec = (time_t)(gs / 1000000u);
	ru->ru_stime.tv_usec = (suseconds_t)(gs % 1000000u);
	bb_rusage_fill(ru);
	return 0;
}
