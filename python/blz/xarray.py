"""xarray over blz: ``xr.open_dataset(path, engine="blz")`` and :func:`to_blz`.

>>> import xarray as xr, blz.xarray                        # doctest: +SKIP
>>> blz.xarray.to_blz(ds, "weather.blzg")                  # doctest: +SKIP
>>> xr.open_dataset("weather.blzg", engine="blz", chunks={})  # doctest: +SKIP

A *blz group* is a directory holding one blz array per variable (data variables and
coordinates alike) and a small JSON file for the group (``spec/xarray.md``):

- ``<group>/blz-group.json``: ``{"blz_group": 1, "variables": [names], "attributes": {..}}``;
- ``<group>/<name>/``: the variable, a blz array whose attributes hold the variable's
  (CF-encoded) attributes and its dimension names under ``_ARRAY_DIMENSIONS``, as zarr does.

CF encoding (datetime64 and timedelta64 as integers with ``units``, ``_FillValue``,
``scale_factor``/``add_offset``, the ``coordinates`` attribute) is xarray's own, with the
coders its zarr backend uses; opening decodes with xarray's decoders.

Opening reads only each array's metadata: a variable's data is read when it is used, through
:class:`BlzBackendArray` (outer indexing: slices and integer lists per axis, read with
``Array.oindex``). ``chunks={}`` gives dask arrays whose blocks are blz's chunks (the
variable's ``encoding["preferred_chunks"]``).

A group appears whole or not at all: :func:`to_blz` writes it in a sibling directory
``<group>.tmp-<hex>`` and renames that into place (or swaps it with the old group).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
import uuid
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np

from ._optional import missing

try:
    import xarray as xr
    from xarray.backends import AbstractDataStore, BackendArray, BackendEntrypoint
    from xarray.backends.store import StoreBackendEntrypoint
    from xarray.core import indexing
except ModuleNotFoundError as e:
    raise missing("blz.xarray", "xarray", "xarray", e) from e

from . import _blz
from ._errors import InvalidArgumentError, UnsupportedError

__all__ = ["BlzBackendArray", "BlzBackendEntrypoint", "GROUP_FILE", "open_group", "to_blz"]

#: The group's own file, in the group's directory.
GROUP_FILE = "blz-group.json"

#: The version written in the group file's ``blz_group`` key.
GROUP_VERSION = 1

#: The array attribute holding a variable's dimension names (zarr's key).
DIMS_KEY = "_ARRAY_DIMENSIONS"

#: Attributes whose value is a number of the variable's dtype: a NaN or an infinity is
#: stored as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (JSON has no such
#: numbers), as zarr stores fill values.
_TYPED_ATTRS = ("_FillValue", "missing_value")

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


# -- attributes ------------------------------------------------------------------------


def _json_value(v: Any, where: str) -> Any:
    """An attribute value as plain JSON: numpy scalars and arrays as numbers and lists; a
    non-finite float is refused (JSON cannot hold it)."""
    if isinstance(v, np.ndarray):
        return [_json_value(x, where) for x in v.tolist()] if v.ndim else _json_value(v.item(), where)
    if isinstance(v, np.generic):
        return _json_value(v.item(), where)
    if isinstance(v, (list, tuple)):
        return [_json_value(x, where) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{where}: a NaN or infinite attribute value cannot be stored as JSON")
    if isinstance(v, dict):
        return {str(k): _json_value(x, f"{where}.{k}") for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"{where}: attribute values must be JSON-like, not {type(v).__name__}")


def _encode_attrs(attrs: Mapping[Any, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if not isinstance(k, str):
            raise TypeError(f"{where}: attribute names must be strings, not {k!r}")
        if k == DIMS_KEY:
            raise ValueError(f"{where}: the attribute name {DIMS_KEY} is reserved by blz groups")
        if k in _TYPED_ATTRS and np.asarray(v).dtype.kind == "f":
            x = np.asarray(v, dtype=float)
            out[k] = _float_json(float(x)) if x.ndim == 0 else [_float_json(e) for e in x.ravel().tolist()]
            continue
        out[k] = _json_value(v, f"{where} attribute {k}")
    return out


def _float_json(e: float) -> float | str:
    if math.isnan(e):
        return "NaN"
    if math.isinf(e):
        return "Infinity" if e > 0 else "-Infinity"
    return e


def _decode_typed(v: Any, dtype: np.dtype) -> Any:
    def one(e: Any) -> Any:
        e = _NONFINITE.get(e, e) if isinstance(e, str) else e
        return dtype.type(e) if dtype.kind in "biufc" else e

    return [one(e) for e in v] if isinstance(v, list) else one(v)


# -- reading ---------------------------------------------------------------------------


def _group_doc(path: str) -> dict[str, Any]:
    f = os.path.join(path, GROUP_FILE)
    try:
        with open(f, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        e = InvalidArgumentError(f"{path}: not a blz group (no {GROUP_FILE})")
        e.filename = path
        raise e from None
    except ValueError as err:
        e = InvalidArgumentError(f"{f}: not valid JSON ({err})")
        e.filename = f
        raise e from None
    ok = (
        isinstance(doc, dict)
        and doc.get("blz_group") == GROUP_VERSION
        and isinstance(doc.get("variables"), list)
        and all(isinstance(n, str) for n in doc["variables"])
        and isinstance(doc.get("attributes", {}), dict)
    )
    if not ok:
        e = InvalidArgumentError(
            f"{f}: not a blz group file of version {GROUP_VERSION}"
            " (blz_group, variables and attributes keys)"
        )
        e.filename = f
        raise e
    for n in doc["variables"]:
        _check_name(n)
    return doc


def _open_array(path: str) -> Any:
    from . import Array
    from . import open as blz_open

    a = blz_open(path, "r")
    if not isinstance(a, Array):
        e = InvalidArgumentError(f"{path}: a group's variable must be a blz array")
        e.filename = path
        raise e
    return a


class BlzBackendArray(BackendArray):
    """One variable's data, read lazily: xarray hands :meth:`__getitem__` an explicit
    indexer, which reaches blz as a basic key or, with integer arrays, ``Array.oindex``.

    Thread safe (the blz handle is opened once, under a lock, and blz reads release the GIL
    and share nothing mutable) and picklable: a pickle holds only the array's path, shape
    and dtype, and the copy opens the array again, by path, at its first read."""

    def __init__(self, path: str, shape: tuple[int, ...], dtype: np.dtype, handle: Any = None):
        self.path = path
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self._handle = handle
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "shape": self.shape, "dtype": self.dtype.str}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["shape"], np.dtype(state["dtype"]))  # type: ignore[misc]

    def _array(self) -> Any:
        with self._lock:
            if self._handle is None:
                self._handle = _open_array(self.path)
            return self._handle

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._raw_indexing_method
        )

    def _raw_indexing_method(self, key: tuple[Any, ...]) -> np.ndarray:
        a = self._array()
        if not self.shape:  # a 0-d variable, stored as shape (1,)
            return np.asarray(a[0:1]).reshape(())[key]
        if any(isinstance(k, np.ndarray) for k in key):
            return np.asarray(a.oindex[key])
        return np.asarray(a[key])


class BlzDataStore(AbstractDataStore):
    """The variables and attributes of the blz group at ``path`` (read-only): each
    variable's array is opened once, for its metadata; no data is read here."""

    def __init__(self, path: str | os.PathLike[str], drop_variables: Iterable[str] = ()):
        self.path = os.path.abspath(os.fspath(path))
        self._doc = _group_doc(self.path)
        self._drop = set(drop_variables)

    def _variable(self, name: str) -> xr.Variable:
        vpath = os.path.join(self.path, name)
        a = _open_array(vpath)
        attrs = a.attrs._load()  # one read of meta/attributes
        dims = attrs.pop(DIMS_KEY, None)
        if not isinstance(dims, list) or not all(isinstance(d, str) for d in dims):
            e = InvalidArgumentError(f"{vpath}: no {DIMS_KEY} attribute (a list of dimension names)")
            e.filename = vpath
            raise e
        for k in _TYPED_ATTRS:
            if k in attrs:
                attrs[k] = _decode_typed(attrs[k], a.dtype)
        if dims:
            shape = a.shape
            if len(dims) != a.ndim:
                e = InvalidArgumentError(f"{vpath}: {len(dims)} dimension names for {a.ndim} axes")
                e.filename = vpath
                raise e
            encoding = {"chunks": a.chunks, "preferred_chunks": dict(zip(dims, a.chunks))}
        else:
            shape = ()
            if a.shape != (1,):
                e = InvalidArgumentError(f"{vpath}: a 0-d variable is stored as shape (1,), not {a.shape}")
                e.filename = vpath
                raise e
            encoding = {}
        data = indexing.LazilyIndexedArray(BlzBackendArray(vpath, shape, a.dtype, a))
        return xr.Variable(tuple(dims), data, attrs, encoding)

    def get_variables(self) -> dict[str, xr.Variable]:
        return {n: self._variable(n) for n in self._doc["variables"] if n not in self._drop}

    def get_attrs(self) -> dict[str, Any]:
        return dict(self._doc.get("attributes", {}))

    def get_dimensions(self) -> Any:
        raise NotImplementedError()

    def close(self) -> None:
        pass


