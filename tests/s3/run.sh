#!/usr/bin/env bash
# Runs blz's object-store tests against a local S3 server: moto (in-memory S3, from PyPI)
# started on 127.0.0.1 on a free port, stopped when this script exits.
#
#   bash tests/s3/run.sh            the checks below (what .ci/run does)
#   bash tests/s3/run.sh CMD ARGS   CMD with the server up and the AWS_* variables set
#
# Needs Python 3 with venv; pip fetches moto[server] into target/s3-venv on first use.
set -euo pipefail
cd "$(dirname "$0")/../.."

source tests/s3/common.sh

port=$(free_port)
log=$(mktemp)
# Run from a scratch directory: moto's request recorder (benches/compare_s3.py) writes there.
scratch=$(mktemp -d)
moto_server=$(realpath "$venv/bin/moto_server")
(cd "$scratch" && exec "$moto_server" -H 127.0.0.1 -p "$port") >"$log" 2>&1 &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -rf "$log" "$scratch"
}
trap cleanup EXIT

server_env "$port"
if ! wait_up "$server" 100; then
    echo "moto did not come up on port $port:" >&2
    cat "$log" >&2
    exit 1
fi
# The bucket, and the server's conditional writes and ranged reads checked first: the
# commit protocol rests on them.
"$venv/bin/python" tests/s3/check_server.py

if [ "$#" -gt 0 ]; then
    "$@"
    exit
fi

step() { printf '\n== %s ==\n' "$*"; }
step "cargo test: the storage conformance suite and datasets on s3:// (moto)"
cargo test --test storage_conformance --test object_store
if [ -x target/py-venv/bin/python ]; then
    step "pytest python/tests/test_s3.py (moto)"
    target/py-venv/bin/python -m pytest python/tests/test_s3.py -q -p no:cacheprovider
fi
