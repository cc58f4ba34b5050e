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
	if (bb_sched_init() != 0) {
		bb_printf("bobbin: out of memory at start-up; running natively\n");
		return;
	}
	bb_active = true;
}
