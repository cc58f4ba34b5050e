#!/usr/bin/env bash
# pigz.sh — pigz (parallel gzip, one pthread per block) compresses a generated file
# with -p 8 natively and under bobbin: the .gz bytes must be identical, and each
# run's .gz must decompress (pigz -d, its reader/writer/check threads) to the input.
# Full: 48 MiB; --short: 20 MiB. Options: see common.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
real_init pigz "$@"
real_need pigz
real_need_cmd pigz
mib=48
[ "$REAL_FORM" = short ] && mib=20
real_roundtrip pigz "$mib" 120 "-p 8 -6" "-d -p 8"
real_finish
