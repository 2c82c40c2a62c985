#!/usr/bin/env python3
"""Times blz's Python package against python-blosc2 and zarr-python, in one process, on the
same float64 data: written from a numpy array, read back whole into one.

    bash tests/all.sh                      # or: pip install ./python (and numpy)
    target/py-venv/bin/pip install blosc2 zarr     # optional: the peers join when installed
    target/py-venv/bin/python benches/compare_python.py --n 1e8 --repeat 5

Data: a random walk and a linspace of --n float64 values (800 MB at 1e8), the same as
benches/compare.py generates. Settings: lz4, clevel 5, byte shuffle, chunks of 1e6
elements, for every tool. Each phase runs --repeat times, tools in alternation; the table
shows the median wall-clock time and GB/s of uncompressed data, and each peer's time over
blz's (> 1: blz faster). blz's write includes its commit, which fsyncs the data; the peers'
writes do not fsync. The page cache stays warm, and memory is touched before each timed
phase (see warm(); --cold skips it). Unlike benches/compare.py (a fresh process
per run), this measures what a Python user sees, binding costs included.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

import blz

CHUNK = 1_000_000


def splitmix(i):
    """SplitMix64 output number i (as benches/common/data.rs and benches/compare.py)."""
    with np.errstate(over="ignore"):
        z = np.uint64(0x123456789ABCDEF0) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def generate(kind: str, n: int) -> np.ndarray:
    if kind == "linspace":
        return np.arange(n, dtype=np.float64) * (1.0 / (max(n, 2) - 1))
    out = np.empty(n, dtype=np.float64)
    acc = 0.0
    step = 10_000_000
    for s in range(0, n, step):
        i = np.arange(s, min(n, s + step), dtype=np.uint64)
        u = (splitmix(i) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53)) - 0.5
        u[0] += acc
        np.cumsum(u, out=out[s : s + len(u)])
        acc = out[s + len(u) - 1]
    return out


def tree_bytes(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


class Blz:
    name = "blz"

    def write(self, path, data):
        blz.create(path, data, chunks=CHUNK, codec="lz4", clevel=5, filter="shuffle", overwrite=True).close()

    def read(self, path):
        return blz.open(path)[:]


class Blosc2:
    name = "python-blosc2"

    def __init__(self):
        import blosc2

        self.b = blosc2

    def write(self, path, data):
        b = self.b
        cparams = b.CParams(codec=b.Codec.LZ4, clevel=5, filters=[b.Filter.SHUFFLE], typesize=8)
        b.asarray(data, chunks=(CHUNK,), urlpath=path, mode="w", cparams=cparams)

    def read(self, path):
        return self.b.open(path)[:]


class Zarr:
    name = "zarr-python"

    def __init__(self):
        import zarr

        self.z = zarr

    def write(self, path, data):
        z = self.z
        from zarr.codecs import BloscCodec

        codec = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=8)
        a = z.create_array(path, shape=data.shape, chunks=(CHUNK,), dtype=data.dtype,
                           compressors=codec, overwrite=True)
        a[:] = data

    def read(self, path):
        return self.z.open_array(path, mode="r")[:]


def warm(nbytes: int) -> None:
    """Touches and frees as much memory as the data, untimed (as benches/compare.py does):
    on a VM that hands freed memory back to the host, the first touch of such pages costs
    more than decoding into them, and which tool paid for it would depend on timing."""
    m = np.ones(nbytes // 8)
    del m


def peers() -> list:
    tools: list = [Blz()]
    for cls in (Blosc2, Zarr):
        try:
            tools.append(cls())
        except Exception as e:  # not installed, or an API this script does not know
            print(f"({cls.name} skipped: {e})", file=sys.stderr)
    return tools


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=float, default=1e8, help="elements (default 1e8)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="do not warm memory before each timed phase")
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    args = ap.parse_args()
    n = int(args.n)
    tools = peers()
    root = tempfile.mkdtemp(prefix="blz-compare-", dir=args.dir)
    try:
        for kind in ("walk", "linspace"):
            data = generate(kind, n)
            gb = data.nbytes / 1e9
            times: dict[tuple[str, str], list[float]] = {}
            sizes: dict[str, int] = {}
            for _ in range(args.repeat):
                for t in tools:
                    path = os.path.join(root, f"{t.name}-{kind}")
                    if not args.cold:
                        warm(data.nbytes)
                    t0 = time.perf_counter()
                    t.write(path, data)
                    times.setdefault((t.name, "write"), []).append(time.perf_counter() - t0)
                    sizes[t.name] = tree_bytes(path)
                    if not args.cold:
                        warm(data.nbytes)
                    t0 = time.perf_counter()
                    back = t.read(path)
                    times.setdefault((t.name, "read"), []).append(time.perf_counter() - t0)
                    if not np.array_equal(back, data):
                        raise SystemExit(f"{t.name} read back different data")
                    del back
            print(f"\n{kind}: {n:.0e} float64 ({gb:.1f} GB), lz4 clevel 5 shuffle, chunks {CHUNK:.0e}, "
                  f"median of {args.repeat}")
            print(f"{'tool':<15} {'write s':>8} {'GB/s':>6} {'read s':>8} {'GB/s':>6} {'ratio':>6} "
                  f"{'write vs blz':>13} {'read vs blz':>12}")
            base_w = statistics.median(times[("blz", "write")])
            base_r = statistics.median(times[("blz", "read")])
            for t in tools:
                w = statistics.median(times[(t.name, "write")])
                r = statistics.median(times[(t.name, "read")])
                print(f"{t.name:<15} {w:>8.3f} {gb / w:>6.2f} {r:>8.3f} {gb / r:>6.2f} "
                      f"{data.nbytes / sizes[t.name]:>6.2f} {w / base_w:>12.2f}x {r / base_r:>11.2f}x")
            del data
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
