/*
 * poll.c — the program's own poll, ppoll, select, pselect, epoll_wait and
 * epoll_pwait. A call with a zero timeout, or that finds something ready at
 * once, is the plain call. Otherwise it waits inside entersyscall: the P
 * moves on to other Gs and sysmon hands it off while the call blocks.
 */
#include "realio.h"

#include <errno.h>
#include <sys/syscall.h>

#define WAIT_IN_SYSCALL(call)           \
	do {                            \
		bb_entersyscall();      \
		int r_ = (call);        \
		int e_ = errno;         \
		bb_exitsyscall();       \
		errno = e_;             \
		return r_;              \
	} while (0)

BB_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!bb_on_g() || timeout == 0)
		return REAL(poll)(fds, n, timeout);
	int r = REAL(poll)(fds, n, 0);
	if (r != 0)
		return r;
	WAIT_IN_SYSCALL(REAL(poll)(fds, n, timeout));
}

BB_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		    const sigset_t *mask)
{
	if (!bb_on_g() || (ts && ts->tv_sec == 0 && ts->tv_nsec == 0))
		return REAL(ppoll)(fds, n, ts, mask);
	WAIT_IN_SYSCALL(REAL(ppoll)(fds, n, ts, mask));
}

BB_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	if (!bb_on_g() || (tv && tv->tv_sec == 0 && tv->tv_usec == 0))
		return REAL(select)(nfds, r, w, e, tv);
	WAIT_IN_SYSCALL(REAL(select)(nfds, r, w, e, tv));
}

BB_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
		      const sigset_t *mask)
{
	if (!bb_on_g() || (ts && ts->tv_sec == 0 && ts->tv_nsec == 0))
		return REAL(pselect)(nfds, r, w, e, ts, mask);
	WAIT_IN_SYSCALL(REAL(pselect)(nfds, r, w, e, ts, mask));
}

BB_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	if (!bb_on_g() || timeout == 0)
		return REAL(epoll_wait)(epfd, ev, max, timeout);
	int r = REAL(epoll_wait)(epfd, ev, max, 0);
	if (r != 0)
		return r;
	WAIT_IN_SYSCALL(REAL(epoll_wait)(epfd, ev, max, timeout));
}

BB_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
			  const sigset_t *mask)
{
	if (!bb_on_g() || timeout == 0)
		return REAL(epoll_pwait)(epfd, ev, max, timeout, mask);
	WAIT_IN_SYSCALL(REAL(epoll_pwait)(epfd, ev, max, timeout, mask));
}
