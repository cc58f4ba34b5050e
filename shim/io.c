/*
 * io.c — read, write and the socket calls, parking the G on the netpoller
 * instead of blocking the OS thread.
 *
 * How a blocking call is made without blocking the M, for a file the
 * program left blocking:
 *   sockets and pipes made on a green thread: non-blocking for real (fd.c),
 *                  the plain call; on EAGAIN park until ready
 *   other sockets  the call with MSG_DONTWAIT; the same
 *   other pipes,   preadv2/pwritev2 with RWF_NOWAIT; the same
 *   FIFOs
 *   other pollable readiness first (poll, timeout 0), then the call inside
 *   (terminals)    entersyscall
 *   regular files  the call inside entersyscall (sysmon hands off the P if
 *                  it blocks)
 * A file the program made non-blocking gets the plain call and its EAGAIN.
 * A blocking write writes everything, as the kernel's would, unless an
 * error ends it early (then the count written so far). SO_RCVTIMEO and
 * SO_SNDTIMEO bound the waits and end them with EAGAIN, as Linux does.
 * errno is left untouched by a call that succeeds.
 */
#include "realio.h"

#include <sys/eventfd.h>

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/stat.h>

enum { RD = 0, WR = 1 };

typedef struct ioreq {
	int fd;
	int mode;
	/* the call: nowait = do not block (MSG_DONTWAIT / RWF_NOWAIT) */
	ssize_t (*call)(struct ioreq *r, bool nowait);
	void *buf;
	size_t len;
	const struct iovec *iov;
	int iovcnt;
	int flags;
	struct sockaddr *addr;
	socklen_t *addrlen;
	struct msghdr *msg;
	struct timespec *ts; /* recvmmsg's */
} ioreq;

static ssize_t blocking_call(ioreq *r)
{
	bb_entersyscall();
	ssize_t n = BB_SIGFD_CALL(ssize_t, r->call(r, false)); /* (a signalfd is such a file) */
	int e = errno;
	bb_exitsyscall();
	errno = e;
	return n;
}

static int64_t deadline_of(bb_pd *pd, int mode)
{
	bb_fdesc *d = bb_pd_desc(pd);
	int64_t to = atomic_load_explicit(mode == WR ? &d->sndtimeo : &d->rcvtimeo, memory_order_relaxed);
	return to > 0 ? bb_nanotime() + to : 0;
}

/* A wait for room that no readiness announces (see connect_when_room and
 * do_io's datagram case): sleep a pause that doubles from 20 µs to 2 ms
 * (*pause starts at 0), never past the deadline (0: none). 0 to try again,
 * EINTR if a handler without SA_RESTART ran, ETIMEDOUT at the deadline. */
static int pause_for_room(int64_t *pause, int64_t deadline)
{
	*pause = *pause == 0 ? 20000 : *pause < 2000000 ? *pause * 2 : *pause;
	int64_t until = bb_nanotime() + *pause;
	if (deadline && until > deadline)
		until = deadline;
	bb_sleep_until(until);
	bb_testcancel();
	if (bb_take_eintr())
		return EINTR;
	if (deadline && bb_nanotime() >= deadline)
		return ETIMEDOUT;
	return 0;
}

static bool is_dgram(int fd)
{
	int type = 0;
	socklen_t len = sizeof type;
	return bb_rawsyscall6(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, (long)&type, (long)&len, 0) ==
		       0 &&
	       type == SOCK_DGRAM;
}

/* the file's calls have a form that cannot wait (r->call(r, true)) */
static inline bool has_nowait(const bb_pd *pd)
{
	return pd->kind == BB_FD_SOCKET || (pd->kind == BB_FD_PIPE && pd->nowait_ok);
}

/* one attempt that never blocks the M, or -2 meaning "not ready: wait"
 * (errno EAGAIN, or EOPNOTSUPP: a pipe without RWF_NOWAIT, told once).
 * Sockets and pipes take the call's no-wait form: where the kernel already
 * has the file non-blocking (BB_PD_FORCED) the plain call, else with
 * MSG_DONTWAIT or RWF_NOWAIT; read, write, readv and writev made raw
 * (nowait_call), not through glibc's cancellable wrapper, whose two atomic
 * updates of the thread's cancel state cost a pipe ping-pong an eighth of
 * its round trip (the caller tests for cancellation first). */
static ssize_t attempt(bb_pd *pd, ioreq *r)
{
	if (has_nowait(pd)) {
		ssize_t n = r->call(r, true);
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			if (n < 0 && errno == EOPNOTSUPP && pd->kind == BB_FD_PIPE) {
				pd->nowait_ok = false;
				return -2;
			}
			return n;
		}
		return -2;
	}
	struct pollfd p = {r->fd, r->mode == WR ? POLLOUT : POLLIN, 0};
	long k = bb_rawsyscall6(SYS_poll, (long)&p, 1, 0, 0, 0, 0);
	if (k > 0)
		return blocking_call(r); /* ready: should not block (sysmon covers a race) */
	return -2;
}

/* data moved through one end of an in-process pipe or socketpair: the
 * Gs waiting on the other end may go on now (netpoll.c, bb_netpoll_kick) */
static inline ssize_t kick_peer(bb_pd *pd, const ioreq *r, ssize_t n)
{
	if (n > 0 && pd->peerfd1 != 0 && !bb_getg()->rt_nested)
		bb_netpoll_kick(pd->peerfd1 - 1, pd->peerseq, r->mode ^ 1);
	return n;
}

/* ---- off a G: bb_fd_forced_off_g's sockets and pipes ----
 *
 * The blocking the program expects, emulated on its OS thread: the call,
 * and on EAGAIN a wait in the kernel's poll for any of fds' events, then
 * the call again. SO_RCVTIMEO/SO_SNDTIMEO bound the wait (deadline, 0:
 * none): ETIMEDOUT. An interrupted poll goes on waiting, as a call that
 * SA_RESTART restarts does. The waits are libc's poll and nanosleep, not
 * raw system calls: with the pc in libc, sysmon takes the P of an M that
 * a coroutine holds here (preempt.c), as for any blocking call there. */

