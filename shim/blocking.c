/*
 * blocking.c — calls that cannot be polled and may block for long: they run
 * between entersyscall and exitsyscall, so the G's P moves on to other Gs
 * (sysmon hands it off after 20 µs when work waits) and the OS thread count
 * grows only by the calls actually blocked. errno is the call's own.
 */
#include "realio.h"

#include <dlfcn.h>
#include <errno.h>

#define SYSCALL_WRAP(ret, name, params, args)           \
	BB_EXPORT ret name params                        \
	{                                                \
		if (!bb_on_g())                          \
			return REAL(name) args;          \
		bb_testcancel();                         \
		bb_g *g_ = bb_getg();                    \
		bb_entersyscall();                       \
		g_->in_cancel_call = true;               \
		ret r_ = REAL(name) args;                \
		g_->in_cancel_call = false;              \
		int e_ = errno;                          \
		bb_exitsyscall();                        \
		errno = e_;                              \
		return r_;                               \
	}

SYSCALL_WRAP(pid_t, waitpid, (pid_t pid, int *st, int opt), (pid, st, opt))
SYSCALL_WRAP(pid_t, wait, (int *st), (st))
SYSCALL_WRAP(pid_t, wait4, (pid_t pid, int *st, int opt, struct rusage *ru), (pid, st, opt, ru))
SYSCALL_WRAP(int, waitid, (idtype_t t, id_t id, siginfo_t *si, int opt), (t, id, si, opt))
SYSCALL_WRAP(int, flock, (int fd, int op), (fd, op))
SYSCALL_WRAP(int, fsync, (int fd), (fd))
SYSCALL_WRAP(int, fdatasync, (int fd), (fd))
SYSCALL_WRAP(int, system, (const char *cmd), (cmd))
SYSCALL_WRAP(int, pause, (void), ())

/* name resolution, SysV IPC and signal waits: may block for long, cannot be
 * polled */
#include <netdb.h>
#include <sys/msg.h>
#include <sys/sem.h>


static void *next_sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

#define WRAP_NEXT(ret, name, params, args)                               \
	BB_EXPORT ret name params                                         \
	{                                                                 \
		static ret(*real) params;                                 \
		if (real == NULL)                                         \
			real = (ret(*) params)next_sym(#name);            \
		if (!bb_on_g())                                           \
			return real args;                                 \
		bb_testcancel();                                          \
		bb_entersyscall();                                        \
		ret r_ = real args;                                       \
		int e_ = errno;                                           \
		bb_exitsyscall();                                         \
		errno = e_;                                               \
		return r_;                                                \
	}

/* the same, for calls that glibc makes cancellation points and that
 * pthread_cancel may interrupt with SIGCANCEL (cancel.c) */
#define WRAP_NEXT_CANCEL(ret, name, params, args)                               \
	BB_EXPORT ret name params                                         \
	{                                                                 \
		static ret(*real) params;                                 \
		if (real == NULL)                                         \
			real = (ret(*) params)next_sym(#name);            \
		if (!bb_on_g())                                           \
			return real args;                                 \
		bb_testcancel();                                          \
		bb_g *g_ = bb_getg();                                     \
		bb_entersyscall();                                        \
		g_->in_cancel_call = true;                                \
		ret r_ = real args;                                       \
		g_->in_cancel_call = false;                               \
		int e_ = errno;                                           \
		bb_exitsyscall();                                         \
		errno = e_;                                               \
		return r_;                                                \
	}

WRAP_NEXT(int, getaddrinfo, (const char *node, const char *svc, const struct addrinfo *hints,
			     struct addrinfo **res), (node, svc, hints, res))
WRAP_NEXT(int, getnameinfo, (const struct sockaddr *sa, socklen_t salen, char *host,
			     socklen_t hostlen, char *serv, socklen_t servlen, int flags),
	  (sa, salen, host, hostlen, serv, servlen, flags))
WRAP_NEXT(struct hostent *, gethostbyname, (const char *name), (name))
WRAP_NEXT(struct hostent *, gethostbyname2, (const char *name, int af), (name, af))
WRAP_NEXT(int, gethostbyname_r, (const char *name, struct hostent *ret, char *buf, size_t len,
				 struct hostent **result, int *h_errnop),
	  (name, ret, buf, len, result, h_errnop))
WRAP_NEXT(struct hostent *, gethostbyaddr, (const void *addr, socklen_t len, int type),
	  (addr, len, type))
WRAP_NEXT(ssize_t, msgrcv, (int id, void *msg, size_t sz, long type, int flg),
	  (id, msg, sz, type, flg))
WRAP_NEXT(int, msgsnd, (int id, const void *msg, size_t sz, int flg), (id, msg, sz, flg))
WRAP_NEXT(int, semop, (int id, struct sembuf *ops, size_t n), (id, ops, n))
WRAP_NEXT(int, semtimedop, (int id, struct sembuf *ops, size_t n, const struct timespec *ts),
	  (id, ops, n, ts))
WRAP_NEXT_CANCEL(int, sigwait, (const sigset_t *set, int *sig), (set, sig))
WRAP_NEXT_CANCEL(int, sigwaitinfo, (const sigset_t *set, siginfo_t *info), (set, info))
WRAP_NEXT_CANCEL(int, sigtimedwait, (const sigset_t *set, siginfo_t *info, const struct timespec *ts),
	  (set, info, ts))
WRAP_NEXT_CANCEL(int, sigsuspend, (const sigset_t *mask), (mask))
