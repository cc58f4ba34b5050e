#!/usr/bin/env bash
# python.sh — CPython 3 (package python3) running python/threads.py natively
# and under bobbin, at the -p given (default 2) and at 1: a thread pool that
# hashes, producers and consumers through queue.Queue, timers and a
# condition relay, four computing threads beside a main that sleeps in
# steps (the GIL goes round by 5 ms timed condvar waits), a
# thread-per-connection socketserver with 32 client threads on 127.0.0.1,
# subprocesses from threads, a process pool (fork), and SIGALRM handled by
# main while threads compute. The program checks every result itself (last
# line "ok"); both runs must print the same stdout. Until 2026-11-28 the
# computing part took 15 s at P=1 (a GIL waiter's timed wait ended only
# when the computing thread's 10 ms slice did, by when another thread had
# taken the GIL) and the whole program 43 s; natively 2 s.
# Full: scale 3; --short: scale 1. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init python "$@"
real_need python3
real_need_cmd python3
scale=3
[ "$REAL_FORM" = short ] && scale=1

cp "$(dirname "${BASH_SOURCE[0]}")/python/threads.py" "$REAL_WORK/"
real_selfchecked_p1 py 120 "python3 threads.py" 'FAIL|Error|bobbin:' \
    "python3 threads.py (scale $scale" -- python3 "$REAL_WORK/threads.py" "$scale"
real_finish
