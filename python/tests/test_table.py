"""Tables against numpy structured arrays: nested records, variable-length strings and
bytes, appends, row writes, schema changes, pandas and Arrow export."""

import importlib.util

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from helpers import same
from hypothesis import given

import blz

LEAF_DTYPES = ["?", "i1", "i4", "i8", "u2", "u8", "f4", "f8", "c16", "S4", "U3"]
names = st.text(alphabet="abcdefgh", min_size=1, max_size=4)


@st.composite
def record_dtypes(draw, depth=0):
    fields = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    out = []
    for f in fields:
        if depth == 0 and draw(st.booleans()) and draw(st.booleans()):
            out.append((f, draw(record_dtypes(depth=1))))
        else:
            out.append((f, np.dtype(draw(st.sampled_from(LEAF_DTYPES)))))
    return np.dtype(out)


def leaves(dt, prefix=""):
    for name in dt.names:
        sub = dt.fields[name][0]
        if sub.names:
            yield from leaves(sub, prefix + name + "/")
        else:
            yield prefix + name, sub


def leaf(arr, path):
    for p in path.split("/"):
        arr = arr[p]
    return arr


@given(record_dtypes(), st.data())
def test_structured_model(tmp_path_factory, dt, data):
    n = data.draw(st.integers(0, 30))
    model = data.draw(hnp.arrays(dt, n))
    path = tmp_path_factory.mktemp("t") / "t.blz"
    t = blz.create(path, model, chunks=data.draw(st.integers(1, 9)))
    assert t.columns == [p for p, _ in leaves(dt)]
    assert len(t) == n
    same(t[:], model)
    for _ in range(data.draw(st.integers(1, 5))):
        op = data.draw(st.sampled_from(["slice", "column", "append", "write", "resize", "reopen"]))
        if op == "slice":
            idx = data.draw(hnp.basic_indices((len(model),), allow_newaxis=False))
            got = t[idx]
            want = model[idx]
            if isinstance(want, np.void):
                assert got.tobytes() == want.tobytes()
            else:
                same(got, want)
        elif op == "column":
            p, _ = data.draw(st.sampled_from(list(leaves(dt))))
            idx = data.draw(hnp.basic_indices((len(model),), allow_newaxis=False))
            same(np.asarray(t[p][idx]), leaf(model, p)[idx])
            same(np.asarray(t[p]), leaf(model, p))
        elif op == "append":
            more = data.draw(hnp.arrays(dt, data.draw(st.integers(0, 10))))
            t.append(more)
            model = np.concatenate([model, more])
        elif op == "write" and len(model):
            a = data.draw(st.integers(0, len(model) - 1))
            b = data.draw(st.integers(a, len(model)))
            rows = data.draw(hnp.arrays(dt, b - a))
            t[a:b] = rows
            model[a:b] = rows
        elif op == "resize":
            k = data.draw(st.integers(0, len(model)))
            t.resize(k)
            model = model[:k].copy()
        elif op == "reopen":
            t.close()
            t = blz.open(path, "r+")
        assert len(t) == len(model)
        same(t[:], model)
    t.close()
    same(np.asarray(blz.open(path)), model)
    blz.open(path).verify()


def _city(i):
    return "é" * (i % 3) + f"city-{i}"


def test_dict_of_columns_with_variable_length_values(tmp_path):
    n = 1000
    cols = {
        "id": np.arange(n, dtype=np.uint32),
        "city": [_city(i) for i in range(n)],
        "blob": [bytes([i % 256]) * (i % 5) for i in range(n)],
        "pos": {"x": np.linspace(0, 1, n), "y": np.arange(n, dtype=np.float32)},
    }
    t = blz.create(tmp_path / "v.blz", cols, chunks=64, codec="zstd")
    assert t.columns == ["id", "city", "blob", "pos/x", "pos/y"]
    assert t.dtype["city"] == np.dtype(object)
    rows = t[100:110]
    assert rows["city"].tolist() == [_city(i) for i in range(100, 110)]
    assert rows["blob"].tolist() == cols["blob"][100:110]
    same(rows["pos"]["x"], cols["pos"]["x"][100:110])
    assert t["city"][-1] == _city(n - 1)
    assert list(t["city"][::-250]) == [_city(i) for i in range(n - 1, -1, -250)]
    r = t[5]
    assert r["id"] == 5 and r["city"] == _city(5) and r["pos"]["y"] == 5.0
    t.append({"id": [n], "city": ["new"], "blob": [b"\x00"], "pos/x": [2.0], "pos/y": [3.0]})
    t.append([(n + 1, "tuple", b"", (4.0, 5.0))])
    assert len(t) == n + 2 and t["city"][n:].tolist() == ["new", "tuple"]
    assert sum(1 for _ in t) == n + 2


