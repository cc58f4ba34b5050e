/*
 * blocking.c — calls that cannot be polled and may block for long: they run
 * between entersyscall and exitsyscall, so the G's P moves on to other Gs
 * (sysmon hands it off after 20 µs when work waits) and the OS thread count
 * grows only by the calls actually blocked. errno is the call's own.
 */
#include "realio.h"

#include <errno.h>

#define SYSCALL_WRAP(ret, name, params, args)           \
	BB_EXPORT ret name params                        \
	{                                                \
		if (!bb_on_g())                          \
			return REAL(name) args;          \
		bb_entersyscall();                       \
		ret r_ = REAL(name) args;                \
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