def open_group(path: str | os.PathLike[str], **kwargs: Any) -> xr.Dataset:
    """``xr.open_dataset(path, engine="blz", **kwargs)``."""
    return xr.open_dataset(path, engine="blz", **kwargs)


class BlzBackendEntrypoint(BackendEntrypoint):
    """xarray's ``engine="blz"``: opens a blz group (a directory with ``blz-group.json``)."""

    description = "Open a blz group (a directory of blz arrays) in xarray"
    open_dataset_parameters = (
        "filename_or_obj",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "drop_variables",
        "use_cftime",
        "decode_timedelta",
    )

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
    ) -> xr.Dataset:
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        drop = list(drop_variables or ())
        store = BlzDataStore(filename_or_obj, drop)
        ds = StoreBackendEntrypoint().open_dataset(
            store,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            drop_variables=drop,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )
        ds.set_close(store.close)
        return ds

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        try:
            path = os.fspath(filename_or_obj)
        except TypeError:
            return False
        if not isinstance(path, str):
            return False
        return os.path.isfile(os.path.join(path, GROUP_FILE))


# -- writing ---------------------------------------------------------------------------


def _check_name(name: Any) -> str:
    bad = (
        not isinstance(name, str)
        or name in ("", ".", "..", GROUP_FILE)
        or "/" in name
        or "\0" in name
        or ".tmp-" in name
    )
    if bad:
        raise ValueError(
            f"{name!r}: a blz group's variable name must be a string usable as a directory name"
            f" (not empty, '.', '..' or {GROUP_FILE!r}, no '/', NUL or '.tmp-')"
        )
    return name


