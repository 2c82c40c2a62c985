"""When each request of a create on S3 goes out: blz's request log (BLZ_S3_REQUEST_LOG),
each line timestamped as it arrives, for a few creates of the 80 MB bench array, with the
create's total time.

    bash tests/s3/run.sh target/py-venv/bin/python benches/s3_write_profile.py [N] [--latency-ms MS]

Same data and codec as benches/compare_s3.py (N float64 random walk, chunks of 1e6, lz4 5
shuffle). With --latency-ms, benches/latency_proxy.py holds every request MS milliseconds
(a server MS further away). The first create of a process also builds the S3 client.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_s3 import BUCKET, CHUNK, SERVER  # noqa: E402
from latency_proxy import LatencyProxy  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", nargs="?", default="1e7")
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--creates", type=int, default=4)
    args = p.parse_args()
    n = int(float(args.n))
    log = tempfile.NamedTemporaryFile(prefix="blz-requests-", delete=False).name
    os.environ["BLZ_S3_REQUEST_LOG"] = log
    import blz  # after the variable: blz opens its log once per process

    data = np.cumsum(np.random.default_rng(0).standard_normal(n))
    seen: list[tuple[float, str]] = []
    stop = threading.Event()

    def tail():
        with open(log) as f:
            while not stop.is_set():
                line = f.readline()
                if line:
                    seen.append((time.perf_counter(), line.strip()))
                else:
                    time.sleep(0.0005)

    t = threading.Thread(target=tail, daemon=True)
    t.start()
    with LatencyProxy(SERVER, args.latency_ms) as proxy:
        os.environ["AWS_ENDPOINT_URL"] = proxy.url
        print(f"{n} float64, {data.nbytes / 1e6:.0f} MB; +{args.latency_ms:g} ms per request")
        for _ in range(args.creates):
            key = f"wprof-{uuid.uuid4().hex}"
            url = f"s3://{BUCKET}/{key}/x.blz"
            time.sleep(0.05)
            seen.clear()
            start = time.perf_counter()
            blz.create(url, data, chunks=(CHUNK,), codec="lz4", clevel=5, filter="shuffle")
            took = time.perf_counter() - start
            time.sleep(0.02)
            print(f"create {took * 1000:.0f} ms, {data.nbytes / took / 1e9:.3f} GB/s")
            for at, line in list(seen):
                method, rest = line.split(" ", 1)
                print(f"  {1000 * (at - start):7.1f} ms  {method} {rest.replace(url + '/', '')}")
    stop.set()
    t.join()
    os.remove(log)


if __name__ == "__main__":
    main()
