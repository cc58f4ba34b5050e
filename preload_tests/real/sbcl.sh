#!/usr/bin/env bash
# sbcl.sh — Steel Bank Common Lisp (package sbcl) running sbcl/threads.lisp
# natively and under bobbin: 8 computing threads that each ask for a full
# collection (SBCL stops the world with pthread_kill and semaphores), four
# producers and a consumer through a mutex and a waitqueue, a semaphore
# ping-pong, a collection while a thread sleeps, short threads that
# allocate, and interrupt-thread of a sleeping thread. SBCL runs its main
# thread's Lisp code on a control stack of its own, so its calls there, and
# the threads it makes, are made off the green thread's stack (README:
# they stay NPTL threads; the OS thread counts show it). The program checks
# every result itself (last line "ok"); both runs must print the same stdout
# and exit 0, and the exit must not hang (it did at P=2 until 2026-11-28).
# Full: scale 3; --short: scale 1. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init sbcl "$@"
real_need sbcl
real_need_cmd sbcl
scale=3
[ "$REAL_FORM" = short ] && scale=1

cp "$(dirname "${BASH_SOURCE[0]}")/sbcl/threads.lisp" "$REAL_WORK/"
real_selfchecked s 120 "sbcl threads.lisp" 'FAIL|error|bobbin:' -- \
    sbcl --script "$REAL_WORK/threads.lisp" "$scale"
real_row "sbcl threads.lisp (scale $scale)" "-" s_native s_bobbin "-" "-"
real_finish
