/* echo_server — a thread-per-connection TCP echo server on 127.0.0.1, driven by 5,000
 * concurrent connections from a separate, native client process.
 *
 * usage: echo_server [ECHO_CLIENT_PATH]   (default: echo_client next to this binary)
 *
 * The server listens on an ephemeral port of 127.0.0.1, then forks and execs
 * echo_client (echo_client.c) with LD_PRELOAD removed from the environment it passes
 * to execve, so the load is native even when the server runs under bobbin; the
 * client's stdout comes back through a pipe. Main accepts NCONNS connections and gives
 * each its own thread, which reads and writes back until EOF (read/write, as a plain
 * blocking server does). The client keeps every connection open until all of them
 * have been echoed in full (see echo_client.c), so the server holds NCONNS threads at
 * once — natively NCONNS OS threads; under bobbin NCONNS green threads parked on the
 * netpoller. A watchdog thread waits for the client (waitpid: a call that blocks in
 * the kernel) and ends the server if the client dies before every connection came.
 *
 * The server checks: every connection thread echoed exactly its share of bytes; the
 * client exited 0; the checksum the client computed over the echoed bytes equals the
 * one computed here from the data the client sends (echo_common.h). stdout: the
 * client's report line and one line of the server's own totals.
 *
 * NCONNS is 5,000, or fewer when the hard RLIMIT_NOFILE is too low for 5,000 fds plus
 * slack (said on stderr; both runs of the harness see the same limit). The harness
 * measures only this process's threads (/proc/PID/status of the server), not the
 * client's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "echo_common.h"
#include "probe.h"

enum { WANT_CONNS = 5000, FD_SLACK = 64 };

extern char **environ;

static long nconns;
static pthread_t *threads;
static atomic_long accepted;
static pid_t client_pid;
static int client_status;

static void *serve(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[16384];
    uint64_t echoed = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0)
            break;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            CHECK(0, "read: %s", strerror(errno));
            break;
        }
        ssize_t w = write(fd, buf, (size_t)n); /* a blocking write writes it all */
        if (w != n) {
            CHECK(0, "write returned %zd of %zd: %s", w, n, w < 0 ? strerror(errno) : "short");
            break;
        }
        echoed += (uint64_t)n;
    }
    close(fd);
    return (void *)(uintptr_t)echoed;
}

/* The client must not die before every connection arrived: main would wait in
 * accept for ever. */
static void *watch_client(void *arg)
{
    (void)arg;
    int st;
    pid_t r;
    while ((r = waitpid(client_pid, &st, 0)) < 0 && errno == EINTR)
        ;
    if (r != client_pid) {
        fprintf(stderr, "echo_server: waitpid: %s\n", strerror(errno));
        _exit(1);
    }
    client_status = st;
    if (atomic_load(&accepted) < nconns) {
        fprintf(stderr, "echo_server: the client ended (status 0x%x) after %ld of %ld "
                "connections\n", st, atomic_load(&accepted), nconns);
        _exit(1);
    }
    return NULL;
}

static long conns_for_fd_limit(void)
{
    struct rlimit rl;
    REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit: %s", strerror(errno));
    rlim_t want = WANT_CONNS + FD_SLACK;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
        return WANT_CONNS;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
    if (rl.rlim_cur >= want)
        return WANT_CONNS;
    long n = (long)rl.rlim_cur - FD_SLACK;
    REQUIRE(n >= 100, "RLIMIT_NOFILE hard limit %llu is too low",
            (unsigned long long)rl.rlim_max);
    fprintf(stderr, "echo_server: RLIMIT_NOFILE hard limit is %llu: %ld connections, not %d\n",
            (unsigned long long)rl.rlim_max, n, WANT_CONNS);
    return n;
}

/* environ without LD_PRELOAD: the client runs natively */
static char **native_env(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 1, sizeof *env);
    REQUIRE(env != NULL, "calloc");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

static const char *default_client(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 32);
    REQUIRE(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    strcpy(slash ? slash + 1 : buf, "echo_client");
    return buf;
}

