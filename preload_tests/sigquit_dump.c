/* sigquit_dump — SIGQUIT, when the program has no handler for it, dumps every
 * thread on stderr and then kills the process by SIGQUIT, as natively.
 *
 * Children (this program re-executed, see reexec.h), run natively and under
 * bobbin alike:
 *  - park: three threads named "quit-cond", "quit-sleep" and "quit-read"
 *    wait in pthread_cond_wait, sleep and read on an empty pipe; main joins
 *    the first. The child says it is ready, the parent sends SIGQUIT. The
 *    child must die by SIGQUIT (natively: the default action). Under bobbin
 *    its stderr must also say "SIGQUIT" and name the three threads.
 *  - own: the program installs its own SIGQUIT handler, which prints a line
 *    and exits 0: the handler must run (the child exits 0 with that line) and,
 *    under bobbin, no dump is printed.
 * A deadline per child (10 s) turns a hang into a failure.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"
#include "reexec.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pfd[2];
static atomic_int parked;

static void *quit_cond(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "quit-cond");
    pthread_mutex_lock(&mu);
    atomic_fetch_add(&parked, 1);
    for (;;)
        pthread_cond_wait(&cv, &mu);
    return NULL;
}

static void *quit_sleep(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "quit-sleep");
    atomic_fetch_add(&parked, 1);
    for (;;)
        sleep(1000);
    return NULL;
}

static void *quit_read(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "quit-read");
    atomic_fetch_add(&parked, 1);
    char c;
    (void)!read(pfd[0], &c, 1);
    return NULL;
}

static void start_three(void)
{
    pthread_t t[3];
    if (pipe(pfd) != 0)
        exit(1);
    pthread_create(&t[0], NULL, quit_cond, NULL);
    pthread_create(&t[1], NULL, quit_sleep, NULL);
    pthread_create(&t[2], NULL, quit_read, NULL);
    while (atomic_load(&parked) < 3) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct timespec ts = {0, 50 * 1000000}; /* let them reach their waits */
    nanosleep(&ts, NULL);
    printf("child: three threads parked\n");
    fflush(stdout);
    reexec_ready();
    pthread_join(t[0], NULL);
}

static int child_park(void)
{
    start_three();
    return 1; /* not reached: SIGQUIT ends us */
}

static void on_quit(int sig)
{
    (void)sig;
    static const char msg[] = "child: own SIGQUIT handler ran\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(0);
}

static int child_own(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit;
    sigaction(SIGQUIT, &sa, NULL);
    start_three();
    return 1;
}

static void quit_child(const char *mode, struct reexec *r)
{
    REQUIRE(reexec_start(r, mode, NULL) == 0, "start");
    int ready = reexec_wait_ready(r, 10000);
    CHECK(ready, "%s: the child never said it was ready", mode);
    if (ready)
        kill(r->pid, SIGQUIT);
    reexec_finish(r, 10000);
}

int main(void)
{
    const char *mode = reexec_mode();
    if (mode)
        return strcmp(mode, "park") == 0 ? child_park() : child_own();

    struct reexec r;
    quit_child("park", &r);
    int died = !r.timed_out && WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGQUIT;
    int out_ok = strcmp(r.out, "child: three threads parked\n") == 0;
    printf("no handler: child %s\n", died && out_ok ? "parked three threads, died by SIGQUIT"
                                                    : "FAILED");
    CHECK(died, "no handler: the child ended with %s, want signal %d", reexec_how(&r), SIGQUIT);
    CHECK(out_ok, "no handler: child stdout \"%s\"", r.out);
    if (under_bobbin()) {
        int says = strstr(r.err, "SIGQUIT") != NULL;
        int names = strstr(r.err, "quit-cond") && strstr(r.err, "quit-sleep") &&
                    strstr(r.err, "quit-read");
        CHECK(says, "no handler: bobbin's dump does not say \"SIGQUIT\"");
        CHECK(names, "no handler: the dump does not name quit-cond, quit-sleep, quit-read");
        if (!says || !names || !died)
            reexec_show("park", &r);
    }
    free(r.out);
    free(r.err);

    quit_child("own", &r);
    int ran = !r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 &&
              strcmp(r.out, "child: three threads parked\nchild: own SIGQUIT handler ran\n") == 0;
    int no_dump = strstr(r.err, "dump") == NULL;
    printf("own handler: %s\n", ran ? "the program's handler ran, exit 0" : "FAILED");
    CHECK(ran, "own handler: the child ended with %s, stdout \"%s\"", reexec_how(&r), r.out);
    CHECK(no_dump, "own handler: bobbin dumped the threads anyway");
    if (!ran || !no_dump)
        reexec_show("own", &r);
    free(r.out);
    free(r.err);
    return probe_exit("sigquit_dump");
}
