/* measure — run one command and watch its OS threads and memory from outside.
 *
 * Used by preload_tests/harness and `scripts/bobbin compare`. It forks, execs the
 * command (with extra environment given by -E, which only the child sees: this
 * process is never run under LD_PRELOAD), and until the child ends reads
 * /proc/PID/status every INTERVAL µs for Threads, VmRSS and VmHWM. It then prints
 * one "key=value" line per measure on stdout:
 *
 *   status=exit 0 | status=signal 11 | status=timeout | status=exec-failed
 *   wall_s=0.412            wall-clock time from fork to reap
 *   threads_peak=3          highest Threads: seen
 *   threads_mean=2.91       mean over the samples
 *   rss_peak_kb=1234        max(VmHWM, getrusage ru_maxrss)
 *   samples=205
 *
 * With -s FILE it also writes every sample to FILE, one line each,
 * "seconds_since_fork threads rss_kb" (VmRSS, not the high-water mark; -1 while
 * the exiting process has no memory left to show), after a "# t_s threads rss_kb"
 * header: `scripts/bobbin compare --plot` draws them.
 *
 * A sample taken every 2 ms can miss a shorter burst of threads; the peak is a lower
 * bound. Sampling never stops or slows the child: it only reads /proc.
 * It must never run the command under a shell, and never leave it running: on
 * timeout the child's whole process group is killed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct sample_totals {
    long threads_peak;
    double threads_sum;
    long samples;
    long hwm_kb;
};

static FILE *series;        /* -s: every sample, or NULL */
static double series_start;

static void usage(void)
{
    fprintf(stderr,
            "usage: measure [-t TIMEOUT_S] [-i INTERVAL_US] [-o STDOUT_FILE] [-e STDERR_FILE]\n"
            "               [-n] [-g] [-s SERIES_FILE] [-E NAME=VALUE]... -- COMMAND [ARG]...\n"
            "  -n  stdin from /dev/null     -g  run the command in its own process group\n"
            "  -s  write every sample to SERIES_FILE: \"seconds threads rss_kb\" per line\n");
    exit(2);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Reads "Name:  value" fields of /proc/PID/status; returns 0 if the process is gone. */
static int sample(pid_t pid, struct sample_totals *s)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';

    long threads = -1, hwm = -1, rss = -1;
    char *line = buf;
    while (*line) {
        if (strncmp(line, "Threads:", 8) == 0)
            threads = strtol(line + 8, NULL, 10);
        else if (strncmp(line, "VmHWM:", 6) == 0)
            hwm = strtol(line + 6, NULL, 10);
        else if (strncmp(line, "VmRSS:", 6) == 0)
            rss = strtol(line + 6, NULL, 10);
        char *nl = strchr(line, '\n');
        if (!nl)
            break;
        line = nl + 1;
    }
    if (threads <= 0)                  /* a zombie: its threads are gone */
        return 0;
    if (series)
        fprintf(series, "%.4f %ld %ld\n", now_s() - series_start, threads, rss);
    s->samples++;
    s->threads_sum += (double)threads;
    if (threads > s->threads_peak)
        s->threads_peak = threads;
    if (hwm > s->hwm_kb)
        s->hwm_kb = hwm;
    if (rss > s->hwm_kb)
        s->hwm_kb = rss;
    return 1;
}

static void redirect(int target, const char *path, int flags)
{
    int fd = open(path, flags, 0644);
    if (fd < 0) {
        fprintf(stderr, "measure: %s: %s\n", path, strerror(errno));
        _exit(126);
    }
    if (fd != target) {
        dup2(fd, target);
        close(fd);
    }
}

