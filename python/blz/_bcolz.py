"""bcolz carrays and ctables, read in place (read-only, no import step, bcolz not needed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import _blz
from ._index import ascending


class BcolzArray:
    """A bcolz carray opened read-only, indexed like a numpy array. Only the rows of the
    chunks a read touches are decoded; every chunk file is checked as it is read."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        shape, descr, chunklen, attrs = raw.state()
        self._shape = tuple(shape)
        self._dtype = np.dtype(descr)
        self._chunklen = chunklen
        self._attrs = json.loads(attrs)

    @property
    def path(self) -> str:
        return str(self._raw.path)

    @property
    def mode(self) -> str:
        return "r"

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def chunks(self) -> tuple[int, ...]:
        return (self._chunklen, *self._shape[1:])

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._attrs)

    def __len__(self) -> int:
        return self._shape[0]

    def _rows(self, start: int, end: int) -> np.ndarray:
        out = np.empty((end - start, *self._shape[1:]), dtype=self._dtype)
        if end > start:
            self._raw.read_rows_into(start, end, out)
        return out

    def __getitem__(self, key: Any) -> Any:
        r = _blz.select(key, self._shape, self.path)
        rows = ascending(r.axes[0])
        base = self._rows(rows.start, rows.stop)[:: rows.step]
        # Axis 0 is read (ascending positions); the other axes are cut ascending here too,
        # so that numpy's result is the same view as for a blz array.
        inner = base[(slice(None), *[ascending(a) for a in r.axes[1:]])]
        return inner[r.view]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a bcolz carray is read from disk: a copy cannot be avoided")
        a = self._rows(0, self._shape[0])
        return a if dtype is None else a.astype(dtype, copy=False)

    def __iter__(self) -> Iterator[Any]:
        for s in range(0, self._shape[0], self._chunklen):
            yield from self._rows(s, min(s + self._chunklen, self._shape[0]))

    def __repr__(self) -> str:
        return f"<blz.BcolzArray {self.path!r} shape={self.shape} dtype={self.dtype} (bcolz, read-only)>"

    def __reduce__(self) -> tuple[Any, ...]:
        from . import open as _open

        return (_open, (self.path, "r"))


class BcolzTable:
    """A bcolz ctable opened read-only: ``t["col"]`` a :class:`BcolzArray`, ``t[10:20]``
    rows as a numpy structured array."""

    def __init__(self, path: str) -> None:
        from . import _blz

        cols, attrs = _blz.RawBcolz.ctable_columns(path)
        self._path = path
        self._cols = {name: BcolzArray(_blz.open(p, False)[1]) for name, p in cols}
        self._attrs = json.loads(attrs)
        self._len = len(next(iter(self._cols.values()))) if self._cols else 0

    @property
    def path(self) -> str:
        return self._path

    @property
    def mode(self) -> str:
        return "r"

    @property
    def columns(self) -> list[str]:
        return list(self._cols)

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._attrs)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype([(n, c.dtype, c.shape[1:]) for n, c in self._cols.items()])

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return self._cols[key]
        r = _blz.select(key, (self._len,), self.path)
        out = np.empty(r.shape, dtype=self.dtype) if r.shape else np.empty(1, dtype=self.dtype)
        for n, c in self._cols.items():
            out[n] = c[key]
        return out if r.shape else out[0]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a bcolz ctable is read from disk: a copy cannot be avoided")
        a = self[:]
        return a if dtype is None else a.astype(dtype, copy=False)

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.DataFrame({n: np.asarray(c) for n, c in self._cols.items()})

    def __repr__(self) -> str:
        return f"<blz.BcolzTable {self.path!r} nrows={self._len} columns={self.columns} (bcolz, read-only)>"

    def __reduce__(self) -> tuple[Any, ...]:
        from . import open as _open

        return (_open, (self.path, "r"))


__all__ = ["BcolzArray", "BcolzTable"]
