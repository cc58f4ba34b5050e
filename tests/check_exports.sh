#!/bin/sh
# check_exports.sh LIB MAP — the dynamic symbols LIB defines must be exactly
# the names in the `global:` part of the version script MAP (STYLE.md habit 1):
# nothing of the runtime leaks out, and nothing the map promises is missing.
set -eu
lib=$1
map=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -r "$lib" ] || { echo "check_exports: no library at $lib"; exit 1; }
[ -r "$map" ] || { echo "check_exports: no map at $map"; exit 1; }

# defined dynamic symbols, without any @VERSION suffix
nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' |
	sort -u >"$tmp/exported"

# names between `global:` and `local:`: the map on one line, /* */ and #
# comments stripped, then the global part split at the semicolons
sed 's/#.*//' "$map" | tr '\n' ' ' |
	sed -e 's:/\*\([^*]\|\*[^/]\)*\*/: :g' |
	sed -n 's/.*global:\(.*\)local:.*/\1/p' |
	tr ';' '\n' | tr -d ' \t' | grep -v '^$' | sort -u >"$tmp/expected" || true

if [ ! -s "$tmp/expected" ]; then
	echo "check_exports: no global: names found in $map"
	exit 1
fi
if ! diff -u "$tmp/expected" "$tmp/exported" >"$tmp/diff"; then
	echo "check_exports: $lib exports differ from $map"
	echo "(lines with - are in the map but not exported, + exported but not in the map)"
	cat "$tmp/diff"
	exit 1
fi
echo "check_exports: $(wc -l <"$tmp/exported") symbols, as in the map"
