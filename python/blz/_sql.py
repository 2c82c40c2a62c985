"""SQL over blz tables and layer datasets (DataFusion, in the native module)."""

from __future__ import annotations

import os
from typing import Any

from . import _blz


class SqlResult:
    """The rows of a query, computed as they are read.

    It speaks the Arrow PyCapsule protocol (``__arrow_c_stream__``): ``pyarrow.table(r)``,
    ``polars.from_arrow(r)`` and duckdb read it directly. Like a duckdb relation, it can be
    read any number of times: the first read takes the rows of the query planned by
    :func:`sql`, and each later one runs the query again (duckdb asks for the stream once
    for its schema and again for the rows), seeing the datasets' last commit then.
    """

    def __init__(self, raw: Any, query: str, tables: list[tuple[str, str]]) -> None:
        self._raw = raw
        self._query = query
        self._tables = tables
        self._taken = False

    @property
    def columns(self) -> list[str]:
        """The names of the result's columns."""
        return list(self._raw.columns)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        if self._taken:
            self._raw = _blz.sql(self._query, self._tables)
        self._taken = True
        return self._raw.arrow_stream(requested_schema)

    def to_arrow(self) -> Any:
        """The rows as a ``pyarrow.Table``.

        An error while the rows are read raises blz's own exception (a :class:`blz.Error`),
        as the query's planning does; a consumer reading the Arrow stream directly
        (``pyarrow.table(r)``) gets Arrow's exception with the same message.
        """
        import pyarrow

        try:
            return pyarrow.RecordBatchReader.from_stream(self).read_all()
        except pyarrow.ArrowException as e:
            err = self._raw.take_error()
            if err is None:
                raise
            raise err from e

    def to_pandas(self) -> Any:
        """The rows as a pandas ``DataFrame``."""
        return self.to_arrow().to_pandas()

    def __repr__(self) -> str:
        return f"<blz.SqlResult columns={self.columns}>"


def _location(name: str, value: Any) -> str:
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    path = getattr(value, "path", None)
    if isinstance(path, str):
        return path
    raise TypeError(
        f"table {name!r}: expected a blz Table or Layer, or a path, not {type(value).__name__}"
    )


def sql(query: str, **tables: Any) -> SqlResult:
    """Runs a SQL query over blz tables and layer datasets.

    Each keyword names a table in the query: a ``blz.Table`` or ``blz.Layer`` (or a path, or an
    ``s3://`` URL). A dataset can also be named in the query by its path in double quotes::

        blz.sql("SELECT g, avg(x) AS m FROM t GROUP BY g ORDER BY g", t=table).to_pandas()
        blz.sql('SELECT count(*) FROM "data/pts.blz" WHERE k BETWEEN 10 AND 20')

    The query sees each dataset's last commit. Only the columns the query names are read;
    its filters skip the chunks whose statistics prove that no row matches (and seek a layer
    dataset's index); the rest is read in parallel. Errors: :class:`blz.SqlError` for a query
    that does not parse or plan, and blz's own errors for data that cannot be read.
    """
    pairs = [(name, _location(name, value)) for name, value in tables.items()]
    return SqlResult(_blz.sql(query, pairs), query, pairs)
