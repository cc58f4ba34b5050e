#!/usr/bin/env bash
# zstd.sh — zstd -T4 (its worker pool of pthreads) compresses a generated file
# natively and under bobbin: the .zst bytes must be identical, and each run's .zst
# must decompress to the input. Full: 48 MiB; --short: 20 MiB. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init zstd "$@"
real_need zstd
real_need_cmd zstd
mib=48
[ "$REAL_FORM" = short ] && mib=20
real_roundtrip zstd "$mib" 120 "-q -T4 -9" "-q -d -T4"
real_finish
