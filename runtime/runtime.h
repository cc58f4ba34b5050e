/*
 * runtime.h — the G, M, P and sched structures of bobbin's scheduler.
 *
 * The model is Go's (src/runtime/runtime2.go): a G is a green thread (one per
 * pthread of the program), an M is an OS thread, a P is the right to run Gs.
 * An M must hold a P to run a G. Field names follow Go's so the two can be read
 * side by side.
 *
 * Every shared field says what protects it:
 *   "owner P"     only the M that holds this P touches it;
 *   "sched.lock"  the global scheduler lock (rank 1: taken before g->lock? never:
 *                 see the lock ranks in HACKING.md — sched.lock is a leaf except
 *                 that it may be taken with no other lock held);
 *   "atomic"      C11 atomics, with the order and its pair written at each use.
 *
 * This header knows nothing of which libc symbol called the runtime.
 */
#ifndef BB_RUNTIME_H
#define BB_RUNTIME_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#include <unwind.h>

#ifdef BB_TEST_SIZES
#define BB_RUNQ_LEN 8u /* small, so tests reach the overflow path */
#else
#define BB_RUNQ_LEN 256u
#endif

#define BB_GFREE_LOCAL_MAX 64 /* dead Gs cached per P before spilling to sched */
#define BB_GOID_BATCH 16
#define BB_SLICE_INHERITS 61   /* runnext runs sharing one time slice */
#ifdef BB_TEST_SIZES
#define BB_STACK_LOCAL_MAX 4   /* small, so tests spill, refill and release */
#define BB_STACK_WARM_MAX 8
#else
#define BB_STACK_LOCAL_MAX 32  /* free default stacks cached per P before spilling */
#define BB_STACK_WARM_MAX 1024 /* globally cached stacks that keep their pages */
#endif
#define BB_STACK_CLASSES 8     /* stack sizes the global cache keeps at once */
#define BB_STACK_TRIM_NS (1000 * 1000 * 1000LL) /* a cached stack unused for 1-2 of these is unmapped */

typedef struct bb_g bb_g;
typedef struct bb_m bb_m;
typedef struct bb_p bb_p;

/* a stack bobbin mapped, not run on: an entry of the stack cache (stack.c) */
typedef struct bb_stack_unit {
	void *map, *tcb; /* the mapping, guard first; the TCB at its top, or NULL */
	uintptr_t hi;    /* the stack's end (its TCB's block above) */
	size_t mapsize, guard;
} bb_stack_unit;

/* ---- saved context (read and written by asm/switch_x86_64_sysv_elf.S) ---- */
typedef struct bb_ctx {
	uint64_t rsp;    /* 0  */
	uint64_t rip;    /* 8  */
	uint64_t rbx;    /* 16 */
	uint64_t rbp;    /* 24 */
	uint64_t r12;    /* 32 */
	uint64_t r13;    /* 40 */
	uint64_t r14;    /* 48 */
	uint64_t r15;    /* 56 */
	uint64_t fsbase; /* 64: the TCB this context runs on; 0 = leave fs alone */
	uint32_t mxcsr;  /* 72 */
	uint16_t fpucw;  /* 76 */
	uint16_t pad;
} bb_ctx;
_Static_assert(offsetof(bb_ctx, rip) == 8, "asm offset");
_Static_assert(offsetof(bb_ctx, r15) == 56, "asm offset");
_Static_assert(offsetof(bb_ctx, fsbase) == 64, "asm offset");
_Static_assert(offsetof(bb_ctx, mxcsr) == 72, "asm offset");
_Static_assert(offsetof(bb_ctx, fpucw) == 76, "asm offset");

/* ---- G status: each value is an ownership rule, as in Go ---- */
enum {
	Gidle,     /* just allocated, not yet initialised; owned by its creator */
	Grunnable, /* on a run queue (or about to be); not running; stack not in use */
	Grunning,  /* running user code on g->m, which holds a P; owned by that M */
	Gsyscall,  /* in a blocking call outside the scheduler (later issues) */
	Gwaiting,  /* parked; owned by whatever will ready it (a wait queue, a joiner) */
	Gpreempted,/* stopped by asynchronous preemption (later issue) */
	Gdead,     /* exited; on a free list, or a zombie waiting to be joined */
};

/* wait reasons, for dumps and stats */
enum {
	waitReasonZero,
	waitReasonJoin,
	waitReasonOnce,
	waitReasonSema,
	waitReasonSleep,
	waitReasonYield,
	waitReasonMutex,
	waitReasonCond,
	waitReasonIO,
	waitReasonCount
};

typedef struct bb_lock {
	_Atomic uint32_t key; /* 0 unlocked, 1 locked, 2 locked with sleepers */
} bb_lock;

typedef struct bb_note {
	_Atomic uint32_t key; /* 0 clear, 1 woken; an M sleeps on it with futex */
} bb_note;

/* a timer on a P's heap (timer.c). fn runs on some M with a P, must not block */
typedef struct bb_timer {
	int64_t when;                 /* monotonic ns; set before arming */
	void (*fn)(void *arg, uintptr_t seq);
	void *arg;
	uintptr_t seq;
	_Atomic(bb_p *) pp;           /* the heap it is on, NULL when not armed:
					 written under that P's timerslock */
	int idx;                      /* index in that heap: timerslock */
} bb_timer;

typedef struct bb_timerslot {
	int64_t when;
	bb_timer *t;
} bb_timerslot;

/* the counts of getrusage(RUSAGE_THREAD) besides CPU time (cpuclock.c) */
typedef struct bb_rucount {
	long minflt, majflt, inblock, oublock, nvcsw, nivcsw;
} bb_rucount;

#define BB_G_MAGIC 0x62626f62u /* "bbob" */

struct bb_g {
	bb_ctx ctx;           /* owner: whoever runs or switches this G */
	uint32_t magic;       /* BB_G_MAGIC while the G struct is live */
	_Atomic uint32_t status; /* CAS transitions, see bb_casgstatus */
	/* kernel state another thread set for it while it had no OS thread
	 * of its own (identity.c; BB_KP_*): its next schedule() locks it to
	 * that M and applies it (bb_adopt_kstate). Next to status: every
	 * direct switch reads it. Under lock, also read bare */
	_Atomic uint32_t kpending;
	uint64_t goid;        /* set at creation, immutable until freed */
	bb_m *m;              /* the M running it, while Grunning */
	bb_g *schedlink;      /* run queue / free list link: owned by that list */
	uint32_t waitreason;

	/* stack: [stack_lo, stack_hi) usable; guard below stack_lo */
	uintptr_t stack_lo, stack_hi;
	void *stack_map;      /* mmap base (guard included), NULL for user stacks */
	size_t stack_mapsize; /* whole mapping */
	size_t guardsize;
	bool user_stack;      /* from pthread_attr_setstack: never freed by us */

	uintptr_t stack_top;  /* end of the thread's block as NPTL reports it: the
			       * mapping's end when the TCB sits above stack_hi */
	void *tcb;            /* struct pthread of the running thread: at the top
			       * of its stack (unit_tcb; both go to the stack
			       * cache when it ends, and tcb becomes NULL under
			       * lock) or own_tcb */
	void *own_tcb;        /* a block of the G's own (malloc), for a stack
			       * without one at its top; kept with the G */
	bool unit_tcb;        /* tcb sits at the top of the stack mapping */
	_Atomic uint8_t tcbstate; /* BB_TCB_*: a new G's TCB is filled in when it
				   * first runs (bb_tcb_pin) */
	uint32_t stkputs;     /* its P's stkputs when it got its stack (bb_stack_swap) */
	bb_p *stkp;           /* that P */

	void *(*fn)(void *);
	void *arg;
	void *result;

	/* join state, protected by lock */
	bb_lock lock;
	bool detached;
	bool exited;         /* finished, waiting for a joiner (a zombie) */
	bool is_main;        /* G1: original stack and TCB, never recycled */
	bool c11;            /* made by thrd_create: fn returns an int */
	/* its own alternate signal stack (sigaltstack), installed on whatever
	 * M runs it; NULL: none (the M keeps bobbin's) */
	void *alt_sp;
	size_t alt_size;
	int alt_flags;
	/* the one the kernel gets while it runs: alt_sp, or NULL (the M's own)
	 * when another thread installed the same stack first (bb_alt_claim) */
	void *alt_kern;
	bool joined;         /* someone is joining, a second join is EINVAL */
	bb_g *joiner;
	bool fjoin;          /* the joiner is no running G: it waits on exitword */
	_Atomic uint32_t exitword; /* 1 once exited (a futex for such a joiner) */