def _encode_variable(var: xr.Variable, name: str) -> xr.Variable:
    """CF encoding as xarray's zarr backend does it (zarr's coders: booleans stay booleans);
    object arrays of strings become fixed-length ``U<n>``, which blz stores as is."""
    from xarray import conventions
    from xarray.backends.common import ensure_dtype_not_object

    var = conventions.encode_cf_variable(var, name=name, coders=conventions.ZARR_CODERS)
    return ensure_dtype_not_object(var, name=name)


def _chunks_for(var: xr.Variable, chunks: Any) -> list[int] | None:
    """The blz chunk shape of a variable: given, else its dask blocks' (the first block
    along each axis), else ``encoding["chunks"]`` (from a blz or zarr source), else blz's
    default (``None``)."""
    if chunks is None:
        dask_chunks = getattr(var.data, "chunks", None)
        if isinstance(dask_chunks, tuple) and all(isinstance(c, tuple) for c in dask_chunks):
            chunks = [c[0] if c else 1 for c in dask_chunks]
        else:
            chunks = var.encoding.get("chunks")
    if chunks is None:
        return None
    chunks = [int(c) for c in chunks]
    if len(chunks) != var.ndim:
        raise ValueError(f"chunks {tuple(chunks)} do not match {var.ndim} dimensions")
    return [max(1, c) for c in chunks]


def _write_variable(path: str, var: xr.Variable, attrs: dict[str, Any], chunks: Any,
                    options: dict[str, Any]) -> None:
    """One variable as the blz array at ``path``."""
    from . import create
    from . import dask as blz_dask

    if var.ndim == 0:
        create(path, np.asarray(var.values).reshape(1), attrs=attrs, **options).close()
        return
    data = var.data
    if hasattr(data, "dask") and hasattr(data, "chunks"):
        blz_dask.to_blz(data, path, chunks=chunks, attrs=attrs, **options).close()
    else:
        create(path, np.asarray(var.values), chunks=chunks, attrs=attrs, **options).close()


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_group(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, GROUP_FILE))


