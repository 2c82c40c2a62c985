#!/usr/bin/env bash
# A short end-to-end session with the `blz` command on a real dataset: create 20 million
# float64 values (a random walk), look at them, append, grow and shrink, attach attributes,
# verify every digest, and round-trip a file through a bloscpack-compatible superchunk.
#
# Run from the repository root:  bash examples/demo.sh  [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/blz-demo.XXXXXX")}
mkdir -p "$work"
# BLZ_PROFILE: the cargo profile to build with (default release; CI passes `dev`, which reuses
# the build tests/all.sh made). Its binaries lie in target/debug for dev and test, else target/<name>.
profile=${BLZ_PROFILE:-release}
echo "== building blz ($profile)"
case $profile in
dev | test)
    # `cargo test` builds the `blz` binary too (the command line's tests run it), with the
    # features `cargo test` resolves; a `cargo build` would resolve other features and
    # recompile the library. After tests/all.sh this is a no-op.
    dir=debug
    cargo test --profile "$profile" --no-run --quiet
    ;;
*)
    dir=$profile
    cargo build --profile "$profile" --quiet --bin blz
    ;;
esac
blz() { echo; echo "\$ blz $*"; "target/$dir/blz" "$@"; }

ds=$work/walk.blz
blz create "$ds" --random-walk 20000000 --seed 42 --overwrite --attr 'units="m"'
blz info "$ds"
blz get "$ds" '::4000000'
blz get "$ds" '-3:'
# Append a slice of itself (exported to .npy) and look at the new end.
blz get "$ds" ':1000000' --out "$work/head.npy"
blz append "$ds" --npy "$work/head.npy"
blz get "$ds" '-2:'
# Grow with the fill value, then shrink back.
blz resize "$ds" 21500000
blz get "$ds" '21499998:'
blz resize "$ds" 21000000
blz attrs "$ds" --set 'source="demo"' --set 'steps=21000000'
blz attrs "$ds"
blz verify "$ds"
blz info "$ds" --json | head -c 600; echo

# A single superchunk file, readable by bloscpack 0.16 as well.
head -c 8000000 /dev/urandom > "$work/noise.bin"
blz pack "$work/noise.bin" "$work/noise.blp" --codec zstd --clevel 3 --checksum sha256 --chunk-size 1M
blz info "$work/noise.blp" | head -20
blz unpack "$work/noise.blp" "$work/noise.out"
cmp "$work/noise.bin" "$work/noise.out" && echo "round trip: identical bytes"
echo
echo "== done; files are in $work"
