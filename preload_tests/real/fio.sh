#!/usr/bin/env bash
# fio.sh — fio (package fio) writing files at random with verification, natively and
# under bobbin, with jobs as threads (--thread): an io_uring job pair whose blocks are
# verified by threads of their own (--verify_async), and a psync job quartet. fio
# makes its io_uring rings with SINGLE_ISSUER|DEFER_TASKRUN (a ring belongs to the
# OS thread that made it) and enters them with its own syscall instruction; under
# bobbin before 2026-11-27 its jobs stopped after a few writes (an io_uring_enter cut
# short by bobbin's signal returned -EINTR, which fio read as "no events") or hung.
# Every job must issue every write and read back and verify every block (the
# "issued rwts" totals), with err=0, in both runs. Metric: the io_uring jobs' write
# bandwidth (KiB/s, fio's own). Where the kernel refuses io_uring natively, that
# part is left out. Full: 64 MiB per job; --short: 16 MiB. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init fio "$@"
real_need fio
real_need_cmd fio
mib=64
[ "$REAL_FORM" = short ] && mib=16
blocks=$((mib * 256)) # 4 KiB blocks per job

# name, jobs, engine-specific arguments
parts=(
    "uring|2|--ioengine=io_uring --iodepth=4 --verify_async=1"
    "psync|4|--ioengine=psync"
)
# issued LABEL: one "total=R,W,0,0 err=E" line per job, in job order
issued() {
    awk '/err=/{ sub(/.*err= */, ""); sub(/:.*/, ""); e = $0 }
         /issued rwts:/{ sub(/.*total=/, ""); sub(/ .*/, ""); print "total=" $0 " err=" e }' \
        "$REAL_WORK/$1.out"
}
wbw() { sed -n 's/^  WRITE: bw=[^(]*(\([0-9.]*\)\([kM]\)B\/s).*/\1 \2/p' "$REAL_WORK/$1.out" |
        awk '{ print ($2 == "M" ? $1 * 1000 : $1) }'; }

for p in "${parts[@]}"; do
    IFS='|' read -r name jobs args <<<"$p"
    read -r -a argv <<<"$args"
    expect=$(for ((j = 0; j < jobs; j++)); do echo "total=$blocks,$blocks,0,0 err=0"; done)
    skipped=
    for mode in native bobbin; do
        label=${name}_$mode
        mkdir -p "$REAL_WORK/$label.d"
        if ! real_run "$label" "$mode" 120 -- fio --name="$name" --directory="$REAL_WORK/$label.d" \
            --size=${mib}M --bs=4k --rw=randwrite --thread --numjobs="$jobs" \
            --verify=crc32c "${argv[@]}"; then
            if [ "$mode" = native ] && [ "$name" = uring ] &&
                grep -qi 'io_uring' "$REAL_WORK/$label.err"; then
                real_say "io_uring refused natively: that part is left out"
                REAL_FAILS=("${REAL_FAILS[@]:0:${#REAL_FAILS[@]}-1}")
                skipped=1
                break
            fi
            continue
        fi
        got=$(issued "$label")
        [ "$got" = "$expect" ] ||
            real_fail "fio $name ($mode): issued/err per job"$'\n'"$got"$'\n'"expected"$'\n'"$expect"
    done
    rm -rf "$REAL_WORK/${name}_native.d" "$REAL_WORK/${name}_bobbin.d"
    [ -n "$skipped" ] && continue
    real_row "fio $name ($jobs jobs x $mib MiB, verified)" "write KiB/s" \
        "${name}_native" "${name}_bobbin" "$(wbw "${name}_native")" "$(wbw "${name}_bobbin")"
done
real_finish
