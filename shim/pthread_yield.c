/*
 * pthread_yield.c — the deprecated pthread_yield, exported under its own name.
 * Kept apart from <pthread.h>, which redirects the name to sched_yield (and
 * libc's own pthread_yield calls sched_yield internally, out of our reach).
 */
__attribute__((visibility("default"))) int pthread_yield(void);
int sched_yield(void);

int pthread_yield(void)
{
	return sched_yield();
}
