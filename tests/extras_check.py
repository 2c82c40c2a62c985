"""Uses what one extra of the Python package promises, in a venv that has only that extra
(tests/extras.sh makes it): ``python tests/extras_check.py none|dask|xarray|sql|all``.

none: ``import blz`` works with numpy alone, and ``blz.dask``/``blz.xarray`` raise an
ImportError naming the extra. dask: ``dask.distributed`` imports (dask and distributed of one
release) and a blz array and table round-trip through dask on a local cluster. xarray: a
Dataset through ``blz.xarray.to_blz`` and ``xr.open_dataset(..., engine="blz")``. sql: a
query's rows as Arrow and pandas. all: every one of these.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np

import blz


def check_none(tmp: Path) -> None:
    a = blz.create(tmp / "a.blz", np.arange(1000.0))
    assert a[::100].tolist() == list(np.arange(0.0, 1000.0, 100.0))
    for sub, package in (("dask", "dask"), ("xarray", "xarray")):
        if importlib.util.find_spec(package) is not None:
            continue  # installed by something else: nothing to check here
        try:
            getattr(blz, sub)
        except ImportError as e:
            assert f"blz[{sub}]" in str(e), e
            print(f"blz.{sub} without {package}: {e}")
        else:
            raise AssertionError(f"blz.{sub} imported without {package}")


def check_dask(tmp: Path) -> None:
    import dask
    import dask.distributed
    import distributed

    assert dask.__version__ == distributed.__version__, (dask.__version__, distributed.__version__)
    a = blz.create(tmp / "d.blz", np.arange(200_000, dtype=np.int64), chunks=10_000)
    t = blz.create(tmp / "t.blz", {"id": np.arange(1000), "x": np.linspace(0, 1, 1000)})
    with dask.distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                                 dashboard_address=None) as client:
        x = blz.dask.from_blz(a.path)
        assert int(client.compute(x.sum()).result()) == int(np.arange(200_000).sum())
        blz.dask.to_blz(x * 2, tmp / "d2.blz")
        assert int(blz.open(tmp / "d2.blz")[-1]) == 2 * 199_999
        df = blz.dask.read_table(t.path, columns=["id", "x"])
        assert int(df["id"].sum().compute()) == 999 * 1000 // 2
    print(f"blz.dask with dask {dask.__version__} and distributed {distributed.__version__}: ok")


def check_xarray(tmp: Path) -> None:
    import xarray as xr

    ds = xr.Dataset(
        {"temp": (("time", "x"), np.arange(12.0).reshape(4, 3), {"units": "K"})},
        coords={"x": [10, 20, 30]},
    )
    blz.xarray.to_blz(ds, tmp / "g.blzg")
    back = xr.open_dataset(tmp / "g.blzg", engine="blz")
    xr.testing.assert_identical(back.load(), ds)
    lazy = xr.open_dataset(tmp / "g.blzg", engine="blz", chunks={})
    assert float(lazy["temp"].sum().compute()) == float(np.arange(12.0).sum())
    print(f"blz.xarray with xarray {xr.__version__}: ok")


def check_sql(tmp: Path) -> None:
    import pandas as pd
    import pyarrow as pa

    t = blz.create(tmp / "s.blz", {"g": np.arange(100) % 3, "v": np.arange(100.0)})
    r = blz.sql("SELECT g, sum(v) AS s FROM t GROUP BY g ORDER BY g", t=t)
    table = r.to_arrow()
    assert isinstance(table, pa.Table) and table.num_rows == 3
    frame = r.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert frame["s"].tolist() == [float(sum(range(k, 100, 3))) for k in range(3)]
    print(f"blz.sql with pyarrow {pa.__version__} and pandas {pd.__version__}: ok")


def check_all(tmp: Path) -> None:
    for name in ("dask", "xarray", "sql"):
        sub = tmp / name
        sub.mkdir()
        CHECKS[name](sub)
    t = blz.create(tmp / "p.blz", {"a": np.arange(5)})
    assert t.to_pandas()["a"].tolist() == list(range(5))
    assert t.to_arrow().num_rows == 5


CHECKS = {
    "none": check_none,
    "dask": check_dask,
    "xarray": check_xarray,
    "sql": check_sql,
    "all": check_all,
}


def main() -> None:
    (extra,) = sys.argv[1:]
    with tempfile.TemporaryDirectory() as d:
        CHECKS[extra](Path(d))
    print(f"blz[{extra}]: ok")


if __name__ == "__main__":
    main()
