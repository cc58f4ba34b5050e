/*
 * realio.h — the table of real I/O functions (real_io.c).
 */
#ifndef BB_REALIO_H
#define BB_REALIO_H

#undef _FILE_OFFSET_BITS
#include "fdtab.h"

#include <poll.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <signal.h>

#define BB_REAL_IO_LIST                                                                    \
	X(int, close, (int))                                                               \
	X(int, dup, (int))                                                                 \
	X(int, dup2, (int, int))                                                           \
	X(int, dup3, (int, int, int))                                                      \
	X(int, socket, (int, int, int))                                                    \
	X(int, socketpair, (int, int, int, int *))                                         \
	X(int, pipe, (int *))                                                              \
	X(int, pipe2, (int *, int))                                                        \
	X(int, open, (const char *, int, ...))                                             \
	X(int, openat, (int, const char *, int, ...))                                      \
	X(FILE *, fopen, (const char *, const char *))                                     \
	X(int, fclose, (FILE *))                                                           \
	X(int, fcntl, (int, int, ...))                                                     \
	X(int, ioctl, (int, unsigned long, ...))                                           \
	X(int, setsockopt, (int, int, int, const void *, socklen_t))                       \
	X(ssize_t, read, (int, void *, size_t))                                            \
	X(ssize_t, write, (int, const void *, size_t))                                     \
	X(ssize_t, readv, (int, const struct iovec *, int))                                \
	X(ssize_t, writev, (int, const struct iovec *, int))                               \
	X(ssize_t, pread, (int, void *, size_t, off_t))                                    \
	X(ssize_t, pwrite, (int, const void *, size_t, off_t))                             \
	X(ssize_t, preadv, (int, const struct iovec *, int, off_t))                        \
	X(ssize_t, pwritev, (int, const struct iovec *, int, off_t))                       \
	X(ssize_t, recv, (int, void *, size_t, int))                                       \
	X(ssize_t, recvfrom, (int, void *, size_t, int, struct sockaddr *, socklen_t *))   \
	X(ssize_t, recvmsg, (int, struct msghdr *, int))                                   \
	X(ssize_t, send, (int, const void *, size_t, int))                                 \
	X(ssize_t, sendto, (int, const void *, size_t, int, const struct sockaddr *, socklen_t)) \
	X(ssize_t, sendmsg, (int, const struct msghdr *, int))                             \
	X(int, accept, (int, struct sockaddr *, socklen_t *))                              \
	X(int, accept4, (int, struct sockaddr *, socklen_t *, int))                        \
	X(int, connect, (int, const struct sockaddr *, socklen_t))                         \
	X(int, poll, (struct pollfd *, nfds_t, int))                                       \
	X(int, ppoll, (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *)) \
	X(int, select, (int, fd_set *, fd_set *, fd_set *, struct timeval *))              \
	X(int, pselect, (int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *)) \
	X(int, epoll_wait, (int, struct epoll_event *, int, int))                          \
	X(int, epoll_pwait, (int, struct epoll_event *, int, int, const sigset_t *))       \
	X(pid_t, waitpid, (pid_t, int *, int))                                             \
	X(pid_t, wait, (int *))                                                            \
	X(pid_t, wait4, (pid_t, int *, int, struct rusage *))                              \
	X(int, waitid, (idtype_t, id_t, siginfo_t *, int))                                 \
	X(int, flock, (int, int))                                                          \
	X(int, fsync, (int))                                                               \
	X(int, fdatasync, (int))                                                           \
	X(int, system, (const char *))                                                     \
	X(int, pause, (void))

#define X(ret, name, args) ret(*name) args;
typedef struct bb_real_io_fns {
	BB_REAL_IO_LIST
} bb_real_io_fns;
#undef X

extern bb_real_io_fns bb_rio;
int bb_real_io_init(void);

#undef REAL
#define REAL(name) (__builtin_expect(bb_rio.name != NULL, 1) ? bb_rio.name : (bb_real_io_init(), bb_rio.name))

#endif
