#!/usr/bin/env python3
"""Live interop between blz and the real peers (bloscpack 0.16, python-blosc 1.11).

Run with the peers' venv, from the repository root:

    PY=$(../shared/peers/setup.sh)
    $PY tests/interop/peer_check.py verify DIR   # the peers read the files blz wrote in DIR
    $PY tests/interop/peer_check.py write DIR    # the peers write files for blz to read
    $PY tests/interop/peer_check.py selftest     # checks `verify` against `write` + corruptions

DIR/manifest.json lists the files (paths relative to DIR):

    {"files": [
      {"path": "a.blp", "kind": "blpk", "raw": "a.raw"},
      {"path": "n.blp", "kind": "blpk", "raw": "n.raw", "ndarray": true,
       "dtype": "<f8", "shape": [1000]},
      {"path": "c.blosc", "kind": "chunk", "raw": "c.raw"},
      {"path": "x.blp", "kind": "blpk", "raw": "x.raw", "expect_refused": true}]}

verify:
  kind "blpk"   bloscpack.unpack_bytes_from_file(path) must return the bytes of `raw`. With
                "ndarray": true, bloscpack.unpack_ndarray_from_file(path) is used instead and
                the array's bytes in its storage order (C or F, as its metadata says) must equal
                `raw`; "dtype", "shape" and "order" are checked when given. With "metadata", the
                metadata dict bloscpack returns must equal it.
  kind "chunk"  blosc.decompress(bytes of path) must equal the bytes of `raw`.
  "sha256"      when given, the SHA-256 of the expected bytes (`raw` may then be left out).
  "expect_refused": true  the peer must raise while reading the file (files using blz's
                extension bits).
  Prints `ok NAME` or `FAIL NAME: reason` per file, then `N passed, M failed`; exits 1 if any
  failed, 2 if the manifest is missing, malformed or empty.

write: writes with the peers a fresh set of bloscpack files (each checksum id, metadata,
  offsets off, empty and partial inputs, an appended file, ndarrays) and python-blosc chunks
  (every codec x filter, several typesizes and clevels), each with a `raw` file and its
  `sha256`, and DIR/manifest.json in the form above. `--seed` changes the data.
"""

import argparse
import ast
import faulthandler
import hashlib
import json
import os
import shutil
import sys
import tempfile

import blosc
import bloscpack
import numpy as np
from bloscpack.append import append as bloscpack_append
from bloscpack.exceptions import ChunkingException
from bloscpack.file_io import CompressedFPSource, _read_compressed_chunk_fp

CODECS = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]
FILTERS = {"noshuffle": blosc.NOSHUFFLE, "shuffle": blosc.SHUFFLE, "bitshuffle": blosc.BITSHUFFLE}
CHECKSUMS = ["None", "adler32", "crc32", "md5", "sha1", "sha224", "sha256", "sha384", "sha512"]

# Errors a peer may raise on a bad file. ChunkingException derives from BaseException.
PEER_ERRORS = (Exception, ChunkingException)


class Fail(Exception):
    pass


# --------------------------------------------------------------------------------------------
# verify


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _first_difference(got, want):
    if len(got) != len(want):
        return "got %d bytes, expected %d" % (len(got), len(want))
    i = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
    return "bytes differ from offset %d (got %02x, expected %02x)" % (i, got[i], want[i])


def _expected(entry, base):
    """The expected decoded bytes (or None when only a sha256 is given) and their sha256."""
    raw = None
    if "raw" in entry:
        raw = _read(os.path.join(base, entry["raw"]))
    want_sha = entry.get("sha256")
    if raw is not None and want_sha is not None and hashlib.sha256(raw).hexdigest() != want_sha:
        raise Fail("raw file %s does not match the entry's sha256" % entry["raw"])
    if raw is None and want_sha is None:
        raise Fail("entry has neither 'raw' nor 'sha256'")
    return raw, want_sha


def _compare(got, raw, want_sha):
    if raw is not None:
        if got != raw:
            raise Fail(_first_difference(got, raw))
    elif hashlib.sha256(got).hexdigest() != want_sha:
        raise Fail("decoded %d bytes whose sha256 differs from the entry's" % len(got))


