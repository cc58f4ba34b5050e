/*
 * debug.c — seeing inside: BOBBIN_DEBUG parsing, the registry of every G,
 * schedtrace lines (Go's GODEBUG=schedtrace format), the dump of every
 * thread (on SIGQUIT, or when all threads are blocked forever), and the
 * deadlock check sysmon runs.
 *
 * BOBBIN_DEBUG is a comma-separated list of key=value: schedtrace=MS,
 * scheddetail=1, asyncpreemptoff=1. An unknown key or a bad number prints
 * one warning and is ignored.
 *
 * The dump functions run in a signal handler or on sysmon, with the world
 * still moving: they read racily and only print; they never take a lock a
 * running M might hold.
 */
#include "runtime.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

bb_debug_cfg bb_debug;

/* every G ever made, in creation order; Gs are pooled, never freed */
static bb_lock allglock;
static bb_g **allgs;
static _Atomic int32_t nallgs;
static int32_t capallgs;

void bb_allgs_add(bb_g *gp)
{
	bb_lock_acquire(&allglock);
	if (nallgs == capallgs) {
		int32_t cap = capallgs ? capallgs * 2 : 1024;
		bb_g **n = bb_realloc(allgs, (size_t)cap * sizeof *n);
		if (n == NULL) {
			bb_lock_release(&allglock);
			return; /* the G just stays out of dumps */
		}
		allgs = n;
		capallgs = cap;
	}
	allgs[nallgs] = gp;
	atomic_store_explicit(&nallgs, nallgs + 1, memory_order_release);
	bb_lock_release(&allglock);
}

/* fn(gp, arg) for every G ever made (allglock held: fn must not create) */
void bb_allgs_each(void (*fn)(bb_g *, void *), void *arg)
{
	bb_lock_acquire(&allglock);
	for (int32_t i = 0; i < nallgs; i++)
		fn(allgs[i], arg);
	bb_lock_release(&allglock);
}

struct find {
	bool (*match)(const bb_g *, uint64_t);
	uint64_t key;
	bb_g *found;
};

static void find_one(bb_g *gp, void *arg)
{
	struct find *f = arg;
	if (f->found == NULL && gp->tcb && atomic_load(&gp->status) != Gdead && f->match(gp, f->key))
		f->found = gp;
}

/* The first live G (not dead, a TCB) that match says is key's, or NULL: a
 * scan, for the rare calls that name a thread by a number. */
bb_g *bb_g_find(bool (*match)(const bb_g *, uint64_t), uint64_t key)
{
	struct find f = {match, key, NULL};
	bb_allgs_each(find_one, &f);
	return f.found;
}

/* not through the TCB, which an ending G gives to the stack cache
 * meanwhile (main's is the initial thread's, for good) */
static bool tid_is(const bb_g *gp, uint64_t tid)
{
	int its = gp->is_main ? bb_g_tid((bb_g *)gp) : bb_g_green_tid(gp);
	return its == (int)tid;
}

/* The live G whose thread id (the one glibc and gettid see) is tid, or
 * NULL. */
bb_g *bb_g_by_tid(int tid)
{
	return bb_g_find(tid_is, (uint64_t)(uint32_t)tid);
}

/* fork child: only the forking G lives on */
void bb_allgs_forkchild(bb_g *self)
{
	atomic_store(&allglock.key, 0);
	int32_t total = atomic_load(&nallgs);
	for (int32_t i = 0; i < total; i++)
		if (allgs[i] != self)
			atomic_store(&allgs[i]->status, Gdead);
}

static bool parse_num(const char *v, size_t n, long lo, long hi, long *out)
{
	char buf[32];
	if (n == 0 || n >= sizeof buf)
		return false;
	memcpy(buf, v, n);
	buf[n] = '\0';
	char *end;
	long x = strtol(buf, &end, 10);
	if (*end != '\0' || x < lo || x > hi)
		return false;
	*out = x;
	return true;
}

void bb_debug_init(void)
{
	const char *s = getenv("BOBBIN_DEBUG");
	if (s == NULL || *s == '\0')
		return;
	const char *p = s;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		size_t klen = eq ? (size_t)(eq - p) : len;
		const char *v = eq ? eq + 1 : "";
		size_t vlen = eq ? len - klen - 1 : 0;
		long x;
		if (klen == 10 && memcmp(p, "schedtrace", 10) == 0 &&
		    parse_num(v, vlen, 1, 3600000, &x))
			bb_debug.schedtrace_ms = (int)x;
		else if (klen == 11 && memcmp(p, "scheddetail", 11) == 0 &&
			 parse_num(v, vlen, 0, 1, &x))
			bb_debug.scheddetail = (int)x;
		else if (klen == 15 && memcmp(p, "asyncpreemptoff", 15) == 0 &&
			 parse_num(v, vlen, 0, 1, &x))
			bb_debug.asyncpreemptoff = (int)x;
		else if (len > 0)
			bb_printf("bobbin: ignoring BOBBIN_DEBUG entry \"%.*s\" (known: schedtrace=MS, "
				  "scheddetail=0|1, asyncpreemptoff=0|1)\n", (int)len, p);
		p += len + (end != NULL);
	}
}

