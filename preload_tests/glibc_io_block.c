/* glibc_io_block — a thread blocked inside glibc's own I/O must not stop the
 * others: fwrite of 2 MiB to a pipe whose reader is slow.
 *
 * fwrite reaches the kernel through glibc's internal write, not through the
 * interposed symbol, so bobbin cannot park the G there: its M blocks in the
 * kernel while the pipe is full, with the P it holds. Until the runtime
 * notices a stuck M (sysmon handing its P to another M), a single P
 * (BOBBIN_MAXPROCS=1) leaves the reader and the heartbeat without one: the
 * writer waits for the reader, which waits for the writer's P.
 *
 *   writer     fwrite(2 MiB) to the pipe (stdio buffer of BUFSIZ), then fclose
 *   reader     read 4 KiB, sleep 1 ms, ... until end of file; checks every byte
 *   heartbeat  beats every 10 ms until the reader is done (at least 100 beats);
 *              started first: the writer starts after its fifth beat
 *
 * Checks: fwrite wrote everything, the reader got every byte in order, and the
 * largest gap between heartbeats is under 50 ms (the bound; the raw gap:
 * nothing spins here, so heartbeat.h has no CPU time to judge the kernel by). A
 * watchdog (alarm, 20 s) turns a hang into exit 1 with what each thread had
 * done; register it with a harness timeout above that.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heartbeat.h"
#include "probe.h"

#define TOTAL (2L << 20)
#define CHUNK 4096
#define NBEATS 100

static int fds[2];
static unsigned char *buf;
static volatile size_t written = (size_t)-1; /* fwrite's return, once it returned */
static volatile long received, mismatches;
static volatile int reader_done;
static struct heartbeat hb;

static unsigned char pattern(long i)
{
    return (unsigned char)(i * 7 + i / 251);
}

/* async-signal-safe decimal */
static void put_num(long v)
{
    char s[24];
    int n = sizeof s;
    do
        s[--n] = (char)('0' + v % 10);
    while ((v /= 10) > 0 && n > 0);
    (void)!write(2, s + n, sizeof s - (size_t)n);
}

static void put_str(const char *s)
{
    (void)!write(2, s, strlen(s));
}

static void on_alarm(int sig)
{
    (void)sig;
    put_str("glibc_io_block: watchdog: no end after 20 s; fwrite ");
    put_str(written == (size_t)-1 ? "has not returned" : "returned");
    put_str(", the reader got ");
    put_num(received);
    put_str(" of ");
    put_num(TOTAL);
    put_str(" bytes, heartbeats: ");
    put_num(((volatile struct heartbeat *)&hb)->beats);
    put_str("\n");
    _exit(1);
}

static void *writer(void *arg)
{
    (void)arg;
    FILE *f = fdopen(fds[1], "w");
    REQUIRE(f != NULL, "fdopen");
    written = fwrite(buf, 1, TOTAL, f);
    CHECK(fclose(f) == 0, "fclose");
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    unsigned char chunk[CHUNK];
    long got = 0;
    for (;;) {
        ssize_t n = read(fds[0], chunk, sizeof chunk);
        if (n == 0)
            break;
        REQUIRE(n > 0, "read");
        for (ssize_t i = 0; i < n; i++)
            if (chunk[i] != pattern(got + i))
                mismatches++;
        got += n;
        received = got;
        hb_sleep_ns(1000000);
    }
    reader_done = 1;
    return NULL;
}

static int reader_running(void)
{
    return !reader_done;
}

static void *heartbeat_main(void *arg)
{
    (void)arg;
    hb_run(&hb, NBEATS, reader_running, 0);
    return NULL;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(20);
    buf = malloc(TOTAL);
    REQUIRE(buf != NULL, "malloc");
    for (long i = 0; i < TOTAL; i++)
        buf[i] = pattern(i);
    REQUIRE(pipe(fds) == 0, "pipe");

    pthread_t th, tr, tw;
    REQUIRE(pthread_create(&th, NULL, heartbeat_main, NULL) == 0, "pthread_create");
    REQUIRE(pthread_create(&tr, NULL, reader, NULL) == 0, "pthread_create");
    /* the heartbeat must already beat when the writer first blocks */
    while (((volatile struct heartbeat *)&hb)->beats < 5)
        hb_sleep_ns(1000000);
    REQUIRE(pthread_create(&tw, NULL, writer, NULL) == 0, "pthread_create");
    REQUIRE(pthread_join(tw, NULL) == 0, "pthread_join");
    REQUIRE(pthread_join(tr, NULL) == 0, "pthread_join");
    REQUIRE(pthread_join(th, NULL) == 0, "pthread_join");
    close(fds[0]);

    hb_report("glibc_io_block", &hb);
    CHECK(written == (size_t)TOTAL, "fwrite wrote %zu of %ld bytes", (size_t)written, TOTAL);
    CHECK(received == TOTAL, "the reader got %ld of %ld bytes", (long)received, TOTAL);
    CHECK(mismatches == 0, "%ld bytes differ", (long)mismatches);
    CHECK(hb_ok(&hb), "largest heartbeat gap %.1f ms, bound %lld ms",
          hb.max_charged_ns / 1e6, HB_BOUND_NS / 1000000);

    printf("fwrite: %zu bytes\n", (size_t)written);
    printf("reader: %ld bytes, %ld differ\n", (long)received, (long)mismatches);
    printf("heartbeat %s\n", hb_ok(&hb) ? "ok" : "late");
    free(buf);
    return probe_exit("glibc_io_block");
}
