"""blz against zarr-python (over obstore), and tensorstore and icechunk where installed, on
the same S3 server: write and whole-read throughput, and the requests each operation costs.

    bash tests/s3/run.sh     target/py-venv/bin/python benches/compare_s3.py [N] [options]
    bash tests/s3/run_s3s.sh target/py-venv/bin/python benches/compare_s3.py [N] --server-name s3s-fs

(tests/s3/run.sh starts a local moto server, tests/s3/run_s3s.sh a local s3s-fs; both set
AWS_ENDPOINT_URL, the AWS_* keys and the test bucket. target/py-venv needs `pip install zarr
obstore` beside blz, and `tensorstore icechunk` for those peers.) N float64 elements (default
1e7, 80 MB), a random walk, chunks of 1e6 elements, Blosc lz4 clevel 5 with byte shuffle for
all. Throughput is measured against the server, best of --repeat (3) fresh writes and a
whole read of each; with --rounds K every client runs K times in turn and each figure is the
median of the K (a ratio: the median of the K rounds' ratios, each measured side by side).

--latency-ms MS puts benches/latency_proxy.py between every client and the server: each
HTTP request is held MS milliseconds before it is forwarded (a server MS further away).
At 0 the clients talk to the server directly, unless --proxy (to see what the proxy costs).

The client "bytes" is no store: it PUTs (and GETs back) the very objects zarr writes, the
chunks compressed beforehand, all requests at once, with no codec work and no metadata: what
the server itself allows for this data, the ceiling every client's figures sit under.
"blz sc=N" is blz with N chunks per superchunk file ("blz" takes blz's default).

Requests per operation are counted, on 2e6 elements (two chunks), in a separate first pass,
by a delay-free latency_proxy.LatencyProxy in front of the server (any server; it sees
every HTTP request a client sends).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import uuid

import numpy as np

import blz
import obstore
import zarr
from obstore.store import S3Store
from zarr.codecs import BloscCodec
from zarr.storage import ObjectStore

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from latency_proxy import LatencyProxy  # noqa: E402

try:
    import tensorstore as ts
except ImportError:
    ts = None
try:
    import icechunk
except ImportError:
    icechunk = None

BUCKET = os.environ["BLZ_S3_TEST_BUCKET"]
SERVER = os.environ["AWS_ENDPOINT_URL"]
REGION = os.environ.get("AWS_REGION", "us-east-1")
KEY_ID = os.environ["AWS_ACCESS_KEY_ID"]
SECRET = os.environ["AWS_SECRET_ACCESS_KEY"]
CHUNK = 1_000_000
COUNT_N = 2_000_000
OPS = ("create", "open", "read 10", "read all", "append")


def zarr_store(prefix, endpoint):
    s3 = S3Store(
        BUCKET,
        prefix=prefix,
        endpoint=endpoint,
        region=REGION,
        access_key_id=KEY_ID,
        secret_access_key=SECRET,
        client_options={"allow_http": True},
    )
    return ObjectStore(s3)


def remove(key):
    """Deletes every object under key/ (untimed; keeps a file-backed server's disk small)."""
    store = S3Store(
        BUCKET,
        endpoint=SERVER,
        region=REGION,
        access_key_id=KEY_ID,
        secret_access_key=SECRET,
        client_options={"allow_http": True},
    )
    paths = [m["path"] for batch in obstore.list(store, prefix=f"{key}/") for m in batch]
    if paths:
        obstore.delete(store, paths)


def blosc_zarr():
    return BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")


def middle(data):
    m = data.shape[0] // 2 + 12345
    return slice(m, m + 10)


def blz_ops(key, endpoint, data, more, per_file=None):
    url = f"s3://{BUCKET}/{key}/x.blz"

    def env(f):
        # blz builds its S3 client from the environment at each open.
        def run():
            os.environ["AWS_ENDPOINT_URL"] = endpoint
            return f()

        return run

    return {
        "create": env(
            lambda: blz.create(
                url, data, chunks=(CHUNK,), codec="lz4", clevel=5, filter="shuffle", superchunksize=per_file
            )
        ),
        "open": env(lambda: blz.open(url)),
        "read 10": env(lambda: blz.open(url)[middle(data)]),
        "read all": env(lambda: blz.open(url)[:]),
        "append": env(lambda: blz.open(url, "r+").append(more)),
    }


def zarr_ops(key, endpoint, data, more):
    prefix = f"{key}/x.zarr"

    def create():
        a = zarr.create_array(
            store=zarr_store(prefix, endpoint),
            shape=data.shape,
            chunks=(CHUNK,),
            dtype=data.dtype,
            compressors=blosc_zarr(),
            overwrite=True,
        )
        a[:] = data

    def append():
        a = zarr.open_array(store=zarr_store(prefix, endpoint), mode="r+")
        n = a.shape[0]
        a.resize((n + more.shape[0],))
        a[n:] = more

    def opened():
        return zarr.open_array(store=zarr_store(prefix, endpoint), mode="r")

    return {
        "create": create,
        "open": opened,
        "read 10": lambda: opened()[middle(data)],
        "read all": lambda: opened()[:],
        "append": append,
    }


def tensorstore_ops(key, endpoint, data, more):
    kvstore = {
        "driver": "s3",
        "bucket": BUCKET,
        "path": f"{key}/x.zarr/",
        "endpoint": endpoint,
        "aws_region": REGION,
        "aws_credentials": {"type": "environment"},
    }
    spec = {"driver": "zarr3", "kvstore": kvstore}
    metadata = {
        "shape": list(data.shape),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [CHUNK]}},
        "chunk_key_encoding": {"name": "default"},
        "data_type": "float64",
        "fill_value": 0.0,
        "codecs": [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {
                "name": "blosc",
                "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 8, "blocksize": 0},
            },
        ],
    }

    def create():
        a = ts.open({**spec, "metadata": metadata}, create=True, delete_existing=True).result()
        a.write(data).result()

    def opened():
        return ts.open(spec).result()

    def append():
        a = opened()
        n = a.shape[0]
        a = a.resize(exclusive_max=[n + more.shape[0]]).result()
        a[n:].write(more).result()

    return {
        "create": create,
        "open": opened,
        "read 10": lambda: opened()[middle(data)].read().result(),
        "read all": lambda: opened().read().result(),
        "append": append,
    }


