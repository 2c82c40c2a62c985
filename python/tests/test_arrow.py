"""Tables through the Arrow PyCapsule stream (``Table.__arrow_c_stream__``), read by
pyarrow, polars and duckdb and compared with the structured array they were made from."""

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

import blz

N = 100

need = {m: pytest.mark.skipif(importlib.util.find_spec(m) is None, reason=f"{m} not installed")
        for m in ("pyarrow", "polars", "duckdb", "pandas")}


def every_kind(n=N):
    """A structured array with a column of every fixed kind (either byte order) and a
    nested record, plus the variable-length columns, as blz.create takes them."""
    rng = np.random.default_rng(5)
    dt = np.dtype([
        ("b", "?"), ("i1", "i1"), ("i2", "<i2"), ("i4", ">i4"), ("i8", "i8"),
        ("u1", "u1"), ("u2", "u2"), ("u4", ">u4"), ("u8", "u8"),
        ("f4", "f4"), ("f8", ">f8"), ("c8", "c8"), ("c16", "c16"),
        ("s", "S4"), ("u", "U3"),
        ("pos", [("x", "f8"), ("tag", [("k", "i2"), ("name", "U2")])]),
    ])
    a = np.zeros(n, dt)
    for name in ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"):
        info = np.iinfo(dt[name])
        a[name] = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dt[name].newbyteorder("="))
    a["b"] = rng.random(n) < 0.5
    a["f4"] = rng.standard_normal(n)
    a["f8"] = rng.standard_normal(n)
    a["c8"] = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    a["c16"] = rng.standard_normal(n) - 2j * rng.standard_normal(n)
    a["s"] = [bytes([65 + i % 26]) * (i % 5) + (b"\0z" if i % 7 == 0 else b"") for i in range(n)]
    a["u"] = ["é€𝄞"[: i % 4] for i in range(n)]
    a["pos"]["x"] = np.arange(n) / 3
    a["pos"]["tag"]["k"] = -np.arange(n)
    a["pos"]["tag"]["name"] = [f"{i % 10}ü"[: i % 3] for i in range(n)]
    cols = {name: a[name] for name in dt.names}
    cols["vs"] = ["".join(chr(0x41 + (i + j) % 50) for j in range(i % 9)) + "ñ" * (i % 2) for i in range(n)]
    cols["vb"] = [bytes(range(i % 7)) for i in range(n)]
    return a, cols


def expected_rows(a, cols):
    """Rows as Python values, the way Arrow readers show them (complex as [real, imag])."""

    def value(v):
        if isinstance(v, (complex, np.complexfloating)):
            return [float(v.real), float(v.imag)]
        if isinstance(v, tuple):
            raise AssertionError("records are converted field by field")
        return v.item() if isinstance(v, np.generic) else v

    def record(rec, dt):
        out = {}
        for name in dt.names:
            sub = dt.fields[name][0]
            out[name] = record(rec[name], sub) if sub.names else value(rec[name])
        return out

    rows = [record(a[i], a.dtype) for i in range(len(a))]
    for i, r in enumerate(rows):
        r["vs"] = cols["vs"][i]
        r["vb"] = cols["vb"][i]
    return rows


@pytest.fixture
def table(tmp_path):
    a, cols = every_kind()
    # Small chunks and superchunks: the stream has several batches (14 rows each).
    t = blz.create(tmp_path / "t.blz", cols, chunks=7, superchunksize=2)
    return t, a, cols


@need["pyarrow"]
def test_pyarrow_reads_every_kind_in_batches(table):
    import pyarrow as pa

    t, a, cols = table
    reader = pa.RecordBatchReader.from_stream(t)
    batches = list(reader)
    assert [b.num_rows for b in batches] == [14] * 7 + [2]
    tbl = pa.Table.from_batches(batches, schema=reader.schema)
    assert tbl.column_names == list(a.dtype.names) + ["vs", "vb"]
    types = {f.name: f.type for f in tbl.schema}
    assert types["b"] == pa.bool_() and types["i4"] == pa.int32() and types["u8"] == pa.uint64()
    assert types["f8"] == pa.float64() and types["c8"] == pa.list_(pa.field("item", pa.float32(), False), 2)
    assert types["s"] == pa.large_binary() and types["u"] == pa.large_string()
    assert types["vs"] == pa.large_string() and types["vb"] == pa.large_binary()
    assert pa.types.is_struct(types["pos"]) and pa.types.is_struct(types["pos"].field("tag").type)
    assert tbl.to_pylist() == expected_rows(a, cols)
    assert t.to_arrow().equals(tbl)


