#!/bin/sh
# Seeds the fuzz corpora from the fixtures written by bloscpack and python-blosc.
# Run from anywhere; the corpora (fuzz/corpus/, not committed) are created if missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
fixtures="$here/../tests/fixtures"

mkdir -p "$here/corpus/blosc_chunk" "$here/corpus/superchunk_reader"

for f in "$fixtures"/blosc/*.blosc; do
    cp "$f" "$here/corpus/blosc_chunk/"
done

# superchunk_reader reads its first byte as a knob steering the write plans, then the file.
for f in "$fixtures"/bloscpack/*.blp; do
    name=$(basename "$f" .blp)
    for knob in 00 13 f7; do
        { printf "\\$(printf '%03o' "0x$knob")"; cat "$f"; } \
            > "$here/corpus/superchunk_reader/$name-$knob"
    done
done

echo "seeded: $(ls "$here/corpus/blosc_chunk" | wc -l) blosc_chunk," \
    "$(ls "$here/corpus/superchunk_reader" | wc -l) superchunk_reader inputs"

# The targets build (other) starting inputs themselves (superchunk files carrying an offsets
# digest, valid journals and varlen payloads, meta files of datasets they create, every
# chunk of a layer, the bcolz fixtures' files): run once with BLZ_FUZZ_SEEDS set, each
# writes them into its corpus.
cd "$here/.."
for t in superchunk_reader journal varlen_payload meta_files layer_chunks bcolz_dir object_state where_expr sql_text; do
    mkdir -p "$here/corpus/$t"
    BLZ_FUZZ_SEEDS="$here/corpus/$t" RUSTC_BOOTSTRAP=1 \
        cargo fuzz run "$t" "$here/corpus/$t" -- -runs=0 >/dev/null 2>&1
    echo "seeded: $(ls "$here/corpus/$t" | wc -l) $t inputs"
done
