/*
 * mem.c — bobbin's own memory for its own tables (run queues of timers,
 * the G list, fd descriptors, poll arrays, signal queues).
 *
 * Never the program's malloc: a program may replace it (Chromium's
 * PartitionAlloc, jemalloc, tcmalloc), and its lock then belongs to the
 * program's threads. A green thread preempted while it held that lock
 * waits for a P; bobbin code that called malloc under one of its own locks
 * or on an M's g0 waited for that thread in turn, and nothing ran again.
 * Nor glibc's __libc_malloc: its main arena moves the program break, which
 * an sbrk-based allocator of the program's assumes it owns.
 *
 * Blocks of 16 bytes to 64 KiB come in power-of-two classes, carved from
 * 1 MiB mappings and kept on a free list per class once freed (bobbin's
 * tables only grow); larger ones are mappings of their own. The lock is
 * held only here, never across other code.
 */
#include "runtime.h"

#include <string.h>
#include <sys/mman.h>

#define MEM_MINSHIFT 4                /* 16 bytes */
#define MEM_MAXSHIFT 16               /* 64 KiB */
#define MEM_NCLASS (MEM_MAXSHIFT - MEM_MINSHIFT + 1)
#define MEM_REGION (1u << 20)
#define MEM_HDR 16                    /* keeps blocks 16-byte aligned */

struct mem_hdr {
	size_t size; /* the block's whole size: its class, or its mapping's */
	size_t pad;
};

struct mem_free {
	struct mem_free *next;
};

static bb_lock mem_lock;
static struct mem_free *mem_lists[MEM_NCLASS];
static char *mem_cur, *mem_end;

static int mem_class(size_t total)
{
	int c = 0;
	while (((size_t)1 << (c + MEM_MINSHIFT)) < total)
		c++;
	return c;
}

static void *mem_map(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* n bytes, zeroed, or NULL */
void *bb_alloc(size_t n)
{
	if (n > SIZE_MAX / 2)
		return NULL;
	size_t total = n + MEM_HDR;
	struct mem_hdr *h;
	if (total > ((size_t)1 << MEM_MAXSHIFT)) {
		total = (total + 4095) & ~(size_t)4095;
		h = mem_map(total);
		if (h == NULL)
			return NULL;
	} else {
		int c = mem_class(total);
		total = (size_t)1 << (c + MEM_MINSHIFT);
		bb_lock_acquire(&mem_lock);
		struct mem_free *f = mem_lists[c];
		if (f) {
			mem_lists[c] = f->next;
		} else {
			if (mem_cur == NULL || (size_t)(mem_end - mem_cur) < total) {
				char *r = mem_map(MEM_REGION); /* (the rest of the old one is left) */
				if (r == NULL) {
					bb_lock_release(&mem_lock);
					return NULL;
				}
				mem_cur = r;
				mem_end = r + MEM_REGION;
			}
			f = (struct mem_free *)(void *)mem_cur;
			mem_cur += total;
		}
		bb_lock_release(&mem_lock);
		h = (struct mem_hdr *)(void *)f;
		memset(h, 0, total);
	}
	h->size = total;
	return (char *)h + MEM_HDR;
}

void bb_free(void *p)
{
	if (p == NULL)
		return;
	struct mem_hdr *h = (struct mem_hdr *)(void *)((char *)p - MEM_HDR);
	size_t total = h->size;
	if (total > ((size_t)1 << MEM_MAXSHIFT)) {
		munmap(h, total);
		return;
	}
	int c = mem_class(total);
	struct mem_free *f = (struct mem_free *)(void *)h;
	bb_lock_acquire(&mem_lock);
	f->next = mem_lists[c];
	mem_lists[c] = f;
	bb_lock_release(&mem_lock);
}

/* p grown (or shrunk) to n bytes, what is new zeroed; NULL (p kept) if
 * there is no memory */
void *bb_realloc(void *p, size_t n)
{
	if (p == NULL)
		return bb_alloc(n);
	struct mem_hdr *h = (struct mem_hdr *)(void *)((char *)p - MEM_HDR);
	size_t have = h->size - MEM_HDR;
	if (n <= have)
		return p;
	void *q = bb_alloc(n);
	if (q == NULL)
		return NULL;
	memcpy(q, p, have);
	bb_free(p);
	return q;
}

/* a fork child's one thread: a parent's thread may have held the lock */
void bb_mem_forkchild(void)
{
	atomic_store(&mem_lock.key, 0);
}