def _dtype_from_manifest(value):
    """'<f8' or a descr list such as [["x", "<f8"], ["n", "<i2"]]."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)  # "[('x', '<f8')]", as bloscpack writes it
        except (ValueError, SyntaxError):
            return np.dtype(value)
        if isinstance(value, str):
            return np.dtype(value)

    def conv(d):
        if isinstance(d, list) and d and isinstance(d[0], (list, tuple)):
            return [conv(x) for x in d]
        if isinstance(d, (list, tuple)):
            return tuple(conv(x) for x in d)
        return d
    return np.dtype(conv(value))


def _guard_ndarray(path):
    """bloscpack decompresses straight into an array sized from the metadata, without
    checking that the chunks fit: refuse here, with bloscpack's own readers, what would make
    it write past the array."""
    with open(path, "rb") as fp:
        source = CompressedFPSource(fp)
        meta = source.metadata
        if not isinstance(meta, dict) or meta.get("container") != "numpy":
            return  # bloscpack raises NotANumpyArray itself
        try:
            dtype = _dtype_from_manifest(meta["dtype"])
            need = int(np.prod(meta["shape"], dtype=np.int64)) * dtype.itemsize
        except PEER_ERRORS as e:
            raise Fail("metadata does not describe an ndarray: %s" % e)
        have = 0
        for _ in range(source.nchunks):
            _c, header, _d = _read_compressed_chunk_fp(fp, source.checksum_impl)
            have += header["nbytes"]
    if have != need:
        raise Fail("chunks hold %d bytes but the metadata's dtype and shape need %d "
                   "(not handed to bloscpack: it would write past the array)" % (have, need))


def _read_blpk(entry, path):
    """Reads with bloscpack; returns the decoded bytes and the metadata."""
    if entry.get("ndarray"):
        _guard_ndarray(path)
        arr = bloscpack.unpack_ndarray_from_file(path)
        if "dtype" in entry and arr.dtype != _dtype_from_manifest(entry["dtype"]):
            raise Fail("dtype %s, expected %s" % (arr.dtype.str, entry["dtype"]))
        if "shape" in entry and list(arr.shape) != list(entry["shape"]):
            raise Fail("shape %s, expected %s" % (list(arr.shape), entry["shape"]))
        order = "F" if (arr.ndim > 1 and np.isfortran(arr)) else "C"
        if "order" in entry and arr.ndim > 1 and order != entry["order"]:
            raise Fail("order %s, expected %s" % (order, entry["order"]))
        with open(path, "rb") as fp:
            meta = CompressedFPSource(fp).metadata
        return arr.tobytes(order="A"), meta
    return bloscpack.unpack_bytes_from_file(path)


def check_entry(entry, base):
    kind = entry.get("kind")
    path = os.path.join(base, entry["path"])
    if entry.get("expect_refused"):
        try:
            if kind == "blpk":
                _read_blpk(entry, path)
            elif kind == "chunk":
                blosc.decompress(_read(path))
            else:
                raise Fail("unknown kind %r" % kind)
        except Fail:
            raise
        except PEER_ERRORS:
            return
        raise Fail("expected the peer to refuse the file, but it read it")
    raw, want_sha = _expected(entry, base)
    if kind == "blpk":
        try:
            got, meta = _read_blpk(entry, path)
        except Fail:
            raise
        except PEER_ERRORS as e:
            raise Fail("bloscpack raised %s: %s" % (type(e).__name__, e))
        if "metadata" in entry and meta != entry["metadata"]:
            raise Fail("metadata %r, expected %r" % (meta, entry["metadata"]))
    elif kind == "chunk":
        try:
            got = blosc.decompress(_read(path))
        except PEER_ERRORS as e:
            raise Fail("blosc.decompress raised %s: %s" % (type(e).__name__, e))
    else:
        raise Fail("unknown kind %r" % kind)
    _compare(got, raw, want_sha)


def verify(base, out=sys.stdout):
    """Returns the exit status: 0 all passed, 1 some failed, 2 unusable manifest."""
    try:
        with open(os.path.join(base, "manifest.json")) as f:
            files = json.load(f)["files"]
        if not isinstance(files, list):
            raise ValueError("'files' is not a list")
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("FAIL manifest.json: %s" % e, file=out)
        print("0 passed, 1 failed", file=out)
        return 2
    passed = failed = 0
    for entry in files:
        name = entry.get("path", "<entry without path>") if isinstance(entry, dict) else repr(entry)
        try:
            if not isinstance(entry, dict) or "path" not in entry:
                raise Fail("entry needs a 'path'")
            check_entry(entry, base)
        except Fail as e:
            failed += 1
            print("FAIL %s: %s" % (name, e), file=out, flush=True)
        except PEER_ERRORS as e:
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e), file=out, flush=True)
        else:
            passed += 1
            print("ok %s" % name, file=out, flush=True)
    if not files:
        print("FAIL manifest.json: no files listed", file=out)
    print("%d passed, %d failed" % (passed, failed), file=out)
    if not files:
        return 2
    return 1 if failed else 0


# --------------------------------------------------------------------------------------------
# write


def _data(rng, nbytes, typesize):
    """Compressible little-endian integers of `typesize` bytes (and a random tail when
    nbytes is not a multiple of it)."""
    n = nbytes // typesize
    if typesize == 1:
        vals = (np.arange(n) // 8 + rng.integers(0, 2, n)) & 0xFF
    else:
        vals = np.arange(n) * 3 + rng.integers(0, 16, n)
    dtype = {1: "<u1", 2: "<u2", 4: "<u4", 8: "<u8"}[typesize]
    raw = vals.astype(dtype).tobytes()
    return raw + rng.bytes(nbytes - len(raw))


def write(base, seed=0):
    blosc.set_nthreads(1)
    rng = np.random.default_rng(seed)
    os.makedirs(base, exist_ok=True)
    files = []

    def add(path, kind, raw, **extra):
        name = os.path.splitext(path)[0] + ".raw"
        with open(os.path.join(base, name), "wb") as f:
            f.write(raw)
        entry = {"path": path, "kind": kind, "raw": name,
                 "sha256": hashlib.sha256(raw).hexdigest()}
        entry.update(extra)
        files.append(entry)

    def pack(path, raw, chunk_size, blosc_args=None, bp_args=None, metadata=None,
             md_args=None):
        bloscpack.pack_bytes_to_file(
            raw, os.path.join(base, path), chunk_size=chunk_size, metadata=metadata,
            blosc_args=bloscpack.BloscArgs(**blosc_args) if blosc_args else None,
            bloscpack_args=bloscpack.BloscpackArgs(**bp_args) if bp_args else None,
            metadata_args=bloscpack.MetadataArgs(**md_args) if md_args else None)
        params = {"chunk_size": chunk_size, "blosc_args": blosc_args or {},
                  "bloscpack_args": bp_args or {}, "metadata_args": md_args or {}}
        extra = {"params": params}
        if metadata is not None:
            extra["metadata"] = metadata
        add(path, "blpk", raw, **extra)

    # bloscpack: one file per checksum id, 3 chunks with a partial last one.
    cycle = [("blosclz", 1), ("lz4", 0), ("zlib", 2), ("zstd", 1), ("lz4hc", 1)]
    for i, ck in enumerate(CHECKSUMS):
        cname, shuffle = cycle[i % len(cycle)]
        pack("checksum-%s.blp" % ck.lower(), _data(rng, 5000, 4), 2048,
             dict(typesize=4, clevel=5, shuffle=shuffle, cname=cname), dict(checksum=ck))
    pack("defaults.blp", _data(rng, 5000, 8), 2048)
    pack("no-offsets.blp", _data(rng, 5000, 8), 2048,
         dict(typesize=8, clevel=9, shuffle=1, cname="lz4"), dict(offsets=False))
    pack("empty.blp", b"", 2048)
    pack("single-partial.blp", _data(rng, 700, 1), 2048,
         dict(typesize=1, clevel=5, shuffle=0, cname="zstd"))
    pack("meta-zlib.blp", _data(rng, 5000, 4), 2048,
         dict(typesize=4, clevel=5, shuffle=2, cname="zstd"),
         metadata={"name": "meta-zlib", "values": list(range(40)), "text": "z" * 60})
    pack("meta-uncompressed.blp", _data(rng, 5000, 4), 2048,
         dict(typesize=4, clevel=5, shuffle=1, cname="lz4"),
         dict(checksum="sha256"), metadata={"b": 2, "a": [1, "x"]},
         md_args=dict(meta_codec="None", meta_checksum="crc32"))
    # An appended file: pack, then append twice (once inside the last chunk, once past it).
    parts = [_data(rng, 3000, 4), _data(rng, 500, 4), _data(rng, 3000, 4)]
    path = "appended.blp"
    bloscpack.pack_bytes_to_file(parts[0], os.path.join(base, path), chunk_size=2048,
                                 blosc_args=bloscpack.BloscArgs(typesize=4, cname="lz4"))
    with tempfile.TemporaryDirectory() as tmp:
        for part in parts[1:]:
            src = os.path.join(tmp, "part")
            with open(src, "wb") as f:
                f.write(part)
            bloscpack_append(os.path.join(base, path), src)
    add(path, "blpk", b"".join(parts), params={"appends": [len(p) for p in parts[1:]]})
    # ndarrays.
    arrays = [
        ("ndarray-f8.blp", np.arange(1000) * 0.25 + rng.integers(0, 16, 1000) / 16.0, 2048),
        ("ndarray-i4-2d.blp", (np.arange(300) * 7 % 1000).astype("<i4").reshape(20, 15), 400),
        ("ndarray-i2-2d-fortran.blp",
         np.asfortranarray((np.arange(300) % 77).astype("<i2").reshape(15, 20)), 200),
    ]
    for path, arr, chunk_size in arrays:
        bloscpack.pack_ndarray_to_file(arr, os.path.join(base, path), chunk_size=chunk_size,
                                       blosc_args=bloscpack.BloscArgs(cname="lz4", clevel=5))
        add(path, "blpk", arr.tobytes(order="A"), ndarray=True, dtype=arr.dtype.str,
            shape=list(arr.shape), order="F" if np.isfortran(arr) else "C")
    # python-blosc chunks: every codec x filter, then typesizes, clevels and edge inputs.
    combos = [(c, f, 8, 5) for c in CODECS for f in FILTERS]
    combos += [(c, "shuffle", 4, 9) for c in CODECS]
    combos += [(c, "noshuffle", 1, 5) for c in ("lz4", "zstd")]
    combos += [("blosclz", "shuffle", 4, 0), ("zstd", "bitshuffle", 2, 1)]
    for cname, filt, ts, clevel in combos:
        raw = _data(rng, 4096 + 3, ts)
        path = "chunk-%s-%s-t%d-c%d.blosc" % (cname, filt, ts, clevel)
        with open(os.path.join(base, path), "wb") as f:
            f.write(blosc.compress(raw, typesize=ts, clevel=clevel, shuffle=FILTERS[filt],
                                   cname=cname))
        add(path, "chunk", raw, params={"cname": cname, "filter": filt, "typesize": ts,
                                        "clevel": clevel})
    for path, raw in (("chunk-random.blosc", rng.bytes(3000)), ("chunk-empty.blosc", b"")):
        with open(os.path.join(base, path), "wb") as f:
            f.write(blosc.compress(raw, typesize=4, clevel=5, shuffle=1, cname="lz4"))
        add(path, "chunk", raw, params={"cname": "lz4", "filter": "shuffle", "typesize": 4,
                                        "clevel": 5})
    with open(os.path.join(base, "manifest.json"), "w") as f:
        json.dump({"files": files, "written_by": {
            "bloscpack": bloscpack.__version__, "python-blosc": blosc.__version__,
            "c-blosc": blosc.blosclib_version.split()[0]}}, f, indent=1)
        f.write("\n")
    return files


# --------------------------------------------------------------------------------------------
# selftest


def selftest():
    """`verify` passes everything `write` wrote, and fails on corrupted or mislabeled files."""
    import io
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "good")
        write(good)
        log = io.StringIO()
        if verify(good, log) != 0:
            problems.append("verify failed on the peers' own files:\n" + log.getvalue())

        def variant(name, mutate):
            d = os.path.join(tmp, name)
            shutil.copytree(good, d)
            with open(os.path.join(d, "manifest.json")) as f:
                doc = json.load(f)
            doc["files"] = mutate(d, doc["files"])
            with open(os.path.join(d, "manifest.json"), "w") as f:
                json.dump(doc, f)
            log = io.StringIO()
            return verify(d, log), log.getvalue()

        def flip(d, path, offset_from_end):
            p = os.path.join(d, path)
            b = bytearray(_read(p))
            b[len(b) - offset_from_end] ^= 0xFF
            with open(p, "wb") as f:
                f.write(b)

        def corrupt_blpk(d, files):
            flip(d, "checksum-sha256.blp", 40)  # inside the last chunk
            return [e for e in files if e["path"] == "checksum-sha256.blp"]

        def corrupt_chunk(d, files):
            flip(d, "chunk-zstd-shuffle-t8-c5.blosc", 10)
            return [e for e in files if e["path"] == "chunk-zstd-shuffle-t8-c5.blosc"]

        def wrong_raw(d, files):
            flip(d, "defaults.raw", 1)
            e = dict(next(e for e in files if e["path"] == "defaults.blp"))
            del e["sha256"]
            return [e]

        def extension_bit(d, files):
            p = os.path.join(d, "checksum-crc32.blp")
            b = bytearray(_read(p))
            b[5] |= 0x04
            with open(p, "wb") as f:
                f.write(b)
            e = dict(next(e for e in files if e["path"] == "checksum-crc32.blp"))
            e["expect_refused"] = True
            return [e]

        def refused_but_fine(d, files):
            e = dict(next(e for e in files if e["path"] == "ndarray-f8.blp"))
            e["expect_refused"] = True
            return [e]

        def wrong_shape(d, files):
            e = dict(next(e for e in files if e["path"] == "ndarray-i4-2d.blp"))
            e["shape"] = [15, 20]
            return [e]

        def overflowing_ndarray(d, files):
            # An ndarray file whose metadata promises fewer bytes than its chunks hold.
            arr = np.arange(100, dtype="<f8")
            p = os.path.join(d, "short-meta.blp")
            bloscpack.pack_bytes_to_file(
                arr.tobytes(), p, chunk_size=256,
                metadata={"dtype": "'<f8'", "shape": [10], "order": "C", "container": "numpy"})
            with open(os.path.join(d, "short-meta.raw"), "wb") as f:
                f.write(arr.tobytes())
            return [{"path": "short-meta.blp", "kind": "blpk", "raw": "short-meta.raw",
                     "ndarray": True}]

        def missing_file(d, files):
            return [{"path": "nope.blp", "kind": "blpk", "raw": "defaults.raw"}]

        expectations = [
            ("corrupt-blpk", corrupt_blpk, 1), ("corrupt-chunk", corrupt_chunk, 1),
            ("wrong-raw", wrong_raw, 1), ("extension-bit", extension_bit, 0),
            ("refused-but-fine", refused_but_fine, 1), ("wrong-shape", wrong_shape, 1),
            ("overflowing-ndarray", overflowing_ndarray, 1), ("missing-file", missing_file, 1),
            ("empty-manifest", lambda d, files: [], 2),
        ]
        for name, mutate, want in expectations:
            status, text = variant(name, mutate)
            print("%s: exit %d (expected %d)" % (name, status, want))
            for line in text.strip().splitlines():
                print("    " + line)
            if status != want:
                problems.append("%s: verify exited %d, expected %d:\n%s"
                                % (name, status, want, text))
    for p in problems:
        print("PROBLEM " + p)
    print("selftest %s" % ("failed" if problems else "passed"))
    return 1 if problems else 0


def main(argv=None):
    faulthandler.enable()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("verify", help="the peers read the files listed in DIR/manifest.json")
    p.add_argument("dir")
    p = sub.add_parser("write", help="the peers write files and DIR/manifest.json")
    p.add_argument("dir")
    p.add_argument("--seed", type=int, default=0)
    sub.add_parser("selftest", help="verify against write's output and corrupted copies")
    args = parser.parse_args(argv)
    if args.cmd == "verify":
        return verify(args.dir)
    if args.cmd == "write":
        files = write(args.dir, args.seed)
        print("wrote %d files and manifest.json to %s" % (len(files), args.dir))
        return 0
    return selftest()


if __name__ == "__main__":
    sys.exit(main())
