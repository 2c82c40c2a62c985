"""Advanced indexing: numpy's integer and boolean array indices (``a[[1, 5, 9]]``,
``a[mask]``, ``a[idx, :, jdx]``), zarr's ``a.oindex[...]`` (orthogonal) and ``a.vindex[...]``
(vectorised, point by point), for reads and writes.

This module only turns a key into the library's advanced selection (``blz::fancy``): groups
of axes, each a strided axis, an index list or a group of point coordinates, and says where
numpy puts the result's axes. The data moves in the library, chunk by chunk: only the chunks
the key touches are decoded (in parallel, with the GIL released), each once, straight into
the array returned; a write is one transaction that rewrites each touched chunk once.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from . import _blz
from ._index import native

_VALID = (
    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
    "boolean arrays are valid indices"
)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def is_advanced(key: Any) -> bool:
    """Whether numpy would index with ``key`` by advanced indexing (an array, a list, a
    boolean, in the key or as the key)."""
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if isinstance(k, (list, tuple, bool, np.bool_)):
            return True
        if isinstance(k, np.ndarray):
            return True
    return False


def _positions(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.uint64).reshape(-1)


def _strided(axis: int, s: slice, n: int, keep: bool = True) -> tuple[Any, ...]:
    start, stop, step = s.indices(n)
    r = range(start, stop, step)
    count = len(r)
    if count == 0:
        return ("s", axis, (0, 1, 0, False, keep))
    first = min(r[0], r[-1])
    return ("s", axis, (first, abs(step) if count > 1 else 1, count, step < 0 and count > 1, keep))


def _index_array(item: Any) -> np.ndarray:
    """An index item as numpy converts it: a boolean or integer array."""
    a = np.asarray(item)
    if a.dtype == bool or np.issubdtype(a.dtype, np.integer):
        return a
    if a.size == 0 and a.dtype == np.float64 and not isinstance(item, np.ndarray):
        return a.astype(np.intp)  # numpy takes an empty list as an empty index
    raise IndexError("arrays used as indices must be of integer (or boolean) type")


def _wrap(a: np.ndarray, axis: int, n: int) -> np.ndarray:
    """Integer indices with negative ones counted from the end; numpy's bounds error."""
    a = a.astype(np.int64, copy=False)
    bad = (a < -n) | (a >= n)
    if bad.any():
        i = int(a[bad].flat[0])
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
    return np.where(a < 0, a + n, a)


