/*
 * bb_call_as(a0, a1, a2, fn, gadget) — call fn(a0, a1, a2) with `gadget`
 * as the return address fn sees.
 *
 * glibc's dlopen takes its own return address to find the calling object
 * (whose RUNPATH, $ORIGIN and namespace the search uses). Called from
 * bobbin's wrapper it would see libbobbin. So the wrapper passes the address
 * of a `ret` byte inside the caller's own object: fn returns to it, and
 * that ret pops the address of label 1 below, back here. The stack is laid
 * out as for an ordinary call (rsp = 8 mod 16 at fn's entry).
 *
 * dl_iterate_phdr lists only the namespace of its caller's object, so the
 * same trick, with a `ret` inside an object that dlmopen loaded, lists that
 * object's namespace.
 */
	.text
	.globl	bb_call_as
	.hidden	bb_call_as
	.type	bb_call_as, @function
	.p2align 4
bb_call_as:
	.cfi_startproc
	subq	$16, %rsp
	.cfi_adjust_cfa_offset 16
	leaq	1f(%rip), %rax
	pushq	%rax                    /* where the gadget's ret goes */
	.cfi_adjust_cfa_offset 8
	pushq	%r8                     /* fn's return address: the gadget */
	.cfi_adjust_cfa_offset 8
	jmp	*%rcx
1:
	.cfi_adjust_cfa_offset -16
	addq	$16, %rsp
	.cfi_adjust_cfa_offset -16
	ret
	.cfi_endproc
	.size	bb_call_as, .-bb_call_as

	.section .note.GNU-stack,"",@progbits
