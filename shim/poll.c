/*
 * poll.c — the program's own poll, ppoll, select, pselect, epoll_wait,
 * epoll_pwait and epoll_pwait2 park the G on the netpoller.
 *
 * Each call first asks the kernel with a zero timeout; when nothing is
 * ready, the G waits on the netpoller for any of the fds (a program's epoll
 * fd is itself pollable: readable when it has events), then asks again.
 * The kernel's answer is always the one returned, so revents, fd_sets and
 * epoll events are exactly the kernel's. Timeouts become deadlines on the
 * runtime's timers; select writes back the time left, as Linux does.
 * A call with a signal mask (ppoll, pselect, epoll_pwait with a mask) runs
 * inside entersyscall: the mask is applied atomically by the kernel only.
 */
#include "realio.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#define WAIT_IN_SYSCALL(call) return BB_IN_SYSCALL(int, call, false)


static int64_t deadline_ms(int timeout)
{
	return timeout < 0 ? 0 : bb_nanotime() + (int64_t)timeout * 1000000;
}

static int64_t deadline_ts(const struct timespec *ts)
{
	if (ts == NULL)
		return 0;
	int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
	return bb_nanotime() + (ns > 0 ? ns : 0) + (ns > 0 ? 0 : 1);
}

/* A masked wait's time-out, for a try after bobbin's own SIGURG alone cut
 * it short (BB_MASKED_WAIT makes the call again): what is left of it, 0
 * once it has passed (the call then returns what is ready, as the
 * kernel's would have at its end). The program's timespec is never
 * written, as glibc's wrappers leave it. */
typedef struct {
	int64_t deadline; /* deadline_ts's (0: none) */
	struct timespec left;
} masked_time;

/* (a time-out the kernel refuses fails at once: no try after it) */
static const struct timespec *masked_time_init(masked_time *t, const struct timespec *ts)
{
	t->deadline = deadline_ts(ts);
	if (ts == NULL)
		return NULL;
	t->left = *ts;
	return &t->left;
}

static bool masked_time_again(masked_time *t)
{
	if (t->deadline != 0)
		bb_ts_left(t->deadline, &t->left, &t->left);
	return true;
}

/* the remaining timeout for a fallback into the kernel, in ms (-1: none) */
static int left_ms(int64_t deadline)
{
	if (deadline == 0)
		return -1;
	int64_t left = deadline - bb_nanotime();
	return left <= 0 ? 0 : (int)((left + 999999) / 1000000);
}

/* wait until any of the pollfds may be ready; 0 go ask the kernel again,
 * ETIMEDOUT, EPERM (block in the kernel: one of them cannot be watched, or
 * the caller is the process's only thread, bb_alone) */
static int wait_pollfds(const struct pollfd *fds, nfds_t n, int64_t deadline)
{
	if (bb_alone())
		return EPERM;
	int stackfd[32] = {0}; /* (quiets a false maybe-uninitialized) */
	short stackev[32] = {0};
	int *fd = n <= 32 ? stackfd : bb_alloc(n * sizeof *fd);
	short *ev = n <= 32 ? stackev : bb_alloc(n * sizeof *ev);
	int err = EPERM;
	if (fd && ev) {
		for (nfds_t i = 0; i < n; i++) {
			fd[i] = fds[i].fd;
			ev[i] = fds[i].events;
		}
		err = bb_netpoll_wait_many(fd, ev, (int)n, deadline);
	}
	if (fd != stackfd)
		bb_free(fd);
	if (ev != stackev)
		bb_free(ev);
	return err;
}

/* a signal handler ran while we waited: poll, select and epoll_wait are
 * never restarted after a handler, whatever SA_RESTART says */
static bool handler_ran(void)
{
	bb_g *gp = bb_getg();
	bb_take_eintr();
	if (!gp->sig_ran)
		return false;
	gp->sig_ran = false;
	errno = EINTR;
	return true;
}

static int poll_until(struct pollfd *fds, nfds_t n, int64_t deadline)
{
	int saved = errno;
	for (;;) {
		bb_testcancel();
		int r = BB_NOWAIT(int, BB_SIGFD_CALL(int, REAL(poll)(fds, n, 0)));
		if (r != 0)
			return r;
		if (deadline != 0 && bb_nanotime() >= deadline)
			return 0;
		bb_getg()->sig_ran = false;
		int err = wait_pollfds(fds, n, deadline);
		if (handler_ran())
			return -1;
		if (err == ETIMEDOUT) {
			r = BB_NOWAIT(int, BB_SIGFD_CALL(int, REAL(poll)(fds, n, 0)));
			if (r >= 0)
				errno = saved;
			return r;
		}
		if (err == EPERM)
			WAIT_IN_SYSCALL(BB_SIGFD_CALL(int, REAL(poll)(fds, n, left_ms(deadline))));
	}
}

