/*
 * env.c — BOBBIN_* environment variables, parsed strictly: a bad value prints
 * one warning and the default is kept; nothing here can crash the program.
 */
#include "runtime.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

bb_config bb_cfg;

static int32_t parse_int(const char *name, int32_t def, int32_t lo, int32_t hi)
{
	const char *s = getenv(name);
	if (s == NULL || *s == '\0')
		return def;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi) {
		bb_printf("bobbin: ignoring %s=%s (want an integer in [%d, %d]); using %d\n",
			  name, s, lo, hi, def);
		return def;
	}
	return (int32_t)v;
}

static int32_t cpus_in_affinity_mask(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0) {
		int n = CPU_COUNT(&set);
		if (n > 0)
			return n;
	}
	return 1;
}

void bb_env_init(void)
{
	int saved = errno;
	bb_cfg.maxprocs = parse_int("BOBBIN_MAXPROCS", cpus_in_affinity_mask(), 1, 1024);
	bb_cfg.maxthreads = parse_int("BOBBIN_MAXTHREADS", 10000, 4, 1000000);
	bb_cfg.cpuclock = parse_int("BOBBIN_CPUCLOCK", -1, 0, 1);
	errno = saved;
}
