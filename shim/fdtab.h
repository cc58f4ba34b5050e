/*
 * fdtab.h — the program's view of its fds (fd.c) for the I/O shims.
 */
#ifndef BB_FDTAB_H
#define BB_FDTAB_H

#include "shim.h"

/* the view of fd, learned on first use; NULL if fd is not open (or out of
 * range): then the real call reports the error */
bb_pd *bb_fd_view(int fd);
void bb_fd_forget(int fd);
void bb_fd_own_socket(int fd, bool user_nonblock);
void bb_fd_unforce_inheritable(void);
void bb_fd_unforce(int fd); /* back to the mode the program asked for, for good */

/* Off a G (a thread bobbin did not make, a coroutine's stack, a handler on
 * an M's own stack) a call may block its OS thread, as natively; but on a
 * socket that bobbin keeps non-blocking for real while the program sees
 * it blocking, the kernel would answer EAGAIN where the program expects a
 * wait. Its view then, NULL for any other fd (io.c emulates the wait). */
static inline bb_pd *bb_fd_forced_off_g(int fd)
{
	bb_pd *pd = bb_active ? bb_pd_peek(fd) : NULL;
	return bb_pd_waits_for_program(pd) ? pd : NULL;
}

#endif
