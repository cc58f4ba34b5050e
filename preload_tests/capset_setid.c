/* capset_setid — capabilities and user ids changed by a root program's only
 * thread are every later thread's; one thread's own change stays its own.
 *
 * setpriv(1)'s way, after threads have come and gone: PR_SET_KEEPCAPS,
 * setresuid to nobody, capset (raise the effective set again), setresgid,
 * then PR_CAPBSET_DROP, a capset of the inheritable set and an ambient raise
 * through syscall(). Then 8 threads, each moving between OS threads (sleeps
 * and yields), report their ids and sets (capget with pid 0 and with their
 * own gettid(), the bounding and ambient bits, /proc/thread-self/status);
 * a fork child reports the same. Then one thread lowers its own effective
 * set while others live: it sees the change, the others do not. Last,
 * setresuid back to root from main.
 *
 * Under bobbin the setresgid aborted the program in glibc (its set*id runs
 * on every OS thread; bobbin's had lost their capabilities at the
 * setresuid, since PR_SET_KEEPCAPS and capset had changed one OS thread),
 * and threads that ran on other OS threads saw other sets.
 *
 * Needs root (prints one skip line otherwise). stdout: the reports; the
 * harness compares them with the native run's.
 */
#include <grp.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

enum { NTHREADS = 8, LINE = 256 };

/* glibc's, without a header of its own */
int capget(cap_user_header_t hdr, cap_user_data_t data);
int capset(cap_user_header_t hdr, const cap_user_data_t data);

static void caps(pid_t pid, uint32_t out[3])
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, pid};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    CHECK(capget(&h, d) == 0, "capget(%d)", (int)pid);
    out[0] = d[0].effective;
    out[1] = d[0].permitted;
    out[2] = d[0].inheritable;
}

static void status_line(const char *key, char *out, size_t n)
{
    FILE *f = fopen("/proc/thread-self/status", "r");
    char line[256];
    snprintf(out, n, "%s?", key);
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, strlen(key)) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, n, "%.60s", line);
            break;
        }
    }
    if (f)
        fclose(f);
}

/* this thread's ids and sets, as one line */
static void report(char *out)
{
    uid_t r, e, s;
    gid_t gr, ge, gs;
    getresuid(&r, &e, &s);
    getresgid(&gr, &ge, &gs);
    uint32_t c0[3], c1[3];
    caps(0, c0);
    caps(gettid(), c1);
    CHECK(memcmp(c0, c1, sizeof c0) == 0, "capget by own id differs");
    char eff[64];
    status_line("CapEff:", eff, sizeof eff);
    snprintf(out, LINE, "uid %u/%u/%u gid %u/%u/%u eff %08x prm %08x inh %08x bnd_boot %d amb_nbs %d %s",
             r, e, s, gr, ge, gs, c0[0], c0[1], c0[2], prctl(PR_CAPBSET_READ, CAP_SYS_BOOT),
             prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_NET_BIND_SERVICE, 0, 0), eff);
}

static char lines[NTHREADS][LINE];

static void *reporter(void *arg)
{
    long i = (long)arg;
    for (int k = 0; k < 6; k++) {
        usleep(200 + (unsigned)(i * 37 % 300));
        sched_yield();
    }
    report(lines[i]);
    return NULL;
}

static void *busy(void *arg)
{
    volatile unsigned long x = 0;
    for (unsigned long k = 0; k < 3000000ul + (unsigned long)arg; k++)
        x += k;
    return NULL;
}

/* lowers its own effective set while other threads live */
static void *dropper(void *arg)
{
    char *out = arg;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    CHECK(capget(&h, d) == 0, "capget");
    d[0].effective &= ~(1u << CAP_KILL);
    CHECK(capset(&h, d) == 0, "capset lower");
    usleep(2000);
    sched_yield();
    report(out);
    return NULL;
}

static void *sleeper(void *arg)
{
    char *out = arg;
    usleep(20000);
    report(out);
    return NULL;
}

static void print_reports(const char *what)
{
    /* the distinct lines, each with how many threads gave it */
    for (int i = 0; i < NTHREADS; i++) {
        int seen = 0, n = 0;
        for (int j = 0; j < i; j++)
            seen |= strcmp(lines[j], lines[i]) == 0;
        if (seen)
            continue;
        for (int j = 0; j < NTHREADS; j++)
            n += strcmp(lines[j], lines[i]) == 0;
        printf("%s x%d: %s\n", what, n, lines[i]);
    }
}

static void threads_report(const char *what)
{
    pthread_t t[NTHREADS];
    for (long i = 0; i < NTHREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, reporter, (void *)i) == 0, "create");
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    print_reports(what);
}

int main(void)
{
    if (getuid() != 0) {
        puts("skip: needs root");
        return 0;
    }
    char line[LINE];
    /* threads come and go first: under bobbin their OS threads stay */
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], NULL, busy, (void *)i) == 0, "create");
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    report(line);
    printf("start: %s\n", line);

    CHECK(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) == 0, "keepcaps");
    CHECK(setresuid(65534, 65534, 65534) == 0, "setresuid");
    report(line);
    printf("after setresuid: %s\n", line);
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    CHECK(capget(&h, d) == 0, "capget");
    d[0].effective = d[0].permitted;
    d[1].effective = d[1].permitted;
    CHECK(capset(&h, d) == 0, "capset raise");
    CHECK(setresgid(65534, 65534, 65534) == 0, "setresgid");
    CHECK(setgroups(0, NULL) == 0, "setgroups");
    CHECK(syscall(SYS_prctl, PR_CAPBSET_DROP, CAP_SYS_BOOT, 0, 0, 0) == 0, "bset drop");
    d[0].inheritable |= 1u << CAP_NET_BIND_SERVICE;
    CHECK(syscall(SYS_capset, &h, d) == 0, "capset inheritable");
    CHECK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0) == 0, "ambient");
    report(line);
    printf("main: %s\n", line);
    threads_report("threads");

    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        report(line);
        printf("child: %s\n", line);
        threads_report("child's threads");
        fflush(stdout);
        _exit(probe_exit("capset_setid child"));
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %#x", st);

    /* one thread's own change, while others live */
    char own[LINE], other[LINE];
    pthread_t a, b;
    REQUIRE(pthread_create(&b, NULL, sleeper, other) == 0, "create");
    REQUIRE(pthread_create(&a, NULL, dropper, own) == 0, "create");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("dropper: %s\nother: %s\n", own, other);
    report(line);
    printf("main after: %s\n", line);
    threads_report("threads after");

    CHECK(setresuid(0, 0, 0) == 0, "back to root");
    report(line);
    printf("root again: %s\n", line);
    threads_report("threads as root");
    return probe_exit("capset_setid");
}
