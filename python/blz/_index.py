"""Helpers for numpy basic indexing over blz datasets.

A key (an int, a slice, ``...``, ``None`` or a tuple of them) goes as it is to the native
module, whose ``select`` hands it to the library (``blz::Selection``): it is resolved and
checked there, once. What comes back (``_blz.RawSelection``) says what to read (``axes``,
``counts``: ascending positions on every axis) and how numpy sees it (``view``).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def ascending(axis: tuple[int, int, int, bool, bool]) -> slice:
    """The positions of one resolved axis ``(start, step, count, reversed, keep)`` as a slice
    in ascending order (``RawSelection.view`` turns them round)."""
    start, step, count = axis[:3]
    if count == 0:
        return slice(0, 0)
    return slice(start, start + (count - 1) * step + 1, step)


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
