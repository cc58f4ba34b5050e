/*
 * bb_gstart — the first instruction of every new G.
 *
 * bb_newproc sets up the G's context so that bb_gogo lands here with
 * r12 = the G, rsp = the top of its stack (16-byte aligned). It calls
 * bb_gmain(g), which runs the start routine and exits the G; it never returns.
 * rip is marked undefined so that debuggers and unwinders stop here.
 */
	.text
	.globl	bb_gstart
	.hidden	bb_gstart
	.type	bb_gstart, @function
	.p2align 4
bb_gstart:
	.cfi_startproc
	.cfi_undefined rip
	xorl	%ebp, %ebp              /* outermost frame */
	movq	%r12, %rdi
	call	bb_gmain
	ud2
	.cfi_endproc
	.size	bb_gstart, .-bb_gstart

	.section .note.GNU-stack,"",@progbits
