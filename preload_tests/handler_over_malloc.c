/* handler_over_malloc — a signal handler that interrupts malloc must not
 * let its thread be switched away, and fork must not wait for ever.
 *
 * Node (libuv) runs a SIGCHLD handler that reads and writes back a byte of
 * a pipe; its threads allocate all the time, and its workers spawn
 * children. Under bobbin such a handler, run over malloc holding its
 * arena's lock, was switched away in its read (or preempted in its own
 * code), keeping the lock; a fork then waited in glibc's prepare handler
 * for that lock after bobbin's had taken the scheduler's, and the process
 * hung for ever.
 *
 * NALLOC threads malloc and free blocks of varied sizes without pause; a
 * child process made before them sends the process SIGUSR1 every 200 us;
 * the handler reads the pipe's one byte, spins a little, and writes it
 * back. Main blocks SIGUSR1 and forks ROUNDS children, each exiting with
 * its round's number, and waits for each. Checked: every child's status,
 * the byte still in the pipe at the end, and each thread's checksum of the
 * blocks it wrote. A watchdog (alarm) turns a hang into exit 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_NAME "handler_over_malloc"
#include "probe.h"

enum { NALLOC = 2, ROUNDS = 40 };

static int token[2];
static atomic_int stop;
static atomic_long handled;

static void on_usr1(int sig)
{
    (void)sig;
    int saved = errno;
    char c;
    if (read(token[0], &c, 1) == 1) {
        volatile unsigned spin = 0;
        for (int i = 0; i < 2000; i++)
            spin += (unsigned)i;
        (void)!write(token[1], &c, 1);
    }
    atomic_fetch_add(&handled, 1);
    errno = saved;
}

static void *allocator(void *arg)
{
    (void)arg;
    unsigned long wrote = 0, read_back = 0;
    for (long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
        size_t n = 1024 + (size_t)(i * 7919) % 60000;
        unsigned char *p = malloc(n);
        REQUIRE(p != NULL, "malloc");
        p[0] = (unsigned char)i;
        p[n - 1] = (unsigned char)(i >> 3);
        wrote += (unsigned char)i + (unsigned char)(i >> 3);
        read_back += p[0] + p[n - 1];
        free(p);
    }
    CHECK(wrote == read_back, "a block changed under its thread");
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(50);
    current_probe = "start";
    REQUIRE(pipe(token) == 0 && write(token[1], "t", 1) == 1, "pipe");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    pid_t parent = getpid();
    pid_t sender = fork(); /* no thread yet: a plain process */
    REQUIRE(sender >= 0, "fork");
    if (sender == 0) {
        signal(SIGALRM, SIG_DFL);
        alarm(60);
        while (kill(parent, SIGUSR1) == 0)
            usleep(200);
        _exit(0);
    }
    pthread_t t[NALLOC];
    for (int i = 0; i < NALLOC; i++)
        REQUIRE(pthread_create(&t[i], NULL, allocator, NULL) == 0, "pthread_create");
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL); /* the allocators take them */

    current_probe = "forks";
    int ok = 0;
    for (int r = 0; r < ROUNDS; r++) {
        pid_t pid = fork();
        REQUIRE(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0)
            _exit(r % 100);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        ok += WIFEXITED(st) && WEXITSTATUS(st) == r % 100;
        usleep(500);
    }
    kill(sender, SIGKILL);
    waitpid(sender, NULL, 0);
    atomic_store(&stop, 1);
    for (int i = 0; i < NALLOC; i++)
        pthread_join(t[i], NULL);
    printf("%d of %d children exited as they should\n", ok, ROUNDS);
    CHECK(ok == ROUNDS, "%d children of %d", ok, ROUNDS);
    char c = 0;
    fcntl(token[0], F_SETFL, O_NONBLOCK); /* (no handler runs any more) */
    CHECK(read(token[0], &c, 1) == 1 && c == 't', "the pipe's byte is lost");
    return probe_exit(PROBE_NAME);
}