/* A sleep doubling from 20 µs to 2 ms (*step counts them), never past the
 * deadline (0: none): ETIMEDOUT once it is there, else 0 */
static int pause_off_g(int *step, int64_t deadline)
{
	int k = (*step)++;
	int64_t pause = k < 7 ? 20000LL << k : 2000000;
	if (deadline && bb_nanotime() + pause > deadline)
		pause = deadline - bb_nanotime();
	if (pause > 0) {
		struct timespec ts = {0, (long)pause};
		(bb_real.nanosleep ? bb_real.nanosleep : nanosleep)(&ts, NULL);
	}
	return deadline && bb_nanotime() >= deadline ? ETIMEDOUT : 0;
}

/* *tries counts the waits of one call: from the third on, readiness that
 * keeps lying (a datagram socket whose receiver is full) is waited out by
 * pause_off_g first */
static int wait_off_g(const int *fds, const short *events, int n, int64_t deadline, int *tries)
{
	if (++*tries > 2) {
		int step = *tries - 3;
		if (pause_off_g(&step, deadline) != 0)
			return ETIMEDOUT;
	}
	struct pollfd p[2];
	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){fds[i], events[i], 0};
	for (;;) {
		int ms = -1;
		if (deadline) {
			int64_t left = deadline - bb_nanotime();
			if (left <= 0)
				return ETIMEDOUT;
			ms = (int)((left + 999999) / 1000000);
		}
		int k = REAL(poll)(p, (nfds_t)n, ms);
		if (k > 0 || (k < 0 && errno != EINTR) || (k == 0 && deadline == 0))
			return 0;
	}
}

static ssize_t io_off_g(ioreq *r)
{
	bb_pd *pd = bb_fd_forced_off_g(r->fd);
	if (pd == NULL)
		return r->call(r, false);
	int saved = errno, tries = 0;
	int64_t deadline = deadline_of(pd, r->mode);
	short ev = r->mode == WR ? POLLOUT : POLLIN;
	for (;;) {
		ssize_t n = r->call(r, false);
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			if (n >= 0)
				errno = saved;
			return n;
		}
		if (wait_off_g(&r->fd, &ev, 1, deadline, &tries) != 0) {
			errno = EAGAIN; /* SO_RCVTIMEO/SO_SNDTIMEO expired */
			return -1;
		}
	}
}

/* A call that cannot wait (MSG_DONTWAIT) on a G: still a preemption point,
 * or a thread that loops on it would keep its P past its time slice (at
 * BOBBIN_MAXPROCS=1 a sleeper's expired timer never ran) */
static void nowait_point(void)
{
	if (bb_on_g())
		bb_preempt_point();
}

static ssize_t do_io_call(ioreq *r);

/* A write to a pipe or socket whose reader has gone: the kernel queued a
 * SIGPIPE for this OS thread (unless MSG_NOSIGNAL); one past the file size
 * limit (EFBIG), a SIGXFSZ. A thread that blocks it keeps it as its own
 * (bb_keep_own_signal), not left on the OS thread for another thread to
 * take. */
static ssize_t do_io(ioreq *r)
{
	ssize_t n = do_io_call(r);
	if (n < 0 && r->mode == WR && bb_on_g()) {
		int e = errno;
		if (e == EPIPE && !(r->flags & MSG_NOSIGNAL))
			bb_keep_own_signal(SIGPIPE);
		else if (e == EFBIG)
			bb_keep_own_signal(SIGXFSZ);
		errno = e;
	}
	return n;
}

static ssize_t do_io_call(ioreq *r)
{
	if (!bb_on_g())
		return io_off_g(r);
	bb_pd *pd = bb_fd_view(r->fd);
	if (pd == NULL) /* not open when looked at: the kernel answers, maybe for a
			   file another thread has opened under the number since */
		return blocking_call(r);
	bb_preempt_point();
	/* EAGAIN is the program's to see. Only where bobbin keeps the file
	 * non-blocking for real is the call sure not to wait: elsewhere the
	 * kernel's flag may have changed since the view was taken (another
	 * thread's F_SETFL, another process sharing the file) and the call
	 * must let the P go in case it waits */
	if (BB_PD_UNB(pd)) {
		if (!BB_PD_FORCED(pd))
			return kick_peer(pd, r, blocking_call(r));
		if (!has_nowait(pd))
			return kick_peer(pd, r, r->call(r, false));
		/* the program's own non-blocking socket or pipe (an epoll
		 * loop's): one attempt, after the cancellation test glibc's
		 * wrapper would make */
		bb_testcancel();
		ssize_t n = attempt(pd, r);
		if (n == -2)
			n = errno == EOPNOTSUPP ? r->call(r, false) : -1;
		return kick_peer(pd, r, n);
	}
	if (pd->kind == BB_FD_FILE || pd->kind == BB_FD_OTHER) {
		bb_testcancel();
		return blocking_call(r);
	}
	int saved = errno;
	int64_t deadline = deadline_of(pd, r->mode), pause = 0;
	int lies = 0; /* readiness reported, and still it would block */
	for (;;) {
		bb_testcancel();
		/* the process's only thread waits in the kernel (bb_alone),
		 * with one call and no readiness poll before it (a FIFO's
		 * writer: stress-ng --fifo); not where bobbin made the fd
		 * non-blocking for real (that call would not wait), nor with a
		 * deadline (SO_RCVTIMEO) */
		if (!BB_PD_FORCED(pd) && deadline == 0 && bb_alone())
			return kick_peer(pd, r, blocking_call(r));
		bb_netpoll_look();
		ssize_t n = attempt(pd, r);
		if (n < 0 && errno == ENOTSOCK && pd->kind == BB_FD_SOCKET) {
			/* the number was closed and is another file now, and
			 * the view learned of the socket it was came back in
			 * between (another thread's call raced the close):
			 * learn the file afresh, as the kernel sees it */
			bb_fd_forget(r->fd);
			errno = saved;
			return do_io_call(r);
		}
		if (n != -2) {
			if (n >= 0)
				errno = saved;
			return kick_peer(pd, r, n);
		}
		/* a socket that keeps saying it is writable while its sends fail
		 * with EAGAIN (an unconnected Unix datagram socket whose receiver
		 * is full: readiness is about our own buffer): wait by pauses
		 * doubling from 20 µs to 2 ms instead of spinning on readiness */
		if (lies >= 2) {
			int err = pause_for_room(&pause, deadline);
			if (err) {
				errno = err == EINTR ? EINTR : EAGAIN;
				return -1;
			}
			continue;
		}
		int err = bb_netpoll_wait(r->fd, r->mode, deadline);
		if (bb_take_eintr()) {
			errno = EINTR; /* a handler without SA_RESTART ran meanwhile */
			return -1;
		}
		/* the second time: is it a datagram socket? (asked then only,
		 * a stream's readiness does not lie) */
		if (err == 0 && r->mode == WR && pd->kind == BB_FD_SOCKET && ++lies == 2 &&
		    !is_dgram(r->fd))
			lies = INT_MIN;
		if (err == ETIMEDOUT) {
			errno = EAGAIN; /* SO_RCVTIMEO/SO_SNDTIMEO expired */
			return -1;
		}
		if (err == EBADF) {
			errno = EBADF; /* closed while we waited */
			return -1;
		}
		if (err == EPERM) { /* not pollable after all (e.g. /dev/null) */
			pd->kind = BB_FD_FILE;
			ssize_t k = blocking_call(r);
			if (k >= 0)
				errno = saved;
			return k;
		}
	}
}