	char name[16];
	int schedpolicy;     /* stored and reported, as NPTL's attr */
	int schedprio;
	/* the state kpending says is kept (under lock) */
	void *kaff;                /* affinity mask asked for (BB_KAFF_MAX bytes, malloc'ed) */
	size_t kaffsize;           /* its size; 0: none asked for */

	/* park/wait support */
	void *waitaddr;      /* address-keyed wait queue this G is on: its bucket lock */
	bb_g *waitnext, *waitprev;
	_Atomic uintptr_t waitticket; /* bumped per park: a late timer sees the wait is over */
	_Atomic(void *) waitbucket;   /* the bucket of the current park */
	bool timedout;       /* set by the timer under the bucket lock */
	bool handoff;        /* woken by bb_sema_wake_handoff: under the bucket lock */
	_Atomic uintptr_t pollticket; /* the netpoll wait session: CAS to 0 by its waker */
	uint64_t polllook;            /* bb_poll_epoch when it last looked at an fd (netpoll.c) */
	int64_t waitsince;   /* when it last parked (for dumps) */
	/* what the parked G waits in, so pthread_cancel can interrupt it
	 * (bb_interrupt); set by the waiting G before it parks */
	_Atomic uint32_t waitkind; /* BB_WAIT_* */
	void *waitobj;       /* the joined G for BB_WAIT_JOIN */
	bool interrupted;    /* woken by bb_interrupt */
	uint8_t wakeon;      /* what may wake its sema wait early (BB_WAKE_*): set by the waiter */
	volatile bool in_cancel_call; /* in glibc's cancellable wrapper of a blocking call */
	/* in a call that waits under a mask of its own (sigsuspend, ppoll,
	 * pselect, epoll_pwait): the signals it lets in meanwhile are those
	 * waitmask lets in, not sigmask (sysmon's choice of a taker) */
	_Atomic bool masked_wait;
	uint64_t waitmask;
	_Atomic uint32_t *clear_tid; /* set_tid_address of the G: zeroed and woken at its exit */
	bool exit_called;    /* pthread_exit (not cancellation) is unwinding it */
	bb_m *lockedm;       /* locked to this M (bobbin_lock_os_thread): owner G */
	uint64_t sigmask;    /* its signal mask (kernel layout): applied to its M when it runs */
	_Atomic uint64_t sigpending; /* signals sent to this thread (pthread_kill), not yet run */
	_Atomic uint64_t sigwait_set; /* in sigwait & co. (inside its system call): what it waits for */
	bb_lock sigqlock;    /* pthread_sigqueue's values for sigpending signals */
	uint8_t nsigq;       /* in sigq, made on the first pthread_sigqueue to it */
	struct bb_sigq { int sig; uint64_t value; } *sigq;
	/* process signals sysmon chose this G to take (sysmon.c): kept
	 * blocked on its M until it dequeues them itself (bb_deliver_signals) */
	_Atomic uint64_t procsig;
	bool sig_eintr;      /* a handler without SA_RESTART ran while it waited */
	bool sig_ran;        /* a handler ran (sleeps end with EINTR whatever SA_RESTART) */
	bool sig_ignored;    /* a pthread_kill'ed signal was ignored: a sleep it woke goes on */
	int32_t lockcount;
	int32_t libclocks;   /* glibc-internal locks held (flockfile): owner G only */
	/* the outermost frame of bobbin code on this G's stack: its frame
	 * address and return address (bb_rt_live); owner G, read by the
	 * signal handler on its M */
	uintptr_t rt_fp, rt_ra;
	bool rt_nested;      /* the latest interposed call was nested (bb_rt_mark) */
	bool pinned_wait;    /* parked on its own M (libclocks > 0); read by goready */
	_Atomic bool preempt; /* sysmon asks it to yield at its next chance */
	uint8_t async_why;   /* what the SIGURG handler sent it to bb_asyncpreempt for */
	_Atomic uint8_t spinning; /* preempted in the same few bytes of code 1-3 times running */
	_Atomic bool hog;    /* queued by a preemption or a yield, not readied (slice_for) */
	uintptr_t preempt_pc; /* where the latest preemption signal found it */
	bool rawcalls;        /* sysmon found it asleep in a system call bobbin did not
				 see: no preemption signal while it runs (bb_preemptone) */
	_Atomic uint32_t woken;
	bb_timer timer;      /* sleeps and timed waits of this G */
	int64_t startpc;     /* the start routine, for dumps */
	uintptr_t createpc;  /* where pthread_create was called from, for dumps */
	uint64_t creator;    /* goid of the creating thread */
	/* its CPU time, once a per-thread CPU clock has been asked for
	 * (cpuclock.c): written by the M charging it between two odd/even
	 * steps of cpu_seq, read from anywhere */
	_Atomic uint32_t cpu_seq;
	_Atomic uint64_t cpu_ns;   /* CPU time of the stints that ended */
	_Atomic uint64_t cpu_mark; /* cpu_m's thread CPU clock when this stint began */
	_Atomic(bb_m *) cpu_m;     /* the M charging it now, NULL off an M */
	/* the rest of getrusage(RUSAGE_THREAD) (cpuclock.c), read by the G
	 * itself only: the switches bobbin made it take (a park is a voluntary
	 * one, a preemption or a yield that let another run an involuntary
	 * one; always counted), and once a program has asked, what the kernel
	 * counted on its Ms while it ran (faults, blocks, the Ms' own
	 * switches), charged at every switch */
	uint32_t sw_vol, sw_invol;
	bb_rucount ru;
	struct _Unwind_Exception exit_exc; /* pthread_exit's forced unwind */
};
_Static_assert(offsetof(bb_g, ctx) == 0, "asm reads g->ctx at 0");

enum { Pidle, Prunning, Psyscall, Pdead };

struct bb_p {
	int32_t id;
	_Atomic uint32_t status;  /* sched.lock for Pidle transitions; owner otherwise */
	bb_p *link;               /* idle list, pending list: sched.lock */
	bool pendspin;            /* on the pending list with a spinning M counted */
	uint32_t schedtick;       /* owner P: incremented on every new time slice */
	uint32_t inherited;       /* owner P: runs in a row that inherited the slice */
	uint32_t syscalltick;     /* bumped by each entersyscall; read racily by sysmon */
	/* statistics, owner P only (summed racily for BOBBIN_STATS at exit):
	 * per P so that counting costs no shared cache line on a hot path */
	uint64_t nsyscalls, ncreated, parks[16];
	/* Gs created on this P minus Gs that exited on it: written by the owner
	 * only, so creating and exiting touch no shared line; their sum over
	 * all Ps is the number of live Gs (bb_nlive) */
	_Atomic int32_t live;
	_Atomic(bb_m *) syscallm; /* the M in the system call while Psyscall (for sysmon) */
	_Atomic uint32_t switchtick; /* bumped by every execute: sysmon's "same G since" */
	bb_m *m;                  /* back-link to the M holding it */

	/* run queue: runqhead CAS by owner and thieves, runqtail stored by the owner
	 * with release. Slots are atomics so thieves' racy copies are well defined. */
	_Atomic uint32_t runqhead;
	_Atomic uint32_t runqtail;
	_Atomic(bb_g *) runq[BB_RUNQ_LEN];
	_Atomic(bb_g *) runnext;  /* next G to run; CAS by owner and thieves */

	int32_t gfreecnt;         /* owner P: dead Gs (their TCBs, no stacks), the latest last */
	bb_g *gfree[BB_GFREE_LOCAL_MAX];
	int32_t nstkfree;         /* owner P: free stacks, any size, the warmest last (stack.c) */
	uint32_t stkputs;         /* owner P: stacks put in its cache so far */
	bb_stack_unit stkfree[BB_STACK_LOCAL_MAX];
	uint64_t goidcache, goidcacheend; /* owner P: a batch of goids (Go's goidcache) */

	/* timers: the heap under timerslock; timer0when (earliest, 0 = none)
	 * is read without the lock, stored with release under it */
	bb_lock timerslock;
	bb_timerslot *timers;
	int32_t ntimers, timerscap;
	_Atomic int64_t timer0when;
};

