/* ptrace_child — a thread traces a child process, as strace or a crash
 * reporter does, while other threads keep the scheduler busy.
 *
 * The child asks to be traced (PTRACE_TRACEME), stops itself, then makes
 * 200 getppid() calls and exits with status 5. The tracing thread sees the
 * stop with a plain waitpid (a traced child's stops are reported without
 * WUNTRACED), then steps it from system call to system call
 * (PTRACE_SYSCALL), counting the stops at getppid, until it exits. Two
 * spinner threads yield meanwhile, so the tracer's thread is handed from
 * OS thread to OS thread under bobbin if anything lets it.
 *
 * Under bobbin a waitpid for one child parks on its pidfd, which announces
 * an exit but no stop: a traced child is waited for in the call itself
 * (its TracerPid), and a tracing thread stays on its OS thread (the kernel
 * answers ptrace requests only from the tracer's own thread). Without that
 * the first waitpid never returned. Skipped (77) where ptrace is refused
 * (a container without CAP_SYS_PTRACE over its own children is rare).
 */
#define PROBE_NAME "ptrace_child"
#include "probe.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

enum { CALLS = 200 };

static atomic_int stop_spin;

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_spin))
        sched_yield();
    return NULL;
}

static void *tracer(void *arg)
{
    long *out = arg;
    pid_t p = fork();
    if (p == 0) {
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(77);
        raise(SIGSTOP);
        for (int i = 0; i < CALLS; i++)
            syscall(SYS_getppid);
        _exit(5);
    }
    if (p < 0)
        return NULL;
    int st = 0;
    if (waitpid(p, &st, 0) != p)
        return NULL;
    if (WIFEXITED(st)) { /* the child could not be traced */
        out[2] = WEXITSTATUS(st);
        return NULL;
    }
    out[0] = WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP;
    long getppids = 0;
    for (;;) {
        if (ptrace(PTRACE_SYSCALL, p, NULL, NULL) != 0) {
            out[3] = errno;
            kill(p, SIGKILL);
            waitpid(p, &st, 0);
            break;
        }
        if (waitpid(p, &st, 0) != p)
            break;
        if (WIFEXITED(st)) {
            out[2] = WEXITSTATUS(st);
            break;
        }
        struct user_regs_struct regs;
        if (WIFSTOPPED(st) && ptrace(PTRACE_GETREGS, p, NULL, &regs) == 0 &&
            regs.orig_rax == SYS_getppid)
            getppids++;
    }
    out[1] = getppids;
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(50);
    pthread_t s[2], t;
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&s[i], NULL, spinner, NULL) == 0, "create");
    static long out[4];
    REQUIRE(pthread_create(&t, NULL, tracer, out) == 0, "create");
    pthread_join(t, NULL);
    atomic_store(&stop_spin, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(s[i], NULL);
    if (out[2] == 77) {
        printf("ptrace refused here: skipped\n");
        return PROBE_SKIP;
    }
    /* each getppid stops twice: on entry and on exit */
    printf("first stop SIGSTOP %ld, getppid stops %ld, exit status %ld, ptrace errno %ld\n",
           out[0], out[1], out[2], out[3]);
    CHECK(out[0] == 1 && out[1] == 2 * CALLS && out[2] == 5 && out[3] == 0, "tracer");
    alarm(0);
    printf("ptrace_child: done\n");
    return probe_exit(PROBE_NAME);
}
