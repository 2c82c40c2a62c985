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

bash tests/s3/venv.sh
venv=target/s3-venv

port=$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
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

export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export AWS_ALLOW_HTTP=true
export BLZ_S3_TEST_BUCKET=blz-test

for _ in $(seq 1 100); do
    if "$venv/bin/python" - <<'PY' 2>/dev/null; then break; fi
import os, urllib.request
urllib.request.urlopen(os.environ["AWS_ENDPOINT_URL"], timeout=1)
PY
    sleep 0.1
done
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
