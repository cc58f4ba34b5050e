/*
 * fd.c — the program's view of its file descriptors, and the calls that
 * create, change or close them.
 *
 * bobbin changes no file's status flags but those of the sockets and pipes
 * a green thread makes, which it keeps non-blocking for real (as Go does)
 * while only this process uses them: at a fork, exec or spawn, in stdio's
 * hands (fdopen, fd 0-2), they go back to the mode the program asked for
 * (unforce). Others (inherited, terminals, files) may be shared with other
 * processes and are never changed. It learns, per fd, lazily on the first
 * blocking call: what kind of file it is (socket, pipe/FIFO, other pollable,
 * regular file) and whether the *program* asked for O_NONBLOCK — then keeps
 * that view current through fcntl(F_SETFL), ioctl(FIONBIO), setsockopt
 * (SO_RCVTIMEO/SO_SNDTIMEO), and forgets it whenever the number is closed or
 * handed out again (open, socket, accept, pipe, dup, ...), so a reused fd
 * number never inherits a stale view.
 */
#undef _FILE_OFFSET_BITS /* define open, fopen, fcntl themselves, not their 64 names */
#include "realio.h"

#include <aio.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Descriptions are never given back to malloc, only recycled: a thread
 * that read a number's description just before another thread's close put
 * it away still reads a description (stale, as its call is), never freed
 * memory. Any number of threads may close, dup and re-flag one number at
 * once, as the kernel allows. */
bb_fdesc bb_fdesc_none;
static bb_lock desc_lock;
static bb_fdesc *desc_free;

static bb_fdesc *desc_new(bool user_nb, bool forced)
{
	bb_lock_acquire(&desc_lock);
	bb_fdesc *d = desc_free;
	if (d)
		desc_free = d->next_free;
	bb_lock_release(&desc_lock);
	if (d == NULL)
		d = bb_alloc(sizeof *d);
	if (d) {
		atomic_store(&d->refs, 1);
		atomic_store(&d->user_nonblock, user_nb);
		d->forced_nb = forced;
		atomic_store_explicit(&d->rcvtimeo, 0, memory_order_relaxed);
		atomic_store_explicit(&d->sndtimeo, 0, memory_order_relaxed);
		d->next_free = NULL;
	}
	return d;
}

static void unforce(int fd);
static void unforce_via(int fd, int target);

static void desc_put(bb_fdesc *d)
{
	if (d && atomic_fetch_sub(&d->refs, 1) == 1) {
		bb_lock_acquire(&desc_lock);
		d->next_free = desc_free;
		desc_free = d;
		bb_lock_release(&desc_lock);
	}
}

static void set_user_nb(bb_pd *pd, bool v)
{
	if (bb_in_vm_child())
		return; /* a vfork child's change: not the parent's view */
	bb_fdesc *d = bb_pd_desc(pd);
	if (d != &bb_fdesc_none)
		atomic_store_explicit(&d->user_nonblock, v, memory_order_relaxed);
}

/* Give pd the view (kind, d) unless another thread gave it one first (then
 * d goes back). Under pd->lock, as every change of a number's desc. */
static void view_install(bb_pd *pd, bb_fdesc *d, uint8_t kind, bool nowait_ok, bool replace)
{
	bb_fdesc *old = NULL;
	if (bb_in_vm_child()) { /* the table is the parent's */
		desc_put(d);
		return;
	}
	bb_lock_acquire(&pd->lock);
	if (pd->known && !replace) {
		old = d; /* somebody learned it meanwhile: keep theirs */
	} else {
		old = atomic_exchange_explicit(&pd->desc, d, memory_order_acq_rel);
		pd->kind = kind;
		pd->nowait_ok = nowait_ok;
		pd->known = true;
	}
	bb_lock_release(&pd->lock);
	desc_put(old);
}

/* An eventfd, timerfd or inotify fd is waited for on the poller, as a
 * terminal is: a blocking read of one (a worker waiting for its wake-up,
 * a thread on a periodic timer) held an OS thread each. Other anonymous
 * inodes keep blocking in the kernel: a signalfd shows the signals of the
 * thread that reads it, which the poller's is not. */
