#!/usr/bin/env bash
# gdb_gthreads.sh — gdb's view of bobbin's green threads, on a live process.
#
# Runs gdb_gthreads (three named threads parked in a condvar wait, a sleep and a
# mutex) under bobbin, then:
#   1. `scripts/bobbin dump PID` must list gt-cond/cond, gt-sleep/sleep and
#      gt-mutex/mutex, each with its park_in_* function as where it waits;
#   2. `gthread N bt` (scripts/bobbin-gdb.py) for gt-mutex must show park_in_mutex
#      and mutex_main: the backtrace of a parked G, from its saved registers;
#   3. the program, told to go on, must release its waiters and exit 0: gdb put
#      back the registers it borrowed.
# Exit 0 pass, 1 fail, 77 skip (no gdb, or ptrace not permitted here).
set -uo pipefail

lib= bobbin=
while [ $# -gt 0 ]; do
    case "$1" in
        --lib) lib=$2; shift 2 ;;
        --bobbin) bobbin=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "usage: gdb_gthreads.sh --lib LIBBOBBIN --bobbin SCRIPTS/BOBBIN -- BINARY" >&2
           exit 2 ;;
    esac
done
[ $# -eq 1 ] && [ -n "$lib" ] && [ -n "$bobbin" ] || {
    echo "usage: gdb_gthreads.sh --lib LIBBOBBIN --bobbin SCRIPTS/BOBBIN -- BINARY" >&2
    exit 2
}
binary=$1
gdbpy=$(dirname "$bobbin")/bobbin-gdb.py
name=gdb_gthreads

if ! command -v gdb >/dev/null 2>&1; then
    echo "SKIP $name (gdb is not installed: apt-get install -y gdb)"
    exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bobbin-gdbtest.XXXXXX") || exit 1
pid=
cleanup() {
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "FAIL $name: $*"
    for f in dump.out dump.err bt.out bt.err prog.out prog.err; do
        if [ -s "$work/$f" ]; then
            echo "--- $f"
            sed 's/^/  /' "$work/$f"
        fi
    done
    exit 1
}

LD_PRELOAD=$lib GLIBC_TUNABLES=glibc.pthread.rseq=0 BOBBIN_MAXPROCS=2 \
    "$binary" "$work/pid" 120 >"$work/prog.out" 2>"$work/prog.err" &
pid=$!
for _ in $(seq 200); do
    [ -s "$work/pid" ] && break
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; fail "the program ended early (status $?)"; }
    sleep 0.1
done
[ -s "$work/pid" ] || fail "no pid file after 20 s"
[ "$(cat "$work/pid")" = "$pid" ] || fail "pid file says $(cat "$work/pid"), not $pid"

# 1. the dump
"$bobbin" dump "$pid" >"$work/dump.out" 2>"$work/dump.err"
rc=$?
case $rc in
    0) ;;
    3) echo "SKIP $name (gdb is not installed)"; exit 77 ;;
    4) echo "SKIP $name (ptrace not permitted here: $(grep -m1 ptrace "$work/dump.err"))"
       exit 77 ;;
    *) fail "scripts/bobbin dump exited $rc" ;;
esac
for want in "gt-cond cond park_in_cond" "gt-sleep sleep park_in_sleep" \
            "gt-mutex mutex park_in_mutex"; do
    set -- $want
    # GOID NAME STATUS WAIT ... WHERE
    grep -qE "^[0-9]+ +$1 +waiting +$2 .*$3" "$work/dump.out" ||
        fail "no line for $1 waiting in $2 at $3 in the dump"
done

# 2. one parked G's backtrace, from its saved registers
goid=$(awk '$2 == "gt-mutex" { print $1 }' "$work/dump.out")
[ -n "$goid" ] || fail "no G id for gt-mutex"
gdb -p "$pid" -batch -nx -iex 'set debuginfod enabled off' -x "$gdbpy" \
    -ex "gthread $goid bt" </dev/null >"$work/bt.out" 2>"$work/bt.err"
grep -qE '^#[0-9]+ .*park_in_mutex' "$work/bt.out" ||
    fail "gthread $goid bt has no park_in_mutex frame"
grep -qE '^#[0-9]+ .*mutex_main' "$work/bt.out" ||
    fail "gthread $goid bt has no mutex_main frame"

# 3. the program goes on after both attaches, and ends well
kill -0 "$pid" 2>/dev/null || fail "the program died while gdb was attached"
touch "$work/pid.go"
status=
for _ in $(seq 200); do
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid"
        status=$?
        break
    fi
    sleep 0.1
done
[ -n "$status" ] || fail "the program did not end within 20 s of go"
pid=
[ "$status" = 0 ] || fail "the program exited $status after go"
grep -qx 'gdb_gthreads: released' "$work/prog.out" || fail "the program did not say released"

nframes=$(grep -cE '^#[0-9]+ ' "$work/bt.out")
echo "PASS $name dump: 3 parked threads named with their waits; gthread $goid bt: $nframes frames"
exit 0
