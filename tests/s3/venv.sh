#!/usr/bin/env bash
# Makes (on first use) target/s3-venv with moto's S3 server, for tests/s3/run.sh; .ci/run
# calls it early (tests/prepare.sh), in the background while cargo builds.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=target/s3-venv
if [ ! -x "$venv/bin/moto_server" ]; then
    mkdir -p target
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet "moto[server]>=5" boto3
fi
