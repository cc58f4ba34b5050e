/*
 * bb_gswitch(bb_ctx *save, bb_ctx *to, void (*post)(bb_g *), bb_g *prev)
 *
 * Switches from one G straight to another, without passing through g0: one
 * fs base load instead of two (wrfsbase costs ~12 ns here, a yield round
 * trip through g0 paid four).
 *
 * Saves the caller's context in *save exactly as bb_mcall does (as if
 * bb_gswitch had returned), installs *to (fs base, MXCSR, x87 control word,
 * callee-saved registers, stack), then calls post(prev) on the new G's stack,
 * below its saved rsp (a call site's rsp: nothing live there), and finally
 * jumps to the new G's saved rip. post publishes prev (makes it runnable,
 * queues it): only then may another M resume *save, which is complete by
 * then. post is C and keeps the callee-saved registers, which hold the new
 * G's values. Resuming *save (bb_gogo or bb_gswitch) makes bb_gswitch return.
 *
 *  bb_ctx layout: 0 rsp | 8 rip | 16 rbx | 24 rbp | 32 r12 | 40 r13 | 48 r14 |
 *                 56 r15 | 64 fsbase | 72 mxcsr | 76 cw
 */
#include "ctx_x86_64.h"

	.text
	.globl	bb_gswitch
	.hidden	bb_gswitch
	.type	bb_gswitch, @function
	.p2align 4
bb_gswitch:
	.cfi_startproc
	BB_SAVE_CTX %rdi
	/* r8-r10 and rdx survive the arch_prctl fallback of BB_SET_FS */
	movq	%rsi, %r8               /* to */
	movq	%rdx, %r10              /* post */
	movq	%rcx, %r9               /* prev */
	movq	%rdi, %rdx              /* save */
	movq	64(%r8), %rsi           /* the new G's TCB */
	BB_SET_FS
	movl	72(%r8), %eax           /* MXCSR and the x87 control word: */
	cmpl	72(%rdx), %eax          /* loading them costs more than */
	je	1f                      /* comparing, and they rarely differ */
	ldmxcsr	72(%r8)
1:	movzwl	76(%r8), %eax
	cmpw	76(%rdx), %ax
	je	2f
	fldcw	76(%r8)
2:	BB_LOAD_REGS %r8
	movq	0(%r8), %rsp            /* the new G's stack from here on */
	.cfi_undefined rip              /* no unwinding through the switch */
	movq	%rsp, %rax
	andq	$-16, %rsp
	pushq	8(%r8)                  /* where the new G resumes */
	pushq	%rax                    /* its rsp */
	movq	%r9, %rdi
	call	*%r10                   /* post(prev) */
	popq	%rax
	popq	%rcx
	/* "return" to the new G with ret, not jmp: when it too was switched
	 * away from the same call site (two Gs yielding to each other), the
	 * return-stack predictor gets this ret and the ones after it right */
	movq	%rcx, -8(%rax)
	leaq	-8(%rax), %rsp
	ret
	.cfi_endproc
	.size	bb_gswitch, .-bb_gswitch

	.section .note.GNU-stack,"",@progbits
