"""Lazy array expressions, as python-blosc2's ``lazyexpr``: operators and numpy's ufuncs on
blz arrays and table columns build a :class:`LazyExpr` instead of reading; it is computed
chunk by chunk in parallel in Rust (``blz::expr``): into a numpy array (``np.asarray(e)``,
``e[key]``, which computes only that region), into a new dataset (``e.compute(out=path)``),
or reduced (``e.sum(axis=0)``) without writing the intermediate. numpy 2's broadcasting and
type promotion (Python scalars are weak: ``int8_array + 1`` is int8).

``blz.evaluate("a * b + sin(c)", a=x, b=y, c=z, out="r.blz")`` does the same from text.
"""

from __future__ import annotations

import itertools
import keyword
import os
from typing import Any

import numpy as np

from . import _blz

_names = itertools.count()

#: numpy ufuncs an expression computes, by the expression's function name.
_UFUNC_FUNCS = {
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
    "arccosh", "arctanh", "exp", "expm1", "log", "log10", "log2", "log1p", "sqrt",
    "absolute", "floor", "ceil", "trunc", "negative", "square", "isnan", "isinf",
    "isfinite", "arctan2", "hypot", "maximum", "minimum", "power",
}
#: numpy ufuncs that are operators.
_UFUNC_OPS = {
    "add": "+", "subtract": "-", "multiply": "*", "true_divide": "/", "divide": "/",
    "floor_divide": "//", "remainder": "%", "mod": "%", "bitwise_and": "&",
    "bitwise_or": "|", "logical_and": "&", "logical_or": "|", "less": "<",
    "less_equal": "<=", "greater": ">", "greater_equal": ">=", "equal": "==",
    "not_equal": "!=",
}
_REDUCTIONS = ("sum", "prod", "mean", "std", "var", "min", "max", "any", "all")


def _is_operand(x: Any) -> bool:
    from ._array import Array
    from ._table import Column

    return isinstance(x, (Array, Column, LazyExpr))


def _part(x: Any) -> tuple[str, dict[str, Any]]:
    """``x`` as an expression's text and operands."""
    if isinstance(x, LazyExpr):
        return f"({x.expression})", dict(x.operands)
    name = f"o{next(_names)}"
    return name, {name: x}


def _node(text: str, *parts: Any) -> LazyExpr:
    ops: dict[str, Any] = {}
    texts = []
    for p in parts:
        t, o = _part(p)
        texts.append(t)
        ops.update(o)
    return LazyExpr(text.format(*texts), ops)


def _encode(name: str, x: Any) -> tuple[Any, ...]:
    """An operand as the Rust side takes it."""
    from ._array import Array
    from ._table import Column

    if isinstance(x, Array):
        return (name, "array", x._raw)
    if isinstance(x, Column):
        if x._kind is None:
            raise TypeError(f"operand {name!r}: column {x.path!r} is a record, not a leaf column")
        return (name, "column", x._table._raw, x.path)
    if isinstance(x, LazyExpr):
        raise TypeError("a LazyExpr operand must be merged into the expression's text")
    # Python's scalars are weak (NEP 50); numpy's scalars (np.float64 is a float) are not.
    if type(x) is bool:
        return (name, "bool", x)
    if type(x) is int:
        return (name, "int", x)
    if type(x) is float:
        return (name, "float", x)
    a = np.asarray(x)
    if a.dtype.byteorder not in ("=", "|") and a.dtype.itemsize > 1:
        a = a.astype(a.dtype.newbyteorder("="))
    a = np.ascontiguousarray(a)
    return (name, "memory", a.dtype.str, list(a.shape), a.reshape(-1).view(np.uint8))


def _normalize_axes(axis: Any, ndim: int) -> list[int] | None:
    if axis is None:
        return None
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(a, ndim)
        out.append(a % ndim)
    return out


