"""Missing values in tables (spec/table.md §3.5): frames round-trip through blz exactly as
pandas holds them (pandas itself the oracle), SQL answers with nulls and NaN as duckdb's,
numpy's view of missing values, and the errors for nulls a column cannot hold."""

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blz

SETTINGS = settings(
    max_examples=20,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Every pandas column type blz keeps, with how to make it from values and a missing mask.
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
KINDS = (
    ["float64", "float32", "bool", "object-str", "object-bytes"]
    + INTS
    + [n.capitalize().replace("Uint", "UInt") for n in INTS]
    + ["Float32", "Float64", "boolean", "string[python]", "string[pyarrow]", "str"]
    + ["int64[pyarrow]", "double[pyarrow]", "bool[pyarrow]", "string-arrow"]
)


def _column(kind: str, data: st.DataObject, n: int) -> pd.Series:
    missing = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    ints = data.draw(st.lists(st.integers(0, 120), min_size=n, max_size=n))
    if kind in ("float64", "float32"):
        v = np.array([np.nan if m else i / 4 for i, m in zip(ints, missing)], dtype=kind)
        return pd.Series(v)
    if kind == "bool":
        return pd.Series(np.array([i % 2 == 0 for i in ints]))
    if kind in INTS:
        return pd.Series(np.array(ints, dtype=kind))
    if kind in ("object-str", "object-bytes"):
        conv = str if kind == "object-str" else (lambda i: str(i).encode())
        items = [None if m else conv(i) for i, m in zip(ints, missing)]
        a = np.empty(n, dtype=object)
        a[:] = items
        return pd.Series(a, dtype=object)
    if kind.startswith("string-arrow"):
        return pd.Series(
            pd.arrays.ArrowExtensionArray(
                pa.array([None if m else f"s{i}" for i, m in zip(ints, missing)], pa.large_string())
            )
        )
    if kind in ("string[python]", "string[pyarrow]", "str"):
        return pd.Series([None if m else f"v{i}" for i, m in zip(ints, missing)], dtype=kind)
    if kind.endswith("[pyarrow]"):
        t = pd.ArrowDtype({"int64[pyarrow]": pa.int64(), "double[pyarrow]": pa.float64(), "bool[pyarrow]": pa.bool_()}[kind])
        vals = [None if m else (i % 2 == 0 if "bool" in kind else i if "int" in kind else i / 8) for i, m in zip(ints, missing)]
        return pd.Series(pd.array(vals, dtype=t))
    if kind in ("string[python]", "string[pyarrow]", "str"):
        return pd.Series([None if m else f"v{i}" for i, m in zip(ints, missing)], dtype=kind)
    if kind == "boolean":
        return pd.Series([None if m else i % 2 == 0 for i, m in zip(ints, missing)], dtype=kind)
    # Nullable integers and floats.
    return pd.Series([None if m else (i / 2 if kind.startswith("Float") else i) for i, m in zip(ints, missing)], dtype=kind)


@SETTINGS
@given(data=st.data())
def test_random_frames_round_trip_exactly(tmp_path_factory, data):
    n = data.draw(st.integers(0, 12))
    kinds = data.draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=6))
    df = pd.DataFrame({f"c{j}_{k}": _column(k, data, n) for j, k in enumerate(kinds)})
    path = tmp_path_factory.mktemp("rt") / "t.blz"
    t = blz.create(str(path), df, chunks=7)
    pd.testing.assert_frame_equal(t.to_pandas(), df)
    pd.testing.assert_frame_equal(blz.open(str(path)).to_pandas(), df)
    # Appending a frame with missing values; the Arrow stream carries the validity.
    t.append(df)
    both = pd.concat([df, df], ignore_index=True)
    pd.testing.assert_frame_equal(t.to_pandas(), both)
    at = pa.table(t)
    for name in df.columns:
        assert at.column(name).null_count == int(both[name].isna().sum()) or both[name].dtype.kind == "f"


def test_numpy_records_show_missing_values_as_numpy_does(tmp_path):
    df = pd.DataFrame(
        {
            "f": [1.0, np.nan, 3.0],
            "i": pd.array([1, None, 3], dtype="Int64"),
            "b": pd.array([None, True, False], dtype="boolean"),
            "s": ["a", None, "c"],
        }
    )
    t = blz.create(str(tmp_path / "t.blz"), df)
    r = t[:]
    assert math.isnan(r["f"][1]) and r["f"][0] == 1.0
    assert r["i"][1] == 0  # an integer column shows its fill value
    assert not r["b"][0]
    assert r["s"][1] is None and r["s"][2] == "c"
    assert t["s"][1] is None
    assert t["i"][[1, 0]].tolist() == [0, 1]
    assert math.isnan(t["f"][[1]][0])


def test_numpy_nan_stays_a_value_and_nulls_need_a_nullable_column(tmp_path):
    rec = np.array([(1.0,), (np.nan,)], dtype=[("x", "f8")])
    t = blz.create(str(tmp_path / "r.blz"), rec)
    out = pa.table(t).column("x")
    assert out.null_count == 0 and math.isnan(out[1].as_py())
    # A frame's NaN appended to that float column stays NaN (it cannot hold nulls).
    t.append(pd.DataFrame({"x": [np.nan]}))
    assert pa.table(t).column("x").null_count == 0
    u = blz.create(str(tmp_path / "u.blz"), {"s": ["a", "b"]})
    with pytest.raises(ValueError, match="column s is not nullable"):
        u.append({"s": ["c", None]})
    assert len(u) == 2
    u.add_column("m", "float64", nullable=True)
    assert u.to_pandas()["m"].isna().all()


