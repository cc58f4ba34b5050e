/*
 * pthread_key.c — thread-specific data: pthread_key_create/delete,
 * getspecific/setspecific, and the destructors run when a thread ends
 * (up to PTHREAD_DESTRUCTOR_ITERATIONS rounds, as NPTL does).
 *
 * A key's slot carries a sequence number, odd while the key is in use;
 * a value is seen only if it was stored under the key's current sequence,
 * so a deleted and re-created key never shows a stale value. Per G, values
 * live in blocks of 32 allocated on first use and kept with the G.
 */
#include "shim.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define KEYS_MAX PTHREAD_KEYS_MAX /* 1024 */
#define BLOCK 32

typedef struct keyslot {
	_Atomic uintptr_t seq;     /* odd: in use */
	void (*_Atomic destr)(void *);
} keyslot;

typedef struct tsdent {
	uintptr_t seq;
	void *value;
} tsdent;

static keyslot keys[KEYS_MAX];

BB_EXPORT int pthread_key_create(pthread_key_t *key, void (*destr)(void *))
{
	if (!bb_active)
		return REAL(pthread_key_create)(key, destr);
	for (unsigned i = 0; i < KEYS_MAX; i++) {
		uintptr_t s = atomic_load_explicit(&keys[i].seq, memory_order_relaxed);
		if (s & 1)
			continue;
		atomic_store_explicit(&keys[i].destr, destr, memory_order_relaxed);
		/* release: a thread that sees the key in use sees its destructor */
		if (atomic_compare_exchange_strong_explicit(&keys[i].seq, &s, s + 1,
							    memory_order_release,
							    memory_order_relaxed)) {
			*key = i;
			return 0;
		}
	}
	return EAGAIN;
}

BB_EXPORT int pthread_key_delete(pthread_key_t key)
{
	if (!bb_active)
		return REAL(pthread_key_delete)(key);
	if (key >= KEYS_MAX)
		return EINVAL;
	uintptr_t s = atomic_load_explicit(&keys[key].seq, memory_order_relaxed);
	if (!(s & 1) || !atomic_compare_exchange_strong_explicit(&keys[key].seq, &s, s + 1,
								 memory_order_release,
								 memory_order_relaxed))
		return EINVAL;
	return 0;
}

static inline tsdent *entry(bb_g *gp, pthread_key_t key, bool create)
{
	tsdent **blocks = (tsdent **)gp->tsd;
	if (blocks == NULL) {
		if (!create)
			return NULL;
		blocks = calloc(KEYS_MAX / BLOCK, sizeof *blocks);
		if (blocks == NULL)
			return NULL;
		gp->tsd = (void **)blocks;
	}
	tsdent *b = blocks[key / BLOCK];
	if (b == NULL) {
		if (!create)
			return NULL;
		b = calloc(BLOCK, sizeof *b);
		if (b == NULL)
			return NULL;
		blocks[key / BLOCK] = b;
	}
	return &b[key % BLOCK];
}

BB_EXPORT void *pthread_getspecific(pthread_key_t key)
{
	if (!bb_on_g())
		return REAL(pthread_getspecific)(key);
	if (key >= KEYS_MAX)
		return NULL;
	tsdent *e = entry(bb_getg(), key, false);
	if (e == NULL || e->seq != atomic_load_explicit(&keys[key].seq, memory_order_relaxed))
		return NULL;
	return e->value;
}

BB_EXPORT int pthread_setspecific(pthread_key_t key, const void *value)
{
	if (!bb_on_g())
		return REAL(pthread_setspecific)(key, value);
	if (key >= KEYS_MAX)
		return EINVAL;
	uintptr_t s = atomic_load_explicit(&keys[key].seq, memory_order_acquire);
	if (!(s & 1))
		return EINVAL;
	tsdent *e = entry(bb_getg(), key, value != NULL);
	if (e == NULL)
		return value == NULL ? 0 : ENOMEM;
	e->seq = s;
	e->value = (void *)value;
	return 0;
}

/* At thread exit, on the G: call each destructor whose key still has a
 * non-NULL value, repeating while destructors store new values. */
void bb_tsd_run_destructors(bb_g *gp)
{
	tsdent **blocks = (tsdent **)gp->tsd;
	if (blocks == NULL)
		return;
	for (int round = 0; round < PTHREAD_DESTRUCTOR_ITERATIONS; round++) {
		bool again = false;
		for (unsigned k = 0; k < KEYS_MAX; k++) {
			tsdent *b = blocks[k / BLOCK];
			if (b == NULL) {
				k += BLOCK - 1;
				continue;
			}
			tsdent *e = &b[k % BLOCK];
			uintptr_t s = atomic_load_explicit(&keys[k].seq, memory_order_acquire);
			if (e->value == NULL || e->seq != s)
				continue;
			void *v = e->value;
			e->value = NULL;
			void (*d)(void *) = atomic_load_explicit(&keys[k].destr, memory_order_relaxed);
			if (d) {
				d(v);
				again = true;
			}
		}
		if (!again)
			break;
	}
	/* the blocks stay with the G for its next life, empty */
	for (unsigned i = 0; i < KEYS_MAX / BLOCK; i++)
		if (blocks[i])
			memset(blocks[i], 0, BLOCK * sizeof(tsdent));
}
