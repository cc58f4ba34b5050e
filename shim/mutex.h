/*
 * mutex.h — bobbin's view of glibc's pthread_mutex_t (40 bytes), shared by
 * the mutex and condvar shims.
 */
#ifndef BB_MUTEX_H
#define BB_MUTEX_H

#include "shim.h"

/* glibc 2.36's struct __pthread_mutex_s, x86_64. The static initialisers
 * set only kind; all-zero is a default mutex. */
typedef struct bb_mutex {
	_Atomic int lock;   /* 0 free, 1 held, 2 held and Gs may be parked on it */
	unsigned count;     /* recursion depth (recursive mutexes): owner only */
	_Atomic int owner;  /* tid of the holder (as glibc's): written by it */
	unsigned nusers;    /* holders: destroy of a held mutex is EBUSY */
	_Atomic int kind;   /* PTHREAD_MUTEX_* | flags; -1 after destroy */
	_Atomic short starving; /* glibc's __spins: 1 = hand the lock to the first waiter */
	short elision;
	void *list[2];
} bb_mutex;
_Static_assert(sizeof(bb_mutex) == sizeof(pthread_mutex_t), "mutex overlay");

#define BB_MUTEX_KIND_MASK 3
/* kernel-semantics mutexes: robust, priority-inherit/-protect, process-shared */
#define BB_MUTEX_KERNEL_FLAGS (16 | 32 | 64 | 128)
#define BB_MUTEX_ELISION_FLAGS (256 | 512)

/* a call that may wait in the kernel (a process-shared or robust object,
 * glibc's implementation): inside entersyscall when on a G, so the P moves on */
#define BB_KERNEL_WAIT(expr)                          \
	({                                            \
		int r_;                               \
		if (bb_on_g()) {                      \
			bb_entersyscall();            \
			r_ = (expr);                  \
			bb_exitsyscall();             \
		} else {                              \
			r_ = (expr);                  \
		}                                     \
		r_;                                   \
	})

/* the program's mutex released from g0 by a condvar wait: no owner checks */
void bb_mutex_release(void *m);
int bb_mutex_lock_until(bb_mutex *m, int64_t deadline);

#endif
