#!/usr/bin/env bash
# Runs peer_check.py with the peers' venv (created on first use by shared/peers/setup.sh,
# which sits beside the repository). Usage: tests/interop/peer_check.sh verify|write DIR
# PEERS_SETUP overrides the path of setup.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=$("${PEERS_SETUP:-$root/../shared/peers/setup.sh}")
exec "$PY" "$root/tests/interop/peer_check.py" "$@"
