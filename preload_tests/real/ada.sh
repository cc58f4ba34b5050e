#!/usr/bin/env bash
# ada.sh — GNAT's Ada tasking run time (package gnat) running ada/tasks.adb natively
# and under bobbin: rendezvous with a server task, hundreds of short tasks and a
# protected counter with an entry barrier, a bounded buffer of protected entries,
# timed entry calls and selective accepts with delay alternatives, periodic delay
# until, abort of a sleeping task, an exception raised in an accept body, and tasks
# pinned to a CPU (the CPU aspect) that sleep while another pinned task ends. GNAT
# names every task with prctl(PR_SET_NAME) and sets the environment task's policy
# with pthread_setschedparam; each wait is a condvar wait with a deadline. The
# program checks every result itself (stdout "ok"); both runs must print the same
# stdout and exit 0. Metric: rendezvous per second (the program's own time).
# Full: 20,000 rendezvous, 1,000 tasks, 10 pinned rounds; --short: 5,000, 200, 3.
# Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init ada "$@"
real_need gnat
real_need_cmd gnatmake
pings=20000 ntasks=1000 pinned=10
[ "$REAL_FORM" = short ] && pings=5000 ntasks=200 pinned=3

cp "$(dirname "${BASH_SOURCE[0]}")/ada/tasks.adb" "$REAL_WORK/"
if ! (cd "$REAL_WORK" && gnatmake -q -gnat2012 tasks.adb) >"$REAL_WORK/gnatmake.err" 2>&1; then
    real_fail "gnatmake: $(head -n 5 "$REAL_WORK/gnatmake.err")"
    real_finish
fi
real_selfchecked a 120 tasks 'FAIL|raised|error' -- "$REAL_WORK/tasks" "$pings" "$ntasks" "$pinned"
ptime() { sed -n 's/^ping_time \([0-9.]*\)$/\1/p' "$REAL_WORK/$1.err"; }
real_row "ada tasks ($pings rendezvous, $ntasks tasks)" "rendezvous/s" a_native a_bobbin \
    "$(real_rate "$pings" "$(ptime a_native)")" "$(real_rate "$pings" "$(ptime a_bobbin)")"
real_finish
