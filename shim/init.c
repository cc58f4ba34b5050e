/*
 * init.c — start-up: resolve the real functions, check that this glibc is
 * one whose internals bobbin knows, then turn the running main thread into
 * G1 on M0. On any doubt bobbin steps aside: one line on stderr, and every
 * interposed call goes straight to libc (the program runs natively).
 */
#include "shim.h"
#include "fdtab.h"

#include <stdlib.h>
#include <sys/auxv.h>

#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1 << 1)
#endif

extern char __libc_single_threaded;
void bb_cancel_init(void);
void bb_thread_defaults_init(void);
void bb_identity_init(void);
void bb_signal_init(void);
void bb_signal_guard_existing(void);
void *bb_run_with_landing_pad(bb_g *gp);

/* BOBBIN_STATS=1: a short table on stderr at exit */
static void print_stats(void)
{
	static const char *const reasons[] = {"other", "join", "once", "sema/futex", "sleep",
					      "yield", "mutex", "cond", "I/O"};
	bb_stats *st = &bb_stats_;
	uint64_t switches = 0, syscalls = 0, created = 0, parks[16] = {0};
	for (int32_t i = 0; i < bb_gomaxprocs; i++) {
		bb_p *pp = bb_allp[i];
		switches += atomic_load(&pp->switchtick);
		syscalls += pp->nsyscalls;
		created += pp->ncreated;
		for (int k = 0; k < 16; k++)
			parks[k] += pp->parks[k];
	}
	bb_printf("bobbin stats (BOBBIN_MAXPROCS=%d):\n"
		  "  threads created          %lld\n"
		  "  peak live threads        %d\n"
		  "  peak OS threads          %d (Ms, sysmon included)\n"
		  "  context switches         %llu\n"
		  "  steals                   %llu\n"
		  "  system calls (handoff-able) %llu\n"
		  "  Ps retaken (syscalls)    %llu\n"
		  "  Ps taken from stuck Ms   %llu\n"
		  "  their calls restarted    %llu (cut short by the signal that took the P)\n"
		  "  netpoll wake-ups         %llu\n"
		  "  timer fires              %llu\n"
		  "  overdue timers rescued   %llu (by sysmon: a lost timer sleeper)\n"
		  "  preemptions requested    %llu\n"
		  "  of them, stalled in kernel %llu (a system call bobbin did not see)\n"
		  "  preempt signals sent     %llu\n"
		  "  preempted at signal      %llu\n"
		  "  refused (unsafe point)   %llu\n"
		  "  preempted at a call      %llu\n"
		  "  signals to running threads %llu\n",
		  bb_gomaxprocs, (long long)created,
		  atomic_load(&bb_sched_.nthreadsmax), atomic_load(&bb_sched_.mpeak),
		  (unsigned long long)switches, (unsigned long long)atomic_load(&st->steals),
		  (unsigned long long)syscalls,
		  (unsigned long long)atomic_load(&st->handoffs),
		  (unsigned long long)atomic_load(&st->stuck_detached),
		  (unsigned long long)atomic_load(&st->calls_restarted),
		  (unsigned long long)atomic_load(&st->netpoll_ready),
		  (unsigned long long)atomic_load(&st->timer_fires),
		  (unsigned long long)atomic_load(&st->timer_rescues),
		  (unsigned long long)atomic_load(&st->preempt_requested),
		  (unsigned long long)atomic_load(&st->preempt_stalled),
		  (unsigned long long)atomic_load(&st->preempt_signals),
		  (unsigned long long)atomic_load(&st->preempt_async),
		  (unsigned long long)atomic_load(&st->preempt_refused),
		  (unsigned long long)atomic_load(&st->preempt_coop),
		  (unsigned long long)atomic_load(&st->signals_async));
	bb_printf("  parks by reason:");
	for (unsigned i = 0; i < sizeof reasons / sizeof *reasons; i++) {
		uint64_t n = parks[i];
		if (n)
			bb_printf(" %s=%llu", reasons[i], (unsigned long long)n);
	}
	bb_printf("\n");
}

__attribute__((constructor(102))) static void bobbin_init(void)
{
	const char *off = getenv("BOBBIN_DISABLE");
	if (off && *off && *off != '0')
		return;
	bb_have_fsgsbase = (getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE) != 0;
	if (bb_real_init() != 0)
		return;
	if (!__libc_single_threaded) {
		bb_printf("bobbin: threads were started before bobbin loaded; running natively\n");
		return;
	}
	bb_env_init();
	if (bb_tls_init() != 0)
		return;
	bb_g_exit_hook = bb_tsd_run_destructors;
	bb_cancel_init();
	bb_thread_defaults_init();
	bb_identity_init();
	bb_signal_init();
	bb_g_run_hook = bb_run_with_landing_pad;
	bb_fork_prepare_hook = bb_fd_unforce_inheritable;
	if (bb_sched_init() != 0) {
		bb_printf("bobbin: out of memory at start-up; running natively\n");
		return;
	}
	bb_active = true;
	bb_signal_guard_existing();
	const char *stats = getenv("BOBBIN_STATS");
	if (stats && *stats && *stats != '0') {
		bb_stats_on = true;
		atexit(print_stats);
	}
}
