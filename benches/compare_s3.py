"""blz against zarr-python (over obstore) on the same S3 server: write and whole-read
throughput, and the requests each operation costs.

    bash tests/s3/run.sh target/py-venv/bin/python benches/compare_s3.py [N]

(tests/s3/run.sh starts a local moto server and sets AWS_ENDPOINT_URL and the test bucket;
target/py-venv needs `pip install zarr obstore` beside blz.) N float64 elements (default
1e7, 80 MB), a random walk, chunks of 1e6 elements, Blosc lz4 clevel 5 with byte shuffle for
both. Throughput is measured against the server, best of three; requests are counted from
moto's request recorder (by HTTP method), in a separate pass.
"""

import os
import re
import sys
import time
import urllib.request
import uuid

import numpy as np

import blz
import zarr
from obstore.store import S3Store
from zarr.codecs import BloscCodec
from zarr.storage import ObjectStore

BUCKET = os.environ["BLZ_S3_TEST_BUCKET"]
ENDPOINT = os.environ["AWS_ENDPOINT_URL"]
N = int(float(sys.argv[1])) if len(sys.argv) > 1 else 10_000_000
CHUNK = 1_000_000
COUNT_N = 2_000_000


def moto(path, method="POST"):
    req = urllib.request.Request(ENDPOINT + path, method=method, data=b"" if method == "POST" else None)
    return urllib.request.urlopen(req).read()


def recorded():
    """Requests the server saw since the last call, by HTTP method (moto's request recorder)."""
    text = moto("/moto-api/recorder/download-recording", "GET").decode("utf-8", "replace")
    moto("/moto-api/recorder/reset-recording")
    out = {}
    # One JSON record per request; bodies may hold anything, so the methods are found by
    # their key rather than by parsing lines.
    for m in re.findall(r'"method": ?"([A-Z]+)"', text):
        out[m] = out.get(m, 0) + 1
    return out


def zarr_store(prefix, endpoint):
    s3 = S3Store(
        BUCKET,
        prefix=prefix,
        endpoint=endpoint,
        region=os.environ.get("AWS_REGION", "us-east-1"),
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        client_options={"allow_http": True},
    )
    return ObjectStore(s3)


def blz_ops(url, data, more, per_file=None):
    return {
        "create": lambda: blz.create(
            url, data, chunks=(CHUNK,), codec="lz4", clevel=5, filter="shuffle", superchunksize=per_file
        ),
        "open": lambda: blz.open(url),
        "read 10": lambda: blz.open(url)[data.shape[0] // 2 + 12345 : data.shape[0] // 2 + 12355],
        "read all": lambda: blz.open(url)[:],
        "append": lambda: blz.open(url, "r+").append(more),
    }


def zarr_ops(prefix, endpoint, data, more):
    def create():
        a = zarr.create_array(
            store=zarr_store(prefix, endpoint),
            shape=data.shape,
            chunks=(CHUNK,),
            dtype=data.dtype,
            compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
            overwrite=True,
        )
        a[:] = data

    def append():
        a = zarr.open_array(store=zarr_store(prefix, endpoint), mode="r+")
        n = a.shape[0]
        a.resize((n + more.shape[0],))
        a[n:] = more

    return {
        "create": create,
        "open": lambda: zarr.open_array(store=zarr_store(prefix, endpoint), mode="r"),
        "read 10": lambda: zarr.open_array(store=zarr_store(prefix, endpoint), mode="r")[
            data.shape[0] // 2 + 12345 : data.shape[0] // 2 + 12355
        ],
        "read all": lambda: zarr.open_array(store=zarr_store(prefix, endpoint), mode="r")[:],
        "append": append,
    }


def timed(f):
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


def main():
    rng = np.random.default_rng(42)
    data = np.cumsum(rng.standard_normal(N))
    more = np.cumsum(rng.standard_normal(100_000))
    gb = data.nbytes / 1e9

    # Requests per operation, from the server's request log (which holds every body: on
    # 2e6 elements, two chunks, to keep it small), first, on a fresh server.
    small = data[:COUNT_N]
    key = f"bench-{uuid.uuid4().hex}"
    counts = {}
    moto("/moto-api/recorder/start-recording")
    moto("/moto-api/recorder/reset-recording")  # makes the (empty) recording
    for name, ops in (
        ("blz", blz_ops(f"s3://{BUCKET}/{key}/x.blz", small, more)),
        ("zarr", zarr_ops(f"{key}/x.zarr", ENDPOINT, small, more)),
    ):
        for op in ("create", "open", "read 10", "read all", "append"):
            recorded()
            ops[op]()
            counts[(name, op)] = recorded()
    moto("/moto-api/recorder/stop-recording")
    # Throughput, straight to the server: best of three fresh creates, and reads of each.
    # blz twice: superchunk files of its default size (64 MiB of chunks), and of one chunk
    # each (one object per chunk, as zarr stores them).
    rows = []
    for name in ("blz", "blz sc=1", "zarr"):
        w, r = [], []
        for _ in range(3):
            key = f"bench-{uuid.uuid4().hex}"
            if name.startswith("blz"):
                per_file = 1 if name == "blz sc=1" else None
                ops = blz_ops(f"s3://{BUCKET}/{key}/x.blz", data, more, per_file)
            else:
                ops = zarr_ops(f"{key}/x.zarr", ENDPOINT, data, more)
            dt, _ = timed(ops["create"])
            w.append(dt)
            dt, got = timed(ops["read all"])
            r.append(dt)
            assert np.array_equal(np.asarray(got), data)
        rows.append((name, gb / min(w), gb / min(r)))
    print(f"{N} float64 ({data.nbytes / 1e6:.0f} MB random walk), chunks {CHUNK}, lz4 5 shuffle, moto on loopback")
    print(f"{'':9} {'write GB/s':>11} {'read GB/s':>10} {'write/zarr':>11} {'read/zarr':>10}")
    zw, zr = rows[-1][1], rows[-1][2]
    for name, w, r in rows:
        print(f"{name:9} {w:11.3f} {r:10.3f} {w / zw:11.2f} {r / zr:10.2f}")

    print(f"\nrequests per operation (by method), on {COUNT_N} elements ({COUNT_N // CHUNK} chunks)")
    for op in ("create", "open", "read 10", "read all", "append"):
        cells = []
        for name in ("blz", "zarr"):
            c = counts[(name, op)]
            detail = " ".join(f"{m}:{n}" for m, n in sorted(c.items()))
            cells.append(f"{sum(c.values()):4d} ({detail})")
        print(f"{op:9} blz {cells[0]:30} zarr {cells[1]}")


if __name__ == "__main__":
    main()
