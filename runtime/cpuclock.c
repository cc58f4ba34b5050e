/*
 * cpuclock.c — per-thread CPU clocks for green threads.
 *
 * The kernel keeps CPU time per OS thread, and an M runs many Gs. So that
 * CLOCK_THREAD_CPUTIME_ID and the clocks of pthread_getcpuclockid count a
 * green thread's own CPU time, each M charges the G it runs: at every
 * switch it reads its own thread CPU clock once, adds the time since the
 * last switch to the G that ran, and marks the G that starts. Time the M
 * spends on g0 (scheduling, spinning, sleeping) goes to no G.
 *
 * That read is a system call (the vDSO has no thread CPU clock; about
 * 0.5 µs here, against a 50 ns switch), so the accounting starts only
 * when the program first asks for a per-thread CPU clock (or at start-up
 * with BOBBIN_CPUCLOCK=1; never with BOBBIN_CPUCLOCK=0, and then such a
 * clock counts the OS thread). A G that existed before
 * has no account of its earlier CPU time: the main thread starts from its
 * OS thread's CPU time (exact while it was the only thread), any other
 * from 0.
 *
 * Readers on any thread: cpu_ns + (cpu_m's CPU clock now - cpu_mark),
 * consistent through cpu_seq (odd while the charging M updates the G).
 */
#include "runtime.h"

#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

_Atomic bool bb_cpuclock_on;

/* The other counts of getrusage(RUSAGE_THREAD) are the OS thread's too,
 * and a program that takes their difference across a stretch of work (fio
 * prints each job's page faults and context switches so) got the faults of
 * every green thread its OS threads ran meanwhile, or a negative number
 * after a move to another OS thread. So once a program reads them, each M
 * charges them like the CPU time: at every switch it reads its own counts
 * (a second system call) and adds what grew to the G that ran. A G's
 * context switches also count the ones bobbin made it take (g->sw_vol,
 * g->sw_invol: its parks, and the preemptions and yields that let another
 * thread run), which its OS thread never saw. */
static _Atomic bool rusage_on;

static void ru_now(bb_rucount *c)
{
	struct rusage r;
	if (bb_sys(SYS_getrusage, RUSAGE_THREAD, &r, 0) != 0)
		memset(&r, 0, sizeof r);
	*c = (bb_rucount){ r.ru_minflt, r.ru_majflt, r.ru_inblock, r.ru_oublock, r.ru_nvcsw, r.ru_nivcsw };
}

/* mp's counts since mark go to its ru_g; next's stint starts */
static void ru_edge(bb_m *mp, bb_g *next)
{
	bb_rucount now;
	ru_now(&now);
	bb_g *prev = mp->ru_g;
	if (prev) {
		prev->ru.minflt += now.minflt - mp->ru_mark.minflt;
		prev->ru.majflt += now.majflt - mp->ru_mark.majflt;
		prev->ru.inblock += now.inblock - mp->ru_mark.inblock;
		prev->ru.oublock += now.oublock - mp->ru_mark.oublock;
		prev->ru.nvcsw += now.nvcsw - mp->ru_mark.nvcsw;
		prev->ru.nivcsw += now.nivcsw - mp->ru_mark.nivcsw;
	}
	mp->ru_mark = now;
	mp->ru_g = next;
}

/* the kernel's clock id of one OS thread's CPU time (CPUCLOCK_SCHED,
 * per thread), as glibc's pthread_getcpuclockid makes it */
static clockid_t os_thread_clock(pid_t tid)
{
	return (clockid_t)(((unsigned int)~tid << 3) | 6);
}

