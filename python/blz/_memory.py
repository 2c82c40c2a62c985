"""In-memory datasets: what arrays, tables and layers share when they live in memory.

A dataset created without a path (``blz.array(x)``, ``blz.create(None, x)``) lives in this
process's memory, compressed as on disk, until its last handle is dropped; one created at
a ``memory://name`` URL lives until ``blz.remove("memory://name")``. Either is saved with
``ds.save(path_or_url)`` and neither is seen by another process.
"""

from __future__ import annotations

import os
from typing import Any

from . import _blz

SCHEME = "memory://"


def is_memory(path: Any) -> bool:
    """True when ``path`` names an in-memory dataset (a ``memory://`` URL)."""
    return isinstance(path, str) and path.startswith(SCHEME)


def size_text(n: int) -> str:
    """``n`` bytes as people read them: ``"12.3 MiB"``."""
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if x < 1024 or unit == "TiB":
            return f"{int(x)} B" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{n} B"


def refuse_pickle(path: str) -> None:
    """Raises the error for pickling the in-memory dataset at ``path``: another process
    (a dask worker, a multiprocessing child) would find nothing under its name."""
    raise TypeError(
        f"{path} is an in-memory dataset: it lives in this process only and cannot be "
        "pickled (another process would find nothing under its name). Save it first "
        "(ds.save('x.blz') or an s3:// URL) and pass that dataset, or read it into numpy"
    )


def save(path: str, dst: str | os.PathLike[str], overwrite: bool) -> None:
    """Copies the dataset at ``path`` to ``dst`` (a local path, an ``s3://`` or a
    ``memory://`` URL), whole or not at all."""
    _blz.copy_dataset(path, os.fspath(dst), overwrite)


class Saving:
    """``save``, ``in_memory`` and the memory-aware pickling every dataset class shares."""

    path: str

    @property
    def in_memory(self) -> bool:
        """True when the dataset lives in this process's memory (a ``memory://`` URL)."""
        return is_memory(self.path)

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> Any:
        """Copies the dataset to ``path`` (a local path, an ``s3://`` URL, or a
        ``memory://`` URL), appearing there whole or not at all; an existing dataset there is
        replaced only with ``overwrite`` (otherwise ``InvalidArgumentError``, and nothing is
        written). Saving takes this process's writer turn, so a handle open for writing may
        save. Returns the saved dataset, opened read-only."""
        from . import open as _open

        save(self.path, path, overwrite)
        return _open(os.fspath(path))
