/* fork_threads — fork, system, popen and exec from threads other than main,
 * while other threads run.
 *
 *  1. pthread_atfork: two sets of handlers; a thread that is not main forks
 *     while 4 threads churn malloc and 4 sleep in a condvar. The prepare
 *     handlers run last-registered first, parent and child handlers in
 *     registration order; the child and the parent each print what ran. The
 *     child (one thread, the forking one: pthread_self is unchanged) then
 *     makes 8 threads that sleep, pass a token through a pipe ring and add
 *     under a mutex, prints the results and exits 42; the forking thread
 *     waitpids it.
 *  2. 4 threads fork 5 times each at once; each child makes 2 threads that
 *     sleep and compute, then exits with its own code, checked by its parent
 *     thread.
 *  3. system() ("exit N") and popen() (read and write modes) from 6 threads at
 *     once, each with its own expected status and output.
 *  4. fork + exec of /bin/echo from a thread, its stdout read through a pipe;
 *     posix_spawn of /bin/echo from another thread likewise.
 *  5. execv of this program from a thread while 4 others run: the new image
 *     (argv[1] = "exec-from-thread") prints one line and exits 0; so the
 *     process's exit status is that of the new image.
 * A watchdog (alarm) turns a hang into exit 1, naming the part.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

extern char **environ;

static const char *volatile current_part = "start";

static void on_alarm(int sig)
{
    static const char pre[] = "fork_threads: watchdog: hung in: ";
    const char *p = current_part;
    (void)sig;
    (void)!write(2, pre, sizeof pre - 1);
    (void)!write(2, p, strlen(p));
    (void)!write(2, "\n", 1);
    _exit(1);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- background: malloc churners and condvar sleepers ---- */

static atomic_int bg_stop;
static pthread_mutex_t bg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_cv = PTHREAD_COND_INITIALIZER;

static void *churner(void *arg)
{
    uint64_t x = (uintptr_t)arg + 1, n = 0;
    while (!atomic_load(&bg_stop)) {
        void *p[8];
        for (int i = 0; i < 8; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            p[i] = malloc(16 + (x >> 52));
            memset(p[i], 1, 16);
        }
        for (int i = 0; i < 8; i++)
            free(p[i]);
        if (++n % 64 == 0)
            sleep_ms(1);
    }
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&bg_mu);
    while (!atomic_load(&bg_stop))
        pthread_cond_wait(&bg_cv, &bg_mu);
    pthread_mutex_unlock(&bg_mu);
    return NULL;
}

enum { NBG = 4 };
static pthread_t bg_threads[2 * NBG];

static void bg_start(void)
{
    atomic_store(&bg_stop, 0);
    for (int i = 0; i < NBG; i++) {
        REQUIRE(pthread_create(&bg_threads[i], NULL, churner, (void *)(intptr_t)i) == 0, "c");
        REQUIRE(pthread_create(&bg_threads[NBG + i], NULL, sleeper, NULL) == 0, "c");
    }
}

static void bg_stop_all(void)
{
    pthread_mutex_lock(&bg_mu);
    atomic_store(&bg_stop, 1);
    pthread_cond_broadcast(&bg_cv);
    pthread_mutex_unlock(&bg_mu);
    for (int i = 0; i < 2 * NBG; i++)
        pthread_join(bg_threads[i], NULL);
}

/* ---- 1. atfork order, and a child that makes threads ---- */

static atomic_int recording;
static char fork_log[64];
static int fork_nlog;

static void rec(const char *s)
{
    if (!atomic_load(&recording))
        return;
    size_t n = strlen(fork_log);
    snprintf(fork_log + n, sizeof fork_log - n, "%s%s", n ? " " : "", s);
    fork_nlog++;
}
static void prepare1(void) { rec("prepare1"); }
static void prepare2(void) { rec("prepare2"); }
static void parent1(void) { rec("parent1"); }
static void parent2(void) { rec("parent2"); }
static void child1(void) { rec("child1"); }
static void child2(void) { rec("child2"); }

/* the child's threads: a token ring over pipes, sleeps, a shared sum */
enum { NCHILD_THREADS = 8, ROUNDS = 50 };
static int ring[NCHILD_THREADS][2];
static pthread_mutex_t sum_mu = PTHREAD_MUTEX_INITIALIZER;
static long child_sum;

