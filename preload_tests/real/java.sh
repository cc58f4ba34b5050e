#!/usr/bin/env bash
# java.sh — the JVM (OpenJDK, default-jdk-headless) running java/JThreads.java
# natively and under bobbin: platform threads that meet at a CyclicBarrier round
# after round with a 64 MiB heap (so the collector stops every thread at
# safepoints again and again), a bounded buffer with wait/notifyAll, and a pool of
# 8 threads. The JVM brings its own threads (compiler, collector, signal
# dispatcher) and its own stack guard pages, reads its threads' stack bounds with
# pthread_getattr_np and suspends threads with signals. The program checks every
# result itself (stdout "ok"); both runs must print the same stdout and exit 0.
# Metric: thread rounds per second (THREADS x ROUNDS / the program's own time).
# Full: 4,000 threads x 10 rounds; --short: 1,000 x 5. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init java "$@"
real_need default-jdk-headless
real_need_cmd java javac
threads=4000 rounds=10
[ "$REAL_FORM" = short ] && threads=1000 rounds=5

src=$(dirname "${BASH_SOURCE[0]}")/java/JThreads.java
if ! javac -d "$REAL_WORK" "$src" 2>"$REAL_WORK/javac.err"; then
    real_fail "javac: $(head -n 5 "$REAL_WORK/javac.err")"
    real_finish
fi
real_selfchecked j 180 JThreads 'FAIL|Exception|Error' -- \
    java -Xmx64m -cp "$REAL_WORK" JThreads "$threads" "$rounds"
jtime() { sed -n 's/^time \([0-9.]*\)$/\1/p' "$REAL_WORK/$1.err"; }
real_row "java JThreads ($threads thr x $rounds rounds)" "rounds/s" j_native j_bobbin \
    "$(real_rate $((threads * rounds)) "$(jtime j_native)")" \
    "$(real_rate $((threads * rounds)) "$(jtime j_bobbin)")"
real_finish
