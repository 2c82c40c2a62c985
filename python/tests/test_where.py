"""``Table.where`` and ``Array.where`` against pandas / numpy evaluating the same
expression: random tables, random expressions (hypothesis), nested columns, strings,
batches, and errors that point at their position."""

import hypothesis.strategies as st
import numpy as np
import pandas as pd
import pytest
from hypothesis import given

import blz

DT = np.dtype(
    [
        ("a", "i4"),
        ("p", [("b", "f8"), ("c", "u1")]),
        ("d", "?"),
        ("s", "O"),
        ("f", "S3"),
    ]
)
WORDS = ["", "ab", "abc", "zz"]


def table_data(draw, n):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out = np.empty(n, DT)
    out["a"] = rng.integers(-30, 30, n)
    b = rng.integers(-50, 50, n) / 4.0
    b[rng.random(n) < 0.1] = np.nan
    out["p"]["b"] = b
    out["p"]["c"] = rng.integers(0, 256, n)
    out["d"] = rng.random(n) < 0.5
    out["s"] = [WORDS[i] for i in rng.integers(0, 4, n)]
    out["f"] = [WORDS[i].encode() for i in rng.integers(0, 4, n)]
    return out


NUM_LEAVES = ["a", "p/b", "p/c"]


@st.composite
def num_expr(draw, depth=1):
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        kind = draw(st.integers(0, 4))
        if kind < 3:
            return NUM_LEAVES[kind]
        if kind == 3:
            return str(draw(st.integers(-20, 20)))
        return repr(draw(st.integers(-40, 40)) / 8.0)
    op = draw(st.sampled_from(["+", "-", "*"]))
    return f"({draw(num_expr(depth - 1))} {op} {draw(num_expr(depth - 1))})"


@st.composite
def cond_expr(draw, depth=2):
    k = draw(st.integers(0, 5 if depth else 2))
    if k == 0:
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        return f"({draw(num_expr())} {op} {draw(num_expr())})"
    if k == 1:
        col = draw(st.sampled_from(["s", "f"]))
        op = draw(st.sampled_from(["==", "!="]))
        return f"({col} {op} '{draw(st.sampled_from(WORDS))}')"
    if k == 2:
        return draw(st.sampled_from(["d", "(d == False)"]))
    if k == 3:
        return f"~{draw(cond_expr(depth - 1))}"
    op = draw(st.sampled_from(["&", "|"]))
    return f"({draw(cond_expr(depth - 1))} {op} {draw(cond_expr(depth - 1))})"


def frame(data):
    """The table as a DataFrame whose column names pandas' eval can use."""
    return pd.DataFrame(
        {
            "a": data["a"].astype("i8"),
            "p_b": data["p"]["b"],
            "p_c": data["p"]["c"].astype("i8"),
            "d": data["d"],
            "s": data["s"],
            "f": [x.decode() for x in data["f"]],
        }
    )


def want_mask(data, expr):
    df = frame(data)
    e = expr.replace("p/b", "p_b").replace("p/c", "p_c")
    with np.errstate(all="ignore"):
        m = df.eval(e, engine="python")
    return np.asarray(m, dtype=bool)


@given(st.data())
def test_where_matches_pandas(tmp_path_factory, data):
    n = data.draw(st.integers(0, 150))
    model = table_data(data.draw, n)
    path = tmp_path_factory.mktemp("w") / "t.blz"
    t = blz.create(path, model, chunks=data.draw(st.integers(1, 20)))
    for _ in range(3):
        expr = data.draw(cond_expr())
        mask = want_mask(model, expr)
        got = t.where(expr)
        assert got.dtype == t.dtype
        want = model[mask]
        assert len(got) == len(want), expr
        for name in ["a", "d", "s", "f"]:
            assert list(got[name]) == list(want[name]), expr
        np.testing.assert_array_equal(got["p"]["b"], want["p"]["b"])
        np.testing.assert_array_equal(t.where_rows(expr), np.flatnonzero(mask))
        sub = t.where(expr, columns=["p/c", "s"])
        assert sub.dtype.names == ("p/c", "s")
        np.testing.assert_array_equal(sub["p/c"], want["p"]["c"])
        batches = list(t.where(expr, columns=["a"], as_batches=True, batch_rows=7))
        joined = np.concatenate(batches) if batches else np.empty(0, [("a", "i4")])
        np.testing.assert_array_equal(joined["a"], want["a"])