static const char *statusname(uint32_t s)
{
	static const char *const names[] = {"idle", "runnable", "running", "syscall",
					    "waiting", "preempted", "dead"};
	return s < sizeof names / sizeof *names ? names[s] : "?";
}

static const char *waitname(uint32_t r)
{
	static const char *const names[] = {"", "join", "once", "semacquire", "sleep",
					    "yield", "mutex", "cond", "IO wait"};
	return r < sizeof names / sizeof *names ? names[r] : "?";
}

static int32_t count_status(uint32_t st)
{
	int32_t n = 0, total = atomic_load_explicit(&nallgs, memory_order_acquire);
	for (int32_t i = 0; i < total; i++)
		if (atomic_load_explicit(&allgs[i]->status, memory_order_relaxed) == st)
			n++;
	return n;
}

/* one schedtrace line (and, with scheddetail, the P, M and G lines) */
void bb_schedtrace(int64_t since_start_ms)
{
	char buf[4096];
	int n = snprintf(buf, sizeof buf,
			 "SCHED %lldms: gomaxprocs=%d idleprocs=%d threads=%d spinningthreads=%d "
			 "needspinning=0 idlethreads=%d runqueue=%d [",
			 (long long)since_start_ms, bb_gomaxprocs,
			 atomic_load(&bb_sched_.npidle), atomic_load(&bb_sched_.mcount),
			 atomic_load(&bb_sched_.nmspinning), bb_sched_.nmidle,
			 atomic_load(&bb_sched_.runqsize));
	for (int32_t i = 0; i < bb_gomaxprocs && n < (int)sizeof buf - 16; i++)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%u", i ? " " : "",
			      bb_runqlen(bb_allp[i]) +
				      (atomic_load(&bb_allp[i]->runnext) != NULL));
	if (n < (int)sizeof buf - 2)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "]\n");
	bb_printf("%s", buf);
	if (!bb_debug.scheddetail)
		return;
	for (int32_t i = 0; i < bb_gomaxprocs; i++) {
		bb_p *pp = bb_allp[i];
		bb_m *mp = pp->m;
		bb_printf("  P%d: status=%u schedtick=%u syscalltick=%u m=%lld runqsize=%u "
			  "gfreecnt=%d timers=%d\n",
			  pp->id, atomic_load(&pp->status), pp->schedtick, pp->syscalltick,
			  mp ? (long long)mp->id : -1LL, bb_runqlen(pp), pp->gfreecnt, pp->ntimers);
	}
	int32_t nm = atomic_load(&bb_nallm);
	for (int32_t i = 0; i < nm && i < BB_ALLM_MAX; i++) {
		bb_m *mp = bb_allm[i];
		if (mp == NULL)
			continue;
		bb_p *pp = mp->p;
		bb_g *cg = mp->curg;
		bb_printf("  M%lld: p=%d curg=%lld spinning=%d tid=%d lockedg=%lld%s\n",
			  (long long)mp->id, pp ? pp->id : -1, cg ? (long long)cg->goid : -1LL,
			  mp->spinning, mp->tid, mp->lockedg ? (long long)mp->lockedg->goid : -1LL,
			  mp->oldp ? " (in a system call)" : "");
	}
	int32_t total = atomic_load_explicit(&nallgs, memory_order_acquire);
	for (int32_t i = 0; i < total; i++) {
		bb_g *gp = allgs[i];
		uint32_t st = atomic_load(&gp->status);
		if (st == Gdead)
			continue;
		bb_m *mp = gp->m;
		bb_printf("  G%llu: status=%u(%s%s%s) m=%lld\n", (unsigned long long)gp->goid, st,
			  statusname(st), gp->waitreason ? " " : "", waitname(gp->waitreason),
			  mp ? (long long)mp->id : -1LL);
	}
}

/* dladdr is not async-signal-safe; a dump is the last thing a dying
 * process does, and the names are worth it */
static void print_frame(int k, uintptr_t pc)
{
	Dl_info info;
	if (dladdr((void *)(pc - 1), &info) && info.dli_fname) {
		const char *lib = strrchr(info.dli_fname, '/');
		lib = lib ? lib + 1 : info.dli_fname;
		if (info.dli_sname)
			bb_printf("  #%d %p %s+%#lx (%s)\n", k, (void *)pc, info.dli_sname,
				  (unsigned long)(pc - (uintptr_t)info.dli_saddr), lib);
		else
			bb_printf("  #%d %p (%s+%#lx)\n", k, (void *)pc, lib,
				  (unsigned long)(pc - (uintptr_t)info.dli_fbase));
		return;
	}
	bb_printf("  #%d %p\n", k, (void *)pc);
}

