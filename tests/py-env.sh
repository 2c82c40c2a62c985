#!/usr/bin/env bash
# Makes (on first use) and updates the virtual environment the Python tests run in,
# target/py-venv: maturin, numpy, pytest, hypothesis, pandas, pyarrow, polars, duckdb, dask,
# distributed and xarray. tests/all.sh calls it; .ci/run calls it early (tests/prepare.sh),
# in the background while cargo builds.
#
# BLZ_PYTHON: the interpreter to make the venv with (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/py-venv
py=${BLZ_PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
    echo "python virtual environment ($venv)"
    mkdir -p target
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
"$venv/bin/python" -m pip install --quiet --upgrade-strategy only-if-needed \
    "maturin>=1.5,<2" "numpy>=2" pytest hypothesis pandas pyarrow polars duckdb \
    "dask[array,dataframe]>=2026" "distributed>=2026" "xarray>=2025.1"
