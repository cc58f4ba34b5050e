/*
 * rt_start.h — start the whole runtime inside a Criterion test process, as
 * shim/init.c does under LD_PRELOAD: afterwards the calling thread is G1 on
 * M0 and bb_newproc/bb_gjoin/bb_gosched/bb_gopark work.
 *
 * Criterion forks a process per test, so each test starts a fresh runtime.
 * Assert only on G1 (the test's own stack): a failing cr_assert longjmps to
 * the test's frame, which must be on the stack it runs on. Gs record what
 * they saw; G1 checks it after joining them.
 */
#ifndef BB_TEST_RT_START_H
#define BB_TEST_RT_START_H

#include <criterion/criterion.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "runtime.h"

/* bb_tls_init with its stderr captured, so a refusal fails the test with
 * the runtime's own reason */
static inline void rt_tls_init_or_fail(void)
{
	char why[1024] = "";
	FILE *f = tmpfile();
	int saved = dup(2);
	cr_assert(f != NULL && saved >= 0);
	dup2(fileno(f), 2);
	int rc = bb_tls_init();
	dup2(saved, 2);
	close(saved);
	rewind(f);
	size_t n = fread(why, 1, sizeof why - 1, f);
	why[n] = '\0';
	fclose(f);
	if (n > 0)
		fputs(why, stderr);
	cr_assert_eq(rc, 0, "bb_tls_init refused to run: %s", why[0] ? why : "(no reason printed)");
}

/* maxprocs: BOBBIN_MAXPROCS, or 0 for the default (CPUs in the mask) */
static inline void rt_start(int maxprocs)
{
	if (maxprocs > 0) {
		char buf[16];
		snprintf(buf, sizeof buf, "%d", maxprocs);
		setenv("BOBBIN_MAXPROCS", buf, 1);
	} else {
		unsetenv("BOBBIN_MAXPROCS");
	}
	bb_have_fsgsbase = (getauxval(AT_HWCAP2) & 2) != 0;
	bb_real_pthread_create =
		(int (*)(void *, const void *, void *(*)(void *), void *))pthread_create;
	bb_env_init();
	if (maxprocs > 0)
		cr_assert_eq(bb_cfg.maxprocs, maxprocs);
	rt_tls_init_or_fail();
	cr_assert_eq(bb_sched_init(), 0, "bb_sched_init failed");
	bb_active = true;
	bb_g *self = bb_getg();
	cr_assert_not_null(self, "the test thread is not a G after bb_sched_init");
	cr_assert(self->is_main);
}

/* As pthread_create reaches it through bb_on_g(): the P given back if
 * sysmon took it while we were stuck, and the G marked as running bobbin
 * code, so that the preemption signal does not take the P away in the
 * middle of bb_newproc's calls into libc (mmap, malloc) */
static inline bb_g *rt_go_sized(void *(*fn)(void *), void *arg, size_t stacksize, size_t guard)
{
	bb_reattach();
	bb_g *self = bb_getg();
	BB_RT_MARK(self);
	bb_gattr attr = {.stacksize = stacksize, .stackaddr = NULL, .guardsize = guard};
	int err = 0;
	bb_g *gp = bb_newproc(fn, arg, &attr, &err);
	BB_RT_UNMARK(self);
	cr_assert_not_null(gp, "bb_newproc failed: %s", strerror(err));
	return gp;
}

/* a G with the default stack and guard */
static inline bb_g *rt_go(void *(*fn)(void *), void *arg)
{
	return rt_go_sized(fn, arg, 0, 4096);
}

static inline void *rt_join(bb_g *gp)
{
	void *res = (void *)-1;
	int err = bb_gjoin(gp, &res, BB_JOIN_BLOCK, 0);
	cr_assert_eq(err, 0, "bb_gjoin: %s", strerror(err));
	return res;
}

/* Yield until gp is in status st; counts yields, never time. With one P
 * the G only runs while we yield, so this is exact. */
static inline void rt_wait_status(bb_g *gp, uint32_t st)
{
	long i;
	for (i = 0; i < 10 * 1000 * 1000; i++) {
		if (atomic_load(&gp->status) == st)
			return;
		bb_gosched();
	}
	cr_assert_fail("G%llu never reached status %u (it is %u)", (unsigned long long)gp->goid,
		       st, atomic_load(&gp->status));
}

#endif
