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

#endif
