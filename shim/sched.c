/*
 * sched.c — sched_yield: yield the G, never the M (pthread_yield: pthread_yield.c).
 */
#include "shim.h"

BB_EXPORT int sched_yield(void)
{
	if (!bb_on_g())
		return REAL(sched_yield)();
	bb_gosched();
	return 0;
}
