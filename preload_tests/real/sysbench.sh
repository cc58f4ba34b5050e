#!/usr/bin/env bash
# sysbench.sh — sysbench's threads, mutex, cpu and memory tests with 64 threads,
# natively and under bobbin, each bounded by a fixed amount of work (--time=0 with
# --events, or a fixed --memory-total-size / one event per thread for mutex) so the
# "total number of events" is the same in every run: it must equal the expected
# count in both runs, sysbench must exit 0, and neither run may print FATAL, ALERT
# or an error. The metric is events per second (events / sysbench's "total time").
# Full and --short differ in the amount of work. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init sysbench "$@"
real_need sysbench
real_need_cmd sysbench

threads=64
if [ "$REAL_FORM" = short ]; then
    ev_threads=4000 ev_cpu=2000 mem_mib=2048 mutex_locks=20000
else
    ev_threads=20000 ev_cpu=10000 mem_mib=8192 mutex_locks=100000
fi
# name, expected events, arguments
tests=(
    "threads|$ev_threads|threads --thread-yields=100 --thread-locks=8 --events=$ev_threads"
    "mutex|$threads|mutex --mutex-num=16 --mutex-locks=$mutex_locks --mutex-loops=50"
    "cpu|$ev_cpu|cpu --cpu-max-prime=10000 --events=$ev_cpu"
    "memory|$((mem_mib * 256))|memory --memory-total-size=${mem_mib}M --memory-block-size=4K"
)

# events LABEL / total_time LABEL: from sysbench's report
events() { sed -n 's/^ *total number of events: *\([0-9]*\).*/\1/p' "$REAL_WORK/$1.out"; }
total_time() { sed -n 's/^ *total time: *\([0-9.]*\)s.*/\1/p' "$REAL_WORK/$1.out"; }

for t in "${tests[@]}"; do
    IFS='|' read -r name expect args <<<"$t"
    read -r -a argv <<<"$args"
    for mode in native bobbin; do
        label=${name}_$mode
        real_run "$label" "$mode" 120 -- sysbench "${argv[@]}" --threads=$threads --time=0 run
        got=$(events "$label")
        if [ "$got" != "$expect" ]; then
            real_fail "sysbench $name ($mode): total number of events ${got:-missing}, expected $expect"
        fi
        if grep -Eiq 'FATAL|ALERT|error' "$REAL_WORK/$label.out" "$REAL_WORK/$label.err"; then
            real_fail "sysbench $name ($mode) reported: $(grep -Eih -m3 'FATAL|ALERT|error' \
                "$REAL_WORK/$label.out" "$REAL_WORK/$label.err")"
        fi
    done
    real_row "sysbench $name ($threads thr, $expect ev)" "events/s" "${name}_native" "${name}_bobbin" \
        "$(real_rate "$(events "${name}_native")" "$(total_time "${name}_native")")" \
        "$(real_rate "$(events "${name}_bobbin")" "$(total_time "${name}_bobbin")")"
done
real_finish
