"""Layer datasets: sorted columns with row groups, read through cursors."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from ._array import raise_problems
from ._memory import Saving, is_memory, refuse_pickle

_BATCH = 1024
# The default memory budget of a sorting build (blz::layer::DEFAULT_SORT_MEMORY).
_DEFAULT_SORT_MEMORY = 256 << 20
# DBSP's batch shapes: their key columns (blz::layer::Shape::column_names).
SHAPES = {
    "wset": ("key",),
    "indexed_zset": ("key", "val"),
    "val_batch": ("key", "val", "time"),
}


class Cursor:
    """A position in one row group of one column of a layer dataset.

    Positions run from "before the first row" through the rows to "after the last row";
    :meth:`next` from before the first row lands on the first row. A new cursor is on the
    group's first row. Iterating a cursor yields the group's values from its first row.
    """

    def __init__(self, layer: Layer, column: int, parent: int | None) -> None:
        self._layer = layer
        self.column = column
        self._parent = parent
        start, end = layer._raw.group_rows(column, parent)
        self._start = start
        self._count = end - start
        self._at = 1  # 0: before the first row; 1..count: on a row; count + 1: after

    @property
    def count(self) -> int:
        """Rows in the row group."""
        return self._count

    def __len__(self) -> int:
        return self._count

    @property
    def valid(self) -> bool:
        """True when the cursor is on a row."""
        return 1 <= self._at <= self._count

    @property
    def index(self) -> int | None:
        """The position of the current row in its group."""
        return self._at - 1 if self.valid else None

    @property
    def row(self) -> int | None:
        """The current row's number in the whole column."""
        return self._start + self._at - 1 if self.valid else None

    def first(self) -> bool:
        self._at = 1
        return self.valid

    def last(self) -> bool:
        self._at = self._count
        return self.valid

    def next(self) -> bool:
        """Moves forward one row; False when it leaves the group."""
        if self._at <= self._count:
            self._at += 1
        return self.valid

    def prev(self) -> bool:
        """Moves back one row; False when it leaves the group."""
        if self._at > 0:
            self._at -= 1
        return self.valid

    def seek_ge(self, value: Any) -> bool:
        """Moves to the first row whose value is ``>= value``; False (after the last row)
        when there is none."""
        self._at = self._layer._raw.seek(self.column, self._parent, _py(value), True)
        return self.valid

    def seek_le(self, value: Any) -> bool:
        """Moves to the last row whose value is ``<= value``; False (before the first row)
        when there is none."""
        self._at = self._layer._raw.seek(self.column, self._parent, _py(value), False)
        return self.valid

    @property
    def value(self) -> Any:
        """The value under the cursor (None when not on a row)."""
        if not self.valid:
            return None
        vals, _ = self._layer._raw.values(self.column, self._parent, self._at - 1, 1, False)
        return vals[0]

    @property
    def weight(self) -> Any:
        """The weight of the current row (last column of a weighted layer)."""
        if not self.valid:
            return None
        _, ws = self._layer._raw.values(self.column, self._parent, self._at - 1, 1, True)
        return ws[0] if ws else None

    def child(self) -> Cursor | None:
        """A cursor over the row group the current row owns in the next column."""
        if not self.valid or self.column + 1 >= self._layer.ncolumns:
            return None
        return Cursor(self._layer, self.column + 1, self.row)

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is in this row group (exact; the cursor does not move)."""
        return self._layer._raw.contains(self.column, self._parent, _py(value))

    def values(self, weights: bool = False) -> Iterator[Any]:
        """The group's values from its first row (``(value, weight)`` pairs with
        ``weights``), read a chunk's worth at a time."""
        for i in range(0, self._count, _BATCH):
            vals, ws = self._layer._raw.values(self.column, self._parent, i, _BATCH, weights)
            if weights:
                yield from zip(vals, ws)
            else:
                yield from vals

    def __iter__(self) -> Iterator[Any]:
        return self.values()

    def __repr__(self) -> str:
        pos = self.index if self.valid else ("before" if self._at == 0 else "after")
        return f"<blz.Cursor column={self.column} count={self._count} at={pos}>"


def _py(v: Any) -> Any:
    if isinstance(v, tuple):
        return tuple(_py(x) for x in v)
    return v.item() if isinstance(v, np.generic) else v