/* a write that must be whole on a blocking file: keep going after partial
 * writes, as the kernel does for a blocking stream */
static ssize_t do_write_all(ioreq *r)
{
	bb_pd *pd = bb_on_g() ? bb_fd_view(r->fd) : bb_fd_forced_off_g(r->fd);
	if (pd == NULL || BB_PD_UNB(pd) || pd->kind == BB_FD_FILE || pd->kind == BB_FD_OTHER)
		return do_io(r);
	size_t total = r->len, done = 0;
	char *base = r->buf;
	do {
		r->buf = base + done;
		r->len = total - done;
		ssize_t n = do_io(r);
		if (n < 0)
			return done > 0 ? (ssize_t)done : -1;
		done += (size_t)n;
	} while (done < total && total > 0);
	return (ssize_t)done;
}

/* ---- the calls ---- */

/* A call that cannot wait (MSG_DONTWAIT, RWF_NOWAIT) is made raw, not
 * through glibc's cancellable wrapper and its two atomic updates of the
 * thread's cancel state: it is no cancellation point (do_io tests for
 * cancellation before each attempt). Returns as the wrapper would. */
static ssize_t nowait_call(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	long r = bb_rawsyscall6(nr, a1, a2, a3, a4, a5, a6);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* recvfrom, sendto, preadv2 and pwritev2 (at the current position: -1;
 * the kernel takes the low word of a 64-bit position) without waiting */
#define NOWAIT_RECV(r, buf, len) \
	nowait_call(SYS_recvfrom, (r)->fd, (long)(buf), (long)(len), MSG_DONTWAIT, 0, 0)
#define NOWAIT_SEND(r, buf, len) \
	nowait_call(SYS_sendto, (r)->fd, (long)(buf), (long)(len), MSG_DONTWAIT, 0, 0)
#define NOWAIT_PREADV(r, iov, cnt) \
	nowait_call(SYS_preadv2, (r)->fd, (long)(iov), (cnt), -1, 0, RWF_NOWAIT)
#define NOWAIT_PWRITEV(r, iov, cnt) \
	nowait_call(SYS_pwritev2, (r)->fd, (long)(iov), (cnt), -1, 0, RWF_NOWAIT)

static ssize_t c_read(ioreq *r, bool nowait)
{
	if (!nowait)
		return REAL(read)(r->fd, r->buf, r->len);
	if (r->len == 0)
		return 0;
	bb_pd *pd = bb_pd_peek(r->fd);
	if (BB_PD_FORCED(pd)) /* non-blocking for real: a plain read cannot wait */
		return nowait_call(SYS_read, r->fd, (long)r->buf, (long)r->len, 0, 0, 0);
	if (pd->kind == BB_FD_SOCKET)
		return NOWAIT_RECV(r, r->buf, r->len);
	struct iovec v = {r->buf, r->len};
	return NOWAIT_PREADV(r, &v, 1);
}

static ssize_t c_write(ioreq *r, bool nowait)
{
	if (!nowait)
		return REAL(write)(r->fd, r->buf, r->len);
	bb_pd *pd = bb_pd_peek(r->fd);
	if (BB_PD_FORCED(pd))
		return nowait_call(SYS_write, r->fd, (long)r->buf, (long)r->len, 0, 0, 0);
	if (pd->kind == BB_FD_SOCKET)
		return NOWAIT_SEND(r, r->buf, r->len);
	struct iovec v = {r->buf, r->len};
	return NOWAIT_PWRITEV(r, &v, 1);
}

BB_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	ioreq r = {.fd = fd, .mode = RD, .call = c_read, .buf = buf, .len = len};
	return do_io(&r);
}

BB_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	ioreq r = {.fd = fd, .mode = WR, .call = c_write, .buf = (void *)buf, .len = len};
	return do_write_all(&r);
}

/* glibc's eventfd_read/eventfd_write read and write through its internal
 * names: these are the same calls through bobbin's (a wait on the poller) */
BB_EXPORT int eventfd_read(int fd, eventfd_t *value)
{
	return read(fd, value, sizeof *value) == (ssize_t)sizeof *value ? 0 : -1;
}