#define BB_G0_STACKSIZE (256 * 1024)  /* an M's own stack (g0's) */
#define BB_ALTSTACK_SIZE (64 * 1024)  /* an M's alternate signal stack */

struct bb_m {
	bb_m *self;               /* gs:0 points here: bb_getm() reads it */
	bb_g *g0;                 /* scheduler context of this M */
	bb_g *curg;               /* the G running on this M, NULL when on g0 */
	bb_p *p;                  /* the P held, NULL when idle */
	/* the pc the preemption signal interrupted, which bb_asyncpreempt
	 * pushes as its first instruction (gs:32): the handler may not write
	 * it below the red zone, where the kernel's signal frame still is */
	uintptr_t async_pc;
	/* the frame, and its return address, of a program's handler that the
	 * kernel runs on this M outside the G's own code (shim/signal.c):
	 * while it is live, interposed calls under it run natively (the
	 * frame is on the G's stack: bb_sig_native_live) and the Gs it wakes
	 * go through sysmon (bb_m_in_handler). Next to curg and p, which the
	 * same paths read */
	uintptr_t sigframe_fp, sigframe_ra;
	bb_p *nextp;              /* P handed over by startm, taken at wake-up */
	bb_g *cpu_g;              /* the G its CPU time goes to (cpuclock.c): owner only */
	bool cpu_writing;         /* bb_cpuclock_edge is updating a G: owner only */
	bb_g *ru_g;               /* the G its rusage counts go to (cpuclock.c): owner only */
	bb_rucount ru_mark;       /* its OS thread's counts when ru_g's stint began */
	int64_t id;
	bool spinning;            /* looking for work; counted in sched.nmspinning */
	bool runs_next;           /* on g0, about to take its P's next G itself (runs timers) */
	bb_note park;             /* idle Ms sleep here */
	bb_p *oldp;               /* the P left in Psyscall by entersyscall */
	int64_t syscallstart;     /* for the trace */
	uint64_t switches;        /* Gs executed on this M (for stats): owner only */
	_Atomic(bb_p *) handp;    /* a P handed to this M while it was the timer sleeper */
	bb_m *schedlink;          /* idle list: sched.lock */
	void *tcb;                /* the OS thread's own struct pthread */
	/* the struct pthread glibc's thread list holds for this OS thread, if
	 * not tcb (M0's: main's; set in a fork child, see fork.c) */
	void *ostcb;
	uintptr_t g0sp;           /* top of g0's stack: mcall starts here */
	pid_t tid;                /* kernel tid */
	uint32_t fastrand[2];
	void *altstack;           /* sigaltstack for overflow reports */
	void *alt_cur;            /* the alternate stack the kernel has for it now:
				     altstack, or its G's own (bb_alt_enter) */
	bool (*waitunlockf)(bb_g *, void *); /* gopark -> park_m, this M only */
	volatile bool detach_req; /* sysmon: give up your P (stuck in the kernel) */
	/* sysmon: run the handlers of these kept signals for your G, which
	 * sleeps in a system call (shim/signal.c, bb_resend_hook) */
	_Atomic uint64_t resend;
	/* the system call sysmon saw the M's OS thread asleep in before it
	 * sent detach_req (bb_kernel_call): the handler restarts it when the
	 * signal cut it short with EINTR (restart_call) */
	struct bb_kcall {
		long nr, args[6];
		uintptr_t pc;
	} kcall;
	volatile bool kcall_set;
	bb_g *volatile kcall_g;   /* the G sysmon saw in that call */
	bb_g *lockedg;            /* the one G this M runs (locked), or NULL */
	uint64_t sigmask;         /* the thread's kernel signal mask right now: owner M */
	bb_g *lastg;              /* the G it ran last (or runs), and that G's goid then */
	uint64_t lastgoid;
	volatile bool detached;   /* the signal handler did entersyscall for curg */
	bool dropping;            /* counted in sched.nmdropping: sched.lock */
	/* its OS thread has kernel state a locked G gave it that a thread it
	 * creates would inherit (a nice value, an I/O priority, namespaces):
	 * it makes no Ms itself, sysmon does (bb_newm). Owner M */
	bool kdirty;
	bb_m *newmlink;           /* on sysmon's list of Ms to start (bb_newm) */
	void *waitarg;
	_Atomic uint64_t sigs_run; /* program's handlers the kernel ran here (sysmon reads) */
	/* bb_presig_move: 0 not yet, 1 the mover's SIGURG is on its way,
	 * 2 its kernel mask follows the move (or never takes signals) */
	_Atomic uint8_t presig_state;
	/* entries of the security-state log (bb_cred_log) its OS thread has
	 * applied: owner M (its own thread, also in a signal handler) */
	uint32_t cred_seen;
	/* its OS thread's way out (runtime/m.c, mstart's frame): retired Ms
	 * end through glibc's own thread exit (bb_m_end) */
	intptr_t exitjb[5];
	bb_g *nextg;              /* a G handed over with nextp, run at wake-up */
	bb_m *freelink;           /* on the list of ended Ms' records (bb_allocm) */
};
_Static_assert(offsetof(bb_m, async_pc) == 32, "asm/asyncpreempt reads gs:32");

typedef struct bb_sched {
	bb_lock lock;
	/* global run queue: sched.lock */
	bb_g *runqhead, *runqtail;
	_Atomic int32_t runqsize;   /* written under lock, read racily as a hint */
	/* idle Ms: sched.lock */
	bb_m *midle;
	int32_t nmidle;
	/* Ms that gave up their P in findrunnable and are not yet findable
	 * (neither on midle nor the timer sleeper), and Ps startm left for
	 * them instead of making an OS thread: sched.lock, npend <= nmdropping */
	int32_t nmdropping;
	int32_t npend;
	bb_p *pendp;
	_Atomic int32_t mcount;     /* Ms created (less those that ended with their locked G) */
	_Atomic int32_t mpeak;      /* the most Ms at once (BOBBIN_STATS) */
	int32_t maxmcount;
	/* idle Ps: sched.lock for the list, atomic for the count */
	bb_p *pidle;
	_Atomic int32_t npidle;
	_Atomic int32_t nmspinning;
	/* dead Gs spilled from Ps, gflock: an array (the latest last), and a
	 * list through schedlink of the ones it had no room for */
	bb_lock gflock;
	bb_g **gfreev;
	int32_t ngfreev, gfreecap;
	bb_g *gfree;
	int32_t ngfree; /* both */
	/* free stacks spilled from Ps, one array per size (stack.c) */
	struct bb_stkclass {
		size_t mapsize, guard;  /* the mapping and its guard: the class */
		bb_stack_unit *ent;     /* the warmest last */
		int32_t n, cap;
		int32_t ncold;          /* ent[0, ncold): not taken since the last trim */
	} stkc[BB_STACK_CLASSES];
	_Atomic int32_t nstkfree; /* all classes; read bare by a P with none */
	/* counts, on their own cache line: written by every create and exit,
	 * while spinning Ms keep reading the fields above */
	_Atomic int64_t goidgen __attribute__((aligned(64))); /* handed out in batches */
	_Atomic int32_t nthreadsmax;/* peak live Gs (only with bb_stats_on) */
	_Atomic bool main_gone;     /* main has exited: the last exit ends the process */
	char pad_counts[48];
	/* timer sleeper (timer.c): all seq_cst */
	_Atomic uint64_t timergen;   /* bumped by every bb_addtimer */
	_Atomic(bb_m *) timersleeper;/* the M sleeping until the next timer */
	_Atomic int64_t sleepuntil;  /* its deadline */
	_Atomic uint32_t timerwake;  /* futex word it sleeps on */
} bb_sched;

extern bb_sched bb_sched_;
extern bb_p **bb_allp;
extern int32_t bb_gomaxprocs;
extern bool bb_have_fsgsbase;
extern bool bb_active; /* the runtime is running; false = pass everything through */

/* ---- asm ---- */
__attribute__((noreturn)) void bb_gogo(bb_ctx *to);
void bb_mcall(bb_ctx *save, void (*fn)(bb_g *), bb_g *gp, uintptr_t g0sp, uint64_t g0fs);
void bb_gstart(void); /* entry trampoline of a new G: r12 = g */
void bb_gswitch(bb_ctx *save, bb_ctx *to, void (*post)(bb_g *), bb_g *prev);