static uint8_t anon_kind(int fd)
{
	char path[40], link[40];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	long n = bb_sys(SYS_readlink, path, link, sizeof link - 1);
	if (n <= 0)
		return BB_FD_FILE;
	link[n] = '\0';
	return strcmp(link, "anon_inode:[eventfd]") == 0 || strcmp(link, "anon_inode:[timerfd]") == 0 ||
			       strcmp(link, "anon_inode:inotify") == 0
		       ? BB_FD_POLLABLE
		       : BB_FD_FILE;
}

bb_pd *bb_fd_view(int fd)
{
	bb_pd *pd = bb_pd_get(fd);
	if (pd == NULL || pd->known)
		return pd;
	struct stat st;
	long r = bb_sys(SYS_fstat, fd, &st, 0);
	if (r < 0)
		return NULL; /* EBADF: let the real call say so */
	long fl = bb_sys(SYS_fcntl, fd, F_GETFL, 0);
	bb_fdesc *d = desc_new(fl >= 0 && (fl & O_NONBLOCK), false);
	if (d == NULL)
		return NULL;
	uint8_t kind;
	switch (st.st_mode & S_IFMT) {
	case S_IFSOCK:
		kind = BB_FD_SOCKET;
		break;
	case S_IFIFO:
		kind = BB_FD_PIPE;
		break;
	case S_IFCHR:
		kind = BB_FD_POLLABLE; /* a terminal; /dev/null & co are found out below */
		break;
	case 0: /* an anonymous inode: eventfd, timerfd... */
		kind = anon_kind(fd);
		break;
	default:
		kind = BB_FD_FILE; /* regular files and directories never block on readiness */
		break;
	}
	view_install(pd, d, kind, kind == BB_FD_PIPE, false);
	return pd;
}

/* a number was handed out (or closed): forget what we knew about it */
void bb_fd_forget(int fd)
{
	/* a vfork child's fds are its own: the numbers it closes and reuses
	 * are still the parent's (once, the child's close made the parent's
	 * next read of that fd fail with EAGAIN: Python's subprocess) */
	if (!bb_active || fd < 0 || bb_in_vm_child())
		return;
	bb_pd *pd = bb_pd_peek(fd);
	bb_netpoll_close(fd); /* marks it unknown */
	if (pd) {
		bb_lock_acquire(&pd->lock);
		bb_fdesc *d = atomic_exchange_explicit(&pd->desc, NULL, memory_order_acq_rel);
		bb_lock_release(&pd->lock);
		desc_put(d); /* one closer gets it, however many race */
	}
}

/* newfd now refers to oldfd's open file description: share the view */
static void fd_dup_view(int oldfd, int newfd)
{
	if (bb_in_vm_child()) {
		/* the table is the parent's; an fd the child will pass on at
		 * exec gets its blocking mode back now */
		long fl = bb_sys(SYS_fcntl, newfd, F_GETFD, 0);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			unforce_via(oldfd, newfd);
		return;
	}
	bb_pd *o = bb_pd_peek(oldfd);
	if (o == NULL)
		return;
	bb_lock_acquire(&o->lock);
	bb_fdesc *d = o->known ? atomic_load_explicit(&o->desc, memory_order_relaxed) : NULL;
	if (d)
		atomic_fetch_add(&d->refs, 1); /* no close of oldfd can put it meanwhile */
	uint8_t kind = o->kind;
	bool nowait_ok = o->nowait_ok;
	bb_lock_release(&o->lock);
	if (d == NULL)
		return; /* learned lazily from the kernel, as for any fd */
	bb_pd *n = bb_pd_get(newfd);
	if (n == NULL) {
		desc_put(d);
		return;
	}
	view_install(n, d, kind, nowait_ok, true); /* (its time-outs are d's) */
	/* onto stdin, stdout or stderr: stdio's own streams read and write
	 * it now (an inetd-style server's dup2(conn, 0)), as after fdopen */
	if (newfd <= 2)
		unforce(newfd);
}

