/* zombie_threads — threads that have ended but are not joined yet, and
 * the pthread_t of a running thread, when the ended threads' stacks and
 * TCBs are already running other threads.
 *
 * Under bobbin a green thread's stack and its TCB (glibc's struct pthread,
 * with the thread's TLS) go back to the stack cache the moment the thread
 * ends, as a goroutine's stack does; only the G, which is the pthread_t,
 * waits for the join. So a pthread_t can no longer be the TCB's address,
 * as it is under NPTL: pthread_self() answers the G. This checks that no
 * program can tell:
 *
 * 1. NZ threads end at once and are left unjoined (zombies).
 * 2. NL more threads are alive at once, on the zombies' stacks and TCBs.
 *    Each finds pthread_self() and thrd_current() equal to the pthread_t
 *    pthread_create gave for it, in a signal handler too; no two of the
 *    NZ + NL pthread_ts are equal. Each names itself and reads the name
 *    back, reads its own CPU clock, finds its stack in
 *    pthread_getattr_np(pthread_self()), and signals itself.
 * 3. Meanwhile main cancels, signals (0) and asks the attributes of every
 *    zombie: the answers are printed, to match NPTL's; a cancellation
 *    aimed at a zombie must not reach the live thread that runs on its
 *    recycled TCB (each live thread passes a cancellation point and must
 *    return its own value).
 * 4. Every thread, zombie or live, is joined with its own value.
 */
#define PROBE_NAME "zombie_threads"
#include "probe.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

enum { NZ = 1000, NL = 1000 };

static pthread_t zt[NZ], lt[NL];
static _Atomic int zdone, lstarted;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go;
static _Atomic int bad_self, bad_thrd, bad_handler, bad_name, bad_clock, bad_attr, bad_kill;
static __thread pthread_t in_handler;

static void *zombie(void *arg)
{
    atomic_fetch_add(&zdone, 1);
    return arg;
}

static void on_usr1(int sig)
{
    (void)sig;
    in_handler = pthread_self();
}

static void *live(void *arg)
{
    int i = (int)(intptr_t)arg;
    atomic_fetch_add(&lstarted, 1);
    pthread_mutex_lock(&mu);
    while (!go) /* until main has made all of them and cancelled the zombies */
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);

    pthread_t me = pthread_self();
    if (!pthread_equal(me, lt[i]))
        atomic_fetch_add(&bad_self, 1);
    if ((pthread_t)thrd_current() != lt[i])
        atomic_fetch_add(&bad_thrd, 1);
    if (pthread_kill(me, SIGUSR1) != 0 || !pthread_equal(in_handler, lt[i]))
        atomic_fetch_add(&bad_handler, 1);

    char name[16], back[16] = "";
    snprintf(name, sizeof name, "live%d", i);
    if (pthread_setname_np(me, name) != 0 || pthread_getname_np(lt[i], back, sizeof back) != 0 ||
        strcmp(name, back) != 0)
        atomic_fetch_add(&bad_name, 1);

    clockid_t clk;
    struct timespec ts;
    if (pthread_getcpuclockid(me, &clk) != 0 || clock_gettime(clk, &ts) != 0)
        atomic_fetch_add(&bad_clock, 1);

    pthread_attr_t a;
    void *lo;
    size_t sz;
    if (pthread_getattr_np(me, &a) != 0) {
        atomic_fetch_add(&bad_attr, 1);
    } else {
        pthread_attr_getstack(&a, &lo, &sz);
        char *here = (char *)&a;
        if (here < (char *)lo || here >= (char *)lo + sz)
            atomic_fetch_add(&bad_attr, 1);
        pthread_attr_destroy(&a);
    }
    if (pthread_kill(me, 0) != 0)
        atomic_fetch_add(&bad_kill, 1);

    pthread_testcancel(); /* a cancel meant for a zombie must not land here */
    return (void *)(intptr_t)(i + 100000);
}

