/*
 * syscall.c — the libc syscall() function. Libraries make blocking calls
 * through it directly: libstdc++'s std::future, std::atomic::wait and
 * std::counting_semaphore wait on private futexes this way. Private futex
 * waits and wakes become waits and wakes on bobbin's address-keyed queues
 * (the G parks, its M runs others); the calls that have an interposed
 * equivalent go through it; the remaining blocking numbers run inside
 * entersyscall. Process-shared futexes stay kernel futexes (the waker may
 * be another process).
 */
#include "realio.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/sendfile.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static bool futex_still(void *addr, void *arg)
{
	return *(volatile uint32_t *)addr == (uint32_t)(uintptr_t)arg;
}

/* Threads of bobbin's outside any G in a private futex wait through
 * syscall() right now (see FUTEX_WAKE) */
static _Atomic int32_t os_waiters;

static long futex(uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts, long val3)
{
	int cmd = op & FUTEX_CMD_MASK;
	int64_t deadline = 0;
	switch (cmd) {
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET:
		if (ts) {
			if (ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000) {
				errno = EINVAL;
				return -1;
			}
			if (cmd == FUTEX_WAIT) {
				int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
				deadline = bb_nanotime() + (ns > 0 ? ns : 0);
			} else {
				clockid_t c = (op & FUTEX_CLOCK_REALTIME) ? CLOCK_REALTIME : CLOCK_MONOTONIC;
				struct timespec now;
				clock_gettime(c, &now);
				int64_t left = (int64_t)(ts->tv_sec - now.tv_sec) * 1000000000 +
					       (ts->tv_nsec - now.tv_nsec);
				deadline = bb_nanotime() + (left > 0 ? left : 0);
			}
			if (deadline == 0)
				deadline = 1;
		}
		{
			int r = bb_sema_park(uaddr, futex_still, (void *)(uintptr_t)val,
					     waitReasonSema, deadline, NULL, NULL);
			if (r == 0) {
				errno = EAGAIN; /* the value had changed */
				return -1;
			}
			if (r < 0) {
				errno = ETIMEDOUT;
				return -1;
			}
			return 0; /* woken (spurious wake-ups are allowed to futex users) */
		}
	case FUTEX_WAKE:
	case FUTEX_WAKE_BITSET: {
		/* bobbin's own code outside a G (pthread_create on an M's g0 or
		 * on sysmon, in the program's malloc) waits in the kernel: it
		 * goes first, the green thread woken instead might need the M
		 * it is making */
		long k = 0;
		if (atomic_load_explicit(&os_waiters, memory_order_seq_cst) > 0)
			k = bb_rawsyscall6(SYS_futex, (long)uaddr, op, val, 0, 0, val3);
		uint32_t woke = k > 0 ? (uint32_t)k : 0;
		if (woke >= val)
			return woke;
		int n = bb_sema_wake(uaddr, (int)(val - woke > 0x7fffffff ? 0x7fffffff : val - woke));
		woke += (uint32_t)n;
		/* a thread bobbin did not make may wait in the kernel */
		if (woke < val && k == 0) {
			k = bb_rawsyscall6(SYS_futex, (long)uaddr, op, val - woke, 0, 0, val3);
			woke += k > 0 ? (uint32_t)k : 0;
		}
		return woke;
	}
	}
	return -2; /* not handled here */
}

static bool blocking_nr(long n)
{
	switch (n) {
	case SYS_futex: case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
	case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_accept: case SYS_accept4:
	case SYS_connect: case SYS_recvfrom: case SYS_recvmsg: case SYS_sendto: case SYS_sendmsg:
	case SYS_wait4: case SYS_waitid: case SYS_flock: case SYS_pause: case SYS_msgrcv:
	case SYS_msgsnd: case SYS_semop: case SYS_semtimedop: case SYS_rt_sigtimedwait:
	case SYS_rt_sigsuspend: case SYS_clock_nanosleep: case SYS_nanosleep: case SYS_read:
	case SYS_write: case SYS_readv: case SYS_writev: case SYS_pread64: case SYS_pwrite64:
	case SYS_fsync: case SYS_fdatasync: case SYS_openat: case SYS_open:
	case SYS_io_uring_enter: case SYS_io_uring_register:
		return true;
	}
	return false;
}

