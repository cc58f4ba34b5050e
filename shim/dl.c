/*
 * dl.c — dlopen and dlmopen, so that a module with initial-exec TLS loaded
 * while green threads exist gets its initial values in their blocks too
 * (gtls.c), and its code is known to the preemption check (preempt.c).
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
#include <link.h>
#include <stdint.h>

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

/* A `ret` byte in the executable code of the object h names: a return
 * address inside that object, so that dl_iterate_phdr lists its namespace. */
static const void *gadget_in(void *h)
{
	struct link_map *lm = NULL;
	const ElfW(Phdr) *ph = NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL)
		return NULL;
	int n = dlinfo(h, RTLD_DI_PHDR, &ph);
	for (int i = 0; ph != NULL && i < n; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X) || ph[i].p_filesz == 0)
			continue;
		const unsigned char *lo = (const unsigned char *)(lm->l_addr + ph[i].p_vaddr);
		const unsigned char *hi = lo + ph[i].p_filesz;
		for (const unsigned char *q = lo; q < hi; q++)
			if (*q == 0xc3)
				return q;
	}
	return NULL;
}

/* what the threads that exist must learn of the objects just loaded: the
 * caller's namespace (ns_gadget NULL) or the one ns_gadget is in */
static void after_load(const void *ns_gadget)
{
	int saved = errno;
	bb_tls_after_dlopen(ns_gadget);
	bb_preempt_after_dlopen(ns_gadget);
	errno = saved;
}

BB_EXPORT void *dlopen(const char *file, int mode)
{
	static void *(*real)(const char *, int);
	if (real == NULL)
		real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	const void *gadget = ret_gadget(__builtin_return_address(0));
	void *h = gadget ? (void *)bb_call_as(file, (const void *)(long)mode, NULL,
					      (const void *)real, gadget)
			 : real(file, mode);
	if (h != NULL && bb_active)
		after_load(NULL);
	return h;
}

/* A new namespace (LM_ID_NEWLM) brings its own libc.so, whose errno,
 * locale and malloc state are static TLS that every thread needs. */
BB_EXPORT void *dlmopen(Lmid_t lmid, const char *file, int mode)
{
	static void *(*real)(Lmid_t, const char *, int);
	if (real == NULL)
		real = (void *(*)(Lmid_t, const char *, int))dlsym(RTLD_NEXT, "dlmopen");
	const void *gadget = ret_gadget(__builtin_return_address(0));
	void *h = gadget ? (void *)bb_call_as((const void *)lmid, file, (const void *)(long)mode,
					      (const void *)real, gadget)
			 : real(lmid, file, mode);
	if (h != NULL && bb_active) {
		const void *in_ns = gadget_in(h);
		if (in_ns == NULL)
			bb_printf("bobbin: dlmopen(\"%s\"): found no code in the object to list "
				  "its namespace by; threads that exist may lack its TLS\n",
				  file ? file : "");
		after_load(in_ns);
	}
	return h;
}
