/*
 * util.c — the runtime's own lock, notes, raw system calls, fatal errors.
 *
 * Never calls an interposed symbol, and never touches errno: the raw system
 * call returns -errno, so a G's errno is left exactly as the program set it.
 */
#include "runtime.h"
#include <sys/resource.h>
#include <fcntl.h>

#include <dlfcn.h>
#include <errno.h>

#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <asm/prctl.h>

bool bb_have_fsgsbase;

long bb_rawsyscall6(long n, long a1, long a2, long a3, long a4, long a5, long a6)
{
	long ret;
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

uintptr_t bb_getgsbase(void)
{
	uintptr_t v = 0;
	if (bb_have_fsgsbase)
		__asm__ volatile("rdgsbase %0" : "=r"(v));
	else
		bb_rawsyscall6(SYS_arch_prctl, ARCH_GET_GS, (long)&v, 0, 0, 0, 0);
	return v;
}

void bb_setgsbase(uintptr_t v)
{
	if (bb_have_fsgsbase)
		__asm__ volatile("wrgsbase %0" ::"r"(v) : "memory");
	else
		bb_rawsyscall6(SYS_arch_prctl, ARCH_SET_GS, (long)v, 0, 0, 0, 0);
}

void bb_setfsbase(uintptr_t v)
{
	if (bb_have_fsgsbase)
		__asm__ volatile("wrfsbase %0" ::"r"(v) : "memory");
	else
		bb_rawsyscall6(SYS_arch_prctl, ARCH_SET_FS, (long)v, 0, 0, 0, 0);
}

uintptr_t bb_getfsbase(void)
{
	uintptr_t v;
	__asm__ volatile("mov %%fs:0, %0" : "=r"(v)); /* tcb->header.tcb == tcb */
	return v;
}

static void write_all(const char *buf, size_t n)
{
	while (n > 0) {
		long r = bb_sys(SYS_write, 2, buf, n);
		if (r <= 0) {
			if (r == -4) /* EINTR */
				continue;
			return;
		}
		buf += r;
		n -= (size_t)r;
	}
}

/* a small file (of /proc) read whole into buf, NUL-terminated, with raw
 * system calls (from a handler, sysmon, a G): its length, or -1 */
long bb_read_small(const char *path, char *buf, size_t size)
{
	long fd = bb_rawsyscall6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
	if (fd < 0)
		return -1;
	long n = bb_rawsyscall6(SYS_read, fd, (long)buf, (long)size - 1, 0, 0, 0);
	bb_rawsyscall6(SYS_close, fd, 0, 0, 0, 0, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
}

void bb_printf(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof buf)
		n = sizeof buf - 1;
	write_all(buf, (size_t)n);
}

void bb_throw(const char *fmt, ...)
{
	char buf[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	bb_m *mp = bb_self_m();
	bb_g *gp = mp ? mp->curg : NULL;
	bb_printf("bobbin: fatal error: %s\n  [M%lld P%d G%llu]\n", buf,
		  mp ? (long long)mp->id : -1LL, mp && mp->p ? mp->p->id : -1,
		  gp ? (unsigned long long)gp->goid : 0ULL);
	abort();
}

long bb_futex(_Atomic uint32_t *addr, int op, uint32_t val, const void *ts)
{
	return bb_rawsyscall6(SYS_futex, (long)addr, op | FUTEX_PRIVATE_FLAG, val, (long)ts, 0, 0);
}

/* a private futex wait while *addr == val, until abstime on clock (NULL:
 * none); a time before 1970 has passed, as NPTL has it. 0 or -errno. */
long bb_futex_wait_abs(_Atomic uint32_t *addr, uint32_t val, clockid_t clock,
		       const struct timespec *abstime)
{
	if (abstime != NULL && abstime->tv_sec < 0)
		return -ETIMEDOUT;
	int op = FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG;
	if (abstime != NULL && clock == CLOCK_REALTIME)
		op |= FUTEX_CLOCK_REALTIME;
	return bb_rawsyscall6(SYS_futex, (long)addr, op, val, (long)abstime, 0,
			      FUTEX_BITSET_MATCH_ANY);
}

/*
 * bb_lock: the runtime's internal mutex, held only for a few instructions,
 * never across a G switch. key: 0 free, 1 held, 2 held and someone may sleep.
 * Spins briefly (the holder is running on another core), then futex-waits:
 * this blocks the M, which is acceptable only because critical sections are
 * short and never park.
 */
void bb_lock_acquire(bb_lock *l)
{
	uint32_t c = 0;
	if (atomic_compare_exchange_strong_explicit(&l->key, &c, 1, memory_order_acquire,
						    memory_order_relaxed))
		return;
	for (int i = 0; i < 100; i++) {
		c = 0;
		if (atomic_load_explicit(&l->key, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak_explicit(&l->key, &c, 1, memory_order_acquire,
							  memory_order_relaxed))
			return;
		__builtin_ia32_pause();
	}
	/* pairs with the exchange in bb_lock_release */
	while (atomic_exchange_explicit(&l->key, 2, memory_order_acquire) != 0)
		bb_futex(&l->key, FUTEX_WAIT, 2, NULL);
}

void bb_lock_release(bb_lock *l)
{
	if (atomic_exchange_explicit(&l->key, 0, memory_order_release) == 2)
		bb_futex(&l->key, FUTEX_WAKE, 1, NULL);
}

/* notes: one-shot wake-ups for idle Ms (Go's note) */
void bb_notesleep(bb_note *n)
{
	while (atomic_load_explicit(&n->key, memory_order_acquire) == 0)
		bb_futex(&n->key, FUTEX_WAIT, 0, NULL);
}

void bb_notewakeup(bb_note *n)
{
	/* release: the sleeper sees everything written before (e.g. m->nextp) */
	uint32_t old = atomic_exchange_explicit(&n->key, 1, memory_order_release);
	if (old != 0)
		bb_throw("notewakeup: double wakeup");
	bb_futex(&n->key, FUTEX_WAKE, 1, NULL);
}

/* libc's clock_gettime: the shim points it past its own interposer of the
 * name (bb_real_init), which the runtime's clocks need not go through */
int (*bb_clock_gettime)(clockid_t, struct timespec *) = clock_gettime;

int64_t bb_nanotime(void)
{
	struct timespec ts;
	bb_clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* the monotonic clock at tick resolution (a few ms), for "waiting for N ms"
 * in dumps: a fraction of the cost of bb_nanotime on every park */
int64_t bb_nanotime_coarse(void)
{
	struct timespec ts;
	bb_clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* per-M xorshift64+ style generator (Go's fastrand), no locking */
uint32_t bb_fastrand(void)
{
	bb_m *mp = bb_getm();
	uint32_t s1 = mp->fastrand[0], s0 = mp->fastrand[1];
	s1 ^= s1 << 17;
	s1 = s1 ^ s0 ^ s1 >> 7 ^ s0 >> 16;
	mp->fastrand[0] = s0;
	mp->fastrand[1] = s1;
	return s0 + s1;
}

/* glibc's sigaction, for bobbin's own handlers: the one bobbin exports
 * guards the program's (shim/signal.c) */
int bb_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	static int (*real)(int, const struct sigaction *, struct sigaction *);
	if (real == NULL)
		real = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT,
											  "sigaction");
	return real(sig, act, old);
}

/* One of bobbin's own fds (epoll, eventfd, signalfd), moved up out of the
 * numbers the program expects: a program that closes fd 0 and then accepts
 * gets fd 0 for its connection natively, and must not find bobbin's epoll
 * there, made lazily at its first wait. Above the program's usual numbers
 * but inside the first 1,024, where the kernel's fd table already is. */
int bb_fd_out_of_way(int fd)
{
	static int base;
	if (fd < 0)
		return fd;
	if (base == 0) {
		struct rlimit rl;
		long lim = bb_sys(SYS_getrlimit, RLIMIT_NOFILE, &rl, 0) == 0 ? (long)rl.rlim_cur : 1024;
		if (lim > 1024)
			lim = 1024;
		base = lim > 64 ? (int)lim - 32 : 3;
	}
	if (fd >= base)
		return fd;
	long h = bb_sys(SYS_fcntl, fd, F_DUPFD_CLOEXEC, base);
	if (h < 0)
		return fd; /* no room up there: keep it where it is */
	bb_sys(SYS_close, fd, 0, 0);
	return (int)h;
}
