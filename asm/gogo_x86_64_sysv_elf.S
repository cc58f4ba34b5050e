/*
 * bb_gogo(bb_ctx *to) — resume a saved context; never returns.
 *
 * Loads the fs base of the context (the G's own TCB) first, then MXCSR and the
 * x87 control word, then the callee-saved registers and the stack, and jumps to
 * the saved rip. The fs base uses wrfsbase when the kernel enabled FSGSBASE,
 * else the arch_prctl(ARCH_SET_FS) system call (about 190 ns instead of 13).
 *
 *  bb_ctx layout (runtime/runtime.h, _Static_assert'ed there):
 *   0 rsp | 8 rip | 16 rbx | 24 rbp | 32 r12 | 40 r13 | 48 r14 | 56 r15
 *  64 fsbase | 72 mxcsr (4) | 76 x87 cw (2)
 */
#include "ctx_x86_64.h"

	.text
	.globl	bb_gogo
	.hidden	bb_gogo
	.type	bb_gogo, @function
	.p2align 4
bb_gogo:
	.cfi_startproc
	movq	%rdi, %r8               /* r8 survives the syscall below */
	movq	64(%r8), %rsi           /* fs base to install, 0 = keep */
	testq	%rsi, %rsi
	jz	1f
	BB_SET_FS
1:	ldmxcsr	72(%r8)                 /* the G's SSE rounding/exception mask */
	fldcw	76(%r8)                 /* the G's x87 precision/rounding */
	BB_LOAD_REGS %r8
	movq	0(%r8), %rsp            /* switch stacks: from here on we are the G */
	jmp	*8(%r8)                 /* to where it called bb_mcall, or bb_gstart */
	.cfi_endproc
	.size	bb_gogo, .-bb_gogo

	.section .note.GNU-stack,"",@progbits
