/* stdio_sockets — stdio streams on sockets (fdopen), and dprintf.
 *
 * glibc's stdio reads and writes a stream's fd by internal names, which an
 * LD_PRELOAD library does not see. bobbin keeps the sockets a process makes
 * non-blocking for real; under bobbin before 2026-11-25 an fgets on a
 * socket wrapped by fdopen failed at once with the stream in error (EAGAIN
 * underneath), a large fwrite stopped with an error when the send buffer
 * filled, and so did a large dprintf.
 *
 * 1. fgets twice on fdopen(socket, "r") while a thread sends a line every
 *    20 ms, then fgetc, and F_GETFL shows no O_NONBLOCK.
 * 2. fwrite of 1 MiB to fdopen(socket, "w") and fflush, to a reader that
 *    starts 20 ms late and counts every byte.
 * 3. dprintf of 256 KiB to a socket, the same way.
 * 4. The inetd idioms: dup2(socket, 0), then fgets(stdin); close(0), then an
 *    accept that returns fd 0 (bobbin's own epoll fd, made lazily at the
 *    first wait, took fd 0 before 2026-11-25), then fgets(stdin).
 * A watchdog names the part that hangs.
 */
#define PROBE_NAME "stdio_sockets"
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum { BIG = 1 << 20, DBIG = 256 * 1024 };

static int sv[2];

static void *send_lines(void *arg)
{
    (void)arg;
    const char *lines[] = {"line one\n", "line two\n", "z"};
    for (int i = 0; i < 3; i++) {
        usleep(20 * 1000);
        CHECK(send(sv[1], lines[i], strlen(lines[i]), 0) > 0, "send");
    }
    return NULL;
}

/* reads until EOF after a late start; returns the bytes and a checksum */
static void *count_bytes(void *arg)
{
    int fd = (int)(intptr_t)arg;
    usleep(20 * 1000);
    char buf[8192];
    long total = 0, sum = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            sum += (unsigned char)buf[i];
        total += n;
    }
    return (void *)(intptr_t)(total * 1000 + sum % 1000);
}

static struct sockaddr_un addr;
static int client;

static void *connect_and_send(void *arg)
{
    (void)arg;
    usleep(20 * 1000);
    CHECK(connect(client, (struct sockaddr *)&addr, sizeof addr) == 0, "connect");
    usleep(20 * 1000);
    CHECK(send(client, "accepted line\n", 14, 0) == 14, "send");
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(30);

    current_probe = "1: fgets on a socket";
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    FILE *in = fdopen(sv[0], "r");
    REQUIRE(in != NULL, "fdopen");
    pthread_t t;
    pthread_create(&t, NULL, send_lines, NULL);
    char line[64];
    for (int i = 0; i < 2; i++) {
        char *r = fgets(line, sizeof line, in);
        printf("1: fgets %s, error %d: %s", r ? "a line" : "NULL", ferror(in), r ? line : "\n");
    }
    int c = fgetc(in);
    printf("1: fgetc %d, O_NONBLOCK %d\n", c, (fcntl(sv[0], F_GETFL) & O_NONBLOCK) != 0);
    pthread_join(t, NULL);
    fclose(in);
    close(sv[1]);

    current_probe = "2: fwrite of 1 MiB on a socket";
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    pthread_create(&t, NULL, count_bytes, (void *)(intptr_t)sv[1]);
    FILE *out = fdopen(sv[0], "w");
    REQUIRE(out != NULL, "fdopen");
    static char big[BIG];
    for (int i = 0; i < BIG; i++)
        big[i] = (char)('a' + i % 26);
    size_t w = fwrite(big, 1, BIG, out);
    int fl = fflush(out);
    int err = ferror(out);
    fclose(out);
    void *r = NULL;
    pthread_join(t, &r);
    printf("2: fwrite %zu, fflush %d, error %d; the reader got %ld bytes, sum %ld\n", w, fl, err,
           (long)(intptr_t)r / 1000, (long)(intptr_t)r % 1000);
    close(sv[1]);

    current_probe = "3: dprintf of 256 KiB";
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    pthread_create(&t, NULL, count_bytes, (void *)(intptr_t)sv[1]);
    big[DBIG] = '\0';
    int n = dprintf(sv[0], "%s", big);
    close(sv[0]);
    pthread_join(t, &r);
    printf("3: dprintf %d; the reader got %ld bytes, sum %ld\n", n, (long)(intptr_t)r / 1000,
           (long)(intptr_t)r % 1000);
    close(sv[1]);

    current_probe = "4: a socket as stdin";
    int keep = dup(0);
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    REQUIRE(dup2(sv[0], 0) == 0, "dup2");
    pthread_create(&t, NULL, send_lines, NULL);
    char *got = fgets(line, sizeof line, stdin);
    printf("4: dup2 onto 0, fgets(stdin) %s: %s", got ? "a line" : "NULL", got ? line : "\n");
    pthread_join(t, NULL);
    close(sv[0]);
    close(sv[1]);
    int ls = socket(AF_UNIX, SOCK_STREAM, 0);
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "bobbin-stdio-%d", (int)getpid());
    REQUIRE(bind(ls, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(ls, 2) == 0, "listen");
    client = socket(AF_UNIX, SOCK_STREAM, 0);
    clearerr(stdin);
    close(0);
    pthread_create(&t, NULL, connect_and_send, NULL);
    int conn = accept(ls, NULL, NULL);
    got = fgets(line, sizeof line, stdin);
    pthread_join(t, NULL);
    printf("4: close(0), accept gave fd %d, fgets(stdin) %s: %s", conn, got ? "a line" : "NULL",
           got ? line : "\n");
    dup2(keep, 0);
    alarm(0);
    return probe_exit("stdio_sockets");
}
