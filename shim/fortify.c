/*
 * fortify.c — the _FORTIFY_SOURCE entry points of calls bobbin interposes.
 *
 * A program built with _FORTIFY_SOURCE (Debian builds its packages so)
 * calls __read_chk, __recv_chk, __poll_chk... wherever the compiler knows
 * the buffer's size but not that the call fits it. glibc's versions check
 * the size and then call read, recv, poll by their internal names, which
 * bobbin does not see: on a socket that bobbin keeps non-blocking for real
 * a blocking read answered EAGAIN, and any of them blocked its OS thread.
 * Each entry here makes the same check, by leaving a call that would fail
 * it to glibc's own (which reports the overflow and aborts, as natively),
 * and otherwise is the interposed call.
 */
#include "shim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

static void *glibc_fn(void **cache, const char *name)
{
	if (*cache == NULL)
		*cache = dlsym(RTLD_NEXT, name);
	return *cache;
}

/* glibc's own entry point, for a call that fails its check */
#define GLIBC(name, type) ((type)glibc_fn(&name##_real, #name))

static void *__read_chk_real, *__pread_chk_real, *__pread64_chk_real, *__recv_chk_real,
	*__recvfrom_chk_real, *__poll_chk_real, *__ppoll_chk_real, *__open_2_real,
	*__open64_2_real, *__openat_2_real, *__openat64_2_real;

BB_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		return GLIBC(__read_chk, ssize_t (*)(int, void *, size_t, size_t))(fd, buf, n, buflen);
	return read(fd, buf, n);
}

BB_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		return GLIBC(__pread_chk, ssize_t (*)(int, void *, size_t, off_t, size_t))(
			fd, buf, n, off, buflen);
	return pread(fd, buf, n, off);
}

BB_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
	if (n > buflen)
		return GLIBC(__pread64_chk, ssize_t (*)(int, void *, size_t, off64_t, size_t))(
			fd, buf, n, off, buflen);
	return pread64(fd, buf, n, off);
}

BB_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		return GLIBC(__recv_chk, ssize_t (*)(int, void *, size_t, size_t, int))(
			fd, buf, n, buflen, flags);
	return recv(fd, buf, n, flags);
}

BB_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				 struct sockaddr *from, socklen_t *fromlen)
{
	if (n > buflen)
		return GLIBC(__recvfrom_chk, ssize_t (*)(int, void *, size_t, size_t, int,
							 struct sockaddr *, socklen_t *))(
			fd, buf, n, buflen, flags, from, fromlen);
	return recvfrom(fd, buf, n, flags, from, fromlen);
}

BB_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	if (fdslen / sizeof *fds < nfds)
		return GLIBC(__poll_chk, int (*)(struct pollfd *, nfds_t, int, size_t))(
			fds, nfds, timeout, fdslen);
	return poll(fds, nfds, timeout);
}

BB_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
			  const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof *fds < nfds)
		return GLIBC(__ppoll_chk, int (*)(struct pollfd *, nfds_t, const struct timespec *,
						  const sigset_t *, size_t))(fds, nfds, timeout,
									     mask, fdslen);
	return ppoll(fds, nfds, timeout, mask);
}

/* the open calls _FORTIFY_SOURCE makes when no mode is passed: one that
 * needs a mode (O_CREAT, O_TMPFILE) is glibc's to refuse */
static bool needs_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

BB_EXPORT int __open_2(const char *path, int flags)
{
	if (needs_mode(flags))
		return GLIBC(__open_2, int (*)(const char *, int))(path, flags);
	return open(path, flags);
}

BB_EXPORT int __open64_2(const char *path, int flags)
{
	if (needs_mode(flags))
		return GLIBC(__open64_2, int (*)(const char *, int))(path, flags);
	return open64(path, flags);
}

BB_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	if (needs_mode(flags))
		return GLIBC(__openat_2, int (*)(int, const char *, int))(dirfd, path, flags);
	return openat(dirfd, path, flags);
}

BB_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	if (needs_mode(flags))
		return GLIBC(__openat64_2, int (*)(int, const char *, int))(dirfd, path, flags);
	return openat64(dirfd, path, flags);
}
