#!/usr/bin/env bash
# Live interop between blz and the real peers (bloscpack 0.16, python-blosc 1.11):
#   1. blz writes files (examples/interop.rs `write`), the peers read them
#      (peer_check.py verify);
#   2. the peers write files (peer_check.py write), blz reads them (`interop read`);
#   3. blz reads back its own files too.
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

echo "== building the interop example (release)"
(cd "$root" && cargo build --release --quiet --example interop) || exit 2
target=$(cd "$root" && cargo metadata --format-version 1 --no-deps \
  | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])') || exit 2
interop=$target/release/examples/interop
[[ -x $interop ]] || { echo "run.sh: $interop was not built" >&2; exit 2; }

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

if ((${#failed[@]})); then
  printf 'interop FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "interop passed: blz -> peers and peers -> blz"
