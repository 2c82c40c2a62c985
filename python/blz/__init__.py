"""blz: chunked, compressed, persistent arrays, tables and layer datasets, numpy-style.

>>> import numpy as np, blz
>>> a = blz.create("walk.blz", np.cumsum(np.random.standard_normal(10_000)))  # doctest: +SKIP
>>> a[::1000]                                                                 # doctest: +SKIP

``blz.create`` makes an array (from a numpy array, or a shape and a dtype) or a table (from
a structured array, a dict of arrays or a pandas DataFrame); ``blz.open`` opens any blz
dataset (and a bcolz carray or ctable, read-only, in place); ``blz.build_layer`` builds a
sorted layer dataset. Errors are :class:`blz.Error` (an ``OSError``) and its subclasses.
"""

from __future__ import annotations

import atexit
import json
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _blz
from ._array import Array, Attributes
from ._expr import LazyExpr, evaluate, lazyexpr
from ._bcolz import BcolzArray, BcolzTable
from ._errors import (
    ChangedError,
    ConflictError,
    CorruptionError,
    Error,
    InvalidArgumentError,
    LockedError,
    MismatchError,
    NotFoundError,
    OutOfBoundsError,
    ReadOnlyError,
    SqlError,
    UnsupportedError,
)
from ._index import native

# A dataset replaced by create(..., overwrite=True) is removed by a background thread, so
# that create returns once the new one is in place; the interpreter waits for it at exit
# (otherwise it stays at "<path>.tmp-old" until the next create of that path).
atexit.register(_blz.finish_removals)
from ._layer import Cursor, Layer, build_layer, merge_layers
from ._sql import SqlResult, sql
from ._table import (
    Column,
    Table,
    apply_dictionary,
    columns_payload,
    fields_from_dtype,
    fields_from_mapping,
    is_tabular,
    normalize_tabular,
)

__version__: str = _blz.__version__

# The submodules that build on optional packages, loaded on first use (PEP 562): after a
# plain `import blz`, `blz.dask.from_blz(...)` and `blz.xarray.to_blz(...)` work, while
# `import blz` itself stays quick and needs neither dask nor xarray. Without the package,
# the first use raises an ImportError naming the extra to install (`pip install 'blz[dask]'`).
_LAZY_SUBMODULES = ("dask", "xarray")

if TYPE_CHECKING:
    from . import dask as dask
    from . import xarray as xarray


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        import importlib

        # Importing sets the attribute on the package: later uses do not come here.
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_SUBMODULES})


def _fill_json(fill: Any, dtype: np.dtype) -> str | None:
    if fill is None:
        return None
    if dtype.kind in "mM":
        # datetime64/timedelta64: the count of the dtype's unit, or "NaT".
        t = np.asarray(fill, dtype=dtype).reshape(())
        return json.dumps("NaT" if np.isnat(t) else int(t.view(np.int64)))
    v = np.asarray(fill, dtype=dtype).reshape(()).item()
    if isinstance(v, complex):
        v = [_float_json(v.real), _float_json(v.imag)]
    elif isinstance(v, float):
        v = _float_json(v)
    elif isinstance(v, bytes):
        v = v.decode("latin-1")
    return json.dumps(v)


def _float_json(x: float) -> Any:
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return x