BB_EXPORT int close(int fd)
{
	if (!bb_active)
		return REAL(close)(fd);
	if (bb_own_fd(fd))
		return 0; /* bobbin's own: a close-all-fds loop must not take them */
	bb_fd_forget(fd);
	return REAL(close)(fd);
}

/* close_range and closefrom (glibc's calls close_range): the views of the
 * numbers closed are forgotten, as close does, and bobbin's own fds are
 * left open: the range is closed in the pieces between them. Before, the
 * views outlived the files, and a number reused by a call bobbin does not
 * see (eventfd) was taken for the socket it had been, whose reads never
 * wait: the read blocked the OS thread where bobbin could not let its P go,
 * and with one P the program hung. */
static int (*real_close_range)(unsigned, unsigned, int);

static int close_pieces(unsigned first, unsigned last, int flags)
{
	if (real_close_range == NULL)
		real_close_range = (int (*)(unsigned, unsigned, int))dlsym(RTLD_NEXT, "close_range");
	if (!bb_active || (flags & CLOSE_RANGE_CLOEXEC) || first > last)
		return real_close_range(first, last, flags);
	unsigned limit = (unsigned)bb_pd_limit();
	for (unsigned fd = first; fd <= last && fd < limit; fd++)
		if (!bb_own_fd((int)fd))
			bb_fd_forget((int)fd);
	int own[BB_OWN_FDS_MAX], n = bb_own_fds(own);
	unsigned from = first;
	for (int i = 0; i < n && from <= last; i++) {
		unsigned o = (unsigned)own[i];
		if (o < from || o > last)
			continue;
		if (o > from && real_close_range(from, o - 1, flags) != 0)
			return -1;
		from = o + 1;
	}
	return from <= last ? real_close_range(from, last, flags) : 0;
}

BB_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	return close_pieces(first, last, flags);
}

BB_EXPORT void closefrom(int lowfd)
{
	close_pieces(lowfd < 0 ? 0 : (unsigned)lowfd, ~0u, 0);
}

/* dup2 and dup3 onto newfd: never onto bobbin's own fds; newfd's old view
 * is forgotten and it shares oldfd's (same open file description) */
static int dup_onto(int oldfd, int newfd, int flags, bool three)
{
	if (bb_active && bb_own_fd(newfd)) {
		errno = EBUSY; /* as Linux answers for a number it is busy with */
		return -1;
	}
	if (bb_active && oldfd != newfd)
		bb_fd_forget(newfd);
	int r = three ? REAL(dup3)(oldfd, newfd, flags) : REAL(dup2)(oldfd, newfd);
	if (bb_active && r >= 0 && oldfd != newfd)
		fd_dup_view(oldfd, r);
	return r;
}

BB_EXPORT int dup2(int oldfd, int newfd)
{
	return dup_onto(oldfd, newfd, 0, false);
}

BB_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	return dup_onto(oldfd, newfd, flags, true);
}

static int newfd(int fd)
{
	if (fd >= 0)
		bb_fd_forget(fd);
	return fd;
}

/* Calls that hand out a number bobbin does not otherwise see made: what it
 * knew of the number before (a file closed where bobbin could not see it,
 * by glibc's own close in pclose, say) must not be taken for the new
 * file's, now that an eventfd's or a timerfd's reads wait on the poller */
