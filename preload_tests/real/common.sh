# shellcheck shell=bash
# preload_tests/real/common.sh — sourced by the real-program tests beside it; never run.
#
# Each test runs an unmodified Debian program natively and under bobbin with the same
# bounded input, checks that the results agree, and reports wall time, peak OS
# threads, peak RSS and the program's own throughput metric for both runs.
#
# Every test takes the same options (real_init parses them):
#   --short          the bounded form meson registers (suite 'real', ~30 s at most)
#   --full           the full form (default; `scripts/test --real` runs these)
#   -p N             BOBBIN_MAXPROCS for the bobbin runs (default 2)
#   --lib PATH       libbobbin.so to preload (default $BB_BUILD/libbobbin.so)
#   --measure PATH   preload_tests/measure (default $BB_BUILD/preload_tests/measure)
# and BB_REAL_FORM=short|full in the environment overrides --short/--full.
# Exit status: 0 pass, 1 fail, 77 skip (a package that cannot be installed).
#
# Output: a first line "PASS|FAIL NAME (FORM) ...", then one table row per measured
# pair of runs, then, on failure, the evidence. The rows also go to
# $BB_BUILD/real-results/NAME.tsv (with the machine and the date), from which the
# README's "Real programs" table was written.
#
# Processes: everything a test starts in the background is registered with
# real_track and killed (its whole process group) when the script exits, however
# it exits. Servers listen on 127.0.0.1 only.

set -uo pipefail
REAL_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/lib.sh
. "$REAL_DIR/../../scripts/lib.sh"

REAL_NAME='' REAL_FORM=full REAL_P=2 REAL_LIB='' REAL_MEASURE='' REAL_WORK=''
# set by real_server_start, real_sample_tree and real_run_tree, for the scripts
# shellcheck disable=SC2034
REAL_SERVER_PID='' REAL_SAMPLER_PID='' REAL_TREE_THREADS='' REAL_TREE_RSS=''
REAL_FAILS=()
REAL_PIDS=()
REAL_ROWS=()

real_usage() {
    sed -n '9,16p' "$REAL_DIR/common.sh" | sed 's/^# \{0,1\}//'
}

# real_init NAME "$@": parse the common options, make the work directory, set traps.
real_init() {
    REAL_NAME=$1
    shift
    while [ $# -gt 0 ]; do
        case "$1" in
            --short) REAL_FORM=short ;;
            --full) REAL_FORM=full ;;
            -p) REAL_P=$2; shift ;;
            --lib) REAL_LIB=$2; shift ;;
            --measure) REAL_MEASURE=$2; shift ;;
            -h|--help) echo "usage: $REAL_NAME.sh [--short|--full] [-p N] [--lib PATH] [--measure PATH]"
                       real_usage; exit 0 ;;
            *) echo "$REAL_NAME: unknown option $1" >&2; exit 2 ;;
        esac
        shift
    done
    case "${BB_REAL_FORM:-}" in
        short|full) REAL_FORM=$BB_REAL_FORM ;;
    esac
    REAL_LIB=${REAL_LIB:-$BB_LIB}
    REAL_MEASURE=${REAL_MEASURE:-$BB_BUILD/preload_tests/measure}
    if [ ! -f "$REAL_LIB" ] || [ ! -x "$REAL_MEASURE" ]; then
        bb_build_targets libbobbin.so preload_tests/measure ||
            { echo "FAIL $REAL_NAME: cannot build libbobbin.so and measure"; exit 1; }
    fi
    REAL_WORK=$(mktemp -d "${TMPDIR:-/tmp}/bobbin-real-$REAL_NAME.XXXXXX") || exit 1
    trap real_cleanup EXIT
    trap 'exit 1' INT TERM HUP
    ulimit -c 0
}

# real_track PID: kill PID's process group (or PID) when the script exits.
real_track() {
    REAL_PIDS+=("$1")
}

real_cleanup() {
    local p
    for p in "${REAL_PIDS[@]}"; do
        kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
    done
    [ -n "$REAL_WORK" ] && rm -rf "$REAL_WORK"
}

real_skip() {
    echo "SKIP $REAL_NAME ($*)"
    exit 77
}

# real_fail MESSAGE: note a failure; the test goes on and fails at real_finish.
real_fail() {
    REAL_FAILS+=("$*")
}

real_say() {
    echo "  $REAL_NAME: $*" >&2
}

