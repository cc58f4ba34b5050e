/* wait_children — a thread per child process, each waiting for its child.
 *
 * 1. 60 threads each fork a child that sleeps 30-36 ms and exits with its
 *    own status; each thread waits for its child, with waitpid or (every
 *    third) wait4. The statuses add up.
 * 2. A waitpid that a SIGALRM handler without SA_RESTART interrupts fails
 *    with EINTR; the next one gets the child's status.
 * 3. waitpid of a pid that is no child: ECHILD. WUNTRACED sees a stop, then
 *    a plain waitpid the exit after SIGCONT.
 *
 * Each wait blocks an OS thread under bobbin too (inside entersyscall, the
 * thread kept on it: see ptrace_child), hence --max-threads in meson.build.
 */

#include "probe.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = 60 };

static void *supervise(void *arg)
{
    long i = (long)arg;
    pid_t p = fork();
    if (p == 0) {
        usleep(30000 + (useconds_t)(i % 7) * 1000);
        _exit((int)(i % 50));
    }
    if (p < 0)
        return (void *)-1000L;
    int st = 0;
    pid_t r;
    if (i % 3 == 0) {
        struct rusage ru;
        r = wait4(p, &st, 0, &ru);
    } else {
        r = waitpid(p, &st, 0);
    }
    if (r != p)
        return (void *)-1000L;
    return (void *)(long)(WIFEXITED(st) ? WEXITSTATUS(st) : -100);
}

static void on_alrm(int sig)
{
    (void)sig;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    static pthread_t t[N];
    long sum = 0, want = 0;
    for (long i = 0; i < N; i++) {
        REQUIRE(pthread_create(&t[i], NULL, supervise, (void *)i) == 0, "create");
        want += i % 50;
    }
    for (int i = 0; i < N; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (long)r;
    }
    printf("children's statuses add up to %ld (want %ld)\n", sum, want);
    CHECK(sum == want, "%ld", sum);

    struct sigaction sa = {0};
    sa.sa_handler = on_alrm; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    pid_t p = fork();
    REQUIRE(p >= 0, "fork");
    if (p == 0) {
        usleep(1500 * 1000);
        _exit(3);
    }
    alarm(1);
    int st = 0;
    errno = 0;
    pid_t r = waitpid(p, &st, 0);
    printf("waitpid interrupted by a handler: %d, %s\n", (int)r, errno == EINTR ? "EINTR" : "other");
    CHECK(r == -1 && errno == EINTR, "r %d errno %d", (int)r, errno);
    r = waitpid(p, &st, 0);
    printf("then the child's status: %d\n", r == p && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    CHECK(r == p && WIFEXITED(st) && WEXITSTATUS(st) == 3, "r %d st %#x", (int)r, st);

    errno = 0;
    r = waitpid(999999, &st, 0);
    printf("no such child: %d, %s\n", (int)r, errno == ECHILD ? "ECHILD" : "other");
    CHECK(r == -1 && errno == ECHILD, "r %d errno %d", (int)r, errno);

    p = fork();
    REQUIRE(p >= 0, "fork");
    if (p == 0) {
        raise(SIGSTOP);
        _exit(4);
    }
    r = waitpid(p, &st, WUNTRACED);
    printf("WUNTRACED: stopped %d\n", r == p && WIFSTOPPED(st));
    CHECK(r == p && WIFSTOPPED(st), "st %#x", st);
    kill(p, SIGCONT);
    r = waitpid(p, &st, 0);
    printf("after SIGCONT: exit %d\n", r == p && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    CHECK(r == p && WIFEXITED(st) && WEXITSTATUS(st) == 4, "st %#x", st);
    printf("wait_children: done\n");
    return probe_exit("wait_children");
}