#define NEWFD_WRAP(name, params, args)                                   \
	BB_EXPORT int name params                                         \
	{                                                                 \
		static int(*real) params;                                 \
		if (real == NULL)                                         \
			real = (int(*) params)dlsym(RTLD_NEXT, #name);    \
		return newfd(real args);                                  \
	}

NEWFD_WRAP(eventfd, (unsigned int v, int flags), (v, flags))
NEWFD_WRAP(timerfd_create, (int clock, int flags), (clock, flags))
NEWFD_WRAP(inotify_init, (void), ())
NEWFD_WRAP(inotify_init1, (int flags), (flags))
NEWFD_WRAP(memfd_create, (const char *name, unsigned int flags), (name, flags))
NEWFD_WRAP(epoll_create, (int size), (size))
NEWFD_WRAP(epoll_create1, (int flags), (flags))

BB_EXPORT int signalfd(int fd, const sigset_t *mask, int flags)
{
	static int (*real)(int, const sigset_t *, int);
	if (real == NULL)
		real = (int (*)(int, const sigset_t *, int))dlsym(RTLD_NEXT, "signalfd");
	int r = real(fd, mask, flags);
	if (r >= 0 && mask)
		bb_sigfd_add(mask);
	return fd == -1 ? newfd(r) : r; /* else the same file, a new mask */
}

/* glibc closes a popen stream's pipe (pclose) and a directory's fd
 * (closedir) with its internal close */
BB_EXPORT int pclose(FILE *f)
{
	static int (*real)(FILE *);
	if (real == NULL)
		real = (int (*)(FILE *))dlsym(RTLD_NEXT, "pclose");
	if (bb_active && f)
		bb_fd_forget(fileno(f));
	return real(f);
}

BB_EXPORT int closedir(DIR *d)
{
	static int (*real)(DIR *);
	if (real == NULL)
		real = (int (*)(DIR *))dlsym(RTLD_NEXT, "closedir");
	if (bb_active)
		bb_fd_forget(dirfd(d)); /* (closedir's d is declared nonnull) */
	return real(d);
}

BB_EXPORT int dup(int fd)
{
	int r = newfd(REAL(dup)(fd));
	if (r >= 0)
		fd_dup_view(fd, r);
	return r;
}

/* A socket made in this process is shared with nobody yet: bobbin makes it
 * non-blocking for real (as Go does) and keeps the program's view apart, so
 * accept, connect, read and write need no extra system call. F_GETFL
 * reports the program's view; exec* restores blocking mode first. */
/* A socket or pipe end made on a G, non-blocking for real (the program
 * asked for user_nonblock): bobbin's to keep so, until stdio or another
 * program may use it directly (unforce) */
static void own_fd(int fd, uint8_t kind, bool user_nonblock)
{
	bb_fd_forget(fd);
	bb_pd *pd = bb_pd_get(fd);
	bb_fdesc *d = pd ? desc_new(user_nonblock, !user_nonblock) : NULL;
	if (d) {
		view_install(pd, d, kind, kind == BB_FD_PIPE, true);
		if (fd <= 2) /* made as stdin, stdout or stderr: stdio's (unforce) */
			unforce(fd);
	} else if (!user_nonblock) {
		/* no view to remember it by: the mode the program asked for */
		long fl = bb_sys(SYS_fcntl, fd, F_GETFL, 0);
		if (fl >= 0)
			bb_sys(SYS_fcntl, fd, F_SETFL, fl & ~O_NONBLOCK);
	}
}

void bb_fd_own_socket(int fd, bool user_nonblock)
{
	own_fd(fd, BB_FD_SOCKET, user_nonblock);
}

/* an accepted connection has its listener's time-outs, as the kernel
 * copies them into the new socket */
void bb_fd_inherit_timeouts(int fd, int listener)
{
	bb_pd *l = bb_pd_peek(listener), *n = bb_pd_peek(fd);
	if (l == NULL || n == NULL)
		return;
	bb_fdesc *ld = bb_pd_desc(l), *nd = bb_pd_desc(n);
	if (nd == &bb_fdesc_none)
		return;
	atomic_store(&nd->rcvtimeo, atomic_load(&ld->rcvtimeo));
	atomic_store(&nd->sndtimeo, atomic_load(&ld->sndtimeo));
}

BB_EXPORT int socket(int domain, int type, int protocol)
{
	if (!bb_on_g())
		return REAL(socket)(domain, type, protocol);
	int fd = REAL(socket)(domain, type | SOCK_NONBLOCK, protocol);
	if (fd >= 0)
		bb_fd_own_socket(fd, (type & SOCK_NONBLOCK) != 0);
	return fd;
}

BB_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	if (!bb_on_g())
		return REAL(socketpair)(domain, type, protocol, sv);
	int r = REAL(socketpair)(domain, type | SOCK_NONBLOCK, protocol, sv);
	if (r == 0) {
		bb_fd_own_socket(sv[0], (type & SOCK_NONBLOCK) != 0);
		bb_fd_own_socket(sv[1], (type & SOCK_NONBLOCK) != 0);
		bb_netpoll_link_peers(sv[0], sv[1]);
	}
	return r;
}

