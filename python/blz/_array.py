"""N-d arrays: :class:`Array`, numpy's basic indexing over a blz dataset."""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from typing import Any

import numpy as np

from . import _blz, _fancy
from ._errors import CorruptionError, Error, one_commit
from ._index import native
from ._expr import ExprOps
from ._memory import Saving, is_memory, refuse_pickle, size_text
from ._reduce import Reductions


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"attribute values must be JSON-serializable, not {type(o).__name__}")


class Attributes(MutableMapping[str, Any]):
    """A dataset's user attributes (JSON values). Each change is written at once, atomically."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def _load(self) -> dict[str, Any]:
        return json.loads(self._raw.attrs_json())

    def _store(self, d: dict[str, Any]) -> None:
        self._raw.set_attrs_json(json.dumps(d, default=_json_default))

    def __getitem__(self, key: str) -> Any:
        return self._load()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        d = self._load()
        d[key] = value
        self._store(d)

    def __delitem__(self, key: str) -> None:
        d = self._load()
        del d[key]
        self._store(d)

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        d = self._load()
        d.update(*args, **kwargs)
        self._store(d)

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"Attributes({self._load()!r})"


def raise_problems(problems: list[tuple[str, str, str | None, int | None]]) -> None:
    """Raises the first problem `verify` found (all of them in ``.problems``)."""
    if not problems:
        return
    from . import _errors

    excs = []
    for cls, msg, path, chunk in problems:
        e = getattr(_errors, cls, Error)(msg)
        e.filename = path
        e.chunk = chunk
        excs.append(e)
    first = excs[0]
    if len(excs) > 1:
        first = type(first)(f"{first} (and {len(excs) - 1} more problems)")
        first.filename, first.chunk = excs[0].filename, excs[0].chunk
    first.problems = excs  # type: ignore[attr-defined]
    raise first


class Array(ExprOps, Reductions, Saving):
    """An N-d dataset, indexed like a numpy array.

    Reads (``a[key]``, ``np.asarray(a)``) decode only the chunks they touch, in parallel with
    the GIL released, straight into the numpy array returned. Writes (``a[key] = values``,
    :meth:`append`, :meth:`resize`) are each one transaction.

    A handle opened with mode ``"r"`` follows the commits of writers (other handles, other
    processes): each call (``len``, ``shape``, a read) first checks the dataset's commit
    generation (one small file read) and shows the latest commit; one call sees one commit.
    A read that meets files a commit rewrote while it ran is read again in the new state.
    """

    def __init__(self, raw: Any, mode: str) -> None:
        self._raw = raw
        self._mode = mode
        self._refresh()

    def _refresh(self) -> None:
        shape, descr, chunks, nbytes, cbytes, nchunks, nfiles = self._raw.state()
        self._shape = tuple(shape)
        self._dtype = np.dtype(descr)
        self._chunks = tuple(chunks)
        self._nbytes = nbytes
        self._cbytes = cbytes
        self._nchunks = nchunks
        self._nfiles = nfiles

    def refresh(self) -> bool:
        """Shows the dataset's latest commit now; whether it changed since this handle last
        looked. Read handles do this at every call; a writing handle is the only writer, so
        it has nothing to catch up with."""
        changed = self._raw.refresh()
        if changed:
            self._refresh()
        return changed

    def _follow(self) -> None:
        # A writing handle follows the other writing handles of this process (one atomic
        # load when none committed).
        self.refresh()

    # -- description ------------------------------------------------------------------

    @property
    def path(self) -> str:
        return str(self._raw.path)

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def shape(self) -> tuple[int, ...]:
        self._follow()
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """The element type, in the stored byte order."""
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        self._follow()
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def chunks(self) -> tuple[int, ...]:
        return self._chunks

    @property
    def nbytes(self) -> int:
        """Uncompressed bytes."""
        self._follow()
        return self._nbytes

    @property
    def cbytes(self) -> int:
        """Stored bytes (compressed chunks and their digests)."""
        self._follow()
        return self._cbytes

    @property
    def attrs(self) -> Attributes:
        return Attributes(self._raw)

    def __len__(self) -> int:
        self._follow()
        return self._shape[0]

    def block_cache(self, max_bytes: int | None = None) -> int:
        """Bytes of decoded Blosc blocks this handle keeps for short reads near each other
        (a loop of ``a[i:i + 100]``); sets it when ``max_bytes`` is given (0: off). 2 MiB
        unless set; reads at random places keep nothing. Emptied by this handle's writes
        and whenever it shows a new commit."""
        return _blz.block_cache(self._raw, max_bytes)

    def info(self) -> dict[str, Any]:
        """Shape, dtype, chunking, compression, sizes and files."""
        self._follow()
        meta = json.loads(self._raw.storage_json())
        comp = meta.get("compression", {})
        return {
            "path": self.path,
            "kind": "array",
            "shape": self.shape,
            "dtype": self.dtype.str,
            "chunks": self.chunks,
            "codec": comp.get("codec"),
            "clevel": comp.get("clevel"),
            "filters": comp.get("filters"),
            "checksum": meta.get("checksum"),
            "fill": meta.get("dflt"),
            "nbytes": self.nbytes,
            "cbytes": self.cbytes,
            "ratio": self.nbytes / self.cbytes if self.cbytes else None,
            "nchunks": self._nchunks,
            "nfiles": self._nfiles,
        }

    def __repr__(self) -> str:
        ratio = f"{self.nbytes / self.cbytes:.2f}" if self.cbytes else "-"
        return (
            f"<blz.Array {self.path!r} shape={self.shape} dtype={self.dtype} "
            f"chunks={self.chunks} nbytes={size_text(self.nbytes)} "
            f"cbytes={size_text(self.cbytes)} ratio={ratio} mode={self.mode!r}>"
        )

    # -- reading ----------------------------------------------------------------------

    def _read(self, key: Any) -> Any:
        # One call into blz: the key resolved on the latest commit, the array allocated,
        # the chunks decoded into it, the read made again if it met a writer's commit.
        return self._raw.get(key)

    def __getitem__(self, key: Any) -> Any:
        """numpy's indexing: basic (integers, slices, ``...``, ``None``) and advanced
        (integer arrays or lists, negative counting from the end; boolean masks of any
        number of dimensions), with numpy's result layout. Only the chunks the key touches
        are decoded, in parallel, each once. One call into blz's native module; an advanced
        key's read is called back from there (one more call to decode)."""
        return self._raw.get(key, self._advanced)

    def _advanced(self, key: Any, changed: bool) -> Any:
        # An advanced key's read, called back by RawArray.get inside the library's loop
        # (which has brought the handle to the latest commit: ``changed`` says whether
        # what this object keeps of it must be read again).
        if changed:
            self._refresh()
        return self._fancy_now(_fancy.NumpyKey(key, self._shape))

    @property
    def oindex(self) -> _fancy.OIndex:
        """zarr's orthogonal indexing: ``a.oindex[[0, 5], :, mask]`` applies each integer
        array or boolean mask to its own axis (the outer product), for reads and writes."""
        return _fancy.OIndex(self)

    @property
    def vindex(self) -> _fancy.VIndex:
        """zarr's vectorised indexing: ``a.vindex[rows, cols]`` selects the points
        ``(rows[i], cols[i])`` (integer arrays broadcast together), or ``a.vindex[mask]``
        with a boolean mask of the array's shape; reads and writes."""
        return _fancy.VIndex(self)

    def _fancy_read(self, resolve: Any, scalar: bool = False) -> Any:
        return one_commit(self._follow, lambda: self._fancy_now(resolve(self._shape), scalar))

    def _fancy_now(self, k: Any, scalar: bool = False) -> Any:
        # The read of a resolved advanced key `k` (numpy's, zarr's orthogonal or vectorised)
        # in numpy's result layout; with `scalar`, a 0-d result is its element.
        if int(np.prod(k.shape, dtype=np.int64)) == 0:
            return np.empty(k.shape, dtype=self._dtype)
        out = _fancy.read(self._raw, k.groups, k.lib_shape, self._dtype)
        out = k.to_numpy(out) if hasattr(k, "to_numpy") else out.reshape(k.shape)
        return out[()] if scalar and out.ndim == 0 else out

    def _fancy_write(self, resolve: Any, values: Any) -> None:
        k = resolve(self._shape)
        buf = _fancy.broadcast_value(values, k.shape, self._dtype)
        if buf.size == 0:
            return
        lib = k.to_library(buf) if hasattr(k, "to_library") else buf.reshape(k.lib_shape)
        try:
            _fancy.write(self._raw, k.groups, lib)
        finally:
            self._refresh()
    def _blz_reduce(self, op: str, axes: Any, ddof: float) -> Any:
        # Reductions (``a.sum()``, ``np.mean(a, axis=1)``: blz/_reduce.py) run in Rust.
        return one_commit(self._follow, lambda: _blz.reduce_array(self._raw, op, axes, ddof))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a blz array is read from disk: a copy cannot be avoided")
        a = self._read(Ellipsis)
        if dtype is not None:
            a = a.astype(dtype, copy=False)
        return a

    def iter_blocks(self, rows: int | None = None) -> Iterator[np.ndarray]:
        """Blocks of whole rows (axis 0), ``rows`` at a time (default: one chunk's rows)."""
        step = max(1, rows or self._chunks[0])
        start = 0
        while start < len(self):
            yield self._read(slice(start, start + step))
            start += step

    def __iter__(self) -> Iterator[Any]:
        for block in self.iter_blocks():
            yield from block

    # -- writing ----------------------------------------------------------------------

    def __setitem__(self, key: Any, values: Any) -> None:
        """numpy's assignment (basic or advanced keys, values broadcast and cast as numpy
        does; of repeated indices the last value wins), in one transaction."""
        if _fancy.is_advanced(key):
            self._fancy_write(lambda shape: _fancy.NumpyKey(key, shape), values)
            return

        def write() -> None:
            # Resolved against the latest commit; written only if it still is when this
            # handle's turn comes (another writing handle may commit in between: then
            # ChangedError, and the library's loop resolves and writes again).
            r = self._raw.select(key)
            buf = np.empty(r.counts, dtype=native(self._dtype))
            buf[r.view] = values  # numpy's broadcasting and casting
            if not buf.size:
                return
            try:
                self._raw.write_from(r, buf)
            finally:
                self._refresh()

        one_commit(self._follow, write)

    def where(self, expr: str) -> np.ndarray:
        """The elements where ``expr`` holds, the array's elements named ``x``
        (``a.where("(x > 0) & (x % 2 == 0)")`` is numpy's ``a[(a > 0) & (a % 2 == 0)]``), in
        C order. See ``blz._where`` for the expression language."""
        from ._where import array_where

        return array_where(self, expr)

    def where_mask(self, expr: str) -> np.ndarray:
        """Numpy's boolean array of ``expr`` (elements named ``x``) over the whole array."""
        from ._where import array_where_mask

        return array_where_mask(self, expr)

    def where_indices(self, expr: str) -> np.ndarray:
        """The flat (C-order) indices of the elements where ``expr`` holds."""
        from ._where import array_where_indices

        return array_where_indices(self, expr)

    def append(self, values: Any) -> None:
        """Appends rows along axis 0 (one row may be given without its leading axis)."""
        self._follow()
        v = np.asarray(values)
        if v.ndim == self.ndim - 1:
            v = v[np.newaxis]
        if v.ndim != self.ndim or v.shape[1:] != self._shape[1:]:
            raise ValueError(
                f"cannot append values of shape {np.shape(values)} to an array of shape "
                f"{self._shape}: rows of shape {self._shape[1:]} expected"
            )
        v = np.ascontiguousarray(v, dtype=native(self._dtype))
        try:
            self._raw.append(v, v.shape[0])
        finally:
            self._refresh()

    def resize(self, n: int) -> None:
        """Sets the extent of axis 0: new rows take the fill value."""
        if n < 0:
            raise ValueError("the new length must not be negative")
        try:
            self._raw.resize(int(n))
        finally:
            self._refresh()

    def verify(self) -> None:
        """Reads every chunk and checks every digest; raises the first problem found
        (a :class:`CorruptionError` naming the file and chunk; all in ``.problems``)."""
        raise_problems(self._raw.verify())

    def compact(self) -> int:
        """Rewrites the files without the dead space left by modifications."""
        try:
            return self._raw.compact()
        finally:
            self._refresh()

    # -- life -------------------------------------------------------------------------

    def close(self) -> None:
        """Releases the writer lock (the array stays readable)."""
        self._raw.close()
        self._mode = "r"

    def __enter__(self) -> Array:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        from . import open as _open

        if is_memory(self.path):
            refuse_pickle(self.path)
        return (_open, (self.path, self._mode))


__all__ = ["Array", "Attributes", "CorruptionError"]