static void *ring_thread(void *arg)
{
    int i = (int)(intptr_t)arg;
    sleep_ms(5 + i);
    for (int r = 0; r < ROUNDS; r++) {
        int tok;
        if (read(ring[i][0], &tok, sizeof tok) != (ssize_t)sizeof tok)
            return (void *)-1;
        pthread_mutex_lock(&sum_mu);
        child_sum += tok;
        pthread_mutex_unlock(&sum_mu);
        tok++;
        if (r == ROUNDS - 1 && i == NCHILD_THREADS - 1)
            break; /* the last pass ends the ring */
        if (write(ring[(i + 1) % NCHILD_THREADS][1], &tok, sizeof tok) != (ssize_t)sizeof tok)
            return (void *)-1;
    }
    return (void *)(intptr_t)(i * 10);
}

static pthread_t forker_self;

static void child_after_fork(void)
{
    printf("  child: atfork handlers ran: %s\n", fork_log);
    printf("  child: pthread_self unchanged=%d\n", pthread_equal(pthread_self(), forker_self));
    for (int i = 0; i < NCHILD_THREADS; i++)
        if (pipe(ring[i]) != 0)
            _exit(3);
    pthread_t ts[NCHILD_THREADS];
    for (int i = 0; i < NCHILD_THREADS; i++)
        if (pthread_create(&ts[i], NULL, ring_thread, (void *)(intptr_t)i) != 0)
            _exit(4);
    int tok = 1;
    if (write(ring[0][1], &tok, sizeof tok) != (ssize_t)sizeof tok)
        _exit(5);
    long rets = 0;
    for (int i = 0; i < NCHILD_THREADS; i++) {
        void *r;
        pthread_join(ts[i], &r);
        rets += (intptr_t)r;
    }
    /* tokens 1 .. ROUNDS*N, each added once */
    long n = (long)ROUNDS * NCHILD_THREADS;
    printf("  child: %d threads, token ring sum=%ld (want %ld), join values sum=%ld\n",
           NCHILD_THREADS, child_sum, n * (n + 1) / 2, rets);
    int ok = child_sum == n * (n + 1) / 2 && rets == 280 &&
             strcmp(fork_log, "prepare2 prepare1 child1 child2") == 0 &&
             pthread_equal(pthread_self(), forker_self);
    if (!ok)
        fprintf(stderr, "fork_threads: child computed wrong values\n");
    exit(ok ? 42 : 6); /* exit: atexit handlers and stdio flush in the child */
}

static void *forker(void *arg)
{
    (void)arg;
    forker_self = pthread_self();
    sleep_ms(20); /* the background threads are going */
    fflush(stdout);
    atomic_store(&recording, 1);
    pid_t pid = fork();
    if (pid == 0)
        child_after_fork(); /* never returns */
    atomic_store(&recording, 0);
    if (pid < 0)
        return (void *)-1;
    int st;
    pid_t w = waitpid(pid, &st, 0);
    return (void *)(intptr_t)(w == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void part_atfork(void)
{
    current_part = "atfork + fork from a thread";
    pthread_atfork(prepare1, parent1, child1);
    pthread_atfork(prepare2, parent2, child2);
    printf("1. fork from a thread while %d others run\n", 2 * NBG);
    fflush(stdout);
    bg_start();
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, forker, NULL) == 0, "create");
    void *ret;
    pthread_join(t, &ret);
    bg_stop_all();
    printf("  parent: atfork handlers ran: %s\n", fork_log);
    printf("  parent: child exit status %ld\n", (long)(intptr_t)ret);
    CHECK(strcmp(fork_log, "prepare2 prepare1 parent1 parent2") == 0, "parent log: %s",
          fork_log);
    CHECK(ret == (void *)42, "child status %ld", (long)(intptr_t)ret);
}

/* ---- 2. many forks at once ---- */

enum { NFORKERS = 4, FORKS_EACH = 5 };