def create(
    path: str | os.PathLike[str] | None,
    data: Any = None,
    *,
    shape: Any = None,
    dtype: Any = None,
    chunks: Any = None,
    codec: str = "lz4",
    clevel: int = 5,
    filter: str = "shuffle",
    checksum: str = "crc32",
    fill: Any = None,
    attrs: dict[str, Any] | None = None,
    overwrite: bool = False,
    superchunksize: int | None = None,
    dictionary: Any = None,
) -> Array | Table:
    """Creates a dataset at ``path`` and returns it open for writing (``mode="r+"``).

    From ``data`` (a numpy array or anything ``np.asarray`` takes; a structured array, a
    dict of arrays or a pandas DataFrame makes a :class:`Table`), or from ``shape`` and
    ``dtype`` (filled with ``fill``; a structured ``dtype`` alone makes an empty table, its
    object fields variable-length strings). ``chunks``: the chunk shape (a table: rows per chunk);
    by default about 1 MiB per chunk. ``codec``: blosclz, lz4, lz4hc, zlib or zstd;
    ``clevel`` 0-9; ``filter``: shuffle, bitshuffle or none; ``checksum``: the digest after
    each chunk (crc32, adler32, md5, sha1, sha256, ..., none); ``superchunksize``: chunks per
    superchunk file (by default about 64 MiB of chunks per file; 16 MiB on ``s3://``). The dataset appears whole
    (data included) or not at all; an existing one is replaced only with ``overwrite``.
    ``dictionary`` (tables): which string columns are dictionary-encoded on disk (each
    distinct string stored once, rows as codes): ``None`` (default) those with few distinct
    values (at most one in 10 of the first 65,536, and at least 64 of them), ``True`` all,
    ``False`` none, or a list of column paths; a pandas ``Categorical`` column always is.
    They read back as they came (strings as strings, a Categorical as one).

    ``path`` is a local path, an ``s3://bucket/key`` URL, a ``memory://name`` URL (a dataset
    in this process's memory, until ``blz.remove``), or ``None``: an in-memory dataset of
    its own (``memory://anon-N``), freed with its last handle (see :func:`array`).
    """
    path = None if path is None else os.fspath(path)
    from ._array import _json_default

    attrs_json = json.dumps(attrs, default=_json_default) if attrs else None
    if data is None and dtype is not None and np.dtype(dtype).names:
        # An empty table of this schema (object fields hold variable-length strings).
        if shape not in (None, 0, (0,)):
            raise ValueError("a table is created empty from a dtype: give rows as data instead")
        data = np.empty(0, dtype=np.dtype(dtype))
    if data is not None and is_tabular(data):
        data = normalize_tabular(data)
        if isinstance(data, np.ndarray):
            fields = fields_from_dtype(data.dtype, data)
        else:
            fields = fields_from_mapping(data)
        fields = apply_dictionary(fields, data, dictionary)
        leaves = _leaves_of(fields)
        payload = columns_payload(leaves, data)
        if isinstance(chunks, (tuple, list)):
            chunks = chunks[0]
        raw = _blz.RawTable.create(
            path, fields, payload, chunks, codec, clevel, filter, checksum, attrs_json, overwrite,
            None if superchunksize is None else int(superchunksize),
        )
        return Table(raw, "r+")
    if data is not None:
        arr = np.asarray(data, dtype=dtype)
        if arr.ndim == 0:
            raise ValueError("blz arrays have at least one axis: give a 0-d value as shape (1,)")
        dt = arr.dtype
        if shape is not None and tuple(shape) != arr.shape:
            raise ValueError(f"shape {tuple(shape)} given with data of shape {arr.shape}")
        shp = arr.shape
        buf = np.ascontiguousarray(arr, dtype=native(dt))
    else:
        if shape is None:
            raise TypeError("blz.create needs data, or a shape (and a dtype)")
        shp = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
        dt = np.dtype(dtype if dtype is not None else np.float64)
        buf = None
    if dt.names:
        raise ValueError("a structured dtype makes a table: give the data as a structured array")
    if dt.kind == "O":
        raise ValueError("blz arrays hold fixed-size elements; object arrays are not supported")
    if chunks is not None:
        chunks = [int(chunks)] if np.ndim(chunks) == 0 else [int(c) for c in chunks]
    raw = _blz.RawArray.create(
        path,
        dt.str,
        list(shp),
        chunks,
        codec,
        int(clevel),
        filter,
        checksum,
        _fill_json(fill, dt),
        attrs_json,
        overwrite,
        buf,
        None if superchunksize is None else int(superchunksize),
    )
    return Array(raw, "r+")


