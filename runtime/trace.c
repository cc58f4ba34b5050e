/*
 * trace.c — BOBBIN_TRACE=FILE: an execution trace in the Chrome/Perfetto
 * trace-event JSON format, written at exit.
 *
 * Each P keeps a ring of fixed-size events (the newest BB_TRACE_RING of
 * them survive), written only by the M holding the P, so recording is a
 * few stores and no lock. Events: a G's run slice on a P (from execute to
 * the next schedule on that P), a system call on its M, a steal, a ready
 * (shown as a flow arrow from the waker's P to the woken G's next slice).
 * Ms have their own small rings for their system calls (written by the M).
 *
 * When BOBBIN_TRACE is unset every hook is one predictable branch.
 */
#include "runtime.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BB_TRACE_RING (1 << 16)

enum { EV_SLICE = 1, EV_SYSCALL, EV_STEAL, EV_READY };

typedef struct trev {
	int64_t ts, end;     /* ns since start; end for slices and syscalls */
	uint64_t goid;
	uint32_t type;
	int32_t arg;         /* steal: victim P; ready: woken goid low bits */
	uint64_t arg2;       /* ready: the woken goid */
} trev;

typedef struct trring {
	trev *ev;
	uint64_t n;          /* events ever written: owner only */
	/* the open slice */
	int64_t slice_start;
	uint64_t slice_goid;
	int32_t slice_m;
} trring;

bool bb_trace_on;
static const char *trace_path;
static int64_t t0;
static trring *prings;            /* one per P */
static _Atomic uint64_t nsyscalls;
static trev *sysring;             /* syscalls of all Ms, one shared ring */

static trev *slot(trring *r)
{
	return &r->ev[r->n++ & (BB_TRACE_RING - 1)];
}

void bb_trace_slice_start(bb_p *pp, bb_g *gp, bb_m *mp)
{
	trring *r = &prings[pp->id];
	r->slice_start = bb_nanotime() - t0;
	r->slice_goid = gp->goid;
	r->slice_m = (int32_t)mp->id;
}

void bb_trace_slice_end(bb_p *pp)
{
	trring *r = &prings[pp->id];
	if (r->slice_goid == 0)
		return;
	trev *e = slot(r);
	e->type = EV_SLICE;
	e->ts = r->slice_start;
	e->end = bb_nanotime() - t0;
	e->goid = r->slice_goid;
	e->arg = r->slice_m;
	r->slice_goid = 0;
}

void bb_trace_steal(bb_p *pp, bb_p *victim, int n)
{
	trev *e = slot(&prings[pp->id]);
	e->type = EV_STEAL;
	e->ts = e->end = bb_nanotime() - t0;
	e->goid = 0;
	e->arg = victim->id;
	e->arg2 = (uint64_t)n;
}

void bb_trace_ready(bb_p *pp, bb_g *waker, bb_g *woken)
{
	trev *e = slot(&prings[pp->id]);
	e->type = EV_READY;
	e->ts = e->end = bb_nanotime() - t0;
	e->goid = waker ? waker->goid : 0;
	e->arg2 = woken->goid;
}

/* a system call of gp on mp, [start, now) */
void bb_trace_syscall(bb_m *mp, bb_g *gp, int64_t start)
{
	uint64_t i = atomic_fetch_add_explicit(&nsyscalls, 1, memory_order_relaxed);
	trev *e = &sysring[i & (BB_TRACE_RING - 1)];
	e->type = EV_SYSCALL;
	e->ts = start - t0;
	e->end = bb_nanotime() - t0;
	e->goid = gp->goid;
	e->arg = (int32_t)mp->id;
}

int64_t bb_trace_now(void)
{
	return bb_nanotime();
}