class ExprOps:
    """Operators and numpy ufuncs that build a :class:`LazyExpr` (for blz arrays, table
    columns and expressions)."""

    __array_priority__ = 100

    def __add__(self, o: Any) -> LazyExpr:
        return _node("{} + {}", self, o)

    def __radd__(self, o: Any) -> LazyExpr:
        return _node("{} + {}", o, self)

    def __sub__(self, o: Any) -> LazyExpr:
        return _node("{} - {}", self, o)

    def __rsub__(self, o: Any) -> LazyExpr:
        return _node("{} - {}", o, self)

    def __mul__(self, o: Any) -> LazyExpr:
        return _node("{} * {}", self, o)

    def __rmul__(self, o: Any) -> LazyExpr:
        return _node("{} * {}", o, self)

    def __truediv__(self, o: Any) -> LazyExpr:
        return _node("{} / {}", self, o)

    def __rtruediv__(self, o: Any) -> LazyExpr:
        return _node("{} / {}", o, self)

    def __floordiv__(self, o: Any) -> LazyExpr:
        return _node("{} // {}", self, o)

    def __rfloordiv__(self, o: Any) -> LazyExpr:
        return _node("{} // {}", o, self)

    def __mod__(self, o: Any) -> LazyExpr:
        return _node("{} % {}", self, o)

    def __rmod__(self, o: Any) -> LazyExpr:
        return _node("{} % {}", o, self)

    def __pow__(self, o: Any) -> LazyExpr:
        return _node("{} ** {}", self, o)

    def __rpow__(self, o: Any) -> LazyExpr:
        return _node("{} ** {}", o, self)

    def __and__(self, o: Any) -> LazyExpr:
        return _node("{} & {}", self, o)

    def __rand__(self, o: Any) -> LazyExpr:
        return _node("{} & {}", o, self)

    def __or__(self, o: Any) -> LazyExpr:
        return _node("{} | {}", self, o)

    def __ror__(self, o: Any) -> LazyExpr:
        return _node("{} | {}", o, self)

    def __invert__(self) -> LazyExpr:
        return _node("~{}", self)

    def __neg__(self) -> LazyExpr:
        return _node("-{}", self)

    def __pos__(self) -> LazyExpr:
        return _node("{}", self)

    def __abs__(self) -> LazyExpr:
        return _node("abs({})", self)

    def __lt__(self, o: Any) -> LazyExpr:
        return _node("{} < {}", self, o)

    def __le__(self, o: Any) -> LazyExpr:
        return _node("{} <= {}", self, o)

    def __gt__(self, o: Any) -> LazyExpr:
        return _node("{} > {}", self, o)

    def __ge__(self, o: Any) -> LazyExpr:
        return _node("{} >= {}", self, o)

    def __eq__(self, o: Any) -> LazyExpr:  # type: ignore[override]
        return _node("{} == {}", self, o)

    def __ne__(self, o: Any) -> LazyExpr:  # type: ignore[override]
        return _node("{} != {}", self, o)

    __hash__ = object.__hash__

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name = ufunc.__name__
        if method == "__call__" and not kwargs:
            if name in _UFUNC_OPS and len(inputs) == 2:
                return _node("{} %s {}" % _UFUNC_OPS[name], *inputs)
            if name in _UFUNC_FUNCS:
                return _node(name + "(" + ", ".join(["{}"] * len(inputs)) + ")", *inputs)
            if name in ("invert", "logical_not"):
                return _node("~{}", *inputs)
        from ._reduce import _read_all

        return getattr(ufunc, method)(*_read_all_expr(inputs), **_read_all(kwargs))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.where and len(args) == 3 and not kwargs:
            return _node("where({}, {}, {})", *args)
        sup = super()
        if hasattr(sup, "__array_function__"):
            return sup.__array_function__(func, types, args, kwargs)  # type: ignore[misc]
        return func(*_read_all_expr(args), **kwargs)