static void *child_worker(void *arg)
{
    sleep_ms(2);
    uint64_t x = (uintptr_t)arg;
    for (int i = 0; i < 10000; i++)
        x = x * 6364136223846793005u + 1442695040888963407u;
    return (void *)(uintptr_t)(x & 0xff);
}

static void *multi_forker(void *arg)
{
    int id = (int)(intptr_t)arg;
    int good = 0;
    for (int k = 0; k < FORKS_EACH; k++) {
        int code = 10 + id * FORKS_EACH + k;
        pid_t pid = fork();
        if (pid == 0) {
            pthread_t a, b;
            void *ra, *rb;
            if (pthread_create(&a, NULL, child_worker, (void *)1) != 0 ||
                pthread_create(&b, NULL, child_worker, (void *)1) != 0)
                _exit(1);
            pthread_join(a, &ra);
            pthread_join(b, &rb);
            _exit(ra == rb ? code : 2);
        }
        if (pid < 0)
            continue;
        int st;
        if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == code)
            good++;
        else
            fprintf(stderr, "fork_threads: forker %d child %d: status %#x, want exit %d\n",
                    id, k, st, code);
    }
    return (void *)(intptr_t)good;
}

static void part_many_forks(void)
{
    current_part = "many forks at once";
    fflush(stdout);
    bg_start();
    pthread_t ts[NFORKERS];
    for (int i = 0; i < NFORKERS; i++)
        REQUIRE(pthread_create(&ts[i], NULL, multi_forker, (void *)(intptr_t)i) == 0, "c");
    int good = 0;
    for (int i = 0; i < NFORKERS; i++) {
        void *r;
        pthread_join(ts[i], &r);
        good += (int)(intptr_t)r;
    }
    bg_stop_all();
    printf("2. %d threads x %d forks at once: children with the right status %d\n", NFORKERS,
           FORKS_EACH, good);
    CHECK(good == NFORKERS * FORKS_EACH, "%d good children", good);
}

/* ---- 3. system and popen from several threads ---- */

enum { NSYS = 6 };
struct sysres {
    int system_status, pclose_r, pclose_w;
    char line1[64], line2[64];
};
static struct sysres sysres[NSYS];

static void *system_thread(void *arg)
{
    int i = (int)(intptr_t)arg;
    struct sysres *r = &sysres[i];
    char cmd[64];
    snprintf(cmd, sizeof cmd, "sleep 0.05; exit %d", 20 + i);
    int st = system(cmd);
    r->system_status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    snprintf(cmd, sizeof cmd, "sleep 0.05; echo popen-%d; echo second-%d", i, i);
    FILE *f = popen(cmd, "r");
    if (f) {
        if (!fgets(r->line1, sizeof r->line1, f))
            strcpy(r->line1, "(none)\n");
        if (!fgets(r->line2, sizeof r->line2, f))
            strcpy(r->line2, "(none)\n");
        r->pclose_r = pclose(f);
    }
    f = popen("cat > /dev/null", "w");
    if (f) {
        for (int k = 0; k < 1000; k++)
            fprintf(f, "line %d of thread %d\n", k, i);
        r->pclose_w = pclose(f);
    }
    return NULL;
}

static void part_system_popen(void)
{
    current_part = "system/popen from threads";
    fflush(stdout);
    pthread_t ts[NSYS];
    for (int i = 0; i < NSYS; i++)
        REQUIRE(pthread_create(&ts[i], NULL, system_thread, (void *)(intptr_t)i) == 0, "c");
    for (int i = 0; i < NSYS; i++)
        pthread_join(ts[i], NULL);
    printf("3. system() and popen() from %d threads at once\n", NSYS);
    for (int i = 0; i < NSYS; i++) {
        struct sysres *r = &sysres[i];
        char want1[32], want2[32];
        snprintf(want1, sizeof want1, "popen-%d\n", i);
        snprintf(want2, sizeof want2, "second-%d\n", i);
        printf("  thread %d: system exit %d, popen read \"%.*s\" \"%.*s\" pclose %d, "
               "popen write pclose %d\n", i, r->system_status,
               (int)strcspn(r->line1, "\n"), r->line1, (int)strcspn(r->line2, "\n"), r->line2,
               r->pclose_r, r->pclose_w);
        CHECK(r->system_status == 20 + i, "thread %d system: %d", i, r->system_status);
        CHECK(strcmp(r->line1, want1) == 0 && strcmp(r->line2, want2) == 0,
              "thread %d popen read: %s %s", i, r->line1, r->line2);
        CHECK(r->pclose_r == 0 && r->pclose_w == 0, "thread %d pclose %d %d", i, r->pclose_r,
              r->pclose_w);
    }
}