static void put(FILE *f, bool *first, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#include <stdarg.h>
static void put(FILE *f, bool *first, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs(*first ? "\n" : ",\n", f);
	*first = false;
	vfprintf(f, fmt, ap);
	va_end(ap);
}

static void write_ring(FILE *f, bool *first, trev *ev, uint64_t n, int32_t pid_lane)
{
	uint64_t from = n > BB_TRACE_RING ? n - BB_TRACE_RING : 0;
	for (uint64_t i = from; i < n; i++) {
		trev *e = &ev[i & (BB_TRACE_RING - 1)];
		double ts = (double)e->ts / 1000.0, dur = (double)(e->end - e->ts) / 1000.0;
		switch (e->type) {
		case EV_SLICE:
			put(f, first,
			    "{\"name\":\"G%llu\",\"cat\":\"run\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,"
			    "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"g\":%llu,\"m\":%d}}",
			    (unsigned long long)e->goid, pid_lane, ts, dur,
			    (unsigned long long)e->goid, e->arg);
			break;
		case EV_SYSCALL:
			put(f, first,
			    "{\"name\":\"syscall G%llu\",\"cat\":\"syscall\",\"ph\":\"X\",\"pid\":2,"
			    "\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"g\":%llu}}",
			    (unsigned long long)e->goid, e->arg, ts, dur, (unsigned long long)e->goid);
			break;
		case EV_STEAL:
			put(f, first,
			    "{\"name\":\"steal from P%d\",\"cat\":\"steal\",\"ph\":\"i\",\"s\":\"t\","
			    "\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"args\":{\"victim\":%d,\"n\":%llu}}",
			    e->arg, pid_lane, ts, e->arg, (unsigned long long)e->arg2);
			break;
		case EV_READY:
			put(f, first,
			    "{\"name\":\"ready G%llu\",\"cat\":\"ready\",\"ph\":\"i\",\"s\":\"t\","
			    "\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"args\":{\"waker\":%llu,\"woken\":%llu}}",
			    (unsigned long long)e->arg2, pid_lane, ts, (unsigned long long)e->goid,
			    (unsigned long long)e->arg2);
			break;
		}
	}
}

static void trace_write(void)
{
	if (!bb_trace_on)
		return;
	bb_trace_on = false; /* Ms still running stop adding events */
	FILE *f = fopen(trace_path, "w");
	if (f == NULL) {
		bb_printf("bobbin: cannot write the trace to %s\n", trace_path);
		return;
	}
	bool first = true;
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);
	put(f, &first, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"Ps (green threads running)\"}}");
	put(f, &first, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"args\":{\"name\":\"Ms (system calls)\"}}");
	for (int32_t i = 0; i < bb_gomaxprocs; i++) {
		put(f, &first, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"P%d\"}}", i, i);
		bb_trace_slice_end(bb_allp[i]); /* close the running slices */
		write_ring(f, &first, prings[i].ev, prings[i].n, i);
	}
	int32_t nm = atomic_load(&bb_sched_.mcount);
	for (int32_t i = 0; i < nm; i++)
		put(f, &first, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":%d,\"args\":{\"name\":\"M%d\"}}", i, i);
	write_ring(f, &first, sysring, atomic_load(&nsyscalls), -1);
	fputs("\n]}\n", f);
	fclose(f);
}

void bb_trace_init(void)
{
	const char *p = getenv("BOBBIN_TRACE");
	if (p == NULL || *p == '\0')
		return;
	prings = bb_alloc((size_t)bb_gomaxprocs * sizeof *prings);
	sysring = bb_alloc(BB_TRACE_RING * sizeof *sysring);
	if (prings == NULL || sysring == NULL)
		goto nomem;
	for (int32_t i = 0; i < bb_gomaxprocs; i++) {
		prings[i].ev = bb_alloc(BB_TRACE_RING * sizeof(trev));
		if (prings[i].ev == NULL)
			goto nomem;
	}
	trace_path = p;
	t0 = bb_nanotime();
	bb_trace_on = true;

	atexit(trace_write);
	return;
nomem:
	bb_printf("bobbin: no memory for BOBBIN_TRACE; not tracing\n");
}
