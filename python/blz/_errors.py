"""The exceptions blz raises: one hierarchy under :class:`blz.Error` (an ``OSError``).

Messages are the library's: they name the file and, for a bad chunk, the chunk. The
``filename`` and ``chunk`` attributes hold them too (``None`` when not known).
"""

from __future__ import annotations

from typing import Any


class Error(OSError):
    """Any error blz reports."""

    filename: str | None = None
    chunk: int | None = None


class CorruptionError(Error):
    """Stored bytes that cannot be right: a bad header, chunk, digest or metadata file."""


class LockedError(Error):
    """Another writer holds the dataset's lock (``mode="r+"``)."""


class ReadOnlyError(Error):
    """A write to a dataset opened read-only."""


class ChangedError(Error):
    """A writer committed while this handle was reading: open the dataset again."""


class ConflictError(Error):
    """On an object store, another writer committed first: nothing of this change was
    committed. Open the dataset again and retry."""


class NotFoundError(Error, FileNotFoundError):
    """A missing dataset or file."""


class OutOfBoundsError(Error, IndexError):
    """An index or range outside a dataset."""


class MismatchError(Error, ValueError):
    """Values whose type or shape do not fit the dataset."""


class InvalidArgumentError(Error, ValueError):
    """An argument blz cannot honour (a bad codec name, a zero chunk size, ...)."""


class UnsupportedError(Error):
    """Well-formed data that blz cannot represent (a bcolz ``object`` dtype, ...)."""


class SqlError(Error, ValueError):
    """A query that cannot be planned or run: a syntax error, an unknown table or column, a
    type mismatch (the SQL engine's message)."""


__all__ = [
    "Error",
    "SqlError",
    "CorruptionError",
    "LockedError",
    "ReadOnlyError",
    "ChangedError",
    "ConflictError",
    "NotFoundError",
    "OutOfBoundsError",
    "MismatchError",
    "InvalidArgumentError",
    "UnsupportedError",
]


def one_commit(follow: Any, read: Any) -> Any:
    """``read()`` on the latest commit, for reads made of several calls into blz (a table's
    rows, advanced indexing): ``follow()`` first shows the latest commit, and a read that
    met a writer's commit (which can leave it holding chunks of two commits) raises
    ``ChangedError`` and is made again after a new ``follow()``. The loop is the library's
    (``blz::on_latest_commit``, the one every client reads through; up to 20 tries again,
    with short growing pauses, the GIL released between them)."""
    from . import _blz

    return _blz.on_latest_commit(follow, read)
