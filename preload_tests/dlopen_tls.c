/* dlopen_tls — initial-exec TLS of a module dlopen'd while threads exist.
 *
 * libbobbin_tls_mod.so (dlopen_tls_mod.c, built beside this binary) has two
 * initial-exec __thread variables, tls_val = 42 and tls_buf = "image", and
 * returns the calling thread's copies (mod_val, mod_buf). glibc puts such a
 * module's TLS in the static TLS surplus of each thread and, at dlopen, copies
 * its image into every thread that already exists; a thread created later gets
 * it with the rest of its TLS block. Under bobbin green threads have TLS blocks
 * bobbin made, which need the same treatment.
 *
 * NOLD threads start and park on a barrier before the dlopen; main then loads
 * the module by absolute path (the directory of /proc/self/exe), creates NNEW
 * more threads and releases everyone. Each thread checks it sees the initial
 * image (42, "image"), then writes its own values into both variables and
 * checks through STEPS yields and short sleeps (a G may resume on another OS
 * thread) that it still reads its own values at the same addresses: no copy
 * is shared. All of them are alive at once (a final barrier), so their
 * addresses must be pairwise distinct, and differ from main's, whose own
 * copies must still hold the image at the end.
 * Each thread also calls the module's libc (errno of a failed open, strerror's
 * message through the locale). Then NCHURN threads are created and joined one
 * at a time after the others ended (their TLS blocks are reused): each must see
 * the image again and leave its own values behind for the next.
 *
 * With the argument "newlm" the module is loaded with dlmopen(LM_ID_NEWLM)
 * into a namespace of its own, where it brings its own libc.so: that libc's
 * errno and locale pointer are static TLS too, which every thread needs.
 * A watchdog (alarm) turns a hang into exit 1, naming the phase.
 */
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

enum { NOLD = 16, NNEW = 16, NALL = NOLD + NNEW, STEPS = 20, NCHURN = 40 };

static const char *volatile current_phase = "start";

static void on_alarm(int sig)
{
    static const char pre[] = "dlopen_tls: watchdog: hung in: ";
    const char *p = current_phase;
    (void)sig;
    (void)!write(2, pre, sizeof pre - 1);
    (void)!write(2, p, strlen(p));
    (void)!write(2, "\n", 1);
    _exit(1);
}

static int *(*mod_val)(void);
static const char *(*mod_buf)(void);
static int (*mod_errno)(void);
static const char *(*mod_strerror)(int);
static char want_msg[128]; /* the message for ENOENT */
static const char *prog = "dlopen_tls";

/* the module's libc works on this thread: its errno and its message */
static int libc_works(const char *who, int id)
{
    int e = mod_errno();
    const char *m = mod_strerror(ENOENT);
    if (e == ENOENT && m != NULL && strcmp(m, want_msg) == 0)
        return 1;
    fprintf(stderr, "%s %d: module's libc: errno %d, message \"%.63s\"\n", who, id, e,
            m ? m : "(null)");
    return 0;
}

static pthread_barrier_t started;   /* NOLD + main: the old threads exist */
static pthread_barrier_t released;  /* NALL + main: the module is loaded */
static pthread_barrier_t finished;  /* NALL + main: every address recorded */

static int *val_addr[NALL];
static const char *buf_addr[NALL];
static atomic_int saw_image[NALL];  /* 1: read 42 and "image" first */
static atomic_int bad[NALL];        /* reads of another thread's values */

static void *thread_main(void *arg)
{
    int id = (int)(uintptr_t)arg;
    int rc;

    if (id < NOLD) {
        rc = pthread_barrier_wait(&started);
        CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD, "started: %d", rc);
    }
    rc = pthread_barrier_wait(&released);
    CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD, "released: %d", rc);

    int *v = mod_val();
    char *b = (char *)mod_buf();
    val_addr[id] = v;
    buf_addr[id] = b;
    atomic_store(&saw_image[id], *v == 42 && strcmp(b, "image") == 0 &&
                                     libc_works("thread", id));
    if (*v != 42 || strcmp(b, "image") != 0)
        fprintf(stderr, "thread %d (%s): first read tls_val=%d tls_buf=\"%.63s\"\n", id,
                id < NOLD ? "old" : "new", *v, b);

    char mine[64];
    for (int s = 0; s < STEPS; s++) {
        int want = id * 1000 + s;
        snprintf(mine, sizeof mine, "thread %d step %d", id, s);
        *mod_val() = want;
        strcpy((char *)mod_buf(), mine);
        if (s % 2 == 0)
            sched_yield();
        else
            usleep(200);
        if (mod_val() != v || mod_buf() != b || *mod_val() != want ||
            strcmp(mod_buf(), mine) != 0)
            atomic_fetch_add(&bad[id], 1);
    }

    rc = pthread_barrier_wait(&finished);
    CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD, "finished: %d", rc);
    return NULL;
}

/* one of the threads made after the others ended: the image again, then
 * values of its own for the next one to find reset */
static void *churn_main(void *arg)
{
    int id = (int)(uintptr_t)arg;
    int ok = *mod_val() == 42 && strcmp(mod_buf(), "image") == 0;
    if (!ok)
        fprintf(stderr, "churn thread %d: first read tls_val=%d tls_buf=\"%.63s\"\n", id,
                *mod_val(), mod_buf());
    ok &= libc_works("churn thread", id);
    *mod_val() = -id;
    snprintf((char *)mod_buf(), 64, "churn %d", id);
    sched_yield();
    ok &= *mod_val() == -id;
    return (void *)(uintptr_t)ok;
}

