#!/usr/bin/env python3
"""Live bcolz -> blz check: the real bcolz writes fresh carrays and ctables of random data
(`write DIR`), `blz import` imports them and `blz get --out` / `--out-dir` exports the
result as .npy (run.sh does that), and `compare DIR` checks that every exported array is
what bcolz itself reads back: same dtype, shape and bytes.

Each run draws new data, dtypes, chunk lengths and compression settings; the seed is printed
(pass --seed to repeat a run). DIR/manifest.json lists what was written.
"""
import argparse
import json
import os
import sys
import time

import bcolz
import numpy as np

DTYPES = ["int32", "int64", "float32", "float64", "bool", "uint8", "int16", ">i4", "<f8",
          "S8", "U5"]
CNAMES = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]


def random_values(rng, dtype, shape):
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "b":
        v = rng.random(n) < 0.3
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, n, dtype=dt.newbyteorder("="), endpoint=True)
    elif dt.kind == "f":
        v = np.cumsum(rng.standard_normal(n))
    elif dt.kind == "S":
        words = [b"", b"a", b"bcolz", b"12345678", b"x\x00y"]
        v = np.array([words[i] for i in rng.integers(0, len(words), n)], dtype=dt)
    else:
        words = ["", "ä", "héllo", "日本", "abcde"]
        v = np.array([words[i] for i in rng.integers(0, len(words), n)], dtype=dt)
    return np.asarray(v).astype(dt).reshape(shape)


def random_cparams(rng):
    return bcolz.cparams(clevel=int(rng.integers(0, 10)), shuffle=int(rng.integers(0, 3)),
                         cname=CNAMES[int(rng.integers(0, len(CNAMES)))])


def write(base, seed):
    rng = np.random.default_rng(seed)
    os.makedirs(base, exist_ok=True)
    items = []
    for i, dtype in enumerate(DTYPES):
        n = int(rng.integers(0, 20000))
        shape = (n,) if i % 4 else (n, int(rng.integers(1, 5)))
        name = "carray%d" % i
        a = bcolz.carray(random_values(rng, dtype, shape), rootdir=os.path.join(base, name),
                         mode="w", chunklen=int(rng.integers(1, 3000)),
                         cparams=random_cparams(rng))
        a.attrs["seed"] = seed
        a.attrs["i"] = i
        a.flush()
        if i == 1:
            # Rows appended after the last flush are not committed: bcolz drops them.
            a.append(random_values(rng, dtype, (int(rng.integers(1, 5000)),) + shape[1:]))
        items.append({"name": name, "kind": "carray"})
    n = int(rng.integers(1, 20000))
    dts = [DTYPES[j] for j in rng.choice(len(DTYPES), 5, replace=False)]
    names = ["c%d" % j for j in range(len(dts))]
    t = bcolz.ctable([random_values(rng, d, (n,)) for d in dts], names=names,
                     rootdir=os.path.join(base, "ctable"), mode="w",
                     chunklen=int(rng.integers(1, 3000)), cparams=random_cparams(rng))
    t.attrs["seed"] = seed
    t.flush()
    items.append({"name": "ctable", "kind": "ctable", "names": names})
    with open(os.path.join(base, "manifest.json"), "w") as f:
        json.dump({"seed": seed, "items": items}, f)
    return items


def same(what, want, got):
    if got.shape != want.shape:
        return "%s: shape %s, bcolz reads %s" % (what, got.shape, want.shape)
    if got.dtype.kind != want.dtype.kind or got.dtype.itemsize != want.dtype.itemsize:
        return "%s: dtype %s, bcolz reads %s" % (what, got.dtype, want.dtype)
    if got.astype(want.dtype).tobytes() != want.tobytes():
        bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
        return "%s: %d values differ, first at %s" % (what, len(bad), bad[:1])
    return None


def compare(base):
    with open(os.path.join(base, "manifest.json")) as f:
        m = json.load(f)
    errors = []
    checked = 0
    for it in m["items"]:
        obj = bcolz.open(os.path.join(base, it["name"]), mode="r")
        if it["kind"] == "carray":
            got = np.load(os.path.join(base, "out", it["name"] + ".npy"))
            errors.append(same(it["name"], obj[:], got))
            checked += 1
        else:
            for name in it["names"]:
                got = np.load(os.path.join(base, "out", it["name"], name + ".npy"))
                errors.append(same("%s/%s" % (it["name"], name), obj[name][:], got))
                checked += 1
    errors = [e for e in errors if e]
    for e in errors:
        print("MISMATCH", e)
    print("compared %d arrays with what bcolz reads (seed %d): %s"
          % (checked, m["seed"], "FAILED" if errors else "identical"))
    return 1 if errors else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("write", help="bcolz writes carrays, a ctable and DIR/manifest.json")
    p.add_argument("dir")
    p.add_argument("--seed", type=int, default=None)
    p = sub.add_parser("list", help="print kind and name of each item written to DIR")
    p.add_argument("dir")
    p = sub.add_parser("compare", help="DIR/out/*.npy hold what bcolz reads from DIR")
    p.add_argument("dir")
    args = parser.parse_args(argv)
    if args.cmd == "write":
        seed = args.seed if args.seed is not None else int(time.time() * 1000) % 2**31
        items = write(args.dir, seed)
        print("bcolz %s wrote %d carrays and ctables to %s (seed %d)"
              % (bcolz.__version__, len(items), args.dir, seed))
        return 0
    if args.cmd == "list":
        with open(os.path.join(args.dir, "manifest.json")) as f:
            for it in json.load(f)["items"]:
                print(it["kind"], it["name"])
        return 0
    return compare(args.dir)


if __name__ == "__main__":
    sys.exit(main())
