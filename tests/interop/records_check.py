#!/usr/bin/env python3
"""Live numpy -> blz check for record (structured) .npy files: numpy writes records with
nested, padded (aligned), big-endian, string, complex and bool fields (`write DIR`);
run.sh has `blz create --npy` make tables of them, `blz append --npy` add more records and
`blz get --out-dir` export every column and `blz get --out` the whole table as records;
`compare DIR` checks that each exported column and each field of the exported records is
the field numpy reads from the files, in value and in (native-order) dtype.

Each run draws new data; the seed is printed (pass --seed to repeat a run).
"""
import argparse
import json
import os
import time

import numpy as np

DTYPES = [
    # Nested record, big-endian fields, every kind blz stores.
    np.dtype([("id", "<i8"), ("pos", [("x", ">f4"), ("y", "<f8")]), ("name", "S7"),
              ("label", "<U3"), ("ok", "?"), ("z", "<c16"), ("w", ">c8"), ("u", ">u2")]),
    # Padding between and after fields.
    np.dtype([("a", "u1"), ("b", "<i4"), ("c", "u1")], align=True),
]


def values(rng, dt, n):
    a = np.zeros(n, dtype=dt)

    def fill(view, sub):
        if sub.names:
            for name in sub.names:
                fill(view[name], sub.fields[name][0])
        elif sub.kind == "b":
            view[...] = rng.random(n) < 0.4
        elif sub.kind in "iu":
            info = np.iinfo(sub)
            view[...] = rng.integers(info.min, info.max, n, dtype=sub.newbyteorder("="))
        elif sub.kind == "f":
            view[...] = np.cumsum(rng.standard_normal(n))
        elif sub.kind == "c":
            view[...] = rng.standard_normal(n) + 1j * rng.standard_normal(n)
        elif sub.kind == "S":
            view[...] = [b"r%d" % k for k in rng.integers(0, 10 ** 5, n)]
        elif sub.kind == "U":
            view[...] = [chr(0x3b1 + k % 20) * (1 + k % 3) for k in rng.integers(0, 100, n)]

    fill(a, dt)
    return a


def leaves(dt, prefix=""):
    for name in dt.names:
        sub = dt.fields[name][0]
        path = prefix + name
        if sub.names:
            yield from leaves(sub, path + ".")
        else:
            yield path


def field(a, path):
    for part in path.split("."):
        a = a[part]
    return a


def write(base, seed):
    rng = np.random.default_rng(seed)
    os.makedirs(base, exist_ok=True)
    items = []
    for i, dt in enumerate(DTYPES):
        # Sizes across several chunks, plus an append of a partial chunk.
        n, m = int(rng.integers(20_000, 120_000)), int(rng.integers(1, 5_000))
        np.save(os.path.join(base, f"rec{i}.npy"), values(rng, dt, n))
        np.save(os.path.join(base, f"more{i}.npy"), values(rng, dt, m))
        items.append({"name": f"rec{i}", "more": f"more{i}"})
    with open(os.path.join(base, "manifest.json"), "w") as f:
        json.dump(items, f)
    print(f"numpy {np.__version__} wrote {len(items)} record files to {base} (seed {seed})")


def compare(base):
    with open(os.path.join(base, "manifest.json")) as f:
        items = json.load(f)
    bad = 0
    for it in items:
        bad_before = bad
        want = np.concatenate([np.load(os.path.join(base, it["name"] + ".npy")),
                               np.load(os.path.join(base, it["more"] + ".npy"))])
        out = os.path.join(base, "out", it["name"])
        for path in leaves(want.dtype):
            w = field(want, path)
            got = np.load(os.path.join(out, path + ".npy"))
            native = w.dtype.newbyteorder("=")
            if got.dtype.newbyteorder("=") != native or not np.array_equal(got, w):
                first = np.flatnonzero(got != w)[:3] if got.shape == w.shape else "shape"
                print(f"{it['name']}/{path}: blz exported {got.dtype} {got.shape}, numpy "
                      f"reads {w.dtype} {w.shape}; first differences at {first}")
                bad += 1
        # The whole table exported as records: the same fields, packed, in native order.
        rec = np.load(os.path.join(base, "out", it["name"] + ".records.npy"))
        for path in leaves(want.dtype):
            w, got = field(want, path), field(rec, path)
            if got.dtype.newbyteorder("=") != w.dtype.newbyteorder("=") or \
                    not np.array_equal(got, w):
                print(f"{it['name']}.records.npy/{path}: blz wrote {got.dtype}, numpy reads "
                      f"{w.dtype}; values {'equal' if np.array_equal(got, w) else 'differ'}")
                bad += 1
        if list(leaves(rec.dtype)) != list(leaves(want.dtype)):
            print(f"{it['name']}.records.npy: fields {rec.dtype} for {want.dtype}")
            bad += 1
        print(f"{it['name']}: {len(list(leaves(want.dtype)))} columns of {len(want)} "
              f"records {'differ' if bad > bad_before else 'match'}")
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    w.add_argument("--seed", type=int, default=None)
    c = sub.add_parser("compare")
    c.add_argument("dir")
    sub.add_parser("list").add_argument("dir")
    a = p.parse_args()
    if a.cmd == "write":
        write(a.dir, a.seed if a.seed is not None else int(time.time() * 1000) % 2 ** 31)
    elif a.cmd == "list":
        with open(os.path.join(a.dir, "manifest.json")) as f:
            for it in json.load(f):
                print(it["name"], it["more"])
    else:
        raise SystemExit(compare(a.dir))


if __name__ == "__main__":
    main()