# real_need PKG...: install the Debian packages that are missing, or skip.
real_need() {
    bb_install_packages "$@" >&2 || real_skip "cannot install $*"
}

# real_need_cmd CMD...: skip unless every command is on PATH.
real_need_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || real_skip "no $c"
    done
}

# The environment of a bobbin run, as `scripts/bobbin run -p N` sets it.
real_tunables() {
    printf '%s' "${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.pthread.rseq=0"
}
real_bobbin_env() {   # prints NAME=VALUE lines
    printf '%s\n' "LD_PRELOAD=$REAL_LIB${LD_PRELOAD:+:$LD_PRELOAD}" \
        "GLIBC_TUNABLES=$(real_tunables)" "BOBBIN_MAXPROCS=$REAL_P"
}

# real_run LABEL MODE TIMEOUT [--in FILE] -- CMD [ARG]...
# Runs CMD under measure (own process group, killed after TIMEOUT s), natively or
# (MODE bobbin) preloaded; leaves $REAL_WORK/LABEL.{out,err,report}. stdin is
# /dev/null unless --in FILE. Returns 0 when CMD exited 0.
real_run() {
    local label=$1 mode=$2 timeout=$3
    shift 3
    local in=
    if [ "$1" = --in ]; then
        in=$2
        shift 2
    fi
    [ "$1" = -- ] && shift
    local envs=() e
    if [ "$mode" = bobbin ]; then
        while IFS= read -r e; do envs+=(-E "$e"); done < <(real_bobbin_env)
    fi
    local w=$REAL_WORK
    if [ -n "$in" ]; then
        "$REAL_MEASURE" -g -t "$timeout" -o "$w/$label.out" -e "$w/$label.err" \
            "${envs[@]}" -- "$@" <"$in" >"$w/$label.report"
    else
        "$REAL_MEASURE" -n -g -t "$timeout" -o "$w/$label.out" -e "$w/$label.err" \
            "${envs[@]}" -- "$@" >"$w/$label.report"
    fi || { real_fail "$label: measure failed"; return 1; }
    real_check_run "$label" "$mode"
}

# real_server_start LABEL MODE TIMEOUT -- CMD [ARG]...: as real_run, but in the
# background (a server): measure's PID goes in REAL_SERVER_LABEL; stop it with
# real_server_stop LABEL.
real_server_start() {
    local label=$1 mode=$2 timeout=$3
    shift 3
    [ "$1" = -- ] && shift
    local envs=() e
    if [ "$mode" = bobbin ]; then
        while IFS= read -r e; do envs+=(-E "$e"); done < <(real_bobbin_env)
    fi
    "$REAL_MEASURE" -n -g -t "$timeout" -o "$REAL_WORK/$label.out" -e "$REAL_WORK/$label.err" \
        "${envs[@]}" -- "$@" >"$REAL_WORK/$label.report" &
    local mpid=$!
    real_track "$mpid"
    printf -v "REAL_SERVER_$label" '%s' "$mpid"
    # the server is measure's child and leads its own process group
    local i
    for ((i = 0; i < 100; i++)); do
        REAL_SERVER_PID=$(pgrep -P "$mpid" | head -n 1)
        [ -n "$REAL_SERVER_PID" ] && break
        sleep 0.02
    done
    [ -n "$REAL_SERVER_PID" ] && real_track "$REAL_SERVER_PID"
}

# real_server_pid LABEL: the server's PID (measure's child), or nothing.
real_server_pid() {
    local v="REAL_SERVER_$1"
    pgrep -P "${!v}" | head -n 1
}

# real_server_stop LABEL MODE [SIGNAL]: SIGTERM (or SIGNAL) to the server, wait up to
# 20 s for it to end (then SIGKILL: a failure), check it exited 0 (real_check_run).
real_server_stop() {
    local label=$1 mode=$2 sig=${3:-TERM} v="REAL_SERVER_$1"
    local mpid=${!v} pid i
    pid=$(pgrep -P "$mpid" | head -n 1)
    [ -n "$pid" ] && kill "-$sig" "$pid" 2>/dev/null
    for ((i = 0; i < 200; i++)); do
        kill -0 "$mpid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$mpid" 2>/dev/null; then
        real_fail "$label ($mode): still running 20 s after SIG$sig; killed"
        [ -n "$pid" ] && kill -KILL -- "-$pid" 2>/dev/null
    fi
    wait "$mpid" 2>/dev/null
    real_check_run "$label" "$mode"
}