@given(st.data())
def test_array_where_matches_numpy(tmp_path_factory, data):
    rows = data.draw(st.integers(0, 30))
    a = np.arange(rows * 5, dtype="f4").reshape(rows, 5) % 7 - 3
    if rows:
        a[0, 0] = np.nan
    path = tmp_path_factory.mktemp("a") / "a.blz"
    arr = blz.create(path, a, chunks=(data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5))))
    lo = data.draw(st.integers(-4, 4))
    expr = f"(x > {lo}) & (x % 2 != 0) | (x == -3)"
    with np.errstate(all="ignore"):
        mask = (a > lo) & (np.mod(a, 2) != 0) | (a == -3)
    np.testing.assert_array_equal(arr.where_mask(expr), mask)
    np.testing.assert_array_equal(arr.where(expr), a[mask])
    np.testing.assert_array_equal(arr.where_indices(expr), np.flatnonzero(mask))


def test_errors_point_at_the_fault(tmp_path):
    t = blz.create(tmp_path / "t.blz", np.zeros(4, [("a", "i8"), ("b", "f8")]))
    with pytest.raises(blz.InvalidArgumentError, match="position 6") as e:
        t.where("a > 1 & b")
    assert "\n  a > 1 & b\n        ^" in str(e.value)
    with pytest.raises(ValueError, match="unknown name"):
        t.where("(a > 1) & (c < 2)")
    with pytest.raises(blz.InvalidArgumentError):
        t.where("a > 1", columns=["nope"])


def test_statistics_skip_reading(tmp_path):
    """A sorted key: rows outside the statistics' range are skipped, whole chunks inside
    it are taken without evaluating (the result is the same as numpy's either way)."""
    n = 100_000
    data = np.empty(n, [("k", "i8"), ("x", "f8")])
    data["k"] = np.arange(n)
    data["x"] = np.sin(np.arange(n))
    t = blz.create(tmp_path / "t.blz", data, chunks=1000)
    got = t.where("(k >= 12345) & (k < 54321) & (x > 0)")
    want = data[(data["k"] >= 12345) & (data["k"] < 54321) & (data["x"] > 0)]
    np.testing.assert_array_equal(got, want)


_UNITS = ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns"]


@given(st.data())
def test_dates_and_durations_match_numpy(tmp_path_factory, data):
    """`where` on datetime64/timedelta64 arrays of any unit against literals of any unit,
    with NaT: numpy's answers (it compares in the finer unit; NaT matches only `!=`)."""
    unit = data.draw(st.sampled_from(_UNITS))
    lit_unit = data.draw(st.sampled_from(_UNITS))
    n = data.draw(st.integers(0, 40))
    vals = np.array(data.draw(st.lists(st.integers(-100, 100), min_size=n, max_size=n)), "i8")
    delta = data.draw(st.booleans())
    kind = "m8" if delta else "M8"
    a = vals.astype(f"{kind}[{unit}]")
    if n:
        a[data.draw(st.integers(0, n - 1))] = np.datetime64("NaT") if not delta else np.timedelta64("NaT")
    if delta and (unit in "YM") != (lit_unit in "YM"):
        lit_unit = unit
    v = data.draw(st.integers(-100, 100))
    op = data.draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
    path = tmp_path_factory.mktemp("t") / "a.blz"
    arr = blz.create(path, a, chunks=data.draw(st.integers(1, 9)))
    if delta:
        lit = np.timedelta64(v, lit_unit)
        expr = f"x {op} timedelta64({v}, '{lit_unit}')"
    else:
        lit = np.datetime64(v, lit_unit)
        expr = f"x {op} datetime64('{lit}', '{lit_unit}')"
    want = eval(f"a {op} lit")
    np.testing.assert_array_equal(arr.where_mask(expr), want, err_msg=expr)
    np.testing.assert_array_equal(arr.where(expr), a[want], err_msg=expr)


def test_table_dates_from_pandas(tmp_path):
    """A frame's dates (with missing ones) and durations query as pandas' ``query`` does:
    a date in a string, date arithmetic, durations; a missing date matches nothing."""
    rng = np.random.default_rng(7)
    n = 5_000
    day = pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 700, n), unit="D")
    took = pd.to_timedelta(rng.integers(0, 300, n), unit="m")
    df = pd.DataFrame({"day": day, "took": took, "v": rng.normal(size=n)})
    df.loc[::41, "day"] = pd.NaT
    t = blz.create(tmp_path / "t.blz", df)
    for expr, want in [
        ("day >= '2022-03-01'", df["day"] >= "2022-03-01"),
        ("(day < '2021-02-01T12:00') & (v > 0)", (df["day"] < "2021-02-01T12:00") & (df["v"] > 0)),
        ("day + timedelta64(30, 'D') > '2022-12-01'", df["day"] + pd.Timedelta(days=30) > "2022-12-01"),
        ("took > timedelta64(2, 'h')", df["took"] > pd.Timedelta(hours=2)),
        ("isnull(day)", df["day"].isna()),
    ]:
        got = t.where_rows(expr)
        np.testing.assert_array_equal(got, np.flatnonzero(want.to_numpy()), err_msg=expr)
    with pytest.raises(ValueError, match="datetime64"):
        t.where("day > 5")