/* ---- the current M ---- */
static inline bb_m *bb_getm(void)
{
	bb_m *mp;
	__asm__ volatile("mov %%gs:0, %0" : "=r"(mp));
	return mp;
}
/* true on an OS thread that is an M, whichever of its Gs (or g0) runs:
 * set in every TCB bobbin hands a G or an M (gtls.c) and by each M at its
 * start. A TLS load, where reading the gs base (rdgsbase) costs ~6 ns. */
extern __thread bool bb_tls_m __attribute__((tls_model("initial-exec")));

/* gs base of this OS thread, 0 for threads bobbin did not create (but see
 * bb_self_m) */
uintptr_t bb_getgsbase(void);
void bb_setgsbase(uintptr_t v);
extern bb_m bb_nom; /* gs of a thread that is not an M but has a G's TLS */
/* set by a vfork child in the TLS it shares with its waiting parent thread,
 * cleared by the parent when it resumes (asm/vfork, shim/exec.c) */
extern __thread bool bb_tls_vfork __attribute__((tls_model("initial-exec")));

/* A child that runs on this process's memory (vfork, clone with CLONE_VM
 * and no TLS of its own): bobbin's state is its parent's, which it must not
 * change (fd views, poller registrations, signal records) */
static inline bool bb_in_vm_child(void)
{
	return bb_tls_vfork || (bb_tls_m && bb_getm() == &bb_nom);
}

/* The M this OS thread is, or NULL. The gs base alone does not tell: a
 * thread that glibc makes for itself from an M (a SIGEV_THREAD timer's
 * helper, POSIX AIO's) gets that M's gs base from clone, which copies it. */
static inline bb_m *bb_self_m(void)
{
	return bb_tls_m && bb_getgsbase() != 0 ? bb_getm() : NULL;
}
void bb_setfsbase(uintptr_t v);
uintptr_t bb_getfsbase(void);

static inline bb_g *bb_getg(void) { return bb_getm()->curg; }

/* ---- util.c ---- */
__attribute__((noreturn, format(printf, 1, 2))) void bb_throw(const char *fmt, ...);
void bb_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bb_lock_acquire(bb_lock *l);
void bb_lock_release(bb_lock *l);
void bb_notesleep(bb_note *n);
void bb_notewakeup(bb_note *n);
static inline void bb_noteclear(bb_note *n) { atomic_store_explicit(&n->key, 0, memory_order_relaxed); }
long bb_read_small(const char *path, char *buf, size_t size);
long bb_futex(_Atomic uint32_t *addr, int op, uint32_t val, const void *ts);
long bb_futex_wait_abs(_Atomic uint32_t *addr, uint32_t val, clockid_t clock,
		       const struct timespec *abstime);
extern int (*bb_clock_gettime)(clockid_t, struct timespec *);
int64_t bb_nanotime(void);
int64_t bb_nanotime_coarse(void);
uint32_t bb_fastrand(void);
long bb_rawsyscall6(long n, long a1, long a2, long a3, long a4, long a5, long a6);
#define bb_sys(n, a, b, c) bb_rawsyscall6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define BB_ASSERT(cond) do { if (__builtin_expect(!(cond), 0)) bb_throw("assertion failed: %s (%s:%d)", #cond, __FILE__, __LINE__); } while (0)

/* ---- env.c ---- */
typedef struct bb_config {
	int32_t maxprocs;
	int32_t maxthreads;
	/* BOBBIN_CPUCLOCK: 1 counts each G's CPU time from the start, 0 never
	 * (per-thread CPU clocks count the OS thread), -1 (unset) from the
	 * first read of a per-thread CPU clock (cpuclock.c) */
	int32_t cpuclock;
} bb_config;
extern bb_config bb_cfg;
void bb_env_init(void);

#define BB_KP_AFFINITY 1u
#define BB_KP_SCHED 2u
#define BB_KAFF_MAX 1024 /* bytes of an affinity mask kept: 8192 CPUs */
void bb_adopt_kstate(bb_m *mp, bb_g *gp);
void bb_m_kstate_init(void); /* m.c: the start state new OS threads get */
bool bb_sched_is_start(int policy, int prio);
void bb_m_reset_sched(void);
void bb_m_each_tid(long nr, long which, long value);

/* ---- cpuclock.c ---- */
extern _Atomic bool bb_cpuclock_on;
void bb_cpuclock_edge(bb_m *mp, bb_g *next);
bool bb_cpuclock_enable(void);
uint64_t bb_cpuclock_read(bb_g *gp);
uint64_t bb_thread_cpu_ns(pid_t tid);
void bb_cpuclock_forkchild(bb_m *mp, bb_g *self);
struct rusage;
void bb_rusage_fill(struct rusage *ru); /* on a G, over its OS thread's RUSAGE_THREAD */
clockid_t bb_cpuclock_id(const bb_g *gp);
bb_g *bb_cpuclock_g(clockid_t clk, bool *ours);
/* at every switch on an M: a load and a branch while no clock was asked for */
static inline void bb_cpuclock_switch(bb_m *mp, bb_g *next)
{
	if (__builtin_expect(atomic_load_explicit(&bb_cpuclock_on, memory_order_relaxed), 0))
		bb_cpuclock_edge(mp, next);
}

/* ---- runq.c ---- */
void bb_runqput(bb_p *pp, bb_g *gp, bool next);
bb_g *bb_runqget(bb_p *pp, bool *inherit_time);
bb_g *bb_runqsteal(bb_p *pp, bb_p *victim, bool steal_runnext);
bool bb_runqempty(bb_p *pp);
uint32_t bb_runqlen(bb_p *pp);
void bb_globrunqput(bb_g *gp);           /* sched.lock held */
void bb_globrunqputbatch(bb_g *head, bb_g *tail, int32_t n); /* sched.lock held */
bb_g *bb_globrunqget(bb_p *pp, int32_t max); /* sched.lock held */
bb_g *bb_globrunq_take_locked(int32_t max, const bb_m *notm); /* sched.lock held */
void bb_p_init(bb_p *pp, int32_t id);

/* ---- proc.c ---- */
int bb_sched_init(void);                  /* on the main thread; makes G1 */
void bb_sema_init(void);                 /* sema.c, from bb_sched_init */
typedef struct bb_gattr {
	size_t stacksize;  /* 0: the default */
	void *stackaddr;   /* lowest address of a user stack, or NULL */
	size_t guardsize;
	bool detached;
	void **handle;     /* where to store the pthread_t before the G can run */
	uintptr_t createpc; /* the caller of pthread_create, for dumps */
	const uint64_t *sigmask; /* the mask it starts with; NULL: its creator's */
	const void *affinity;    /* a CPU mask for its own OS thread (kpending), or NULL */
	size_t affsize;
	int schedpolicy, schedprio; /* stored and reported */
	bool sched_apply;           /* and taken by its own OS thread (kpending) */
	bool c11;                   /* fn is a C11 thread's int (*)(void *) */
} bb_gattr;
bb_g *bb_newproc(void *(*fn)(void *), void *arg, const bb_gattr *attr, int *err);
bool bb_gosched(void); /* false: nothing else to run, no switch */
/* park the current G; unlockf (may be NULL) runs on g0 after the G is marked
 * waiting; returning false from it cancels the park. */
void bb_gopark(bool (*unlockf)(bb_g *, void *), void *arg, uint32_t reason);
void bb_goready(bb_g *gp);
void bb_goready_here(bb_g *gp);
void bb_goready_tail(bb_g *gp);
__attribute__((noreturn)) void bb_goexit(void *result);
bool bb_casgstatus(bb_g *gp, uint32_t from, uint32_t to);
void bb_gfree(bb_g *gp);                  /* recycle a dead, joined G */
enum { BB_TCB_READY, BB_TCB_UNSET, BB_TCB_FILLING }; /* bb_g.tcbstate */
void bb_tcb_pin(bb_g *gp); /* before another thread looks at gp's TCB or stack */
void *bb_g_tcb(bb_g *gp);  /* another G's TCB, pinned (gp->lock held), or NULL */
bb_g *bb_g_from_tcb(void *tcb);
bb_g *bb_g_at(uintptr_t th); /* the G that is pthread_t th, or NULL */
int32_t bb_nlive(void);
/* The caller is the process's only thread (a shell pipeline's cat or grep,
 * a forked worker): nobody needs its P while it waits, so a wait for I/O
 * goes into the kernel as a native thread's would, without the poller's
 * round trips. Reads every P: asked only when a call is about to wait (and
 * by sysmon). */
