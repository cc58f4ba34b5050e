#!/usr/bin/env bash
# pbzip2.sh — pbzip2 (parallel bzip2: a reader thread, 8 compressor threads that
# each work on a 900 KB block for a long stretch, a writer thread, all meeting
# on mutexes and condition variables) compresses a generated file natively and
# under bobbin: the .bz2 bytes must be identical, and each run's .bz2 must
# decompress (pbzip2 -d -p8) to the input. With 8 compressors on 2 Ps every
# P is busy while others wait, so the throughput shows what bobbin's time
# slices cost a program that computes (see runtime/sysmon.c, slice_for).
# Full: 32 MiB; --short: 12 MiB. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init pbzip2 "$@"
real_need pbzip2
real_need_cmd pbzip2
mib=32
[ "$REAL_FORM" = short ] && mib=12
real_roundtrip pbzip2 "$mib" 120 "-p8 -6" "-d -p8"
real_finish
