/* unstarted_peek — what other threads see of a thread that has not run yet.
 *
 * Under bobbin a new thread's TCB is filled in when the thread first runs,
 * on the CPU that runs it and possibly on another cached stack of the same
 * size (runtime/proc.c, bb_stack_swap). Until then another thread that looks
 * at it settles it where it is: pthread_getattr_np (its stack must be the
 * one the thread then runs on), pthread_cancel (the request must not be
 * lost when the TCB is filled in), pthread_getcpuclockid, and a dlopen of a
 * module with initial-exec TLS (every thread, started or not, must see the
 * module's initial image).
 *
 * ROUNDS times: main creates N threads, each of which first waits at a gate
 * (sem_wait, a cancellation point), so natively as under bobbin none has
 * passed it when main looks. Right after each create main asks for the
 * thread's attributes (every thread), its CPU clock (every 4th) and cancels
 * every 5th. In the first round main then loads libbobbin_tls_mod.so. Then
 * main opens the gate; each thread checks that its own stack (its
 * pthread_getattr_np, and the address of a local) is the one main was told,
 * and, once the module is loaded, that it sees the module's TLS image (42,
 * "image"), then writes its own values there. The cancelled ones end with
 * PTHREAD_CANCELED. main prints the counts, the same natively.
 */
#define PROBE_NAME "unstarted_peek"
#include <signal.h>

#include "probe.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 20, N = 200 };

struct slot {
    pthread_t th;
    void *addr; /* pthread_getattr_np from main, before the gate */
    size_t size;
};

static struct slot slots[N];
static sem_t gate;
static int *(*mod_val)(void);
static const char *(*mod_buf)(void);
static atomic_int bad_stack, bad_image, ran;

static void *body(void *arg)
{
    struct slot *s = arg;
    while (sem_wait(&gate) != 0)
        ;
    atomic_fetch_add(&ran, 1);
    pthread_attr_t a;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &a) != 0 || pthread_attr_getstack(&a, &addr, &size) != 0)
        atomic_fetch_add(&bad_stack, 1);
    else {
        char local;
        uintptr_t p = (uintptr_t)&local;
        if (addr != s->addr || size != s->size || p < (uintptr_t)addr ||
            p >= (uintptr_t)addr + size)
            atomic_fetch_add(&bad_stack, 1);
        pthread_attr_destroy(&a);
    }
    if (mod_val) {
        int *v = mod_val();
        if (*v != 42 || strcmp(mod_buf(), "image") != 0)
            atomic_fetch_add(&bad_image, 1);
        *v = 7; /* left behind for the next thread on this block */
        strcpy((char *)mod_buf(), "dirty");
    }
    return NULL;
}

static void load_module(void)
{
    char exe[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    REQUIRE(n > 0, "readlink /proc/self/exe");
    exe[n] = '\0';
    snprintf(path, sizeof path, "%s/libbobbin_tls_mod.so", dirname(exe));
    void *h = dlopen(path, RTLD_NOW);
    REQUIRE(h != NULL, "dlopen %s: %s", path, dlerror());
    mod_val = (int *(*)(void))dlsym(h, "mod_val");
    mod_buf = (const char *(*)(void))dlsym(h, "mod_buf");
    REQUIRE(mod_val && mod_buf, "dlsym: %s", dlerror());
}

int main(void)
{
    probe_on_signal(SIGALRM, on_alarm, 0);
    alarm(120);
    REQUIRE(sem_init(&gate, 0, 0) == 0, "sem_init");
    int cancelled = 0, clock_err = 0, attr_err = 0, want_cancelled = 0;
    for (int r = 0; r < ROUNDS; r++) {
        current_probe = "create and look";
        for (int i = 0; i < N; i++) {
            struct slot *s = &slots[i];
            REQUIRE(pthread_create(&s->th, NULL, body, s) == 0, "pthread_create");
            pthread_attr_t a;
            if (pthread_getattr_np(s->th, &a) != 0 ||
                pthread_attr_getstack(&a, &s->addr, &s->size) != 0)
                attr_err++;
            else
                pthread_attr_destroy(&a);
            if (i % 4 == 0) {
                clockid_t c;
                struct timespec ts;
                if (pthread_getcpuclockid(s->th, &c) != 0 || clock_gettime(c, &ts) != 0)
                    clock_err++;
            }
            if (i % 5 == 0) {
                CHECK(pthread_cancel(s->th) == 0, "pthread_cancel");
                want_cancelled++;
            }
        }
        if (r == 0)
            load_module();
        current_probe = "gate and join";
        for (int i = 0; i < N; i++)
            sem_post(&gate);
        for (int i = 0; i < N; i++) {
            void *res;
            REQUIRE(pthread_join(slots[i].th, &res) == 0, "pthread_join");
            if (res == PTHREAD_CANCELED)
                cancelled++;
        }
        /* the gate's posts the cancelled threads did not take */
        while (sem_trywait(&gate) == 0)
            ;
    }
    printf("threads %d, ran %d, cancelled %d of %d\n", ROUNDS * N, atomic_load(&ran), cancelled,
           want_cancelled);
    printf("attribute errors %d, clock errors %d, stacks not as reported %d, "
           "TLS images not fresh %d\n",
           attr_err, clock_err, atomic_load(&bad_stack), atomic_load(&bad_image));
    CHECK(cancelled == want_cancelled && atomic_load(&ran) == ROUNDS * N - want_cancelled,
          "cancellations");
    CHECK(attr_err == 0 && clock_err == 0 && atomic_load(&bad_stack) == 0 &&
              atomic_load(&bad_image) == 0,
          "what main saw of threads not run yet");
    return probe_exit(PROBE_NAME);
}