static inline bool bb_alone(void)
{
	return bb_nlive() == 1;
}
enum { BB_JOIN_BLOCK, BB_JOIN_TRY, BB_JOIN_TIMED };
int bb_gjoin(bb_g *gp, void **result, int mode, int64_t deadline);
int bb_gdetach(bb_g *gp);
/* join or detach gp from a thread that is not running a G (one bobbin did
 * not make, a G on a coroutine's stack): waits in the kernel */
int bb_gjoin_foreign(bb_g *gp, void **result, int mode, int64_t deadline);
int bb_gdetach_foreign(bb_g *gp);
void bb_gmain(bb_g *gp);
void bb_wakep(void);
void bb_pidleput(bb_p *pp);               /* sched.lock held */
bb_p *bb_pidleget(void);                  /* sched.lock held */
__attribute__((noreturn)) void bb_execute(bb_g *gp, bool inherit_time); /* g0 */

/* ---- syscall.c ---- */
void bb_entersyscall(void);
void bb_syscall_release_p(bb_m *mp, bb_g *gp);
void bb_exitsyscall(void);
void bb_handoffp(bb_p *pp);
extern void (*bb_g_exit_hook)(bb_g *gp);  /* shim: TSD destructors, on the G */
extern void *(*bb_g_run_hook)(bb_g *gp);  /* shim: start routine under a landing pad */
#include <sched.h>
extern cpu_set_t bb_initial_affinity;     /* M0's, restored when a locked G ends on it */
extern char bb_initial_comm[16];
extern long bb_timerslack_ns; /* the main thread's timer slack when bobbin started */
void bb_lock_os_thread(void);
void bb_unlock_os_thread(void);

/* ---- m.c ---- */
#define BB_ALLM_MAX 4096
extern bb_m *bb_allm[BB_ALLM_MAX];
extern _Atomic int32_t bb_nallm;
bb_m *bb_allocm(void);
void *bb_alloc(size_t n);            /* mem.c: zeroed; never the program's malloc */
void *bb_realloc(void *p, size_t n);
void bb_free(void *p);
void bb_mem_forkchild(void);
int bb_register_atfork(void (*prep)(void), void (*par)(void), void (*chi)(void), void *dso);
int bb_start_os_thread(void *(*fn)(void *), void *arg, size_t stacksize);
void bb_newm(bb_p *pp, bool spinning);
bb_m *bb_sysmon_m(void); /* sysmon's M, or NULL */
extern _Atomic int32_t bb_nosstarting;
void bb_kstate_begin(void);   /* on a G about to give its OS thread such state */
/* Per-thread security state (capset, prctl's keep-caps, secure bits,
 * bounding and ambient sets, no_new_privs) the process's only thread
 * changed: logged, and every OS thread of bobbin's applies the log in order
 * before it runs a G or glibc's set*id work (m.c). Returns false when the
 * log is full. */
bool bb_cred_log(long nr, long a1, long a2, long a3, const void *capdata);
extern _Atomic uint32_t bb_cred_n;
void bb_cred_catchup(bb_m *mp);
void bb_cred_save_m0(void); /* before a locked G's own change on M0 */
/* capget/capset's header (linux/capability.h's, without the header's
 * other names) */
struct bb_cap_header {
	uint32_t version;
	int pid;
};
#define BB_CAP_V1 0x19980330u /* one data struct */
#define BB_CAP_V2 0x20071026u /* two */
#define BB_CAP_V3 0x20080522u /* two */
void bb_start_queued_ms(void); /* sysmon: start the Ms bb_newm left to it */
bool bb_sysmon_runs(void);     /* sysmon's thread was started */
void bb_sysmon_kick(void);
void bb_startm_failed(bb_p *pp, bool spinning); /* proc.c: no OS thread for pp */
void bb_stopm(void);
/* the initial OS thread's M (a fork child's only M): never ends */
extern bb_m *bb_leader_m;
extern _Atomic bool bb_retiring; /* bb_go_single: Ms end at their next stopm */
/* On the only live G: end every other OS thread bobbin made (idle Ms,
 * sysmon) and run on the initial one, as a single-threaded process does
 * natively. True when the kernel lists one task when it returns. */
bool bb_go_single(void);
__attribute__((noreturn)) void bb_m_end(bb_m *mp); /* m.c: this M's OS thread ends */
void bb_sysmon_stop(void);      /* sysmon.c: its thread ends (bb_go_single) */
void bb_stoplockedm(void); /* a locked M waits until its G is handed to it with a P */
bb_p *bb_drop_pending(bb_m *mp, bool *spin);
void bb_drop_end(bb_m *mp);
bb_p *bb_pend_take(bool *spin); /* sched.lock held: a pending P, or NULL */
void bb_pend_put(bb_p *pp, bool spinning); /* sched.lock held */
void bb_drop_begin(bb_m *mp);
void bb_startm(bb_p *pp, bool spinning);
void bb_m_on_thread_start(bb_m *mp);
extern int (*bb_real_pthread_create)(void *, const void *, void *(*)(void *), void *);
#include <signal.h>
/* glibc's sigaction, for bobbin's own handlers (the exported one guards
 * the program's: shim/signal.c) */
int bb_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
bool bb_pc_in_bobbin(uintptr_t pc); /* pc is in bobbin's own code (preempt.c) */
/* the span of bobbin's own code (0, 0 until preempt.c has learned it) */
extern uintptr_t bb_self_lo, bb_self_hi;
bool bb_pc_lockable(uintptr_t pc); /* code a G must not be switched away in (preempt.c) */
void bb_acquirep(bb_p *pp);
__attribute__((noreturn)) void bb_schedule(void);

/* ---- stack.c ---- */
int bb_stackalloc(bb_g *gp, size_t size, size_t guard, bool with_tcb);
bool bb_stack_take(bb_g *gp, bb_stack_unit *u);
void bb_stack_put(bb_p *pp, const bb_stack_unit *u);
bool bb_stack_get(bb_p *pp, bb_g *gp, size_t mapsize, size_t guard);
bool bb_stack_swap(bb_p *pp, bb_g *gp);
int32_t bb_stack_trim(int64_t now); /* sysmon: stacks unmapped */
size_t bb_default_stacksize(void);
void bb_stack_signal_init(bb_m *mp);

/* ---- gtls.c ---- */
int bb_tls_init(void);                    /* 0, or -1 with a reason printed */
void *bb_tcb_alloc(void);
void *bb_tcb_alloc_below(uintptr_t top, uintptr_t *tls_lo);
void bb_tcb_free_below(void *tcb);        /* before its stack is unmapped */
size_t bb_tcb_footprint(void);
void bb_tcb_prepare(bb_g *gp, bool reused); /* set fields for this G */
void bb_tcb_on_g_start(bb_g *gp);         /* runs on the G, its TLS live */
void bb_tcb_adopt_main(bb_g *gp);
int bb_g_green_tid(const bb_g *gp);      /* a G's tid, without its TCB */
int bb_g_tid(bb_g *gp);                   /* the tid glibc sees for this G */          /* G1 keeps the initial TCB */
void bb_tcb_tls_dtors(void);
void bb_tcb_on_g_exit(bb_g *gp);          /* runs on the G before it dies */
extern long bb_off_g_in_tcb;
extern _Atomic bool bb_tsd_used;          /* set by pthread_key_create */               /* where the G pointer is kept */

/* ---- timer.c ---- */
bool bb_addtimer(bb_timer *t);          /* on the current P; false: no memory */
bool bb_deltimer(bb_timer *t);          /* true if disarmed before it fired */
int bb_runtimers(bb_p *pp, int64_t now);
int64_t bb_nexttimer(void);
enum { BB_SLEEP_NONE, BB_SLEEP_WOKE, BB_SLEEP_GOTP };
int bb_timer_sleep(bb_g **list);
bb_m *bb_timer_sleeper_take(bb_p *pp, bool spinning);
void bb_timer_kick(void);
void bb_timer_kick_taken(bb_m *mp); /* startm took the sleeper mp: wake it */
void bb_sleep_until(int64_t deadline);  /* park the current G until then */

/* ---- netpoll.c ---- */
typedef struct bb_pd bb_pd;
/* what bobbin knows of an open file description: shared by every fd that
 * dup/dup2/dup3/F_DUPFD made from the same one, as O_NONBLOCK is */
