"""blz.dask.to_blz against dask's store into zarr (zarr-python 3 over obstore), both writing
a dask array from a two-worker distributed cluster to the same S3 server.

    bash tests/s3/run.sh     target/py-venv/bin/python benches/dask_s3.py [N]
    bash tests/s3/run_s3s.sh target/py-venv/bin/python benches/dask_s3.py [N]

(target/py-venv needs `pip install zarr obstore` beside blz.) N float64 elements (default
1e8, 800 MB): a random walk made block by block on the workers (seeded per block, so both
stores get the same values), chunks of 1e6 elements, Blosc lz4 clevel 5 with byte shuffle
for both. blz writes superchunk files of its default size on an object store (16 MiB: 2
chunks, one task per file; `--superchunksize N` sets N chunks per file); zarr one object per
chunk. Each write is timed from the graph's submission to its commit
(blz: the one conditional write of the state; zarr: the last chunk stored), best of
--repeat (2); each result is then read back whole and compared with the source, block by
block on the cluster.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import numpy as np

CHUNK = 1_000_000
BUCKET = os.environ["BLZ_S3_TEST_BUCKET"]


def walk(block, block_info=None):
    """The block's part of the random walk (seeded by the block's position)."""
    loc = block_info[None]["chunk-location"][0] if block_info else 0
    rng = np.random.default_rng(1_000 + loc)
    return (np.cumsum(rng.standard_normal(block.shape[0])) + loc * 10.0).astype("f8")


def source(n):
    import dask.array as da

    return da.zeros(n, chunks=CHUNK, dtype="f8").map_blocks(walk, dtype="f8")


def zarr_array(prefix, n):
    import zarr
    from obstore.store import S3Store
    from zarr.codecs import BloscCodec
    from zarr.storage import ObjectStore

    s3 = S3Store(
        BUCKET,
        prefix=prefix,
        endpoint=os.environ["AWS_ENDPOINT_URL"],
        region=os.environ.get("AWS_REGION", "us-east-1"),
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        client_options={"allow_http": True},
    )
    return zarr.create_array(
        ObjectStore(s3),
        shape=(n,),
        chunks=(CHUNK,),
        dtype="f8",
        compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
        overwrite=True,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=float, default=1e8)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--superchunksize",
        type=int,
        default=None,
        help="blz chunks per superchunk file (per task; default: blz's, 16 MiB files)",
    )
    args = ap.parse_args()
    n = int(args.n)

    import dask.array as da
    import distributed

    import blz
    import blz.dask

    mb = n * 8 / 1e6
    with distributed.LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster):
        x = source(n)
        best = {"blz": float("inf"), "zarr": float("inf")}
        for rep in range(args.repeat):
            tag = uuid.uuid4().hex[:8]
            u = f"s3://{BUCKET}/dask-bench-{tag}/walk.blz"
            t = time.perf_counter()
            blz.dask.to_blz(
                x,
                u,
                chunks=CHUNK,
                superchunksize=args.superchunksize,
                codec="lz4",
                clevel=5,
                filter="shuffle",
            )
            best["blz"] = min(best["blz"], time.perf_counter() - t)
            z = zarr_array(f"dask-bench-{tag}/walk.zarr", n)
            t = time.perf_counter()
            da.store(x, z, lock=False, compute=True)
            best["zarr"] = min(best["zarr"], time.perf_counter() - t)
            if rep == 0:
                # Both read back whole, block by block on the cluster, equal to the source.
                back = blz.dask.from_blz(u).rechunk(CHUNK)
                assert bool((back == x).all().compute()), "blz differs from the source"
                zb = da.from_zarr(z)
                assert bool((zb == x).all().compute()), "zarr differs from the source"
                assert blz.open(u).shape == (n,)
        print(f"{n:.0e} float64 ({mb:.0f} MB), {args.workers} workers, best of {args.repeat}:")
        for k, v in best.items():
            print(f"  {k:5s} write {v:7.2f} s  {mb / v:8.1f} MB/s")
        print(f"  blz/zarr write speed: {best['zarr'] / best['blz']:.2f}x")


if __name__ == "__main__":
    main()