BB_EXPORT int eventfd_write(int fd, eventfd_t value)
{
	return write(fd, &value, sizeof value) == (ssize_t)sizeof value ? 0 : -1;
}

static ssize_t c_readv(ioreq *r, bool nowait)
{
	if (!nowait)
		return REAL(readv)(r->fd, r->iov, r->iovcnt);
	bb_pd *pd = bb_pd_peek(r->fd);
	if (BB_PD_FORCED(pd))
		return nowait_call(SYS_readv, r->fd, (long)r->iov, r->iovcnt, 0, 0, 0);
	if (pd->kind == BB_FD_SOCKET) {
		struct msghdr m = {.msg_iov = (struct iovec *)r->iov, .msg_iovlen = (size_t)r->iovcnt};
		return nowait_call(SYS_recvmsg, r->fd, (long)&m, MSG_DONTWAIT, 0, 0, 0);
	}
	return NOWAIT_PREADV(r, r->iov, r->iovcnt);
}

static ssize_t c_writev(ioreq *r, bool nowait)
{
	if (!nowait)
		return REAL(writev)(r->fd, r->iov, r->iovcnt);
	bb_pd *pd = bb_pd_peek(r->fd);
	if (BB_PD_FORCED(pd))
		return nowait_call(SYS_writev, r->fd, (long)r->iov, r->iovcnt, 0, 0, 0);
	if (pd->kind == BB_FD_SOCKET) {
		struct msghdr m = {.msg_iov = (struct iovec *)r->iov, .msg_iovlen = (size_t)r->iovcnt};
		return nowait_call(SYS_sendmsg, r->fd, (long)&m, MSG_DONTWAIT, 0, 0, 0);
	}
	return NOWAIT_PWRITEV(r, r->iov, r->iovcnt);
}

BB_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	ioreq r = {.fd = fd, .mode = RD, .call = c_readv, .iov = iov, .iovcnt = iovcnt};
	return do_io(&r);
}

/* The bytes of an iovec: its total length. */
static size_t iov_total(const struct iovec *iov, size_t cnt)
{
	size_t len = 0;
	for (size_t i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	return len;
}

/* The rest of a stream transfer whose first part moved done bytes of the
 * iovec: each remaining piece goes to part(fd, p, n, flags), a whole read
 * or write, until one comes back short (end of file, an error, a signal:
 * what follows must not go out or come in past a gap). Returns the bytes
 * moved in all; errno as before. */
static ssize_t iov_rest(int fd, const struct iovec *iov, size_t cnt, size_t done, int flags,
			ssize_t (*part)(int, void *, size_t, int))
{
	int saved = errno;
	size_t skip = done;
	for (size_t i = 0; i < cnt; i++) {
		size_t n = iov[i].iov_len;
		if (skip >= n) {
			skip -= n;
			continue;
		}
		ssize_t k = part(fd, (char *)iov[i].iov_base + skip, n - skip, flags);
		if (k > 0)
			done += (size_t)k;
		if (k < (ssize_t)(n - skip))
			break;
		skip = 0;
	}
	errno = saved;
	return (ssize_t)done;
}

static ssize_t write_part(int fd, void *p, size_t n, int flags)
{
	(void)flags;
	return write(fd, p, n);
}

/* writev is whole too: after a partial write the rest goes out as writes
 * of the remaining pieces */
BB_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	ioreq r = {.fd = fd, .mode = WR, .call = c_writev, .iov = iov, .iovcnt = iovcnt};
	ssize_t n = do_io(&r);
	if (n <= 0 || !bb_on_g())
		return n;
	bb_pd *pd = bb_pd_peek(fd);
	if (pd == NULL || BB_PD_UNB(pd) || pd->kind == BB_FD_FILE || pd->kind == BB_FD_OTHER)
		return n;
	return iov_rest(fd, iov, (size_t)iovcnt, (size_t)n, 0, write_part);
}

static ssize_t c_recvfrom(ioreq *r, bool nowait)
{
	return REAL(recvfrom)(r->fd, r->buf, r->len, r->flags | (nowait ? MSG_DONTWAIT : 0),
			      r->addr, r->addrlen);
}

/* MSG_WAITALL on a stream socket: the kernel's call waits for the whole
 * length (or end of file, an error, a signal, a time-out), but bobbin's
 * attempts add MSG_DONTWAIT, which makes it give what is there. After a
 * first part of n bytes, whether the rest is owed. */
static bool waitall_owes(int fd, int flags, ssize_t n, size_t len)
{
	if (!(flags & MSG_WAITALL) || (flags & MSG_PEEK) || n <= 0 || (size_t)n >= len)
		return false;
	int type = 0;
	socklen_t tl = sizeof type;
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM;
}

/* the rest of a MSG_WAITALL read, part by part as the kernel's would:
 * what arrived when it stops early (end of file, error, signal) */
static ssize_t waitall_rest(ioreq *r, ssize_t got)
{
	int saved = errno;
	char *base = r->buf;
	size_t len = r->len;
	while ((size_t)got < len) {
		r->buf = base + got;
		r->len = len - (size_t)got;
		ssize_t k = do_io(r);
		if (k <= 0)
			break;
		got += k;
	}
	errno = saved;
	return got;
}

BB_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
			   socklen_t *addrlen)
{
	if (flags & MSG_DONTWAIT) {
		nowait_point();
		return REAL(recvfrom)(fd, buf, len, flags, addr, addrlen);
	}
	ioreq r = {.fd = fd, .mode = RD, .call = c_recvfrom, .buf = buf, .len = len,
		   .flags = flags, .addr = addr, .addrlen = addrlen};
	ssize_t n = do_io(&r);
	if (__builtin_expect(flags & MSG_WAITALL, 0) && waitall_owes(fd, flags, n, len))
		n = waitall_rest(&r, n);
	return n;
}

