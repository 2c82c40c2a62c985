#!/usr/bin/env bash
# A short end-to-end session with the `blz` command on a real dataset: create 20 million
# float64 values (a random walk), look at them, query them (reductions over every chunk),
# append, grow and shrink, attach attributes, verify every digest; a table from a CSV file,
# queried by column; and a round trip through a bloscpack-compatible superchunk file.
#
# Run from the repository root:  bash examples/demo.sh  [WORKDIR]
#
# The binary it builds is the command line without its two heavy features (`sql`, which
# compiles DataFusion, and `s3`, an HTTP and TLS stack), in the `quick` profile (Cargo.toml:
# blz itself unoptimised, its dependencies and codecs at opt-level 1): on a fresh 2-core
# machine that build, downloads included, takes a few minutes instead of half an hour. Every
# command below is in it; `blz sql`, s3:// URLs and full speed are in the default release
# build, `cargo install --path cli`.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/blz-demo.XXXXXX")}
mkdir -p "$work"
# BLZ_PROFILE: the cargo profile to build with (default quick; `release` for an optimised
# one; CI passes `dev`, which reuses the build tests/all.sh made, every feature included). Its
# binaries lie in target/debug for dev and test, else target/<name>.
profile=${BLZ_PROFILE:-quick}
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
    cargo build --profile "$profile" --quiet -p blz-cli --no-default-features --bin blz
    ;;
esac
blz() { echo; echo "\$ blz $*"; "target/$dir/blz" "$@"; }

ds=$work/walk.blz
blz create "$ds" --random-walk 20000000 --seed 42 --overwrite --attr 'units="m"'
blz info "$ds"
blz get "$ds" '::4000000'
blz get "$ds" '-3:'
# Queries: reductions run on every core, chunk by chunk (no SQL engine needed).
blz scan "$ds" --op mean
blz scan "$ds" --op max
blz scan "$ds" --op argmax
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

# A table from a CSV file (a column per CSV column, types inferred), read and queried by column.
awk 'BEGIN { print "id,city,temp"; split("oslo lima pune nuuk", c, " ");
             for (i = 0; i < 200000; i++) printf "%d,%s,%.2f\n", i, c[i % 4 + 1], 10 + 15 * sin(i / 5000) }' \
    > "$work/temps.csv"
blz create "$work/temps.blz" --csv "$work/temps.csv" --overwrite
blz info "$work/temps.blz"
blz get "$work/temps.blz" '100000:100004'
blz scan "$work/temps.blz" --column temp --op mean
blz scan "$work/temps.blz" --column temp --op argmin

# A single superchunk file, readable by bloscpack 0.16 as well.
head -c 8000000 /dev/urandom > "$work/noise.bin"
blz pack "$work/noise.bin" "$work/noise.blp" --codec zstd --clevel 3 --checksum sha256 --chunk-size 1M
blz info "$work/noise.blp" | head -20
blz unpack "$work/noise.blp" "$work/noise.out"
cmp "$work/noise.bin" "$work/noise.out" && echo "round trip: identical bytes"
echo
echo "== done; files are in $work"
if [ "$profile" = quick ]; then
    echo "(a build for trying blz: the speeds above are not blz's. The whole command line,"
    echo " optimised, with SQL over tables (blz sql) and s3:// URLs: cargo install --path cli)"
fi
