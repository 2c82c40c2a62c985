#!/usr/bin/env python3
"""Times blz groups through xarray (``blz.xarray``): writing a dataset with ``to_blz``,
``xr.open_dataset(engine="blz")`` (metadata only), a whole ``load()``, an outer selection
(``isel`` with an index list per dimension) and a dask mean over ``chunks={}``, in one
process, page cache warm.

    target/py-venv/bin/python benches/xarray_group.py [--time 2000] [--vars 4] [--repeat 5]

Data: ``--vars`` float32 variables of shape (time, 64, 64) (a random walk along time, which
compresses about as measurements do), a datetime64 time coordinate and two float64 ones,
chunks of (100, 64, 64). Medians of ``--repeat`` runs are printed, with the throughput of the
whole load in MB/s of decoded data.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import pandas as pd
import xarray as xr

import blz.xarray as bx


def median_time(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time", type=int, default=2000)
    ap.add_argument("--vars", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    n = args.time
    ds = xr.Dataset(
        {
            f"v{i}": (("time", "y", "x"),
                      np.cumsum(rng.standard_normal((n, 64, 64)), axis=0).astype(np.float32))
            for i in range(args.vars)
        },
        coords={"time": pd.date_range("2020-01-01", periods=n, freq="h").values,
                "y": np.linspace(0, 1, 64), "x": np.linspace(0, 2, 64)},
    )
    enc = {f"v{i}": {"chunks": (100, 64, 64)} for i in range(args.vars)}
    mb = sum(v.nbytes for v in ds.data_vars.values()) / 1e6
    root = tempfile.mkdtemp(prefix="blz-xr-bench-")
    try:
        path = os.path.join(root, "g")

        def write() -> None:
            bx.to_blz(ds, path, mode="w" if os.path.exists(path) else "w-", encoding=enc)

        t_write = median_time(write, args.repeat)
        t_open = median_time(lambda: xr.open_dataset(path, engine="blz"), args.repeat)
        t_load = median_time(lambda: xr.open_dataset(path, engine="blz").load(), args.repeat)
        idx = np.sort(rng.choice(n, 50, replace=False))
        t_outer = median_time(
            lambda: xr.open_dataset(path, engine="blz")["v0"].isel(time=idx, y=[1, 30, 60]).values,
            args.repeat,
        )
        t_mean = median_time(
            lambda: xr.open_dataset(path, engine="blz", chunks={})["v0"].mean("time").compute(),
            args.repeat,
        )
        print(f"{args.vars} x float32 ({n}, 64, 64) = {mb:.0f} MB decoded, chunks (100, 64, 64)")
        print(f"to_blz (mode w)        {t_write * 1e3:9.1f} ms  {mb / t_write:8.0f} MB/s")
        print(f"open_dataset           {t_open * 1e3:9.1f} ms")
        print(f"open + load()          {t_load * 1e3:9.1f} ms  {mb / t_load:8.0f} MB/s")
        print(f"isel(50 times, 3 y)    {t_outer * 1e3:9.1f} ms")
        print(f"dask mean, chunks={{}}   {t_mean * 1e3:9.1f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