int main(int argc, char **argv)
{
    char pathbuf[PATH_MAX];
    const char *client = argc > 1 ? argv[1] : default_client(pathbuf, sizeof pathbuf);
    signal(SIGPIPE, SIG_IGN);
    alarm(55); /* a hang ends the run (the harness allows 60 s) */
    nconns = conns_for_fd_limit();
    threads = calloc((size_t)nconns, sizeof *threads);
    REQUIRE(threads != NULL, "calloc");

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(lfd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in sa = { .sin_family = AF_INET };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind: %s", strerror(errno));
    REQUIRE(listen(lfd, 4096) == 0, "listen: %s", strerror(errno));
    socklen_t sl = sizeof sa;
    REQUIRE(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0, "getsockname: %s",
            strerror(errno));

    int out[2];
    REQUIRE(pipe2(out, O_CLOEXEC) == 0, "pipe2: %s", strerror(errno));
    char port[16], count[24];
    snprintf(port, sizeof port, "%d", ntohs(sa.sin_port));
    snprintf(count, sizeof count, "%ld", nconns);
    char *cargv[] = { (char *)client, port, count, NULL };
    char **cenv = native_env();
    fflush(NULL);
    client_pid = fork();
    REQUIRE(client_pid >= 0, "fork: %s", strerror(errno));
    if (client_pid == 0) {
        dup2(out[1], 1); /* dup2 clears close-on-exec on fd 1 */
        execve(client, cargv, cenv);
        fprintf(stderr, "echo_server: exec %s: %s\n", client, strerror(errno));
        _exit(127);
    }
    close(out[1]);
    pthread_t watchdog;
    REQUIRE(pthread_create(&watchdog, NULL, watch_client, NULL) == 0, "pthread_create");

    for (long i = 0; i < nconns; i++) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) {
            i--;
            continue;
        }
        REQUIRE(fd >= 0, "accept: %s", strerror(errno));
        int err = pthread_create(&threads[i], NULL, serve, (void *)(intptr_t)fd);
        REQUIRE(err == 0, "pthread_create (connection %ld): %s", i, strerror(err));
        atomic_store(&accepted, i + 1);
    }
    close(lfd);

    uint64_t total = 0, per_conn = echo_bytes_per_conn();
    long short_conns = 0;
    for (long i = 0; i < nconns; i++) {
        void *ret;
        REQUIRE(pthread_join(threads[i], &ret) == 0, "pthread_join");
        total += (uint64_t)(uintptr_t)ret;
        if ((uint64_t)(uintptr_t)ret != per_conn)
            short_conns++;
    }
    CHECK(short_conns == 0, "%ld connections echoed other than %llu bytes", short_conns,
          (unsigned long long)per_conn);

    /* the client's report */
    char report[256];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(out[0], report + got, sizeof report - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        REQUIRE(n >= 0, "read from the client: %s", strerror(errno));
        if (n == 0 || got + (size_t)n == sizeof report - 1) {
            got += (size_t)n;
            break;
        }
        got += (size_t)n;
    }
    report[got] = '\0';
    close(out[0]);
    REQUIRE(pthread_join(watchdog, NULL) == 0, "pthread_join");
    CHECK(WIFEXITED(client_status) && WEXITSTATUS(client_status) == 0,
          "the client ended with status 0x%x", client_status);

    long rconns = -1;
    unsigned long long rbytes = 0, rsum = 0;
    int fields = sscanf(report, "echo_client conns=%ld bytes=%llu checksum=0x%llx", &rconns,
                        &rbytes, &rsum);
    uint64_t want_sum = echo_expected_checksum(nconns);
    CHECK(fields == 3, "client report unreadable: '%s'", report);
    CHECK(rconns == nconns, "client made %ld connections, not %ld", rconns, nconns);
    CHECK(rbytes == per_conn * (uint64_t)nconns, "client got %llu bytes back, want %llu", rbytes,
          (unsigned long long)(per_conn * (uint64_t)nconns));
    CHECK(rsum == want_sum, "client checksum 0x%016llx, want 0x%016llx", rsum,
          (unsigned long long)want_sum);
    CHECK(total == per_conn * (uint64_t)nconns, "server echoed %llu bytes, want %llu",
          (unsigned long long)total, (unsigned long long)(per_conn * (uint64_t)nconns));

    fputs(report, stdout);
    printf("echo_server conns=%ld bytes=%llu checksum %s\n", nconns, (unsigned long long)total,
           rsum == want_sum ? "matches" : "DIFFERS");
    return probe_exit("echo_server");
}
