"""Where the time of a whole read from S3 goes, blz against zarr-python: the requests each
read makes (from blz's request log, BLZ_S3_REQUEST_LOG, and from latency_proxy's count), their
sizes and start times, the read's time under blz's read settings (BLZ_S3_PART_SIZE,
BLZ_S3_CONCURRENCY, BLZ_S3_COALESCE), and two floors: the same bytes fetched by obstore
alone with blz's request pattern and with zarr's, and blz's decode of the same dataset from a
local file.

    bash tests/s3/run_s3s.sh target/py-venv/bin/python benches/s3_read_profile.py [N] [--latency-ms MS]

Same data and codec as benches/compare_s3.py (N float64 random walk, chunks of 1e6, lz4 5
shuffle). Times are the best of --repeat (3).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import blz
import obstore
import zarr
from obstore.store import S3Store

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_s3 import BUCKET, CHUNK, KEY_ID, REGION, SECRET, SERVER, blosc_zarr, zarr_store  # noqa: E402
from latency_proxy import LatencyProxy  # noqa: E402

TUNINGS = [
    ("default (part 16 MiB, 32 in flight, coalesce 1 MiB)", {}),
    ("part 8 MiB", {"BLZ_S3_PART_SIZE": str(8 << 20)}),
    ("part 4 MiB", {"BLZ_S3_PART_SIZE": str(4 << 20)}),
    ("part 2 MiB", {"BLZ_S3_PART_SIZE": str(2 << 20)}),
    ("part 1 MiB", {"BLZ_S3_PART_SIZE": str(1 << 20)}),
    ("coalesce 0", {"BLZ_S3_COALESCE": "0"}),
    ("coalesce 0, part 4 MiB", {"BLZ_S3_COALESCE": "0", "BLZ_S3_PART_SIZE": str(4 << 20)}),
    ("32 in flight -> 8", {"BLZ_S3_CONCURRENCY": "8"}),
]


def raw_store(endpoint):
    return S3Store(
        BUCKET,
        endpoint=endpoint,
        region=REGION,
        access_key_id=KEY_ID,
        secret_access_key=SECRET,
        client_options={"allow_http": True},
    )


def best(f, repeat):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


class Log:
    """The lines blz appended to its request log since the last take()."""

    def __init__(self, path):
        self.path = path
        self.at = 0

    def take(self):
        with open(self.path) as f:
            f.seek(self.at)
            text = f.read()
            self.at = f.tell()
        return text.splitlines()


def describe(lines, url):
    """(GETs, summary) of blz's log lines for one read."""
    out = []
    gets = []
    for line in lines:
        parts = line.split()
        method, obj = parts[0], parts[1][len(url) + 1 :]
        m = re.search(r"bytes=(\d+)-(\d+)", line)
        size = int(m.group(2)) - int(m.group(1)) + 1 if m else None
        gets.append((method, obj, size))
    by_kind = {}
    for method, obj, size in gets:
        kind = f"{method} {obj.split('/')[0]}/{'…' if '/' in obj else ''}" if size else f"{method} {obj} (whole)"
        by_kind.setdefault(kind, []).append(size)
    for kind, sizes in by_kind.items():
        if sizes[0] is None:
            out.append(f"{len(sizes)} x {kind}")
        else:
            mib = [s / (1 << 20) for s in sizes]
            out.append(f"{len(sizes)} x {kind} ranged, {min(mib):.2f}-{max(mib):.2f} MiB, {sum(mib):.1f} MiB in all")
    return gets, "; ".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", nargs="?", default="1e7")
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    n = int(float(args.n))
    own_log = not os.environ.get("BLZ_S3_REQUEST_LOG")
    if own_log:
        # Opened once per process, at blz's first S3 request: set before any.
        fd, path = tempfile.mkstemp(prefix="blz-requests-")
        os.close(fd)
        os.environ["BLZ_S3_REQUEST_LOG"] = path
    log = Log(os.environ["BLZ_S3_REQUEST_LOG"])
    data = np.cumsum(np.random.default_rng(42).standard_normal(n))
    gb = data.nbytes / 1e9
    print(f"{n} float64, {data.nbytes / 1e6:.0f} MB; +{args.latency_ms:g} ms per request; load {os.getloadavg()[0]:.2f}")

    key = f"profile-{uuid.uuid4().hex}"
    url = f"s3://{BUCKET}/{key}/x.blz"
    url1 = f"s3://{BUCKET}/{key}/x1.blz"
    os.environ["AWS_ENDPOINT_URL"] = SERVER
    blz.create(url, data, chunks=(CHUNK,), codec="lz4", clevel=5, filter="shuffle")
    blz.create(url1, data, chunks=(CHUNK,), codec="lz4", clevel=5, filter="shuffle", superchunksize=1)
    z = zarr.create_array(
        store=zarr_store(f"{key}/x.zarr", SERVER),
        shape=data.shape,
        chunks=(CHUNK,),
        dtype=data.dtype,
        compressors=blosc_zarr(),
    )
    z[:] = data
    log.take()

    # Decode floor: the same dataset from a local file (page cache warm).
    with tempfile.TemporaryDirectory() as d:
        local = blz.create(f"{d}/x.blz", data, chunks=(CHUNK,), codec="lz4", clevel=5, filter="shuffle")
        del local
        blz.open(f"{d}/x.blz")[:]
        t_local = best(lambda: blz.open(f"{d}/x.blz")[:], args.repeat)
    print(f"blz local read (decode floor, same chunks): {t_local * 1e3:.0f} ms, {gb / t_local:.2f} GB/s")

    proxy = LatencyProxy(SERVER, args.latency_ms)
    with proxy:
        os.environ["AWS_ENDPOINT_URL"] = proxy.url
        zs = zarr_store(f"{key}/x.zarr", proxy.url)

        def zread():
            return zarr.open_array(store=zs, mode="r")[:]

        zread()
        proxy.take()
        t_z = best(zread, args.repeat)
        zreqs = proxy.take()
        print(f"\nzarr read all: {t_z * 1e3:.0f} ms, {gb / t_z:.3f} GB/s, {len(zreqs) // args.repeat} requests per read")

        print("\nblz read all, by read setting (best of", args.repeat, ")")
        default_lines = []
        for label, env in TUNINGS:
            for k in ("BLZ_S3_PART_SIZE", "BLZ_S3_COALESCE", "BLZ_S3_CONCURRENCY"):
                os.environ.pop(k, None)
            os.environ.update(env)
            for name, u in (("blz", url), ("blz sc=1", url1)):
                blz.open(u)[:]
                log.take()
                proxy.take()
                t0 = time.perf_counter()
                t = best(lambda: blz.open(u)[:], args.repeat)
                lines = log.take()
                reqs = proxy.take()
                per = len(lines) // args.repeat
                gets, summary = describe(lines[:per], u)
                print(f"  {label:48} {name:9} {t * 1e3:6.0f} ms {gb / t:6.3f} GB/s  {per} requests: {summary}")
                if name == "blz" and not env:
                    default_lines = lines[:per]
                    # When each request of the first read started, from the proxy.
                    first = sorted(r.t for r in reqs)[:per]
                    starts = ", ".join(f"{(x - t0) * 1e3:.0f}" for x in first)
                    print(f"{'':60} request starts (ms after the read began): {starts}")
        for k in ("BLZ_S3_PART_SIZE", "BLZ_S3_COALESCE", "BLZ_S3_CONCURRENCY"):
            os.environ.pop(k, None)

        # Network floors: the bytes alone, fetched by obstore (Rust, object_store, 10 or 32
        # requests in flight), with blz's default request pattern and with zarr's.
        store = raw_store(proxy.url)
        blz_ranges = []
        for line in default_lines:
            m = re.match(r"GET s3://[^/]+/(\S+) bytes=(\d+)-(\d+)", line)
            if m:
                blz_ranges.append((m.group(1), int(m.group(2)), int(m.group(3)) + 1))

        # obstore's sync calls from a thread pool (its asyncio calls under asyncio.run
        # cost ~0.4 s of start-up each here).
        def fetch_ranges():
            with ThreadPoolExecutor(32) as ex:
                return list(ex.map(lambda r: obstore.get_range(store, r[0], start=r[1], end=r[2]), blz_ranges))

        def fetch_zarr():
            objs = [f"{key}/x.zarr/c/{i}" for i in range((n + CHUNK - 1) // CHUNK)]
            with ThreadPoolExecutor(10) as ex:
                return list(ex.map(lambda o: obstore.get(store, o).bytes(), objs))

        t_r = best(lambda: fetch_ranges(), args.repeat)
        nb = sum(b - a for _, a, b in blz_ranges)
        print(f"\nobstore alone, blz's {len(blz_ranges)} ranged GETs ({nb / 1e6:.1f} MB, 32 in flight): {t_r * 1e3:.0f} ms")
        t_zr = best(lambda: fetch_zarr(), args.repeat)
        print(f"obstore alone, zarr's chunk objects whole (10 in flight): {t_zr * 1e3:.0f} ms")
    os.environ["AWS_ENDPOINT_URL"] = SERVER
    if own_log:
        os.remove(os.environ["BLZ_S3_REQUEST_LOG"])


if __name__ == "__main__":
    main()
