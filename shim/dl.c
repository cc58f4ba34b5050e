/*
 * dl.c — dlopen, so that a module with initial-exec TLS loaded while green
 * threads exist gets its initial values in their blocks too (gtls.c).
 *
 * glibc's dlopen looks at its own return address to find the calling
 * object: its RUNPATH and $ORIGIN guide the search, its namespace is used.
 * Called from here it would see libbobbin, so the real dlopen is entered
 * through bb_call_as (asm/) with a return address inside the caller's own
 * object: a `ret` byte near the call site, which comes back here.
 */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>

void *bb_call_as(const void *a0, long a1, void *fn, const void *gadget); /* asm/ */

/* A `ret` (0xc3) byte in the page of the caller's return address: mapped
 * and executable, and inside the caller's object. NULL if the page has none. */
static const void *ret_gadget(const void *caller)
{
	const unsigned char *p = caller;
	const unsigned char *lo = (const unsigned char *)((uintptr_t)p & ~(uintptr_t)4095);
	const unsigned char *hi = lo + 4096;
	for (const unsigned char *q = p; q < hi; q++)
		if (*q == 0xc3)
			return q;
	for (const unsigned char *q = p; q > lo;)
		if (*--q == 0xc3)
			return q;
	return NULL;
}

BB_EXPORT void *dlopen(const char *file, int mode)
{
	static void *(*real)(const char *, int);
	if (real == NULL)
		real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	const void *gadget = ret_gadget(__builtin_return_address(0));
	void *h = gadget ? bb_call_as(file, mode, (void *)real, gadget) : real(file, mode);
	if (h != NULL && bb_active) {
		int saved = errno;
		bb_tls_after_dlopen();
		bb_preempt_after_dlopen();
		errno = saved;
	}
	return h;
}
