"""Categories and dictionary-encoded strings (spec/table.md §3.6): pandas Categorical
columns round-trip exactly (categories, their order, ``ordered``, missing values; pandas
itself the oracle), low-cardinality string columns are dictionary-encoded on disk by
themselves and come back as plain strings, the option that forces or prevents it, the
errors, Arrow's dictionary type, and SQL over dictionary columns answering as duckdb's."""

import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blz

SETTINGS = settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _storage(path):
    return json.loads((path / "meta" / "storage").read_text())


def _field(path, name):
    return next(f for f in _storage(path)["dtype"] if f["name"] == name)


WORDS = ["", "a", "bb", "Zürich", "a b", "ccc", "x" * 40]


@SETTINGS
@given(data=st.data())
def test_categorical_frames_round_trip_exactly(tmp_path_factory, data):
    n = data.draw(st.integers(0, 50))
    cats = data.draw(st.lists(st.sampled_from(WORDS), unique=True, max_size=len(WORDS)))
    ordered = data.draw(st.booleans())
    if cats:
        codes = data.draw(st.lists(st.integers(-1, len(cats) - 1), min_size=n, max_size=n))
    else:
        codes = [-1] * n
    cat = pd.Categorical.from_codes(codes, categories=cats, ordered=ordered)
    other = data.draw(st.lists(st.sampled_from(["p", "q", "r"]), min_size=n, max_size=n))
    df = pd.DataFrame(
        {
            "c": cat,
            "plain": pd.Series(other, dtype=object),
            "n": np.arange(n, dtype=np.int64),
        }
    )
    path = tmp_path_factory.mktemp("dict") / "t.blz"
    chunks = data.draw(st.sampled_from([3, 7, None]))
    t = blz.create(str(path), df, chunks=chunks)
    got = blz.open(str(path)).to_pandas()
    pd.testing.assert_frame_equal(got, df)
    # Categories in order, unused ones included; ordered kept.
    assert list(got["c"].cat.categories) == cats
    assert got["c"].cat.ordered == ordered
    f = _field(path, "c")
    assert f["dictionary"]["codes"] == "int32"
    assert f["pandas"] == ("category[ordered]" if ordered else "category")
    t.close()


def test_appended_rows_extend_the_categories(tmp_path):
    df = pd.DataFrame({"c": pd.Categorical(["b", "a", None], categories=["b", "a", "z"])})
    t = blz.create(str(tmp_path / "t.blz"), df)
    t.append(pd.DataFrame({"c": pd.Categorical(["new", "a"])}))
    got = t.to_pandas()["c"]
    assert list(got.cat.categories) == ["b", "a", "z", "new"]
    assert got.tolist()[:2] == ["b", "a"] and got.isna().tolist() == [False, False, True, False, False]
    assert got.tolist()[3:] == ["new", "a"]


def test_low_cardinality_strings_are_dictionary_encoded_and_come_back_as_strings(tmp_path):
    n = 5000
    rng = np.random.default_rng(5)
    cities = np.array(["Oslo", "Lima", "Pune", None, "Kyiv"], dtype=object)[rng.integers(0, 5, n)]
    cities[:5] = ["Oslo", "Lima", "Pune", None, "Kyiv"]
    ids = np.array([f"id{i}" for i in range(n)], dtype=object)
    df = pd.DataFrame(
        {
            "city": cities,
            "id": ids,
            "x": np.arange(n, dtype=np.float64),
            "nullable": pd.Series(cities, dtype="string[python]"),
            "arrow": pd.Series(cities, dtype="string[pyarrow]"),
        }
    )
    t = blz.create(str(tmp_path / "t.blz"), df)
    for c in ("city", "nullable", "arrow"):
        assert "dictionary" in _field(tmp_path / "t.blz", c), c
    # Distinct values (one per row) stay plain.
    assert "dictionary" not in _field(tmp_path / "t.blz", "id")
    got = t.to_pandas()
    pd.testing.assert_frame_equal(got, df)
    assert got["city"].dtype == df["city"].dtype  # as it came (pandas 3: str)
    # Rows read as numpy objects, missing as None.
    assert t["city"][:5].tolist() == ["Oslo", "Lima", "Pune", None, "Kyiv"]
    assert t[3:5]["city"].tolist() == [None, "Kyiv"]
    assert t["city"][[4, 0]].tolist() == ["Kyiv", "Oslo"]
    # Smaller on disk than plain.
    plain = blz.create(str(tmp_path / "p.blz"), df, dictionary=False)
    assert "dictionary" not in _field(tmp_path / "p.blz", "city")
    size = lambda tb, col: tb.info()["columns"][col]["cbytes"]  # noqa: E731
    enc = sum(v["cbytes"] for k, v in json.loads((tmp_path / "t.blz" / "meta" / "sizes").read_text())["columns"].items() if k.startswith("city"))
    pl = sum(v["cbytes"] for k, v in json.loads((tmp_path / "p.blz" / "meta" / "sizes").read_text())["columns"].items() if k.startswith("city"))
    assert enc < pl, (enc, pl)
    assert size(plain, "city") == json.loads((tmp_path / "p.blz" / "meta" / "sizes").read_text())["columns"]["city"]["cbytes"]


