/*
 * bb_asyncpreempt — where a G interrupted by the preemption signal resumes.
 *
 * The signal handler (runtime/preempt.c) found the G at a safe point and
 * made it "call" here: it set rsp below the interrupted one's 128-byte red
 * zone, kept the interrupted rip in the M (gs:32), and set rip =
 * bb_asyncpreempt. The first instruction pushes that rip (the handler could
 * not: the kernel's signal frame was still there). sigreturn has put every
 * register back as it was, so this code saves them
 * all — flags, the 15 general registers and the whole xsave state (x87,
 * SSE, AVX, AVX-512: every component the kernel enabled) — calls into the
 * scheduler, and when the G runs again restores them and returns to the
 * interrupted instruction with `ret $128`, which also lifts rsp back over
 * the red zone.
 *
 *   stack at entry (grows down)           after the saves
 *   rsp0 = interrupted rsp
 *   [rsp0-128 .. rsp0)   red zone, untouched  <- rsp at entry
 *   [rsp0-136]           interrupted rip   <- rsp after the first push
 *                                          rflags, rax..r15 (15 pushes)
 *                                          <- rbx keeps this address
 *                                          (aligned to 64) xsave area of
 *                                          bb_xsave_size bytes <- rsp
 */
	.text
	.globl	bb_asyncpreempt
	.hidden	bb_asyncpreempt
	.type	bb_asyncpreempt, @function
	.p2align 4
bb_asyncpreempt:
	.cfi_startproc
	.cfi_signal_frame                 /* the "return address" is the interrupted pc itself */
	.cfi_def_cfa rsp, 128             /* the caller's rsp: above the red zone */
	.cfi_undefined rip                /* (in the M until the push) */
	pushq	%gs:32                    /* the interrupted pc (bb_m.async_pc) */
	.cfi_adjust_cfa_offset 8
	.cfi_offset rip, -136
	pushfq
	.cfi_adjust_cfa_offset 8
	pushq	%rax
	.cfi_adjust_cfa_offset 8
	.cfi_offset rax, -152
	pushq	%rbx
	.cfi_adjust_cfa_offset 8
	.cfi_offset rbx, -160
	pushq	%rcx
	.cfi_adjust_cfa_offset 8
	.cfi_offset rcx, -168
	pushq	%rdx
	.cfi_adjust_cfa_offset 8
	.cfi_offset rdx, -176
	pushq	%rsi
	.cfi_adjust_cfa_offset 8
	.cfi_offset rsi, -184
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	.cfi_offset rdi, -192
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_offset rbp, -200
	pushq	%r8
	.cfi_adjust_cfa_offset 8
	.cfi_offset r8, -208
	pushq	%r9
	.cfi_adjust_cfa_offset 8
	.cfi_offset r9, -216
	pushq	%r10
	.cfi_adjust_cfa_offset 8
	.cfi_offset r10, -224
	pushq	%r11
	.cfi_adjust_cfa_offset 8
	.cfi_offset r11, -232
	pushq	%r12
	.cfi_adjust_cfa_offset 8
	.cfi_offset r12, -240
	pushq	%r13
	.cfi_adjust_cfa_offset 8
	.cfi_offset r13, -248
	pushq	%r14
	.cfi_adjust_cfa_offset 8
	.cfi_offset r14, -256
	pushq	%r15
	.cfi_adjust_cfa_offset 8
	.cfi_offset r15, -264
	movq	%rsp, %rbx              /* the general registers live here */
	.cfi_def_cfa rbx, 264
	movq	bb_xsave_size(%rip), %rcx
	subq	%rcx, %rsp
	andq	$-64, %rsp              /* xsave wants 64-byte alignment */
	/* zero the xsave header (bytes 512..575): XRSTOR faults on garbage */
	xorl	%eax, %eax
	movq	%rax, 512(%rsp)
	movq	%rax, 520(%rsp)
	movq	%rax, 528(%rsp)
	movq	%rax, 536(%rsp)
	movq	%rax, 544(%rsp)
	movq	%rax, 552(%rsp)
	movq	%rax, 560(%rsp)
	movq	%rax, 568(%rsp)
	movl	$-1, %eax               /* every component enabled in XCR0 */
	movl	$-1, %edx
	xsave	(%rsp)
	call	bb_asyncpreempt2        /* parks the G; returns when it runs again */
	movl	$-1, %eax
	movl	$-1, %edx
	xrstor	(%rsp)
	movq	%rbx, %rsp
	.cfi_def_cfa rsp, 264
	popq	%r15
	.cfi_adjust_cfa_offset -8
	popq	%r14
	.cfi_adjust_cfa_offset -8
	popq	%r13
	.cfi_adjust_cfa_offset -8
	popq	%r12
	.cfi_adjust_cfa_offset -8
	popq	%r11
	.cfi_adjust_cfa_offset -8
	popq	%r10
	.cfi_adjust_cfa_offset -8
	popq	%r9
	.cfi_adjust_cfa_offset -8
	popq	%r8
	.cfi_adjust_cfa_offset -8
	popq	%rbp
	.cfi_adjust_cfa_offset -8
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	popq	%rsi
	.cfi_adjust_cfa_offset -8
	popq	%rdx
	.cfi_adjust_cfa_offset -8
	popq	%rcx
	.cfi_adjust_cfa_offset -8
	popq	%rbx
	.cfi_adjust_cfa_offset -8
	popq	%rax
	.cfi_adjust_cfa_offset -8
	popfq
	.cfi_adjust_cfa_offset -8
	ret	$128                    /* to the interrupted rip, over the red zone */
	.cfi_endproc
	.size	bb_asyncpreempt, .-bb_asyncpreempt

	.section .note.GNU-stack,"",@progbits
