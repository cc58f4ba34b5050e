/* http_server — a thread-per-connection HTTP/1.1 keep-alive server that answers
 * every request with "hello\n"; the default target of `scripts/bobbin stress`.
 *
 * usage: http_server [PORT]      serve on 127.0.0.1:PORT until SIGTERM or SIGINT
 *        http_server --self-test a preload test: the server and 50 keep-alive
 *                                clients in one process
 *
 * PORT comes from argv[1], else the environment (HTTP_PORT, then PORT), else 8080;
 * 0 picks a free port. Once listening it prints "http_server: listening on
 * 127.0.0.1:PORT" on stderr. SIGTERM and SIGINT end it with status 0.
 *
 * Main accepts connections and gives each a detached thread (default attributes, as a
 * plain blocking server does). The thread reads requests with read(), answers each
 * complete one — pipelined requests included, their answers gathered into one write —
 * and keeps the connection open (HTTP/1.1 keep-alive) unless the request says
 * "Connection: close" or is HTTP/1.0 without "Connection: keep-alive". A request body
 * announced by Content-Length is read and ignored. Headers larger than the buffer get
 * 431 and the connection is closed; anything that is not a request line gets 400.
 * Every answer is
 *     HTTP/1.1 200 OK / Content-Type: text/plain / Content-Length: 6 / hello\n
 *
 * Self-test: the server on an ephemeral port, CLIENTS client threads each sending
 * REQUESTS requests on one keep-alive connection (every fifth time three at once,
 * pipelined), the last with "Connection: close"; each checks every answer byte for
 * byte and the EOF after the last one. stdout: the totals.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

enum { BUF = 8192, CLIENTS = 50, REQUESTS = 200 };

static const char OK[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhello\n";
static const char OK_CLOSE[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n"
                               "Connection: close\r\n\r\nhello\n";
static const char TOO_BIG[] = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
                              "Connection: close\r\n\r\n";
static const char BAD[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                          "Connection: close\r\n\r\n";

static atomic_long served;

static void on_term(int sig)
{
    (void)sig;
    _exit(0);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* the value of header `name` in the header block [h, end), or NULL */
static const char *header(const char *h, const char *end, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    const char *line = memchr(h, '\n', (size_t)(end - h)); /* skip the request line */
    while (line && line + 1 < end) {
        line++;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        if ((size_t)(eol - line) > nl && line[nl] == ':' && strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
                ve--;
            *len = (size_t)(ve - v);
            return v;
        }
        line = eol;
    }
    return NULL;
}

static void *serve(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char in[BUF], out[BUF];
    size_t have = 0, skip_body = 0;
    bool open_conn = true;
    while (open_conn) {
        ssize_t n = read(fd, in + have, sizeof in - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        size_t used = 0, olen = 0;
        for (;;) {
            if (skip_body > 0) { /* the body of the last request: ignored */
                size_t k = have - used < skip_body ? have - used : skip_body;
                used += k;
                skip_body -= k;
                if (skip_body > 0)
                    break;
            }
            char *start = in + used;
            char *hend = memmem(start, have - used, "\r\n\r\n", 4);
            if (hend == NULL)
                break;
            hend += 4;
            used = (size_t)(hend - in);
            if (strncmp(start, "GET ", 4) != 0 && strncmp(start, "POST ", 5) != 0 &&
                strncmp(start, "HEAD ", 5) != 0 && strncmp(start, "PUT ", 4) != 0) {
                write_all(fd, out, olen);
                olen = 0;
                write_all(fd, BAD, sizeof BAD - 1);
                open_conn = false;
                break;
            }
            size_t vl;
            const char *v = header(start, hend, "Content-Length", &vl);
            if (v)
                skip_body = strtoul(v, NULL, 10);
            v = header(start, hend, "Connection", &vl);
            bool http10 = memmem(start, (size_t)(hend - start), "HTTP/1.0\r\n", 10) != NULL;
            bool close_it = v ? (vl == 5 && strncasecmp(v, "close", 5) == 0)
                              : http10;
            if (v && http10 && !(vl == 10 && strncasecmp(v, "keep-alive", 10) == 0))
                close_it = true;
            const char *resp = close_it ? OK_CLOSE : OK;
            size_t rl = close_it ? sizeof OK_CLOSE - 1 : sizeof OK - 1;
            if (olen + rl > sizeof out) {
                if (write_all(fd, out, olen) != 0) {
                    open_conn = false;
                    break;
                }
                olen = 0;
            }
            memcpy(out + olen, resp, rl);
            olen += rl;
            atomic_fetch_add_explicit(&served, 1, memory_order_relaxed);
            if (close_it) {
                open_conn = false;
                break;
            }
        }
        if (olen > 0 && write_all(fd, out, olen) != 0)
            break;
        memmove(in, in + used, have - used);
        have -= used;
        if (open_conn && have == sizeof in) {
            write_all(fd, TOO_BIG, sizeof TOO_BIG - 1);
            break;
        }
    }
    close(fd);
    return NULL;
}

static int listen_on(int port, int *bound)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0)
        return -1;
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(l, SOMAXCONN) != 0 ||
        getsockname(l, (struct sockaddr *)&sa, &sl) != 0) {
        close(l);
        return -1;
    }
    *bound = ntohs(sa.sin_port);
    return l;
}

