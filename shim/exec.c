/*
 * exec.c — the exec family and posix_spawn: the new program must find every
 * socket it inherits in the blocking mode it believes it is in (bobbin makes
 * its own sockets non-blocking for real: fd.c), so that mode is restored
 * first (bb_fd_unforce_inheritable). glibc's system and popen spawn through
 * its internal posix_spawn, so they restore it here too.
 */
#include "realio.h"

#include <errno.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

extern char **environ;

static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);
static int (*real_fexecve)(int, char *const[], char *const[]);

#include <dlfcn.h>
static void resolve(void)
{
	if (!real_execve) {
		real_execve = dlsym(RTLD_NEXT, "execve");
		real_execvpe = dlsym(RTLD_NEXT, "execvpe");
		real_fexecve = dlsym(RTLD_NEXT, "fexecve");
	}
}

BB_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	resolve();
	if (bb_active)
		bb_fd_unforce_inheritable();
	return real_execve(path, argv, envp);
}

BB_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	resolve();
	if (bb_active)
		bb_fd_unforce_inheritable();
	return real_execvpe(file, argv, envp);
}

BB_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	resolve();
	if (bb_active)
		bb_fd_unforce_inheritable();
	return real_fexecve(fd, argv, envp);
}

BB_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

BB_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* the list forms: gather the arguments into an array on the stack */
#define GATHER(first, ap, argv)                                               \
	size_t n_ = 1;                                                        \
	va_start(ap, first);                                                  \
	while (va_arg(ap, char *) != NULL)                                    \
		n_++;                                                         \
	va_end(ap);                                                           \
	char **argv = __builtin_alloca((n_ + 1) * sizeof(char *));            \
	va_start(ap, first);                                                  \
	argv[0] = (char *)first;                                              \
	for (size_t i_ = 1; i_ <= n_; i_++)                                   \
		argv[i_] = va_arg(ap, char *);

BB_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	GATHER(arg, ap, argv);
	va_end(ap);
	return execve(path, argv, environ);
}

BB_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	GATHER(arg, ap, argv);
	va_end(ap);
	return execvpe(file, argv, environ);
}

BB_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	GATHER(arg, ap, argv);
	char **envp = va_arg(ap, char **);
	va_end(ap);
	return execve(path, argv, envp);
}

/* A child of clone(2) or clone3 never runs as bobbin's. One that does not
 * share our memory (no CLONE_VM) starts with the caller's thread only, as
 * after fork but without fork's handlers: bobbin's runtime in it is a copy
 * of the parent's, describing threads that are not there. It steps aside
 * and runs natively, which for a process of one thread is exactly right:
 * when its only thread exits, so does the process. (It used to start OS
 * threads of its own and outlive its only real thread as a zombie.)
 *
 * One that shares our memory (CLONE_VM) shares the runtime too, which it
 * must not touch. With a TLS of its own (CLONE_SETTLS) it is a thread
 * bobbin did not make, and is seen as one already. Without, it runs on its
 * parent's TLS and, having inherited the registers, on its parent's M: it
 * used to enter the scheduler as that M (stress-ng's clone stressor left
 * hundreds of such children asleep there for ever). It points its gs at
 * bb_nom, an M with no G, so all it calls runs natively.
 *
 * Called first thing in the child, by clone() below and by syscall()'s
 * fork-like SYS_clone and SYS_clone3 (syscall.c). */
void bb_clone_child(uint64_t flags)
{
	if (!(flags & CLONE_VM))
		bb_active = false; /* this process's own copy */
	else if (!(flags & CLONE_SETTLS))
		bb_setgsbase((uintptr_t)&bb_nom);
}

/* vfork (asm/vfork_x86_64_sysv_elf.S), before the system call: the fds the
 * child may inherit go back to the blocking mode the program asked for, as
 * at a fork; those the child makes inheritable itself (dup2 onto 0-2 and
 * the like) it unforces as it makes them (fd.c, unforce_via) */
__attribute__((visibility("hidden"))) void bb_vfork_prepare(void)
{
	if (bb_active && !bb_in_vm_child())
		bb_fd_unforce_inheritable();
}

/* in the child, first: bobbin's state is the parent's from now on. A G's
 * M would otherwise run the child's calls as the G's (park it, queue it,
 * register its fds): gs goes to bb_nom, an M with no G. */
__attribute__((visibility("hidden"))) pid_t bb_vfork_child(void)
{
	bb_tls_vfork = true;
	if (bb_tls_m)
		bb_setgsbase((uintptr_t)&bb_nom);
	return 0;
}

/* in the parent, once the child has exec'd or exited: r is the system
 * call's result (the child's pid, or -errno) */
__attribute__((visibility("hidden"))) pid_t bb_vfork_parent(long r)
{
	bb_tls_vfork = false;
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return (pid_t)r;
}

/* the start is on the child's own stack, which nobody else uses: with
 * CLONE_VM the parent may return (and reuse its frame) before the child
 * reads it */
struct clone_start {
	int (*fn)(void *);
	void *arg;
	int flags;
};

static int clone_child(void *p)
{
	struct clone_start *cs = p;
	bb_clone_child((uint64_t)(unsigned)cs->flags);
	return cs->fn(cs->arg);
}

BB_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	static int (*real_clone)(int (*)(void *), void *, int, void *, ...);
	if (real_clone == NULL)
		real_clone = dlsym(RTLD_NEXT, "clone");
	va_list ap;
	va_start(ap, arg);
	pid_t *ptid = va_arg(ap, pid_t *);
	void *tls = va_arg(ap, void *);
	pid_t *ctid = va_arg(ap, pid_t *);
	va_end(ap);
	if (!bb_active || fn == NULL || stack == NULL ||
	    (flags & (CLONE_VM | CLONE_SETTLS)) == (CLONE_VM | CLONE_SETTLS))
		return real_clone(fn, stack, flags, arg, ptid, tls, ctid);
	uintptr_t top = ((uintptr_t)stack - sizeof(struct clone_start)) & ~(uintptr_t)15;
	struct clone_start *cs = (struct clone_start *)top;
	*cs = (struct clone_start){fn, arg, flags};
	return real_clone(clone_child, cs, flags, cs, ptid, tls, ctid);
}

typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			const posix_spawnattr_t *, char *const[], char *const[]);

static int spawn(spawn_fn *real, const char *name, pid_t *pid, const char *file,
		 const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
		 char *const argv[], char *const envp[])
{
	if (*real == NULL)
		*real = (spawn_fn)dlsym(RTLD_NEXT, name);
	if (bb_active)
		bb_fd_unforce_inheritable();
	return (*real)(pid, file, fa, attr, argv, envp);
}

BB_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			  const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	static spawn_fn real;
	return spawn(&real, "posix_spawn", pid, path, fa, attr, argv, envp);
}

BB_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	static spawn_fn real;
	return spawn(&real, "posix_spawnp", pid, file, fa, attr, argv, envp);
}

BB_EXPORT FILE *popen(const char *cmd, const char *mode)
{
	static FILE *(*real)(const char *, const char *);
	if (real == NULL)
		real = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "popen");
	if (bb_active)
		bb_fd_unforce_inheritable();
	FILE *f = real(cmd, mode);
	if (bb_active && f) /* its pipe's number was handed out unseen */
		bb_fd_forget(fileno(f));
	return f;
}

/* every fork handler registration (pthread_atfork calls it): bobbin's own
 * handlers go first in glibc's list, so its prepare runs last (fork.c) */
BB_EXPORT int __register_atfork(void (*prep)(void), void (*par)(void), void (*chi)(void), void *dso)
{
	return bb_register_atfork(prep, par, chi, dso);
}
