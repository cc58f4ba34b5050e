#!/usr/bin/env bash
# chromium.sh — Debian's Chromium, headless, prints the DOM of a page whose
# script computes a sum and adds 50 rows (--dump-dom), natively and under
# bobbin: the two DOMs must be identical. Twice: in Chromium's default mode,
# whose zygote process checks that it has one thread (the link count of
# /proc/self/task) before it forks its children, and with --no-zygote. As
# root it needs --no-sandbox, given in both modes; --disable-gpu.
# Chromium brings its own malloc (PartitionAlloc), which glibc's
# pthread_create uses for each new thread's DTV, and registers fork handlers
# before bobbin could (README: a program's own malloc; fork handlers).
# Under the library of 2026-11-27: --no-zygote hung in most runs; the zygote
# mode aborted ("Did not receive ping from zygote child") until 2026-11-28.
# Full: at the -p given and at 1; --short: at the -p given. Options: see
# common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init chromium "$@"
real_need chromium
real_need_cmd chromium

page=$REAL_WORK/page.html
cat >"$page" <<'EOF'
<html><body><h1 id=t>start</h1><script>
let s = 0;
for (let i = 0; i < 200000; i++) s = (s * 31 + i) % 1000003;
document.getElementById('t').textContent = 'sum ' + s;
for (let i = 0; i < 50; i++) {
  const p = document.createElement('p');
  p.textContent = 'row ' + i;
  document.body.appendChild(p);
}
</script></body></html>
EOF

p0=$REAL_P
ps=("$REAL_P")
[ "$REAL_FORM" = full ] && [ "$REAL_P" != 1 ] && ps+=(1)
for p in "${ps[@]}"; do
    REAL_P=$p
    for z in zygote nozygote; do
        flags=()
        [ "$z" = nozygote ] && flags=(--no-zygote)
        for mode in native bobbin; do
            l=${z}${p}_$mode
            real_run "$l" "$mode" 120 -- chromium --headless=new --no-sandbox --disable-gpu \
                "${flags[@]}" --user-data-dir="$REAL_WORK/profile_$l" --dump-dom "file://$page"
            grep -q '<h1 id="t">sum ' "$REAL_WORK/$l.out" ||
                real_fail "$l: no computed sum in the DOM: $(head -c 300 "$REAL_WORK/$l.out")"
        done
        real_same "${z}${p}_native" "${z}${p}_bobbin" "DOM ($z, P=$p)"
        real_row "chromium --dump-dom ($z, P=$p)" "-" "${z}${p}_native" "${z}${p}_bobbin" "-" "-"
    done
done
REAL_P=$p0
real_finish