def to_blz(
    ds: xr.Dataset,
    path: str | os.PathLike[str],
    *,
    mode: str = "w-",
    encoding: Mapping[Hashable, Mapping[str, Any]] | None = None,
    codec: str = "lz4",
    clevel: int = 5,
    filter: str = "shuffle",  # noqa: A002 - blz.create's keyword
    checksum: str = "crc32",
) -> None:
    """Writes the dataset ``ds`` as a blz group at ``path``: every variable (data variables
    and coordinates) a blz array of the group, CF-encoded as xarray encodes for zarr.

    Each array's chunk shape is ``encoding[name]["chunks"]`` if given, else the variable's
    dask chunks (the first block along each axis), else its ``encoding["chunks"]``, else
    blz's default. Dask variables are written by dask tasks (``blz.dask.to_blz``: in
    parallel, on a distributed cluster's workers); others whole, from memory. ``codec``,
    ``clevel``, ``filter`` and ``checksum`` as :func:`blz.create`.

    ``mode="w-"`` (default) refuses an existing ``path`` (``FileExistsError``); ``mode="w"``
    replaces an existing blz group (anything else at ``path`` is refused). The group is
    built in ``<path>.tmp-<hex>`` and appears in one step: a rename, or, replacing a group,
    an atomic exchange of the two directories, after which the old group is removed. A
    failure (an exception) leaves ``path`` as it was and removes the temporary directory; a
    crash leaves ``path`` as it was (or, where the filesystem cannot exchange directories
    atomically, possibly nothing at ``path`` and the old group at ``<path>.tmp-<hex>-old``)
    and the temporary directory to remove by hand.
    """
    if mode not in ("w-", "w"):
        raise ValueError(f"mode must be 'w-' (create) or 'w' (replace), not {mode!r}")
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"to_blz writes an xarray.Dataset, not {type(ds).__name__}")
    path = os.path.abspath(os.fspath(path))
    exists = os.path.lexists(path)
    if exists and mode == "w-":
        raise FileExistsError(17, "a blz group (or something else) is already there; mode='w' replaces a group", path)
    if exists and not _is_group(path):
        raise FileExistsError(17, "not a blz group: mode='w' replaces only a blz group", path)
    options = {"codec": codec, "clevel": clevel, "filter": filter, "checksum": checksum}
    encoding = dict(encoding or {})
    for k in encoding:
        if k not in ds.variables:
            raise ValueError(f"encoding given for {k!r}, which is not a variable of the dataset")

    from xarray import conventions

    variables, group_attrs = conventions.encode_dataset_coordinates(ds)
    names = [_check_name(n) for n in variables]
    group = {
        "blz_group": GROUP_VERSION,
        "variables": names,
        "attributes": _encode_attrs(group_attrs, "the dataset"),
    }
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:16]}"
    os.mkdir(tmp)
    try:
        for name in names:
            var = variables[name]
            given = dict(encoding.get(name, {}))
            var = var.copy(deep=False)
            var.encoding = {**var.encoding, **given}
            chunks = _chunks_for(var, given.get("chunks")) if var.ndim else None
            enc = _encode_variable(var, name)
            attrs = _encode_attrs(enc.attrs, f"variable {name}")
            attrs[DIMS_KEY] = [str(d) for d in enc.dims]
            _write_variable(os.path.join(tmp, name), enc, attrs, chunks, options)
        f = os.path.join(tmp, GROUP_FILE)
        with open(f, "w", encoding="utf-8") as fh:
            json.dump(group, fh, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(tmp)
        _publish(tmp, path, exists)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _publish(tmp: str, path: str, replace: bool) -> None:
    """Puts the complete group ``tmp`` at ``path`` in one step."""
    parent = os.path.dirname(path)
    if not replace:
        os.rename(tmp, path)
        _fsync_dir(parent)
        return
    try:
        _blz.exchange_paths(tmp, path)  # tmp now holds the old group
        _fsync_dir(parent)
    except UnsupportedError:
        old = f"{tmp}-old"
        os.rename(path, old)
        os.rename(tmp, path)
        _fsync_dir(parent)
        shutil.rmtree(old, ignore_errors=True)
        return
    shutil.rmtree(tmp, ignore_errors=True)
