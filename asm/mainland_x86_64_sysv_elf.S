/*
 * bb_main_landing — where glibc's unwinding of the main thread ends.
 *
 * When main exits or is cancelled, glibc unwinds its stack and longjmps to
 * the buffer at the bottom of its cleanup chain, __libc_start_call_main's;
 * bobbin has pointed that buffer's pc here (cancel.c). We arrive with rsp
 * at that frame, on main's stack, and call bb_main_landed, which ends the
 * main green thread; it never returns. rip is undefined for unwinders.
 */
	.text
	.globl	bb_main_landing
	.hidden	bb_main_landing
	.type	bb_main_landing, @function
	.p2align 4
bb_main_landing:
	.cfi_startproc
	.cfi_undefined rip
	xorl	%ebp, %ebp
	andq	$-16, %rsp
	call	bb_main_landed
	ud2
	.cfi_endproc
	.size	bb_main_landing, .-bb_main_landing

	.section .note.GNU-stack,"",@progbits