class NumpyKey:
    """A numpy key resolved against a shape: the library's groups, and how to lay the
    library's result out as numpy does.

    The library returns ``(points, *sliced axes)`` (C order); numpy's result is the
    broadcast shape of the advanced indices followed by the sliced and new axes, with the
    broadcast axes moved to where the first advanced index stands when all the advanced
    indices (integers included) are next to each other in the key.
    """

    def __init__(self, key: Any, shape: tuple[int, ...]) -> None:
        items = list(key) if isinstance(key, tuple) else [key]
        ndim = len(shape)
        # Classify, converting array-likes as numpy does.
        kinds: list[tuple[str, Any]] = []
        for it in items:
            if it is None:
                kinds.append(("new", None))
            elif it is Ellipsis:
                kinds.append(("ell", None))
            elif isinstance(it, slice):
                kinds.append(("slice", it))
            elif isinstance(it, (bool, np.bool_)):
                kinds.append(("bool", np.asarray(it)))
            elif _is_int(it):
                kinds.append(("int", operator.index(it)))
            elif isinstance(it, (list, tuple, np.ndarray)) or hasattr(it, "__array__"):
                a = _index_array(it)
                if a.ndim == 0 and a.dtype != bool:
                    kinds.append(("int", int(a)))
                elif a.dtype == bool:
                    kinds.append(("bool", a))
                else:
                    kinds.append(("arr", a))
            else:
                try:
                    kinds.append(("int", operator.index(it)))
                except TypeError:
                    raise IndexError(_VALID) from None
        if sum(k == "ell" for k, _ in kinds) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        used = sum(
            1 if k in ("int", "slice", "arr") else v.ndim if k == "bool" else 0 for k, v in kinds
        )
        if used > ndim:
            raise IndexError(
                f"too many indices for array: array is {ndim}-dimensional, but {used} were indexed"
            )
        if not any(k == "ell" for k, _ in kinds):
            kinds.append(("ell", None))  # numpy's implicit trailing axes
        fancy: list[tuple[list[int], list[np.ndarray]]] = []  # (axes, index arrays)
        basic: list[tuple[str, int]] = []  # ("slice", count) or ("new", 1), in key order
        strided: list[tuple[Any, ...]] = []
        unchecked: list[int] = []  # integer arrays not yet bounds-checked
        consec = -1  # numpy's rule: -1 none yet, then the result position, or front
        state = -1
        result_dim = 0
        axis = 0
        for k, v in kinds:
            is_fancy = k in ("int", "arr", "bool")
            if is_fancy:
                if state == -1:
                    consec, state = result_dim, 0
                elif state == 1:
                    consec, state = 0, 2
            elif state == 0:
                state = 1
            if k == "new":
                basic.append(("new", 1))
                result_dim += 1
            elif k == "ell":
                for _ in range(ndim - used):
                    g = _strided(axis, slice(None), shape[axis])
                    strided.append(g)
                    basic.append(("slice", g[2][2]))
                    axis += 1
                    result_dim += 1
            elif k == "slice":
                g = _strided(axis, v, shape[axis])
                strided.append(g)
                basic.append(("slice", g[2][2]))
                axis += 1
                result_dim += 1
            elif k == "int":
                n = shape[axis]
                if not -n <= v < n:
                    raise IndexError(f"index {v} is out of bounds for axis {axis} with size {n}")
                fancy.append(([axis], [np.asarray(v % n if n else v)]))
                axis += 1
            elif k == "arr":  # bounds checked below, as numpy: only if any point is selected
                fancy.append(([axis], [v]))
                unchecked.append(len(fancy) - 1)
                axis += 1
            else:  # a boolean array of k dimensions takes k axes: its nonzero()
                for j in range(v.ndim):
                    if v.shape[j] != shape[axis + j]:
                        raise IndexError(
                            f"boolean index did not match indexed array along axis {axis + j}; "
                            f"size of axis is {shape[axis + j]} but size of corresponding "
                            f"boolean axis is {v.shape[j]}"
                        )
                if v.ndim == 0:  # a new axis of 1 (True) or 0 (False)
                    fancy.append(([], [np.zeros(int(bool(v)), np.intp)]))
                else:
                    nz = np.nonzero(v)
                    fancy.append((list(range(axis, axis + v.ndim)), list(nz)))
                axis += v.ndim
        arrays = [a for _, arrs in fancy for a in arrs]
        try:
            bshape = np.broadcast_shapes(*(a.shape for a in arrays))
        except ValueError:
            shapes = " ".join(str(a.shape) for a in arrays)
            raise IndexError(
                f"shape mismatch: indexing arrays could not be broadcast together with shapes {shapes}"
            ) from None
        self.bshape = tuple(bshape)
        if int(np.prod(self.bshape, dtype=np.int64)):
            for i in unchecked:
                (ax,), (a,) = fancy[i]
                fancy[i] = ([ax], [_wrap(a, ax, shape[ax])])
        self.consec = max(consec, 0)
        self.basic_shape = tuple(n for _, n in basic)
        nb = len(self.bshape)
        shape_out = list(self.basic_shape)
        shape_out[self.consec : self.consec] = self.bshape
        self.shape = tuple(shape_out)
        point_axes = [ax for axes, _ in fancy for ax in axes]
        self.points = int(np.prod(self.bshape, dtype=np.int64))
        self.groups: list[tuple[Any, ...]] = []
        lib_shape: tuple[int, ...] = ()
        ortho = self._orthogonal(fancy) if point_axes and self.points else None
        if ortho is not None:
            # Each index array spans its own broadcast axis (np.ix_'s form): index lists,
            # with no point coordinates broadcast to the whole result.
            self.groups.extend(ortho)
            lib_shape = tuple(len(g[2]) for g in ortho if g[0] == "l")
        elif point_axes:
            coords = []
            for axes, arrs in fancy:
                for a in arrs:
                    if axes:
                        coords.append(_positions(np.broadcast_to(a, self.bshape)))
            self.groups.append(("p", point_axes, coords))
            lib_shape = (self.points,)
        self.groups.extend(strided)
        self.lib_shape = lib_shape + tuple(g[2][2] for g in strided)
        self._nb = nb
        self._has_points = bool(point_axes)

    def _orthogonal(self, fancy: list[tuple[list[int], list[np.ndarray]]]) -> list[Any] | None:
        """The advanced indices as index lists, one per broadcast axis in order, when each
        spans a broadcast axis of its own (and single positions); ``None`` otherwise."""
        nb = len(self.bshape)
        lists: dict[int, tuple[Any, ...]] = {}
        singles = []
        for axes, arrs in fancy:
            if not axes:
                continue  # a boolean scalar: a broadcast axis of one, and no dataset axis
            if len(axes) != 1:
                return None  # a mask of several dimensions: points
            a = arrs[0]
            big = [d + nb - a.ndim for d in range(a.ndim) if a.shape[d] != 1]
            if len(big) > 1 or (big and big[0] in lists):
                return None
            if big:
                lists[big[0]] = ("l", axes[0], _positions(a))
            else:
                singles.append(("s", axes[0], (int(a.reshape(-1)[0]), 1, 1, False, False)))
        return [lists[d] for d in sorted(lists)] + singles

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def to_numpy(self, lib: np.ndarray) -> np.ndarray:
        """The library's result laid out as numpy's."""
        a = lib.reshape(self.bshape + self.basic_shape)
        if self.consec and self._nb:
            a = np.moveaxis(a, range(self._nb), range(self.consec, self.consec + self._nb))
        return a

    def to_library(self, values: np.ndarray) -> np.ndarray:
        """numpy's layout (``values`` of :attr:`shape`) as the library takes it."""
        a = values
        if self.consec and self._nb:
            a = np.moveaxis(a, range(self.consec, self.consec + self._nb), range(self._nb))
        return np.ascontiguousarray(a).reshape(self.lib_shape)


