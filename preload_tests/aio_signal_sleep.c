/* aio_signal_sleep.c — POSIX AIO completions, signalled with SIGEV_SIGNAL,
 * cut short the sleep that waits for them (stress-ng --aio's loop).
 *
 * Main keeps NREQ writes in flight and sleeps 50 ms between looks; each
 * completion sends SIGUSR1 to the process (from glibc's helper thread), whose
 * handler counts it. A sleep ends with EINTR as soon as a completion's
 * handler runs. Natively the signal is delivered to main, the thread that
 * does not block it, and one of the 16 writes just issued completes during
 * nearly every sleep: a sleep that runs its whole 50 ms (usleep returns 0)
 * happens a few times in tens of thousands. A runtime that lets the handler
 * run while the thread is still entering the sleep, or that leaves the
 * signal pending unseen while it sleeps, has its sleeps run whole.
 *
 * Checks: every write completes with its full length and the file holds
 * what was written; at most MAX_WHOLE of ROUNDS sleeps ran whole; the
 * handler ran at least once per round that issued writes.
 */
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

enum { NREQ = 16, SZ = 4096, ROUNDS = 400, MAX_WHOLE = 8 };

static volatile sig_atomic_t handled;

static void on_done(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (si->si_code == SI_ASYNCIO)
        handled++;
}

int main(void)
{
    struct sigaction sa = {0};
    sa.sa_sigaction = on_done;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");

    char path[] = "/tmp/bobbin-aio-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp");
    unlink(path);

    static char buf[NREQ][SZ];
    static struct aiocb cb[NREQ];
    static long gen[NREQ]; /* which round's data each slot holds */
    for (int i = 0; i < NREQ; i++) {
        memset(buf[i], 'a' + i, SZ);
        cb[i].aio_fildes = fd;
        cb[i].aio_buf = buf[i];
        cb[i].aio_nbytes = SZ;
        cb[i].aio_offset = (off_t)i * SZ;
        cb[i].aio_sigevent.sigev_notify = SIGEV_SIGNAL;
        cb[i].aio_sigevent.sigev_signo = SIGUSR1;
        REQUIRE(aio_write(&cb[i]) == 0, "aio_write");
    }

    long whole = 0, done = 0, short_writes = 0, interrupted = 0;
    for (int r = 0; r < ROUNDS; r++) {
        if (usleep(50000) == 0)
            whole++;
        else if (errno == EINTR)
            interrupted++;
        for (int i = 0; i < NREQ; i++) {
            int e = aio_error(&cb[i]);
            if (e == EINPROGRESS)
                continue;
            CHECK(e == 0, "aio_error: %s", strerror(e));
            if (aio_return(&cb[i]) != SZ)
                short_writes++;
            done++;
            gen[i]++;
            memset(buf[i], 'a' + (int)((i + gen[i]) % 26), SZ);
            REQUIRE(aio_write(&cb[i]) == 0, "aio_write");
        }
    }
    /* the last writes: wait for them without signals' help */
    for (int i = 0; i < NREQ; i++) {
        const struct aiocb *one[1] = {&cb[i]};
        while (aio_error(&cb[i]) == EINPROGRESS)
            aio_suspend(one, 1, NULL);
        CHECK(aio_return(&cb[i]) == SZ, "last write %d short", i);
    }
    int bad = 0;
    for (int i = 0; i < NREQ; i++) {
        char back[SZ];
        CHECK(pread(fd, back, SZ, (off_t)i * SZ) == SZ, "pread");
        bad += memcmp(back, buf[i], SZ) != 0;
    }
    close(fd);

    fprintf(stderr, "aio_signal_sleep: %d rounds, %ld writes done, %ld sleeps interrupted, "
            "%ld ran whole, %d handler calls\n", ROUNDS, done, interrupted, whole, (int)handled);
    CHECK(short_writes == 0, "%ld writes short", short_writes);
    CHECK(bad == 0, "%d blocks of the file differ from what was last written", bad);
    CHECK(whole <= MAX_WHOLE, "%ld of %d sleeps ran their whole 50 ms: the completion signals "
          "did not cut them short", whole, ROUNDS);
    CHECK(handled >= ROUNDS - whole, "only %d handler calls in %d rounds", (int)handled, ROUNDS);
    printf("aio_signal_sleep: %d rounds, every write complete, file intact, sleeps cut short: %s\n",
           ROUNDS, whole <= MAX_WHOLE ? "yes" : "no");
    return probe_exit("aio_signal_sleep");
}