BB_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return recvfrom(fd, buf, len, flags, NULL, NULL);
}

static ssize_t waitall_part(int fd, void *p, size_t n, int flags)
{
	ioreq piece = {.fd = fd, .mode = RD, .call = c_recvfrom, .buf = p, .len = n,
		       .flags = flags};
	return waitall_rest(&piece, 0);
}

static ssize_t send_part(int fd, void *p, size_t n, int flags)
{
	return sendto(fd, p, n, flags, NULL, 0);
}

static ssize_t c_recvmsg(ioreq *r, bool nowait)
{
	return REAL(recvmsg)(r->fd, r->msg, r->flags | (nowait ? MSG_DONTWAIT : 0));
}

BB_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (flags & MSG_DONTWAIT) {
		nowait_point();
		return REAL(recvmsg)(fd, msg, flags);
	}
	ioreq r = {.fd = fd, .mode = RD, .call = c_recvmsg, .msg = msg, .flags = flags};
	ssize_t n = do_io(&r);
	if (__builtin_expect(!(flags & MSG_WAITALL), 1) || n <= 0 ||
	    !waitall_owes(fd, flags, n, iov_total(msg->msg_iov, msg->msg_iovlen)))
		return n;
	/* the rest into what the iovec has left, one piece at a time (no
	 * ancillary data or address with it: the kernel gives those with the
	 * first part) */
	return iov_rest(fd, msg->msg_iov, msg->msg_iovlen, (size_t)n, flags, waitall_part);
}

static ssize_t c_sendto(ioreq *r, bool nowait)
{
	return REAL(sendto)(r->fd, r->buf, r->len, r->flags | (nowait ? MSG_DONTWAIT : 0),
			    r->addr, r->addrlen ? *r->addrlen : 0);
}

BB_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			 const struct sockaddr *addr, socklen_t addrlen)
{
	if (flags & MSG_DONTWAIT) {
		nowait_point();
		return REAL(sendto)(fd, buf, len, flags, addr, addrlen);
	}
	ioreq r = {.fd = fd, .mode = WR, .call = c_sendto, .buf = (void *)buf, .len = len,
		   .flags = flags, .addr = (struct sockaddr *)addr, .addrlen = &addrlen};
	return do_write_all(&r);
}

BB_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	return sendto(fd, buf, len, flags, NULL, 0);
}

static ssize_t c_sendmsg(ioreq *r, bool nowait)
{
	return REAL(sendmsg)(r->fd, r->msg, r->flags | (nowait ? MSG_DONTWAIT : 0));
}

/* A blocking sendmsg on a stream socket sends everything, as the kernel's
 * does; bobbin's attempts add MSG_DONTWAIT, with which the kernel sends
 * what fits. After a short first part (which carried the ancillary data,
 * once, as the kernel's first part does), the rest of the iovec goes with
 * plain sends, each made whole (do_write_all). */
/* fds passed in SCM_RIGHTS may reach another process: a socket or pipe
 * bobbin keeps non-blocking goes back to blocking first (its open file
 * description, and O_NONBLOCK with it, is shared with the receiver) */
static void unforce_passed(const struct msghdr *msg)
{
	if (msg == NULL || msg->msg_controllen == 0 || !bb_active)
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		const int *fds = (const int *)CMSG_DATA(c);
		for (size_t i = 0; i < n; i++)
			bb_fd_unforce(fds[i]);
	}
}

BB_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	unforce_passed(msg);
	if (flags & MSG_DONTWAIT) {
		nowait_point();
		return REAL(sendmsg)(fd, msg, flags);
	}
	ioreq r = {.fd = fd, .mode = WR, .call = c_sendmsg, .msg = (struct msghdr *)msg,
		   .flags = flags};
	ssize_t n = do_io(&r);
	if (n <= 0 || !bb_on_g())
		return n;
	bb_pd *pd = bb_pd_peek(fd);
	int type = 0;
	socklen_t tl = sizeof type;
	if ((size_t)n >= iov_total(msg->msg_iov, msg->msg_iovlen) || pd == NULL || BB_PD_UNB(pd) || pd->kind != BB_FD_SOCKET ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM)
		return n;
	return iov_rest(fd, msg->msg_iov, msg->msg_iovlen, (size_t)n, flags, send_part);
}

/* accept: on a socket bobbin made non-blocking, accept4 until it stops
 * saying EAGAIN; on another blocking socket, readiness first, then accept
 * inside entersyscall (another G may win the connection: then we block
 * there and sysmon hands our P on). The new socket is non-blocking for real
 * unless the program asked otherwise. */
static ssize_t c_accept(ioreq *r, bool nowait)
{
	return REAL(accept4)(r->fd, r->addr, r->addrlen, r->flags);
}

