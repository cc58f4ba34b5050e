#!/usr/bin/env bash
# repro_erlang.sh — NOT FIXED (2026-11-28). Erlang/OTP 25's BEAM (Debian 12
# erlang-base, JIT) corrupts its heap under bobbin while bobbin's preemption
# signal is on: SIGSEGV, or aborts such as "size_object: bad tag for 0x0" and
# "eheap_alloc: Cannot allocate ... bytes". A single interpreted tail-recursive
# loop, no message passing, one scheduler:
#
#   natively: prints 742453, exit 0 (about 5 s)
#   bobbin:   exit 139 or 134 within about 1 s -- in most runs while the machine
#             was loaded (two probing sessions and a suite build), in 1 of 18
#             runs of a larger module on a quiet machine
#   bobbin with BOBBIN_DEBUG=asyncpreemptoff=1 or BOBBIN_TIMESLICE=10000: correct
#
# What is known (a module of the probing session, /tmp/probe_erlang/pt.erl
# then: "crypto" = sort + sha256 in 100 processes, "ring" = 100k processes
# passing a token; 6 runs each at P=2):
# - the signal alone corrupts BEAM: a build that refuses every pc as unsafe
#   (the signal is sent, the handler returns) crashed crypto 6 of 6;
# - the frame the kernel writes under the interrupted rsp is the cause there:
#   BEAM runs Erlang code with rsp in a process's stack, right above its
#   heap, and gives all its own handlers SA_ONSTACK. The preemption handler
#   with SA_ONSTACK (and threads sharing one alternate stack given their M's
#   own instead: erlang_onstack_attempt.diff) ran crypto 6 of 6 and, with
#   every pc refused, ring 6 of 6;
# - but with preemption on, ring still crashed 1-3 in 6 with that build:
#   twice in bobbin's take_g with the M's P gone, once at a return address
#   in the heap. The take_g cores show a `ret` on g0 into bb_execute just
#   after its `call bb_gogo` (rax 0): a return address taken from memory a
#   signal frame overwrote -- likely a frame on an alternate stack that a
#   switched-away G's frames still use. Not committed: not understood.
# With asyncpreemptoff=1 at BOBBIN_MAXPROCS=1 a file-I/O test (dirty I/O
# schedulers) hangs instead: a BEAM scheduler spins waiting for threads that
# only preemption would let run.
#
# Usage: repro_erlang.sh LIBBOBBIN [RUNS]   (needs erlang-base)
lib=${1:?path to libbobbin.so}
runs=${2:-10}
T='F=fun F(0,A)->A; F(N,A)->F(N-1,(A*31+N) rem 1000003) end, io:format("~p~n",[F(3000000,0)]), halt().'
bad=0
for ((i = 0; i < runs; i++)); do
    out=$(timeout -s KILL 60 env LD_PRELOAD="$lib" GLIBC_TUNABLES=glibc.pthread.rseq=0 \
        BOBBIN_MAXPROCS=1 BOBBIN_TIMESLICE=1 erl +S 1 -noshell -eval "$T" 2>&1)
    [ "$out" = 742453 ] || bad=$((bad + 1))
done
echo "$bad of $runs runs wrong"