static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;
	if (bb_sys(SYS_clock_gettime, clk, (long)&ts, 0) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* the CPU time an OS thread of the process has used (0 if it cannot be
 * read), for sysmon */
uint64_t bb_thread_cpu_ns(pid_t tid)
{
	return clock_ns(os_thread_clock(tid));
}

static inline void seq_enter(bb_g *gp)
{
	atomic_fetch_add_explicit(&gp->cpu_seq, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static inline void seq_leave(bb_g *gp)
{
	atomic_fetch_add_explicit(&gp->cpu_seq, 1, memory_order_release);
}

static void start_stint(bb_m *mp, bb_g *gp, uint64_t now)
{
	seq_enter(gp);
	atomic_store_explicit(&gp->cpu_mark, now, memory_order_relaxed);
	atomic_store_explicit(&gp->cpu_m, mp, memory_order_relaxed);
	seq_leave(gp);
	mp->cpu_g = gp;
}

/* On mp, which is leaving the G it charges (if any) for next (NULL: for
 * g0). */
void bb_cpuclock_edge(bb_m *mp, bb_g *next)
{
	uint64_t now = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	bb_g *prev = mp->cpu_g;
	mp->cpu_writing = true;
	atomic_signal_fence(memory_order_seq_cst);
	if (prev) {
		seq_enter(prev);
		uint64_t mark = atomic_load_explicit(&prev->cpu_mark, memory_order_relaxed);
		if (now > mark)
			atomic_store_explicit(&prev->cpu_ns,
					      atomic_load_explicit(&prev->cpu_ns, memory_order_relaxed) +
						      (now - mark),
					      memory_order_relaxed);
		atomic_store_explicit(&prev->cpu_m, NULL, memory_order_relaxed);
		seq_leave(prev);
		mp->cpu_g = NULL;
	}
	if (next)
		start_stint(mp, next, now);
	atomic_signal_fence(memory_order_seq_cst);
	mp->cpu_writing = false;
	if (atomic_load_explicit(&rusage_on, memory_order_relaxed))
		ru_edge(mp, next);
}

/* ru holds the kernel's RUSAGE_THREAD of the calling G's OS thread, whose
 * CPU time getrusage has already made the G's own: its other counts become
 * the G's too. The first call turns the charging on: the caller counts
 * from here (main from its OS thread's counts, exact while it was the
 * only thread), the Gs on other Ms from their next switch. */
void bb_rusage_fill(struct rusage *ru)
{
	bb_m *mp = bb_getm();
	bb_g *gp = mp->curg;
	bb_rucount k = { ru->ru_minflt, ru->ru_majflt, ru->ru_inblock, ru->ru_oublock, ru->ru_nvcsw, ru->ru_nivcsw };
	if (mp->ru_g != gp) { /* the first call on this M since the charging began (or ever) */
		if (!atomic_load_explicit(&rusage_on, memory_order_relaxed) && gp->is_main)
			gp->ru = k;
		mp->ru_g = gp;
		mp->ru_mark = k;
		atomic_store(&rusage_on, true);
	}
	ru->ru_minflt = gp->ru.minflt + (k.minflt - mp->ru_mark.minflt);
	ru->ru_majflt = gp->ru.majflt + (k.majflt - mp->ru_mark.majflt);
	ru->ru_inblock = gp->ru.inblock + (k.inblock - mp->ru_mark.inblock);
	ru->ru_oublock = gp->ru.oublock + (k.oublock - mp->ru_mark.oublock);
	ru->ru_nvcsw = gp->ru.nvcsw + (k.nvcsw - mp->ru_mark.nvcsw) + gp->sw_vol;
	ru->ru_nivcsw = gp->ru.nivcsw + (k.nivcsw - mp->ru_mark.nivcsw) + gp->sw_invol;
}

/* Turn the accounting on, from a G (or at start-up, on the main G before
 * any other exists); false when BOBBIN_CPUCLOCK=0 keeps it off. Only the
 * caller's own G gets a starting point; the Gs running on other Ms start
 * at their next switch. */
bool bb_cpuclock_enable(void)
{
	if (atomic_load_explicit(&bb_cpuclock_on, memory_order_relaxed))
		return true;
	if (bb_cfg.cpuclock == 0)
		return false;
	bb_m *mp = bb_self_m();
	bb_g *gp = mp ? mp->curg : NULL;
	if (gp && mp->cpu_g == NULL) {
		uint64_t now = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		if (gp->is_main)
			atomic_store_explicit(&gp->cpu_ns, now, memory_order_relaxed);
		start_stint(mp, gp, now);
	}
	atomic_store(&bb_cpuclock_on, true);
	return true;
}

/* gp's CPU time so far, in ns, from any thread */
uint64_t bb_cpuclock_read(bb_g *gp)
{
	for (;;) {
		uint32_t s = atomic_load_explicit(&gp->cpu_seq, memory_order_acquire);
		if (s & 1) {
			/* a handler that interrupted its own M's update would
			 * wait for ever: it takes the time before that stint */
			if (bb_self_m() && bb_getm()->cpu_writing)
				return atomic_load_explicit(&gp->cpu_ns, memory_order_relaxed);
			__builtin_ia32_pause();
			continue;
		}
		uint64_t ns = atomic_load_explicit(&gp->cpu_ns, memory_order_relaxed);
		uint64_t mark = atomic_load_explicit(&gp->cpu_mark, memory_order_relaxed);
		bb_m *m = atomic_load_explicit(&gp->cpu_m, memory_order_relaxed);
		uint64_t now = 0;
		if (m) /* Ms are never freed; one that ended fails the read, and
			  its G was charged off it first: the check below retries */
			now = m == bb_self_m() ? clock_ns(CLOCK_THREAD_CPUTIME_ID)
							       : clock_ns(os_thread_clock(m->tid));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&gp->cpu_seq, memory_order_relaxed) != s)
			continue;
		return m && now > mark ? ns + (now - mark) : ns;
	}
}

/* A green thread's clock id for pthread_getcpuclockid. glibc's encoding
 * of bobbin's thread ids ((~tid) << 3 in 32 bits) loses their top bits,
 * so a G gets a per-thread CPU clock (CPUCLOCK_SCHED) of an id that is
 * not bobbin's tid but still one no kernel thread can have: bit 27 set
 * (kernel tids stay below 2^22), and the low 27 bits of its goid. The
 * kernel rejects it (EINVAL); bb_cpuclock_g reads it back. */
#define GREEN_CLOCK_TAG 0x8000000u
#define GREEN_CLOCK_MASK 0x7ffffffu

clockid_t bb_cpuclock_id(const bb_g *gp)
{
	uint32_t id = GREEN_CLOCK_TAG | ((uint32_t)gp->goid & GREEN_CLOCK_MASK);
	return (clockid_t)((~id << 3) | 6);
}

/* its clock's goid bits, of a G that has not ended */
static bool clock_is(const bb_g *gp, uint64_t low)
{
	return ((uint32_t)gp->goid & GREEN_CLOCK_MASK) == low && !gp->exited;
}

/* The G whose per-thread CPU clock clk is, if it is one bb_cpuclock_id
 * made: NULL with *ours set when that thread has ended (the kernel's
 * EINVAL for the clock of a thread that is gone); NULL, *ours clear, for
 * any other clock. */
bb_g *bb_cpuclock_g(clockid_t clk, bool *ours)
{
	*ours = false;
	if (clk >= 0 || (clk & 7) != 6)
		return NULL;
	uint32_t id = ~(uint32_t)(clk >> 3);
	if ((id & ~GREEN_CLOCK_MASK) != GREEN_CLOCK_TAG)
		return NULL;
	*ours = true;
	return bb_g_find(clock_is, id & GREEN_CLOCK_MASK);
}

/* fork child: the forking G is the child's only thread, whose CPU clock
 * starts again at 0 (the other Ms do not exist here) */
void bb_cpuclock_forkchild(bb_m *mp, bb_g *self)
{
	/* and its other counts (a new kernel thread's are 0) */
	self->sw_vol = self->sw_invol = 0;
	self->ru = (bb_rucount){ 0 };
	mp->ru_g = NULL;
	if (atomic_load_explicit(&rusage_on, memory_order_relaxed))
		ru_edge(mp, self);
	if (!atomic_load_explicit(&bb_cpuclock_on, memory_order_relaxed))
		return;
	atomic_store_explicit(&self->cpu_seq, 0, memory_order_relaxed);
	atomic_store_explicit(&self->cpu_ns, 0, memory_order_relaxed);
	mp->cpu_g = NULL;
	start_stint(mp, self, clock_ns(CLOCK_THREAD_CPUTIME_ID));
}