/* A pipe made on a G is kept non-blocking for real, as a socket is: its
 * reads and writes are then plain read/write, not preadv2/pwritev2 with
 * RWF_NOWAIT (about 125 ns more a call here), until another program or
 * stdio may share it (unforce). */
BB_EXPORT int pipe2(int fds[2], int flags)
{
	bool mine = bb_on_g();
	int r = REAL(pipe2)(fds, mine ? flags | O_NONBLOCK : flags);
	if (r == 0) {
		if (mine) {
			own_fd(fds[0], BB_FD_PIPE, (flags & O_NONBLOCK) != 0);
			own_fd(fds[1], BB_FD_PIPE, (flags & O_NONBLOCK) != 0);
		} else {
			newfd(fds[0]);
			newfd(fds[1]);
		}
		if (bb_active)
			bb_netpoll_link_peers(fds[0], fds[1]);
	}
	return r;
}

BB_EXPORT int pipe(int fds[2])
{
	return pipe2(fds, 0);
}

static int open_common(int fd)
{
	return newfd(fd);
}

BB_EXPORT int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	if (flags & (O_CREAT | __O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (!bb_on_g())
		return REAL(open)(path, flags, mode);
	bb_task_look(AT_FDCWD, path);
	/* opening a FIFO blocks until the other end opens: not on our M */
	return open_common(BB_IN_SYSCALL(int, REAL(open)(path, flags, mode), true));
}

BB_EXPORT int open64(const char *path, int flags, ...) __attribute__((alias("open")));

BB_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	if (flags & (O_CREAT | __O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (!bb_on_g())
		return REAL(openat)(dirfd, path, flags, mode);
	bb_task_look(dirfd, path);
	return open_common(BB_IN_SYSCALL(int, REAL(openat)(dirfd, path, flags, mode), true));
}

BB_EXPORT int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));

BB_EXPORT FILE *fopen(const char *path, const char *mode)
{
	FILE *f;
	if (!bb_on_g())
		return REAL(fopen)(path, mode);
	bb_entersyscall();
	f = REAL(fopen)(path, mode);
	bb_exitsyscall();
	if (f)
		newfd(fileno(f));
	return f;
}

BB_EXPORT FILE *fopen64(const char *path, const char *mode) __attribute__((alias("fopen")));

/* A socket bobbin made non-blocking for real and then handed to stdio
 * (fdopen): glibc's stdio reads and writes it by internal names, which
 * bobbin does not see, and on a non-blocking socket they failed with
 * EAGAIN (fgets returned NULL, the stream in error). The open file
 * description goes back to blocking, as the program asked, and bobbin's
 * own calls on it then wait by readiness first, as for an inherited
 * socket; stdio's block their OS thread, which sysmon frees the P from.
 * The same when it becomes fd 0, 1 or 2 (fd_dup_view). */
/* fd's description back to the blocking mode the program asked for, through
 * target, another number for the same description (a vfork child's copy,
 * whose view is fd's in the parent's table) */
static void unforce_via(int fd, int target)
{
	bb_pd *pd = bb_pd_peek(fd);
	if (pd == NULL)
		return;
	bb_lock_acquire(&pd->lock);
	bb_fdesc *d = pd->known ? atomic_load_explicit(&pd->desc, memory_order_relaxed) : NULL;
	if (d && d->forced_nb && !atomic_load(&d->user_nonblock)) {
		long fl = bb_sys(SYS_fcntl, target, F_GETFL, 0);
		if (fl >= 0 && bb_sys(SYS_fcntl, target, F_SETFL, fl & ~O_NONBLOCK) == 0)
			d->forced_nb = false;
	}
	bb_lock_release(&pd->lock);
}