BB_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!bb_on_g())
		return REAL(poll)(fds, n, timeout);
	if (timeout == 0)
		return BB_NOWAIT_POINT(int, REAL(poll)(fds, n, 0));
	return poll_until(fds, n, deadline_ms(timeout));
}

BB_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		    const sigset_t *mask)
{
	if (!bb_on_g())
		return REAL(ppoll)(fds, n, ts, mask);
	if (ts && ts->tv_sec == 0 && ts->tv_nsec == 0)
		return BB_NOWAIT_POINT(int, REAL(ppoll)(fds, n, ts, mask));
	if (mask) {
		masked_time t;
		const struct timespec *tp = masked_time_init(&t, ts);
		return BB_MASKED_WAIT(int, REAL(ppoll)(fds, n, tp, mask), mask, false,
				      masked_time_again(&t));
	}
	if (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000)) {
		errno = EINVAL;
		return -1;
	}
	return poll_until(fds, n, deadline_ts(ts));
}

/* select through poll: wait on the fds of the three sets, then let the
 * kernel fill the sets with a zero timeout */
static int select_until(int nfds, fd_set *r, fd_set *w, fd_set *e, int64_t deadline)
{
	fd_set r0, w0, e0;
	if (r)
		r0 = *r;
	if (w)
		w0 = *w;
	if (e)
		e0 = *e;
	int saved = errno;
	for (;;) {
		bb_testcancel();
		struct timeval zero = {0, 0};
		int k = BB_NOWAIT(int, BB_SIGFD_CALL(int, REAL(select)(nfds, r, w, e, &zero)));
		if (k != 0)
			return k;
		if (deadline != 0 && bb_nanotime() >= deadline)
			return 0;
		struct pollfd stackp[64];
		struct pollfd *p = nfds <= 64 ? stackp : bb_alloc((size_t)nfds * sizeof *p);
		if (p == NULL) {
			errno = ENOMEM;
			return -1;
		}
		nfds_t n = 0;
		for (int fd = 0; fd < nfds; fd++) {
			short ev = 0;
			if (r && FD_ISSET(fd, &r0))
				ev |= POLLIN;
			if (w && FD_ISSET(fd, &w0))
				ev |= POLLOUT;
			if (e && FD_ISSET(fd, &e0))
				ev |= POLLPRI;
			if (ev) {
				p[n].fd = fd;
				p[n].events = ev;
				p[n].revents = 0;
				n++;
			}
		}
		bb_getg()->sig_ran = false;
		int err = wait_pollfds(p, n, deadline);
		if (p != stackp)
			bb_free(p);
		if (handler_ran())
			return -1;
		if (r)
			*r = r0;
		if (w)
			*w = w0;
		if (e)
			*e = e0;
		if (err == ETIMEDOUT) {
			struct timeval z = {0, 0};
			k = BB_NOWAIT(int, BB_SIGFD_CALL(int, REAL(select)(nfds, r, w, e, &z)));
			if (k >= 0)
				errno = saved;
			return k;
		}
		if (err == EPERM) {
			int ms = left_ms(deadline);
			struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
			WAIT_IN_SYSCALL(BB_SIGFD_CALL(int, REAL(select)(nfds, r, w, e, ms < 0 ? NULL : &tv)));
		}
	}
}

BB_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	if (!bb_on_g())
		return REAL(select)(nfds, r, w, e, tv);
	if (tv && tv->tv_sec == 0 && tv->tv_usec == 0)
		return BB_NOWAIT_POINT(int, REAL(select)(nfds, r, w, e, tv));
	if (nfds < 0 || (tv && (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000))) {
		errno = EINVAL;
		return -1;
	}
	int64_t deadline = tv ? bb_nanotime() + (int64_t)tv->tv_sec * 1000000000 +
					(int64_t)tv->tv_usec * 1000
			      : 0;
	int k = select_until(nfds, r, w, e, deadline);
	if (tv && k >= 0) { /* Linux reports the time left */
		int64_t left = deadline - bb_nanotime();
		if (left < 0)
			left = 0;
		tv->tv_sec = left / 1000000000;
		tv->tv_usec = (left % 1000000000) / 1000;
	}
	return k;
}