int main(int argc, char **argv)
{
    double timeout_s = 0;
    long interval_us = 2000;
    const char *out = NULL, *err = NULL, *series_path = NULL;
    int null_stdin = 0, own_group = 0, opt;
    char **envs = calloc((size_t)argc, sizeof *envs);
    int nenv = 0;

    while ((opt = getopt(argc, argv, "+t:i:o:e:ngs:E:")) != -1) {
        switch (opt) {
        case 't': timeout_s = atof(optarg); break;
        case 'i': interval_us = atol(optarg); break;
        case 'o': out = optarg; break;
        case 'e': err = optarg; break;
        case 'n': null_stdin = 1; break;
        case 'g': own_group = 1; break;
        case 's': series_path = optarg; break;
        case 'E': envs[nenv++] = optarg; break;
        default: usage();
        }
    }
    if (optind >= argc || interval_us <= 0)
        usage();
    if (series_path) {
        series = fopen(series_path, "we"); /* not inherited by the command */
        if (series == NULL) {
            fprintf(stderr, "measure: %s: %s\n", series_path, strerror(errno));
            return 2;
        }
        fprintf(series, "# t_s threads rss_kb\n");
    }

    /* SIGCHLD stays blocked so sigtimedwait can sleep until the next sample or the
     * child's exit, whichever comes first. */
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);

    /* The child reports a failed exec through a close-on-exec pipe. */
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        perror("measure: pipe2");
        return 2;
    }
    fflush(NULL);
    double start = now_s();
    series_start = start;
    pid_t pid = fork();
    if (pid < 0) {
        perror("measure: fork");
        return 2;
    }
    if (pid == 0) {
        sigprocmask(SIG_UNBLOCK, &chld, NULL);
        if (own_group)
            setpgid(0, 0);
        if (null_stdin)
            redirect(0, "/dev/null", O_RDONLY);
        if (out)
            redirect(1, out, O_WRONLY | O_CREAT | O_TRUNC);
        if (err)
            redirect(2, err, O_WRONLY | O_CREAT | O_TRUNC);
        for (int i = 0; i < nenv; i++)
            putenv(envs[i]);
        execvp(argv[optind], argv + optind);
        int e = errno;
        fprintf(stderr, "measure: %s: %s\n", argv[optind], strerror(e));
        if (write(report[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    close(report[1]);
    int exec_errno = 0;
    while (read(report[0], &exec_errno, sizeof exec_errno) < 0 && errno == EINTR)
        ;
    close(report[0]);
    if (own_group)
        setpgid(pid, pid);             /* also here: no race with the child's own call */

    struct sample_totals s = {0, 0, 0, 0};
    struct rusage ru;
    int status = 0, timed_out = 0;
    for (;;) {
        pid_t r = wait4(pid, &status, WNOHANG, &ru);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            perror("measure: wait4");
            return 2;
        }
        sample(pid, &s);
        if (timeout_s > 0 && !timed_out && now_s() - start > timeout_s) {
            timed_out = 1;
            kill(own_group ? -pid : pid, SIGKILL);
        }
        struct timespec ts = {interval_us / 1000000, (interval_us % 1000000) * 1000};
        sigtimedwait(&chld, NULL, &ts);
    }
    double wall = now_s() - start;
    if (timed_out && own_group)
        kill(-pid, SIGKILL);           /* anything the command left behind */

    long maxrss = ru.ru_maxrss > s.hwm_kb ? ru.ru_maxrss : s.hwm_kb;
    if (timed_out)
        printf("status=timeout\n");
    else if (exec_errno != 0)
        printf("status=exec-failed\n");
    else if (WIFEXITED(status))
        printf("status=exit %d\n", WEXITSTATUS(status));
    else
        printf("status=signal %d\n", WTERMSIG(status));
    printf("wall_s=%.3f\n", wall);
    printf("threads_peak=%ld\n", s.threads_peak);
    printf("threads_mean=%.2f\n", s.samples ? s.threads_sum / (double)s.samples : 0.0);
    printf("rss_peak_kb=%ld\n", maxrss);
    printf("samples=%ld\n", s.samples);
    if (series && fclose(series) != 0) {
        perror("measure: series file");
        return 2;
    }
    return 0;
}
