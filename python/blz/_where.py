"""``where`` queries, as bcolz's ``ctable.where``: an expression in numexpr's syntax
selects the rows of a table (:meth:`blz.Table.where`) or the elements of an array
(:meth:`blz.Array.where`, the elements named ``x``).

The expression language: column paths (``pos/x`` for nested fields, or any name in
backquotes), integer, float (``1.5``, ``1e-3``, ``inf``, ``nan``), bool (``True``,
``False``) and string literals (``'abc'``, ``b'abc'``); comparisons ``< <= > >= == !=``;
``&``, ``|``, ``~`` on booleans; ``+ - * / %`` and unary minus. As in numexpr (and Python),
comparisons bind looser than ``&`` and ``|``: write ``(g == 7) & (x > 0.5)``. Strings
compare with ``==`` and ``!=`` on fixed-size and variable-length string columns (a
dictionary-encoded one by its codes). ``isnull(c)`` / ``notnull(c)`` test for missing values
(and NaT). Dates and durations are numpy's: ``datetime64('2020-01-31'[, 'unit'])``,
``timedelta64(90, 'm')``, and a string compared with a ``datetime64`` column is a date
(``day >= '2020-03-01'``); units mix as numpy mixes them, NaT compares false but with ``!=``,
and ``date - date``, ``date +/- duration`` and ``duration +/- duration`` compute.

The library evaluates it chunk range by chunk range in parallel with the GIL released,
reading only the columns the expression names, and skips ranges whose per-chunk statistics
prove that no row matches.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from . import _blz

#: Rows per batch of ``Table.where(..., as_batches=True)`` unless told.
BATCH_ROWS = 1 << 20


def _records(table: Any, columns: list[str] | None, cols: list[tuple[str, Any]], n: int) -> np.ndarray:
    """The matched columns as a structured array: the table's nested dtype for all
    columns, or one field per requested column path."""
    kinds = dict(table._leaves)
    if columns is None:
        dtype = table._dtype
    else:
        dtype = np.dtype([(c, np.dtype(object) if kinds[c] in ("varstr", "varbytes") else np.dtype(kinds[c])) for c in columns])
    out = np.empty(n, dtype)
    for path, values in cols:
        kind = kinds[path]
        if kind in ("varstr", "varbytes"):
            a = np.empty(n, dtype=object)
            a[:] = values
        else:
            a = np.frombuffer(values, dtype=np.dtype(kind), count=n)
        if columns is None:
            target = out
            parts = path.split("/")
            for p in parts[:-1]:
                target = target[p]
            target[parts[-1]] = a
        else:
            out[path] = a
    return out


def _query(table: Any, expr: str, columns: list[str] | None, start: int, end: int) -> np.ndarray:
    names = [p for p, _ in table._leaves] if columns is None else list(columns)
    rows, cols = _blz.table_where(table._raw, expr, names, start, end)
    n = len(rows) // 8
    return _records(table, columns, cols, n)


def table_where(
    table: Any,
    expr: str,
    columns: list[str] | None = None,
    as_batches: bool = False,
    batch_rows: int | None = None,
) -> Any:
    """The rows of ``table`` where ``expr`` holds, as a numpy structured array (the table's
    dtype, or one field per path of ``columns``); with ``as_batches``, an iterator of such
    arrays over about ``batch_rows`` rows of the table each (empty batches skipped)."""
    if isinstance(columns, str):
        columns = [columns]
    if not as_batches:
        return table._fresh(lambda: _query(table, expr, columns, 0, table._nrows))
    return _batches(table, expr, columns, batch_rows or BATCH_ROWS)


def _batches(table: Any, expr: str, columns: list[str] | None, batch_rows: int) -> Iterator[np.ndarray]:
    table._follow()
    nrows = table._nrows
    step = max([table._chunklen(p) for p, _ in table._leaves] or [1])
    batch = max(1, -(-batch_rows // step)) * step
    for s in range(0, nrows, batch):
        out = _query(table, expr, columns, s, min(s + batch, nrows))
        if len(out):
            yield out


def table_where_rows(table: Any, expr: str) -> np.ndarray:
    """The indices of the rows where ``expr`` holds (int64)."""

    def run() -> np.ndarray:
        rows, _ = _blz.table_where(table._raw, expr, [], 0, table._nrows)
        return np.frombuffer(rows, dtype=np.uint64).astype(np.int64)

    return table._fresh(run)


def array_where(array: Any, expr: str) -> np.ndarray:
    """The elements where ``expr`` (the elements named ``x``) holds, in C order: numpy's
    ``a[mask]``."""
    array._follow()
    _, values = _blz.array_where(array._raw, expr)
    return np.frombuffer(values, dtype=array._dtype.newbyteorder("=")).copy()


def array_where_indices(array: Any, expr: str) -> np.ndarray:
    """The flat (C-order) indices of the elements where ``expr`` holds (int64); numpy's
    ``np.flatnonzero(mask)``."""
    array._follow()
    idx, _ = _blz.array_where(array._raw, expr)
    return np.frombuffer(idx, dtype=np.uint64).astype(np.int64)


def array_where_mask(array: Any, expr: str) -> np.ndarray:
    """Numpy's boolean array of ``expr`` over the whole array (its shape)."""
    array._follow()
    b = _blz.array_where_mask(array._raw, expr)
    return np.frombuffer(b, dtype=np.bool_).reshape(array._shape).copy()
