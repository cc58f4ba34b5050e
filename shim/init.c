/*
 * init.c — start-up: resolve the real functions, check that this glibc is
 * one whose internals bobbin knows, then turn the running main thread into
 * G1 on M0. On any doubt bobbin steps aside: one line on stderr, and every
 * interposed call goes straight to libc (the program runs natively).
 */
#include "shim.h"

#include <stdlib.h>
#include <sys/auxv.h>

#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1 << 1)
#endif

extern char __libc_single_threaded;
void bb_cancel_init(void);
void *bb_run_with_landing_pad(bb_g *gp);

/* BOBBIN_STATS=1: a short table on stderr at exit */
static void print_stats(void)
{
	bb_stats *st = &bb_stats_;
	bb_printf("bobbin stats:\n"
		  "  thread ids handed out  %lld\n"
		  "  peak live threads      %d\n"
		  "  OS threads (Ms) made   %d\n"
		  "  preemptions requested  %llu\n"
		  "  preempt signals sent   %llu\n"
		  "  preempted at signal    %llu\n"
		  "  refused (unsafe point) %llu\n"
		  "  preempted at a call    %llu\n"
		  "  Ps retaken (syscalls)  %llu\n"
		  "  Ps taken from stuck Ms %llu\n",
		  (long long)atomic_load(&bb_sched_.goidgen) - 1, atomic_load(&bb_sched_.nthreadsmax),
		  atomic_load(&bb_sched_.mcount),
		  (unsigned long long)atomic_load(&st->preempt_requested),
		  (unsigned long long)atomic_load(&st->preempt_signals),
		  (unsigned long long)atomic_load(&st->preempt_async),
		  (unsigned long long)atomic_load(&st->preempt_refused),
		  (unsigned long long)atomic_load(&st->preempt_coop),
		  (unsigned long long)atomic_load(&st->handoffs),
		  (unsigned long long)atomic_load(&st->stuck_detached));
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
	pthread_sigmask(SIG_SETMASK, NULL, &bb_initial_sigmask);
	bb_g_exit_hook = bb_tsd_run_destructors;
	bb_cancel_init();
	bb_g_run_hook = bb_run_with_landing_pad;
	if (bb_sched_init() != 0) {
		bb_printf("bobbin: out of memory at start-up; running natively\n");
		return;
	}
	bb_active = true;
	const char *stats = getenv("BOBBIN_STATS");
	if (stats && *stats && *stats != '0')
		atexit(print_stats);
}
