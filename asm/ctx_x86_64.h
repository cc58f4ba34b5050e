/*
 * ctx_x86_64.h — the pieces of a G switch that bb_mcall, bb_gogo and
 * bb_gswitch share, as assembler macros.
 *
 *  bb_ctx layout (runtime/runtime.h, _Static_assert'ed there):
 *   0 rsp | 8 rip | 16 rbx | 24 rbp | 32 r12 | 40 r13 | 48 r14 | 56 r15
 *  64 fsbase | 72 mxcsr (4) | 76 x87 cw (2)
 */

/* Save the caller of the current function into the bb_ctx at \ctx as if
 * that function had returned: rip = its return address, rsp = just above
 * it; callee-saved registers, MXCSR and the x87 control word. Uses rax. */
.macro BB_SAVE_CTX ctx
	movq	(%rsp), %rax            /* return address */
	movq	%rax, 8(\ctx)
	leaq	8(%rsp), %rax           /* rsp after a return */
	movq	%rax, 0(\ctx)
	movq	%rbx, 16(\ctx)
	movq	%rbp, 24(\ctx)
	movq	%r12, 32(\ctx)
	movq	%r13, 40(\ctx)
	movq	%r14, 48(\ctx)
	movq	%r15, 56(\ctx)
	stmxcsr	72(\ctx)
	fnstcw	76(\ctx)
.endm

/* Install %rsi as the fs base: wrfsbase (~12 ns here) when the kernel
 * enabled FSGSBASE, else the arch_prctl(ARCH_SET_FS) system call (~190
 * ns), which clobbers rax, rdi, rcx and r11. */
.macro BB_SET_FS
	cmpb	$0, bb_have_fsgsbase(%rip)
	je	8001f
	wrfsbase %rsi
	jmp	8002f
8001:	movl	$158, %eax              /* SYS_arch_prctl */
	movl	$0x1002, %edi           /* ARCH_SET_FS, rsi = base */
	syscall
8002:
.endm

/* Load the callee-saved registers of the bb_ctx at \ctx (not rsp). */
.macro BB_LOAD_REGS ctx
	movq	16(\ctx), %rbx
	movq	24(\ctx), %rbp
	movq	32(\ctx), %r12
	movq	40(\ctx), %r13
	movq	48(\ctx), %r14
	movq	56(\ctx), %r15
.endm
