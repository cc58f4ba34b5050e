#!/usr/bin/env bash
# erlang.sh — Erlang/OTP (packages erlang-base, erlang-crypto) running
# erlang/procs.escript natively and under bobbin, at the -p given (default
# 2) and at 1: a token round a ring of 50,000 x scale processes,
# sorting and sha256 in 100 processes with heaps of a few MB, 200 processes
# on one ETS table, 2,000 timers, files through the dirty I/O schedulers,
# 30 ports to sh and their exit statuses, a TCP echo server with 100
# clients on 127.0.0.1. The program checks every result itself (last line
# "ok"); both runs must print the same stdout. BEAM's JIT runs Erlang code
# with the stack pointer in a process's own stack, right above its heap:
# until 2026-11-28 the kernel wrote bobbin's preemption signal's frame
# there and BEAM crashed (SIGSEGV, "size_object: bad tag") in most runs.
# Full: scale 4; --short: scale 2. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init erlang "$@"
real_need erlang-base erlang-crypto
real_need_cmd escript
scale=4
[ "$REAL_FORM" = short ] && scale=2

cp "$(dirname "${BASH_SOURCE[0]}")/erlang/procs.escript" "$REAL_WORK/"
export REAL_WORK
real_selfchecked_p1 erl 180 "procs.escript" 'FAIL|rror|bobbin:' \
    "escript procs.escript (scale $scale" -- escript "$REAL_WORK/procs.escript" "$scale"
real_finish
