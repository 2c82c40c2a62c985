#!/usr/bin/env python3
"""Times blz's Python package against python-blosc2, zarr-python, zarr-python with the zarrs
codec pipeline and tensorstore, in one process, on the same float64 data: written from a
numpy array, read back whole into one; then small random reads, and the peak memory of a
whole read (each tool in a fresh process).

blz's reads return large arrays in memory from its buffer pool (`blz.buffer_pool`): memory
an earlier result held, if that was freed less than 30 s before. The pool is emptied before
each timed read in the table, so that blz decodes into fresh pages as the peers do; the line
under each table shows blz reading again at once, into pooled memory.

    bash tests/all.sh                      # or: pip install ./python (and numpy)
    target/py-venv/bin/pip install blosc2 zarr zarrs tensorstore   # optional peers
    target/py-venv/bin/python benches/compare_python.py --n 5e7 --repeat 5

Data: a random walk and a linspace of --n float64 values (800 MB at 1e8), the same as
benches/compare.py generates. Settings: lz4, clevel 5, byte shuffle, chunks of 1e6
elements, for every tool. Each phase runs --repeat times, tools in alternation; the table
shows the median wall-clock time and GB/s of uncompressed data, and each peer's time over
blz's (> 1: blz faster). blz's write includes its commit, which fsyncs the data; the peers'
writes do not fsync, so their "durable" time adds an fsync of every file they wrote. The page cache stays warm, and memory is touched before each timed
phase (see warm(); --cold skips it). After each blz write, the "disk" line times writing as many
bytes as blz's compressed dataset holds from memory, as 64 MiB files two at a time, each
fsynced: what making this data durable costs this disk with no compression to do. Unlike benches/compare.py (a fresh process
per run), this measures what a Python user sees, binding costs included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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

    def opened(self, path):
        return blz.open(path)


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

    def opened(self, path):
        return self.b.open(path)


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

    def opened(self, path):
        return self.z.open_array(path, mode="r")


class ZarrZarrs(Zarr):
    """zarr-python with its codec pipeline replaced by zarrs (Rust, parallel over chunks)."""

    name = "zarr+zarrs"

    def __init__(self):
        super().__init__()
        import zarrs  # noqa: F401  (fails here when not installed)

        self.conf = {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}

    def write(self, path, data):
        with self.z.config.set(self.conf):
            super().write(path, data)

    def read(self, path):
        with self.z.config.set(self.conf):
            return super().read(path)

    def opened(self, path):
        z = self.z
        conf = self.conf

        class Opened:
            def __init__(self):
                with z.config.set(conf):
                    self.a = z.open_array(path, mode="r")

            def __getitem__(self, key):
                with z.config.set(conf):
                    return self.a[key]

        return Opened()


class TensorStore:
    name = "tensorstore"

    def __init__(self):
        import tensorstore

        self.ts = tensorstore

    def write(self, path, data):
        codecs = [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle",
                                                "typesize": 8, "blocksize": 0}},
        ]
        spec = {
            "driver": "zarr3",
            "kvstore": {"driver": "file", "path": path},
            "metadata": {
                "shape": list(data.shape),
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [CHUNK]}},
                "chunk_key_encoding": {"name": "default"},
                "data_type": "float64",
                "codecs": codecs,
            },
            "create": True,
            "delete_existing": True,
        }
        self.ts.open(spec).result().write(data).result()

    def opened(self, path):
        store = self.ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result()

        class Opened:
            def __getitem__(self, key):
                return store[key].read().result()

        return Opened()

    def read(self, path):
        return self.opened(path)[:]


def warm(nbytes: int) -> None:
    """Touches and frees as much memory as the data, untimed (as benches/compare.py does):
    on a VM that hands freed memory back to the host, the first touch of such pages costs
    more than decoding into them, and which tool paid for it would depend on timing."""
    m = np.ones(nbytes // 8)
    del m


def empty_pool() -> None:
    """Frees what blz's buffer pool holds, so that the next read decodes into fresh pages,
    as every peer's does."""
    limit = blz.buffer_pool()["max_bytes"]
    blz.buffer_pool(max_bytes=0)
    blz.buffer_pool(max_bytes=limit)


def fsync_tree(path: str) -> None:
    """What a peer's write costs when it must survive a crash: every file it wrote, synced."""
    files = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


TOOLS = {"blz": Blz, "python-blosc2": Blosc2, "zarr-python": Zarr, "zarr+zarrs": ZarrZarrs,
         "tensorstore": TensorStore}


