#!/usr/bin/env bash
# Live interop between blz and the real peers (bloscpack 0.16, python-blosc 1.11, bcolz 1.13):
#   1. blz writes files (examples/interop.rs `write`), the peers read them
#      (peer_check.py verify);
#   2. the peers write files (peer_check.py write), blz reads them (`interop read`);
#   3. blz reads back its own files too;
#   4. bcolz writes carrays and a ctable (bcolz_check.py write), `blz import` imports them and
#      `blz get` exports them as .npy, which must equal what bcolz reads (bcolz_check.py compare);
#   5. numpy writes record .npy files, blz makes tables of them, appends more and exports the
#      columns, which must equal the fields numpy reads (records_check.py).
# Exits non-zero if any step fails. The peers' venv comes from ../shared/peers/setup.sh beside
# the repository (override with PEERS_SETUP=/path/to/setup.sh). KEEP=1 keeps the temporary
# directories.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
setup=${PEERS_SETUP:-$root/../shared/peers/setup.sh}
if [[ ! -x $setup ]]; then
  echo "run.sh: peers setup script not found at $setup (set PEERS_SETUP)" >&2
  exit 2
fi
PY=$("$setup") || { echo "run.sh: $setup failed" >&2; exit 2; }
checker=$root/tests/interop/peer_check.py

# BLZ_PROFILE: the cargo profile (default release; CI passes `dev`, sharing tests/all.sh's build).
profile=${BLZ_PROFILE:-release}
case $profile in dev | test) dir=debug ;; *) dir=$profile ;; esac
echo "== building the interop example and the blz command ($profile)"
case $profile in
# `cargo test` builds the examples and the `blz` binary with the features it resolves (a
# `cargo build` would resolve others and recompile the library): a no-op after tests/all.sh.
dev | test) (cd "$root" && cargo test --profile "$profile" --no-run --quiet) || exit 2 ;;
*) (cd "$root" && cargo build --profile "$profile" --quiet --example interop --bin blz) || exit 2 ;;
esac
target=$(cd "$root" && cargo metadata --format-version 1 --no-deps \
  | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])') || exit 2
interop=$target/$dir/examples/interop
[[ -x $interop ]] || { echo "run.sh: $interop was not built" >&2; exit 2; }
blz=$target/$dir/blz
[[ -x $blz ]] || { echo "run.sh: $blz was not built" >&2; exit 2; }
bcolz_checker=$root/tests/interop/bcolz_check.py

work=$(mktemp -d "${TMPDIR:-/tmp}/blz-interop.XXXXXX")
if [[ ${KEEP:-0} == 1 ]]; then
  echo "== keeping files in $work"
else
  trap 'rm -rf "$work"' EXIT
fi

failed=()
step() {
  local name=$1
  shift
  echo "== $name"
  if "$@"; then
    echo "-- $name: passed"
  else
    echo "-- $name: FAILED (exit $?)"
    failed+=("$name")
  fi
}

step "blz writes" "$interop" write "$work/blz"
step "bloscpack and python-blosc read blz's files" "$PY" "$checker" verify "$work/blz"
step "bloscpack and python-blosc write" "$PY" "$checker" write "$work/peers"
step "blz reads the peers' files" "$interop" read "$work/peers"
step "blz reads its own files" "$interop" read "$work/blz"

# bcolz -> blz: bcolz writes carrays and a ctable, `blz import` imports them, `blz get`
# exports them as .npy, and the checker compares those with what bcolz reads.
import_bcolz() {
  local dir=$1 kind name
  mkdir -p "$dir/out"
  while read -r kind name; do
    "$blz" import "$dir/$name" "$dir/$name.blz" || return 1
    if [[ $kind == ctable ]]; then
      "$blz" get "$dir/$name.blz" --out-dir "$dir/out/$name" >/dev/null || return 1
    else
      "$blz" get "$dir/$name.blz" --out "$dir/out/$name.npy" >/dev/null || return 1
    fi
  done < <("$PY" "$bcolz_checker" list "$dir")
}
# A dataset's superchunk files carry blz's identity in their metadata section (see
# spec/blpk.md): bloscpack must still unpack each one, and its bytes be the dataset's.
dataset_files() {
  local ds=$1/arange.blz
  "$blz" create "$ds" --arange 100000 --chunkshape 1000 --superchunk-size 8 >/dev/null || return 1
  "$PY" - "$ds" <<'PYEOF'
import glob, io, os, sys, tempfile
import bloscpack, numpy as np
ds = sys.argv[1]
files = sorted(glob.glob(os.path.join(ds, "data", "__*__.bin")), key=lambda p: int(os.path.basename(p)[2:-6]))
got = bytearray()
with tempfile.TemporaryDirectory() as tmp:
    for i, f in enumerate(files):
        out = os.path.join(tmp, f"{i}.raw")
        bloscpack.unpack_file_from_file(f, out)
        with open(out, "rb") as fh:
            got += fh.read()
want = np.arange(100000, dtype="<i8").tobytes()
assert bytes(got) == want, "bloscpack unpacked other bytes"
print(f"bloscpack unpacked {len(files)} superchunk files of a blz dataset: identical")
PYEOF
}
step "bloscpack reads a dataset's superchunk files" dataset_files "$work"

step "bcolz writes" "$PY" "$bcolz_checker" write "$work/bcolz"
step "blz imports bcolz's carrays and ctable" import_bcolz "$work/bcolz"
step "blz's imports hold what bcolz reads" "$PY" "$bcolz_checker" compare "$work/bcolz"

# numpy -> blz: numpy writes record (structured) .npy files, `blz create --npy` makes tables
# of them, `blz append --npy` adds records, `blz get --out-dir` exports every column, and the
# checker compares those (and the whole table exported as records) with the fields numpy reads.
records_checker=$root/tests/interop/records_check.py
import_records() {
  local dir=$1 name more
  while read -r name more; do
    "$blz" create "$dir/$name.blz" --npy "$dir/$name.npy" >/dev/null || return 1
    "$blz" append "$dir/$name.blz" --npy "$dir/$more.npy" >/dev/null || return 1
    "$blz" verify "$dir/$name.blz" >/dev/null || return 1
    "$blz" get "$dir/$name.blz" --out-dir "$dir/out/$name" >/dev/null || return 1
    "$blz" get "$dir/$name.blz" --out "$dir/out/$name.records.npy" >/dev/null || return 1
  done < <("$PY" "$records_checker" list "$dir")
}
step "numpy writes record .npy files" "$PY" "$records_checker" write "$work/records"
step "blz makes tables of them and appends" import_records "$work/records"
step "blz's tables hold the fields numpy reads" "$PY" "$records_checker" compare "$work/records"

if ((${#failed[@]})); then
  printf 'interop FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "interop passed: blz -> peers, peers -> blz, bcolz -> blz import, numpy records -> blz tables"