def _read_all_expr(x: Any) -> Any:
    from ._reduce import _read_all

    if isinstance(x, LazyExpr):
        return np.asarray(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_read_all_expr(v) for v in x)
    return _read_all(x)


class LazyExpr(ExprOps):
    """An expression over blz arrays, table columns, numpy arrays and scalars, computed only
    when asked: ``np.asarray(e)``, ``e[key]`` (only that region), ``e.compute(out=...)``,
    ``e.sum(axis=...)`` and the other reductions.

    ``expression`` is its text (numpy's operators and function names), ``operands`` the
    objects its names stand for.
    """

    def __init__(self, expression: str, operands: dict[str, Any]) -> None:
        for n in operands:
            if not n.isidentifier() or keyword.iskeyword(n):
                raise ValueError(f"operand name {n!r} is not a name an expression can use")
        self.expression = expression
        self.operands = dict(operands)
        self._meta: tuple[np.dtype, tuple[int, ...]] | None = None

    def _ops(self) -> list[tuple[Any, ...]]:
        return [_encode(n, x) for n, x in self.operands.items()]

    def _info(self) -> tuple[np.dtype, tuple[int, ...]]:
        if self._meta is None:
            descr, shape = _blz.expr_meta(self.expression, self._ops())
            self._meta = (np.dtype(descr), tuple(shape))
        return self._meta

    @property
    def dtype(self) -> np.dtype:
        """The result's dtype (numpy 2's promotion)."""
        return self._info()[0]

    @property
    def shape(self) -> tuple[int, ...]:
        """The result's shape (numpy's broadcasting of the operands)."""
        return self._info()[1]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d expression")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"LazyExpr({self.expression!r}, shape={self.shape}, dtype={self.dtype})"

    def _eval(self, region: list[tuple[int, int, int]] | None) -> np.ndarray:
        dtype, shape = self._info()
        counts = shape if region is None else tuple(c for _, _, c in region)
        out = np.empty(counts, dtype=dtype)
        _blz.expr_eval(self.expression, self._ops(), out.reshape(-1).view(np.uint8), region)
        return out

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        a = self._eval(None)
        return a if dtype is None else a.astype(dtype)

    def __getitem__(self, key: Any) -> Any:
        """Computes only the region ``key`` selects (integers, slices, ``...``); other keys
        (arrays, masks, ``None``) index the computed bounding region with numpy."""
        shape = self.shape
        keys = key if isinstance(key, tuple) else (key,)
        basic = all(isinstance(k, (int, np.integer, slice)) or k is Ellipsis for k in keys)
        if not basic or sum(k is Ellipsis for k in keys) > 1:
            return np.asarray(self)[key]
        if Ellipsis in keys:
            i = keys.index(Ellipsis)
            keys = keys[:i] + (slice(None),) * (len(shape) - len(keys) + 1) + keys[i + 1:]
        if len(keys) > len(shape):
            raise IndexError(f"too many indices: {len(keys)} for {len(shape)} axes")
        keys = keys + (slice(None),) * (len(shape) - len(keys))
        region = []
        post: list[Any] = []
        for k, n in zip(keys, shape):
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step > 0:
                    count = max(0, (stop - start + step - 1) // step)
                    region.append((start, step, count) if count else (0, 1, 0))
                    post.append(slice(None))
                else:
                    count = max(0, (start - stop - step - 1) // -step)
                    first = start + (count - 1) * step if count else 0
                    region.append((first, -step, count))
                    post.append(slice(None, None, -1))
            else:
                i = int(k)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis with size {n}")
                region.append((i % n, 1, 1))
                post.append(0)
        out = self._eval(region)
        return out[tuple(post)]

    def compute(self, out: str | os.PathLike[str] | None = None, *, chunks: Any = None,
                codec: str = "lz4", clevel: int = 5, filter: str = "shuffle",
                overwrite: bool = False) -> Any:
        """Computes the expression: into a numpy array (``out=None``), or into a new dataset
        at ``out`` (a path or an ``s3://`` URL; chunks and codec as :func:`blz.create`),
        built beside it and put in place only when complete. Returns the result."""
        if out is None:
            return np.asarray(self)
        from ._array import Array

        raw = _blz.expr_compute(self.expression, self._ops(), os.fspath(out),
                                None if chunks is None else [int(c) for c in (
                                    chunks if isinstance(chunks, (tuple, list)) else (chunks,))],
                                codec, clevel, filter, overwrite)
        return Array(raw, "r+")

    def _reduce(self, op: str, axis: Any = None, ddof: float = 0.0,
                keepdims: bool = False) -> Any:
        axes = _normalize_axes(axis, self.ndim)
        descr, shape, data = _blz.expr_reduce(self.expression, self._ops(), op, axes, ddof)
        r = np.frombuffer(data, dtype=np.dtype(descr)).reshape(shape)
        if keepdims:
            red = range(self.ndim) if axes is None else axes
            for a in sorted(red):
                r = np.expand_dims(r, a)
        return r[()] if r.ndim == 0 else r.copy()

    def sum(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Sum over the axis or axes (all when ``None``)."""
        return self._reduce("sum", axis, keepdims=keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Product over the axis or axes."""
        return self._reduce("prod", axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Mean over the axis or axes."""
        return self._reduce("mean", axis, keepdims=keepdims)

    def std(self, axis: Any = None, ddof: float = 0, keepdims: bool = False) -> Any:
        """Standard deviation over the axis or axes."""
        return self._reduce("std", axis, ddof, keepdims)

    def var(self, axis: Any = None, ddof: float = 0, keepdims: bool = False) -> Any:
        """Variance over the axis or axes."""
        return self._reduce("var", axis, ddof, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Minimum over the axis or axes (NaN wins, as numpy's)."""
        return self._reduce("min", axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Maximum over the axis or axes (NaN wins, as numpy's)."""
        return self._reduce("max", axis, keepdims=keepdims)

    def any(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Whether any element is nonzero."""
        return self._reduce("any", axis, keepdims=keepdims)

    def all(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Whether every element is nonzero."""
        return self._reduce("all", axis, keepdims=keepdims)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        name = {np.sum: "sum", np.prod: "prod", np.mean: "mean", np.std: "std",
                np.var: "var", np.min: "min", np.max: "max", np.amin: "min",
                np.amax: "max", np.any: "any", np.all: "all"}.get(func)
        if name is not None and args and args[0] is self:
            return getattr(self, name)(*args[1:], **kwargs)
        return super().__array_function__(func, types, args, kwargs)


def evaluate(expr: str | LazyExpr, operands: dict[str, Any] | None = None, *,
             out: str | os.PathLike[str] | None = None, chunks: Any = None,
             codec: str = "lz4", clevel: int = 5, filter: str = "shuffle",
             overwrite: bool = False, **named: Any) -> Any:
    """Computes an expression, a :class:`LazyExpr` or text (``"a * b + sin(c)"``) whose names
    are bound by ``operands`` (a dict) or keyword arguments (blz arrays, table columns, numpy
    arrays, scalars): with ``out=None`` into a numpy array, else into a new dataset at
    ``out`` (a path or an ``s3://`` URL), which is returned."""
    if isinstance(expr, str):
        ops = dict(operands or {})
        ops.update(named)
        expr = LazyExpr(expr, ops)
    elif operands or named:
        raise TypeError("operands are given with the expression's text, not with a LazyExpr")
    return expr.compute(out, chunks=chunks, codec=codec, clevel=clevel, filter=filter,
                        overwrite=overwrite)


def lazyexpr(expr: str, operands: dict[str, Any] | None = None, **named: Any) -> LazyExpr:
    """A :class:`LazyExpr` from text, its names bound by ``operands`` or keywords (as
    python-blosc2's ``lazyexpr``)."""
    ops = dict(operands or {})
    ops.update(named)
    return LazyExpr(expr, ops)
