#!/usr/bin/env bash
# Runs a command against a second local S3 server: s3s-fs (the s3s project's file-system
# backed S3 server, Rust, on hyper), started on 127.0.0.1 on a free port with a scratch
# directory as its root, stopped and removed when this script exits. Mirrors the
# "CMD with the server up" mode of tests/s3/run.sh:
#
#   bash tests/s3/run_s3s.sh CMD ARGS   CMD with the server up and the AWS_* variables set
#
# Install the server once (0.14.1: later versions need a newer rustc than 1.95):
#   cargo install s3s-fs --version 0.14.1 --features binary --root /work/tools/s3s
# S3S_FS: the server's binary (default: /work/tools/s3s/bin/s3s-fs, else s3s-fs on PATH).
# S3S_ROOT: the directory the objects are stored in (default: a temporary directory,
#   removed on exit; a bucket is a subdirectory, an object a file).
# S3S_NODELAY=1: run the server with TCP_NODELAY on the connections it accepts (builds
#   tests/s3/nodelay.c with cc into target/ and preloads it). s3s-fs 0.14.1 leaves Nagle's
#   algorithm on: on a reused connection every answer's last bytes then wait about 40 ms for
#   the client's delayed ACK, which no S3 service does; every client pays it per request.
# Needs target/s3-venv (tests/s3/venv.sh) for boto3, which creates the bucket and checks the
# server's conditional writes and ranged reads (tests/s3/check_server.py).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$#" -eq 0 ]; then
    echo "usage: bash tests/s3/run_s3s.sh CMD [ARGS...]" >&2
    exit 2
fi

bin=${S3S_FS:-/work/tools/s3s/bin/s3s-fs}
if [ ! -x "$bin" ]; then
    bin=$(command -v s3s-fs || true)
fi
if [ -z "$bin" ]; then
    echo "s3s-fs not found: cargo install s3s-fs --version 0.14.1 --features binary --root /work/tools/s3s" >&2
    exit 1
fi

source tests/s3/common.sh

port=$(free_port)
log=$(mktemp)
if [ -n "${S3S_ROOT:-}" ]; then
    root=$S3S_ROOT
    own_root=0
    mkdir -p "$root"
else
    root=$(mktemp -d)
    own_root=1
fi
preload=
if [ "${S3S_NODELAY:-0}" = 1 ]; then
    mkdir -p target
    cc -shared -fPIC -O2 -o target/libnodelay.so tests/s3/nodelay.c -ldl
    preload=$PWD/target/libnodelay.so
fi
# RUST_LOG unset: s3s-fs logs nothing per request (its tracing would cost time).
env -u RUST_LOG ${preload:+LD_PRELOAD="$preload"} "$bin" --host 127.0.0.1 --port "$port" \
    --access-key testing --secret-key testing "$root" >"$log" 2>&1 &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -f "$log"
    if [ "$own_root" = 1 ]; then rm -rf "$root"; fi
}
trap cleanup EXIT

server_env "$port"
if ! wait_up "$server" 100; then
    echo "s3s-fs did not come up on port $port:" >&2
    cat "$log" >&2
    exit 1
fi
# The bucket (a PUT bucket request: a directory under the root), and the server's
# conditional writes and ranged reads, checked first: blz's commit protocol rests on them.
"$venv/bin/python" tests/s3/check_server.py

"$@"
