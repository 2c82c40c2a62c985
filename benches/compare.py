#!/usr/bin/env python3
"""Times blz against python-blosc2 (NDArray on disk) and zarr (local store) on the same
float64 data, in one run, and prints the ratios; also against zarrs (the Rust Zarr library,
benches/zarrs_peer) when that is built.

Run from the repository root with the peers' python (it has numpy, blosc2 and zarr):

    cargo build --release --example bench_io
    PY=$(/work/shared/peers/setup.sh)      # or ../shared/peers/setup.sh
    $PY benches/compare.py --n 1e8 --reps 3

zarrs joins the run when its program exists (--zarrs-bin; build it once with
`cargo build --release --manifest-path benches/zarrs_peer/Cargo.toml`). It encodes chunks in
parallel over rayon with the same c-blosc (blosc-src) as blz, so it is the compiled peer:
the one that does not pay Python's costs.

Every tool writes from data already in memory and reads the whole array back into memory,
with the same codec settings (lz4, clevel 5, byte shuffle, typesize 8) and the same chunk
(1e6 elements). Block sizes are each library's own choice unless --blocksize forces one
(the same bytes for all). The tools run in alternation, `--reps` times each; the
tables show the median and the best run, and the CPU time of all threads, which a busy
machine disturbs less than the wall-clock time. The page cache stays warm (nothing is
dropped). Every run of every tool is a fresh process that loads the data from the same raw
file first, so that all of them start from the same state. Before each timed phase, each
process touches and frees as much memory as the data (untimed), unless --cold: on a virtual
machine whose freed memory goes back to the host after a few seconds (virtio-balloon free
page reporting, as on the machines blz is measured on), the first touch of such pages cost
0.9-1.9 s per 800 MB against 0.13 s for pages just freed, more than decompressing them, and
which tool paid it depended on how long ago another process had freed memory. blz's write includes its commit, which fsyncs the data; the peers do not fsync,
so the tables also show their write time with an fsync of their files added ("durable"),
which also keeps one tool's dirty pages from slowing the next one down.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import blosc2
import zarr

CHUNK = 1_000_000


def splitmix(i):
    """SplitMix64 output number i (same as benches/common/data.rs)."""
    with np.errstate(over="ignore"):
        z = np.uint64(0x123456789ABCDEF0) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def generate(kind, n):
    if kind == "linspace":
        return np.arange(n, dtype=np.float64) * (1.0 / (max(n, 2) - 1))
    if kind == "walk":
        out = np.empty(n, dtype=np.float64)
        acc = 0.0
        step = 10_000_000
        for s in range(0, n, step):
            i = np.arange(s, min(n, s + step), dtype=np.uint64)
            u = (splitmix(i) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53)) - 0.5
            # Sequential sums, as the Rust generator does (np.cumsum adds in order).
            u[0] += acc
            np.cumsum(u, out=out[s : s + len(u)])
            acc = out[s + len(u) - 1]
        return out
    raise ValueError(kind)


def tree_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(
        os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
    )


def fsync_tree(path):
    paths = [path] if os.path.isfile(path) else [
        os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs
    ]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    d = os.path.dirname(os.path.abspath(path))
    fd = os.open(d, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


class Clock:
    """Wall-clock and CPU time (all threads of this process) of a stretch of work."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self):
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def warm(args, nbytes):
    """Touches and frees `nbytes` of memory, so that the timed work after it gets pages the
    system has just handed out rather than pages it must first fetch back (see the module
    docstring). bench_io does the same for blz."""
    if not args.cold:
        w = np.ones(nbytes // 8)
        del w


def run_blosc2(a, path, args):
    remove(path)
    cparams = blosc2.CParams(
        codec=blosc2.Codec.LZ4, clevel=args.clevel, filters=[blosc2.Filter.SHUFFLE],
        typesize=8,
    )
    kw = {}
    if args.blocksize:
        kw["blocks"] = (args.blocksize // 8,)
    warm(args, a.nbytes)
    t = Clock()
    arr = blosc2.asarray(a, urlpath=path, mode="w", chunks=(args.chunk,), cparams=cparams, **kw)
    del arr
    write_s, write_cpu_s = t.stop()
    t = Clock()
    fsync_tree(path)
    sync_s, _ = t.stop()
    warm(args, a.nbytes)
    t = Clock()
    back = blosc2.open(path)[:]
    read_s, read_cpu_s = t.stop()
    assert np.array_equal(back, a), "blosc2 read back different data"
    blocks = blosc2.open(path).blocks[0] * 8
    return dict(write_s=write_s, sync_s=sync_s, read_s=read_s, write_cpu_s=write_cpu_s,
                read_cpu_s=read_cpu_s, cbytes=tree_bytes(path), blocksize=blocks)


def run_zarr(a, path, args):
    remove(path)
    codec = zarr.codecs.BloscCodec(
        cname="lz4", clevel=args.clevel, shuffle="shuffle", typesize=8,
        # numcodecs' c-blosc 1.x, like blz's, multiplies a forced block size by the typesize
        # when it splits blocks into byte streams (lz4 at clevel 5 does).
        blocksize=args.blocksize // 8 if args.blocksize else 0,
    )
    warm(args, a.nbytes)
    t = Clock()
    z = zarr.create_array(store=path, shape=a.shape, chunks=(args.chunk,), dtype="f8",
                          compressors=codec, overwrite=True)
    z[:] = a
    del z
    write_s, write_cpu_s = t.stop()
    t = Clock()
    fsync_tree(path)
    sync_s, _ = t.stop()
    warm(args, a.nbytes)
    t = Clock()
    back = zarr.open_array(path, mode="r")[:]
    read_s, read_cpu_s = t.stop()
    assert np.array_equal(back, a), "zarr read back different data"
    first = os.path.join(path, "c", "0")
    with open(first, "rb") as f:
        head = f.read(16)
    blocks = int.from_bytes(head[8:12], "little")
    cbytes = tree_bytes(os.path.join(path, "c"))
    return dict(write_s=write_s, sync_s=sync_s, read_s=read_s, write_cpu_s=write_cpu_s,
                read_cpu_s=read_cpu_s, cbytes=cbytes, blocksize=blocks)


PEERS = {"blosc2": run_blosc2, "zarr": run_zarr}


def worker(args):
    """One run of one peer, in a process of its own: load the raw data, write, read, report."""
    a = np.fromfile(args.input, dtype=np.float64)
    r = PEERS[args.worker](a, args.out, args)
    print(json.dumps(r))


def run_peer(tool, raw, path, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", tool, "--input", raw,
           "--out", path, "--chunk", str(args.chunk), "--clevel", str(args.clevel),
           "--blocksize", str(args.blocksize)] + (["--cold"] if args.cold else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_zarrs(raw, path, args):
    cmd = [args.zarrs_bin, "--input", raw, "--out", path, "--chunk", str(args.chunk),
           "--clevel", str(args.clevel)]
    if not args.cold:
        cmd += ["--warm"]
    if args.blocksize:
        # zarrs hands the block size to the same c-blosc 1.x, which multiplies it by the
        # typesize when it splits.
        cmd += ["--blocksize", str(args.blocksize // 8)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_blz(raw, path, args):
    cmd = [args.bin, "--input", raw, "--out", path, "--chunk", str(args.chunk),
           "--clevel", str(args.clevel), "--codec", "lz4"]
    if not args.cold:
        cmd += ["--warm"]
    if args.blocksize:
        # c-blosc 1.x multiplies a forced block size by the typesize when it splits.
        cmd += ["--blocksize", str(args.blocksize // 8)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    r["sync_s"] = 0.0
    r["cbytes"] = tree_bytes(os.path.join(path, "data"))
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=float, default=1e8, help="elements (default 1e8)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--datasets", default="walk,linspace")
    p.add_argument("--chunk", type=int, default=CHUNK, help="elements per chunk")
    p.add_argument("--clevel", type=int, default=5)
    p.add_argument("--blocksize", type=int, default=0,
                   help="force this Blosc block size in bytes on all tools (0: own choice)")
    p.add_argument("--workdir", default="/tmp/blz-compare")
    p.add_argument("--bin", default="target/release/examples/bench_io")
    p.add_argument("--zarrs-bin", default="benches/zarrs_peer/target/release/zarrs_peer",
                   help="zarrs' program (benches/zarrs_peer); skipped when it does not exist")
    p.add_argument("--json", help="also write the raw results here")
    p.add_argument("--cold", action="store_true",
                   help="do not warm memory before the timed phases (see the docstring)")
    p.add_argument("--worker", choices=sorted(PEERS), help=argparse.SUPPRESS)
    p.add_argument("--input", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    n = int(args.n)
    if not os.path.exists(args.bin):
        sys.exit(f"{args.bin} not found: cargo build --release --example bench_io")
    os.makedirs(args.workdir, exist_ok=True)
    tools = ["blz", "blosc2", "zarr"]
    if os.path.exists(args.zarrs_bin):
        tools.append("zarrs")
    else:
        print(f"# {args.zarrs_bin} not found, zarrs left out (see the docstring)")
    print(f"# blz vs python-blosc2 {blosc2.__version__} vs zarr {zarr.__version__}"
          f"{' vs zarrs 0.23' if 'zarrs' in tools else ''}; "
          f"n={n:.3g} float64 ({n * 8 / 1e6:.0f} MB), lz4 clevel {args.clevel} shuffle, "
          f"chunk {args.chunk}, blocks {args.blocksize or 'auto'}, reps {args.reps}, "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    results = {}
    for kind in args.datasets.split(","):
        a = generate(kind, n)
        raw = os.path.join(args.workdir, f"{kind}.f64")
        a.tofile(raw)
        del a
        # Flush the input now: its writeback would otherwise stall the first commit's fsync.
        fsync_tree(raw)
        runs = {t: [] for t in tools}
        for rep in range(args.reps):
            k = rep % len(tools)
            order = tools[k:] + tools[:k]
            for tool in order:
                path = os.path.join(args.workdir, f"{kind}.{tool}")
                if tool == "blz":
                    r = run_blz(raw, path, args)
                elif tool == "zarrs":
                    r = run_zarrs(raw, path, args)
                else:
                    r = run_peer(tool, raw, path + (".b2nd" if tool == "blosc2" else ""), args)
                runs[tool].append(r)
                print(f"  {kind} rep {rep} {tool:6s} write {r['write_s']:.3f}s "
                      f"(cpu {r['write_cpu_s']:.3f}s, +fsync {r['sync_s']:.3f}s) "
                      f"read {r['read_s']:.3f}s (cpu {r['read_cpu_s']:.3f}s) "
                      f"ratio {n * 8 / r['cbytes']:.2f}", flush=True)
        results[kind] = runs
        os.remove(raw)

    gb = n * 8 / 1e9
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    best = lambda rs, k: min(r[k] for r in rs)
    durable = lambda r: r["write_s"] + r["sync_s"]
    print()
    print("Speeds in GB/s of uncompressed data, median (best) of the runs; CPU in seconds of "
          "all threads, median. 'durable' adds an fsync of the peers' files.")
    print()
    print("| data | tool | write | durable write | read | write CPU s | read CPU s | ratio | "
          "block |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, runs in results.items():
        for tool in tools:
            rs = runs[tool]
            dws = [durable(r) for r in rs]
            print(f"| {kind} | {tool} | {gb / med(rs, 'write_s'):.2f} ({gb / best(rs, 'write_s'):.2f}) | "
                  f"{gb / statistics.median(dws):.2f} ({gb / min(dws):.2f}) | "
                  f"{gb / med(rs, 'read_s'):.2f} ({gb / best(rs, 'read_s'):.2f}) | "
                  f"{med(rs, 'write_cpu_s'):.2f} | {med(rs, 'read_cpu_s'):.2f} | "
                  f"{n * 8 / rs[0]['cbytes']:.2f} | {rs[0]['blocksize']} |")
    print()
    print("blz over peer: speed ratios (> 1: blz faster) from the medians (and from the best "
          "runs), CPU ratios (> 1: blz uses less), compression ratio ratio (> 1: blz smaller).")
    print()
    print("| data | vs | write | durable write | read | write CPU | read CPU | compression |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, runs in results.items():
        b = runs["blz"]
        for peer in tools[1:]:
            q = runs[peer]
            ratio = lambda f: f"{f(med, q) / f(med, b):.2f}x ({f(best, q) / f(best, b):.2f}x)"
            dq = [durable(r) for r in q]
            db = [durable(r) for r in b]
            print(f"| {kind} | {peer} | {ratio(lambda m, rs: m(rs, 'write_s'))} | "
                  f"{statistics.median(dq) / statistics.median(db):.2f}x "
                  f"({min(dq) / min(db):.2f}x) | "
                  f"{ratio(lambda m, rs: m(rs, 'read_s'))} | "
                  f"{med(q, 'write_cpu_s') / med(b, 'write_cpu_s'):.2f}x | "
                  f"{med(q, 'read_cpu_s') / med(b, 'read_cpu_s'):.2f}x | "
                  f"{q[0]['cbytes'] / b[0]['cbytes']:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(n=n, args=vars(args), results=results), f, indent=1)


if __name__ == "__main__":
    main()
