#!/usr/bin/env bash
# stress_ng.sh — stress-ng --pthread 4 --mutex 4 --metrics-brief natively and under
# bobbin. stress-ng forks one process per stressor instance (the preload is
# inherited); the pthread stressor creates and ends threads as fast as it can (up
# to 1,024 alive, each naming itself), the mutex stressor has threads fight over a
# mutex while changing their scheduling priority. Both runs must exit 0 and print
# "successful run completed", with no "fail:" or "bobbin:" line. Reports bogo ops/s
# (real time) of each stressor, and the peak OS threads and RSS summed over the
# process group. Full: -t 3s; --short: -t 2s. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init stress_ng "$@"
real_need stress-ng
real_need_cmd stress-ng
secs=3
[ "$REAL_FORM" = short ] && secs=2

declare -A thr rss
for mode in native bobbin; do
    # its temporary files go to the work directory, not the current one
    real_run_tree "sn_$mode" "$mode" $((secs * 10 + 30)) -- stress-ng --temp-path "$REAL_WORK" \
        --pthread 4 --mutex 4 -t "${secs}s" --metrics-brief
    thr[$mode]=$REAL_TREE_THREADS rss[$mode]=$REAL_TREE_RSS
    log="$REAL_WORK/sn_$mode.out $REAL_WORK/sn_$mode.err"
    # shellcheck disable=SC2086
    if ! grep -q 'successful run completed' $log; then
        real_fail "stress-ng ($mode): no 'successful run completed': $(grep -h -m5 -E 'fail|unsuccessful|bobbin:' $log)"
    elif grep -qE 'fail:|bobbin:' $log; then
        real_fail "stress-ng ($mode): $(grep -h -m5 -E 'fail:|bobbin:' $log)"
    fi
done

# bogo ops/s (real time) of one stressor: "stress-ng: metrc: [PID] mutex  OPS  REAL USR SYS RATE ..."
rate() {
    awk -v s="$2" '$2 == "metrc:" && $4 == s && $5 ~ /^[0-9]+$/ { print $9; exit }' \
        "$REAL_WORK/sn_$1.out" "$REAL_WORK/sn_$1.err"
}
for s in pthread mutex; do
    real_row_raw "stress-ng --$s 4 -t ${secs}s" "$(real_field sn_native wall_s)" \
        "$(real_field sn_bobbin wall_s)" "bogo ops/s" "$(rate native $s)" "$(rate bobbin $s)" \
        "${thr[native]}" "${thr[bobbin]}" "${rss[native]}" "${rss[bobbin]}"
done
real_finish