typedef struct bb_fdesc {
	_Atomic int32_t refs;
	_Atomic bool user_nonblock; /* O_NONBLOCK as the program set it */
	bool forced_nb;             /* bobbin set O_NONBLOCK for real (a socket made
				       in this process); the program sees user_nonblock */
	/* SO_RCVTIMEO/SO_SNDTIMEO in ns (0: none): the socket's, as the
	 * kernel keeps them, so every dup of it waits as long */
	_Atomic int64_t rcvtimeo, sndtimeo;
	struct bb_fdesc *next_free; /* never freed, only recycled (shim/fd.c) */
} bb_fdesc;
/* one (fd, direction) of a G's wait (netpoll.c); owned by the waiting G,
 * linked into pd->waiters under pd->lock */
typedef struct bb_pollnode {
	bb_g *g;
	uintptr_t ticket;     /* the G's wait session */
	bb_pd *pd;
	uint32_t seq;         /* pd->seq when prepared: a close changes it */
	int mode;
	bool linked;
	struct bb_pollnode *next, *prev;
} bb_pollnode;

/* per-fd state: the poller's part (pd->lock) and the shim's view of the fd */
struct bb_pd {
	bb_lock lock;
	int fd;
	uint32_t seq;        /* bumped on close: events of the old file are dropped */
	bool registered;     /* in the epoll set */
	uint64_t edge[2];    /* bb_poll_epoch of the last edge: read, write (0: none) */
	bb_pollnode *waiters[2]; /* Gs waiting to read, to write */
	/* the program's view (shim/fd.c), written by the G using the fd */
	bool known;          /* kind and desc below are valid */
	uint8_t kind;        /* BB_FD_* */
	bool nowait_ok;      /* preadv2/pwritev2 RWF_NOWAIT work on this file */
	/* the open file description's flags, shared by dups. Set and cleared
	 * under lock; read without it through bb_pd_desc: another thread may
	 * close the number meanwhile, as natively it may */
	struct bb_fdesc *_Atomic desc;
	/* the other end of a pipe or socketpair made in this process: its fd
	 * + 1 (0: none) and its seq then (bb_netpoll_kick) */
	int peerfd1;
	uint32_t peerseq;
};

/* what a number's view says of its file description: the one it shares, or,
 * when a closer on another thread has just taken it away, a description with
 * no flag set (the call then meets EBADF or the number's next file, as it
 * would natively) */
extern bb_fdesc bb_fdesc_none;
static inline bb_fdesc *bb_pd_desc(bb_pd *pd)
{
	bb_fdesc *d = atomic_load_explicit(&pd->desc, memory_order_acquire);
	return d ? d : &bb_fdesc_none;
}
#define BB_PD_UNB(pd) atomic_load_explicit(&bb_pd_desc(pd)->user_nonblock, memory_order_relaxed)
#define BB_PD_FORCED(pd) (bb_pd_desc(pd)->forced_nb)
/* a known view of a file bobbin keeps non-blocking while the program sees
 * it blocking: a call on it must wait where the kernel answers EAGAIN */
static inline bool bb_pd_waits_for_program(bb_pd *pd)
{
	return pd && pd->known && BB_PD_FORCED(pd) && !BB_PD_UNB(pd);
}
enum { BB_FD_OTHER, BB_FD_SOCKET, BB_FD_PIPE, BB_FD_POLLABLE, BB_FD_FILE };
/* the signals of every mask the program gave signalfd (shim/signal.c):
 * while it is not 0, a signalfd is never watched by the poller, whose
 * thread's pending signals it would show instead of the waiter's */
extern _Atomic uint64_t bb_sigfd_sigs;
extern int bb_epfd, bb_breakfd;
void bb_netpoll_kick(int fd, uint32_t seq, int mode);
void bb_netpoll_link_peers(int fd0, int fd1);
extern _Atomic int32_t bb_netpoll_waiters;
extern _Atomic int64_t bb_lastpoll;
bool bb_netpoll_inited(void);
bb_pd *bb_pd_get(int fd);
bb_pd *bb_pd_peek(int fd);
int bb_netpoll_wait(int fd, int mode, int64_t deadline);
void bb_netpoll_look(void); /* before trying a call that may then wait on readiness */
int bb_netpoll_wait_many(const int *fds, const short *events, int n, int64_t deadline);
void bb_netpoll_close(int fd);
void bb_netpoll_break(void);
bb_g *bb_netpoll(int64_t delay, int *count);
bb_g *bb_netpoll_masked(int64_t delay, int *count, const uint64_t *mask);
void bb_injectglist(bb_g *list);

/* ---- preempt.c ---- */
typedef struct bb_stats {
	_Atomic uint64_t preempt_requested; /* sysmon asked a G to yield */
	_Atomic uint64_t preempt_stalled;   /* ... because it sat in the kernel unseen */
	_Atomic uint64_t preempt_signals;   /* ... and sent the signal */
	_Atomic uint64_t preempt_async;     /* the handler found a safe point */
	_Atomic uint64_t preempt_refused;   /* the handler found an unsafe one */
	_Atomic uint64_t preempt_coop;      /* yielded at an interposed call */
	_Atomic uint64_t signals_async;     /* pthread_kill handlers run at once on a running G */
	_Atomic uint64_t handoffs;          /* Ps retaken from blocked system calls */
	_Atomic uint64_t stuck_detached;    /* Ps taken from Ms stuck in unseen calls */
	_Atomic uint64_t calls_restarted;   /* unseen calls the detaching signal cut short, run again */
	_Atomic uint64_t steals;            /* successful steals from another P */
	_Atomic uint64_t netpoll_ready;     /* Gs made ready by the network poller */
	_Atomic uint64_t timer_fires;       /* timers run */
	_Atomic uint64_t timer_rescues;     /* overdue timers sysmon started an M for */
} bb_stats;
extern bb_stats bb_stats_;
extern bool bb_stats_on; /* BOBBIN_STATS: keep the counts that cost a shared line */
extern bool bb_async_preempt;
/* bobbin's preemption signal: SIGURG, or SIGWINCH once the program takes
 * SIGURG for itself where bobbin cannot stand in for the kernel (a
 * signalfd of it: PostgreSQL's latch), bb_presig_move */
extern _Atomic int bb_presig_;
static inline int bb_presig(void)
{
	return atomic_load_explicit(&bb_presig_, memory_order_relaxed);
}
bool bb_presig_move(void); /* true: moved now (the caller hands SIGURG to the program) */
void bb_presig_resync(bb_m *mp); /* before mp's first mask change after a move (owner) */
/* bobbin's own preemption signal to OS thread tid, marked as bobbin's (bb_urg_ours):
 * a SIGURG the program or another process sends goes to the program's
 * action, which bobbin keeps for it (shim/signal.c) */
void bb_urg_send(pid_t tid);
bool bb_urg_ours(const siginfo_t *si);
extern int64_t bb_timeslice_ns;
extern uint64_t bb_xsave_size;
void bb_preempt_init(void);
void bb_preempt_after_dlopen(const void *ns_gadget);
void bb_preemptone(bb_p *pp);
void bb_check_stuck(bb_p *pp);
char bb_thread_state(pid_t tid);
int bb_kernel_call(pid_t tid, struct bb_kcall *kc);
void bb_gopreempt(void);                  /* yield for preemption, on the G */
void bb_sysmon_ensure(void);
bool bb_defer_ready(bb_g *gp);        /* sysmon.c: from a handler, bb_m_in_handler */
bool bb_defer_sema_wake(void *addr);
void bb_sema_wake_nonzero(void); /* sema.c: sysmon, after bb_defer_sema_wake overflowed */
/* sysmon.c: a process signal a handler landed with outside any G's code,
 * kept for sysmon to hand to a G that takes it (false: not kept); the G
 * takes it back with its siginfo */
bool bb_stash_signal(int sig, const siginfo_t *si);
/* gp lets bit in now (in a masked wait: as that wait does) */
bool bb_g_takes(bb_g *gp, uint64_t bit);
bool bb_take_stashed(int sig, siginfo_t *si);
void bb_fork_init(void);                  /* fork.c: register the fork handlers */
/* an interposed call honours a pending preemption request */
/* The signal handler detached this M's P while the G was stuck in the
 * kernel in code bobbin does not see (preempt.c); the G may have come back
 * into bobbin's own code since, by a path that did not pass bb_on_g: take a
 * P again before touching the scheduler. */
