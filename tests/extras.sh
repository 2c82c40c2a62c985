#!/usr/bin/env bash
# The Python package's extras as a user gets them: for the plain package and each extra
# (blz[dask], blz[xarray], blz[sql], blz[all]), a fresh virtual environment, the wheel
# installed into it with that extra from PyPI (`pip install 'blz[dask] @ file://...whl'`)
# with a PATH that has no cargo or rustc, and tests/extras_check.py using what the extra
# promises (the plain package: `import blz` and the ImportError that names the extra).
#
#   bash tests/extras.sh [WHEEL]
#
# WHEEL: the wheel to install (default: the one in target/wheels, which tests/all.sh builds).
# BLZ_PYTHON: the interpreter to make the venvs with (default python3; CI's is 3.11).
# BLZ_EXTRAS: the extras to try (default "none dask xarray sql all"; none: the plain package).
# The venvs are target/extras-venv/<extra>, made anew each run; pip's cache makes the
# downloads once.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${BLZ_PYTHON:-python3}
if [ $# -ge 1 ]; then
    wheel=$1
else
    wheels=(target/wheels/blz-*.whl)
    if [ "${#wheels[@]}" -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
        echo "expected one wheel in target/wheels (bash tests/all.sh builds it), found: ${wheels[*]}" >&2
        exit 1
    fi
    wheel=${wheels[0]}
fi
wheel=$(realpath "$wheel")
# No Rust from here on: the venvs' interpreters are named by path.
norust=(env PATH=/usr/bin:/bin)
if "${norust[@]}" bash -c 'command -v cargo || command -v rustc'; then
    echo "cargo or rustc is on the PATH of the no-Rust steps" >&2
    exit 1
fi

for extra in ${BLZ_EXTRAS:-none dask xarray sql all}; do
    venv=target/extras-venv/$extra
    printf '\n== blz[%s]: a fresh venv (%s), the wheel and its extra ==\n' "$extra" "$venv"
    rm -rf "$venv"
    mkdir -p target/extras-venv
    "$py" -m venv "$venv"
    # The wheel by its file, never by name: `blz` on PyPI is another project.
    if [ "$extra" = none ]; then
        req="blz @ file://$wheel"
    else
        req="blz[$extra] @ file://$wheel"
    fi
    start=$SECONDS
    "${norust[@]}" "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$req"
    echo "installed in $((SECONDS - start)) s:"
    "${norust[@]}" "$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null |
        grep -iE '^(blz|numpy|dask|distributed|xarray|pandas|pyarrow) ' | tr -s ' ' | paste -sd ',' -
    "${norust[@]}" "$venv/bin/python" tests/extras_check.py "$extra"
done
