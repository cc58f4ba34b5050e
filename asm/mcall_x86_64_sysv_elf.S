/*
 * bb_mcall(bb_ctx *save, void (*fn)(bb_g *), bb_g *gp, uintptr_t g0sp, uint64_t g0fs)
 *
 * Saves the caller's context in *save as if bb_mcall had returned (rip = return
 * address, rsp = just above it), switches to the M's g0: fs base = the M's own
 * TCB (scheduler code must never touch a G's errno or TLS), rsp = the top of g0's
 * stack; then calls fn(gp), which must not return. Resuming *save with bb_gogo
 * makes bb_mcall return to its caller.
 *
 * The saved context is complete before fn runs, so fn may hand the G to another
 * M at once (this is what makes gopark's unlock-after-save safe).
 *
 *  bb_ctx layout: 0 rsp | 8 rip | 16 rbx | 24 rbp | 32 r12 | 40 r13 | 48 r14 |
 *                 56 r15 | 64 fsbase (not written: fixed per G) | 72 mxcsr | 76 cw
 */
#include "ctx_x86_64.h"

	.text
	.globl	bb_mcall
	.hidden	bb_mcall
	.type	bb_mcall, @function
	.p2align 4
bb_mcall:
	.cfi_startproc
	BB_SAVE_CTX %rdi
	/* the callee-saved registers are saved: use them to survive the syscall */
	movq	%rsi, %rbx              /* fn */
	movq	%rdx, %r12              /* gp */
	movq	%rcx, %r13              /* g0sp */
	movq	%r8, %rsi               /* g0 fs base */
	BB_SET_FS
	movq	%r13, %rsp              /* g0's stack, from its top each time */
	xorl	%ebp, %ebp              /* backtraces on g0 stop here */
	movq	%r12, %rdi
	call	*%rbx                   /* fn(gp): never returns */
	ud2
	.cfi_endproc
	.size	bb_mcall, .-bb_mcall

	.section .note.GNU-stack,"",@progbits
