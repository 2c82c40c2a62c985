"""Tables: :class:`Table`, columns of (nested, variable-length) fields stored column-wise."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from . import _blz, _fancy
from ._array import Attributes, raise_problems
from ._errors import InvalidArgumentError, one_commit
from ._index import empty, native
from ._expr import ExprOps
from ._reduce import Reductions
from ._memory import Saving, is_memory, refuse_pickle, size_text

VAR_KINDS = ("varstr", "varbytes")


# -- schemas ------------------------------------------------------------------------------


def _leaf_dtype(kind: str) -> np.dtype:
    return np.dtype(object) if kind in VAR_KINDS else np.dtype(kind)


def schema_dtype(schema: list[Any]) -> np.dtype:
    """The numpy structured dtype of a table schema (variable-length columns as objects)."""
    fields = []
    for name, spec, *_ in schema:
        if isinstance(spec, str):
            fields.append((name, _leaf_dtype(spec)))
        else:
            fields.append((name, schema_dtype(spec)))
    return np.dtype(fields)


def _var_kind(values: Any) -> str:
    for v in values:
        if v is None:
            continue
        return "varbytes" if isinstance(v, (bytes, bytearray, np.bytes_)) else "varstr"
    return "varstr"


def _leaf_spec(name: str, dt: np.dtype, values: Any) -> str:
    if dt.subdtype is not None:
        raise ValueError(f"field {name!r}: sub-array fields ({dt}) are not supported by blz tables")
    if dt.kind == "O":
        return _var_kind(values)
    if dt.kind == "T":
        return "varstr"
    return native(dt).str


class MissingColumn:
    """A column with missing values, as blz stores it: ``values`` (an ndarray, or a list of
    str/bytes with ``None`` at missing rows for a variable-length column), ``missing`` (a
    bool array, true at missing rows, or ``None``), ``kind`` (the leaf spec) and ``pandas``
    (the pandas dtype to give back, or ``None``) and ``timezone`` (a zone-aware datetime
    column's zone, its values then in UTC, or ``None``)."""

    __slots__ = ("values", "missing", "kind", "pandas", "timezone", "options")

    def __init__(
        self,
        values: Any,
        missing: Any,
        kind: str,
        pandas: str | None,
        timezone: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.values = values
        self.missing = missing
        self.kind = kind
        self.pandas = pandas
        self.timezone = timezone
        # More leaf options for the native module (a categorical's dictionary).
        self.options = options or {}

    def __len__(self) -> int:
        return len(self.values)


def _is_missing(x: Any) -> bool:
    """Whether an object-column item is a missing value (None, NaN, NaT, pd.NA)."""
    if x is None:
        return True
    if isinstance(x, float) and x != x:
        return True
    name = type(x).__name__
    if name in ("NAType", "NaTType"):
        return True
    return isinstance(x, np.floating) and np.isnan(x)


def _pandas_name(dtype: Any) -> str:
    """The pandas dtype's name, as :func:`_pandas_dtype` reads it back: ``str(dtype)``, but
    a string dtype with its storage (``string[python]``, ``str[pyarrow]``: pandas 3's
    ``str``, whose missing value is NaN)."""
    if type(dtype).__name__ == "StringDtype":
        import pandas as pd

        base = "string" if dtype.na_value is pd.NA else "str"
        return f"{base}[{dtype.storage}]"
    return str(dtype)


def _pandas_dtype(name: str) -> Any:
    import pandas as pd

    for base, na in (("string[", pd.NA), ("str[", np.nan)):
        if name.startswith(base) and name.endswith("]"):
            return pd.StringDtype(name[len(base) : -1], na_value=na)
    return pd.api.types.pandas_dtype(name)


def zone_name(column: str, tz: Any) -> str:
    """The name blz records for a pandas column's time zone, as pyarrow writes it: the IANA
    key of a ``zoneinfo``/``pytz`` zone, ``"UTC"``, or a fixed offset ``+HH:MM``."""
    import datetime as _dt

    for attr in ("key", "zone"):  # zoneinfo, pytz
        name = getattr(tz, attr, None)
        if isinstance(name, str):
            return name
    if tz is _dt.timezone.utc or str(tz) in ("UTC", "tzutc()"):
        return "UTC"
    try:
        off = tz.utcoffset(None)
    except Exception:  # noqa: BLE001 (a zone that needs an instant: not a fixed offset)
        off = None
    if off is not None:
        secs = int(off.total_seconds())
        sign, secs = ("+" if secs >= 0 else "-"), abs(secs)
        if secs % 60 == 0 and secs < 24 * 3600:
            return f"{sign}{secs // 3600:02d}:{secs % 3600 // 60:02d}"
    raise TypeError(
        f"column {column!r}: the time zone {tz!r} has neither an IANA name nor a whole-minute "
        "fixed offset blz can record (use zoneinfo.ZoneInfo or a fixed offset)"
    )


def zone_tz(zone: str) -> Any:
    """The zone pandas is given back for a recorded zone: a ``datetime.timezone`` for a fixed
    offset, the name itself (pandas makes its zone object of it) otherwise."""
    import datetime as _dt

    if zone[:1] in "+-":
        body = zone[1:].replace(":", "")
        hours, minutes = int(body[:2]), int(body[2:4] or 0)
        delta = _dt.timedelta(hours=hours, minutes=minutes)
        return _dt.timezone(-delta if zone[0] == "-" else delta)
    return zone


def _object_column(name: str, obj: np.ndarray, pandas: str | None) -> MissingColumn:
    missing = np.fromiter((_is_missing(x) for x in obj), dtype=bool, count=len(obj))
    items = [None if m else x for x, m in zip(obj.tolist(), missing)]
    kind = _var_kind(items)
    return MissingColumn(items, missing if missing.any() else None, kind, pandas)


CATEGORY = "category"
CATEGORY_ORDERED = "category[ordered]"


def _categorical_column(name: str, s: Any) -> MissingColumn:
    """A pandas ``Categorical`` column as blz stores it: a dictionary-encoded string column
    whose dictionary starts with the categories, in their order (unused ones included), and
    whose pandas dtype ``category`` or ``category[ordered]`` gives it back."""
    dtype = s.dtype
    cats = dtype.categories
    if not all(isinstance(c, str) for c in cats):
        kinds = sorted({type(c).__name__ for c in cats if not isinstance(c, str)})
        raise TypeError(
            f"column {name!r}: a Categorical of {', '.join(kinds)} categories is not stored by "
            "blz, which keeps categories of strings (store the values instead, or convert "
            "the categories: series.cat.rename_categories(str))"
        )
    missing = np.asarray(s.isna(), dtype=bool)
    codes = np.asarray(s.cat.codes)
    names = list(cats)
    items = [None if c < 0 else names[c] for c in codes.tolist()]
    return MissingColumn(
        items,
        missing if missing.any() else None,
        "varstr",
        CATEGORY_ORDERED if dtype.ordered else CATEGORY,
        options={"dictionary": True, "dictionary_entries": names},
    )


# A string column is dictionary-encoded by itself when, among its first DICTIONARY_SAMPLE
# values (missing ones aside), there are at least DICTIONARY_MIN_ROWS and no more than one
# distinct value in DICTIONARY_RATIO.
DICTIONARY_SAMPLE = 65536
DICTIONARY_MIN_ROWS = 64
DICTIONARY_RATIO = 10


def dictionary_pays(items: list[Any]) -> bool:
    """Whether a string column's values are stored smaller dictionary-encoded (README,
    "Categories and dictionary-encoded strings"): few distinct values among the first
    :data:`DICTIONARY_SAMPLE`."""
    sample = [x for x in items[:DICTIONARY_SAMPLE] if x is not None]
    if len(sample) < DICTIONARY_MIN_ROWS:
        return False
    return len(set(sample)) * DICTIONARY_RATIO <= len(sample)


def apply_dictionary(fields: list[Any], data: Any, dictionary: Any, prefix: str = "") -> list[Any]:
    """``fields`` with their ``varstr`` leaves dictionary-encoded as ``dictionary`` asks:
    ``None`` where :func:`dictionary_pays`, ``True`` all, ``False`` none (a Categorical
    column always is), or a collection of column paths."""
    out: list[Any] = []
    for f in fields:
        name, spec = f[0], f[1]
        path = prefix + name
        if not isinstance(spec, str):
            out.append((name, apply_dictionary(spec, data, dictionary, path + "/")))
            continue
        opts = dict(f[2]) if len(f) > 2 and f[2] else {}
        if spec == "varstr" and not opts.get("dictionary"):
            if dictionary is None:
                v = _as_column(_get(data, path))
                items = v.values if isinstance(v, MissingColumn) else v
                on = isinstance(items, (list, np.ndarray)) and dictionary_pays(list(items))
            elif isinstance(dictionary, bool):
                on = dictionary
            else:
                on = path in set(dictionary)
            if on:
                opts["dictionary"] = True
        out.append((name, spec, opts) if opts else (name, spec))
    return out


def frame_column(name: str, s: Any) -> Any:
    """A pandas Series as blz stores it, following pyarrow's ``Table.from_pandas``: None,
    NaN, NaT and pd.NA are missing in every column, a float column's NaN included;
    nullable (``Int64``, ``boolean``, ``Float64``, ``string``) and pyarrow-backed dtypes
    are taken with their missing values; a ``Categorical`` of strings as a
    dictionary-encoded column. A :class:`MissingColumn`."""
    dtype = s.dtype
    if type(dtype).__name__ == "CategoricalDtype":
        return _categorical_column(name, s)
    pname = _pandas_name(dtype)
    if type(dtype).__name__ == "DatetimeTZDtype":
        # The instants in UTC, the zone recorded beside them; NaT stays NaT (missing in
        # Arrow and SQL, as a naive column's).
        zone = zone_name(name, dtype.tz)
        a = np.ascontiguousarray(s.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy())
        return MissingColumn(a, None, native(a.dtype).str, pname, zone)
    if isinstance(dtype, np.dtype):
        a = s.to_numpy()
        if dtype.kind == "O":
            return _object_column(name, a, pname)
        if dtype.kind == "f":
            missing = np.isnan(a)
            values = np.where(missing, 0, a).astype(dtype) if missing.any() else a
            return MissingColumn(values, missing if missing.any() else None, _leaf_spec(name, dtype, a), pname)
        return MissingColumn(a, None, _leaf_spec(name, dtype, a), pname)
    # Extension dtypes: masked (Int64, boolean, Float64), string, pyarrow-backed.
    missing = np.asarray(s.isna(), dtype=bool)
    npdt = getattr(dtype, "numpy_dtype", None)
    kind_char = getattr(npdt, "kind", "O") if npdt is not None else "O"
    if type(dtype).__name__ == "StringDtype" or kind_char in "OUS" or npdt is None:
        obj = s.astype(object).to_numpy()
        items = [None if m else x for x, m in zip(obj.tolist(), missing)]
        return MissingColumn(items, missing if missing.any() else None, _var_kind(items), pname)
    if kind_char == "M" or kind_char == "m":
        raise TypeError(f"column {name!r}: {pname} is not stored by this blz")
    fill = False if kind_char == "b" else 0
    values = s.to_numpy(dtype=npdt, na_value=fill)
    return MissingColumn(np.ascontiguousarray(values), missing if missing.any() else None, native(npdt).str, pname)


def fields_from_dtype(dt: np.dtype, data: Any = None) -> list[Any]:
    """A table schema for a structured dtype (``data``, when given, tells str from bytes in
    object fields)."""
    out: list[Any] = []
    for name in dt.names or ():
        sub = dt.fields[name][0]
        col = data[name] if data is not None else ()
        if sub.names:
            out.append((name, fields_from_dtype(sub, col if data is not None else None)))
        elif sub.kind == "O" and any(x is None for x in col):
            # None in an object field is missing (a NaN in a float field stays a value).
            out.append((name, _leaf_spec(name, sub, col), {"nullable": True}))
        else:
            out.append((name, _leaf_spec(name, sub, col)))
    return out


def numpy_missing(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``values`` with its missing rows shown as numpy does: NaN in a float column, NaT in
    a datetime one, None in an object one; an integer, bool or fixed-string column keeps
    its fill value there."""
    missing = valid == 0
    if not missing.any():
        return values
    if values.dtype.kind in "fcOmM":
        values = values.copy() if not values.flags.writeable else values
        values[missing] = None if values.dtype.kind == "O" else np.nan if values.dtype.kind in "fc" else np.datetime64("NaT")
    return values


def pandas_series(
    values: np.ndarray, valid: np.ndarray | None, pandas: str | None, zone: str | None = None
) -> Any:
    """A column read back as pandas: in its recorded pandas dtype, missing rows as that
    dtype's missing value. Without a recorded dtype: numpy's dtype when nothing is
    missing, else NaN in floats, None in objects and pandas' nullable dtype (``Int64``,
    ``boolean``) for integers and bools."""
    import pandas as pd

    if zone is not None and values.dtype.kind == "M":
        # UTC instants shown in their zone, in the stored unit.
        if valid is not None:
            values = numpy_missing(values, valid)
        return pd.Series(values, copy=False).dt.tz_localize("UTC").dt.tz_convert(zone_tz(zone))
    missing = None if valid is None else valid == 0
    if missing is not None and not missing.any():
        missing = None
    if pandas is None:
        if missing is None:
            return values
        if values.dtype.kind in "iub":
            dt = pd.api.types.pandas_dtype("boolean" if values.dtype.kind == "b" else values.dtype.name.capitalize().replace("Uint", "UInt"))
            return _masked(dt, values, missing)
        return numpy_missing(values, valid)
    dt = _pandas_dtype(pandas)
    if isinstance(dt, np.dtype):
        if dt.kind in "fO" or missing is None:
            values = values.astype(dt, copy=False)
            if missing is not None:
                values = numpy_missing(values, valid)
            # An object column stays one (pandas 3 would make strings its `str` dtype).
            return pd.Series(values, dtype=dt, copy=False)
        # An integer or bool column that came without nulls and got some since.
        nd = "boolean" if dt.kind == "b" else dt.name.capitalize().replace("Uint", "UInt")
        return _masked(pd.api.types.pandas_dtype(nd), values, missing)
    if hasattr(dt, "construct_array_type") and type(dt).__name__ in (
        "Int8Dtype", "Int16Dtype", "Int32Dtype", "Int64Dtype", "UInt8Dtype", "UInt16Dtype",
        "UInt32Dtype", "UInt64Dtype", "Float32Dtype", "Float64Dtype", "BooleanDtype",
    ):
        return _masked(dt, values, missing if missing is not None else np.zeros(len(values), bool))
    if values.dtype.kind == "O" and missing is not None:
        values = values.copy()
        values[missing] = None
    if type(dt).__name__ == "ArrowDtype":
        import pyarrow as pa

        arr = pa.array(values, type=dt.pyarrow_dtype, mask=missing, from_pandas=False)
        return pd.arrays.ArrowExtensionArray(arr)
    return pd.array(values, dtype=dt)


def _masked(dt: Any, values: np.ndarray, missing: np.ndarray) -> Any:
    cls = dt.construct_array_type()
    return cls(np.ascontiguousarray(values, dtype=dt.numpy_dtype), np.ascontiguousarray(missing, dtype=bool))


def _as_column(v: Any) -> Any:
    """A dict value as a column: an ndarray, a list of str/bytes (variable-length), or a
    :class:`MissingColumn`."""
    if isinstance(v, MissingColumn):
        return v
    if hasattr(v, "to_numpy") and hasattr(v, "dtype") and not isinstance(v, np.ndarray):
        return frame_column(str(getattr(v, "name", "")), v)  # a pandas Series
    if isinstance(v, np.ndarray):
        return v
    v = list(v)
    if v and all(isinstance(x, (str, bytes)) or x is None for x in v) and any(
        x is not None for x in v
    ):
        return v
    return np.asarray(v)


def fields_from_mapping(data: Mapping[str, Any]) -> list[Any]:
    out: list[Any] = []
    for name, v in data.items():
        if isinstance(v, Mapping):
            out.append((name, fields_from_mapping(v)))
            continue
        v = _as_column(v)
        if isinstance(v, MissingColumn):
            extra = {"nullable": True, "pandas": v.pandas, **v.options}
            if v.timezone is not None:
                extra["timezone"] = v.timezone
            out.append((name, v.kind, extra))
        elif isinstance(v, list):
            if any(x is None for x in v):
                out.append((name, _var_kind(v), {"nullable": True}))
            else:
                out.append((name, _var_kind(v)))
        elif v.dtype.names:
            out.append((name, fields_from_dtype(v.dtype, v)))
        else:
            if v.ndim != 1:
                raise ValueError(f"column {name!r} must be 1-d, has shape {v.shape}")
            out.append((name, _leaf_spec(name, v.dtype, v)))
    return out


def is_tabular(data: Any) -> bool:
    """Whether ``blz.create`` makes a table of ``data``."""
    if isinstance(data, Mapping):
        return True
    if isinstance(data, np.ndarray) and data.dtype.names:
        return True
    return type(data).__name__ == "DataFrame" and hasattr(data, "columns")


def normalize_tabular(data: Any) -> Any:
    """A DataFrame as a dict of columns; anything else as it is."""
    if type(data).__name__ == "DataFrame" and hasattr(data, "columns"):
        return {str(c): frame_column(str(c), data[c]) for c in data.columns}
    return data


def _get(data: Any, path: str) -> Any:
    """The values of leaf ``path`` (``a/b``) in a structured array or a (nested) mapping."""
    if isinstance(data, Mapping) and path in data:
        return data[path]
    cur = data
    for part in path.split("/"):
        if isinstance(cur, Mapping):
            if part not in cur:
                raise KeyError(f"no values given for column {path!r}")
            cur = cur[part]
        else:
            cur = _as_column(cur)
            if not (isinstance(cur, np.ndarray) and cur.dtype.names and part in cur.dtype.names):
                raise KeyError(f"no values given for column {path!r}")
            cur = cur[part]
    return cur


def _unknown_columns(leaves: list[tuple[str, str]], data: Any) -> list[str]:
    """Column paths given in ``data`` (a mapping or a structured array, nested or by slash
    path) that are not the table's."""
    paths = [p for p, _ in leaves]
    unknown: list[str] = []

    def walk(d: Any, prefix: str) -> None:
        if isinstance(d, Mapping):
            items = [(str(k), v) for k, v in d.items()]
        elif isinstance(d, np.ndarray) and d.dtype.names:
            items = [(n, d[n]) for n in d.dtype.names]
        else:
            return
        for name, v in items:
            p = prefix + name
            if p in paths:
                continue
            if any(q.startswith(p + "/") for q in paths):
                walk(v, p + "/")
            else:
                unknown.append(p)

    walk(data, "")
    return unknown


def _var_items(path: str, kind: str, v: Any) -> list[Any]:
    """A variable-length column's items as the native module takes them (``None`` for a
    missing one)."""
    items = v.tolist() if isinstance(v, np.ndarray) else list(v)
    want = str if kind == "varstr" else bytes
    out = []
    for x in items:
        if x is None:
            pass
        elif isinstance(x, (bytes, np.bytes_)) and want is str:
            x = bytes(x).decode()
        elif isinstance(x, (str, np.str_)) and want is bytes:
            x = str(x).encode()
        elif not isinstance(x, (str, bytes)):
            raise TypeError(
                f"column {path!r} holds {kind}: each value is a str or bytes, "
                f"not {type(x).__name__}"
            )
        out.append(x)
    return out


def columns_payload(
    leaves: list[tuple[str, str]], data: Any, nullable: set[str] | None = None
) -> list[tuple[Any, ...]]:
    """Per leaf ``(path, values)`` or ``(path, values, validity)`` as the native module
    takes them. Columns the table does not have are refused (:class:`InvalidArgumentError`,
    a ``ValueError``), as is a column given as one mapping or string instead of one value
    per row (``TypeError``). ``nullable``: the table's nullable leaves (``None``: a table
    being made from ``data``, whose missing values all make nullable leaves); a float
    column's missing values go to a leaf that is not nullable as NaN."""
    data = normalize_tabular(data)
    if not isinstance(data, Mapping) and not (isinstance(data, np.ndarray) and data.dtype.names):
        raise TypeError("table rows are a structured array, a dict of arrays or a DataFrame")
    unknown = _unknown_columns(leaves, data)
    if unknown:
        raise InvalidArgumentError(
            f"no column {', '.join(repr(u) for u in unknown)} in the table "
            f"(columns: {', '.join(p for p, _ in leaves)})"
        )
    out = []
    for path, kind in leaves:
        raw = _get(data, path)
        if isinstance(raw, (Mapping, str, bytes)):
            raise TypeError(
                f"column {path!r}: give one value per row (a sequence or an array), "
                f"not a {type(raw).__name__}"
            )
        v = _as_column(raw)
        if isinstance(v, MissingColumn):
            keep = nullable is None or path in nullable
            miss = v.missing
            values = v.values
            if kind in VAR_KINDS:
                out.append((path, _var_items(path, kind, values)))
                continue
            if miss is not None and not keep and np.dtype(kind).kind == "f":
                values = np.where(miss, np.nan, np.asarray(values, dtype=np.dtype(kind)))
                miss = None
            arr = np.ascontiguousarray(values, dtype=np.dtype(kind)).reshape(-1)
            if miss is None:
                out.append((path, arr))
            else:
                out.append((path, arr, np.ascontiguousarray(~miss, dtype=np.uint8)))
        elif kind in VAR_KINDS:
            out.append((path, _var_items(path, kind, v)))
        else:
            out.append((path, np.ascontiguousarray(v, dtype=np.dtype(kind)).reshape(-1)))
    return out


def _field_spec(name: str, dtype: Any) -> Any:
    if isinstance(dtype, str) and dtype in VAR_KINDS:
        return (name, dtype)
    if dtype is str:
        return (name, "varstr")
    if dtype is bytes:
        return (name, "varbytes")
    dt = np.dtype(dtype)
    if dt.names:
        return (name, fields_from_dtype(dt))
    return (name, _leaf_spec(name, dt, ()))


def _nullable_spec(spec: Any) -> Any:
    name, inner = spec[0], spec[1]
    if isinstance(inner, str):
        return (name, inner, {"nullable": True})
    return (name, [_nullable_spec(s) for s in inner])


# -- columns ------------------------------------------------------------------------------


class Column(ExprOps, Reductions):
    """One column of a table, indexed like a 1-d numpy array: a leaf (``t["pos/x"]``), or a
    nested record (``t["pos"]``, records of its fields). Reading it opens no other column's
    files."""

    def __init__(self, table: Table, path: str, kind: str) -> None:
        self._table = table
        self.path = path
        self._kind = kind

    @property
    def dtype(self) -> np.dtype:
        if self._kind is None:
            dt = self._table._dtype
            for p in self.path.split("/"):
                dt = dt[p]
            return dt
        return _leaf_dtype(self._kind)

    @property
    def shape(self) -> tuple[int]:
        return (len(self._table),)

    @property
    def ndim(self) -> int:
        return 1

    def __len__(self) -> int:
        return len(self._table)

    def _rows(self, start: int, end: int) -> np.ndarray:
        if self._kind is None:
            return self._table._read_rows(start, end, prefix=self.path)
        values = self._table._read_leaf(self.path, self._kind, start, end)
        valid = self._table._validity(self.path, start, end)
        return values if valid is None else numpy_missing(values, valid)

    def __getitem__(self, key: Any) -> Any:
        t = self._table
        # A basic key: one call into blz reads this column's rows on the latest commit.
        got = t._raw.rows(key, self.path)
        if got is None:  # rows by index or mask: only their chunks are decoded
            return t._fresh(lambda: self._take(_fancy.row_indices(key, len(t))))
        changed, (start, stop, step), view, values, valid = got
        if changed:
            t._refresh()
        if self._kind is None:
            if changed and set(values) != {p for p, _ in t._leaves if p.startswith(self.path + "/")}:
                return self[key]  # another commit changed the columns since that read
            buf = t._records(stop - start, values, valid, prefix=self.path)
        else:
            buf = t._records_leaf(stop - start, values[self.path], valid.get(self.path))
        return buf[::step][view]

    def _take(self, idx: np.ndarray) -> Any:
        if self._kind is None:
            return self._table._read_rows(0, 0, prefix=self.path, indices=idx)
        values = self._table._read_leaves([(self.path, self._kind)], 0, 0, idx)[self.path]
        valid = self._table._validity(self.path, 0, 0, idx)
        return values if valid is None else numpy_missing(values, valid)

    def _blz_reduce(self, op: str, axes: Any, ddof: float) -> Any:
        # Reductions (``c.sum()``, ``np.max(c)``: blz/_reduce.py) run in Rust.
        return self._table._fresh(
            lambda: _blz.reduce_column(self._table._raw, self.path, op, axes, ddof)
        )

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a blz column is read from disk: a copy cannot be avoided")
        a = self._table._fresh(lambda: self._rows(0, len(self)))
        return a if dtype is None else a.astype(dtype, copy=False)

    def __iter__(self) -> Iterator[Any]:
        step = max(
            self._table._chunklen(p)
            for p, _ in self._table._leaves
            if p == self.path or p.startswith(self.path + "/")
        )
        for s in range(0, len(self), step):
            yield from self._rows(s, min(s + step, len(self)))

    def __reduce__(self) -> tuple[Any, ...]:
        import operator

        return (operator.getitem, (self._table, self.path))

    def __repr__(self) -> str:
        return f"<blz.Column {self.path!r} of {self._table.path!r} len={len(self)} dtype={self.dtype}>"


# -- tables -------------------------------------------------------------------------------


class Table(Saving):
    """A table of (nested, variable-length) columns, stored column-wise.

    ``t["pos/x"]`` is one column (:class:`Column`); ``t[10:20]`` rows as a numpy structured
    array (nested fields as nested records, variable-length columns as objects); so are
    ``t[[3, 0, 7]]`` (integer arrays, negative counting from the end, repeats allowed) and
    ``t[mask]`` (a boolean mask of the table's length), which decode only the chunks holding
    those rows. ``t[idx] = records`` writes rows by index, one transaction.

    A table opened with mode ``"r"`` follows writers' commits as an :class:`~blz.Array`
    does: each call shows the latest commit (rows, columns), one call one commit.
    """

    def __init__(self, raw: Any, mode: str) -> None:
        self._raw = raw
        self._mode = mode
        self._refresh()

    def _refresh(self) -> None:
        self._schema = self._raw.schema()
        self._leaves: list[tuple[str, str]] = self._raw.leaves()
        self._nrows: int = self._raw.nrows()
        self._dtype = schema_dtype(self._schema)
        self._info = {p: (cl, codec, clevel, nb, cb) for p, nb, cb, cl, codec, clevel in self._raw.column_info()}
        extras = self._raw.leaf_extras()
        self._nullable: set[str] = {p for p, n, _, _ in extras if n}
        self._pandas: dict[str, str] = {p: pd for p, _, pd, _ in extras if pd is not None}
        # Zone-aware datetime columns: their values are UTC instants shown in the zone.
        self._zones: dict[str, str] = {p: z for p, _, _, z in extras if z is not None}

    def refresh(self) -> bool:
        """Shows the table's latest commit now; whether it changed (read handles do this at
        every call)."""
        changed = self._raw.refresh()
        if changed:
            self._refresh()
        return changed

    def _follow(self) -> None:
        # A writing handle follows the other writing handles of this process (one atomic
        # load when none committed).
        self.refresh()

    def _fresh(self, read: Any) -> Any:
        """``read()`` on the latest commit, made again when it met a writer's commit."""
        return one_commit(self._follow, read)

    @property
    def path(self) -> str:
        return str(self._raw.path)

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def columns(self) -> list[str]:
        """The leaf columns' paths (``name``, or ``parent/name`` for nested fields)."""
        self._follow()
        return [p for p, _ in self._leaves]

    @property
    def dtype(self) -> np.dtype:
        """The rows' numpy structured dtype."""
        self._follow()
        return self._dtype

    @property
    def shape(self) -> tuple[int]:
        self._follow()
        return (self._nrows,)

    @property
    def nrows(self) -> int:
        self._follow()
        return self._nrows

    @property
    def nbytes(self) -> int:
        self._follow()
        return self._raw.sizes()[0]

    @property
    def cbytes(self) -> int:
        self._follow()
        return self._raw.sizes()[1]

    @property
    def attrs(self) -> Attributes:
        return Attributes(self._raw)

    def __len__(self) -> int:
        self._follow()
        return self._nrows

    def _chunklen(self, path: str) -> int:
        return max(1, self._info[path][0])

    def _read_leaf(self, path: str, kind: str, start: int, end: int) -> np.ndarray:
        if kind in VAR_KINDS:
            out = np.empty(end - start, dtype=object)
            out[:] = self._raw.read_var_column(path, start, end)
            return out
        out = empty(end - start, np.dtype(kind))
        if end > start:
            self._raw.read_column_into(path, start, end, out)
        return out

    def _validity(
        self, path: str, start: int, end: int, indices: np.ndarray | None = None
    ) -> np.ndarray | None:
        """The validity of rows ``start..end`` (or at ``indices``) of leaf ``path``: a
        ``uint8`` array, 0 at missing rows; ``None`` when the column holds no nulls."""
        if path not in self._nullable:
            return None
        if indices is not None:
            out = np.ones(len(indices), dtype=np.uint8)
            if len(indices):
                self._raw.take_validity_into(path, np.asarray(indices, dtype=np.int64).tolist(), out)
            return out
        out = np.ones(end - start, dtype=np.uint8)
        if end > start:
            self._raw.read_validity_into(path, start, end, out)
        return out

    def _read_leaves(
        self, leaves: list[tuple[str, str]], start: int, end: int, indices: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """Rows ``start..end`` (or the rows at ``indices``) of several leaf columns, decoded
        in one parallel pass (each fixed-size column into a numpy array allocated once)."""
        if indices is not None:
            start, end = 0, len(indices)
        out: dict[str, np.ndarray] = {}
        fixed = []
        var = []
        for path, kind in leaves:
            if kind in VAR_KINDS:
                var.append(path)
            else:
                out[path] = empty(end - start, np.dtype(kind))
                fixed.append((path, out[path]))
        if indices is not None and end > start:
            lists = _blz.table_take(self._raw, indices, fixed, var)
        elif end > start:
            lists = self._raw.read_columns(start, end, fixed, var)
        else:
            lists = [[] for _ in var]
        for path, values in zip(var, lists):
            a = np.empty(end - start, dtype=object)
            a[:] = values
            out[path] = a
        return {p: out[p] for p, _ in leaves}

    def _read_rows(
        self, start: int, end: int, prefix: str | None = None, indices: np.ndarray | None = None
    ) -> np.ndarray:
        """Rows ``start..end`` (or the rows at ``indices``) as records: all fields, or those
        of the nested record ``prefix`` (only its columns are read)."""
        if indices is not None:
            start, end = 0, len(indices)
        wanted = [(p, k) for p, k in self._leaves if prefix is None or p.startswith(prefix + "/")]
        values = self._read_leaves(wanted, start, end, indices)
        valid = {p: self._validity(p, start, end, indices) for p, _ in wanted}
        return self._records(end - start, values, valid, prefix)

    @staticmethod
    def _records_leaf(n: int, values: Any, valid: np.ndarray | None) -> np.ndarray:
        """One leaf column's ``n`` rows: a numpy array (an object one of a variable-length
        column's values), missing rows shown where ``valid`` is 0."""
        if not isinstance(values, np.ndarray):
            a = np.empty(n, dtype=object)
            a[:] = values
            values = a
        return values if valid is None else numpy_missing(values, valid)

    def _records(
        self,
        n: int,
        values: dict[str, Any],
        valid: dict[str, np.ndarray | None],
        prefix: str | None = None,
    ) -> np.ndarray:
        """``n`` records of the leaf columns ``values`` (numpy arrays, or lists of a
        variable-length column's values), missing rows shown where ``valid`` is 0."""
        dtype = self._dtype
        skip = 0
        if prefix is not None:
            for p in prefix.split("/"):
                dtype = dtype[p]
            skip = len(prefix.split("/"))
        out = empty(n, dtype)
        for path, v in values.items():
            if not isinstance(v, np.ndarray):
                a = np.empty(n, dtype=object)
                a[:] = v
                v = a
            ok = valid.get(path)
            if ok is not None:
                v = numpy_missing(v, ok)
            target = out
            parts = path.split("/")[skip:]
            for p in parts[:-1]:
                target = target[p]
            target[parts[-1]] = v
        return out

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            for p, k in self._leaves:
                if p == key:
                    return Column(self, p, k)
            if any(p.startswith(key + "/") for p, _ in self._leaves):
                return Column(self, key, None)  # a nested record: its leaves as records
            raise KeyError(f"no column {key!r} (columns: {', '.join(self.columns)})")
        # A basic key: one call into blz reads the rows of every column on the latest
        # commit (RawTable.rows); the records are made of them here.
        got = self._raw.rows(key)
        if got is None:  # rows by index or mask: only their chunks are decoded
            return self._fresh(lambda: self._read_rows(0, 0, indices=_fancy.row_indices(key, self._nrows)))
        changed, (start, stop, step), view, values, valid = got
        if changed:
            self._refresh()
            if set(values) != {p for p, _ in self._leaves}:
                # Another commit changed the columns since that read: read again.
                return self[key]
        return self._records(stop - start, values, valid)[::step][view]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a blz table is read from disk: a copy cannot be avoided")
        a = self._fresh(lambda: self._read_rows(0, self._nrows))
        return a if dtype is None else a.astype(dtype, copy=False)

    def __iter__(self) -> Iterator[Any]:
        step = max(self._chunklen(p) for p, _ in self._leaves) if self._leaves else 1
        for s in range(0, self._nrows, step):
            yield from self._read_rows(s, min(s + step, self._nrows))

    def where(self, expr: str, columns: Any = None, *, as_batches: bool = False, batch_rows: int | None = None) -> Any:
        """The rows where ``expr`` holds (numexpr syntax, as bcolz's ``ctable.where``:
        ``"(g == 7) & (x > 0.5)"``) as a structured array like ``t[...]`` (or only the leaf
        paths of ``columns``); ``as_batches=True`` gives an iterator of such arrays. See
        ``blz._where`` for the expression language."""
        from ._where import table_where

        return table_where(self, expr, columns, as_batches, batch_rows)

    def where_rows(self, expr: str) -> np.ndarray:
        """The indices of the rows where ``expr`` holds."""
        from ._where import table_where_rows

        return table_where_rows(self, expr)

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    # -- writing --------------------------------------------------------------------------

    def append(self, rows: Any) -> None:
        """Appends rows: a structured array, a dict of arrays (keyed by leaf path or nested
        dicts), a DataFrame, or a list of tuples in the table's field order. One
        transaction across all columns."""
        if isinstance(rows, list):
            rows = np.array([tuple(r) for r in rows], dtype=self._dtype)
        try:
            self._raw.append(columns_payload(self._leaves, rows, self._nullable))
        finally:
            self._refresh()

    def __setitem__(self, key: Any, rows: Any) -> None:
        """Overwrites a contiguous range of rows (``t[10:20] = records``), or rows by index
        (``t[[3, 0, 7]] = records``, ``t[mask] = records``; of repeated rows the last record
        wins). One transaction across all columns."""
        idx = _fancy.row_indices(key, self._nrows)
        if idx is not None:
            if isinstance(rows, list):
                rows = np.array([tuple(r) for r in rows], dtype=self._dtype)
            payload = columns_payload(self._leaves, rows, self._nullable)
            for p, v, *_ in payload:
                if len(v) != len(idx):
                    raise ValueError(f"column {p}: {len(v)} values given for {len(idx)} rows")
            try:
                _blz.table_put(self._raw, idx, payload)
            finally:
                self._refresh()
            return
        if not isinstance(key, (int, slice)) or isinstance(key, slice) and key.step not in (None, 1):
            raise TypeError("table rows are written by an integer or a slice with step 1")
        start, _step, n, _reversed, _keep = self._raw.select(key).axes[0]
        if isinstance(rows, list):
            rows = np.array([tuple(r) for r in rows], dtype=self._dtype)
        payload = columns_payload(self._leaves, rows, self._nullable)
        for p, v, *_ in payload:
            if len(v) != n:
                raise ValueError(f"column {p}: {len(v)} values given for {n} rows")
        try:
            self._raw.write_rows(start, payload)
        finally:
            self._refresh()

    def resize(self, n: int) -> None:
        """Sets the number of rows (new rows take each column's fill value)."""
        try:
            self._raw.resize(int(n))
        finally:
            self._refresh()

    def add_column(self, name: str, dtype: Any, nullable: bool = False) -> None:
        """Adds a top-level column of ``dtype`` (a numpy dtype, a structured dtype for a
        nested record, or ``str``/``bytes``/``"varstr"``/``"varbytes"`` for variable-length
        values), filled with its default for the existing rows; ``nullable=True``: a column
        that may hold missing values, missing in the existing rows."""
        spec = _field_spec(name, dtype)
        if nullable:
            spec = _nullable_spec(spec)
        try:
            self._raw.add_column(spec)
        finally:
            self._refresh()

    def drop_column(self, path: str) -> None:
        try:
            self._raw.drop_column(path)
        finally:
            self._refresh()

    def rename_column(self, path: str, new_name: str) -> None:
        """Renames a column (``parent/name`` for a nested one) to ``new_name`` in its parent."""
        try:
            self._raw.rename_column(path, new_name)
        finally:
            self._refresh()

    def verify(self) -> None:
        """Checks every chunk of every column; raises the first problem found."""
        raise_problems(self._raw.verify())

    # -- export ---------------------------------------------------------------------------

    def to_pandas(self) -> Any:
        """A pandas DataFrame, a column per leaf (named by its path), each in the pandas
        dtype it was made from (a table made from a DataFrame gives that frame back), its
        missing values as that dtype's (NaN, None, pd.NA)."""
        import pandas as pd

        def read() -> dict[str, Any]:
            coded = {p for p, _ in self._leaves if self._pandas.get(p, "").startswith(CATEGORY)}
            cols = self._read_leaves([lf for lf in self._leaves if lf[0] not in coded], 0, self._nrows)
            return {
                p: self._categorical(p, 0, self._nrows)
                if p in coded
                else pandas_series(
                    cols[p], self._validity(p, 0, self._nrows), self._pandas.get(p), self._zones.get(p)
                )
                for p, _ in self._leaves
            }

        cols = self._fresh(read)
        return pd.DataFrame(cols, copy=False)

    def _categorical(self, path: str, start: int, end: int) -> Any:
        """Rows ``start..end`` of a dictionary-encoded column as a pandas ``Categorical``
        (its dictionary the categories, in code order): codes and dictionary read as they
        are stored, no string decoded per row."""
        import pandas as pd

        codes = np.empty(end - start, dtype=np.int32)
        dictionary = self._raw.read_codes_into(path, start, end, codes)
        ordered = self._pandas.get(path) == CATEGORY_ORDERED
        return pd.Categorical.from_codes(codes, categories=dictionary, ordered=ordered)

    def to_arrow(self) -> Any:
        """A pyarrow Table (nested fields as struct columns), read through
        :meth:`__arrow_c_stream__`."""
        import pyarrow as pa

        return pa.table(self)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow PyCapsule stream protocol: pyarrow (``pa.table(t)``), polars
        (``pl.DataFrame(t)``) and duckdb read the table directly, batch by batch (a batch per
        superchunk of rows, its columns decoded in parallel); no Python package is involved.

        Types: numbers and bool as Arrow's, complex as a fixed-size list of two floats,
        ``S<n>``/``U<n>`` and variable-length columns as (large) binary and UTF-8 (padding
        removed, as numpy reads them), dictionary-encoded string columns (a Categorical's)
        as ``dictionary<int32, utf8>``, nested fields as structs. ``requested_schema`` (an
        ``arrow_schema`` capsule) is honoured when it selects fields, reorders them, or asks
        for 32-bit string offsets; otherwise the table's own schema is streamed."""
        self._follow()
        return self._raw.arrow_stream(requested_schema)

    def info(self) -> dict[str, Any]:
        self._follow()
        return {
            "path": self.path,
            "kind": "table",
            "nrows": self._nrows,
            "nbytes": self.nbytes,
            "cbytes": self.cbytes,
            "columns": {
                p: {
                    "dtype": k,
                    **({"timezone": self._zones[p]} if p in self._zones else {}),
                    "chunklen": self._info[p][0],
                    "codec": self._info[p][1],
                    "clevel": self._info[p][2],
                    "nbytes": self._info[p][3],
                    "cbytes": self._info[p][4],
                }
                for p, k in self._leaves
            },
            "attrs": json.loads(self._raw.attrs_json()),
        }

    def __repr__(self) -> str:
        nbytes, cbytes = self._raw.sizes()
        return (
            f"<blz.Table {self.path!r} nrows={self._nrows} columns={self.columns} "
            f"nbytes={size_text(nbytes)} cbytes={size_text(cbytes)} mode={self.mode!r}>"
        )

    def close(self) -> None:
        self._raw.close()
        self._mode = "r"

    def __enter__(self) -> Table:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        from . import open as _open

        if is_memory(self.path):
            refuse_pickle(self.path)
        return (_open, (self.path, self._mode))


__all__ = ["Table", "Column"]