def _check_positions(a: np.ndarray, n: int) -> np.ndarray:
    """zarr's wraparound and bounds check of integer indices on an axis of ``n``."""
    a = a.astype(np.int64, copy=False)
    if ((a < -n) | (a >= n)).any():
        raise IndexError(f"index out of bounds for dimension with length {n}")
    return np.where(a < 0, a + n, a)


def _ensure_tuple(key: Any) -> tuple[Any, ...]:
    key = key if isinstance(key, tuple) else (key,)
    return tuple(np.asarray(k) if isinstance(k, list) else k for k in key)


def _replace_ellipsis(key: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
    """zarr's ``replace_ellipsis``: the ellipsis (or missing trailing axes) as full slices."""
    n_ell = sum(k is Ellipsis for k in key)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_ell:
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        fill = len(shape) - (len(key) - 1)
        key = key[:i] + (slice(None),) * max(fill, 0) + key[i + 1 :]
    if len(key) < len(shape):
        key = key + (slice(None),) * (len(shape) - len(key))
    if len(key) > len(shape):
        raise IndexError(f"too many indices for array; expected {len(shape)}, got {len(key)}")
    return key


class OrthogonalKey:
    """zarr's orthogonal selection (``oindex``): per axis an integer, a slice (step >= 1), a
    1-d integer array or a 1-d boolean mask, each applied to its own axis; the result is
    their outer product (integers drop their axes)."""

    def __init__(self, key: Any, shape: tuple[int, ...]) -> None:
        key = _replace_ellipsis(_ensure_tuple(key), shape)
        self.groups: list[tuple[Any, ...]] = []
        out: list[int] = []
        for axis, (k, n) in enumerate(zip(key, shape)):
            if _is_int(k):
                i = int(k)
                if not -n <= i < n:
                    raise IndexError(f"index out of bounds for dimension with length {n}")
                self.groups.append(("s", axis, (i % n, 1, 1, False, False)))
            elif isinstance(k, slice):
                if k.step is not None and operator.index(k.step) < 1:
                    raise IndexError("only slices with step >= 1 are supported.")
                g = _strided(axis, k, n)
                self.groups.append(g)
                out.append(g[2][2])
            elif isinstance(k, np.ndarray) and np.issubdtype(k.dtype, np.integer):
                if k.ndim != 1:
                    raise IndexError(
                        "integer arrays in an orthogonal selection must be 1-dimensional only"
                    )
                self.groups.append(("l", axis, _positions(_check_positions(k, n))))
                out.append(len(k))
            elif isinstance(k, np.ndarray) and k.dtype == bool:
                if k.ndim != 1:
                    raise IndexError(
                        "Boolean arrays in an orthogonal selection must be 1-dimensional only"
                    )
                if k.shape[0] != n:
                    raise IndexError(
                        "Boolean array has the wrong length for dimension; "
                        f"expected {n}, got {k.shape[0]}"
                    )
                idx = np.flatnonzero(k)
                self.groups.append(("l", axis, _positions(idx)))
                out.append(len(idx))
            else:
                raise IndexError(
                    "unsupported selection item for orthogonal indexing; expected integer, "
                    f"slice, integer array or Boolean array, got {type(k)!r}"
                )
        self.shape = tuple(out)
        self.lib_shape = self.shape


class VectorKey:
    """zarr's vectorised selection (``vindex``): one integer array (or integer) per axis,
    broadcast together, selecting points; or one boolean mask of the array's shape."""

    def __init__(self, key: Any, shape: tuple[int, ...]) -> None:
        key = _ensure_tuple(key)
        ints = len(key) == len(shape) and all(
            _is_int(k) or (isinstance(k, np.ndarray) and np.issubdtype(k.dtype, np.integer))
            for k in key
        )
        if ints:
            coords = [
                _check_positions(np.asarray([k]) if _is_int(k) else k, n)
                for k, n in zip(key, shape)
            ]
        elif (
            len(key) == 1
            and isinstance(key[0], np.ndarray)
            and key[0].dtype == bool
            and key[0].shape == tuple(shape)
        ):
            coords = list(np.nonzero(key[0]))
        else:
            raise IndexError(
                "unsupported selection type for vectorized indexing; only coordinate selection "
                "(tuple of integer arrays) and mask selection (single Boolean array) are "
                f"supported; got {key!r}"
            )
        b = np.broadcast_arrays(*coords)  # ValueError when the shapes do not broadcast
        self.shape = tuple(b[0].shape) or (1,)
        self.groups = [("p", list(range(len(shape))), [_positions(c) for c in b])]
        self.lib_shape = (int(np.prod(self.shape, dtype=np.int64)),)


def read(raw: Any, groups: list[Any], lib_shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Gathers the selection into a new array of ``lib_shape`` (in ``dtype``'s order)."""
    out = np.empty(lib_shape, dtype=native(dtype))
    if out.size:
        _blz.fancy_read(raw, groups, out.reshape(-1))
    if out.dtype != dtype:
        out.byteswap(inplace=True)
        out = out.view(dtype)
    return out


def write(raw: Any, groups: list[Any], values: np.ndarray) -> None:
    """Scatters ``values`` (native order, the library's layout) in one transaction."""
    if values.size:
        _blz.fancy_write(raw, groups, np.ascontiguousarray(values).reshape(-1))


def broadcast_value(value: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``value`` broadcast to ``shape`` and cast as numpy's assignment does."""
    buf = np.empty(shape, dtype=native(dtype))
    try:
        buf[...] = value
    except ValueError as e:
        raise ValueError(
            f"shape mismatch: value array of shape {np.shape(value)} could not be broadcast "
            f"to indexing result of shape {shape}"
        ) from e
    return buf


class OIndex:
    """``a.oindex[...]``: zarr's orthogonal indexing of a blz array (see
    :class:`OrthogonalKey`), reads and writes."""

    def __init__(self, array: Any) -> None:
        self._array = array

    def __getitem__(self, key: Any) -> Any:
        a = self._array
        return a._fancy_read(lambda shape: OrthogonalKey(key, shape), scalar=True)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._array._fancy_write(lambda shape: OrthogonalKey(key, shape), value)


class VIndex:
    """``a.vindex[...]``: zarr's vectorised (point) indexing of a blz array (see
    :class:`VectorKey`), reads and writes."""

    def __init__(self, array: Any) -> None:
        self._array = array

    def __getitem__(self, key: Any) -> Any:
        return self._array._fancy_read(lambda shape: VectorKey(key, shape))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._array._fancy_write(lambda shape: VectorKey(key, shape), value)


def row_indices(key: Any, nrows: int) -> np.ndarray | None:
    """A table's rows for an advanced key on its row axis (a 1-d integer array or list,
    negative counting from the end, or a boolean mask of the table's length); ``None`` for
    a basic key."""
    if isinstance(key, tuple):
        if len(key) == 1 and is_advanced(key):
            key = key[0]
        elif is_advanced(key):
            raise IndexError("a table's rows are indexed along one axis")
        else:
            return None
    if not is_advanced(key):
        return None
    a = _index_array(key)
    if a.dtype == bool:
        if a.ndim != 1 or a.shape[0] != nrows:
            raise IndexError(
                "boolean index did not match indexed array along axis 0; size of axis is "
                f"{nrows} but size of corresponding boolean axis is {a.shape[0] if a.ndim else 1}"
            )
        return np.flatnonzero(a).astype(np.uint64)
    if a.ndim != 1:
        raise IndexError("a table's rows are indexed by a 1-d array of integers")
    return _wrap(a, 0, nrows).astype(np.uint64)


__all__ = ["NumpyKey", "OrthogonalKey", "VectorKey", "OIndex", "VIndex", "row_indices"]
