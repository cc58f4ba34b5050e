/* fork_setid — a child forked by a thread that moved between OS threads
 * changes its ids (varnish's manager forks a child that calls seteuid).
 *
 * 40 rounds: main waits in a pipe read that a new thread satisfies 2 ms
 * later (so main's thread may come back on another OS thread), then forks;
 * the child calls seteuid(geteuid()), setegid(getegid()) and
 * setresuid(-1, -1, -1) (no privilege needed; glibc still makes every thread
 * of the process take the change) and exits 0. Then the same with a child
 * forked by a second thread. Each child has 10 s (alarm) to finish.
 * Checks: every child exits 0.
 *
 * Under bobbin a child forked after main had moved off the process's first
 * OS thread spun for ever in glibc's set*id: glibc's list of threads held
 * main's entry with the child's one OS thread id, bobbin ran the call on
 * that OS thread's own entry, and glibc signalled the thread itself and
 * waited for an answer that was marked elsewhere (7 to 22 children of 50).
 *
 * stdout: one line.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_NAME "fork_setid"
#include "probe.h"

enum { ROUNDS = 40 };

static void *late_writer(void *arg)
{
    int fd = (int)(long)arg;
    usleep(2000);
    (void)!write(fd, "x", 1);
    return NULL;
}

/* one round: a blocking read another thread ends, then a child that
 * changes its ids; 1 if the child exited 0 */
static int round_once(void)
{
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, late_writer, (void *)(long)p[1]) == 0, "create");
    char c;
    REQUIRE(read(p[0], &c, 1) == 1, "read");
    pthread_join(t, NULL);
    close(p[0]);
    close(p[1]);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        alarm(10);
        if (seteuid(geteuid()) != 0 || setegid(getegid()) != 0 || setresuid(-1, -1, -1) != 0)
            _exit(2);
        _exit(0);
    }
    int st = 0;
    pid_t r;
    do
        r = waitpid(pid, &st, 0);
    while (r < 0 && errno == EINTR);
    CHECK(r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %#x", (int)pid, st);
    return r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void *forker(void *arg)
{
    int *ok = arg;
    for (int i = 0; i < ROUNDS; i++)
        *ok += round_once();
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(300);
    current_probe = "main forks";
    int ok_main = 0, ok_thread = 0;
    forker(&ok_main);
    current_probe = "a thread forks";
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, forker, &ok_thread) == 0, "create");
    pthread_join(t, NULL);
    printf("children that changed their ids and exited 0: %d of %d forked by main, %d of %d by a thread\n",
           ok_main, ROUNDS, ok_thread, ROUNDS);
    return probe_exit(PROBE_NAME);
}
