/* own_malloc: a program with a malloc of its own (as Chromium's
 * PartitionAlloc): one futex lock, taken through syscall(), held for 3 ms
 * every 200th allocation (a preemption lands inside). Most threads set
 * their own nice value (which keeps each on an OS thread of its own) and
 * sleep now and then, so the runtime must start OS threads, whose DTV
 * glibc allocates with this malloc, while another thread holds its lock.
 * bobbin hung (every M locked, the one making a new M asleep on the lock,
 * the holder waiting for a P) or crashed (a G moved to another M inside
 * pthread_create's allocation). Prints a sum the threads computed. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic int lk;
static char *arena, *top, *end;
static _Atomic long nalloc;

static void lock(void)
{
	int c = 0;
	if (atomic_compare_exchange_strong(&lk, &c, 1))
		return;
	if (c != 2)
		c = atomic_exchange(&lk, 2);
	while (c != 0) {
		syscall(SYS_futex, &lk, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
		c = atomic_exchange(&lk, 2);
	}
}
static void unlock(void)
{
	if (atomic_exchange(&lk, 0) == 2)
		syscall(SYS_futex, &lk, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
static void spin_us(long us)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

struct hdr { size_t size; size_t pad; };
static void *alloc_aligned(size_t size, size_t align)
{
	if (align < 16)
		align = 16;
	lock();
	if (arena == NULL) {
		size_t n = (size_t)4 << 30;
		arena = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		top = arena;
		end = arena + n;
	}
	uintptr_t p = ((uintptr_t)top + sizeof(struct hdr) + align - 1) & ~(uintptr_t)(align - 1);
	char *r = (char *)p;
	if (r + size > end) {
		unlock();
		errno = ENOMEM;
		return NULL;
	}
	top = r + size;
	((struct hdr *)r)[-1].size = size;
	/* every 200th allocation holds the lock for a while */
	if (atomic_fetch_add(&nalloc, 1) % 200 == 199)
		spin_us(3000);
	unlock();
	return r;
}
void *malloc(size_t n) { return alloc_aligned(n, 16); }
void free(void *p) { (void)p; }
void *calloc(size_t a, size_t b)
{
	size_t n = a * b;
	void *p = malloc(n);
	if (p) memset(p, 0, n);
	return p;
}
void *realloc(void *p, size_t n)
{
	void *q = malloc(n);
	if (q && p) {
		size_t old = ((struct hdr *)p)[-1].size;
		memcpy(q, p, old < n ? old : n);
	}
	return q;
}
void *memalign(size_t al, size_t n) { return alloc_aligned(n, al); }
void *aligned_alloc(size_t al, size_t n) { return alloc_aligned(n, al); }
int posix_memalign(void **r, size_t al, size_t n) { *r = alloc_aligned(n, al); return *r ? 0 : ENOMEM; }
void *valloc(size_t n) { return alloc_aligned(n, 4096); }
void *pvalloc(size_t n) { return alloc_aligned((n + 4095) & ~4095ul, 4096); }
size_t malloc_usable_size(void *p) { return p ? ((struct hdr *)p)[-1].size : 0; }

static _Atomic long sum;

static void *worker(void *arg)
{
	long id = (long)arg;
	if (id % 4 != 3) /* most threads: their own nice value (locks them) */
		setpriority(PRIO_PROCESS, 0, 0);
	long s = 0;
	for (int i = 0; i < 300; i++) {
		char *p = malloc(64 + i);
		p[0] = (char)i;
		s += p[0];
		free(p);
		if (i % 50 == 0) {
			struct timespec ts = {0, 200000};
			nanosleep(&ts, NULL);
		}
	}
	atomic_fetch_add(&sum, s);
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 40;
	for (int r = 0; r < rounds; r++) {
		pthread_t t[8];
		for (long i = 0; i < 8; i++)
			if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
				return 1;
		for (int i = 0; i < 8; i++)
			pthread_join(t[i], NULL);
	}
	printf("rounds %d sum %ld\n", rounds, atomic_load(&sum));
	return 0;
}