static int cmp_handle(const void *a, const void *b)
{
    pthread_t x = *(const pthread_t *)a, y = *(const pthread_t *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    signal(SIGUSR1, on_usr1);

    current_probe = "1: zombies";
    alarm(60);
    for (int i = 0; i < NZ; i++)
        REQUIRE(pthread_create(&zt[i], NULL, zombie, (void *)(intptr_t)(i + 1)) == 0, "create");
    while (atomic_load(&zdone) < NZ)
        sched_yield();
    struct timespec pause = {0, 20 * 1000 * 1000}; /* let the last ones finish exiting */
    nanosleep(&pause, NULL);

    current_probe = "2: live threads on the zombies' stacks";
    for (int i = 0; i < NL; i++)
        REQUIRE(pthread_create(&lt[i], NULL, live, (void *)(intptr_t)i) == 0, "create");
    while (atomic_load(&lstarted) < NL)
        sched_yield();

    current_probe = "3: calls on zombies";
    int cancel_rc[3] = {0}, kill_rc[3] = {0}, attr_rc[3] = {0};
    for (int i = 0; i < NZ; i++) {
        int r = pthread_cancel(zt[i]);
        cancel_rc[r == 0 ? 0 : r == ESRCH ? 1 : 2]++;
        r = pthread_kill(zt[i], 0);
        kill_rc[r == 0 ? 0 : r == ESRCH ? 1 : 2]++;
        pthread_attr_t a;
        r = pthread_getattr_np(zt[i], &a);
        attr_rc[r == 0 ? 0 : r == ESRCH ? 1 : 2]++;
        if (r == 0)
            pthread_attr_destroy(&a);
    }
    printf("pthread_cancel of a zombie: 0 %d, ESRCH %d, other %d\n", cancel_rc[0], cancel_rc[1],
           cancel_rc[2]);
    printf("pthread_kill(zombie, 0): 0 %d, ESRCH %d, other %d\n", kill_rc[0], kill_rc[1],
           kill_rc[2]);
    printf("pthread_getattr_np of a zombie: 0 %d, ESRCH %d, other %d\n", attr_rc[0], attr_rc[1],
           attr_rc[2]);

    static pthread_t all[NZ + NL];
    memcpy(all, zt, sizeof zt);
    memcpy(all + NZ, lt, sizeof lt);
    qsort(all, NZ + NL, sizeof all[0], cmp_handle);
    int dup = 0;
    for (int i = 1; i < NZ + NL; i++)
        dup += all[i] == all[i - 1];
    printf("equal pthread_ts among %d zombies and live threads: %d\n", NZ + NL, dup);
    CHECK(dup == 0, "%d pthread_ts shared by two threads", dup);

    pthread_mutex_lock(&mu);
    go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);

    current_probe = "4: joins";
    int bad_z = 0, bad_l = 0;
    for (int i = 0; i < NL; i++) {
        void *r = NULL;
        REQUIRE(pthread_join(lt[i], &r) == 0, "join live %d", i);
        bad_l += r != (void *)(intptr_t)(i + 100000);
    }
    for (int i = 0; i < NZ; i++) {
        void *r = NULL;
        REQUIRE(pthread_join(zt[i], &r) == 0, "join zombie %d", i);
        bad_z += r != (void *)(intptr_t)(i + 1);
    }
    alarm(0);
    printf("live threads: wrong result (cancelled?) %d, pthread_self %d, thrd_current %d, "
           "in a handler %d, name %d, cpu clock %d, own stack %d, kill 0 %d\n",
           bad_l, atomic_load(&bad_self), atomic_load(&bad_thrd), atomic_load(&bad_handler),
           atomic_load(&bad_name), atomic_load(&bad_clock), atomic_load(&bad_attr),
           atomic_load(&bad_kill));
    printf("zombies joined with a wrong result: %d\n", bad_z);
    CHECK(bad_l == 0 && bad_z == 0, "wrong results: %d live, %d zombies", bad_l, bad_z);
    CHECK(atomic_load(&bad_self) + atomic_load(&bad_thrd) + atomic_load(&bad_handler) +
              atomic_load(&bad_name) + atomic_load(&bad_clock) + atomic_load(&bad_attr) +
              atomic_load(&bad_kill) == 0,
          "a live thread saw a wrong identity");
    printf("zombie_threads: done\n");
    return probe_exit(PROBE_NAME);
}