static void unforce(int fd)
{
	if (!bb_in_vm_child()) /* (the child's number may not be the parent's file) */
		unforce_via(fd, fd);
}

/* a spawned child gets fd (as newfd): it shares the socket, blocking */
BB_EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa, int fd, int newfd)
{
	static int (*real)(posix_spawn_file_actions_t *, int, int);
	if (real == NULL)
		real = (int (*)(posix_spawn_file_actions_t *, int, int))dlsym(
			RTLD_NEXT, "posix_spawn_file_actions_adddup2");
	int r = real(fa, fd, newfd);
	if (r == 0 && bb_active)
		unforce(fd);
	return r;
}

void bb_fd_unforce(int fd)
{
	if (bb_active)
		unforce(fd);
}

/* POSIX AIO: glibc's helper threads (NPTL threads) make the calls with
 * its internal read and write, which bobbin does not see: a socket or
 * pipe bobbin keeps non-blocking answered them EAGAIN. It goes back to
 * blocking first, as when stdio gets it. */
#define AIO_WRAP(name, cbtype)                                                 \
	BB_EXPORT int name(cbtype *cb)                                         \
	{                                                                      \
		static int (*real)(cbtype *);                                  \
		if (real == NULL)                                             \
			real = (int (*)(cbtype *))dlsym(RTLD_NEXT, #name);     \
		bb_fd_unforce(cb->aio_fildes);                                \
		return real(cb);                                              \
	}

AIO_WRAP(aio_read, struct aiocb)
AIO_WRAP(aio_write, struct aiocb)
AIO_WRAP(aio_read64, struct aiocb64)
AIO_WRAP(aio_write64, struct aiocb64)

#define LIO_WRAP(name, cbtype)                                                 \
	BB_EXPORT int name(int mode, cbtype *const list[], int n, struct sigevent *sev) \
	{                                                                      \
		static int (*real)(int, cbtype *const[], int, struct sigevent *); \
		if (real == NULL)                                             \
			real = (int (*)(int, cbtype *const[], int, struct sigevent *))dlsym( \
				RTLD_NEXT, #name);                            \
		for (int i = 0; i < n; i++) /* NULL entries are ignored */     \
			if (list[i] && list[i]->aio_lio_opcode != LIO_NOP)   \
				bb_fd_unforce(list[i]->aio_fildes);          \
		return real(mode, list, n, sev);                              \
	}

LIO_WRAP(lio_listio, struct aiocb)
LIO_WRAP(lio_listio64, struct aiocb64)

BB_EXPORT FILE *fdopen(int fd, const char *mode)
{
	static FILE *(*real)(int, const char *);
	if (real == NULL)
		real = (FILE * (*)(int, const char *)) dlsym(RTLD_NEXT, "fdopen");
	FILE *f = real(fd, mode);
	if (f && bb_active)
		unforce(fd);
	return f;
}

BB_EXPORT int fclose(FILE *f)
{
	if (bb_active && f)
		bb_fd_forget(fileno(f));
	return REAL(fclose)(f);
}

/* fcntl: track O_NONBLOCK; F_DUPFD hands out a number */
BB_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	long arg = va_arg(ap, long);
	va_end(ap);
	if (!bb_active)
		return REAL(fcntl)(fd, cmd, arg);
	switch (cmd) {
	case F_SETLKW:
	case F_OFD_SETLKW:
		/* may wait for another process: off our M, and a cancellation
		 * point (glibc's wrapper waits with cancellation enabled) */
		if (bb_on_g())
			return BB_IN_SYSCALL(int, REAL(fcntl)(fd, cmd, arg), true);
		break;
	case F_GETFL: {
		int r = REAL(fcntl)(fd, cmd, arg);
		bb_pd *pd = bb_pd_peek(fd);
		if (r >= 0 && bb_pd_waits_for_program(pd))
			r &= ~O_NONBLOCK; /* the program's view */
		return r;
	}
	case F_SETFD:
		if (bb_in_vm_child() && !(arg & FD_CLOEXEC)) {
			int r = REAL(fcntl)(fd, cmd, arg);
			if (r == 0) /* passed on at exec: blocking, as it was asked */
				unforce_via(fd, fd);
			return r;
		}
		break;
	case F_SETFL: {
		if (bb_in_vm_child()) /* its views are the parent's */
			return REAL(fcntl)(fd, cmd, arg);
		bb_pd *pd = bb_pd_peek(fd);
		bool forced = pd && pd->known && BB_PD_FORCED(pd);
		int r = REAL(fcntl)(fd, cmd, forced ? arg | O_NONBLOCK : arg);
		if (r == 0 && pd && pd->known)
			set_user_nb(pd, (arg & O_NONBLOCK) != 0);
		return r;
	}
	case F_DUPFD:
	case F_DUPFD_CLOEXEC: {
		int r = newfd(REAL(fcntl)(fd, cmd, arg));
		if (r >= 0)
			fd_dup_view(fd, r);
		return r;
	}
	}
	return REAL(fcntl)(fd, cmd, arg);
}

BB_EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

BB_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	if (bb_active && req == FIONBIO && arg) {
		bb_pd *pd = bb_pd_peek(fd);
		if (pd && pd->known && BB_PD_FORCED(pd)) {
			set_user_nb(pd, *(int *)arg != 0); /* the file stays non-blocking */
			return 0;
		}
	}
	int r = REAL(ioctl)(fd, req, arg);
	if (r == 0 && bb_active && req == FIONBIO && arg) {
		bb_pd *pd = bb_pd_peek(fd);
		if (pd && pd->known)
			set_user_nb(pd, *(int *)arg != 0);
	}
	return r;
}

