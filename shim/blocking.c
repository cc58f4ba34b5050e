/*
 * blocking.c — calls that cannot be polled and may block for long: they run
 * between entersyscall and exitsyscall, so the G's P moves on to other Gs
 * (sysmon hands it off after 20 µs when work waits) and the OS thread count
 * grows only by the calls actually blocked. errno is the call's own.
 */
#include "realio.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <errno.h>

/* The body every wrapper shares: BB_IN_SYSCALL (shim.h), returned. */
#define IN_SYSCALL(ret, call, cancel) return BB_IN_SYSCALL(ret, call, cancel)

/* for a call in realio.h's table */
#define SYSCALL_WRAP(ret, name, params, args, cancel) \
	BB_EXPORT ret name params                      \
	{                                              \
		if (!bb_on_g())                        \
			return REAL(name) args;        \
		IN_SYSCALL(ret, REAL(name) args, cancel); \
	}

/* The wait functions block in the kernel (inside entersyscall), with the
 * G kept on its OS thread for the call (locked for its duration): a
 * traced child's stops are reported to its tracer's wait, and the kernel
 * answers ptrace requests only from the tracer's own OS thread, the one
 * that forked a PTRACE_TRACEME child; a wait that came back on another OS
 * thread left the tracer's next request failing with ESRCH. (A wait on
 * the poller, through the child's pidfd, would spare the OS thread, but a
 * pidfd announces no tracing stop, and the park itself may move the
 * thread.) */
#define WAIT_WRAP(ret, name, params, args)                      \
	BB_EXPORT ret name params                               \
	{                                                       \
		if (!bb_on_g())                                 \
			return REAL(name) args;                 \
		bb_lock_os_thread();                            \
		ret r_ = BB_IN_SYSCALL(ret, REAL(name) args, true); \
		bb_unlock_os_thread();                          \
		return r_;                                      \
	}

WAIT_WRAP(pid_t, waitpid, (pid_t pid, int *st, int opt), (pid, st, opt))
WAIT_WRAP(pid_t, wait4, (pid_t pid, int *st, int opt, struct rusage *ru), (pid, st, opt, ru))
WAIT_WRAP(pid_t, wait, (int *st), (st))
WAIT_WRAP(int, waitid, (idtype_t t, id_t id, siginfo_t *si, int opt), (t, id, si, opt))
SYSCALL_WRAP(int, flock, (int fd, int op), (fd, op), false)
SYSCALL_WRAP(int, fsync, (int fd), (fd), true)
SYSCALL_WRAP(int, fdatasync, (int fd), (fd), true)
/* system spawns through glibc's internal posix_spawn: the sockets the
 * shell inherits go back to blocking first (exec.c) */
BB_EXPORT int system(const char *cmd)
{
	if (bb_active)
		bb_fd_unforce_inheritable();
	if (!bb_on_g())
		return REAL(system)(cmd);
	IN_SYSCALL(int, REAL(system)(cmd), false);
}
/* made again when only bobbin's own SIGURG ended it (a preemption signal
 * that landed as it began), as BB_NOWAIT makes a call again: natively
 * nothing else ends a pause */
BB_EXPORT int pause(void)
{
	if (!bb_on_g())
		return REAL(pause)();
	return BB_NOWAIT(int, BB_IN_SYSCALL(int, REAL(pause)(), true));
}

/* name resolution, SysV IPC and signal waits: may block for long, cannot be
 * polled */
#include <mqueue.h>
#include <netdb.h>
#include <sys/msg.h>
#include <termios.h>
#include <unistd.h>
#include <sys/sem.h>

static void *next_sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