# real_run_tree LABEL MODE TIMEOUT -- CMD [ARG]...: as real_run, for a program that
# forks workers: also samples the OS threads and RSS of its whole process group
# every 50 ms into REAL_TREE_THREADS / REAL_TREE_RSS (and LABEL.tree).
real_run_tree() {
    local label=$1 mode=$2 timeout=$3
    shift 3
    real_server_start "$label" "$mode" "$timeout" "$@"
    local v="REAL_SERVER_$label"
    real_sample_tree "${REAL_SERVER_PID:-0}" "$REAL_WORK/$label.tree"
    wait "${!v}" 2>/dev/null
    wait "$REAL_SAMPLER_PID" 2>/dev/null
    # shellcheck disable=SC2034
    read -r REAL_TREE_THREADS REAL_TREE_RSS <"$REAL_WORK/$label.tree"
    real_check_run "$label" "$mode"
}

# real_check_run LABEL MODE: exit 0, and under bobbin no "bobbin:" line on stderr
# (bobbin stepping aside, a fatal error, a stack overflow).
real_check_run() {
    local label=$1 mode=$2 st
    st=$(real_field "$label" status)
    if [ "$st" != "exit 0" ]; then
        real_fail "$label ($mode): $st; the end of its stderr:"$'\n'"$(grep -v '^ *$' \
            "$REAL_WORK/$label.err" | tail -n 12 | sed 's/^/      /')"
        real_keep "$label"
        return 1
    fi
    if [ "$mode" = bobbin ] && grep -q '^bobbin:' "$REAL_WORK/$label.err"; then
        real_fail "$label (bobbin): bobbin printed: $(grep -m3 '^bobbin:' "$REAL_WORK/$label.err")"
        real_keep "$label"
        return 1
    fi
    return 0
}

# real_keep LABEL: keep a failed run's stdout/stderr in $BB_BUILD/real-results/logs/.
real_keep() {
    local dir=$BB_BUILD/real-results/logs f
    mkdir -p "$dir" 2>/dev/null || return 0
    for f in "$REAL_WORK/$1".out "$REAL_WORK/$1".err; do
        [ -f "$f" ] && tail -c 1000000 "$f" >"$dir/$REAL_NAME.$(basename "$f")"
    done
}

# real_field LABEL KEY: a value from a measure report (wall_s, threads_peak, ...)
real_field() {
    sed -n "s/^$2=//p" "$REAL_WORK/$1.report"
}

# real_same LABEL_A LABEL_B WHAT: stdout of the two runs must be identical.
# real_selfchecked PREFIX TIMEOUT WHAT PATTERN -- CMD...: run a program that checks
# its own results natively and under bobbin (labels PREFIX_native, PREFIX_bobbin):
# each run's last line of stdout must be "ok" (else the first lines matching PATTERN
# are the evidence), and the two stdouts must agree.
real_selfchecked() {
    local prefix=$1 timeout=$2 what=$3 pat=$4 mode
    shift 5
    for mode in native bobbin; do
        real_run "${prefix}_$mode" "$mode" "$timeout" -- "$@"
        if [ "$(tail -n 1 "$REAL_WORK/${prefix}_$mode.out")" != ok ]; then
            real_fail "$what ($mode): $(grep -m3 -E "$pat" "$REAL_WORK/${prefix}_$mode.out" \
                "$REAL_WORK/${prefix}_$mode.err" | head -n 3)"
        fi
    done
    real_same "${prefix}_native" "${prefix}_bobbin" "$what output"
}

# real_selfchecked_p1 PREFIX TIMEOUT WHAT PATTERN ROW -- CMD...: real_selfchecked
# at the -p given and again at 1 (labels PREFIX<P>_native, PREFIX<P>_bobbin),
# with a table row "ROW, P=<P>)" for each (ROW opens the parenthesis).
real_selfchecked_p1() {
    local prefix=$1 timeout=$2 what=$3 pat=$4 row=$5 p
    shift 6
    for p in "$REAL_P" 1; do
        REAL_P=$p
        real_selfchecked "$prefix$p" "$timeout" "$what (P=$p)" "$pat" -- "$@"
        real_row "$row, P=$p)" "-" "$prefix${p}_native" "$prefix${p}_bobbin" "-" "-"
        [ "$p" = 1 ] && break
    done
}

real_same() {
    if ! cmp -s "$REAL_WORK/$1.out" "$REAL_WORK/$2.out"; then
        real_fail "$3: $1 and $2 differ: $(diff "$REAL_WORK/$1.out" "$REAL_WORK/$2.out" | head -n 10)"
        return 1
    fi
}

