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
# Ruled out so far: bobbin's preemption itself (still crashing when every pc
# is refused as unsafe, i.e. the signal is sent and the handler returns), the
# AVX state lost at preemption (fixed 2026-11-28, still crashing), the signal
# frame on BEAM's own Erlang stacks (a build with SA_ONSTACK for the signal
# crashed as often). With asyncpreemptoff=1 at BOBBIN_MAXPROCS=1 a file-I/O
# test (dirty I/O schedulers) hangs instead: a BEAM scheduler spins waiting for
# threads that only preemption would let run.
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