def array(data: Any = None, **layout: Any) -> Array | Table:
    """An in-memory dataset of ``data``: ``blz.create(None, data, **layout)``.

    As bcolz's ``carray(x)`` and python-blosc2's ``asarray(x)``: a numpy array (or anything
    ``np.asarray`` takes) makes an :class:`Array`, a structured array, a dict of arrays, a
    list of records or a pandas DataFrame a :class:`Table`, compressed chunk by chunk with
    ``layout``'s codec, filter and chunks as on disk (``chunks=``, ``codec=``, ``clevel=``,
    ``filter=``, ``shape=``/``dtype=`` for an empty or filled one, ...). The memory it holds
    is its compressed chunks (``.cbytes``); it is indexed, appended to, resized, reduced,
    queried with ``where`` and SQL exactly as a dataset on disk, lives until its last handle
    is dropped, is seen by no other process (it cannot be pickled), and is written to disk
    or S3 with ``.save(path)``.
    """
    if isinstance(data, list) and data and isinstance(data[0], (dict, tuple)):
        data = _records(data)
    return create(None, data, **layout)


asarray = array


def _records(rows: list[Any]) -> Any:
    """A list of records (dicts, or tuples) as the dict of columns a table is made of."""
    def column(values: list[Any]) -> np.ndarray:
        # Strings are variable-length (object), as a DataFrame's are.
        if all(isinstance(v, str) for v in values):
            return np.asarray(values, dtype=object)
        return np.asarray(values)

    if isinstance(rows[0], dict):
        return {n: column([r[n] for r in rows]) for n in rows[0]}
    return {f"f{i}": column([r[i] for r in rows]) for i in range(len(rows[0]))}


def remove(path: str | os.PathLike[str]) -> None:
    """Removes the in-memory dataset at the ``memory://`` URL ``path``: its memory is freed
    once no handle reads it any more; its name is free again. Removing what is not there is
    no error. (Datasets on disk are removed with the filesystem's own tools.)"""
    p = os.fspath(path)
    if not p.startswith("memory://"):
        raise ValueError(f"{p}: blz.remove takes memory:// URLs (in-memory datasets)")
    _blz.remove_memory(p)