BB_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	if (!bb_on_g()) { /* the connection made blocking, as the kernel's */
		ioreq r = {.fd = fd, .mode = RD, .call = c_accept, .addr = addr,
			   .addrlen = addrlen, .flags = flags};
		return (int)io_off_g(&r);
	}
	bb_pd *pd = bb_fd_view(fd);
	if (pd == NULL || pd->kind != BB_FD_SOCKET) /* see do_io */
		return BB_IN_SYSCALL(int, REAL(accept4)(fd, addr, addrlen, flags), true);
	int saved = errno;
	bool user_nb = (flags & SOCK_NONBLOCK) != 0;
	for (;;) {
		bb_testcancel();
		int nfd = -1;
		if (BB_PD_FORCED(pd) || BB_PD_UNB(pd)) {
			/* only where bobbin keeps it non-blocking is the call
			 * sure not to wait (see do_io) */
			nfd = BB_PD_FORCED(pd)
				      ? REAL(accept4)(fd, addr, addrlen, flags | SOCK_NONBLOCK)
				      : BB_IN_SYSCALL(int, REAL(accept4)(fd, addr, addrlen,
									 flags | SOCK_NONBLOCK),
						      true);
			if (nfd < 0 && (BB_PD_UNB(pd) || (errno != EAGAIN && errno != EWOULDBLOCK)))
				return -1;
		} else {
			struct pollfd p = {fd, POLLIN, 0};
			if (bb_rawsyscall6(SYS_poll, (long)&p, 1, 0, 0, 0, 0) > 0) {
				ioreq r = {.fd = fd, .mode = RD, .call = c_accept, .addr = addr,
					   .addrlen = addrlen, .flags = flags | SOCK_NONBLOCK};
				nfd = (int)blocking_call(&r);
				if (nfd < 0)
					return -1;
			}
		}
		if (nfd >= 0) {
			bb_fd_own_socket(nfd, user_nb);
			bb_fd_inherit_timeouts(nfd, fd);
			errno = saved;
			return nfd;
		}
		int err = bb_netpoll_wait(fd, RD, deadline_of(pd, RD));
		if (bb_take_eintr()) {
			errno = EINTR; /* a handler without SA_RESTART ran meanwhile */
			return -1;
		}
		if (err == ETIMEDOUT || err == EBADF) {
			errno = err == ETIMEDOUT ? EAGAIN : EBADF;
			return -1;
		}
		if (err == EPERM)
			return REAL(accept4)(fd, addr, addrlen, flags);
	}
}

BB_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
	return accept4(fd, addr, addrlen, 0);
}

/* A non-blocking connect to a Unix-domain listener whose backlog is full
 * fails with EAGAIN; a blocking one waits in the kernel for room, and no
 * readiness of our socket tells when there is. Try again after a pause
 * that doubles from 20 µs to 2 ms, as long as SO_SNDTIMEO allows (then
 * EAGAIN, as the kernel's timed-out connect); a handler without SA_RESTART
 * ends the wait with EINTR, as it ends the kernel's. */
static int connect_when_room(int fd, const struct sockaddr *addr, socklen_t len, bb_pd *pd)
{
	int64_t deadline = deadline_of(pd, WR), pause = 0;
	for (;;) {
		int err = pause_for_room(&pause, deadline);
		if (err == EINTR) {
			errno = EINTR;
			return -1;
		}
		int r = REAL(connect)(fd, addr, len);
		if (r == 0 || errno != EAGAIN || err == ETIMEDOUT)
			return r; /* at the deadline: the kernel's EAGAIN */
	}
}

/* the outcome of a non-blocking connect the socket was writable after */
static int connect_outcome(int fd, int saved)
{
	int soerr = 0;
	socklen_t sl = sizeof soerr;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
		return -1;
	if (soerr != 0) {
		errno = soerr;
		return -1;
	}
	errno = saved;
	return 0;
}

static int connect_off_g(int fd, const struct sockaddr *addr, socklen_t len)
{
	bb_pd *pd = bb_fd_forced_off_g(fd);
	int saved = errno, tries = 0, step = 0;
	int64_t deadline = pd ? deadline_of(pd, WR) : 0;
	int r = REAL(connect)(fd, addr, len);
	/* a Unix listener's full backlog: try again after pauses */
	while (pd && r != 0 && errno == EAGAIN) {
		if (pause_off_g(&step, deadline) != 0) {
			errno = EAGAIN;
			return -1;
		}
		r = REAL(connect)(fd, addr, len);
	}
	if (pd == NULL || r == 0 || errno != EINPROGRESS)
		return r;
	short ev = POLLOUT;
	if (wait_off_g(&fd, &ev, 1, deadline, &tries) != 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	return connect_outcome(fd, saved);
}

/* connect on a socket the program sees as blocking: a non-blocking connect,
 * then wait for writability and read the outcome from SO_ERROR */
BB_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (!bb_on_g())
		return connect_off_g(fd, addr, len);
	bb_pd *pd = bb_fd_view(fd);
	/* closed when looked at, or a socket bobbin does not keep non-blocking:
	 * the kernel's call, which may wait (see do_io) */
	if (pd == NULL || !BB_PD_FORCED(pd))
		return BB_IN_SYSCALL(int, REAL(connect)(fd, addr, len), true);
	if (BB_PD_UNB(pd))
		return REAL(connect)(fd, addr, len); /* the program's EINPROGRESS */
	int saved = errno;
	bb_testcancel();
	int r = REAL(connect)(fd, addr, len);
	if (r != 0 && errno == EAGAIN)
		r = connect_when_room(fd, addr, len, pd);
	if (r == 0)
		errno = saved;
	if (r == 0 || errno != EINPROGRESS)
		return r;
	int err = bb_netpoll_wait(fd, WR, deadline_of(pd, WR));
	bb_testcancel();
	if (bb_take_eintr()) {
		errno = EINTR; /* the connection goes on, as the kernel's does */
		return -1;
	}
	if (err == ETIMEDOUT || err == EBADF) {
		errno = err == ETIMEDOUT ? ETIMEDOUT : EBADF;
		return -1;
	}
	return connect_outcome(fd, saved);
}

/* positioned I/O: regular files (and ESPIPE for the rest), inside
 * entersyscall like blocking.c's calls; a preemption point, as do_io is
 * (4 threads looping on pread of a cached file at BOBBIN_MAXPROCS=1: one
 * kept the P for ever, the others never started and a sleeper never woke) */
#define IN_SYSCALL(name, params, args)                \
	BB_EXPORT ssize_t name params                  \
	{                                              \
		if (!bb_on_g())                        \
			return REAL(name) args;        \
		bb_preempt_point();                    \
		bb_entersyscall();                     \
		ssize_t n_ = REAL(name) args;          \
		int e_ = errno;                        \
		bb_exitsyscall();                      \
		errno = e_;                            \
		return n_;                             \
	}