/* every live thread: id, name, state, wait reason, M, stack, start routine */
void bb_dump_all(const char *why)
{
	bb_printf("bobbin: %s\n", why);
	int32_t total = atomic_load_explicit(&nallgs, memory_order_acquire);
	int64_t now = bb_nanotime();
	for (int32_t i = 0; i < total; i++) {
		bb_g *gp = allgs[i];
		uint32_t st = atomic_load(&gp->status);
		if (st == Gdead)
			continue;
		bb_m *mp = gp->m;
		bb_printf("\nthread %llu%s%s%s [%s%s%s%s]%s:\n", (unsigned long long)gp->goid,
			  gp->name[0] ? " \"" : "", gp->name, gp->name[0] ? "\"" : "",
			  statusname(st), gp->waitreason ? ", " : "", waitname(gp->waitreason),
			  gp->waitsince && st == Gwaiting ? "" : "",
			  gp->is_main ? " (main)" : "");
		if (st == Gwaiting && gp->waitsince)
			bb_printf("  waiting for %lld ms\n", (long long)((now - gp->waitsince) / 1000000));
		bb_printf("  start routine %p, stack [%p, %p)\n", (void *)gp->fn,
			  (void *)gp->stack_lo, (void *)gp->stack_hi);
		if (gp->createpc) {
			bb_printf("  created by thread %llu at:\n", (unsigned long long)gp->creator);
			print_frame(0, gp->createpc);
		}
		if (mp)
			bb_printf("  on M%lld (tid %d)\n", (long long)mp->id, mp->tid);
		/* a parked G's frame chain, from its saved frame pointer */
		if (st != Grunning && st != Gsyscall) {
			uintptr_t pc = gp->ctx.rip, fp = gp->ctx.rbp;
			for (int k = 0; k < 32 && pc; k++) {
				print_frame(k, pc);
				if (fp < gp->stack_lo || fp + 16 > gp->stack_hi || (fp & 7))
					break;
				pc = ((uintptr_t *)fp)[1];
				fp = ((uintptr_t *)fp)[0];
			}
		}
	}
}

static struct sigaction prev_quit;

static void quit_handler(int sig)
{
	bb_dump_all("SIGQUIT: dump of every thread");
	bb_real_sigaction(SIGQUIT, &prev_quit, NULL);
	raise(SIGQUIT); /* the program dies as it would natively */
}

void bb_debug_signals_init(void)
{
	struct sigaction old;
	if (bb_real_sigaction(SIGQUIT, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
	    old.sa_handler != SIG_DFL)
		return; /* the program's own handler, or ignored: leave it */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = quit_handler;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sigfillset(&sa.sa_mask);
	prev_quit = old;
	bb_real_sigaction(SIGQUIT, &sa, NULL);
}

/* ---- deadlock ----
 *
 * "all threads are asleep": every P idle, nobody spinning, no timer armed,
 * nobody waiting on the network poller, no thread in a blocking call or
 * being started (pthread_create may hold the program's malloc lock), no
 * signal handler of the program's that could wake someone, and no sign of
 * life (switches) between two checks. Then no thread can ever run again. */

static bool program_has_handlers(void)
{
	for (int sig = 1; sig < 65; sig++) {
		if (sig == bb_presig() || sig == SIGSEGV || sig == SIGQUIT || sig == 32 || sig == 33)
			continue; /* bobbin's own, and glibc's internal ones */
		struct {
			void *handler;
			unsigned long flags;
			void *restorer;
			uint64_t mask;
		} ka;
		if (bb_rawsyscall6(SYS_rt_sigaction, sig, 0, (long)&ka, 8, 0, 0) == 0 &&
		    ka.handler != SIG_DFL && ka.handler != SIG_IGN)
			return true;
	}
	return false;
}

bool bb_deadlock_suspect(void)
{
	if (atomic_load(&bb_sched_.npidle) != bb_gomaxprocs ||
	    atomic_load(&bb_sched_.nmspinning) != 0 || atomic_load(&bb_sched_.runqsize) != 0 ||
	    bb_nexttimer() != 0 || atomic_load(&bb_netpoll_waiters) != 0 ||
	    atomic_load(&bb_nosstarting) != 0 || bb_nlive() == 0)
		return false;
	/* every live G parked, none in a system call (which may still return) */
	return count_status(Gwaiting) == bb_nlive() &&
	       count_status(Gsyscall) == 0 && !program_has_handlers();
}

void bb_deadlock_report(void)
{
	bb_dump_all("all threads are asleep - deadlock!");
	_exit(2);
}
