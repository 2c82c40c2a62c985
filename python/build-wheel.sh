#!/usr/bin/env bash
# Builds the Python package's wheel once, optimised, into a folder: one abi3 wheel for every
# CPython >= 3.11 on this platform, which then installs into any venv without Rust.
#
#   bash python/build-wheel.sh [DIR]        # DIR defaults to target/wheelhouse
#   pip install "$(ls DIR/blz-*.whl)[all]"  # or [dask], [xarray], [sql], or no extra
#
# Install the wheel by its file: `blz` on PyPI is another project, so `pip install blz`
# (even with --find-links DIR) can fetch that instead. Needs the Rust toolchain and Python 3
# (>= 3.11) with venv; maturin comes from PyPI into target/build-venv.
# BLZ_PYTHON: the interpreter for maturin's venv (default python3).
set -euo pipefail
out=$(realpath -m "${1:-$(dirname "$0")/../target/wheelhouse}")
cd "$(dirname "$0")/.."
py=${BLZ_PYTHON:-python3}
venv=target/build-venv
if [ ! -x "$venv/bin/maturin" ]; then
    mkdir -p target
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.5,<2"
fi
mkdir -p "$out"
rm -f "$out"/blz-*.whl
echo "building the release wheel (every dependency optimised: many minutes on a small machine)"
"$venv/bin/maturin" build --release --out "$out" -m python/Cargo.toml --interpreter "$venv/bin/python"
wheel=$(ls "$out"/blz-*.whl)
echo
echo "built $wheel"
echo "install it (no Rust needed) into any Python >= 3.11 environment of this platform:"
echo "  pip install '$wheel[all]'     # or [dask], [xarray], [sql], or no extra"
