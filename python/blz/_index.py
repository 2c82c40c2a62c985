"""numpy basic indexing resolved against a shape, in the form the native module takes."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

_BAD = (
    "blz supports numpy's basic indexing: integers, slices (`:`), ellipsis (`...`) and "
    "numpy.newaxis (`None`); got {!r}"
)


@dataclass(frozen=True)
class Resolved:
    """A key resolved against a shape.

    ``sel``: per stored axis ``(start, count, step, is_index)`` with numpy's meaning (``start``
    the first position visited, ``step`` possibly negative). ``counts``: the extent of each
    stored axis in the buffer blz fills (ascending positions). ``view``: the key that turns
    that buffer into numpy's result (reverses, drops indexed axes, inserts new ones).
    ``shape``: the result's shape.
    """

    sel: list[tuple[int, int, int, bool]]
    counts: tuple[int, ...]
    view: tuple[Any, ...]
    shape: tuple[int, ...]


def resolve(key: Any, shape: tuple[int, ...]) -> Resolved:
    if not isinstance(key, tuple):
        key = (key,)
    ndim = len(shape)
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > ndim:
        raise IndexError(
            f"too many indices for array: array is {ndim}-dimensional, "
            f"but {n_real} were indexed"
        )
    expanded: list[Any] = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (ndim - n_real))
        else:
            expanded.append(k)
    if n_ell == 0:
        expanded.extend([slice(None)] * (ndim - n_real))
    sel: list[tuple[int, int, int, bool]] = []
    view: list[Any] = []
    out_shape: list[int] = []
    axis = 0
    for k in expanded:
        if k is None:
            view.append(None)
            out_shape.append(1)
            continue
        n = shape[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            sel.append((start, count, step, False))
            view.append(slice(None, None, -1) if step < 0 else slice(None))
            out_shape.append(count)
        else:
            if isinstance(k, (bool, np.bool_)) or not _is_int(k):
                raise IndexError(_BAD.format(k))
            i = operator.index(k)
            if i < -n or i >= n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            if i < 0:
                i += n
            sel.append((i, 1, 1, True))
            view.append(0)
        axis += 1
    if n_ell:
        # numpy: a key with an ellipsis gives an array, even a 0-d one, never a scalar.
        view.append(Ellipsis)
    return Resolved(sel, tuple(s[1] for s in sel), tuple(view), tuple(out_shape))


def _is_int(k: Any) -> bool:
    if isinstance(k, np.ndarray):
        return False
    try:
        operator.index(k)
    except TypeError:
        return False
    return True


def native(dtype: np.dtype) -> np.dtype:
    """The dtype in this machine's byte order."""
    return dtype.newbyteorder("=") if dtype.byteorder not in ("=", "|") else dtype


_POOLED = 1 << 20  # as buffers.rs's MIN_BYTES: smaller results allocate through numpy


def empty(shape: Any, dtype: np.dtype) -> np.ndarray:
    """An uninitialised array for a read to fill. Large ones live in memory from blz's
    pool (``blz.set_buffer_pool``): memory a freed result held, its pages already mapped,
    instead of fresh pages the kernel must fault in and zero before the read writes them."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = 1
    for s in shape:
        count *= s
    nbytes = count * dtype.itemsize
    if nbytes < _POOLED or dtype.hasobject:
        return np.empty(shape, dtype=dtype)
    from . import _blz

    return np.frombuffer(_blz.ReadBuffer(nbytes), dtype=dtype, count=count).reshape(shape)