static void *accept_loop(void *arg)
{
    int l = (int)(intptr_t)arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        int fd = accept(l, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
                continue;
            perror("http_server: accept");
            exit(1);
        }
        pthread_t t;
        int err = pthread_create(&t, &attr, serve, (void *)(intptr_t)fd);
        if (err) {
            fprintf(stderr, "http_server: pthread_create: %s\n", strerror(err));
            close(fd);
        }
    }
    return NULL;
}

/* ---- self-test ---- */

static struct sockaddr_in test_addr;
static atomic_long client_failures, client_requests;

static int read_exact(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static void *client(void *arg)
{
    long id = (long)(intptr_t)arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&test_addr, sizeof test_addr) != 0) {
        fprintf(stderr, "client %ld: connect: %s\n", id, strerror(errno));
        atomic_fetch_add(&client_failures, 1);
        return NULL;
    }
    char req[256], resp[256];
    int k = 0;
    while (k < REQUESTS) {
        int batch = k % 5 == 4 && k + 3 < REQUESTS ? 3 : 1;
        size_t len = 0;
        for (int b = 0; b < batch; b++) {
            bool last = k + b == REQUESTS - 1;
            len += (size_t)snprintf(req + len, sizeof req - len,
                                    "GET /c%ld/r%d HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", id,
                                    k + b, last ? "Connection: close\r\n" : "");
        }
        if (write_all(fd, req, len) != 0) {
            atomic_fetch_add(&client_failures, 1);
            break;
        }
        for (int b = 0; b < batch; b++, k++) {
            bool last = k == REQUESTS - 1;
            const char *want = last ? OK_CLOSE : OK;
            size_t wl = last ? sizeof OK_CLOSE - 1 : sizeof OK - 1;
            if (read_exact(fd, resp, wl) != 0 || memcmp(resp, want, wl) != 0) {
                fprintf(stderr, "client %ld: request %d: wrong answer\n", id, k);
                atomic_fetch_add(&client_failures, 1);
                close(fd);
                return NULL;
            }
            atomic_fetch_add(&client_requests, 1);
        }
    }
    char c;
    if (read(fd, &c, 1) != 0) {
        fprintf(stderr, "client %ld: no EOF after Connection: close\n", id);
        atomic_fetch_add(&client_failures, 1);
    }
    close(fd);
    return NULL;
}

static int self_test(void)
{
    alarm(55);
    int port;
    int l = listen_on(0, &port);
    if (l < 0) {
        perror("http_server: listen");
        return 1;
    }
    socklen_t sl = sizeof test_addr;
    getsockname(l, (struct sockaddr *)&test_addr, &sl);
    pthread_t acc, cl[CLIENTS];
    pthread_create(&acc, NULL, accept_loop, (void *)(intptr_t)l);
    for (long i = 0; i < CLIENTS; i++)
        if (pthread_create(&cl[i], NULL, client, (void *)(intptr_t)i) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(cl[i], NULL);
    long fails = atomic_load(&client_failures);
    printf("http_server self-test: clients=%d requests=%ld failures=%ld\n", CLIENTS,
           atomic_load(&client_requests), fails);
    fflush(stdout);
    return fails == 0 && atomic_load(&client_requests) == (long)CLIENTS * REQUESTS ? 0 : 1;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "--self-test") == 0)
        return self_test();
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: http_server [PORT] | http_server --self-test\n");
        return 2;
    }
    const char *ps = argc > 1 ? argv[1] : getenv("HTTP_PORT");
    if (ps == NULL)
        ps = getenv("PORT");
    int port = ps ? atoi(ps) : 8080;
    if (port < 0 || port > 65535) {
        fprintf(stderr, "http_server: bad port '%s'\n", ps);
        return 2;
    }
    struct sigaction sa = { .sa_handler = on_term };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int bound;
    int l = listen_on(port, &bound);
    if (l < 0) {
        fprintf(stderr, "http_server: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
        return 1;
    }
    fprintf(stderr, "http_server: listening on 127.0.0.1:%d\n", bound);
    accept_loop((void *)(intptr_t)l);
    return 0;
}
