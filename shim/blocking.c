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

SYSCALL_WRAP(pid_t, waitpid, (pid_t pid, int *st, int opt), (pid, st, opt), true)
SYSCALL_WRAP(pid_t, wait, (int *st), (st), true)
SYSCALL_WRAP(pid_t, wait4, (pid_t pid, int *st, int opt, struct rusage *ru), (pid, st, opt, ru), true)
SYSCALL_WRAP(int, waitid, (idtype_t t, id_t id, siginfo_t *si, int opt), (t, id, si, opt), true)
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
SYSCALL_WRAP(int, pause, (void), (), true)

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
WRAP_NEXT(ssize_t, mq_receive, (mqd_t q, char *msg, size_t len, unsigned *prio),
	  (q, msg, len, prio), true)
WRAP_NEXT(ssize_t, mq_timedreceive, (mqd_t q, char *msg, size_t len, unsigned *prio,
				     const struct timespec *ts), (q, msg, len, prio, ts), true)
WRAP_NEXT(int, mq_send, (mqd_t q, const char *msg, size_t len, unsigned prio),
	  (q, msg, len, prio), true)
WRAP_NEXT(int, mq_timedsend, (mqd_t q, const char *msg, size_t len, unsigned prio,
			      const struct timespec *ts), (q, msg, len, prio, ts), true)
/* wait3 (glibc's calls its internal wait4); tee and vmsplice are io.c's */
WRAP_NEXT(pid_t, wait3, (int *st, int opt, struct rusage *ru), (st, opt, ru), false)
WRAP_NEXT(int, semop, (int id, struct sembuf *ops, size_t n), (id, ops, n), false)
WRAP_NEXT(int, semtimedop, (int id, struct sembuf *ops, size_t n, const struct timespec *ts),
	  (id, ops, n, ts), false)
