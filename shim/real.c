/*
 * real.c — the real libc functions behind every interposed symbol, resolved
 * once in the constructor before any thread exists (dlsym can allocate and
 * take locks: never call it lazily from a hot path).
 */
#include "shim.h"

#include <dlfcn.h>

bb_real_fns bb_real;

#define RESOLVE(name)                                                      \
	do {                                                               \
		bb_real.name = dlsym(RTLD_NEXT, #name);                    \
		if (bb_real.name == NULL) {                                \
			bb_printf("bobbin: libc has no %s; running natively\n", #name); \
			return -1;                                         \
		}                                                          \
	} while (0)

int bb_real_init(void)
{
	RESOLVE(pthread_create);
	RESOLVE(pthread_join);
	RESOLVE(pthread_tryjoin_np);
	RESOLVE(pthread_timedjoin_np);
	RESOLVE(pthread_clockjoin_np);
	RESOLVE(pthread_detach);
	RESOLVE(pthread_exit);
	RESOLVE(pthread_getattr_np);
	RESOLVE(pthread_getattr_default_np);
	RESOLVE(pthread_setname_np);
	RESOLVE(pthread_getname_np);
	RESOLVE(pthread_key_create);
	RESOLVE(pthread_key_delete);
	RESOLVE(pthread_getspecific);
	RESOLVE(pthread_setspecific);
	RESOLVE(pthread_once);
	RESOLVE(sched_yield);
	RESOLVE(nanosleep);
	RESOLVE(clock_nanosleep);
	RESOLVE(clock_gettime);
	bb_clock_gettime = bb_real.clock_gettime;
	RESOLVE(clock_getres);
	RESOLVE(pthread_getcpuclockid);
	RESOLVE(usleep);
	RESOLVE(sleep);
	RESOLVE(pthread_mutex_lock);
	RESOLVE(pthread_mutex_trylock);
	RESOLVE(pthread_mutex_timedlock);
	RESOLVE(pthread_mutex_clocklock);
	RESOLVE(pthread_mutex_unlock);
	RESOLVE(pthread_mutex_init);
	RESOLVE(pthread_mutex_destroy);
	RESOLVE(pthread_mutex_consistent);
	RESOLVE(pthread_cond_wait);
	RESOLVE(pthread_cond_timedwait);
	RESOLVE(pthread_cond_clockwait);
	RESOLVE(pthread_cond_signal);
	RESOLVE(pthread_cond_broadcast);
	RESOLVE(pthread_cond_init);
	RESOLVE(pthread_cond_destroy);
	RESOLVE(flockfile);
	RESOLVE(ftrylockfile);
	RESOLVE(funlockfile);
	RESOLVE(pthread_rwlock_rdlock);
	RESOLVE(pthread_rwlock_tryrdlock);
	RESOLVE(pthread_rwlock_timedrdlock);
	RESOLVE(pthread_rwlock_clockrdlock);
	RESOLVE(pthread_rwlock_wrlock);
	RESOLVE(pthread_rwlock_trywrlock);
	RESOLVE(pthread_rwlock_timedwrlock);
	RESOLVE(pthread_rwlock_clockwrlock);
	RESOLVE(pthread_rwlock_unlock);
	RESOLVE(pthread_rwlock_init);
	RESOLVE(pthread_rwlock_destroy);
	RESOLVE(pthread_barrier_init);
	RESOLVE(pthread_barrier_wait);
	RESOLVE(pthread_barrier_destroy);
	RESOLVE(pthread_spin_lock);
	RESOLVE(pthread_spin_trylock);
	RESOLVE(pthread_spin_unlock);
	RESOLVE(pthread_spin_init);
	RESOLVE(pthread_spin_destroy);
	RESOLVE(sem_wait);
	RESOLVE(sem_trywait);
	RESOLVE(sem_timedwait);
	RESOLVE(sem_clockwait);
	RESOLVE(sem_post);
	RESOLVE(sem_getvalue);
	RESOLVE(sem_init);
	RESOLVE(sem_destroy);
	bb_real_pthread_create = (int (*)(void *, const void *, void *(*)(void *), void *))
		bb_real.pthread_create;
	return 0;
}