IN_SYSCALL(pread, (int fd, void *buf, size_t len, off_t off), (fd, buf, len, off))
IN_SYSCALL(pwrite, (int fd, const void *buf, size_t len, off_t off), (fd, buf, len, off))
IN_SYSCALL(preadv, (int fd, const struct iovec *iov, int cnt, off_t off), (fd, iov, cnt, off))
IN_SYSCALL(pwritev, (int fd, const struct iovec *iov, int cnt, off_t off), (fd, iov, cnt, off))

BB_EXPORT ssize_t pread64(int fd, void *buf, size_t len, off_t off) __attribute__((alias("pread")));
BB_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off) __attribute__((alias("pwrite")));

/* ---- sendfile, splice, recvmmsg, sendmmsg ---- */

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/sendfile.h>

static void *next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

/* preadv2/pwritev2 at the current position (-1) with no flags are readv and
 * writev (glibc's call its internal ones, out of interposition's reach: a
 * pipe's read or write then held its OS thread in the kernel, and a
 * preemption signal could cut a write short that natively is whole);
 * anything else is the call itself, inside entersyscall */
#define V2_CALL(name, vname)                                                            \
	BB_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt, off_t off, int flags) \
	{                                                                               \
		static ssize_t (*real)(int, const struct iovec *, int, off_t, int);      \
		if (real == NULL)                                                       \
			real = (ssize_t(*)(int, const struct iovec *, int, off_t, int))next(#name); \
		if (off == -1 && flags == 0)                                            \
			return vname(fd, iov, cnt);                                     \
		if (!bb_on_g())                                                         \
			return real(fd, iov, cnt, off, flags);                          \
		bb_entersyscall();                                                      \
		ssize_t n = real(fd, iov, cnt, off, flags);                             \
		int e = errno;                                                          \
		bb_exitsyscall();                                                       \
		errno = e;                                                              \
		return n;                                                               \
	}

V2_CALL(preadv2, readv)
V2_CALL(pwritev2, writev)

BB_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
	__attribute__((alias("preadv2")));
BB_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
	__attribute__((alias("pwritev2")));

/* out is a socket: a socket bobbin made non-blocking waits for room on the
 * netpoller (off a G: in poll), and sends the whole count, as the kernel's
 * sendfile to a blocking socket does (unless the input ends first, or a
 * signal or an error stops it after part: then the part); any other out fd
 * blocks inside entersyscall */
BB_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	static ssize_t (*real)(int, int, off_t *, size_t);
	if (real == NULL)
		real = (ssize_t(*)(int, int, off_t *, size_t))next("sendfile");
	bool on_g = bb_on_g();
	bb_pd *pd = on_g ? bb_fd_view(out) : bb_fd_forced_off_g(out);
	if (!bb_pd_waits_for_program(pd)) {
		if (!on_g || (pd && BB_PD_FORCED(pd))) /* the program's own EAGAIN */
			return real(out, in, off, count);
		bb_entersyscall(); /* may wait in the kernel (see connect) */
		ssize_t n = real(out, in, off, count);
		int e = errno;
		bb_exitsyscall();
		errno = e;
		return n;
	}
	int saved = errno, tries = 0;
	int64_t deadline = deadline_of(pd, WR);
	short ev = POLLOUT;
	size_t done = 0;
	while (done < count) {
		ssize_t n = real(out, in, off, count - done);
		if (n > 0) {
			done += (size_t)n;
			tries = 0;
			continue;
		}
		if (n == 0) /* the input has ended */
			break;
		if (errno != EAGAIN)
			return done > 0 ? (ssize_t)done : -1;
		int err = on_g ? bb_netpoll_wait(out, WR, deadline)
			       : wait_off_g(&out, &ev, 1, deadline, &tries);
		if (on_g && bb_take_eintr()) {
			if (done > 0)
				break;
			errno = EINTR;
			return -1;
		}
		if (err) {
			if (done > 0)
				break;
			errno = err == EBADF ? EBADF : EAGAIN;
			return -1;
		}
	}
	errno = saved;
	return (ssize_t)done;
}

BB_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count) __attribute__((alias("sendfile")));

/* splice, tee and vmsplice: one call between pipes (and a file or socket
 * for splice), made by op with the flags given. Where the program expects
 * it to block: a non-blocking call, and between tries a wait for either
 * end (fds, events). Off a G it blocks its OS thread, unless an end is one
 * bobbin keeps non-blocking (a wait in poll then). */
typedef struct pipeop {
	ssize_t (*op)(const struct pipeop *p, unsigned flags);
	int in, out;
	loff_t *offin, *offout;
	size_t len;
	const struct iovec *iov;
} pipeop;

static ssize_t pipe_call(const pipeop *p, const int *fds, const short *ev, int n, unsigned flags)
{
	if (flags & SPLICE_F_NONBLOCK)
		return p->op(p, flags);
	int saved = errno;
	if (!bb_on_g()) {
		bool forced = false;
		for (int i = 0; i < n; i++)
			forced |= bb_fd_forced_off_g(fds[i]) != NULL;
		if (!forced)
			return p->op(p, flags);
		for (int tries = 0;;) {
			ssize_t k = p->op(p, flags);
			if (k >= 0 || errno != EAGAIN) {
				if (k >= 0)
					errno = saved;
				return k;
			}
			wait_off_g(fds, ev, n, 0, &tries);
		}
	}
	int pfd[2];
	short pev[2];
	int np = 0;
	for (;;) {
		ssize_t k = p->op(p, flags | SPLICE_F_NONBLOCK);
		if (k >= 0) {
			errno = saved;
			return k;
		}
		if (errno != EAGAIN)
			return -1;
		int err = bb_netpoll_wait_many(np ? pfd : fds, np ? pev : ev, np ? np : n, 0);
		if (bb_take_eintr()) {
			errno = EINTR;
			return -1;
		}
		if (err == EPERM && np == 0) {
			/* an end that cannot be polled, a regular file, is always
			 * ready: wait for the others (the pipe a file is spliced
			 * into or out of), which may be ones bobbin keeps
			 * non-blocking for real, where a blocking call would only
			 * answer EAGAIN (Rust's io::copy from a child's stdout) */
			for (int i = 0; i < n; i++) {
				struct stat st;
				if (fds[i] >= 0 && bb_sys(SYS_fstat, fds[i], &st, 0) == 0 && !S_ISREG(st.st_mode) &&
				    !S_ISBLK(st.st_mode) && !S_ISDIR(st.st_mode)) {
					pfd[np] = fds[i];
					pev[np++] = ev[i];
				}
			}
			if (np > 0 && np < n)
				continue;
			np = 0;
		}
		if (err == EPERM) { /* no end that can be polled */
			bb_entersyscall();
			k = p->op(p, flags);
			int e = errno;
			bb_exitsyscall();
			errno = e;
			return k;
		}
	}
}