# -- SQL against duckdb ---------------------------------------------------------------------

QUERIES = [
    "SELECT count(*) AS a, count(x) AS b, count(s) AS c, count(g) AS d FROM t",
    "SELECT sum(x) AS a, avg(x) AS b, sum(g) AS c FROM t",
    "SELECT count(*) AS a FROM t WHERE x > 0.5",
    "SELECT count(*) AS a FROM t WHERE NOT (x > 0.5)",
    "SELECT count(*) AS a FROM t WHERE x IS NULL",
    "SELECT count(*) AS a FROM t WHERE x IS NOT NULL AND g IS NULL",
    "SELECT count(*) AS a FROM t WHERE s IS NULL OR s = 's3'",
    "SELECT g, count(*) AS a, count(x) AS b FROM t GROUP BY g ORDER BY g NULLS FIRST",
    "SELECT s, count(*) AS a FROM t GROUP BY s ORDER BY s NULLS FIRST",
    "SELECT count(*) AS a FROM t JOIN t AS u ON t.g = u.g",
    "SELECT count(*) AS a FROM t WHERE g IN (1, 2) OR g = 3",
]


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


@settings(max_examples=15, derandomize=True, deadline=None)
@given(data=st.data())
def test_sql_with_nulls_and_nan_answers_as_duckdb(tmp_path_factory, data):
    import duckdb

    n = data.draw(st.integers(0, 60))
    row = st.tuples(
        st.one_of(st.none(), st.just(float("nan")), st.integers(0, 8).map(lambda i: i / 8)),
        st.one_of(st.none(), st.integers(0, 4)),
        st.one_of(st.none(), st.integers(0, 5).map(lambda i: f"s{i}")),
    )
    rows = data.draw(st.lists(row, min_size=n, max_size=n))
    xs = [r[0] for r in rows]
    table = pa.table(
        {
            "x": pa.array([0.0 if v is None else v for v in xs], pa.float64(), mask=np.array([v is None for v in xs], dtype=bool)),
            "g": pa.array([r[1] for r in rows], pa.int64()),
            "s": pa.array([r[2] for r in rows], pa.string()),
        }
    )
    # pyarrow-backed columns keep a NaN apart from a null, as the Arrow table does.
    df = table.to_pandas(types_mapper=pd.ArrowDtype)
    path = tmp_path_factory.mktemp("sql") / "t.blz"
    t = blz.create(str(path), df, chunks=8)
    con = duckdb.connect()
    con.register("t", table)
    for q in QUERIES:
        want = con.execute(q).fetchall()
        got = blz.sql(q, t=t).to_arrow()
        got_rows = list(zip(*[got.column(i).to_pylist() for i in range(got.num_columns)]))
        assert len(got_rows) == len(want), q
        for gr, wr in zip(got_rows, want):
            assert all(_same(a, b) for a, b in zip(gr, wr)), (q, got_rows, want)


def test_is_null_filters_skip_chunks_without_nulls(tmp_path):
    # Chunks of 10 rows, one superchunk file per chunk; nulls only in rows 30..40.
    x = pd.array([None if 30 <= i < 40 else i for i in range(100)], dtype="Int64")
    t = blz.create(str(tmp_path / "t.blz"), pd.DataFrame({"x": x}), chunks=10, superchunksize=1)
    # Chunks without nulls damaged (the digest after the chunk, the last bytes of its
    # file, flipped): a query that reads them fails, one that skips them by their null
    # counts does not.
    d = tmp_path / "t.blz" / "data" / "x"
    for k in (0, 1, 5, 6):
        f = d / f"__{k + 1}__.bin"
        b = bytearray(f.read_bytes())
        b[-4:] = bytes(x ^ 0xFF for x in b[-4:])
        f.write_bytes(bytes(b))
    got = blz.sql("SELECT count(*) AS n FROM t WHERE x IS NULL", t=str(tmp_path / "t.blz")).to_arrow()
    assert got.column(0).to_pylist() == [10]
    with pytest.raises(Exception):
        blz.sql("SELECT count(*) AS n FROM t WHERE x IS NOT NULL", t=str(tmp_path / "t.blz")).to_arrow()


def test_where_has_null_semantics_and_isnull(tmp_path):
    df = pd.DataFrame(
        {
            "x": [1.0, np.nan, 3.0, 4.0],
            "s": ["a", None, "c", None],
        }
    )
    t = blz.create(str(tmp_path / "t.blz"), df)
    assert t.where_rows("x > 2").tolist() == [2, 3]
    # A comparison with a missing value is neither true nor false: `~` of it is not true.
    assert t.where_rows("~(x > 2)").tolist() == [0]
    assert t.where_rows("isnull(x)").tolist() == [1]
    assert t.where_rows("notnull(s) & (x < 2)").tolist() == [0]
    assert t.where_rows("isnull(s) | (x > 3)").tolist() == [1, 3]
