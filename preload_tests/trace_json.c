/* trace_json — BOBBIN_TRACE writes a Chrome/Perfetto trace with a lane per P
 * and the run slices, wake-ups and system calls of the program's threads.
 *
 * Under bobbin the test runs itself again as a child with BOBBIN_TRACE set:
 * 16 threads pass a token round a ring (mutex + condvar) 50 times and sleep
 * a little, then the parent reads the JSON and checks its shape and counts:
 * the document is one object with a traceEvents array; there is a P0 lane
 * (a "thread_name" record); every one of the 17 threads (with main) has at
 * least one run slice ("X" event named G<id>); there are ready events. A
 * native run prints the same lines without a trace to read.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

enum { NT = 16, ROUNDS = 50 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, passes;

static void *ring(void *arg)
{
    int me = (int)(long)arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_mutex_lock(&mu);
        while (turn != me)
            pthread_cond_wait(&cv, &mu);
        turn = (me + 1) % NT;
        passes++;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    return NULL;
}

static int child(void)
{
    pthread_t t[NT];
    for (long i = 0; i < NT; i++)
        if (pthread_create(&t[i], NULL, ring, (void *)i) != 0)
            return 1;
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    return passes == NT * ROUNDS ? 0 : 1;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[n] = '\0';
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    if (getenv("TRACE_JSON_CHILD"))
        return child();
    const char *pre = getenv("LD_PRELOAD");
    if (!(pre && strstr(pre, "libbobbin"))) {
        /* natively there is no trace: print what the bobbin run checks */
        printf("trace: child exit 0\ntrace: one object with traceEvents\ntrace: P0 lane\n"
               "trace: run slices for all %d threads\ntrace: ready events\n", NT + 1);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/bobbin-trace-test.%d.json", (int)getpid());
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TRACE_JSON_CHILD", "1", 1);
        setenv("BOBBIN_TRACE", path, 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    printf("trace: child exit %d\n", code);
    char *js = slurp(path);
    unlink(path);
    REQUIRE(js != NULL, "no trace file was written at %s", path);
    size_t n = strlen(js);
    CHECK(n > 2 && js[0] == '{' && strstr(js, "\"traceEvents\":[") && n >= 3 &&
              strcmp(js + n - 3, "]}\n") == 0,
          "the trace is not one object with a traceEvents array");
    printf("trace: one object with traceEvents\n");
    CHECK(strstr(js, "\"args\":{\"name\":\"P0\"}") != NULL, "no P0 lane");
    printf("trace: P0 lane\n");
    int missing = 0;
    for (int g = 1; g <= NT + 1; g++) {
        char name[48];
        snprintf(name, sizeof name, "{\"name\":\"G%d\",\"cat\":\"run\"", g);
        if (!strstr(js, name))
            missing++;
    }
    CHECK(missing == 0, "%d of %d threads have no run slice", missing, NT + 1);
    CHECK(count(js, "\"cat\":\"run\"") >= NT * ROUNDS / 2,
          "only %d run slices for %d hand-offs", count(js, "\"cat\":\"run\""), NT * ROUNDS);
    printf("trace: run slices for all %d threads\n", NT + 1);
    CHECK(count(js, "\"cat\":\"ready\"") > 0, "no ready events");
    printf("trace: ready events\n");
    free(js);
    return probe_exit("trace_json");
}
