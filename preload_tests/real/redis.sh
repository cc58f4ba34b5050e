#!/usr/bin/env bash
# redis.sh — redis-server with 4 I/O threads (--io-threads 4, reads too) on
# 127.0.0.1, loaded by redis-benchmark (native, 50 connections) with SET, GET,
# INCR, LPUSH and LPOP, then checked with redis-cli. Two rounds, each with a
# fresh server: native (the reference) and under bobbin. redis's I/O threads
# spin on shared counters waiting for the main thread, which waits for them in
# turn: with more spinning threads than CPUs, every wait is a time slice.
# Each round must leave the same data behind: the INCR counter equal to the
# number of requests, the list empty after as many LPOPs as LPUSHes, and the
# SET value and key count the native round left; every server must end with status 0 on SIGTERM, and no
# run may print "bobbin:". Reports requests/s (SET and GET) and the server's
# peak OS threads and RSS.
# Full: 20,000 requests per command; --short: 4,000. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init redis "$@"
real_need redis-server redis-tools
real_need_cmd redis-server redis-benchmark redis-cli

if [ "$REAL_FORM" = short ]; then
    n=4000
else
    n=20000
fi

# round LABEL SERVER_MODE
round() {
    local label=$1 smode=$2 port
    port=$(real_free_port)
    real_server_start "srv_$label" "$smode" 300 -- redis-server --port "$port" \
        --bind 127.0.0.1 --save '' --appendonly no --io-threads 4 --io-threads-do-reads yes \
        --daemonize no --loglevel warning
    if ! real_wait_port "$port" 10; then
        real_fail "redis-server ($smode) does not listen on 127.0.0.1:$port after 10 s"
        real_server_stop "srv_$label" "$smode" KILL
        return 1
    fi
    real_run "bench_$label" native 240 -- redis-benchmark -p "$port" -n "$n" -c 50 \
        -t set,get,incr,lpush,lpop --csv
    {
        redis-cli -p "$port" get counter:__rand_int__
        redis-cli -p "$port" llen mylist
        redis-cli -p "$port" get key:__rand_int__
        redis-cli -p "$port" dbsize
    } >"$REAL_WORK/data_$label.out" 2>&1
    real_server_stop "srv_$label" "$smode"
}

# rps LABEL TEST: requests/s of one command from redis-benchmark's CSV
rps() { sed -n "s/^\"$2\",\"\\([0-9.]*\\)\".*/\\1/p" "$REAL_WORK/$1.out" | cut -d. -f1; }

round n native
round b bobbin
# the counter and the list are known; the SET value and the key count are
# redis-benchmark's own: the bobbin round must leave what the native one left
for l in n b; do
    got=$(head -n 2 "$REAL_WORK/data_$l.out" | tr '\n' ' ')
    [ "$got" = "$n 0 " ] || real_fail "round $l: counter and list length '$got', expected '$n 0 '"
done
real_same data_n data_b "the data redis-benchmark left"
real_say "data: counter=$n, list empty, $(sed -n 3p "$REAL_WORK/data_n.out") from GET, $(sed -n 4p "$REAL_WORK/data_n.out") keys"
for t in SET GET INCR; do
    [ -n "$(rps bench_b $t)" ] || real_fail "redis-benchmark printed no $t result under bobbin"
done

real_row_raw "redis-server --io-threads 4 (SET)" "$(real_field bench_n wall_s)" \
    "$(real_field bench_b wall_s)" "SET req/s" "$(rps bench_n SET)" "$(rps bench_b SET)" \
    "$(real_field srv_n threads_peak)" "$(real_field srv_b threads_peak)" \
    "$(real_field srv_n rss_peak_kb)" "$(real_field srv_b rss_peak_kb)"
real_row_raw "redis-server --io-threads 4 (GET)" "-" "-" "GET req/s" "$(rps bench_n GET)" \
    "$(rps bench_b GET)" "-" "-" "-" "-"
real_finish