static int64_t tv_ns(const struct timeval *tv)
{
	return (int64_t)tv->tv_sec * 1000000000 + (int64_t)tv->tv_usec * 1000;
}

BB_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	int r = REAL(setsockopt)(fd, level, name, val, len);
	if (r == 0 && bb_active && level == SOL_SOCKET &&
	    (name == SO_RCVTIMEO || name == SO_SNDTIMEO) && len >= sizeof(struct timeval)) {
		bb_pd *pd = bb_fd_view(fd);
		bb_fdesc *d = pd ? bb_pd_desc(pd) : NULL;
		if (d && d != &bb_fdesc_none)
			atomic_store(name == SO_RCVTIMEO ? &d->rcvtimeo : &d->sndtimeo, tv_ns(val));
	}
	return r;
}

/* Before a fork, an exec or a spawn: every socket bobbin keeps non-blocking
 * for real that another process will share (it is not close-on-exec) goes
 * back to blocking mode, as the program believes it is, in this process's
 * view too (unforce), since the open file description and its flag are
 * shared: the other program reads and writes it blocking, and bobbin waits
 * on it by readiness first, as on an inherited socket. (An exec used to
 * restore every such socket, close-on-exec ones included, in the child
 * only: the parent's views then took blocking sockets for non-blocking
 * ones, and its accept or read blocked where it could not let its P go.) */
void bb_fd_unforce_inheritable(void)
{
	/* a vfork child's exec: the parent did it before the vfork, and the
	 * child for each fd it made inheritable (fd_dup_view, F_SETFD) */
	if (bb_in_vm_child())
		return;
	int limit = bb_pd_limit();
	for (int fd = 0; fd < limit; fd++) {
		bb_pd *pd = bb_pd_peek(fd);
		if (pd == NULL) {
			fd |= 1023; /* a whole block of the table is absent */
			continue;
		}
		if (bb_pd_waits_for_program(pd)) {
			long fdfl = bb_sys(SYS_fcntl, fd, F_GETFD, 0);
			if (fdfl >= 0 && !(fdfl & FD_CLOEXEC))
				unforce(fd);
		}
	}
}