def test_the_option_forces_or_prevents_the_encoding(tmp_path):
    df = pd.DataFrame({"a": ["x", "y"], "b": ["u", "v"], "c": pd.Categorical(["k", "k"])})
    blz.create(str(tmp_path / "t.blz"), df)
    assert all("dictionary" not in _field(tmp_path / "t.blz", c) for c in "ab")
    blz.create(str(tmp_path / "t.blz"), df, dictionary=True, overwrite=True)
    assert all("dictionary" in _field(tmp_path / "t.blz", c) for c in "abc")
    blz.create(str(tmp_path / "t.blz"), df, dictionary=["b"], overwrite=True)
    assert "dictionary" not in _field(tmp_path / "t.blz", "a")
    assert "dictionary" in _field(tmp_path / "t.blz", "b")
    # A Categorical is one whatever the option says.
    t = blz.create(str(tmp_path / "t.blz"), df, dictionary=False, overwrite=True)
    assert "dictionary" in _field(tmp_path / "t.blz", "c")
    pd.testing.assert_frame_equal(t.to_pandas(), df)


def test_non_string_categories_are_refused_naming_the_column(tmp_path):
    df = pd.DataFrame({"rank": pd.Categorical([1, 2, 1])})
    with pytest.raises(TypeError, match="rank"):
        blz.create(str(tmp_path / "t.blz"), df)
    assert not (tmp_path / "t.blz").exists()


def test_arrow_gets_a_dictionary_array(tmp_path):
    df = pd.DataFrame({"c": pd.Categorical(["b", None, "a", "b"], categories=["b", "a"])})
    t = blz.create(str(tmp_path / "t.blz"), df)
    a = t.to_arrow()
    assert a.schema.field("c").type == pa.dictionary(pa.int32(), pa.string())
    assert a.column("c").to_pylist() == ["b", None, "a", "b"]
    chunk = a.column("c").chunk(0)
    assert chunk.dictionary.to_pylist() == ["b", "a"]


# -- SQL against duckdb ---------------------------------------------------------------------

QUERIES = [
    "SELECT count(*) AS a FROM t WHERE s = 'Oslo'",
    "SELECT count(*) AS a FROM t WHERE s <> 'Oslo'",
    "SELECT count(*) AS a FROM t WHERE s IN ('Lima', 'Kyiv', 'nowhere')",
    "SELECT count(*) AS a FROM t WHERE s LIKE 'L%'",
    "SELECT count(*) AS a FROM t WHERE s IS NULL",
    "SELECT count(*) AS a FROM t WHERE s = 'nowhere'",
    "SELECT CAST(s AS VARCHAR) AS s, count(*) AS a, sum(x) AS b FROM t GROUP BY s ORDER BY s NULLS FIRST",
    "SELECT CAST(s AS VARCHAR) AS s, max(x) AS m FROM t WHERE x > 3 GROUP BY s ORDER BY s NULLS FIRST",
    "SELECT count(*) AS a FROM t JOIN t AS u ON t.s = u.s",
    "SELECT min(s) AS a, max(s) AS b, count(DISTINCT s) AS c FROM t",
]


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


@settings(max_examples=12, derandomize=True, deadline=None)
@given(data=st.data())
def test_sql_over_dictionary_columns_answers_as_duckdb(tmp_path_factory, data):
    import duckdb

    n = data.draw(st.integers(0, 60))
    cities = ["Oslo", "Lima", "Pune", "Kyiv", "La Paz"]
    row = st.tuples(
        st.one_of(st.none(), st.sampled_from(cities)),
        st.integers(0, 9),
    )
    rows = data.draw(st.lists(row, min_size=n, max_size=n))
    table = pa.table(
        {
            "s": pa.array([r[0] for r in rows], pa.string()),
            "x": pa.array([float(r[1]) for r in rows], pa.float64()),
        }
    )
    df = pd.DataFrame({"s": pd.Categorical([r[0] for r in rows], categories=cities), "x": table.column("x").to_numpy()})
    path = tmp_path_factory.mktemp("sql") / "t.blz"
    t = blz.create(str(path), df, chunks=7)
    con = duckdb.connect()
    con.register("t", table)
    for q in QUERIES:
        want = con.execute(q).fetchall()
        got = blz.sql(q, t=t).to_arrow()
        got_rows = list(zip(*[got.column(i).to_pylist() for i in range(got.num_columns)]))
        assert len(got_rows) == len(want), q
        for gr, wr in zip(got_rows, want):
            assert all(_same(a, b) for a, b in zip(gr, wr)), (q, got_rows, want)


def test_where_on_a_dictionary_column(tmp_path):
    df = pd.DataFrame({"s": pd.Categorical(["a", "b", None, "a"]), "x": [1.0, 2.0, 3.0, 4.0]})
    t = blz.create(str(tmp_path / "t.blz"), df)
    assert t.where_rows("s == 'a'").tolist() == [0, 3]
    assert t.where("s == 'b'")["x"].tolist() == [2.0]


def test_a_category_past_the_dictionary_limit_is_refused_and_nothing_written(tmp_path):
    from blz._table import apply_dictionary  # noqa: F401  (the option path is public API)

    df = pd.DataFrame({"c": pd.Categorical(["a", "b"])})
    t = blz.create(str(tmp_path / "t.blz"), df)
    # The limit is Rust's (2^31 - 1 by default); through the Rust API a small one is tested
    # (tests/table_dict.rs). Here: values that are not strings are refused naming the column.
    with pytest.raises(TypeError, match="'c'"):
        t.append({"c": [1, 2]})
    assert len(t) == 2
    pd.testing.assert_frame_equal(t.to_pandas(), df)