class Layer(Saving):
    """A layer dataset (read-only): column 1 is one sorted set of values; row ``j`` of
    column ``i`` owns the ``j``-th sorted row group of column ``i + 1``; the last column's
    rows may carry a weight."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._columns = raw.columns()
        self._weight = raw.weight()

    @property
    def path(self) -> str:
        return str(self._raw.path)

    @property
    def mode(self) -> str:
        return "r"

    @property
    def columns(self) -> list[str]:
        return [c[0] for c in self._columns]

    @property
    def ncolumns(self) -> int:
        return len(self._columns)

    @property
    def weight(self) -> tuple[str, str] | None:
        """The weight's ``(name, dtype)``, if any."""
        return self._weight

    @property
    def shape(self) -> str | None:
        """The named shape: ``"wset"`` ``(K, R)``, ``"indexed_zset"`` ``K -> (V, R)``,
        ``"val_batch"`` ``K -> V -> [(T, R)]``, or None."""
        return self._raw.shape()

    def to_dict(self) -> dict[Any, Any]:
        """The layer as nested dicts with the weights innermost: ``{k: r}`` for one column
        (a WSet), ``{k: {v: r}}`` for two (an IndexedZSet), ``{k: {v: {t: r}}}`` for three
        (a ValBatch); what ``build_layer(path, d, shape=...)`` takes. Needs a weight."""
        if self._weight is None:
            raise ValueError("to_dict needs a layer with weights; paths() reads any layer")
        out: dict[Any, Any] = {}
        n = self.ncolumns
        for p in self.paths():
            d = out
            for k in p[: n - 1]:
                d = d.setdefault(k, {})
            d[p[n - 1]] = p[n]
        return out

    def rows(self, column: int = 0) -> int:
        return self._columns[column][2]

    def __len__(self) -> int:
        return self.rows(0)

    def cursor(self) -> Cursor:
        """A cursor over column 1, on its first row."""
        return Cursor(self, 0, None)

    def contains(self, value: Any, within: Cursor | None = None) -> bool:
        """Whether ``value`` is in column 1, or in the row group of cursor ``within``."""
        if within is not None:
            return within.contains(value)
        return self._raw.contains(0, None, _py(value))

    def __contains__(self, value: Any) -> bool:
        return self.contains(value)

    def __iter__(self) -> Iterator[Any]:
        """Column 1's values in order."""
        return iter(self.cursor())

    def paths(self) -> Iterator[tuple[Any, ...]]:
        """Every path of keys, in order, as tuples (with the weight last, if any)."""

        def walk(cur: Cursor, prefix: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
            last = cur.column + 1 == self.ncolumns
            if last:
                for item in cur.values(weights=self._weight is not None):
                    if self._weight is not None:
                        yield (*prefix, *item)
                    else:
                        yield (*prefix, item)
                return
            for i, v in enumerate(cur.values()):
                cur._at = i + 1
                child = cur.child()
                if child is not None:
                    yield from walk(child, (*prefix, v))

        yield from walk(self.cursor(), ())

    def verify(self) -> None:
        raise_problems(self._raw.verify())

    def info(self) -> dict[str, Any]:
        return json.loads(self._raw.info_json())

    def __repr__(self) -> str:
        return f"<blz.Layer {self.path!r} columns={self.columns} rows={[c[2] for c in self._columns]}>"

    def close(self) -> None:
        pass

    def __enter__(self) -> Layer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        from . import open as _open

        if is_memory(self.path):
            refuse_pickle(self.path)
        return (_open, (self.path, "r"))


def _kind(v: Any) -> str:
    if isinstance(v, tuple):
        if not v:
            raise TypeError("a tuple key needs at least one field")
        return "(" + ",".join(_kind(x) for x in v) + ")"
    if isinstance(v, np.generic):
        if isinstance(v, np.bool_):
            raise TypeError("layer keys are integers, floats, str or bytes, not bool")
        return np.dtype(type(v)).name if not isinstance(v, (np.str_, np.bytes_)) else (
            "varstr" if isinstance(v, np.str_) else "varbytes"
        )
    if isinstance(v, bool):
        raise TypeError("layer keys are integers, floats, str or bytes, not bool")
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "varstr"
    if isinstance(v, (bytes, bytearray)):
        return "varbytes"
    raise TypeError(f"layer keys are integers, floats, str or bytes, not {type(v).__name__}")


def _flatten(d: Mapping[Any, Any], depth: int) -> Iterator[tuple[Any, ...]]:
    """The records of nested dicts ``depth`` levels deep: each key path, then the weight."""
    for k, v in d.items():
        if depth == 1:
            if isinstance(v, Mapping):
                raise ValueError(f"key {k!r}: expected a weight, found a dict")
            yield (k, v)
        else:
            if not isinstance(v, Mapping):
                raise ValueError(f"key {k!r}: expected a dict {depth - 1} level(s) deep, found {v!r}")
            for rest in _flatten(v, depth - 1):
                yield (k, *rest)


def _dtype_kind(d: Any) -> str:
    """A column type given to build_layer (a numpy dtype, str, bytes, or a tuple of these)
    as blz names it."""
    if isinstance(d, tuple):
        if not d:
            raise TypeError("a tuple type needs at least one field")
        return "(" + ",".join(_dtype_kind(x) for x in d) + ")"
    if isinstance(d, str) and d.strip().startswith("("):
        return d
    if d is str or d == "varstr":
        return "varstr"
    if d is bytes or d == "varbytes":
        return "varbytes"
    return np.dtype(d).name


def build_layer(
    path: str,
    records: Iterable[Any],
    *,
    columns: list[str] | None = None,
    dtypes: list[Any] | None = None,
    weight: str | None = None,
    weight_dtype: Any = None,
    overwrite: bool = False,
    filter: str = "auto",
    sort: bool = False,
    sort_memory: int | None = None,
    shape: str | None = None,
) -> Layer:
    """Builds a layer dataset at ``path`` from records sorted by their whole key path (or
    in any order, with ``sort``).

    Each record is a tuple of one key per column, plus the weight last when ``weight`` (its
    name) is given. Column types are ``dtypes`` (numpy integer or float dtypes, ``str`` or
    ``bytes``, or a tuple of these for a column of tuples, such as ``(np.int64, str)``), by
    default those of the first record's keys (int -> int64, float -> float64, str, bytes, a
    tuple -> a tuple of its fields' types). A tuple key is compared field by field, as
    Python compares tuples, and reads back as a tuple. The dataset appears whole when the build completes; an error (unsorted or
    duplicate input) leaves nothing at ``path``.

    ``filter`` is the kind of membership filter of every column: ``"auto"`` (per block of
    64 Ki values, an exact Roaring-bitmap filter for integer columns when it is no larger
    than the Bloom filter, else the Bloom filter), ``"bloom"``, ``"exact"`` (integer columns
    only: ``ValueError`` otherwise) or ``"off"``. ``info()["columns"][i]["filter"]`` shows
    the kind, the number of exact chunks and the stored bytes.

    ``shape`` names one of DBSP's batch shapes: ``"wset"`` ``(K, R)``, ``"indexed_zset"``
    ``K -> (V, R)`` or ``"val_batch"`` ``K -> V -> [(T, R)]``. The layer then has 1, 2 or
    3 key columns (named ``key``, ``val``, ``time`` unless ``columns`` says otherwise) and a
    weight (``weight``, named ``"weight"`` by default), and records may also be given as
    nested dicts, ``{k: r}``, ``{k: {v: r}}`` or ``{k: {v: {t: r}}}`` (they are sorted, and
    zero weights are left out, as in a consolidated batch). ``Layer.shape`` reads it back and
    ``Layer.to_dict()`` gives the dicts.

    With ``sort=True`` the records may come in any order and repeat: they are sorted by an
    external sort that keeps at most ``sort_memory`` bytes of records in memory (default
    256 MiB) and writes sorted runs into the build's staging directory
    (``path + ".tmp-build/sort-runs/"``, removed when the build ends). A repeated key path
    adds its weights, a path whose weights add up to zero is left out, and without a weight
    a repeated path is kept once.
    """
    if shape is not None:
        if shape not in SHAPES:
            raise ValueError(f"unknown shape {shape!r} (one of {', '.join(SHAPES)})")
        if columns is None:
            columns = list(SHAPES[shape])
        if weight is None:
            weight = "weight"
    if isinstance(records, Mapping):
        if shape is None:
            raise ValueError("records as a dict need shape= (wset, indexed_zset or val_batch)")
        records = _flatten(records, len(SHAPES[shape]))
        sort = True
    if sort_memory is not None and not sort:
        raise ValueError("sort_memory= needs sort=True")
    if sort_memory is not None and sort_memory <= 0:
        raise ValueError("sort_memory must be a positive number of bytes")
    memory = (sort_memory if sort_memory is not None else _DEFAULT_SORT_MEMORY) if sort else None
    it = iter(records)
    first = next(it, None)
    if first is None and (columns is None or dtypes is None):
        raise ValueError("an empty build needs columns= and dtypes=")
    nkeys = len(columns) if columns is not None else len(first) - (1 if weight else 0)
    names = list(columns) if columns is not None else [f"k{i + 1}" for i in range(nkeys)]
    if dtypes is None:
        kinds = [_kind(first[i]) for i in range(nkeys)]
    else:
        kinds = [_dtype_kind(d) for d in dtypes]
    wspec = None
    if weight is not None:
        wd = np.dtype(weight_dtype).name if weight_dtype is not None else (
            _kind(first[nkeys]) if first is not None else "int64"
        )
        wspec = (weight, wd)
    source = it if first is None else itertools.chain([first], it)
    rows = ((tuple(_py(x) for x in r)) for r in source)
    from . import _blz

    _blz.RawLayer.build(
        str(path), list(zip(names, kinds)), wspec, rows, overwrite, filter, memory, shape
    )
    return Layer(_blz.open(str(path), False)[1])


def merge_layers(
    paths: Iterable[Any], out: Any, *, overwrite: bool = False
) -> Layer:
    """Merges the layer datasets at ``paths`` (the same columns and weight) into a new one
    at ``out``, with the first one's settings, as DBSP consolidates its batches: a key path
    held by several inputs appears once with the sum of their weights, and a path whose
    weights add up to zero is left out (a key whose every path is left out disappears).
    Without a weight column the result is the union of the paths. One streaming pass
    (memory: a few chunks per input); the output appears whole when the merge completes,
    and an error (inputs that differ, weights that overflow their type) leaves ``out`` as it
    was.
    """
    from . import _blz

    inputs = [str(p) for p in paths]
    if not inputs:
        raise ValueError("merge_layers needs at least one input")
    _blz.RawLayer.merge(inputs, str(out), overwrite)
    return Layer(_blz.open(str(out), False)[1])


__all__ = ["Layer", "Cursor", "build_layer", "merge_layers"]
