#!/usr/bin/env python3
"""Variable-length strings: blz (a `varstr` table column) against zarr 3 (vlen-utf8 + zstd),
on the same 1e6 strings of 5-50 bytes, in one run. Prints write and read times, sizes and
the ratios.

Run from the repository root:
    PY=$(../shared/peers/setup.sh); $PY benches/compare_strings.py [--n 1000000] [--reps 3]
"""
import argparse, json, os, shutil, subprocess, tempfile, time

import numpy as np
import zarr


def strings(n, seed=7):
    rng = np.random.default_rng(seed)
    lens = rng.integers(5, 51, size=n)
    words = ["blz", "chunk", "array", "store", "bloscpack", "superchunk", "zarr", "column",
             "value", "row", "index", "filter", "layer", "ratio"]
    out = []
    for i, ln in enumerate(lens):
        s = "-".join(words[(i * 7 + j) % len(words)] for j in range(ln // 4 + 1)) + str(i)
        out.append(s[:ln])
    return out


def best(f, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        r = f()
        times.append(time.perf_counter() - t)
    return min(times), r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "strings_io"], cwd=root, check=True)
    target = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
                                       cwd=root, check=True, capture_output=True).stdout)["target_directory"]
    exe = os.path.join(target, "release", "examples", "strings_io")
    work = tempfile.mkdtemp(prefix="blz-strings-")
    try:
        data = strings(a.n)
        raw = sum(len(s) for s in data)
        src = os.path.join(work, "in.txt")
        with open(src, "w") as f:
            f.write("\n".join(data) + "\n")
        arr = np.array(data, dtype=object)
        zp = os.path.join(work, "s.zarr")

        def zwrite():
            z = zarr.create_array(zp, shape=(a.n,), dtype=str, chunks=(8192,), overwrite=True)
            z[:] = arr
            return z

        blz, zws, zrs = [], [], []
        for _ in range(a.reps):  # alternate the two so both see the same machine load
            out = subprocess.run([exe, src, os.path.join(work, "s.blz")], check=True, capture_output=True, text=True)
            blz.append(json.loads(out.stdout))
            zws.append(best(zwrite, 1)[0])
            t, back = best(lambda: zarr.open_array(zp, mode="r")[:], 1)
            zrs.append(t)
        assert list(back[:5]) == data[:5]
        bw = min(r["write_s"] for r in blz)
        br = min(r["read_s"] for r in blz)
        bc = blz[-1]["cbytes"]
        zw, zr = min(zws), min(zrs)
        zc = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(zp) for f in fs)
        print(f"{a.n} strings, {raw / 1e6:.1f} MB of text (best of {a.reps}, alternating)")
        print(f"{'':8}{'write s':>10}{'read s':>10}{'stored MB':>11}{'B/string':>10}")
        print(f"{'blz':8}{bw:10.3f}{br:10.3f}{bc / 1e6:11.2f}{bc / a.n:10.2f}")
        print(f"{'zarr':8}{zw:10.3f}{zr:10.3f}{zc / 1e6:11.2f}{zc / a.n:10.2f}")
        print(f"blz vs zarr: write {zw / bw:.2f}x faster, read {zr / br:.2f}x faster, size {bc / zc:.2f}x of zarr's")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