int main(int argc, char **argv)
{
    pthread_t th[NALL];
    int newlm = argc > 1 && strcmp(argv[1], "newlm") == 0;
    if (newlm)
        prog = "dlmopen_tls";
    snprintf(want_msg, sizeof want_msg, "%s", strerror(ENOENT));
    char exe[PATH_MAX], path[PATH_MAX + 64];

    signal(SIGALRM, on_alarm);
    alarm(50);

    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    REQUIRE(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
    exe[n] = '\0';
    snprintf(path, sizeof path, "%s/libbobbin_tls_mod.so", dirname(exe));

    REQUIRE(pthread_barrier_init(&started, NULL, NOLD + 1) == 0, "barrier_init");
    REQUIRE(pthread_barrier_init(&released, NULL, NALL + 1) == 0, "barrier_init");
    REQUIRE(pthread_barrier_init(&finished, NULL, NALL + 1) == 0, "barrier_init");

    current_phase = "starting the old threads";
    for (int i = 0; i < NOLD; i++) {
        int rc = pthread_create(&th[i], NULL, thread_main, (void *)(uintptr_t)i);
        REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    }
    pthread_barrier_wait(&started);
    usleep(10 * 1000); /* let them park on `released` */

    current_phase = newlm ? "dlmopen" : "dlopen";
    void *h = newlm ? dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL)
                    : dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h != NULL, "%s %s: %s", current_phase, path, dlerror());
    *(void **)&mod_val = dlsym(h, "mod_val");
    *(void **)&mod_buf = dlsym(h, "mod_buf");
    *(void **)&mod_errno = dlsym(h, "mod_errno");
    *(void **)&mod_strerror = dlsym(h, "mod_strerror");
    REQUIRE(mod_val && mod_buf && mod_errno && mod_strerror, "dlsym: %s", dlerror());
    if (newlm) {
        Lmid_t ns = LM_ID_BASE;
        REQUIRE(dlinfo(h, RTLD_DI_LMID, &ns) == 0 && ns != LM_ID_BASE,
                "the module is not in a namespace of its own");
    }

    int *main_v = mod_val();
    const char *main_b = mod_buf();
    int main_image = *main_v == 42 && strcmp(main_b, "image") == 0 && libc_works("main", 0);
    CHECK(main_image, "main: first read tls_val=%d tls_buf=\"%.63s\"", *main_v, main_b);

    current_phase = "starting the new threads";
    for (int i = NOLD; i < NALL; i++) {
        int rc = pthread_create(&th[i], NULL, thread_main, (void *)(uintptr_t)i);
        REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
    }
    current_phase = "running";
    pthread_barrier_wait(&released);
    pthread_barrier_wait(&finished);
    current_phase = "joining";
    for (int i = 0; i < NALL; i++)
        REQUIRE(pthread_join(th[i], NULL) == 0, "join %d", i);
    alarm(0);

    int old_ok = 0, new_ok = 0, private = 1;
    for (int i = 0; i < NALL; i++) {
        int ok = atomic_load(&saw_image[i]) && atomic_load(&bad[i]) == 0;
        CHECK(atomic_load(&saw_image[i]), "thread %d (%s) did not see the initial image", i,
              i < NOLD ? "old, there at the dlopen" : "new, created after it");
        CHECK(atomic_load(&bad[i]) == 0, "thread %d (%s): %d of %d steps read another "
              "thread's values or moved address", i, i < NOLD ? "old" : "new",
              atomic_load(&bad[i]), STEPS);
        if (val_addr[i] == main_v || buf_addr[i] == main_b) {
            private = 0;
            CHECK(0, "thread %d shares main's copy", i);
        }
        for (int j = 0; j < i; j++)
            if (val_addr[i] == val_addr[j] || buf_addr[i] == buf_addr[j]) {
                private = 0;
                CHECK(0, "threads %d and %d share a copy (%p %p)", j, i,
                      (void *)val_addr[i], (void *)buf_addr[i]);
            }
        if (ok)
            *(i < NOLD ? &old_ok : &new_ok) += 1;
    }
    current_phase = "churn";
    alarm(50);
    int churn_ok = 0;
    for (int i = 0; i < NCHURN; i++) {
        pthread_t t;
        void *r = NULL;
        REQUIRE(pthread_create(&t, NULL, churn_main, (void *)(uintptr_t)i) == 0, "create");
        REQUIRE(pthread_join(t, &r) == 0, "join");
        churn_ok += r != NULL;
    }
    alarm(0);
    CHECK(churn_ok == NCHURN, "%d of %d threads made after the others ended saw the image "
          "and a working libc", churn_ok, NCHURN);

    int main_kept = *mod_val() == 42 && strcmp(mod_buf(), "image") == 0 &&
                    mod_val() == main_v;
    CHECK(main_kept, "main's copy changed: tls_val=%d tls_buf=\"%.63s\"", *mod_val(),
          mod_buf());

    printf("%s: %d old + %d new threads saw the initial image and private "
           "copies: %s\n", prog, NOLD, NNEW,
           old_ok == NOLD && new_ok == NNEW && private && main_image && main_kept ? "yes"
                                                                                 : "no");
    printf("%s: %d later threads saw it again: %d\n", prog, NCHURN, churn_ok);
    dlclose(h);
    return probe_exit(prog);
}
