#!/bin/sh
# Rewrite tests/data/profiles/expected/* (see README).  Usage: regen.sh MEMSNAP
set -eu
memsnap=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/prof" "$root/usr/lib/x86_64-linux-gnu"
cp "$here/root/prof/prof-chain" "$root/prof/"
cp /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 "$root/usr/lib/x86_64-linux-gnu/"
mkdir -p "$here/expected"
cd "$here"
r() { "$memsnap" report --root "$root" -q "$@"; }
r chain-3.heap > expected/chain-3.txt
r chain-3.heap --lines > expected/chain-3-lines.txt
r chain-3.heap --objects > expected/chain-3-objects.txt
r chain-3.heap --format folded > expected/chain-3.folded
r chain-3.heap --format json --lines > expected/chain-3.json
r chain-10.heap --base chain-3.heap > expected/diff-10-3.txt
r chain-10.heap --base chain-3.heap --format folded > expected/diff-10-3.folded
