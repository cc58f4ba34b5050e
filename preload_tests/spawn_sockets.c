/* spawn_sockets — sockets shared with other programs: posix_spawn, popen,
 * system, fork and exec.
 *
 * bobbin keeps the sockets a process makes non-blocking for real; another
 * program that inherits one shares its open file description, flag
 * included, and expects the blocking mode it was made with. Under bobbin
 * before 2026-11-25 only the exec family restored it, in the child: a
 * child made by posix_spawn (glibc's system and popen use it too) read
 * EAGAIN ("cat: -: Resource temporarily unavailable"), and an exec after
 * fork made even the parent's close-on-exec sockets blocking behind its
 * back, so its next accept blocked its OS thread.
 *
 * 1. posix_spawnp runs `cat` with a socket as stdin: it gets the bytes a
 *    thread sends 20 ms later.
 * 2. popen and system run `head -c` reading an inherited socket.
 * 3. fork and exec `true` while the parent has a close-on-exec listening
 *    socket; then a thread connects 20 ms later and the accept waits for it.
 * A watchdog names the part that hangs.
 */
#define PROBE_NAME "spawn_sockets"
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

struct later {
    int fd;
    const char *text;
};

static void *send_later(void *arg)
{
    struct later *l = arg;
    usleep(20 * 1000);
    CHECK(send(l->fd, l->text, strlen(l->text), 0) > 0, "send");
    shutdown(l->fd, SHUT_WR);
    return NULL;
}

static struct sockaddr_un addr;

static void *connect_later(void *arg)
{
    (void)arg;
    usleep(20 * 1000);
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(c >= 0 && connect(c, (struct sockaddr *)&addr, sizeof addr) == 0, "connect");
    close(c);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(30);

    current_probe = "1: posix_spawnp with a socket as stdin";
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    struct later l = {sv[1], "spawned cat read this\n"};
    pthread_t t;
    pthread_create(&t, NULL, send_later, &l);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[0], 0);
    char *argv[] = {"cat", NULL};
    pid_t pid;
    int r = posix_spawnp(&pid, "cat", &fa, NULL, argv, environ);
    int st = -1;
    if (r == 0)
        waitpid(pid, &st, 0);
    pthread_join(t, NULL);
    printf("1: posix_spawnp %d, cat's status %d\n", r, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[0]);
    close(sv[1]);

    current_probe = "2: popen and system reading an inherited socket";
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    l = (struct later){sv[1], "popen"};
    pthread_create(&t, NULL, send_later, &l);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "head -c 5 <&%d", sv[0]);
    FILE *p = popen(cmd, "r");
    char b[16] = {0};
    size_t n = p ? fread(b, 1, sizeof b - 1, p) : 0;
    int pst = p ? pclose(p) : -1;
    pthread_join(t, NULL);
    printf("2: popen read %zu \"%s\", status %d\n", n, b, WIFEXITED(pst) ? WEXITSTATUS(pst) : -1);
    close(sv[0]);
    close(sv[1]);
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    l = (struct later){sv[1], "system\n"};
    pthread_create(&t, NULL, send_later, &l);
    snprintf(cmd, sizeof cmd, "head -c 7 <&%d", sv[0]);
    int sst = system(cmd);
    pthread_join(t, NULL);
    printf("2: system's status %d\n", WIFEXITED(sst) ? WEXITSTATUS(sst) : -1);
    close(sv[0]);
    close(sv[1]);

    current_probe = "3: accept after a fork and exec";
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "bobbin-spawn-%d", (int)getpid());
    REQUIRE(bind(ls, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(ls, 4) == 0, "listen");
    pid = fork();
    if (pid == 0) {
        execlp("true", "true", (char *)NULL);
        _exit(99);
    }
    waitpid(pid, &st, 0);
    pthread_create(&t, NULL, connect_later, NULL);
    int c = accept(ls, NULL, NULL);
    pthread_join(t, NULL);
    printf("3: child's status %d, then accept %s\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
           c >= 0 ? "got the connection" : strerror(errno));
    alarm(0);
    return probe_exit("spawn_sockets");
}