# real_row WHAT METRIC_NAME NATIVE_LABEL BOBBIN_LABEL NATIVE_METRIC BOBBIN_METRIC
# [NATIVE_THREADS BOBBIN_THREADS]: one line of the results table, from two measured
# runs (threads from the reports unless given: for process trees).
real_row() {
    local what=$1 mname=$2 n=$3 b=$4 nm=$5 bm=$6
    local nt=${7:-$(real_field "$n" threads_peak)} bt=${8:-$(real_field "$b" threads_peak)}
    real_row_raw "$what" "$(real_field "$n" wall_s)" "$(real_field "$b" wall_s)" "$mname" \
        "$nm" "$bm" "$nt" "$bt" "$(real_field "$n" rss_peak_kb)" "$(real_field "$b" rss_peak_kb)"
}

# real_row_raw WHAT NATIVE_WALL BOBBIN_WALL METRIC_NAME NATIVE_METRIC BOBBIN_METRIC
#              NATIVE_THREADS BOBBIN_THREADS NATIVE_RSS_KB BOBBIN_RSS_KB
real_row_raw() {
    local a out=
    for a in "$@"; do
        out+="${a:--}"$'\t'   # "-" for a missing value: empty fields would vanish
    done
    REAL_ROWS+=("${out%$'\t'}")
}

# real_rate AMOUNT SECONDS: AMOUNT/SECONDS with one decimal ("-" if SECONDS is 0)
real_rate() {
    awk -v a="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.1f", a / s; else printf "-" }'
}

# real_free_port: a TCP port on 127.0.0.1 nobody listens on now (the kernel's pick).
real_free_port() {
    python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' 2>/dev/null ||
        echo $((20000 + RANDOM % 30000))
}