static ssize_t (*real_splice)(int, loff_t *, int, loff_t *, size_t, unsigned);
static ssize_t (*real_tee)(int, int, size_t, unsigned);
static ssize_t (*real_vmsplice)(int, const struct iovec *, size_t, unsigned);

static ssize_t op_splice(const pipeop *p, unsigned flags)
{
	return real_splice(p->in, p->offin, p->out, p->offout, p->len, flags);
}

static ssize_t op_tee(const pipeop *p, unsigned flags)
{
	return real_tee(p->in, p->out, p->len, flags);
}

static ssize_t op_vmsplice(const pipeop *p, unsigned flags)
{
	return real_vmsplice(p->out, p->iov, p->len, flags);
}

BB_EXPORT ssize_t splice(int in, loff_t *offin, int out, loff_t *offout, size_t len,
			 unsigned flags)
{
	if (real_splice == NULL)
		real_splice = (ssize_t(*)(int, loff_t *, int, loff_t *, size_t, unsigned))next("splice");
	pipeop p = {op_splice, in, out, offin, offout, len, NULL};
	int fds[2] = {in, out};
	short ev[2] = {POLLIN, POLLOUT};
	return pipe_call(&p, fds, ev, 2, flags);
}

BB_EXPORT ssize_t tee(int in, int out, size_t len, unsigned flags)
{
	if (real_tee == NULL)
		real_tee = (ssize_t(*)(int, int, size_t, unsigned))next("tee");
	pipeop p = {op_tee, in, out, NULL, NULL, len, NULL};
	int fds[2] = {in, out};
	short ev[2] = {POLLIN, POLLOUT};
	return pipe_call(&p, fds, ev, 2, flags);
}

/* vmsplice's fd is the pipe, written to (user pages in) or read from:
 * waiting for either event, only the one its end can have comes */
BB_EXPORT ssize_t vmsplice(int fd, const struct iovec *iov, size_t n, unsigned flags)
{
	if (real_vmsplice == NULL)
		real_vmsplice = (ssize_t(*)(int, const struct iovec *, size_t, unsigned))next("vmsplice");
	pipeop p = {op_vmsplice, -1, fd, NULL, NULL, n, iov};
	short ev = POLLIN | POLLOUT;
	return pipe_call(&p, &fd, &ev, 1, flags);
}

static int (*real_recvmmsg)(int, struct mmsghdr *, unsigned, int, struct timespec *);
static int (*real_sendmmsg)(int, struct mmsghdr *, unsigned, int);

static ssize_t c_recvmmsg(ioreq *r, bool nowait)
{
	return real_recvmmsg(r->fd, (struct mmsghdr *)r->msg, (unsigned)r->len,
			     r->flags | (nowait ? MSG_DONTWAIT : 0), r->ts);
}

static ssize_t c_sendmmsg(ioreq *r, bool nowait)
{
	return real_sendmmsg(r->fd, (struct mmsghdr *)r->msg, (unsigned)r->len,
			     r->flags | (nowait ? MSG_DONTWAIT : 0));
}

/* With a timeout, recvmmsg keeps its kernel semantics inside entersyscall
 * (the timeout is looked at only after each datagram: the kernel's waits
 * for the first one without end). On a socket bobbin keeps non-blocking,
 * the wait for the first datagram is bobbin's, then the call takes what
 * has come. */
BB_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *ts)
{
	if (real_recvmmsg == NULL)
		real_recvmmsg = (int (*)(int, struct mmsghdr *, unsigned, int, struct timespec *))next("recvmmsg");
	bool on_g = bb_on_g();
	if (on_g && (flags & MSG_DONTWAIT))
		bb_preempt_point();
	if ((flags & MSG_DONTWAIT) || (!on_g && !bb_fd_forced_off_g(fd)))
		return real_recvmmsg(fd, v, n, flags, ts);
	bb_pd *pd = on_g ? bb_fd_view(fd) : NULL;
	if (on_g && ts && (pd == NULL || !BB_PD_FORCED(pd))) {
		bb_entersyscall();
		int r = real_recvmmsg(fd, v, n, flags, ts);
		int e = errno;
		bb_exitsyscall();
		errno = e;
		return r;
	}
	ioreq r = {.fd = fd, .mode = RD, .call = c_recvmmsg, .msg = (struct msghdr *)v,
		   .len = n, .flags = flags, .ts = ts};
	return (int)do_io(&r);
}

BB_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	if (real_sendmmsg == NULL)
		real_sendmmsg = (int (*)(int, struct mmsghdr *, unsigned, int))next("sendmmsg");
	for (unsigned i = 0; v && i < n; i++)
		unforce_passed(&v[i].msg_hdr);
	if (flags & MSG_DONTWAIT) {
		nowait_point();
		return real_sendmmsg(fd, v, n, flags);
	}
	if (!bb_on_g() && !bb_fd_forced_off_g(fd))
		return real_sendmmsg(fd, v, n, flags);
	ioreq r = {.fd = fd, .mode = WR, .call = c_sendmmsg, .msg = (struct msghdr *)v,
		   .len = n, .flags = flags};
	return (int)do_io(&r);
}
