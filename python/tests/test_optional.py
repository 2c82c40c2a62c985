"""blz.dask and blz.xarray as users reach them: after a plain ``import blz``, loaded on first
use (so ``import blz`` imports neither dask nor xarray), and without the optional package an
ImportError that names the extra to install. Each case runs in a fresh interpreter, where a
package is made missing by a ``sys.modules`` entry set to None (what Python does for a
module that failed to import)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def ok(code: str) -> str:
    r = run(code)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_import_blz_loads_no_optional_package() -> None:
    out = ok(
        """
        import sys
        import blz
        heavy = ["blz.dask", "blz.xarray", "dask", "distributed", "xarray", "pandas",
                 "pyarrow", "polars"]
        print(sorted(m for m in heavy if m in sys.modules))
        """
    )
    assert out.strip() == "[]"


@pytest.mark.parametrize("sub", ["dask", "xarray"])
def test_submodules_are_reached_from_the_package(sub: str) -> None:
    pytest.importorskip(sub)
    out = ok(
        f"""
        import sys
        import blz
        assert "{sub}" in dir(blz)
        assert "blz.{sub}" not in sys.modules
        m = blz.{sub}
        assert m is sys.modules["blz.{sub}"]
        assert m.to_blz is blz.{sub}.to_blz
        import blz.{sub} as again
        assert again is m
        print(m.__name__)
        """
    )
    assert out.strip() == f"blz.{sub}"


def test_xarray_to_blz_after_a_plain_import(tmp_path) -> None:
    pytest.importorskip("xarray")
    out = ok(
        f"""
        import numpy as np, xarray as xr
        import blz
        ds = xr.Dataset({{"t": (("x",), np.arange(5.0))}})
        blz.xarray.to_blz(ds, {str(tmp_path / "g.blzg")!r})
        print(xr.open_dataset({str(tmp_path / "g.blzg")!r}, engine="blz")["t"].values.sum())
        """
    )
    assert out.strip() == "10.0"


@pytest.mark.parametrize(
    ("sub", "missing"),
    [("dask", "dask"), ("xarray", "xarray"), ("xarray", "pandas")],
)
@pytest.mark.parametrize("how", ["attribute", "import"])
def test_a_missing_package_names_the_extra(sub: str, missing: str, how: str) -> None:
    use = f"blz.{sub}" if how == "attribute" else f"__import__('blz.{sub}')"
    r = run(
        f"""
        import sys
        for name in list(sys.modules):
            if name == "{missing}" or name.startswith("{missing}."):
                del sys.modules[name]
        sys.modules["{missing}"] = None   # as if not installed
        import blz
        try:
            {use}
        except ImportError as e:
            print(type(e).__name__, e.name)
            print(e)
        else:
            print("no error")
        """
    )
    assert r.returncode == 0, r.stderr
    kind, message = r.stdout.strip().split("\n", 1)
    assert kind == f"ModuleNotFoundError {missing}"
    assert f"pip install 'blz[{sub}]'" in message
    assert f"blz.{sub} needs " in message and missing in message


def test_other_names_are_attribute_errors() -> None:
    out = ok(
        """
        import blz
        try:
            blz.no_such_thing
        except AttributeError as e:
            print(e)
        print(hasattr(blz, "sql"), hasattr(blz, "nope"))
        """
    )
    assert "module 'blz' has no attribute 'no_such_thing'" in out
    assert out.strip().endswith("True False")
