#!/usr/bin/env bash
# apache.sh — apache2 with the worker MPM (4 child processes x 25 threads, each
# keep-alive connection held by one thread blocked in read) on 127.0.0.1 (a port
# nobody uses), from a private configuration under build/real-apache/ (never /etc),
# serving one 4 KiB static file to `wrk -t2 -c50`, natively and under bobbin (the
# parent preloaded; the children it forks inherit the preload).
# Passes when, in both runs: wrk sees no non-2xx response and no socket error; the
# access log holds only "200 4096" lines, at least as many as wrk counted (and at
# most 50 more: answers in flight when wrk stopped); the error log shows no child
# dying of a signal, no child that "did not exit" on the parent's SIGTERM (AH00045,
# natively they all end at once), no [error]/[crit]/[alert]/[emerg] and no
# "bobbin:"; apache exits 0 on SIGTERM. Reports requests/s, and the peak OS threads and RSS summed
# over apache's processes. Full: wrk -d3s; --short: -d2s. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init apache "$@"
real_need apache2 wrk
real_need_cmd wrk
apache=$(command -v apache2 || echo /usr/sbin/apache2)
[ -x "$apache" ] || real_skip "no apache2 binary"
mods=/usr/lib/apache2/modules
[ -f "$mods/mod_mpm_worker.so" ] || real_skip "no $mods/mod_mpm_worker.so"
secs=3
[ "$REAL_FORM" = short ] && secs=2
conns=50

root=$BB_BUILD/real-apache
rm -rf "$root"
mkdir -p "$root/htdocs" || real_skip "cannot write $root"
chmod 755 "$root" "$root/htdocs"
head -c 4096 /dev/urandom >"$root/htdocs/file.bin"
chmod 644 "$root/htdocs/file.bin"

# config MODE PORT: a private httpd.conf for one run; logs in $root/MODE
config() {
    local mode=$1 port=$2 logs=$root/$1
    mkdir -p "$logs"
    {
        echo "ServerRoot $root"
        echo "PidFile $logs/httpd.pid"
        echo "LoadModule mpm_worker_module $mods/mod_mpm_worker.so"
        echo "LoadModule authz_core_module $mods/mod_authz_core.so"
        echo "LoadModule mime_module $mods/mod_mime.so"
        echo "LoadModule log_config_module $mods/mod_log_config.so"
        echo "ServerName 127.0.0.1"
        echo "Listen 127.0.0.1:$port"
        if [ "$(id -u)" = 0 ]; then
            echo "User www-data"
            echo "Group www-data"
        fi
        cat <<CONF
TypesConfig /etc/mime.types
DocumentRoot $root/htdocs
ErrorLog $logs/error.log
LogLevel warn
LogFormat "%>s %B" short
CustomLog $logs/access.log short
StartServers 4
ServerLimit 4
ThreadsPerChild 25
MaxRequestWorkers 100
MinSpareThreads 25
MaxSpareThreads 100
MaxConnectionsPerChild 0
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 15
<Directory />
  Require all granted
</Directory>
CONF
    } >"$logs/httpd.conf"
}
# mod_log_config is built into Debian's apache2: load it only when it is a module
"$apache" -l 2>/dev/null | grep -q mod_log_config.c && nolog=1 || nolog=0
[ "$nolog" = 1 ] || [ -f "$mods/mod_log_config.so" ] || real_skip "no mod_log_config"

declare -A thr rss rps
for mode in native bobbin; do
    port=$(real_free_port)
    config "$mode" "$port"
    [ "$nolog" = 1 ] && sed -i '/log_config_module/d' "$root/$mode/httpd.conf"
    logs=$root/$mode
    real_server_start "ap_$mode" "$mode" $((secs + 60)) -- "$apache" -DFOREGROUND -f "$logs/httpd.conf"
    real_sample_tree "${REAL_SERVER_PID:-0}" "$REAL_WORK/ap_$mode.tree"
    if ! real_wait_port "$port" 15; then
        real_fail "apache ($mode) does not listen on 127.0.0.1:$port after 15 s: $(tail -n 5 "$logs/error.log" 2>/dev/null)"
        real_server_stop "ap_$mode" "$mode" KILL
        continue
    fi
    sleep 0.5   # its four children start
    timeout $((secs + 30)) wrk -t2 -c$conns -d${secs}s "http://127.0.0.1:$port/file.bin" \
        >"$REAL_WORK/wrk_$mode.txt" 2>&1 || real_fail "wrk against apache ($mode) failed"
    real_server_stop "ap_$mode" "$mode"
    wait "$REAL_SAMPLER_PID" 2>/dev/null
    read -r thr[$mode] rss[$mode] <"$REAL_WORK/ap_$mode.tree"
    read -r req non2xx errs r <<<"$(real_wrk_fields "$REAL_WORK/wrk_$mode.txt")"
    rps[$mode]=$r
    real_say "$mode: wrk: $req requests, $non2xx non-2xx, $errs socket errors, $r requests/s"
    [ "$req" -gt 0 ] || real_fail "wrk ($mode) completed no request: $(cat "$REAL_WORK/wrk_$mode.txt")"
    [ "$non2xx" -eq 0 ] || real_fail "wrk ($mode): $non2xx non-2xx responses"
    [ "$errs" -eq 0 ] || real_fail "wrk ($mode): socket errors: $(grep 'Socket errors' "$REAL_WORK/wrk_$mode.txt")"
    logged=$(grep -c . "$logs/access.log" 2>/dev/null)
    good=$(grep -cx '200 4096' "$logs/access.log" 2>/dev/null)
    if [ "${logged:-0}" -ne "${good:-0}" ]; then
        real_fail "apache ($mode): access log has $((logged - good)) answer(s) other than '200 4096': $(grep -vx '200 4096' "$logs/access.log" | sort | uniq -c | head -n 5)"
    fi
    if [ "${good:-0}" -lt "$req" ] || [ "${good:-0}" -gt $((req + conns)) ]; then
        real_fail "apache ($mode): access log counts ${good:-0} answers, wrk $req"
    fi
    bad='exit signal|did not exit|SIGKILL|\[[a-z_]+:(error|crit|alert|emerg)\]|^bobbin:'
    if grep -Eq "$bad" "$logs/error.log"; then
        real_fail "apache ($mode) error log: $(grep -E -m5 "$bad" "$logs/error.log")"
        cp "$logs/error.log" "$BB_BUILD/real-results/apache.$mode.error.log" 2>/dev/null
    fi
done

real_row_raw "apache2 worker 4x25, wrk -c$conns -d${secs}s" "$(real_field ap_native wall_s)" \
    "$(real_field ap_bobbin wall_s)" "requests/s" "${rps[native]:-}" "${rps[bobbin]:-}" \
    "${thr[native]:-}" "${thr[bobbin]:-}" "${rss[native]:-}" "${rss[bobbin]:-}"
real_finish
