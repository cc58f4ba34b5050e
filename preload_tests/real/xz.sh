#!/usr/bin/env bash
# xz.sh — xz -T4 (liblzma's multi-threaded block encoder and decoder) compresses a
# generated file natively and under bobbin: the .xz bytes must be identical, and
# each run's .xz must decompress (xz -d -T4, threaded) to the input.
# Full: 24 MiB at -1; --short: 8 MiB at -0. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init xz "$@"
real_need xz-utils
real_need_cmd xz
if [ "$REAL_FORM" = short ]; then
    real_roundtrip xz 8 120 "-T4 -0" "-d -T4"
else
    real_roundtrip xz 24 300 "-T4 -1" "-d -T4"
fi
real_finish
