"""Reductions of blz arrays and table columns: numpy's ``sum``, ``min``, ``max``, ``mean``,
``std``, ``var``, ``argmin``, ``argmax``, ``any``, ``all`` and ``count_nonzero``, as methods
and through numpy's ``__array_function__`` (``np.sum(a, axis=1)`` calls ``a.sum(axis=1)``).

They run in Rust (``blz.scan.reduce_axis``) with the GIL released: every chunk is decoded
once, in parallel, and folded into the result; memory is a chunk per thread plus the result,
never the whole array. Results follow numpy: the same dtypes (``sum`` of ``int32`` is
``int64``, ``mean`` of ``float32`` is ``float32``), NaN propagation, first occurrences for
``argmin``/``argmax``, ``ValueError`` for the ``min`` of nothing. Float sums, means and
variances are accumulated in ``float64`` (pairwise within a chunk), so they agree with numpy
to rounding, not always to the last bit.

numpy functions blz does not implement, and arguments it does not take (``where=``,
``initial=``, a dtype other than a numeric one), fall back to numpy on the array read whole
(``np.asarray(a)``), so nothing that works on an ndarray breaks.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

try:
    from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple
except ImportError:  # numpy < 2
    from numpy.core.multiarray import normalize_axis_index  # type: ignore[no-redef]
    from numpy.core.numeric import normalize_axis_tuple  # type: ignore[no-redef]

_NO = object()

# Kinds reduced in Rust. datetime64 ("M") and timedelta64 ("m") arrays reduce through numpy
# on the array read whole, with numpy's NaT rules.
_NUMERIC = "biuf"


def _fallback(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(np, name)(np.asarray(self), *args, **kwargs)


def _axes(axis: Any, ndim: int, one: bool) -> tuple[int, ...] | None:
    if axis is None:
        return None
    if one:
        return (normalize_axis_index(operator.index(axis), ndim),)
    return normalize_axis_tuple(axis, ndim)


class Reductions:
    """Reduction methods for a class that gives ``ndim``, ``dtype`` and
    ``_blz_reduce(op, axes, ddof) -> (descr, shape, bytearray)``."""

    ndim: int
    dtype: np.dtype

    def _blz_reduce(self, op: str, axes: tuple[int, ...] | None, ddof: float) -> Any:
        raise NotImplementedError

    def _can_reduce(self) -> bool:
        return self.dtype.kind in _NUMERIC and self.dtype.names is None

    def _reduction(
        self,
        op: str,
        axis: Any,
        keepdims: bool,
        out: Any = None,
        dtype: Any = None,
        ddof: float = 0,
    ) -> Any:
        arg = op in ("argmin", "argmax")
        axes = _axes(axis, self.ndim, arg)
        # numpy's std of float16 is the square root of its float16 variance.
        half_std = op == "std" and self.dtype == np.float16 and dtype is None
        descr, shape, data = self._blz_reduce("var" if half_std else op, axes, float(ddof))
        r = np.frombuffer(data, dtype=np.dtype(descr)).reshape(shape)
        # numpy's dtypes where blz computes more widely: float32 and float16 means stay in
        # their dtype.
        if (op in ("mean", "std", "var") and self.dtype in (np.float32, np.float16)
                and dtype is None):
            r = r.astype(self.dtype)
        if half_std:
            r = np.sqrt(r)
        if dtype is not None:
            r = r.astype(dtype, copy=False)
        if keepdims:
            red = range(self.ndim) if axes is None else axes
            full = [1 if i in red else n for i, n in enumerate(self.shape)]  # type: ignore[attr-defined]
            r = r.reshape(full)
        if out is not None:
            out[...] = r
            return out
        if r.ndim == 0:
            return r[()]
        return r

    def _try(self, op: str, extra: dict[str, Any], **kw: Any) -> Any:
        """The reduction in Rust, or numpy's on the whole array when it cannot be."""
        dtype = kw.get("dtype")
        if extra or not self._can_reduce() or (
            dtype is not None and np.dtype(dtype).kind not in _NUMERIC
        ):
            named = {k: v for k, v in kw.items() if v is not None or k == "axis"}
            return _fallback(self, op, **named, **extra)
        return self._reduction(op, **kw)

    def sum(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            initial: Any = _NO, where: Any = _NO) -> Any:
        """Sum of the elements over the given axis or axes (numpy's ``sum``)."""
        return self._try("sum", _extra(initial=initial, where=where), axis=axis,
                         keepdims=keepdims, out=out, dtype=dtype)

    def min(self, axis: Any = None, out: Any = None, keepdims: bool = False,
            initial: Any = _NO, where: Any = _NO) -> Any:
        """Smallest element over the given axis or axes; NaN if any is NaN (numpy's ``min``)."""
        return self._try("min", _extra(initial=initial, where=where), axis=axis,
                         keepdims=keepdims, out=out)

    def max(self, axis: Any = None, out: Any = None, keepdims: bool = False,
            initial: Any = _NO, where: Any = _NO) -> Any:
        """Largest element over the given axis or axes; NaN if any is NaN (numpy's ``max``)."""
        return self._try("max", _extra(initial=initial, where=where), axis=axis,
                         keepdims=keepdims, out=out)

    def mean(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
             *, where: Any = _NO) -> Any:
        """Arithmetic mean over the given axis or axes (numpy's ``mean``)."""
        return self._try("mean", _extra(where=where), axis=axis, keepdims=keepdims,
                         out=out, dtype=dtype)

    def var(self, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
            keepdims: bool = False, *, where: Any = _NO, mean: Any = _NO,
            correction: Any = _NO) -> Any:
        """Variance over the given axis or axes, divisor ``n - ddof`` (numpy's ``var``)."""
        if correction is not _NO:
            ddof = correction
        return self._try("var", _extra(where=where, mean=mean), axis=axis,
                         keepdims=keepdims, out=out, dtype=dtype, ddof=ddof)

    def std(self, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
            keepdims: bool = False, *, where: Any = _NO, mean: Any = _NO,
            correction: Any = _NO) -> Any:
        """Standard deviation over the given axis or axes (numpy's ``std``)."""
        if correction is not _NO:
            ddof = correction
        return self._try("std", _extra(where=where, mean=mean), axis=axis,
                         keepdims=keepdims, out=out, dtype=dtype, ddof=ddof)

    def argmin(self, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
        """Index of the first smallest element (the first NaN, if any), flat with no axis."""
        return self._try("argmin", {}, axis=axis, keepdims=keepdims, out=out)

    def argmax(self, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
        """Index of the first largest element (the first NaN, if any), flat with no axis."""
        return self._try("argmax", {}, axis=axis, keepdims=keepdims, out=out)

    def any(self, axis: Any = None, out: Any = None, keepdims: bool = False, *,
            where: Any = _NO) -> Any:
        """Whether any element over the given axis or axes is nonzero."""
        return self._try("any", _extra(where=where), axis=axis, keepdims=keepdims,
                         out=out)

    def all(self, axis: Any = None, out: Any = None, keepdims: bool = False, *,
            where: Any = _NO) -> Any:
        """Whether every element over the given axis or axes is nonzero."""
        return self._try("all", _extra(where=where), axis=axis, keepdims=keepdims,
                         out=out)

    def count_nonzero(self, axis: Any = None, *, keepdims: bool = False) -> Any:
        """Number of nonzero elements over the given axis or axes (numpy's
        ``count_nonzero``)."""
        return self._try("count_nonzero", {}, axis=axis, keepdims=keepdims)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        name = _HANDLED.get(func)
        if name is not None and args and args[0] is self:
            return getattr(self, name)(*args[1:], **kwargs)
        return func(*_read_all(args), **_read_all(kwargs))


def _extra(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not _NO}


def _read_all(x: Any) -> Any:
    """``x`` with every blz array or column in it read into numpy (lists, tuples, dicts)."""
    if isinstance(x, Reductions):
        return np.asarray(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_read_all(v) for v in x)
    if isinstance(x, dict):
        return {k: _read_all(v) for k, v in x.items()}
    return x


_HANDLED = {
    np.sum: "sum",
    np.min: "min",
    np.amin: "min",
    np.max: "max",
    np.amax: "max",
    np.mean: "mean",
    np.std: "std",
    np.var: "var",
    np.argmin: "argmin",
    np.argmax: "argmax",
    np.any: "any",
    np.all: "all",
    np.count_nonzero: "count_nonzero",
}
