/*
 * sched.c — sched_yield: yield the G (pthread_yield: pthread_yield.c). The
 * process's only thread yields its OS thread too, as natively: it has no
 * other thread to let run, but it lets the other processes on its CPU run
 * (a client that yields so that its server, another process, gets the CPU).
 */
#include "shim.h"

BB_EXPORT int sched_yield(void)
{
	if (!bb_on_g())
		return REAL(sched_yield)();
	if (!bb_gosched() && bb_alone())
		return REAL(sched_yield)();
	return 0;
}