def test_schema_changes(tmp_path):
    t = blz.create(tmp_path / "s.blz", {"a": np.arange(5), "b": np.ones(5)})
    t.add_column("c", np.int16)
    t.add_column("name", str)
    t.add_column("p", np.dtype([("x", "f4"), ("y", "f4")]))
    assert t.columns == ["a", "b", "c", "name", "p/x", "p/y"]
    same(t["c"][:], np.zeros(5, np.int16))
    assert t["name"][:].tolist() == [""] * 5
    t.rename_column("b", "bee")
    t.rename_column("p/x", "ex")
    t.drop_column("a")
    assert t.columns == ["bee", "c", "name", "p/ex", "p/y"]
    t.close()
    u = blz.open(tmp_path / "s.blz")
    assert u.columns == ["bee", "c", "name", "p/ex", "p/y"]
    same(u["bee"][:], np.ones(5))
    with pytest.raises(KeyError):
        u["nope"]
    with pytest.raises(blz.ReadOnlyError):
        u.append({"bee": [1.0], "c": [1], "name": ["x"], "p/ex": [1.0], "p/y": [1.0]})


def test_attrs_info_and_pickle(tmp_path):
    import pickle

    t = blz.create(tmp_path / "i.blz", {"a": np.arange(3)}, attrs={"source": "test"})
    t.attrs["n"] = 3
    assert dict(t.attrs) == {"source": "test", "n": 3}
    info = t.info()
    assert info["nrows"] == 3 and info["columns"]["a"]["dtype"] == np.dtype("i8").str
    t.close()
    u = pickle.loads(pickle.dumps(blz.open(tmp_path / "i.blz")))
    same(u["a"][:], np.arange(3))
    col = pickle.loads(pickle.dumps(u["a"]))
    same(col[::-1], np.arange(3)[::-1])
    assert "blz.Table" in repr(u)


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas not installed")
def test_pandas_roundtrip(tmp_path):
    import pandas as pd

    df = pd.DataFrame({"x": np.arange(10.0), "name": [f"n{i}" for i in range(10)], "k": np.arange(10, dtype=np.int8)})
    t = blz.create(tmp_path / "df.blz", df)
    assert t.columns == ["x", "name", "k"]
    back = t.to_pandas()
    pd.testing.assert_frame_equal(back, df)
    t.append(df)
    assert len(t) == 20


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow not installed")
def test_arrow_stream(tmp_path):
    import pyarrow as pa

    t = blz.create(
        tmp_path / "ar.blz",
        {"id": np.arange(4), "s": ["a", "bb", "", "d"], "b": [b"x", b"", b"yz", b"w"], "p": {"x": np.ones(4, np.float32)}},
    )
    tbl = pa.table(t)  # through __arrow_c_stream__
    assert tbl.column_names == ["id", "s", "b", "p"]
    assert tbl.column("s").to_pylist() == ["a", "bb", "", "d"]
    assert tbl.column("b").to_pylist() == [b"x", b"", b"yz", b"w"]
    assert tbl.column("p").to_pylist() == [{"x": 1.0}] * 4
    assert pa.RecordBatchReader.from_stream(t).read_all().equals(tbl)


@given(st.data())
def test_variable_length_model(tmp_path_factory, data):
    # At least one row at creation: an empty Python list does not say str or bytes.
    n = data.draw(st.integers(1, 40))
    strs = data.draw(st.lists(st.text(max_size=8), min_size=n, max_size=n))
    blobs = data.draw(st.lists(st.binary(max_size=6), min_size=n, max_size=n))
    ids = np.arange(n, dtype=np.int32)
    path = tmp_path_factory.mktemp("v") / "v.blz"
    t = blz.create(path, {"id": ids, "s": strs, "b": blobs}, chunks=data.draw(st.integers(1, 7)))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["append", "read", "resize", "reopen"]))
        if op == "append":
            k = data.draw(st.integers(0, 9))
            more_s = data.draw(st.lists(st.text(max_size=8), min_size=k, max_size=k))
            more_b = data.draw(st.lists(st.binary(max_size=6), min_size=k, max_size=k))
            t.append({"id": np.arange(len(ids), len(ids) + k, dtype=np.int32), "s": more_s, "b": more_b})
            ids = np.arange(len(ids) + k, dtype=np.int32)
            strs, blobs = strs + more_s, blobs + more_b
        elif op == "read":
            idx = data.draw(hnp.basic_indices((len(ids),), allow_newaxis=False, allow_ellipsis=False))
            want_s = np.array(strs + [None], dtype=object)[:-1][idx]
            got_s = t["s"][idx]
            assert (got_s == want_s) if np.ndim(want_s) == 0 else got_s.tolist() == want_s.tolist()
            rows = t[:]
            assert rows["b"].tolist() == blobs and rows["s"].tolist() == strs
        elif op == "resize":
            k = data.draw(st.integers(0, len(ids)))
            t.resize(k)
            ids, strs, blobs = ids[:k], strs[:k], blobs[:k]
        else:
            t.close()
            t = blz.open(path, "r+")
        assert len(t) == len(ids)
    assert t["s"][:].tolist() == strs and t["b"][:].tolist() == blobs
    same(t["id"][:], ids)