BB_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
		      const sigset_t *mask)
{
	if (!bb_on_g())
		return REAL(pselect)(nfds, r, w, e, ts, mask);
	if (ts && ts->tv_sec == 0 && ts->tv_nsec == 0)
		return BB_NOWAIT_POINT(int, REAL(pselect)(nfds, r, w, e, ts, mask));
	if (mask) {
		masked_time t;
		const struct timespec *tp = masked_time_init(&t, ts);
		return BB_MASKED_WAIT(int, REAL(pselect)(nfds, r, w, e, tp, mask), mask, false,
				      masked_time_again(&t));
	}
	if (nfds < 0 || (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000))) {
		errno = EINVAL;
		return -1;
	}
	return select_until(nfds, r, w, e, deadline_ts(ts));
}

static int epoll_until(int epfd, struct epoll_event *ev, int max, int64_t deadline)
{
	int saved = errno;
	for (;;) {
		bb_testcancel();
		int r = BB_NOWAIT(int, REAL(epoll_wait)(epfd, ev, max, 0));
		if (r != 0)
			return r;
		if (deadline != 0 && bb_nanotime() >= deadline)
			return 0;
		struct pollfd p = {epfd, POLLIN, 0};
		bb_getg()->sig_ran = false;
		int err = wait_pollfds(&p, 1, deadline);
		if (handler_ran())
			return -1;
		if (err == ETIMEDOUT) {
			r = BB_NOWAIT(int, REAL(epoll_wait)(epfd, ev, max, 0));
			if (r >= 0)
				errno = saved;
			return r;
		}
		if (err == EPERM)
			WAIT_IN_SYSCALL(REAL(epoll_wait)(epfd, ev, max, left_ms(deadline)));
	}
}

BB_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	if (!bb_on_g())
		return REAL(epoll_wait)(epfd, ev, max, timeout);
	if (timeout == 0)
		return BB_NOWAIT_POINT(int, REAL(epoll_wait)(epfd, ev, max, 0));
	if (max <= 0) {
		errno = EINVAL;
		return -1;
	}
	return epoll_until(epfd, ev, max, deadline_ms(timeout));
}

/* epoll_pwait with a timespec (glibc 2.35): the kernel never restarts it,
 * so run as glibc's it failed with EINTR at each of bobbin's preemption
 * signals */
BB_EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max,
			   const struct timespec *timeout, const sigset_t *mask)
{
	static int (*real)(int, struct epoll_event *, int, const struct timespec *,
			   const sigset_t *);
	if (real == NULL)
		real = (int (*)(int, struct epoll_event *, int, const struct timespec *,
				const sigset_t *))dlsym(RTLD_NEXT, "epoll_pwait2");
	if (!bb_on_g())
		return real(epfd, ev, max, timeout, mask);
	if (timeout && timeout->tv_sec == 0 && timeout->tv_nsec == 0)
		return BB_NOWAIT_POINT(int, real(epfd, ev, max, timeout, mask));
	if (mask) {
		masked_time t;
		const struct timespec *tp = masked_time_init(&t, timeout);
		return BB_MASKED_WAIT(int, real(epfd, ev, max, tp, mask), mask, false,
				      masked_time_again(&t));
	}
	if (max <= 0 || (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
				     timeout->tv_nsec >= 1000000000))) {
		errno = EINVAL;
		return -1;
	}
	return epoll_until(epfd, ev, max, deadline_ts(timeout));
}

BB_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
			  const sigset_t *mask)
{
	if (!bb_on_g())
		return REAL(epoll_pwait)(epfd, ev, max, timeout, mask);
	if (timeout == 0)
		return BB_NOWAIT_POINT(int, REAL(epoll_pwait)(epfd, ev, max, 0, mask));
	if (mask) {
		int ms = timeout;
		int64_t deadline = deadline_ms(timeout);
		return BB_MASKED_WAIT(int, REAL(epoll_pwait)(epfd, ev, max, ms, mask), mask, false,
				      (ms = left_ms(deadline), true));
	}
	if (max <= 0) {
		errno = EINVAL;
		return -1;
	}
	return epoll_until(epfd, ev, max, deadline_ms(timeout));
}