def disk_time(root: str, payload: np.ndarray, piece: int = 64 << 20) -> float:
    """Seconds the disk under `root` takes to make `payload` durable when nothing else is to
    be done: written from memory as new files of `piece` bytes (blz's superchunk files hold
    about 64 MiB), two at a time as blz's two writer threads do, each fsynced."""
    from concurrent.futures import ThreadPoolExecutor

    view = memoryview(payload).cast("B")

    def one(i: int) -> None:
        path = os.path.join(root, f"disk-{i}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            part = view[i * piece:(i + 1) * piece]
            while part:
                part = part[os.write(fd, part):]
            os.fsync(fd)
        finally:
            os.close(fd)

    count = -(-len(view) // piece)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, range(count)))
    took = time.perf_counter() - t0
    for i in range(count):
        os.unlink(os.path.join(root, f"disk-{i}"))
    return took


def random_reads(tool, path: str, n: int, count: int, width: int = 100) -> float:
    """Seconds per read of `width` consecutive elements at `count` random places (fixed seed),
    through one opened array."""
    a = tool.opened(path)
    starts = np.random.default_rng(7).integers(0, n - width, size=count)
    a[0:width]  # opening costs (metadata, offsets) are not what this measures
    t0 = time.perf_counter()
    for s in starts:
        a[int(s) : int(s) + width]
    return (time.perf_counter() - t0) / count


def child_read(name: str, path: str) -> None:
    """In a fresh process: read the whole array once, print the peak RSS the read added."""
    tool = TOOLS[name]()
    a = tool.opened(path)
    a[0:1]
    with open("/proc/self/statm") as f:  # resident now
        before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    with open("/proc/self/clear_refs", "w") as f:  # the peak restarts from here (Linux >= 4.0)
        f.write("5")
    back = a[:]
    with open("/proc/self/status") as f:
        after = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    print(json.dumps({"result": int(back.nbytes), "peak_added": int(after - before)}))


def read_memory(name: str, path: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child-read", name, path], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def peers() -> list:
    tools: list = [Blz()]
    for cls in (Blosc2, Zarr, ZarrZarrs, TensorStore):
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
    ap.add_argument("--random-reads", type=int, default=10_000,
                    help="random 100-element reads per tool (0: none)")
    ap.add_argument("--child-read", nargs=2, metavar=("TOOL", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_read:
        child_read(*args.child_read)
        return
    n = int(args.n)
    tools = peers()
    root = tempfile.mkdtemp(prefix="blz-compare-", dir=args.dir)
    disk_payload: dict[str, np.ndarray] = {}
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
                    if t.name != "blz":  # blz's write already ends in its fsynced commit
                        fsync_tree(path)
                    times.setdefault((t.name, "durable"), []).append(time.perf_counter() - t0)
                    sizes[t.name] = tree_bytes(path)
                    if not args.cold:
                        warm(data.nbytes)
                    if t.name == "blz":
                        empty_pool()
                    t0 = time.perf_counter()
                    back = t.read(path)
                    times.setdefault((t.name, "read"), []).append(time.perf_counter() - t0)
                    if not np.array_equal(back, data):
                        raise SystemExit(f"{t.name} read back different data")
                    del back
                    if t.name == "blz":
                        # The disk's own time for these bytes, right after blz wrote them.
                        if (payload := disk_payload.get(kind)) is None:
                            payload = np.random.default_rng(3).integers(
                                0, 256, size=sizes["blz"], dtype=np.uint8)
                            disk_payload[kind] = payload
                        times.setdefault(("disk", "time"), []).append(disk_time(root, payload))
                        # Read again at once: into the memory the first result held, from
                        # blz's buffer pool (blz.buffer_pool), instead of fresh pages.
                        t0 = time.perf_counter()
                        back = t.read(path)
                        times.setdefault((t.name, "reread"), []).append(time.perf_counter() - t0)
                        del back
            print(f"\n{kind}: {n:.0e} float64 ({gb:.1f} GB), lz4 clevel 5 shuffle, chunks {CHUNK:.0e}, "
                  f"median of {args.repeat}")
            print(f"{'tool':<14} {'write GB/s':>10} {'durable':>8} {'read GB/s':>10} {'ratio':>6} "
                  f"{'blz write x':>12} {'durable x':>10} {'read x':>8}")
            med = {k: statistics.median(v) for k, v in times.items()}
            for t in tools:
                w, d, r = med[(t.name, "write")], med[(t.name, "durable")], med[(t.name, "read")]
                print(f"{t.name:<14} {gb / w:>10.2f} {gb / d:>8.2f} {gb / r:>10.2f} "
                      f"{data.nbytes / sizes[t.name]:>6.2f} {w / med[('blz', 'write')]:>11.2f}x "
                      f"{d / med[('blz', 'durable')]:>9.2f}x {r / med[('blz', 'read')]:>7.2f}x")
            disk = med[("disk", "time")]
            print(f"disk: {sizes['blz'] / 1e6:.0f} MB (blz's compressed size) written from memory as "
                  f"64 MiB files and fsynced in {disk:.2f} s, {gb / disk:.2f} GB/s of data; "
                  f"blz's durable write, compression included, took {med[('blz', 'write')] / disk:.2f}x that")
            print(f"blz read again straight after a read (its result in pooled memory): "
                  f"{gb / med[('blz', 'reread')]:.2f} GB/s, "
                  f"{med[('blz', 'read')] / med[('blz', 'reread')]:.2f}x its first read")
            if args.random_reads:
                print(f"random reads: {args.random_reads} reads of 100 elements, microseconds per read")
                base = None
                for t in tools:
                    us = random_reads(t, os.path.join(root, f"{t.name}-{kind}"), n, args.random_reads) * 1e6
                    base = base or us
                    print(f"  {t.name:<14} {us:>9.1f} us  ({us / base:.2f}x blz's)")
            print("peak memory a whole read adds, in a fresh process (result size = 1.00)")
            for t in tools:
                m = read_memory(t.name, os.path.join(root, f"{t.name}-{kind}"))
                print(f"  {t.name:<14} {m['peak_added'] / 2**20:>8.1f} MiB  "
                      f"({m['peak_added'] / m['result']:.2f}x the result)")
            del data
            disk_payload.clear()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
