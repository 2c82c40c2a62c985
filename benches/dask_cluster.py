#!/usr/bin/env python3
"""blz as dask.distributed's storage layer, against `blz scan` and against dask over zarr.

    bash tests/all.sh -k dask                  # builds the venv with blz, dask, distributed
    target/py-venv/bin/pip install zarr        # the peer
    cargo build --release                      # the `blz` binary for `blz scan`
    target/py-venv/bin/python benches/dask_cluster.py --n 1e9 --dir /work/bench-tmp

On a two-worker `distributed.LocalCluster` (worker processes, one thread each; blz's own
decoding inside a task runs on its rayon pool with the GIL released):

- write: --n float64 (8 GB at 1e9) generated on the workers (a random walk per block from a
  fixed seed: compressible about 1.1x, like measured data), stored by `blz.dask.to_blz`
  (every superchunk file encoded and written by a task on a worker, one commit; fsynced)
  and by `dask.array.to_zarr` (zarr-python 3, Blosc lz4 5 shuffle; not fsynced, so its
  time also shows with an fsync of its files added);
- sum: `blz.dask.from_blz(path).sum()` on the cluster, `blz scan PATH --op sum` (one process,
  all cores, the same files), and `dask.array.from_zarr(...).sum()` on the cluster.

Same chunks everywhere (--chunk elements, default 1e6), lz4 clevel 5 byte shuffle. Each
sum runs --repeat times (median shown), page cache warm (the data is read once first). The
datasets are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def walk_block(block, block_info=None):
    """Block i of the data: a random walk from seed 42 + i, starting where a cheap
    deterministic offset puts it (blocks need not join)."""
    i = block_info[0]["chunk-location"][0] if block_info else 0
    n = block.shape[0]
    rng = np.random.default_rng(42 + i)
    return np.cumsum(rng.standard_normal(n)) + 100.0 * (i % 17)


def timed(f):
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


def du(path: str) -> int:
    total = 0
    for d, _, names in os.walk(path):
        for n in names:
            total += os.path.getsize(os.path.join(d, n))
    return total


def fsync_tree(path: str) -> None:
    for d, _, names in os.walk(path):
        for n in names:
            fd = os.open(os.path.join(d, n), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=float, default=1e9, help="elements (float64)")
    ap.add_argument("--chunk", type=float, default=1e6, help="elements per chunk")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the datasets go (default: a temporary directory)")
    ap.add_argument("--blz", default=None, help="the blz binary (default target/release/blz)")
    ap.add_argument("--threads-per-worker", type=int, default=1)
    ap.add_argument("--skip-zarr", action="store_true")
    a = ap.parse_args()

    import dask
    import dask.array as da
    import distributed

    import blz
    import blz.dask as bd

    n, chunk = int(a.n), int(a.chunk)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    blz_bin = a.blz or os.path.join(repo, "target", "release", "blz")
    base = tempfile.mkdtemp(prefix="blz-dask-bench-", dir=a.dir)
    bpath, zpath = os.path.join(base, "x.blz"), os.path.join(base, "x.zarr")
    rows: list[tuple[str, str, float, float]] = []

    def row(phase: str, tool: str, secs: float) -> None:
        rows.append((phase, tool, secs, n * 8 / secs / 1e9))
        print(f"  {phase:6} {tool:34} {secs:8.3f} s {n * 8 / secs / 1e9:7.3f} GB/s", flush=True)

    try:
        with distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=a.threads_per_worker,
            dashboard_address=None,
        ) as cluster, distributed.Client(cluster) as client:
            print(f"{n:.3g} float64 ({n * 8 / 1e9:.1f} GB), chunks {chunk}, lz4 5 shuffle, "
                  f"2 workers x {a.threads_per_worker} thread(s), {os.cpu_count()} cores; in {base}",
                  flush=True)
            x = da.zeros(n, chunks=chunk, dtype="f8").map_blocks(walk_block, dtype="f8")

            # -- write ---------------------------------------------------------------------
            secs, arr = timed(lambda: bd.to_blz(x, bpath, chunks=chunk, codec="lz4", clevel=5,
                                                filter="shuffle"))
            row("write", "blz.dask.to_blz (fsynced)", secs)
            print(f"         blz: {arr._nfiles} superchunk files, {du(bpath) / 1e9:.2f} GB on disk",
                  flush=True)
            expected = None
            if not a.skip_zarr:
                import zarr
                from zarr.codecs import BloscCodec

                def to_zarr():
                    z = zarr.create_array(
                        zpath, shape=(n,), chunks=(chunk,), dtype="f8",
                        compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
                        overwrite=True,
                    )
                    da.to_zarr(x, z, compute=True)

                secs, _ = timed(to_zarr)
                row("write", "dask.array.to_zarr (not fsynced)", secs)
                secs2, _ = timed(lambda: fsync_tree(zpath))
                row("write", "dask.array.to_zarr + fsync", secs + secs2)
                print(f"         zarr: {du(zpath) / 1e9:.2f} GB on disk", flush=True)

            # -- sum -------------------------------------------------------------------------
            def blz_dask_sum():
                return float(bd.from_blz(bpath).sum().compute())

            def blz_scan_sum():
                out = subprocess.run([blz_bin, "scan", bpath, "--op", "sum", "--json"],
                                     check=True, capture_output=True, text=True).stdout
                return float(json.loads(out)["value"])

            def zarr_sum():
                return float(da.from_zarr(zpath).sum().compute())

            tools = [("blz.dask.from_blz(...).sum()", blz_dask_sum),
                     ("blz scan --op sum (1 process)", blz_scan_sum)]
            if not a.skip_zarr:
                tools.append(("dask over zarr: from_zarr().sum()", zarr_sum))
            for _, f in tools:  # warm the page cache (and the workers' imports)
                v = f()
                expected = v if expected is None else expected
                assert abs(v - expected) <= 1e-6 * max(1.0, abs(expected)), (v, expected)
            times: dict[str, list[float]] = {name: [] for name, _ in tools}
            for _ in range(a.repeat):
                for name, f in tools:  # in alternation
                    times[name].append(timed(f)[0])
            for name, _ in tools:
                row("sum", name, statistics.median(times[name]))
            med = {name: statistics.median(t) for name, t in times.items()}
            d, s = med["blz.dask.from_blz(...).sum()"], med["blz scan --op sum (1 process)"]
            print(f"\nsum: blz.dask is {s / d:.2f}x blz scan's speed", end="")
            if not a.skip_zarr:
                z = med["dask over zarr: from_zarr().sum()"]
                print(f", {z / d:.2f}x dask over zarr's", end="")
            print(flush=True)

        # The same sums on workers whose allocator keeps freed memory (distributed's nannies
        # set MALLOC_TRIM_THRESHOLD_=65536, so every block a task makes is fresh memory,
        # faulted in page by page; a worker that keeps it reuses the last block's pages).
        keep = {f"distributed.nanny.pre-spawn-environ.{k}": str(1 << 30)
                for k in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")}
        with dask.config.set(keep), distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=a.threads_per_worker,
            dashboard_address=None,
        ) as cluster, distributed.Client(cluster) as client:
            print("\nworkers started with MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_ = 1 GiB:")
            tuned = [t for t in tools if not t[0].startswith("blz scan")]
            for _, f in tuned:
                f()
            times2: dict[str, list[float]] = {name: [] for name, _ in tuned}
            for _ in range(a.repeat):
                for name, f in tuned:
                    times2[name].append(timed(f)[0])
                times2.setdefault("blz scan --op sum (1 process)", []).append(timed(blz_scan_sum)[0])
            for name, t in times2.items():
                row("sum", name, statistics.median(t))
            med = {name: statistics.median(t) for name, t in times2.items()}
            d, s = med["blz.dask.from_blz(...).sum()"], med["blz scan --op sum (1 process)"]
            print(f"\nsum, tuned workers: blz.dask is {s / d:.2f}x blz scan's speed", end="")
            if not a.skip_zarr:
                z = med["dask over zarr: from_zarr().sum()"]
                print(f", {z / d:.2f}x dask over zarr's", end="")
            print(flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