@need["pyarrow"]
@need["pandas"]
def test_arrow_agrees_with_to_pandas(table):
    import pyarrow as pa

    t, a, cols = table
    df = t.to_pandas()
    tbl = pa.table(t)
    for path in ("i4", "u8", "f8", "b", "vs", "vb", "pos/tag/name"):
        col = tbl
        for part in path.split("/"):
            col = col.column(part) if col is tbl else pa.compute.struct_field(col, part)
        assert col.to_pylist() == df[path].tolist(), path


@need["pyarrow"]
def test_requested_schema_is_honoured_or_refused(table):
    import pyarrow as pa

    t, a, cols = table
    want = pa.schema([("vs", pa.string()), ("f8", pa.float64()),
                      ("pos", pa.struct([("tag", pa.struct([("name", pa.string())]))]))])
    got = pa.RecordBatchReader.from_stream(t, schema=want).read_all()
    assert got.schema.equals(want)
    assert got.column("vs").to_pylist() == cols["vs"]
    assert got.column("f8").to_pylist() == a["f8"].tolist()
    assert got.column("pos").to_pylist() == [{"tag": {"name": r["pos"]["tag"]["name"]}}
                                             for r in expected_rows(a, cols)]
    # A type blz cannot produce (and a column it does not have): its own schema comes
    # back; pyarrow refuses what it cannot cast.
    for bad in (pa.schema([("f8", pa.int8())]), pa.schema([("nope", pa.int8())])):
        capsule = bad.__arrow_c_schema__()
        own = pa.RecordBatchReader._import_from_c_capsule(t.__arrow_c_stream__(capsule))
        assert own.schema.names == list(a.dtype.names) + ["vs", "vb"]
    with pytest.raises(TypeError):
        t.__arrow_c_stream__(object())


@need["polars"]
def test_polars_reads_the_stream(table):
    import polars as pl

    t, a, cols = table
    df = pl.DataFrame(t)
    assert df.columns == list(a.dtype.names) + ["vs", "vb"]
    got = df.to_dicts()
    want = expected_rows(a, cols)
    assert got == want


@need["duckdb"]
def test_duckdb_reads_the_stream(table):
    import duckdb

    t, a, cols = table
    con = duckdb.connect()
    rel = con.from_arrow(t)
    rows = rel.fetchall()
    assert [r[rel.columns.index("vs")] for r in rows] == cols["vs"]
    assert [r[rel.columns.index("i8")] for r in rows] == a["i8"].tolist()
    assert [r[rel.columns.index("u")] for r in rows] == a["u"].tolist()
    assert [r[rel.columns.index("pos")]["tag"]["k"] for r in rows] == a["pos"]["tag"]["k"].tolist()
    got = con.sql("select sum(i4::hugeint), count(*) from rel").fetchall()
    assert got == [(int(a["i4"].astype(np.int64).sum()), N)]


@need["polars"]
def test_the_stream_needs_no_pyarrow(tmp_path):
    # A fresh interpreter in which pyarrow cannot be imported at all.
    code = f"""
import sys
sys.modules["pyarrow"] = None  # an import of pyarrow now fails
import numpy as np, polars as pl, blz
t = blz.create({str(tmp_path / "np.blz")!r}, {{"x": np.arange(5), "s": ["a", "b", "c", "d", "é"]}})
df = pl.DataFrame(t)
assert df["x"].to_list() == [0, 1, 2, 3, 4], df
assert df["s"].to_list() == ["a", "b", "c", "d", "é"], df
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@need["pyarrow"]
def test_empty_table_and_read_errors(tmp_path):
    import pyarrow as pa

    t = blz.create(tmp_path / "e.blz", np.zeros(0, [("x", "f8"), ("s", "U2")]))
    tbl = pa.table(t)
    assert tbl.num_rows == 0 and tbl.schema.names == ["x", "s"]
    # A corrupt chunk fails the stream with blz's message naming the file.
    t = blz.create(tmp_path / "c.blz", {"x": np.arange(1000.0)}, chunks=100)
    files = sorted((tmp_path / "c.blz" / "data").rglob("*.bin"))
    raw = bytearray(files[0].read_bytes())
    raw[200] ^= 0xFF
    files[0].write_bytes(bytes(raw))
    with pytest.raises(Exception, match=r"\.bin"):
        pa.table(blz.open(tmp_path / "c.blz"))


@need["pyarrow"]
def test_a_stream_reads_the_commit_it_started_at(tmp_path):
    import pyarrow as pa

    p = tmp_path / "s.blz"
    w = blz.create(p, {"x": np.arange(140)}, chunks=7, superchunksize=2)
    t = blz.open(p)
    reader = pa.RecordBatchReader.from_stream(t)
    first = reader.read_next_batch()
    w.append({"x": np.arange(140, 280)})
    assert len(t) == 280  # the handle follows the commit; the stream does not
    rest = [b.column(0).to_pylist() for b in reader]
    assert first.column(0).to_pylist() + sum(rest, []) == list(range(140))
    assert pa.table(t).column("x").to_pylist() == list(range(280))
