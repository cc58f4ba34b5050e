#!/usr/bin/env bash
# postgres.sh — PostgreSQL (Debian's, a postmaster forking one backend per
# client) loaded by pgbench's TPC-B-like transactions from 8 clients (native),
# on a Unix socket only. Two rounds, each with a freshly initialised pgbench
# database in one cluster: the server native (the reference), then under bobbin.
# PostgreSQL 15 wakes a backend that waits for a row lock by kill()ing it with
# SIGURG, which the backend blocks and reads through a signalfd in an epoll
# set: bobbin's own preemption signal until bobbin moves it (README). A lost
# wake-up leaves a backend asleep until something else wakes it (its
# deadlock timer, set to an hour here: pgbench's transactions never
# deadlock). The previous library lost them all: 1,200 transactions took 5 s
# with the default 1 s timer, 60 s with a 60 s one, 20 s with this one,
# against 1.6 s now and 1.1 s natively (the table shows it). Checks,
# per round: every transaction processed, none failed, and the database
# consistent, as pgbench's transactions keep it: the sum of the accounts'
# balances equals the sum of the history's deltas, and so do the tellers' and
# the branches' sums; the server ends with status 0 on SIGTERM, and no run
# prints "bobbin:". Reports transactions/s. The server runs as `nobody` when
# this runs as root (PostgreSQL refuses root).
# Full: 8 clients x 400 transactions; --short: 8 x 150. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init postgres "$@"
real_need postgresql postgresql-client
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$pgbin" ] && [ -x "$pgbin/postgres" ] && [ -x "$pgbin/initdb" ] || real_skip "no PostgreSQL server"
real_need_cmd pgbench psql

if [ "$REAL_FORM" = short ]; then
    tx=150
else
    tx=400
fi

# the cluster's own directory, the server's user's
pgdir=$(mktemp -d "${TMPDIR:-/tmp}/bobbin-pg.XXXXXX") || exit 1
trap 'real_cleanup; rm -rf "$pgdir"' EXIT
as_server=()
if [ "$(id -u)" = 0 ]; then
    chown nobody "$pgdir" || real_skip "cannot give $pgdir to nobody"
    as_server=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --)
fi
chmod 700 "$pgdir"
# a copy the server's user can read (ld.so would skip an unreadable one and
# the round would run natively)
cp "$REAL_LIB" "$pgdir/libbobbin.so" && chmod 755 "$pgdir/libbobbin.so" || exit 1
REAL_LIB=$pgdir/libbobbin.so
"${as_server[@]}" "$pgbin/initdb" -D "$pgdir/data" -U postgres --auth=trust --no-sync \
    >"$REAL_WORK/initdb.out" 2>&1 || real_skip "initdb failed: $(tail -n 3 "$REAL_WORK/initdb.out")"

sql() { psql -h "$pgdir" -p 5432 -U postgres -d postgres -X -A -t -q -c "$1"; }

# round LABEL SERVER_MODE
round() {
    local label=$1 smode=$2 i envs=()
    # under bobbin, setpriv (PR_SET_KEEPCAPS, setresuid, capset,
    # setresgid: it aborted in glibc before 2026-11-28) and postgres both
    [ "$smode" = bobbin ] && mapfile -t envs < <(real_bobbin_env)
    real_server_start "srv_$label" native 300 -- env "${envs[@]}" "${as_server[@]}" "$pgbin/postgres" \
        -D "$pgdir/data" -k "$pgdir" -p 5432 -c listen_addresses= -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off -c deadlock_timeout=1h
    for ((i = 0; i < 150; i++)); do
        sql 'select 1' >/dev/null 2>&1 && break
        sleep 0.1
    done
    if ! sql 'select 1' >/dev/null 2>&1; then
        real_fail "postgres ($smode) does not answer on its socket after 15 s"
        real_server_stop "srv_$label" "$smode" KILL
        return 1
    fi
    if [ "$smode" = bobbin ] && ! grep -q libbobbin "/proc/$(real_server_pid "srv_$label")/maps" 2>/dev/null; then
        real_fail "postgres (bobbin): libbobbin.so is not loaded in the server"
    fi
    real_run "init_$label" native 120 -- pgbench -h "$pgdir" -p 5432 -U postgres -i -q -s 1 postgres
    real_run "bench_$label" native 90 -- pgbench -h "$pgdir" -p 5432 -U postgres -n -c 8 -j 2 \
        -t "$tx" postgres
    {
        sql 'select sum(abalance) from pgbench_accounts'
        sql 'select sum(delta) from pgbench_history'
        sql 'select sum(tbalance) from pgbench_tellers'
        sql 'select sum(bbalance) from pgbench_branches'
        sql 'select count(*) from pgbench_history'
    } >"$REAL_WORK/data_$label.out" 2>&1
    real_server_stop "srv_$label" "$smode"
}

round n native
round b bobbin
want=$((8 * tx))
for l in n b; do
    out="$REAL_WORK/bench_$l.out"
    grep -q "number of transactions actually processed: $want/$want" "$out" ||
        real_fail "round $l: $(grep -m1 'actually processed' "$out" || echo 'no result'), $want expected"
    grep -q "number of failed transactions: 0 " "$out" ||
        real_fail "round $l: $(grep -m1 'failed transactions' "$out" || echo 'no failure count')"
    mapfile -t d <"$REAL_WORK/data_$l.out"
    if [ "${#d[@]}" -ne 5 ] || [ "${d[0]}" != "${d[1]}" ] || [ "${d[0]}" != "${d[2]}" ] ||
        [ "${d[0]}" != "${d[3]}" ] || [ "${d[4]}" != "$want" ]; then
        real_fail "round $l: database not consistent (accounts, history, tellers, branches, rows): ${d[*]}"
    fi
done
tps() { sed -n 's/^tps = \([0-9]*\).*/\1/p' "$REAL_WORK/$1.out" | head -n 1; }
real_say "$want transactions per round; balances consistent: accounts = history = tellers = branches"
real_row_raw "postgres + pgbench -c 8 ($want transactions)" "$(real_field bench_n wall_s)" \
    "$(real_field bench_b wall_s)" "tps" "$(tps bench_n)" "$(tps bench_b)" \
    "$(real_field srv_n threads_peak)" "$(real_field srv_b threads_peak)" \
    "$(real_field srv_n rss_peak_kb)" "$(real_field srv_b rss_peak_kb)"
real_finish
