#!/usr/bin/env bash
# The whole test suite, Rust and Python, in one command: `bash tests/all.sh`.
#
# Runs `cargo test`, then builds the Python package's wheel (`maturin build --profile dev`:
# one abi3 wheel for CPython >= 3.11, into target/wheels, in cargo's dev profile, which has
# the test profile's settings (Cargo.toml), in the workspace's target/, so that it reuses the
# dependencies `cargo test` compiled: they compile once), installs that wheel into a virtual environment under target/py-venv (made on first
# use, reused after) with numpy, pytest, hypothesis, pandas, pyarrow, polars, duckdb, dask,
# distributed and xarray, and runs its tests. The install and the tests run with a PATH that
# has no cargo or rustc: the wheel must install and work without Rust. Needs only the Rust
# toolchain and Python 3 (>= 3.11) with `venv`; pip fetches the rest from PyPI.
#
# BLZ_PROFILE: the cargo profile of the wheel (default dev; `release` builds the optimised
#   wheel a user installs, at the cost of a second build of every dependency).
# BLZ_PYTHON: the interpreter to make the venv with (default python3).
# BLZ_SKIP_CARGO_TEST=1: only the Python half (when `cargo test` just ran).
# BLZ_NO_S3=1: no local S3 server (the object-store tests then skip, saying so).
# Extra arguments go to pytest (e.g. `bash tests/all.sh -x -k table`).
set -euo pipefail
cd "$(dirname "$0")/.."

# The object-store tests need an S3 server: unless one is named (AWS_ENDPOINT_URL) or
# BLZ_NO_S3=1, the whole suite runs with a local one up (moto, tests/s3/run.sh), so that
# they run here rather than skip.
if [ -z "${AWS_ENDPOINT_URL:-}" ] && [ "${BLZ_NO_S3:-0}" != 1 ]; then
    exec bash tests/s3/run.sh bash tests/all.sh "$@"
fi

step() { printf '\n== %s ==\n' "$*"; }

if [ "${BLZ_SKIP_CARGO_TEST:-0}" != 1 ]; then
    step "cargo test"
    cargo test
fi

step "python dependencies (tests/py-env.sh)"
bash tests/py-env.sh
venv=target/py-venv

profile=${BLZ_PROFILE:-dev}
step "maturin build --profile $profile (the abi3 wheel, into target/wheels)"
# Rebuilt every run so the tests see this checkout's code. CARGO_TARGET_DIR stays unset:
# maturin builds in the workspace's target/, next to cargo test's artifacts.
rm -f target/wheels/blz-*.whl
"$venv/bin/maturin" build --profile "$profile" --quiet --out target/wheels -m python/Cargo.toml \
    --interpreter "$venv/bin/python"
wheels=(target/wheels/blz-*.whl)
if [ "${#wheels[@]}" -ne 1 ]; then
    echo "expected one wheel in target/wheels, found: ${wheels[*]}" >&2
    exit 1
fi

# From here on, no Rust: a PATH with the venv and the system's directories only.
norust=(env PATH="$PWD/$venv/bin:/usr/bin:/bin")
step "pip install ${wheels[0]} (PATH without cargo or rustc)"
if "${norust[@]}" bash -c 'command -v cargo || command -v rustc'; then
    echo "cargo or rustc is still on the PATH of the no-Rust step" >&2
    exit 1
fi
"${norust[@]}" "$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "${wheels[0]}"

step "pytest python/tests (PATH without cargo or rustc)"
# Hypothesis runs its deterministic profile (python/tests/conftest.py); pytest's exit 5
# ("no tests collected") is a failure here like any other non-zero exit.
set +e
"${norust[@]}" "$venv/bin/python" -m pytest python/tests -q -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests" >&2
fi
exit "$rc"
