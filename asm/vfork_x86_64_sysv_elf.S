/*
 * vfork (and __vfork) — glibc's, with bobbin's two steps around it.
 *
 * A vfork child runs on its parent's memory, stack and TLS until it execs or
 * exits, while the parent's thread waits; the parent's other threads go on.
 * What the child calls must not change bobbin's state, which is the
 * parent's: its fd table and poller registrations, its signal records, its
 * scheduler. So the child starts by marking itself (bb_vfork_child: a flag
 * in the TLS it shares with the waiting parent thread, and for an M a gs
 * base of bb_nom, an M with no G, so all it calls runs natively); the parent
 * clears the flag when it resumes (bb_vfork_parent), before it runs on.
 * Before the call, bb_vfork_prepare makes the fds the child may inherit
 * blocking again, as fork's prepare handler does.
 *
 * A C wrapper cannot do this: the child returns from vfork into its caller
 * and goes on calling, over the wrapper's frame, which the parent would
 * then return through. Here, as in glibc, the return address is popped into
 * a register the system call keeps (the child's copy of the registers is
 * its own) and pushed back after it, so each side returns through its own.
 * Both C steps are reached by a jump with the return address on the stack,
 * as if the caller had called them.
 */
	.text
	.globl	vfork
	.type	vfork, @function
	.globl	__vfork
	.type	__vfork, @function
	.p2align 4
vfork:
__vfork:
	.cfi_startproc
	subq	$8, %rsp                /* 16-byte alignment for the call */
	.cfi_adjust_cfa_offset 8
	call	bb_vfork_prepare
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%rdi                    /* the return address */
	.cfi_adjust_cfa_offset -8
	.cfi_register rip, rdi
	movl	$58, %eax               /* SYS_vfork */
	syscall
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset rip, 0
	testq	%rax, %rax
	jz	1f
	movq	%rax, %rdi              /* the parent: the child's pid, or -errno */
	jmp	bb_vfork_parent
1:	jmp	bb_vfork_child          /* returns 0 */
	.cfi_endproc
	.size	vfork, .-vfork
	.size	__vfork, .-__vfork

	.section .note.GNU-stack,"",@progbits
