/* pipe.c — the round trip of one byte over two pipes between two threads.
 *
 * The pinger writes byte k into pipe 1 and reads the answer from pipe 2; the ponger
 * reads pipe 1 and writes the byte plus one into pipe 2. Both block in read() while
 * the other works, so one round trip is two blocking reads woken by two writes: under
 * bobbin, two green threads parked on the netpoller and readied; natively, two OS
 * threads put to sleep in the kernel and woken. ns_per_op is one round trip.
 *
 * Checksum: the pinger sums the answers; the sum must equal the one computed from the
 * bytes sent. Usage: pipe [n] (default 200,000). Go twin: bench/go/pipe (os.Pipe).
 */
#include <pthread.h>
#include <unistd.h>

#include "bench.h"

static int ping[2], pong[2];
static long n;

static void *ponger(void *arg)
{
    (void)arg;
    for (long k = 0; k < n; k++) {
        unsigned char c;
        if (read(ping[0], &c, 1) != 1) {
            fprintf(stderr, "pipe: ponger read: %s\n", strerror(errno));
            exit(1);
        }
        c++;
        if (write(pong[1], &c, 1) != 1) {
            fprintf(stderr, "pipe: ponger write: %s\n", strerror(errno));
            exit(1);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    n = bench_iters(argc, argv, 200000);
    if (pipe(ping) != 0 || pipe(pong) != 0) {
        fprintf(stderr, "pipe: %s\n", strerror(errno));
        return 1;
    }
    pthread_t t;
    bench_check(pthread_create(&t, NULL, ponger, NULL), "pthread_create");
    long long sum = 0, want = 0;
    uint64_t t0 = bench_now_ns();
    for (long k = 0; k < n; k++) {
        unsigned char c = (unsigned char)k;
        if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) {
            fprintf(stderr, "pipe: pinger: %s\n", strerror(errno));
            return 1;
        }
        sum += c;
        want += (unsigned char)(k + 1);
    }
    uint64_t t1 = bench_now_ns();
    bench_check(pthread_join(t, NULL), "pthread_join");
    bench_verify("pipe", sum, want);
    bench_report("pipe", n, t1 - t0);
    return 0;
}