def icechunk_ops(key, endpoint, data, more):
    def storage():
        return icechunk.s3_storage(
            bucket=BUCKET,
            prefix=f"{key}/x.icechunk",
            endpoint_url=endpoint,
            allow_http=True,
            force_path_style=True,
            region=REGION,
            access_key_id=KEY_ID,
            secret_access_key=SECRET,
        )

    def create():
        repo = icechunk.Repository.create(storage())
        session = repo.writable_session("main")
        a = zarr.create_array(
            store=session.store,
            shape=data.shape,
            chunks=(CHUNK,),
            dtype=data.dtype,
            compressors=blosc_zarr(),
        )
        a[:] = data
        session.commit("write")

    def opened():
        repo = icechunk.Repository.open(storage())
        return zarr.open_array(store=repo.readonly_session(branch="main").store, mode="r")

    def append():
        repo = icechunk.Repository.open(storage())
        session = repo.writable_session("main")
        a = zarr.open_array(store=session.store, mode="r+")
        n = a.shape[0]
        a.resize((n + more.shape[0],))
        a[n:] = more
        session.commit("append")

    return {
        "create": create,
        "open": opened,
        "read 10": lambda: opened()[middle(data)],
        "read all": lambda: opened()[:],
        "append": append,
    }


def bytes_ops(key, endpoint, data, more):
    """The server's ceiling: zarr's chunk objects (compressed beforehand, untimed) PUT and
    GET all at once through obstore, nothing encoded or decoded."""
    import asyncio

    import numcodecs

    codec = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
    chunks = [codec.encode(data[i : i + CHUNK]) for i in range(0, data.shape[0], CHUNK)]
    extra = codec.encode(more)
    store = zarr_store(key, endpoint).store

    async def put_all():
        # One PUT each, as zarr's (obstore would cut an object over 5 MB into parts).
        await asyncio.gather(
            *[obstore.put_async(store, f"c/{i}", c, use_multipart=False) for i, c in enumerate(chunks)]
        )

    async def get_one(i):
        # A plain GET, its whole body received; its length is kept, not the bytes (handing
        # obstore's buffers out of the event loop made this 20x slower on moto).
        return len(await (await obstore.get_async(store, f"c/{i}")).bytes_async())

    async def get_all():
        return await asyncio.gather(*[get_one(i) for i in range(len(chunks))])

    def read_all():
        got = asyncio.run(get_all())
        assert sum(got) == sum(len(c) for c in chunks)
        return data  # the bytes came back; decoding them is not what this client measures

    def read_10():
        return obstore.get_range(store, f"c/{len(chunks) // 2}", start=0, length=min(64 << 10, len(chunks[0])))

    return {
        "create": lambda: asyncio.run(put_all()),
        "open": lambda: None,
        "read 10": read_10,
        "read all": read_all,
        "append": lambda: obstore.put(store, f"c/{len(chunks)}", extra, use_multipart=False),
    }