/* for a call resolved here, on first use */
#define WRAP_NEXT(ret, name, params, args, cancel)                  \
	BB_EXPORT ret name params                                    \
	{                                                            \
		static ret(*real) params;                            \
		if (real == NULL)                                    \
			real = (ret(*) params)next_sym(#name);       \
		if (!bb_on_g())                                      \
			return real args;                            \
		IN_SYSCALL(ret, real args, cancel);                  \
	}

WRAP_NEXT(int, getaddrinfo, (const char *node, const char *svc, const struct addrinfo *hints,
			     struct addrinfo **res), (node, svc, hints, res), false)
WRAP_NEXT(int, getnameinfo, (const struct sockaddr *sa, socklen_t salen, char *host,
			     socklen_t hostlen, char *serv, socklen_t servlen, int flags),
	  (sa, salen, host, hostlen, serv, servlen, flags), false)
WRAP_NEXT(struct hostent *, gethostbyname, (const char *name), (name), false)
WRAP_NEXT(struct hostent *, gethostbyname2, (const char *name, int af), (name, af), false)
WRAP_NEXT(int, gethostbyname_r, (const char *name, struct hostent *ret, char *buf, size_t len,
				 struct hostent **result, int *h_errnop),
	  (name, ret, buf, len, result, h_errnop), false)
WRAP_NEXT(struct hostent *, gethostbyaddr, (const void *addr, socklen_t len, int type),
	  (addr, len, type), false)
WRAP_NEXT(ssize_t, msgrcv, (int id, void *msg, size_t sz, long type, int flg),
	  (id, msg, sz, type, flg), true)
WRAP_NEXT(int, msgsnd, (int id, const void *msg, size_t sz, int flg), (id, msg, sz, flg), true)
/* more cancellation points that may wait for long: a record lock another
 * process holds, a terminal's output draining, a POSIX message queue */
WRAP_NEXT(int, lockf, (int fd, int cmd, off_t len), (fd, cmd, len), true)
WRAP_NEXT(int, lockf64, (int fd, int cmd, off64_t len), (fd, cmd, len), true)
WRAP_NEXT(int, tcdrain, (int fd), (fd), true)
/* A POSIX message queue descriptor is an fd the poller can watch
 * (readable: a message waits; writable: there is room). A receive or send
 * that would block asks the kernel with an absolute time-out already past,
 * then waits on the poller, instead of holding an OS thread: a thread per
 * queue is a common design. A queue opened O_NONBLOCK answers EAGAIN
 * itself; the caller's own time-out (CLOCK_REALTIME) becomes a deadline,
 * and an invalid one fails with EINVAL only when the call would block, as
 * natively. mq_close forgets what the poller knew of the number. */
typedef ssize_t (*mq_io)(mqd_t, char *, size_t, unsigned *, unsigned, const struct timespec *);

static ssize_t mq_rd(mqd_t q, char *msg, size_t len, unsigned *prio, unsigned p,
		     const struct timespec *ts)
{
	static ssize_t (*real)(mqd_t, char *, size_t, unsigned *, const struct timespec *);
	if (real == NULL)
		real = (ssize_t(*)(mqd_t, char *, size_t, unsigned *, const struct timespec *))next_sym(
			"mq_timedreceive");
	(void)p;
	return real(q, msg, len, prio, ts);
}

static ssize_t mq_wr(mqd_t q, char *msg, size_t len, unsigned *prio, unsigned p,
		     const struct timespec *ts)
{
	static int (*real)(mqd_t, const char *, size_t, unsigned, const struct timespec *);
	if (real == NULL)
		real = (int (*)(mqd_t, const char *, size_t, unsigned, const struct timespec *))next_sym(
			"mq_timedsend");
	(void)prio;
	return real(q, msg, len, p, ts);
}

/* mode: 0 waits for a message (receive), 1 for room (send) */
static ssize_t mq_wait(mq_io call, int mode, mqd_t q, char *msg, size_t len, unsigned *prio,
		       unsigned p, const struct timespec *abs)
{
	if (!bb_on_g())
		return call(q, msg, len, prio, p, abs);
	static const struct timespec past = {0, 0};
	int64_t deadline = abs ? bb_abs_deadline(CLOCK_REALTIME, abs) : 0; /* -1: invalid */
	for (;;) {
		bb_testcancel();
		ssize_t r = call(q, msg, len, prio, p, &past);
		if (r >= 0 || errno != ETIMEDOUT)
			return r;
		if (deadline < 0) {
			errno = EINVAL;
			return -1;
		}
		if (deadline && bb_nanotime() >= deadline)
			return -1; /* ETIMEDOUT, the caller's */
		int err = bb_netpoll_wait((int)q, mode, deadline);
		if (bb_take_eintr()) {
			errno = EINTR; /* a handler without SA_RESTART ran */
			return -1;
		}
		if (err == EPERM) /* not watchable after all: wait in the kernel */
			IN_SYSCALL(ssize_t, call(q, msg, len, prio, p, abs), true);
		if (err == EBADF) {
			errno = EBADF; /* closed while we waited */
			return -1;
		}
	}
}

BB_EXPORT ssize_t mq_receive(mqd_t q, char *msg, size_t len, unsigned *prio)
{
	return mq_wait(mq_rd, 0, q, msg, len, prio, 0, NULL);
}

BB_EXPORT ssize_t mq_timedreceive(mqd_t q, char *msg, size_t len, unsigned *prio,
				  const struct timespec *abs)
{
	return mq_wait(mq_rd, 0, q, msg, len, prio, 0, abs);
}

BB_EXPORT int mq_send(mqd_t q, const char *msg, size_t len, unsigned prio)
{
	return (int)mq_wait(mq_wr, 1, q, (char *)msg, len, NULL, prio, NULL);
}

BB_EXPORT int mq_timedsend(mqd_t q, const char *msg, size_t len, unsigned prio,
			   const struct timespec *abs)
{
	return (int)mq_wait(mq_wr, 1, q, (char *)msg, len, NULL, prio, abs);
}

BB_EXPORT int mq_close(mqd_t q)
{
	static int (*real)(mqd_t);
	if (real == NULL)
		real = (int (*)(mqd_t))next_sym("mq_close");
	if (bb_active)
		bb_fd_forget((int)q);
	return real(q);
}

/* wait3 (glibc's calls its internal wait4); tee and vmsplice are io.c's */
WRAP_NEXT(pid_t, wait3, (int *st, int opt, struct rusage *ru), (st, opt, ru), false)
WRAP_NEXT(int, semop, (int id, struct sembuf *ops, size_t n), (id, ops, n), false)
WRAP_NEXT(int, semtimedop, (int id, struct sembuf *ops, size_t n, const struct timespec *ts),
	  (id, ops, n, ts), false)