static inline void bb_reattach(void)
{
	bb_m *mp = bb_getm();
	if (__builtin_expect(mp->detached, 0)) {
		mp->detached = false;
		bb_exitsyscall();
	}
}

/* the handler frame the trampoline marked on mp (shim/signal.c) is live
 * below sp: sp is below it on the same stack (within 256 KiB), and its
 * return-address slot still holds the kernel's. A stale mark (the handler
 * left by longjmp) fails the test but by rare chance: then a call only
 * runs natively, or a wake-up takes the slower way through sysmon */
static inline bool bb_sigframe_live(const bb_m *mp, uintptr_t sp)
{
	uintptr_t fp = mp->sigframe_fp;
	return fp != 0 && sp < fp && fp - sp < 256 * 1024 &&
	       *(const uintptr_t *)(fp + 8) == mp->sigframe_ra;
}

/* sp (on gp's stack) is under a handler that runs natively over bobbin's
 * code on that same stack. Only such a frame is read: one on a G stack
 * since freed never is */
static inline bool bb_sig_native_live(const bb_m *mp, const bb_g *gp, uintptr_t sp)
{
	uintptr_t fp = mp->sigframe_fp;
	return fp >= gp->stack_lo && fp + 16 <= gp->stack_hi && bb_sigframe_live(mp, sp);
}

/* the caller runs inside a marked handler of mp's: its wake-ups go
 * through sysmon */
static inline __attribute__((always_inline)) bool bb_m_in_handler(const bb_m *mp)
{
	if (__builtin_expect(mp->sigframe_fp == 0, 1))
		return false;
	return bb_sigframe_live(mp, (uintptr_t)__builtin_frame_address(0));
}

/* Bobbin code running on a G may hold the G's M and P in locals across a
 * call into libc (calloc, memset, mmap): the signal handler must then not
 * detach the P or run a program handler (preempt.c), though the pc it
 * interrupted is libc's. The outermost bobbin frame on the G's stack marks
 * the G when an interposed call starts (BB_RT_MARK): while that frame is
 * live, the interrupted sp is below it and its return-address slot still
 * holds the address it was called from. A stale mark (the frame returned)
 * fails one of the two tests, or by rare chance passes them and only keeps
 * the G from being detached that once. Only frames on the G's own stack
 * count: a handler on an alternate stack neither marks nor reads one. */
static inline bool bb_rt_live(const bb_g *gp, uintptr_t sp)
{
	uintptr_t fp = gp->rt_fp;
	return fp != 0 && sp < fp && *(const uintptr_t *)(fp + 8) == gp->rt_ra;
}

/* Returns whether the entry is nested: bobbin code is already on the
 * stack below, because the program's code it called (a pthread_once
 * routine, a fork handler) or a signal handler that interrupted it calls
 * in again. A nested entry leaves out what may switch the G or touch the
 * run queues by the way (a preemption point, a peer wake-up, delivering
 * pending signals): the code below may be in the middle of such work. On
 * another stack than the G's own (a sigaltstack, a coroutine's) there is
 * nothing to compare with: not nested. */
static inline __attribute__((always_inline)) bool bb_rt_mark(bb_g *gp, uintptr_t fp, uintptr_t ra)
{
	bool nested = false;
	if (fp < gp->stack_lo || fp + 16 > gp->stack_hi)
		; /* another stack: no frame of ours to compare with */
	else if (!(nested = bb_rt_live(gp, fp))) {
		gp->rt_fp = fp;
		gp->rt_ra = ra;
	}
	gp->rt_nested = nested;
	return nested;
}

/* fp (a frame of bobbin's code) is below the live mark through bobbin's
 * frames alone: a helper of the call that made the mark, not a new entry
 * from code of the program's (a signal handler's, a callback's) between.
 * The frame pointers are followed only while each frame's return address
 * is bobbin's (compiled with frame pointers), up to the mark. */
static inline bool bb_rt_inner(const bb_g *gp, uintptr_t fp)
{
	uintptr_t top = gp->rt_fp;
	if (top == 0 || fp >= top)
		return false;
	for (int i = 0; i < 16; i++) {
		const uintptr_t *f = (const uintptr_t *)fp;
		if (!(f[1] >= bb_self_lo && f[1] < bb_self_hi))
			return false;
		uintptr_t up = f[0];
		if (up <= fp || up > top)
			return false;
		if (up == top)
			return ((const uintptr_t *)top)[1] == gp->rt_ra;
		fp = up;
	}
	return false;
}

/* in the function that is bobbin's entry (a macro: the frame is the caller's) */
#define BB_RT_MARK(gp) \
	bb_rt_mark((gp), (uintptr_t)__builtin_frame_address(0), (uintptr_t)__builtin_return_address(0))

/* before a call into glibc that may wait in the kernel unseen and should
 * let the P go (flockfile): drop the mark if this frame made it */
#define BB_RT_UNMARK(gp)                                                   \
	do {                                                               \
		bb_g *ug_ = (gp);                                          \
		if (ug_->rt_fp == (uintptr_t)__builtin_frame_address(0)) \
			ug_->rt_fp = 0;                                    \
	} while (0)

/* A call of the program's own code from bobbin's (a thread's destructors,
 * a pthread_once routine), in the function whose frame marked the G: the
 * code runs as the thread's own, no bobbin frame marked under it, so a
 * wait it makes with its own system call lets the P go (sysmon detaches
 * no G asleep under bobbin's frames: libgomp's destructor waited so at P=1
 * for a worker that never ran); after it the P is taken back and the frame
 * marks the G again. */
#define BB_PROGRAM_CODE(call)                    \
	do {                                     \
		BB_RT_UNMARK(bb_getm()->curg);   \
		call;                            \
		bb_reattach();                   \
		BB_RT_MARK(bb_getm()->curg);     \
	} while (0)

static inline void bb_preempt_point(void)
{
	bb_reattach();
	bb_g *gp = bb_getm()->curg;
	if (__builtin_expect(atomic_load_explicit(&gp->preempt, memory_order_relaxed), 0) &&
	    gp->libclocks == 0 && !gp->rt_nested) {
		atomic_fetch_add_explicit(&bb_stats_.preempt_coop, 1, memory_order_relaxed);
		bb_gopreempt();
	}
}

/* ---- debug.c ---- */
typedef struct bb_debug_cfg {
	int schedtrace_ms;   /* 0: off */
	int scheddetail;
	int asyncpreemptoff;
} bb_debug_cfg;
extern bb_debug_cfg bb_debug;
void bb_debug_init(void);
void bb_debug_signals_init(void);
void bb_allgs_add(bb_g *gp);
bb_g *bb_g_by_tid(int tid);
bb_g *bb_g_find(bool (*match)(const bb_g *, uint64_t), uint64_t key);
void bb_allgs_each(void (*fn)(bb_g *, void *), void *arg);
void bb_tls_after_dlopen(const void *ns_gadget);
/* fn(a0, a1, a2) seeing gadget (a `ret` byte) as its return address (asm/) */
long bb_call_as(const void *a0, const void *a1, const void *a2, const void *fn,
		const void *gadget);
struct dl_phdr_info;
/* dl_iterate_phdr over the caller's namespace (ns_gadget NULL) or over the
 * namespace of the object holding ns_gadget */
void bb_dl_iterate(const void *ns_gadget, int (*cb)(struct dl_phdr_info *, size_t, void *),
		   void *data);
void bb_schedtrace(int64_t since_start_ms);
void bb_dump_all(const char *why);
bool bb_deadlock_suspect(void);
__attribute__((noreturn)) void bb_deadlock_report(void);

/* ---- interrupting a parked G (cancellation) ---- */
enum { BB_WAIT_NONE, BB_WAIT_SEMA, BB_WAIT_SLEEP, BB_WAIT_NETPOLL, BB_WAIT_JOIN };
/* why bb_interrupt wakes a G (and which its sema wait accepts, g->wakeon):
 * pthread_cancel (condvar and semaphore waits are cancellation points), or
 * pthread_kill (every lock, barrier, condvar and semaphore wait runs the
 * handler, then waits on or fails with EINTR as the caller decides) */
