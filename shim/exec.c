/*
 * exec.c — the exec family: the new program must find every socket it
 * inherits in the blocking mode it believes it is in (bobbin makes its own
 * sockets non-blocking for real: fd.c), so that mode is restored first.
 */
#include "realio.h"

#include <errno.h>
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
		bb_fd_restore_blocking();
	return real_execve(path, argv, envp);
}

BB_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	resolve();
	if (bb_active)
		bb_fd_restore_blocking();
	return real_execvpe(file, argv, envp);
}

BB_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	resolve();
	if (bb_active)
		bb_fd_restore_blocking();
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