def test_nested_record_column(tmp_path):
    dt = np.dtype([("id", "i4"), ("pos", [("x", "f8"), ("q", [("a", "u1"), ("b", "f4")])])])
    model = np.zeros(50, dt)
    model["id"] = np.arange(50)
    model["pos"]["x"] = np.linspace(0, 1, 50)
    model["pos"]["q"]["a"] = np.arange(50) % 7
    t = blz.create(tmp_path / "n.blz", model, chunks=8)
    pos = t["pos"]
    assert pos.dtype == dt["pos"] and len(pos) == 50
    same(pos[5:40:3], model["pos"][5:40:3])
    same(t["pos/q"][::-1], model["pos"]["q"][::-1])
    same(np.asarray(t["pos/q"]), model["pos"]["q"])
    assert t["pos"][3].tobytes() == model["pos"][3].tobytes()
    assert len(list(t["pos/q"])) == 50


def test_empty_table_from_a_dtype(tmp_path):
    dt = np.dtype([("id", "u8"), ("name", object), ("p", [("x", "f4")])])
    t = blz.create(tmp_path / "e.blz", dtype=dt)
    assert len(t) == 0 and t.columns == ["id", "name", "p/x"] and t.dtype == dt
    t.append({"id": [7], "name": ["seven"], "p": {"x": [0.5]}})
    assert t[0]["name"] == "seven" and t["p/x"][0] == np.float32(0.5)


def test_append_refuses_columns_the_table_lacks(tmp_path):
    # Issue 21: an extra column used to be dropped silently.
    t = blz.create(tmp_path / "x.blz", {"a": np.arange(3), "p": {"x": np.ones(3)}, "s": ["a", "b", "c"]})
    rows = {"a": [3], "p": {"x": [1.0]}, "s": ["d"]}
    with pytest.raises(ValueError, match="'extra'"):
        t.append({**rows, "extra": [1]})
    with pytest.raises(ValueError, match="'p/y'"):
        t.append({**rows, "p": {"x": [1.0], "y": [2.0]}})
    with pytest.raises(ValueError, match="'p/y'"):
        t.append({**rows, "p/y": [2.0]})
    rec = np.zeros(1, dtype=[("a", "i8"), ("p", [("x", "f8")]), ("s", object), ("z", "i2")])
    rec["s"] = "d"
    with pytest.raises(blz.InvalidArgumentError, match="'z'"):
        t.append(rec)
    with pytest.raises(ValueError, match="'extra'"):
        t[0:1] = {"a": [7], "extra": [1]}
    assert len(t) == 3
    t.append(rows)
    assert t["s"][:].tolist() == ["a", "b", "c", "d"]


def test_string_column_refuses_a_dict_or_a_string(tmp_path):
    # Issue 21: a dict given as a string column stored its keys.
    t = blz.create(tmp_path / "d.blz", {"a": np.arange(2), "s": ["x", "y"]})
    with pytest.raises(TypeError, match="'s'"):
        t.append({"a": [2, 3], "s": {"k": 1, "j": 2}})
    with pytest.raises(TypeError, match="'s'"):
        t.append({"a": [2, 3], "s": "kj"})
    with pytest.raises(TypeError, match="'s'.*dict"):
        t.append({"a": [2, 3], "s": ["k", {"j": 2}]})
    assert t["s"][:].tolist() == ["x", "y"]


def test_attrs_refuse_integers_past_64_bits(tmp_path):
    # Issue 21: 2**200 came back as a float.
    t = blz.create(tmp_path / "b.blz", {"a": np.arange(2)})
    for big in (2**200, -(2**64)):
        with pytest.raises(ValueError, match="'?big'?.*64 bits"):
            t.attrs["big"] = big
    with pytest.raises(ValueError, match="nested/1.*64 bits"):
        t.attrs["nested"] = [1, 2**64]
    with pytest.raises(ValueError, match="64 bits"):
        blz.create(tmp_path / "c.blz", {"a": np.arange(2)}, attrs={"n": 2**70})
    t.attrs["edge"] = [2**64 - 1, -(2**63)]
    assert t.attrs["edge"] == [2**64 - 1, -(2**63)]
    assert "big" not in t.attrs and "nested" not in t.attrs
