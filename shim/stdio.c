/*
 * stdio.c — flockfile, ftrylockfile, funlockfile: glibc's FILE lock is an
 * internal lock waited on with a kernel futex bobbin cannot see. While a G
 * holds one it is never switched away (runtime/proc.c, park_pinned), so the
 * Gs that wait for the lock in the kernel wait only for a running G.
 */
#include "shim.h"

#include <stdio.h>

BB_EXPORT void flockfile(FILE *f)
{
	if (bb_on_g()) {
		bb_g *gp = bb_getg();
		gp->libclocks++; /* before: the lock may be contended */
		BB_RT_UNMARK(gp); /* a wait in the kernel here may let the P go */
	}
	REAL(flockfile)(f);
}

BB_EXPORT int ftrylockfile(FILE *f)
{
	int r = REAL(ftrylockfile)(f);
	if (r == 0 && bb_on_g())
		bb_getg()->libclocks++;
	return r;
}

BB_EXPORT void funlockfile(FILE *f)
{
	REAL(funlockfile)(f);
	if (bb_on_g()) {
		bb_g *gp = bb_getg();
		if (gp->libclocks > 0)
			gp->libclocks--;
	}
}
