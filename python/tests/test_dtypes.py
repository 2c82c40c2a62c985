"""numpy's float16, datetime64 and timedelta64 (every unit, NaT included) in blz arrays and
table columns on disk, with numpy (and pandas) as the oracle: create, read back (slices,
fancy indexing), append, write back, reductions and what numpy's scalars come out."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import blz

UNITS = ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"]
NAT = np.iinfo(np.int64).min


def _times(kind, unit, values, nat_mask):
    a = np.array(values, dtype=np.int64)
    a[np.asarray(nat_mask, dtype=bool)] = NAT
    return a.view(f"{kind}8[{unit}]")


@st.composite
def time_arrays(draw):
    kind = draw(st.sampled_from(["M", "m"]))
    unit = draw(st.sampled_from(UNITS))
    n = draw(st.integers(0, 300))
    # Values well inside int64 so that every unit's text and arithmetic stay defined.
    values = draw(st.lists(st.integers(-(10**12), 10**12), min_size=n, max_size=n))
    nat = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return _times(kind, unit, values, nat)


@st.composite
def half_arrays(draw):
    n = draw(st.integers(0, 300))
    bits = draw(st.lists(st.integers(0, 0xFFFF), min_size=n, max_size=n))
    return np.array(bits, dtype=np.uint16).view(np.float16)


def _same(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)
    # NaT and NaN bit patterns too: the bytes come back as written.
    assert got.tobytes() == want.tobytes()


@given(a=st.one_of(time_arrays(), half_arrays()), data=st.data())
def test_arrays_roundtrip_exactly(tmp_path_factory, a, data):
    p = tmp_path_factory.mktemp("a") / "a.blz"
    b = blz.create(p, a, chunks=17)
    _same(blz.open(p)[:], a)
    if len(a):
        i, j = sorted(data.draw(st.tuples(st.integers(0, len(a)), st.integers(0, len(a)))))
        _same(b[i:j], a[i:j])
        idx = np.array(data.draw(st.lists(st.integers(0, len(a) - 1), max_size=20)), dtype=np.int64)
        _same(b[idx], a[idx])
        # Writing back one element (a NaT or a value) and appending the array again.
        k = data.draw(st.integers(0, len(a) - 1))
        want = np.concatenate([a, a])
        b.append(a)
        b[k] = a[-1]
        want[k] = a[-1]
        _same(blz.open(p)[:], want)


@given(a=time_arrays())
def test_table_columns_roundtrip_and_reduce_as_numpy(tmp_path_factory, a):
    p = tmp_path_factory.mktemp("t") / "t.blz"
    rec = np.zeros(len(a), dtype=[("t", a.dtype), ("i", "<i4")])
    rec["t"] = a
    rec["i"] = np.arange(len(a))
    t = blz.create(p, rec)
    got = blz.open(p)[:]
    _same(got["t"], a)
    t.append(rec)
    _same(blz.open(p)[:]["t"], np.concatenate([a, a]))
    col = blz.open(p)["t"]
    full = np.concatenate([a, a])
    if len(full):
        for f in (np.min, np.max, np.argmin, np.argmax):
            r, w = f(col), f(full)
            assert type(r) is type(w), (f, type(r), type(w))
            assert (np.isnat(r) and np.isnat(w)) if a.dtype.kind in "mM" and not f.__name__.startswith("arg") and np.isnat(w) else r == w


@given(a=half_arrays())
def test_float16_reductions_match_numpy(tmp_path_factory, a):
    p = tmp_path_factory.mktemp("h") / "h.blz"
    b = blz.create(p, a, chunks=33)
    with np.errstate(all="ignore"):
        for name in ["sum", "mean", "min", "max", "std", "var", "argmin", "argmax"]:
            if len(a) == 0 and name in ("min", "max", "argmin", "argmax"):
                continue
            got = getattr(b, name)()
            want = getattr(a, name)()
            assert np.asarray(got).dtype == np.asarray(want).dtype, (name, got, want)
            if name.startswith("arg"):
                assert got == want, name
            elif np.isnan(want) or np.isnan(got):
                assert np.isnan(want) and np.isnan(got), (name, got, want)
            else:
                # numpy sums float16 in float32 pairwise, blz in float64: equal after
                # rounding to float16, or one float16 step apart.
                assert abs(float(got) - float(want)) <= float(np.spacing(np.abs(want))) or got == want, (name, got, want)


def test_datetime_reductions_are_numpys(tmp_path):
    a = np.array(["2020-01-01", "NaT", "2019-06-01"], dtype="M8[D]")
    b = blz.create(tmp_path / "d.blz", a)
    assert np.isnat(b.min()) and np.isnat(np.max(b))
    assert b.min().dtype == np.dtype("M8[D]")
    assert np.argmin(b) == np.argmin(a) and np.argmax(b) == np.argmax(a)
    with pytest.raises(TypeError):
        b.sum()
    ok = blz.create(tmp_path / "ok.blz", a[[0, 2]])
    assert ok.min() == np.datetime64("2019-06-01") and ok.max() == np.datetime64("2020-01-01")
    d = np.array([1, 2, NAT, 5], dtype=np.int64).view("m8[s]")
    bd = blz.create(tmp_path / "t.blz", d)
    assert np.isnat(bd.sum()) and bd.sum().dtype == d.dtype
    bd2 = blz.create(tmp_path / "t2.blz", d[[0, 1, 3]])
    assert bd2.sum() == np.timedelta64(8, "s") and bd2.mean() == d[[0, 1, 3]].mean()


def test_refusals_are_clear(tmp_path):
    with pytest.raises(ValueError, match="multiples"):
        blz.create(tmp_path / "x.blz", np.zeros(3, dtype="M8[5s]"))
    with pytest.raises(ValueError, match="generic"):
        blz.create(tmp_path / "y.blz", shape=3, dtype="M8")


def test_fill_values(tmp_path):
    b = blz.create(tmp_path / "f.blz", shape=0, dtype="M8[D]", fill=np.datetime64("NaT"))
    b.resize(2)
    assert np.isnat(b[:]).all()
    c = blz.create(tmp_path / "g.blz", shape=0, dtype="M8[s]", fill=np.datetime64("2020-01-01"))
    c.resize(1)
    assert c[0] == np.datetime64("2020-01-01T00:00:00")


def test_npy_files_roundtrip_with_numpy(tmp_path):
    for a in [
        np.array(["2020-01-01T01:02:03.5", "NaT"], dtype="M8[ms]"),
        np.array([1, -2, NAT], dtype=np.int64).view(">m8[D]"),
        np.array([0.1, -2, np.inf], dtype="<f2"),
    ]:
        f = tmp_path / f"{a.dtype.str[1:].replace('[', '_').strip(']')}.npy"
        np.save(f, a)
        b = blz.create(tmp_path / f"{f.stem}.blz", np.load(f))
        _same(b[:], a)  # in the byte order it was given, as numpy keeps it


def test_pandas_datetime_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(
        {
            "when": pd.to_datetime(["2020-01-01", None, "1999-12-31 23:59:59.123456789"], format="ISO8601"),
            "took": pd.to_timedelta([1, None, 3], unit="s"),
            "x": np.array([1, 2, 3], dtype=np.float16),
        }
    )
    t = blz.create(tmp_path / "p.blz", df)
    back = blz.open(tmp_path / "p.blz").to_pandas()
    assert back["when"].dtype == np.dtype("M8[ns]")
    pd.testing.assert_frame_equal(back, df)
    # Zone-aware columns are kept too (python/tests/test_zones.py).
    utc = pd.DataFrame({"when": pd.to_datetime(["2020-01-01"]).tz_localize("UTC")})
    pd.testing.assert_frame_equal(blz.create(tmp_path / "u.blz", utc).to_pandas(), utc)
    del t


def test_arrow_types(tmp_path):
    pa = pytest.importorskip("pyarrow")
    rec = np.zeros(3, dtype=[("d", "M8[D]"), ("ns", "M8[ns]"), ("dur", "m8[ms]"), ("h", "f2")])
    rec["d"] = np.array(["2020-01-01", "NaT", "1970-01-02"], dtype="M8[D]")
    rec["ns"] = np.array(["2020-01-01T00:00:00.000000001", "NaT", "2000-01-01"], dtype="M8[ns]")
    rec["dur"] = np.array([5, NAT, -1], dtype=np.int64).view("m8[ms]")
    rec["h"] = [0.5, 1.5, -2]
    t = blz.create(tmp_path / "a.blz", rec)
    at = pa.table(t)
    assert at.schema.field("d").type == pa.date32()
    assert at.schema.field("ns").type == pa.timestamp("ns")
    assert at.schema.field("dur").type == pa.duration("ms")
    assert at.schema.field("h").type == pa.float16()
    assert at.column("d").null_count == 1 and at.column("dur").null_count == 1
    np.testing.assert_array_equal(at.column("ns").to_numpy(), rec["ns"])
