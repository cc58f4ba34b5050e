/*
 * c11threads.c — the C11 <threads.h> API. glibc implements it on top of
 * its own pthread functions, but calls them by internal names, so none of
 * them reaches bobbin: thrd_create made an OS thread, mtx_lock and
 * cnd_wait waited on kernel futexes, thrd_sleep slept in the kernel, and a
 * key from tss_create had its destructor forgotten at a green thread's
 * exit. Each function here is the pthread call glibc makes, with glibc's
 * mapping of error numbers to thrd_* results; the objects are glibc's own
 * (mtx_t is a pthread_mutex_t, cnd_t a pthread_cond_t, tss_t a
 * pthread_key_t, once_flag a pthread_once_t), so C11 and pthread calls can
 * be mixed on one object as natively. tss_get/tss_set and thrd_equal
 * need nothing from bobbin: glibc's read the calling thread's own TCB, or
 * compare. thrd_current is pthread_self, whose answer for a green thread
 * is its G (pthread_thread.c), not glibc's TCB.
 */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <threads.h>

/* glibc's thrd_err_map */
static int thrd_result(int err)
{
	switch (err) {
	case 0:
		return thrd_success;
	case ENOMEM:
		return thrd_nomem;
	case ETIMEDOUT:
		return thrd_timedout;
	case EBUSY:
		return thrd_busy;
	default:
		return thrd_error;
	}
}

BB_EXPORT thrd_t thrd_current(void)
{
	return (thrd_t)pthread_self();
}

BB_EXPORT int thrd_create(thrd_t *thr, thrd_start_t func, void *arg)
{
	if (!bb_on_g()) {
		static int (*real)(thrd_t *, thrd_start_t, void *);
		if (real == NULL)
			real = (int (*)(thrd_t *, thrd_start_t, void *))dlsym(RTLD_NEXT, "thrd_create");
		return real(thr, func, arg);
	}
	/* the default attributes, as glibc's ATTR_C11_THREAD */
	return thrd_result(bb_thread_create((pthread_t *)thr, NULL, (void *(*)(void *))(void *)func,
					    arg, true, (uintptr_t)__builtin_return_address(0)));
}

BB_EXPORT int thrd_join(thrd_t thr, int *res)
{
	void *r = NULL;
	int err = pthread_join((pthread_t)thr, &r);
	if (err == 0 && res != NULL)
		*res = (int)(uintptr_t)r;
	return thrd_result(err);
}

BB_EXPORT int thrd_detach(thrd_t thr)
{
	return thrd_result(pthread_detach((pthread_t)thr));
}

BB_EXPORT _Noreturn void thrd_exit(int res)
{
	pthread_exit((void *)(uintptr_t)res);
}

/* 0, -1 when a signal cut it short (*remaining then set), -2 on error */
BB_EXPORT int thrd_sleep(const struct timespec *duration, struct timespec *remaining)
{
	int err = clock_nanosleep(CLOCK_REALTIME, 0, duration, remaining);
	return err == 0 ? 0 : err == EINTR ? -1 : -2;
}

BB_EXPORT void thrd_yield(void)
{
	sched_yield();
}

/* plain and timed are one kind, as in glibc; an unknown type is a plain one */
BB_EXPORT int mtx_init(mtx_t *m, int type)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, type == (mtx_plain | mtx_recursive) ||
						      type == (mtx_timed | mtx_recursive)
					      ? PTHREAD_MUTEX_RECURSIVE
					      : PTHREAD_MUTEX_NORMAL);
	int err = pthread_mutex_init((pthread_mutex_t *)m, &a);
	pthread_mutexattr_destroy(&a);
	return thrd_result(err);
}

BB_EXPORT int mtx_lock(mtx_t *m)
{
	return thrd_result(pthread_mutex_lock((pthread_mutex_t *)m));
}

BB_EXPORT int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict deadline)
{
	return thrd_result(pthread_mutex_timedlock((pthread_mutex_t *)m, deadline));
}

BB_EXPORT int mtx_trylock(mtx_t *m)
{
	return thrd_result(pthread_mutex_trylock((pthread_mutex_t *)m));
}

BB_EXPORT int mtx_unlock(mtx_t *m)
{
	return thrd_result(pthread_mutex_unlock((pthread_mutex_t *)m));
}

BB_EXPORT void mtx_destroy(mtx_t *m)
{
	pthread_mutex_destroy((pthread_mutex_t *)m);
}

BB_EXPORT int cnd_init(cnd_t *c)
{
	return thrd_result(pthread_cond_init((pthread_cond_t *)c, NULL));
}

BB_EXPORT int cnd_signal(cnd_t *c)
{
	return thrd_result(pthread_cond_signal((pthread_cond_t *)c));
}

BB_EXPORT int cnd_broadcast(cnd_t *c)
{
	return thrd_result(pthread_cond_broadcast((pthread_cond_t *)c));
}

BB_EXPORT int cnd_wait(cnd_t *c, mtx_t *m)
{
	return thrd_result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m));
}

BB_EXPORT int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m,
			    const struct timespec *restrict deadline)
{
	return thrd_result(
		pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, deadline));
}

BB_EXPORT void cnd_destroy(cnd_t *c)
{
	pthread_cond_destroy((pthread_cond_t *)c);
}

BB_EXPORT int tss_create(tss_t *key, tss_dtor_t dtor)
{
	return thrd_result(pthread_key_create((pthread_key_t *)key, dtor));
}

BB_EXPORT void tss_delete(tss_t key)
{
	pthread_key_delete((pthread_key_t)key);
}

BB_EXPORT void call_once(once_flag *flag, void (*func)(void))
{
	pthread_once((pthread_once_t *)&flag->__data, func);
}
