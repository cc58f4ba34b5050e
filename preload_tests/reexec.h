/* reexec.h — for tests of bobbin's own output (stderr reports, exit status 2,
 * thread dumps): run this same program again as a child, in a named mode and
 * with extra environment, and collect its exit status, stdout and stderr.
 *
 * The harness compares only stdout and exit status, and natively there is no
 * bobbin to report anything, so such a test re-executes itself only when
 * under_bobbin() and prints the same stdout in both runs (natively it prints
 * the lines it expects, or runs a child whose behaviour is the same natively).
 *
 * The child's stdout and stderr go to unlinked temporary files (no pipe to
 * fill up while the parent waits); the parent waits with a deadline and kills
 * the child with SIGKILL when it passes. A child can tell its parent it is
 * ready (reexec_ready) through a pipe whose fd is passed in REEXEC_READY_FD.
 */
#ifndef BOBBIN_REEXEC_H
#define BOBBIN_REEXEC_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REEXEC_MODE_ENV "REEXEC_MODE"
#define REEXEC_READY_ENV "REEXEC_READY_FD"

static inline int under_bobbin(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "libbobbin");
}

/* the child's mode, or NULL in the parent */
static inline const char *reexec_mode(void)
{
    return getenv(REEXEC_MODE_ENV);
}

struct reexec {
    pid_t pid;
    int out_fd, err_fd, ready_rd;
    int status;    /* as from waitpid */
    int timed_out; /* killed at the deadline */
    char *out, *err;
};

/* in the child: tell the parent it may act now */
static inline void reexec_ready(void)
{
    const char *s = getenv(REEXEC_READY_ENV);
    if (s) {
        int fd = atoi(s);
        (void)!write(fd, "r", 1);
        close(fd);
    }
}

static inline int reexec_tmpfd(void)
{
    FILE *f = tmpfile();
    if (f == NULL)
        return -1;
    int fd = dup(fileno(f));
    fclose(f);
    return fd;
}

/* starts the child; env is a NULL-terminated list of "NAME=VALUE" to set
 * and "-NAME" to unset. Returns 0, or -1 with a message on stderr. */
static inline int reexec_start(struct reexec *r, const char *mode, const char *const *env)
{
    memset(r, 0, sizeof *r);
    int pfd[2];
    r->out_fd = reexec_tmpfd();
    r->err_fd = reexec_tmpfd();
    if (r->out_fd < 0 || r->err_fd < 0 || pipe(pfd) != 0) {
        fprintf(stderr, "reexec: temporary files: %s\n", strerror(errno));
        return -1;
    }
    fflush(NULL);
    r->pid = fork();
    if (r->pid < 0) {
        fprintf(stderr, "reexec: fork: %s\n", strerror(errno));
        return -1;
    }
    if (r->pid == 0) {
        struct rlimit nocore = {0, 0};
        setrlimit(RLIMIT_CORE, &nocore);
        /* an ignored signal stays ignored across exec: a shell running us in
         * the background ignores SIGQUIT, which a child must not inherit */
        signal(SIGQUIT, SIG_DFL);
        dup2(r->out_fd, 1);
        dup2(r->err_fd, 2);
        close(pfd[0]);
        char num[16];
        snprintf(num, sizeof num, "%d", pfd[1]);
        setenv(REEXEC_READY_ENV, num, 1);
        setenv(REEXEC_MODE_ENV, mode, 1);
        for (int i = 0; env && env[i]; i++) {
            if (env[i][0] == '-') {
                unsetenv(env[i] + 1);
            } else {
                char buf[256];
                snprintf(buf, sizeof buf, "%s", env[i]);
                char *eq = strchr(buf, '=');
                if (eq) {
                    *eq = '\0';
                    setenv(buf, eq + 1, 1);
                }
            }
        }
        execl("/proc/self/exe", mode, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    r->ready_rd = pfd[0];
    return 0;
}

/* 1 when the child said it is ready within timeout_ms, 0 otherwise */
static inline int reexec_wait_ready(struct reexec *r, int timeout_ms)
{
    struct pollfd p = {.fd = r->ready_rd, .events = POLLIN};
    int n;
    while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
        ;
    char c;
    return n == 1 && read(r->ready_rd, &c, 1) == 1;
}

static inline char *reexec_slurp(int fd)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (buf == NULL)
        return NULL;
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        if (len + 1 >= cap) {
            char *n = realloc(buf, cap * 2);
            if (n == NULL)
                break;
            buf = n;
            cap *= 2;
        }
        ssize_t k = read(fd, buf + len, cap - 1 - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}

/* waits for the child until timeout_ms has passed (then SIGKILL), and reads
 * its output. Returns 0 if it ended by itself. */
static inline int reexec_finish(struct reexec *r, int timeout_ms)
{
    struct timespec tick = {0, 5 * 1000000};
    int waited = 0;
    pid_t w;
    while ((w = waitpid(r->pid, &r->status, WNOHANG)) == 0 && waited < timeout_ms) {
        nanosleep(&tick, NULL);
        waited += 5;
    }
    if (w == 0) {
        r->timed_out = 1;
        kill(r->pid, SIGKILL);
        while (waitpid(r->pid, &r->status, 0) < 0 && errno == EINTR)
            ;
    }
    close(r->ready_rd);
    r->out = reexec_slurp(r->out_fd);
    r->err = reexec_slurp(r->err_fd);
    if (r->out == NULL || r->err == NULL) {
        fprintf(stderr, "reexec: out of memory\n");
        exit(1);
    }
    return r->timed_out ? -1 : 0;
}

/* "exit N", "signal N" or "killed at the deadline": for messages */
static inline const char *reexec_how(const struct reexec *r)
{
    static char buf[64];
    if (r->timed_out)
        return "killed at the deadline (hung)";
    if (WIFEXITED(r->status))
        snprintf(buf, sizeof buf, "exit %d", WEXITSTATUS(r->status));
    else if (WIFSIGNALED(r->status))
        snprintf(buf, sizeof buf, "signal %d", WTERMSIG(r->status));
    else
        snprintf(buf, sizeof buf, "status %#x", r->status);
    return buf;
}

/* the child's stderr, indented, on our stderr (for the harness's log) */
static inline void reexec_show(const char *what, const struct reexec *r)
{
    fprintf(stderr, "--- %s: child ended with %s; its stderr:\n", what, reexec_how(r));
    const char *p = r->err;
    int lines = 0;
    while (*p && lines < 80) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(stderr, "  | %.*s\n", len, p);
        lines++;
        p += len + (nl != NULL);
    }
    fprintf(stderr, "--- end of %s\n", what);
}

static inline int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = strndup(p, len);
        if (line && strstr(line, needle))
            n++;
        free(line);
        p += len + (nl != NULL);
    }
    return n;
}

#endif
