/* repro: pthread_kill to a thread blocked in accept (and in connect).
 *
 * Bug found by apache.sh: apache's worker MPM with a single listener blocks its
 * listener thread in accept, and wakes it at shutdown with pthread_kill(listener,
 * SIGHUP) (handler without SA_RESTART); natively accept fails with EINTR and the
 * listener sees it must exit. Under bobbin the G parked on the netpoller ran the
 * handler and went back to waiting for a connection, so every child outlived the
 * parent's SIGTERM (AH00045 "child process still did not exit").
 *
 * A thread accepts on a listening socket nobody connects to; main sends it SIGHUP
 * after 100 ms and expects accept to return -1/EINTR; 2 s watchdog.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROBE_NAME "kill_accept"
#include "../../probe.h"

static int ls;
static volatile int result = 1, result_errno;

static void dummy(int sig)
{
    (void)sig;
}

static void *listener(void *arg)
{
    (void)arg;
    result = accept(ls, NULL, NULL);
    result_errno = errno;
    return NULL;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = dummy; /* no SA_RESTART, as apr_signal installs it */
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGHUP, &sa, NULL) == 0, "sigaction");
    signal(SIGALRM, on_alarm);
    ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    REQUIRE(ls >= 0 && bind(ls, (struct sockaddr *)&a, sizeof a) == 0 && listen(ls, 5) == 0,
            "listening socket: %s", strerror(errno));
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, listener, NULL) == 0, "pthread_create");
    usleep(100000);
    current_probe = "accept interrupted by pthread_kill within 2 s";
    alarm(2);
    pthread_kill(t, SIGHUP);
    pthread_join(t, NULL);
    printf("accept interrupted: %d, errno EINTR: %s\n", result, result_errno == EINTR ? "yes" : "no");
    CHECK(result == -1 && result_errno == EINTR, "accept returned %d (%s), want -1/EINTR",
          result, strerror(result_errno));
    return probe_exit("kill_accept");
}