def ops_for(name, key, endpoint, data, more):
    if name == "blz":
        return blz_ops(key, endpoint, data, more)
    if name.startswith("blz sc="):
        return blz_ops(key, endpoint, data, more, per_file=int(name[len("blz sc=") :]))
    if name == "bytes":
        return bytes_ops(key, endpoint, data, more)
    if name == "zarr":
        return zarr_ops(key, endpoint, data, more)
    if name == "tensorstore":
        return tensorstore_ops(key, endpoint, data, more)
    if name == "icechunk":
        return icechunk_ops(key, endpoint, data, more)
    raise ValueError(name)


def timed(f):
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


def load():
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", nargs="?", default="1e7", help="float64 elements (default 1e7)")
    p.add_argument("--latency-ms", type=float, default=0.0, help="delay added to every request")
    p.add_argument("--proxy", action="store_true", help="go through the proxy even at 0 ms")
    p.add_argument("--server-name", default="moto", help="the server's name, for the printout")
    p.add_argument("--repeat", type=int, default=3, help="writes and reads per client; the best counts")
    p.add_argument(
        "--peers",
        default="blz,blz sc=1,zarr,tensorstore,icechunk,bytes",
        help="comma-separated clients (zarr is the reference; tensorstore and icechunk are"
        " left out when not installed)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds of every client in turn; a figure is the median over rounds (ratios: of"
        " each round's ratio)",
    )
    p.add_argument("--no-count", action="store_true", help="skip the request-counting pass")
    args = p.parse_args()
    n = int(float(args.n))
    names = [x.strip() for x in args.peers.split(",") if x.strip()]
    missing = {"tensorstore": ts is None, "icechunk": icechunk is None}
    for x in list(names):
        if missing.get(x):
            print(f"({x} is not installed: left out)")
            names.remove(x)

    rng = np.random.default_rng(42)
    data = np.cumsum(rng.standard_normal(n))
    more = np.cumsum(rng.standard_normal(100_000))
    gb = data.nbytes / 1e9
    print(f"load average at start (1/5/15 min): {load()}", flush=True)

    # Requests per operation, counted by a delay-free proxy, on 2e6 elements (two chunks).
    counts = {}
    if not args.no_count:
        small = data[:COUNT_N]
        with LatencyProxy(SERVER, 0) as counter:
            for name in names:
                key = f"bench-{uuid.uuid4().hex}"
                ops = ops_for(name, key, counter.url, small, more)
                for op in OPS:
                    counter.take()
                    try:
                        ops[op]()
                    except Exception as e:  # noqa: BLE001 - a peer's failure is reported
                        counts[(name, op)] = f"failed: {type(e).__name__}: {str(e)[:120]}"
                        continue
                    got = {}
                    for r in counter.take():
                        got[r.method] = got.get(r.method, 0) + 1
                    counts[(name, op)] = got

    # Throughput: best of --repeat fresh creates, and a read of each.
    proxy = None
    if args.latency_ms > 0 or args.proxy:
        proxy = LatencyProxy(SERVER, args.latency_ms)
    rounds = []  # per round: client -> (write GB/s, read GB/s, open + read 10 ms), best of --repeat
    with proxy if proxy else contextlib.nullcontext():
        endpoint = proxy.url if proxy else SERVER
        for k in range(args.rounds):
            got_round = {}
            for name in names:
                w, r, t10 = [], [], []
                for _ in range(args.repeat):
                    key = f"bench-{uuid.uuid4().hex}"
                    ops = ops_for(name, key, endpoint, data, more)
                    dt, _ = timed(ops["create"])
                    w.append(dt)
                    dt, got = timed(ops["read all"])
                    r.append(dt)
                    assert np.array_equal(np.asarray(got), data), name
                    del got
                    # Open and read ten elements (a fresh open: nothing cached).
                    dt, got = timed(ops["read 10"])
                    t10.append(dt)
                    # (The bytes client reads 64 KiB of a chunk object, undecoded.)
                    assert name == "bytes" or np.array_equal(np.asarray(got), data[middle(data)]), name
                    remove(key)
                got_round[name] = (gb / min(w), gb / min(r), min(t10) * 1e3)
                print(
                    f"  round {k + 1}: {name}: write {gb / min(w):.3f} GB/s, read {gb / min(r):.3f} GB/s,"
                    f" open + read 10 {min(t10) * 1e3:.1f} ms (load {load()})",
                    flush=True,
                )
            rounds.append(got_round)
    os.environ["AWS_ENDPOINT_URL"] = SERVER
    med = statistics.median
    rows = [
        (name, med(x[name][0] for x in rounds), med(x[name][1] for x in rounds), med(x[name][2] for x in rounds))
        for name in names
    ]

    how = f"+{args.latency_ms:g} ms per request" + (" (proxy)" if proxy else "")
    if not proxy:
        how = "direct"
    over = f"; median of {args.rounds} rounds" if args.rounds > 1 else ""
    print(
        f"\n{n} float64 ({data.nbytes / 1e6:.0f} MB random walk), chunks {CHUNK}, lz4 5 shuffle,"
        f" {args.server_name} on loopback, {how}; best of {args.repeat}{over}"
    )
    refs = [x for x in ("zarr", "tensorstore") if x in names]
    head = "".join(f" {'write/' + x:>17} {'read/' + x:>16}" for x in refs)
    print(f"{'':12} {'write GB/s':>11} {'read GB/s':>10} {'read 10 ms':>10}{head}")
    for name, w, r, t10 in rows:
        cells = ""
        for x in refs:
            cw = med(rd[name][0] / rd[x][0] for rd in rounds)
            cr = med(rd[name][1] / rd[x][1] for rd in rounds)
            cells += f" {cw:17.2f} {cr:16.2f}"
        print(f"{name:12} {w:11.3f} {r:10.3f} {t10:10.1f}{cells}")
    print(f"load average at end (1/5/15 min): {load()}")

    if counts:
        print(f"\nrequests per operation (by method), on {COUNT_N} elements ({COUNT_N // CHUNK} chunks)")
        for op in OPS:
            cells = []
            for name in names:
                c = counts[(name, op)]
                if isinstance(c, str):
                    cells.append(f"{name} {c}")
                else:
                    detail = " ".join(f"{m}:{k}" for m, k in sorted(c.items()))
                    cells.append(f"{name} {sum(c.values())} ({detail})")
            print(f"{op:9} " + "; ".join(cells))


if __name__ == "__main__":
    main()
