#!/usr/bin/env bash
# memcached.sh — memcached -t 4 on 127.0.0.1 (a port nobody uses), loaded by
# memc_client (memc_client.c: one thread and one connection per client thread, sets
# then multi-gets of every key, each value checked byte for byte, then the keys of
# another thread). Three rounds, each with a fresh server:
#   1. server native,        client native     (the reference)
#   2. server under bobbin,  client native     (memcached's libevent threads as Gs)
#   3. server native,        client under bobbin
# Every client run must exit 0 with the same totals on stdout, every server must
# end with status 0 on SIGTERM, and no run may print "bobbin:". Reports the client's
# ops/s and the server's peak OS threads and RSS natively and under bobbin.
# Full: 64 client threads x 4000 keys; --short: 32 x 1000. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init memcached "$@"
real_need memcached
real_need_cmd memcached
client=${REAL_MEMC_CLIENT:-$BB_BUILD/preload_tests/real/memc_client}
if [ ! -x "$client" ]; then
    bb_build_targets preload_tests/real/memc_client ||
        { echo "FAIL memcached: cannot build memc_client"; exit 1; }
fi

if [ "$REAL_FORM" = short ]; then
    threads=32 keys=1000
else
    threads=64 keys=4000
fi
user=()
[ "$(id -u)" = 0 ] && user=(-u nobody)

# round LABEL SERVER_MODE CLIENT_MODE
round() {
    local label=$1 smode=$2 cmode=$3 port
    port=$(real_free_port)
    real_server_start "srv_$label" "$smode" 300 -- memcached -t 4 -l 127.0.0.1 -p "$port" -U 0 \
        -m 512 -c 1024 "${user[@]}"
    if ! real_wait_port "$port" 10; then
        real_fail "memcached ($smode) does not listen on 127.0.0.1:$port after 10 s"
        real_server_stop "srv_$label" "$smode" KILL
        return 1
    fi
    real_run "cl_$label" "$cmode" 120 -- "$client" "$port" "$threads" "$keys"
    real_server_stop "srv_$label" "$smode"
}

ops() { sed -n 's/^ops\/s=\([0-9]*\).*/\1/p' "$REAL_WORK/$1.err"; }

round nn native native
round bn bobbin native
round nb native bobbin
expect="sets=$((threads * keys)) gets=$((2 * threads * keys)) verified=$((2 * threads * keys))"
for l in nn bn nb; do
    got=$(cat "$REAL_WORK/cl_$l.out")
    [ "$got" = "$expect" ] || real_fail "client round $l printed '$got', expected '$expect'"
done
real_say "client: $expect"

# the server row: the client's wall time (the server's own is its whole life), the
# server's threads and RSS
real_row_raw "memcached -t 4 (server)" "$(real_field cl_nn wall_s)" "$(real_field cl_bn wall_s)" \
    "client ops/s" "$(ops cl_nn)" "$(ops cl_bn)" "$(real_field srv_nn threads_peak)" \
    "$(real_field srv_bn threads_peak)" "$(real_field srv_nn rss_peak_kb)" "$(real_field srv_bn rss_peak_kb)"
real_row "memc_client $threads thr x $keys keys (client)" "ops/s" cl_nn cl_nb "$(ops cl_nn)" "$(ops cl_nb)"
real_finish
