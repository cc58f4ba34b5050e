#!/usr/bin/env bash
# http_server.sh — the bundled thread-per-connection HTTP/1.1 server
# (preload_tests/http_server.c: one detached thread per connection, blocking reads
# and writes) on 127.0.0.1 (a port nobody uses), driven by `wrk -t2 -c50`, natively
# and under bobbin. Passes when in both runs wrk completes requests with no non-2xx
# answer and no socket error, and the server exits 0 on SIGTERM with no "bobbin:"
# line. Reports requests/s and the server's peak OS threads and RSS.
# Full: wrk -d3s; --short: -d2s. Skips (77) when http_server.c is not in the tree.
# Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init http_server "$@"
real_need wrk
real_need_cmd wrk
src=$REAL_DIR/../http_server.c
server=${REAL_HTTP_SERVER:-$BB_BUILD/preload_tests/http_server}
if [ ! -x "$server" ]; then
    [ -f "$src" ] || real_skip "no preload_tests/http_server.c"
    if ! bb_build_targets preload_tests/http_server 2>/dev/null || [ ! -x "$server" ]; then
        server=$REAL_WORK/http_server
        cc -std=gnu11 -O2 -pthread -o "$server" "$src" ||
            { echo "FAIL http_server: cannot build $src"; exit 1; }
    fi
fi
secs=3
[ "$REAL_FORM" = short ] && secs=2
conns=50

declare -A rps
for mode in native bobbin; do
    port=$(real_free_port)
    real_server_start "srv_$mode" "$mode" $((secs + 60)) -- "$server" "$port"
    if ! real_wait_port "$port" 10; then
        real_fail "http_server ($mode) does not listen on 127.0.0.1:$port after 10 s"
        real_server_stop "srv_$mode" "$mode" KILL
        continue
    fi
    timeout $((secs + 30)) wrk -t2 -c$conns -d${secs}s "http://127.0.0.1:$port/" \
        >"$REAL_WORK/wrk_$mode.txt" 2>&1 || real_fail "wrk against http_server ($mode) failed"
    real_server_stop "srv_$mode" "$mode"
    read -r req non2xx errs r <<<"$(real_wrk_fields "$REAL_WORK/wrk_$mode.txt")"
    rps[$mode]=$r
    real_say "$mode: wrk: $req requests, $non2xx non-2xx, $errs socket errors, $r requests/s"
    [ "$req" -gt 0 ] || real_fail "wrk ($mode) completed no request: $(cat "$REAL_WORK/wrk_$mode.txt")"
    [ "$non2xx" -eq 0 ] || real_fail "wrk ($mode): $non2xx non-2xx responses"
    [ "$errs" -eq 0 ] || real_fail "wrk ($mode): $(grep 'Socket errors' "$REAL_WORK/wrk_$mode.txt")"
done

real_row "http_server, wrk -c$conns -d${secs}s" "requests/s" srv_native srv_bobbin \
    "${rps[native]:-}" "${rps[bobbin]:-}"
real_finish