/* clone and clone3 made through syscall(), the fork-like way (no new stack:
 * the child returns from this call, on its copy of the caller's stack), as
 * stress-ng makes hundreds of children: the child steps aside as clone()'s
 * do (bb_clone_child, exec.c). A child given a stack of its own cannot
 * return through this function, natively either: it is not looked at. */
static long raw_clone(long n, long a1, long a2, long a3, long a4, long a5)
{
	long r = bb_rawsyscall6(n, a1, a2, a3, a4, a5, 0);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	if (r != 0 || !bb_active)
		return r;
	/* the child: the kernel read the arguments, so they are readable */
	uint64_t flags = n == SYS_clone3 ? ((struct clone_args *)a1)->flags : (uint64_t)a1;
	uint64_t stack = n == SYS_clone3 ? ((struct clone_args *)a1)->stack : (uint64_t)a2;
	if (stack == 0)
		bb_clone_child(flags);
	return 0;
}

/* syscall(n, ...) of an I/O call, made by bobbin's interposer of it (its
 * result in *r); false for any other n */
static bool io_call(long *r, long n, long a1, long a2, long a3, long a4, long a5, long a6)
{
	if (!bb_active)
		return false;
	switch (n) {
	case SYS_read:
		*r = read((int)a1, (void *)a2, (size_t)a3);
		return true;
	case SYS_write:
		*r = write((int)a1, (const void *)a2, (size_t)a3);
		return true;
	case SYS_readv:
		*r = readv((int)a1, (const struct iovec *)a2, (int)a3);
		return true;
	case SYS_writev:
		*r = writev((int)a1, (const struct iovec *)a2, (int)a3);
		return true;
	case SYS_recvfrom:
		*r = recvfrom((int)a1, (void *)a2, (size_t)a3, (int)a4, (struct sockaddr *)a5,
				(socklen_t *)a6);
		return true;
	case SYS_sendto:
		*r = sendto((int)a1, (const void *)a2, (size_t)a3, (int)a4,
			      (const struct sockaddr *)a5, (socklen_t)a6);
		return true;
	case SYS_recvmsg:
		*r = recvmsg((int)a1, (struct msghdr *)a2, (int)a3);
		return true;
	case SYS_sendmsg:
		*r = sendmsg((int)a1, (const struct msghdr *)a2, (int)a3);
		return true;
	case SYS_recvmmsg:
		*r = recvmmsg((int)a1, (struct mmsghdr *)a2, (unsigned)a3, (int)a4,
				(struct timespec *)a5);
		return true;
	case SYS_sendmmsg:
		*r = sendmmsg((int)a1, (struct mmsghdr *)a2, (unsigned)a3, (int)a4);
		return true;
	case SYS_accept:
		*r = accept4((int)a1, (struct sockaddr *)a2, (socklen_t *)a3, 0);
		return true;
	case SYS_accept4:
		*r = accept4((int)a1, (struct sockaddr *)a2, (socklen_t *)a3, (int)a4);
		return true;
	case SYS_connect:
		*r = connect((int)a1, (const struct sockaddr *)a2, (socklen_t)a3);
		return true;
	case SYS_sendfile:
		*r = sendfile((int)a1, (int)a2, (off_t *)a3, (size_t)a4);
		return true;
	case SYS_splice:
		*r = splice((int)a1, (loff_t *)a2, (int)a3, (loff_t *)a4, (size_t)a5,
			      (unsigned)a6);
		return true;
	case SYS_tee:
		*r = tee((int)a1, (int)a2, (size_t)a3, (unsigned)a4);
		return true;
	case SYS_vmsplice:
		*r = vmsplice((int)a1, (const struct iovec *)a2, (size_t)a3, (unsigned)a4);
		return true;
	}
	return false;
}