/* ---- 4. fork + exec, and posix_spawn, from threads ---- */

static char exec_out[2][128];

static int read_all(int fd, char *buf, size_t size)
{
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == size - 1)
            break;
    }
    buf[len] = '\0';
    return (int)len;
}

static void *exec_thread(void *arg)
{
    int spawn = (int)(intptr_t)arg;
    int pfd[2];
    if (pipe(pfd) != 0)
        return (void *)-1;
    pid_t pid;
    if (spawn) {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        posix_spawn_file_actions_addclose(&fa, pfd[0]);
        posix_spawn_file_actions_addclose(&fa, pfd[1]);
        char *argv[] = {"echo", "hello", "from", "posix_spawn", NULL};
        int rc = posix_spawn(&pid, "/bin/echo", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0)
            return (void *)-1;
    } else {
        pid = fork();
        if (pid == 0) {
            dup2(pfd[1], 1);
            close(pfd[0]);
            close(pfd[1]);
            execl("/bin/echo", "echo", "hello", "from", "exec", (char *)NULL);
            _exit(127);
        }
        if (pid < 0)
            return (void *)-1;
    }
    close(pfd[1]);
    read_all(pfd[0], exec_out[spawn], sizeof exec_out[spawn]);
    close(pfd[0]);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return (void *)-1;
    return (void *)(intptr_t)WEXITSTATUS(st);
}

static void part_exec(void)
{
    current_part = "fork+exec and posix_spawn from threads";
    fflush(stdout);
    bg_start();
    pthread_t a, b;
    REQUIRE(pthread_create(&a, NULL, exec_thread, (void *)0) == 0, "c");
    REQUIRE(pthread_create(&b, NULL, exec_thread, (void *)1) == 0, "c");
    void *ra, *rb;
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    bg_stop_all();
    printf("4. fork+exec from a thread: status %ld, output \"%.*s\"\n", (long)(intptr_t)ra,
           (int)strcspn(exec_out[0], "\n"), exec_out[0]);
    printf("   posix_spawn from a thread: status %ld, output \"%.*s\"\n", (long)(intptr_t)rb,
           (int)strcspn(exec_out[1], "\n"), exec_out[1]);
    CHECK(ra == 0 && strcmp(exec_out[0], "hello from exec\n") == 0, "fork+exec");
    CHECK(rb == 0 && strcmp(exec_out[1], "hello from posix_spawn\n") == 0, "posix_spawn");
}

/* ---- 5. execv of the whole process from a thread ---- */

static void *execv_thread(void *arg)
{
    (void)arg;
    sleep_ms(20);
    printf("5. execv from a thread while %d others run\n", 2 * NBG);
    if (atomic_load(&probe_failures) != 0) /* the new image cannot tell: stop here */
        exit(probe_exit("fork_threads"));
    fflush(stdout);
    char *argv[] = {"fork_threads", "exec-from-thread", NULL};
    execv("/proc/self/exe", argv);
    fprintf(stderr, "fork_threads: execv: %s\n", strerror(errno));
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-from-thread") == 0) {
        /* the new image: single-threaded again, threads work */
        pthread_t t;
        void *r;
        REQUIRE(pthread_create(&t, NULL, child_worker, (void *)1) == 0, "create");
        pthread_join(t, &r);
        printf("  new image: running, a thread made and joined (value %ld)\n",
               (long)(intptr_t)r);
        return probe_exit("fork_threads");
    }
    signal(SIGALRM, on_alarm);
    alarm(60);
    part_atfork();
    part_many_forks();
    part_system_popen();
    part_exec();
    current_part = "execv from a thread";
    bg_start();
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, execv_thread, NULL) == 0, "create");
    pthread_join(t, NULL); /* never returns: the thread replaces the process */
    return 1;
}
