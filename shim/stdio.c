/*
 * stdio.c — flockfile, ftrylockfile, funlockfile: glibc's FILE lock is an
 * internal lock waited on with a kernel futex bobbin cannot see. While a G
 * holds one it is never switched away (runtime/proc.c, park_pinned), so the
 * Gs that wait for the lock in the kernel wait only for a running G.
 * Also dprintf and vdprintf, which write through glibc's internal write.
 */
#include "fdtab.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

/* dprintf and vdprintf write through glibc's internal write, which bobbin
 * does not see: on a socket bobbin keeps non-blocking for real a full send
 * buffer failed the call with EAGAIN after part of the text. The text is
 * formatted here and goes out with bobbin's write, which sends it whole. */
BB_EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
	static int (*real)(int, const char *, va_list);
	if (real == NULL)
		real = (int (*)(int, const char *, va_list))dlsym(RTLD_NEXT, "vdprintf");
	if (!bb_on_g() && !bb_fd_forced_off_g(fd))
		return real(fd, fmt, ap);
	char *text;
	int n = vasprintf(&text, fmt, ap);
	if (n < 0)
		return -1;
	for (int off = 0; off < n;) {
		ssize_t w = write(fd, text + off, (size_t)(n - off));
		if (w < 0) { /* glibc's stream stops at the first error too */
			int e = errno;
			free(text);
			errno = e;
			return -1;
		}
		off += (int)w;
	}
	free(text);
	return n;
}

BB_EXPORT int dprintf(int fd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vdprintf(fd, fmt, ap);
	va_end(ap);
	return n;
}
