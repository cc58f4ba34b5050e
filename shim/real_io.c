/*
 * real_io.c — the real libc functions behind the I/O shims (fd.c, io.c,
 * net.c, poll.c, blocking.c), resolved once before main like real.c's.
 */
#include "realio.h"

#include <dlfcn.h>

bb_real_io_fns bb_rio;

#define X(ret, name, args) bb_rio.name = (ret(*) args)dlsym(RTLD_NEXT, #name);
int bb_real_io_init(void)
{
	BB_REAL_IO_LIST
	return 0;
}
#undef X

__attribute__((constructor(101))) static void real_io_ctor(void)
{
	bb_real_io_init();
}