# real_wait_port PORT SECONDS: wait until 127.0.0.1:PORT accepts connections.
real_wait_port() {
    local port=$1 deadline=$((SECONDS + $2))
    while [ $SECONDS -le $deadline ]; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# real_tree_threads PGID: OS threads of every process in process group PGID.
real_tree_threads() {
    ps -e -o pgid=,nlwp= 2>/dev/null | awk -v g="$1" '$1 == g { n += $2 } END { print n + 0 }'
}

# real_tree_rss PGID: summed RSS (KiB) of process group PGID.
real_tree_rss() {
    ps -e -o pgid=,rss= 2>/dev/null | awk -v g="$1" '$1 == g { n += $2 } END { print n + 0 }'
}

# real_sample_tree PID FILE: in the background, every 50 ms while PID lives, record
# the peak thread count and the peak summed RSS of PID's process group (PID leads
# it) into FILE as "threads rss_kb". Sets REAL_SAMPLER_PID (tracked).
real_sample_tree() {
    local pid=$1 file=$2
    echo "- -" >"$file"
    (
        peak=0 rss=0
        while kill -0 "$pid" 2>/dev/null; do
            t=$(real_tree_threads "$pid")
            r=$(real_tree_rss "$pid")
            [ "$t" -gt "$peak" ] && peak=$t
            [ "$r" -gt "$rss" ] && rss=$r
            [ "$peak" -gt 0 ] && echo "$peak $rss" >"$file"
            sleep 0.05
        done
    ) >/dev/null 2>&1 &
    REAL_SAMPLER_PID=$!
    real_track "$REAL_SAMPLER_PID"
}

# real_wrk_field FILE: from wrk's output, prints "requests non2xx errors rps"
real_wrk_fields() {
    awk '
        / requests in / { req = $1 }
        /Non-2xx or 3xx responses:/ { non2xx = $NF }
        /Socket errors:/ { gsub(",", ""); err = $4 + $6 + $8 + $10 }
        /^Requests\/sec:/ { rps = $2 }
        END { printf "%d %d %d %s\n", req, non2xx, err, (rps == "" ? 0 : rps) }' "$1"
}

# real_finish: print the verdict and the table, save the rows, exit 0 or 1.
real_finish() {
    local verdict=PASS
    [ ${#REAL_FAILS[@]} -gt 0 ] && verdict=FAIL
    echo "$verdict $REAL_NAME ($REAL_FORM, BOBBIN_MAXPROCS=$REAL_P)"
    printf '  %-38s %9s %9s  %-13s %12s %12s %7s %7s %9s %9s\n' what "native s" "bobbin s" \
        metric native bobbin "thr nat" "thr bob" "RSS nat" "RSS bob"
    local r
    for r in "${REAL_ROWS[@]}"; do
        IFS=$'\t' read -r what nw bw mname nm bm nt bt nr br <<<"$r"
        printf '  %-38s %9s %9s  %-13s %12s %12s %7s %7s %8sM %8sM\n' "$what" "$nw" "$bw" \
            "$mname" "$nm" "$bm" "$nt" "$bt" "$(real_mib "$nr")" "$(real_mib "$br")"
    done
    if [ "$verdict" = FAIL ]; then
        local f
        for f in "${REAL_FAILS[@]}"; do
            echo "  failed: $f"
        done
    fi
    local dir=$BB_BUILD/real-results
    if mkdir -p "$dir" 2>/dev/null; then
        {
            printf '# %s %s form=%s maxprocs=%d date=%s machine=%s cpus=%s\n' "$REAL_NAME" \
                "$verdict" "$REAL_FORM" "$REAL_P" "$(date -u +%Y-%m-%dT%H:%MZ)" \
                "$(uname -m)" "$(nproc)"
            printf '%s\n' "${REAL_ROWS[@]}"
        } >"$dir/$REAL_NAME.tsv"
    fi
    [ "$verdict" = PASS ] && exit 0
    exit 1
}

real_mib() {
    awk -v k="${1:-0}" 'BEGIN { if (k ~ /^[0-9]+$/) printf "%.1f", k / 1024; else printf "-" }'
}

# ---- compressors (pigz.sh, xz.sh, zstd.sh) ----

# real_gen_input FILE MIB: MIB MiB of alternating 1 MiB chunks of base64 noise
# (compresses to about 75 %) and numbered text lines (compresses well), so every
# block a compressor thread takes is real work.
real_gen_input() {
    local file=$1 mib=$2 i
    for ((i = 0; i < mib; i++)); do
        if ((i % 2)); then
            head -c 786432 /dev/urandom | base64 -w 76
        else
            seq -f "line %09.0f: bobbin real-program test input, mostly compressible" \
                $((i * 16384)) $((i * 16384 + 16383))
        fi
    done >"$file"
    truncate -s "${mib}M" "$file"
}

# real_roundtrip TOOL MIB TIMEOUT "COMPRESS ARGS" "DECOMPRESS ARGS": compress a
# generated file natively and under bobbin (the compressed bytes must be identical),
# decompress each run's result the same way (must give back the input), one table
# row per direction with MB/s (MiB of uncompressed data per second).
real_roundtrip() {
    local tool=$1 mib=$2 timeout=$3
    local -a cargs dargs
    read -r -a cargs <<<"$4"
    read -r -a dargs <<<"$5"
    local in=$REAL_WORK/input.dat mode
    real_gen_input "$in" "$mib"
    real_say "input: $mib MiB, sha256 $(sha256sum "$in" | cut -c1-16)"
    for mode in native bobbin; do
        real_run "c_$mode" "$mode" "$timeout" -- "$tool" "${cargs[@]}" -c "$in"
    done
    real_same c_native c_bobbin "compressed output of $tool ${cargs[*]}"
    real_say "compressed: $(stat -c %s "$REAL_WORK/c_native.out") bytes," \
        "sha256 native $(sha256sum <"$REAL_WORK/c_native.out" | cut -c1-16)" \
        "bobbin $(sha256sum <"$REAL_WORK/c_bobbin.out" | cut -c1-16)"
    for mode in native bobbin; do
        real_run "d_$mode" "$mode" "$timeout" -- "$tool" "${dargs[@]}" -c "$REAL_WORK/c_$mode.out"
        if ! cmp -s "$in" "$REAL_WORK/d_$mode.out"; then
            real_fail "$tool ${dargs[*]} ($mode) did not give back the input"
        fi
        rm -f "$REAL_WORK/d_$mode.out"
    done
    real_row "$tool ${cargs[*]} ($mib MiB)" "MiB/s" c_native c_bobbin \
        "$(real_rate "$mib" "$(real_field c_native wall_s)")" \
        "$(real_rate "$mib" "$(real_field c_bobbin wall_s)")"
    real_row "$tool ${dargs[*]}" "MiB/s" d_native d_bobbin \
        "$(real_rate "$mib" "$(real_field d_native wall_s)")" \
        "$(real_rate "$mib" "$(real_field d_bobbin wall_s)")"
}