BB_EXPORT long syscall(long n, ...)
{
	va_list ap;
	va_start(ap, n);
	long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
	long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
	va_end(ap);
	if (n == SYS_clone || n == SYS_clone3)
		return raw_clone(n, a1, a2, a3, a4, a5);
	if (n == SYS_gettid && bb_on_g())
		return gettid();
	if (n == SYS_set_tid_address && bb_on_g()) {
		/* the kernel's answer is the caller's tid: the G's own (see
		 * gettid); its clear-on-exit address is the G's, not its M's,
		 * whose own is glibc's for that OS thread */
		bb_g *gp = bb_getg();
		bool own = (char *)a1 == (char *)gp->tcb + 720; /* its tid field: the default */
		gp->clear_tid = own ? NULL : (_Atomic uint32_t *)a1;
		return gettid();
	}
	long own;
	if ((n == SYS_ioprio_set || n == SYS_ioprio_get) && bb_own_ioprio(&own, n, a1, a2, a3))
		return own;
	if ((n == SYS_capset || n == SYS_capget || n == SYS_prctl) && bb_own_cred_call(&own, n, a1, a2, a3))
		return own;
	if (n == SYS_setpriority)
		return setpriority((__priority_which_t)a1, (id_t)a2, (int)a3);
	if ((n == SYS_sched_setscheduler || n == SYS_sched_setparam || n == SYS_sched_getscheduler ||
	     n == SYS_sched_getparam || n == SYS_sched_setattr || n == SYS_sched_getattr) &&
	    bb_own_sched_call(&own, n, a1, a2, a3, a4))
		return own;
	if (n == SYS_tgkill || n == SYS_tkill) {
		int err = n == SYS_tgkill ? bb_tid_kill((pid_t)a1, (pid_t)a2, (int)a3)
					  : bb_tid_kill(-1, (pid_t)a1, (int)a2);
		if (err > 0)
			errno = err;
		if (err >= 0)
			return err ? -1 : 0;
	}
	/* the I/O calls are bobbin's, on any thread: a socket or pipe bobbin
	 * keeps non-blocking for real must wait as the program expects, also
	 * when the call comes through syscall() (it answered EAGAIN) */
	long io;
	if (io_call(&io, n, a1, a2, a3, a4, a5, a6))
		return io;
	/* a wake from bobbin's own code outside any G (glibc's pthread_create
	 * on an M's g0 or on sysmon allocates with the program's malloc, and
	 * unlocks its lock): green threads may wait on that word too */
	if (n == SYS_futex && (a2 & FUTEX_PRIVATE_FLAG) && bb_active && bb_tls_m && !bb_on_g() &&
	    ((a2 & FUTEX_CMD_MASK) == FUTEX_WAKE || (a2 & FUTEX_CMD_MASK) == FUTEX_WAKE_BITSET))
		return futex((uint32_t *)a1, (int)a2, (uint32_t)a3, NULL, a6);
	if (n == SYS_futex && (a2 & FUTEX_PRIVATE_FLAG) && bb_active && bb_tls_m && !bb_on_g()) {
		atomic_fetch_add_explicit(&os_waiters, 1, memory_order_seq_cst);
		long r = bb_rawsyscall6(n, a1, a2, a3, a4, a5, a6);
		atomic_fetch_sub_explicit(&os_waiters, 1, memory_order_relaxed);
		if (r < 0 && r > -4096) {
			errno = (int)-r;
			return -1;
		}
		return r;
	}
	if (bb_on_g()) {
		switch (n) {
		case SYS_futex:
			if (a2 & FUTEX_PRIVATE_FLAG) {
				long r = futex((uint32_t *)a1, (int)a2, (uint32_t)a3,
					       (const struct timespec *)a4, a6);
				if (r != -2)
					return r;
			}
			break;
		case SYS_nanosleep:
			return nanosleep((const struct timespec *)a1, (struct timespec *)a2);
		case SYS_sched_yield:
			return sched_yield();
		case SYS_io_uring_setup:
			/* A ring belongs to the OS thread that made it: with
			 * IORING_SETUP_SINGLE_ISSUER any other thread's
			 * io_uring_enter fails with EEXIST, and with
			 * DEFER_TASKRUN completions are reaped only by that
			 * thread (fio's rings are both: its jobs stopped after
			 * a few writes once moved). The G stays on this M for
			 * good, whether or not the call succeeds; and as it
			 * will likely enter the ring with its own instruction
			 * (fio, liburing), never through here, no preemption
			 * signal cuts such a wait short (bb_preemptone). */
			bb_lock_os_thread();
			bb_getg()->rawcalls = true;
			break;
		}
		if (blocking_nr(n)) {
			bb_entersyscall();
			long r = bb_rawsyscall6(n, a1, a2, a3, a4, a5, a6);
			bb_exitsyscall();
			if (r < 0 && r > -4096) {
				errno = (int)-r;
				return -1;
			}
			return r;
		}
	}
	long r = bb_rawsyscall6(n, a1, a2, a3, a4, a5, a6);
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}