enum { BB_WAKE_CANCEL = 1, BB_WAKE_SIGNAL = 2 };
void bb_interrupt(bb_g *gp, int why); /* wake gp from an interruptible wait */
/* An interrupt sent before the waiter published its waitkind finds nothing
 * to wake; so, once parked, the waiter looks for one itself (park_m, in
 * proc.c) and makes the same bb_interrupt. Both sides are seq_cst: the
 * interrupter sets its flag, then reads waitkind; the waiter stores
 * waitkind, then reads the flags. */
bool bb_sema_interrupt(bb_g *gp);
bool bb_netpoll_interrupt(bb_g *gp);
bool bb_join_interrupt(bb_g *gp);

/* ---- trace.c: BOBBIN_TRACE ---- */
extern bool bb_trace_on;
void bb_trace_init(void);
void bb_trace_slice_start(bb_p *pp, bb_g *gp, bb_m *mp);
void bb_trace_slice_end(bb_p *pp);
void bb_trace_steal(bb_p *pp, bb_p *victim, int n);
void bb_trace_ready(bb_p *pp, bb_g *waker, bb_g *woken);
void bb_trace_syscall(bb_m *mp, bb_g *gp, int64_t start);

/* ---- signal masks (proc.c) ----
 * Each G has its own mask; its M's kernel mask follows it lazily (one
 * compare per switch, a system call only when two Gs differ). An idle M
 * takes the main thread's mask, so a process-directed signal goes where it
 * would natively: blocked by all (a sigwait thread's pattern), or delivered. */
/* The G's own alternate signal stack on its M, and bobbin's back when it
 * leaves (stack.c): an M never keeps the alternate stack of a G it does
 * not run, which that G may free meanwhile (a Rust thread's, at its exit). */
struct sigaction;
void bb_segv_show(struct sigaction *old); /* stack.c */
void bb_alt_install(bb_m *mp, void *sp, size_t size, int flags);
/* gp installs the alternate stack sp: whether no other live thread has it
 * (threads that share one, as varnish's workers do, get their Ms' own) */
bool bb_alt_claim(bb_g *gp, void *sp);
static inline void bb_alt_enter(bb_m *mp, bb_g *gp)
{
	if (__builtin_expect(gp->alt_kern != mp->alt_cur, 0) &&
	    (gp->alt_kern != NULL || mp->alt_cur != mp->altstack))
		bb_alt_install(mp, gp->alt_kern, gp->alt_size, gp->alt_flags);
}
static inline void bb_alt_leave(bb_m *mp)
{
	if (__builtin_expect(mp->alt_cur != mp->altstack, 0))
		bb_alt_install(mp, NULL, 0, 0);
}

/* gp leaves mp for fn on g0 (bb_mcall): its CPU clock stops, and its
 * alternate stack leaves the kernel first, before another M may take gp
 * and install it too (bb_alt_claim) */
static inline void bb_to_g0(bb_m *mp, bb_g *gp, void (*fn)(bb_g *))
{
	bb_cpuclock_switch(mp, NULL);
	bb_alt_leave(mp);
	bb_mcall(&gp->ctx, fn, gp, mp->g0sp, (uint64_t)(uintptr_t)mp->tcb);
}
void bb_apply_sigmask(bb_m *mp, uint64_t mask);
void bb_set_sigmask(bb_m *mp, uint64_t mask); /* exactly: bobbin's SIGURG too */
void bb_deliver_signals(void);               /* on the G: run its pending handlers */
extern void (*bb_sigpoke_hook)(void);        /* bb_asyncpreempt2 calls it (ASYNC_SIGNAL) */
/* the SIGURG handler found gp running on a stack of the program's own with
 * signals pending for it that its OS thread does not block (kmask): they go
 * to the kernel on this OS thread (shim/signal.c) */
extern void (*bb_offstack_sig_hook)(bb_g *gp, uint64_t kmask);
extern void (*bb_urg_program_hook)(int, siginfo_t *, void *); /* a SIGURG not bobbin's */
/* SIGURG's handler on mp, whose G gp sleeps in a system call: the kept
 * signals resend names are gp's (shim/signal.c) */
extern void (*bb_resend_hook)(bb_m *mp, bb_g *gp, uint64_t resend, void *uc);
/* the signals of set the kernel queued for this OS thread alone, taken
 * back for gp (NULL: dropped); shim/signal.c, for proc.c's
 * rescue_own_signals */
extern void (*bb_reclaim_hook)(bb_g *gp, uint64_t set);
/* shim: act on a pending cancellation (glibc's testcancel); called on a G
 * interrupted at a safe point when its cancellation is due asynchronously */
extern void (*bb_async_cancel_hook)(void);
/* struct pthread.cancelhandling (checked at start-up, gtls.c): bits
 * state 1, type 2, canceled 8, exiting 16, terminated 32 */
#define BB_OFF_CANCELHANDLING 776
static inline int bb_cancelhandling(const bb_g *gp)
{
	return atomic_load((_Atomic int *)((char *)gp->tcb + BB_OFF_CANCELHANDLING));
}
/* cancelled, enabled, not already exiting: a cancellation point acts */
static inline bool bb_cancel_due(const bb_g *gp)
{
	return (bb_cancelhandling(gp) & (1 | 8 | 16 | 32)) == 8;
}
/* the same, and asynchronous: acts at any safe point */
static inline bool bb_async_cancel_due(const bb_g *gp)
{
	return (bb_cancelhandling(gp) & (1 | 2 | 8 | 16 | 32)) == (2 | 8);
}
void bb_idle_sigmask(bb_m *mp);
#define BB_SIGBIT(s) (1ull << ((s) - 1)) /* a signal in a kernel mask */
/* glibc's SIGCANCEL and SIGSETXID: a program never blocks them */
#define BB_GLIBC_SIGNALS (BB_SIGBIT(32) | BB_SIGBIT(33))
/* all but the faults and glibc's (SIGURG, bobbin's, is let in by
 * bb_apply_sigmask) */
#define BB_IDLE_MASK                                                                    \
	(~(BB_SIGBIT(SIGSEGV) | BB_SIGBIT(SIGBUS) | BB_SIGBIT(SIGFPE) | BB_SIGBIT(SIGILL) | \
	   BB_SIGBIT(SIGTRAP) | BB_SIGBIT(SIGSYS) | BB_GLIBC_SIGNALS))
/* ---- process signals (sysmon.c) ----
 * An M with no G blocks every signal the program can (bb_idle_sigmask), so
 * the kernel gives a process signal only to an M running a G that takes
 * it, or keeps it pending. sysmon watches the pending ones (a signalfd it
 * polls, never reads) and hands each to a G that does not block it, the
 * main thread first as the kernel does: the G wakes from its wait and
 * dequeues the signal itself (bb_deliver_signals), so its handler runs on
 * that thread with the real siginfo, and the wait ends with EINTR as the
 * handler's SA_RESTART decides. A signal no G takes stays pending. */
extern int bb_sigfd;
void bb_sigwatch_add(uint64_t sigs); /* watch these again (a G takes them now) */
void bb_sigwatch_moved(void);       /* bobbin's signal left SIGURG (preempt.c) */
bool bb_own_fd(int fd);              /* bobbin's epoll, wake-up and signal fds */
int bb_pd_limit(void);               /* netpoll.c: fds at or above have no descriptor */
#define BB_OWN_FDS_MAX 4
int bb_own_fds(int *out);            /* bobbin's own fds, ascending */
int bb_fd_out_of_way(int fd);        /* util.c: a new own fd, moved above the program's */
extern void (*bb_fork_prepare_hook)(void); /* fork.c: run in the parent before a fork */
void bb_resync_sigmask(bb_m *mp);
extern bb_g *bb_main_g;

/* ---- sema.c: address-keyed wait queues ---- */
/* Park the current G on addr if validate(addr, varg) holds under the queue
 * lock. deadline: monotonic ns, 0 = none. after(after_arg) runs on g0 once the
 * G is queued and the queue unlocked. Returns 0 if validate said no, 1 when
 * woken, -1 when the deadline passed while parked, -2 if it had already
 * passed (validate was not called), -3 if bb_interrupt woke it. */
int bb_sema_park(void *addr, bool (*validate)(void *, void *), void *varg, uint32_t reason,
		 int64_t deadline, void (*after)(void *), void *after_arg);
int bb_sema_wake(void *addr, int n); /* wake up to n waiters (n<0: all) */
bool bb_sema_wake_handoff(void *addr); /* wake one, setting its g->handoff */
bool bb_sema_has_waiters(void *addr);

#endif
