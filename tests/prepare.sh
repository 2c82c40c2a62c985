#!/usr/bin/env bash
# Makes the Python environments the suite needs, side by side: target/py-venv
# (tests/py-env.sh), target/s3-venv with moto (tests/s3/venv.sh) and the peers' venv
# (../shared/peers/setup.sh, for tests/interop/run.sh). Downloads and unpacking, mostly:
# .ci/run starts this in the background while cargo builds, so that the steps that use the
# environments find them made. Each step would make its own on first use anyway; a failure
# here is reported and left to that step.
set -uo pipefail
cd "$(dirname "$0")/.."
setup=${PEERS_SETUP:-../shared/peers/setup.sh}
pids=()
bash tests/py-env.sh & pids+=($!)
bash tests/s3/venv.sh & pids+=($!)
if [ -x "$setup" ]; then "$setup" >/dev/null & pids+=($!); fi
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
