"""Appends of one chunk to a dataset of many superchunk files on S3, whose early files'
entries are in manifests: the requests each append makes (by kind, counted by
latency_proxy) and the time of an open for writing plus the append, at 0 and 20 ms added
per request.

    bash tests/s3/run.sh target/py-venv/bin/python benches/s3_append.py [--files N]
        [--build NAME=DIR ...]

Each --build names a directory holding an unpacked blz wheel (the `blz` package, put first
on PYTHONPATH): the builds grow a dataset each (N files of one 8 KB chunk, sealing
manifests at 4 KiB, BLZ_S3_MANIFEST_BYTES) and then take turns, four rounds of five
appends each per latency, in fresh processes, so that two builds compare side by side in
one run. Without --build, the blz the interpreter imports is measured alone. Prints the
median and quartiles of each build's open + append and its requests per append.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency_proxy import LatencyProxy  # noqa: E402

GROW = r"""
import blz, numpy as np, sys
u, n = sys.argv[1], int(sys.argv[2])
blz.create(u, np.arange(1000, dtype=np.int64), chunks=(1000,), superchunksize=1)
for i in range(1, n):
    blz.open(u, "r+").append(np.arange(1000 * i, 1000 * (i + 1), dtype=np.int64))
"""

TIME = r"""
import blz, numpy as np, sys, time, json
u, k = sys.argv[1], int(sys.argv[2])
out = []
for i in range(k):
    a = np.full(1000, i, dtype=np.int64)
    t = time.perf_counter()
    blz.open(u, "r+").append(a)
    out.append(time.perf_counter() - t)
print(json.dumps(out))
"""


def run(build: str | None, code: str, *args, endpoint: str) -> str:
    env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, BLZ_S3_MANIFEST_BYTES="4096")
    if build:
        env["PYTHONPATH"] = build + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True, text=True
    )
    if r.returncode:
        sys.exit(r.stderr)
    return r.stdout


def kind(path: str) -> str:
    if "/manifests/" in path:
        return "manifest"
    if path.endswith("/meta/state"):
        return "state"
    return "data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=400)
    ap.add_argument("--build", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    builds = dict(b.split("=", 1) for b in args.build) or {"blz": None}
    bucket = os.environ["BLZ_S3_TEST_BUCKET"]
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    run_id = uuid.uuid4().hex
    urls = {name: f"s3://{bucket}/append-{run_id}/{name}.blz" for name in builds}
    for name, u in urls.items():
        t = time.perf_counter()
        run(builds[name], GROW, u, args.files, endpoint=endpoint)
        print(f"{name}: grew {args.files} files in {time.perf_counter() - t:.1f} s", flush=True)
    k = 5
    for delay in (0, 20):
        times: dict[str, list[float]] = {n: [] for n in builds}
        reqs: dict[str, list[float]] = {n: [] for n in builds}
        with LatencyProxy(endpoint, delay_ms=delay) as proxy:
            for rnd in range(args.rounds):
                order = list(builds) if rnd % 2 == 0 else list(reversed(builds))
                for name in order:
                    proxy.take()
                    times[name] += json.loads(
                        run(builds[name], TIME, urls[name], k, endpoint=proxy.url)
                    )
                    got = proxy.take()
                    reqs[name].append(len(got) / k)
                    if rnd == 0:
                        kinds: dict[str, int] = {}
                        for q in got:
                            key = f"{q.method} {kind(q.path)}"
                            kinds[key] = kinds.get(key, 0) + 1
                        print(f"  {name} +{delay} ms, requests of {k} appends: {kinds}", flush=True)
        for name in builds:
            ts = sorted(times[name])
            q = len(ts) // 4
            print(
                f"+{delay} ms {name}: open + append median {statistics.median(ts) * 1e3:.1f} ms "
                f"(quartiles {ts[q] * 1e3:.1f}-{ts[-1 - q] * 1e3:.1f}), "
                f"{statistics.mean(reqs[name]):.1f} requests per append",
                flush=True,
            )


if __name__ == "__main__":
    main()