def _leaves_of(fields: list[Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, spec, *_ in fields:
        if isinstance(spec, str):
            out.append((prefix + name, spec))
        else:
            out.extend(_leaves_of(spec, prefix + name + "/"))
    return out


def open(  # noqa: A001 - numpy-style API: blz.open
    path: str | os.PathLike[str], mode: str = "r", *, in_memory: bool = False
) -> Array | Table | Layer | BcolzArray | BcolzTable:
    """Opens the dataset at ``path``: an :class:`Array`, :class:`Table` or :class:`Layer` by
    its kind, read-only (``mode="r"``) or for writing (``mode="r+"``, which takes the
    dataset's writer lock). A bcolz carray or ctable opens in place, read-only.

    ``path`` may be a ``memory://`` URL (an in-memory dataset of this process). With
    ``in_memory=True`` the dataset (any blz dataset, local or on S3) is first copied into
    memory, compressed as it is, and the copy opened: later changes to either do not reach
    the other; ``.save(path, overwrite=True)`` writes it back."""
    path = os.fspath(path)
    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' or 'r+', not {mode!r}")
    # The library's one entrance: the kind read once (one load of the state on S3).
    if in_memory:
        kind, raw = _blz.load(path, mode == "r+")
    else:
        kind, raw = _blz.open(path, mode == "r+")
    if kind == "array":
        return Array(raw, mode)
    if kind == "table":
        return Table(raw, mode)
    if kind == "layer":
        return Layer(raw)
    if kind == "bcolz carray":
        return BcolzArray(raw)
    if kind == "bcolz ctable":
        return BcolzTable(path)
    raise UnsupportedError(f"{path}: unknown dataset kind {kind!r}")


def buffer_pool(max_bytes: int | None = None, keep_seconds: float | None = None) -> dict[str, Any]:
    """The pool of memory that large reads return their numpy arrays in, and its limits.

    A read of 1 MiB or more decodes into memory that an earlier result held once numpy
    freed it (its pages already mapped), instead of fresh memory the kernel must fault in
    and zero first: repeated large reads, and dask tasks reading block after block, run
    faster. The pool holds at most ``max_bytes`` (1 GiB by default, or the
    environment variable ``BLZ_BUFFER_POOL_MB`` read at the first read; 0 turns pooling
    off) and frees memory nobody reused for ``keep_seconds`` (30). Either argument changes
    that limit; the result is the state after: ``max_bytes``, ``keep_seconds``,
    ``held_bytes`` (free memory the pool holds now), ``hits`` and ``misses`` (reads served
    from the pool and reads that allocated).
    """
    m, k, held, hits, misses = _blz.buffer_pool(max_bytes, keep_seconds)
    return {"max_bytes": m, "keep_seconds": k, "held_bytes": held, "hits": hits, "misses": misses}


def gc(url: str, grace: float = 3600) -> list[str]:
    """Removes the objects of the dataset at the ``s3://`` URL ``url`` that no reader needs:
    objects its commits stopped using more than ``grace`` seconds ago, and orphans (the
    uploads of writes that failed, were killed or abandoned, e.g. the tasks of a
    :func:`blz.dask.to_blz` whose client died) older than that, by the store's own clock
    (``blz gc``; ``spec/object-store.md`` §6). ``grace`` must exceed the longest read of an
    old version and the longest write. Returns the keys removed, relative to the dataset."""
    if grace < 0:
        raise ValueError(f"grace must be 0 or more seconds, not {grace}")
    deleted, _kept = _blz.collect_garbage(os.fspath(url), int(grace))
    return deleted


def num_threads() -> int:
    """The number of threads blz decodes and encodes chunks with in this process.

    Set once, when blz is imported: ``BLZ_NUM_THREADS`` if set, else ``RAYON_NUM_THREADS``,
    else ``OMP_NUM_THREADS`` (dask's worker processes set it to 1: each task thread then
    decodes on its own core instead of every worker starting a thread per core), else
    every core.
    """
    return _blz.num_threads()


def from_csv(
    csv: str | os.PathLike,
    path: str | os.PathLike,
    *,
    schema: str | None = None,
    delimiter: str = ",",
    dates: bool = True,
    chunks: int | None = None,
    codec: str = "lz4",
    clevel: int = 5,
    filter: str = "shuffle",
    checksum: str = "crc32",
    attrs: dict | None = None,
    overwrite: bool = False,
    superchunksize: int | None = None,
) -> Table:
    """A table of the CSV file ``csv`` at ``path`` (what ``blz create PATH --csv CSV`` makes),
    read in the library in two passes of bounded memory. The header row names the columns
    (``pos/x`` nests). An empty field is missing, as pandas and duckdb read it: a column with
    one is nullable. Types are inferred over the whole file from the other fields (bool,
    int64, float64, ``datetime64[D]`` for ISO dates, ``datetime64[s]`` .. ``[ns]`` for ISO
    timestamps as their fractions need, zoned ``UTC`` when each ends in ``Z`` or an offset,
    else strings) unless ``schema`` declares them (``"qty:int32 not null,t:datetime64[ns,
    UTC],name:varstr"``); ``dates=False`` keeps dates as strings. The other options are
    :func:`create`'s."""
    attrs_json = json.dumps(attrs, default=_json_default) if attrs else None
    if len(delimiter) != 1:
        raise ValueError(f"delimiter {delimiter!r}: one character")
    raw = _blz.RawTable.from_csv(
        os.fspath(path), os.fspath(csv), schema, delimiter, bool(dates), chunks, codec, clevel,
        filter, checksum, attrs_json, overwrite,
        None if superchunksize is None else int(superchunksize),
    )
    return Table(raw, "r+")


__all__ = [
    "from_csv",
    "LazyExpr",
    "evaluate",
    "lazyexpr",
    "Array",
    "Attributes",
    "BcolzArray",
    "BcolzTable",
    "ChangedError",
    "ConflictError",
    "Column",
    "CorruptionError",
    "Cursor",
    "Error",
    "InvalidArgumentError",
    "Layer",
    "LockedError",
    "MismatchError",
    "NotFoundError",
    "OutOfBoundsError",
    "ReadOnlyError",
    "SqlError",
    "SqlResult",
    "Table",
    "UnsupportedError",
    "buffer_pool",
    "build_layer",
    "merge_layers",
    "array",
    "asarray",
    "create",
    "gc",
    "remove",
    "num_threads",
    "open",
    "sql",
]
