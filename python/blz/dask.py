"""blz datasets as dask collections: arrays as ``dask.array``, tables as ``dask.dataframe``.

>>> import blz.dask                                    # doctest: +SKIP
>>> x = blz.dask.from_blz("walk.blz")                  # doctest: +SKIP
>>> x[::10].mean().compute()                           # doctest: +SKIP
>>> df = blz.dask.read_table("pts.blz", columns=["id", "pos/x"])  # doctest: +SKIP

The graph's blocks follow blz's layout: when a superchunk file's chunks cover whole rows of
the chunk grid, a task reads whole files (all their rows along axis 0): as many consecutive
files stored on the same hosts as fit in ``task_bytes`` (256 MiB by default; the
scheduler's cost is per task, so fewer larger tasks are cheaper) while at least
``MIN_TASKS`` (16) tasks remain, or, when one file is more
than that, as many whole chunk-rows of one file as fit; otherwise (or when one chunk-row is
more than ``task_bytes``) one blz chunk. Tasks carry the dataset's path, not an open
handle, and reopen it read-only where they run, with no lock (blz readers never block one
another). A task that finds the dataset changed since the graph was made (another commit)
raises :class:`blz.ChangedError` rather than mixing two versions.

Each array read task is annotated with the hosts that hold its superchunk file
(``blz.dask.file_hosts``, from the library's ``locate``: the GlusterFS brick server, or this
machine for a local disk) as ``workers=`` with ``allow_other_workers=True``, so the
distributed scheduler runs it on a worker of that host when one is free, elsewhere
otherwise. dask's low-level task fusion (on by default for arrays) drops annotations, and
the scheduler is where a graph is optimized: start it with fusion off for the hints to reach
it (``DASK_OPTIMIZATION__FUSE__ACTIVE=False dask scheduler``, or
``dask.config.set({"optimization.fuse.active": False})`` in the process that runs it).

Dataframes carry no such hints: dask's query-planned dataframes ignore task annotations.
"""

from __future__ import annotations

import math
import os
import re
import socket
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import _blz
from ._errors import ChangedError, InvalidArgumentError, NotFoundError
from ._optional import require
from ._table import VAR_KINDS

# dask itself is imported where it is used; without it, importing this module says what to
# install (the functions would only fail later, at their first call).
require("blz.dask", "dask", "dask")

__all__ = ["append", "file_hosts", "from_blz", "read_table", "to_blz"]

#: Largest uncompressed block a task reads whole (one superchunk file or one row range).
TASK_BYTES = 256 << 20

#: Files are grouped into tasks only while at least this many tasks remain.
MIN_TASKS = 16

Locator = Callable[[str], Mapping[str, Sequence[str]]]


def _addresses(host: str) -> list[str]:
    """A host as distributed's ``workers=`` matches it: the name (a worker named so) and the
    address it resolves to (a worker listening there)."""
    out = [host]
    try:
        ip = socket.gethostbyname(host)
    except OSError:
        return out
    if ip != host:
        out.append(ip)
    return out


def file_hosts(root: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Where each superchunk file of the dataset at ``root`` lives, from the library's
    ``locate``: ``{path relative to root ("data/__1__.bin", "data/pos/x/__1__.bin"): [hosts]}``,
    a host given by name and by the address it resolves to. An ``s3://`` URL has no hosts:
    :class:`blz.InvalidArgumentError`."""
    if _is_url(os.fspath(root)):
        raise InvalidArgumentError(
            f"{os.fspath(root)}: an object-store dataset has no file hosts to locate"
        )
    root = os.path.abspath(os.fspath(root))
    return {
        os.path.relpath(path, root): _addresses(host)
        for path, host, _location, _kind in _blz.locate(root)
    }


def _is_url(path: Any) -> bool:
    # Any URL but a file:// one (a local path) goes to blz as it is: an s3:// URL is served,
    # any other scheme refused there, never made an absolute local path here.
    return (
        isinstance(path, str)
        and re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", path) is not None
        and not path[:7].lower() == "file://"
    )


def _path_of(source: Any) -> str:
    path = getattr(source, "path", source)
    if _is_url(path):
        return path
    path = os.fspath(path)
    if path[:7].lower() == "file://":  # a local path, as blz reads a file:// URL
        rest = path[7:]
        path = urllib.parse.unquote(rest[9:] if rest.startswith("localhost/") else rest)
    return os.path.abspath(path)


def _open_raw(path: str, kind: str) -> Any:
    """A read-only handle on the dataset at ``path``: a local path or an ``s3://`` URL (a task
    on a worker reopens it by URL, with the worker's ``AWS_*`` environment)."""
    opened, raw = _blz.open(path, False)
    if opened != kind:
        e = ChangedError(f"{path}: is now a {opened} dataset, not the {kind} the graph was made for")
        e.filename = path
        raise e
    return raw


def _opened(path: str, write: bool = False) -> tuple[str, Any]:
    """The dataset at ``path`` opened once: ``(kind, raw handle)``, an array or a table."""
    kind, raw = _blz.open(path, write)
    if kind not in ("array", "table"):
        e = InvalidArgumentError(f"{path}: blz.dask reads blz arrays and tables, not a {kind} dataset")
        e.filename = path
        raise e
    return kind, raw


def _check_generation(path: str, raw: Any, generation: int) -> None:
    now = raw.layout()[1]
    if now != generation:
        e = ChangedError(
            f"{path}: changed since the dask graph was made (commit {generation} then, {now} now);"
            " make the graph again"
        )
        e.filename = path
        raise e


def _read_array_block(path: str, generation: int, key: tuple[slice, ...]) -> np.ndarray:
    from . import Array

    a = Array(_open_raw(path, "array"), "r")
    _check_generation(path, a._raw, generation)
    return np.asarray(a[key])


def _split(n: int, step: int) -> tuple[int, ...]:
    if n == 0:
        return (0,)
    return tuple(min(step, n - i) for i in range(0, n, step))


class _HostsOf:
    """The ``workers=`` annotation of a layer: a key's hosts (picklable, unlike a lambda)."""

    def __init__(self, hosts: Mapping[Any, list[str]]) -> None:
        self.hosts = dict(hosts)

    def __call__(self, key: Any) -> list[str]:
        return self.hosts.get(key, [])


def _graph(name: str, tasks: dict[Any, Any], hosts: dict[Any, list[str]]) -> Any:
    import dask
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    if any(hosts.values()):
        with dask.annotate(workers=_HostsOf(hosts), allow_other_workers=True):
            layer = MaterializedLayer(tasks)
    else:
        layer = MaterializedLayer(tasks)
    return HighLevelGraph({name: layer}, {name: set()})


def _array(path: str, raw: Any, locate: Locator | None, task_bytes: int) -> Any:
    import dask.array as da
    from dask.base import tokenize

    from . import Array

    a = Array(raw, "r")
    ident, generation, per_file = a._raw.layout()
    shape, chunkshape, dtype = a.shape, a.chunks, a.dtype
    grid = [max(1, math.ceil(s / c)) for s, c in zip(shape, chunkshape)]
    per_row = math.prod(grid[1:])
    file_rows = per_file // per_row * chunkshape[0] if per_file % per_row == 0 else 0
    row_bytes = max(1, math.prod(shape[1:]) * dtype.itemsize)
    # Whole chunk-rows per task, when files hold whole chunk-rows and one fits in a task.
    whole_rows = file_rows > 0 and chunkshape[0] * row_bytes <= task_bytes
    # An object store has no hosts to place tasks on: no annotations there.
    placed = locate(path) if locate is not None and not _is_url(path) else {}

    def hosts_of(f: int) -> list[str]:
        return list(placed.get(os.path.join("data", f"__{f + 1}__.bin"), []))

    if whole_rows:
        # Consecutive whole files on the same hosts, as many as fit in task_bytes (fewer,
        # larger tasks: the scheduler's cost is per task); or, when one file is more than
        # that, as many whole chunk-rows of one file as fit.
        nfiles = math.ceil(shape[0] / file_rows)
        step = file_rows
        if file_rows * row_bytes > task_bytes:
            step = max(1, task_bytes // row_bytes // chunkshape[0]) * chunkshape[0]
        # Grouped so that at least MIN_TASKS tasks remain, to keep every worker busy.
        per_task = max(1, min(task_bytes // (file_rows * row_bytes), nfiles // MIN_TASKS))
        sizes: list[int] = []
        file_of: list[int] = []
        f = 0
        while f < nfiles:
            group = 1
            while group < per_task and f + group < nfiles and hosts_of(f + group) == hosts_of(f):
                group += 1
            first, end = f * file_rows, min((f + group) * file_rows, shape[0])
            span = end - first if group > 1 else step
            for r in range(first, end, span):
                sizes.append(min(span, end - r))
                file_of.append(f)
            f += group
        chunks = (tuple(sizes) or (0,),) + tuple((s,) for s in shape[1:])
    else:
        chunks = tuple(_split(s, c) for s, c in zip(shape, chunkshape))
    name = "from-blz-" + tokenize(path, ident, generation, chunks)
    tasks: dict[Any, Any] = {}
    hosts: dict[Any, list[str]] = {}
    for idx in np.ndindex(*(len(c) for c in chunks)):
        key = (name, *idx)
        sel = tuple(
            slice(sum(c[:i]), sum(c[:i]) + c[i]) for c, i in zip(chunks, idx)
        )
        # dask's task tuple: (function, *arguments).
        tasks[key] = (_read_array_block, path, generation, sel)
        f = file_of[idx[0]] if whole_rows and file_of else int(np.ravel_multi_index(idx, grid)) // per_file
        hosts[key] = hosts_of(f)
    meta = np.empty((0,) * len(shape), dtype=dtype)
    return da.Array(_graph(name, tasks, hosts), name, chunks, meta=meta)


def _read_partition(
    rows: tuple[int, int],
    path: str,
    generation: int,
    leaves: list[tuple[str, str]],
    columns: list[str] | None = None,
) -> Any:
    """Rows ``rows`` of the table's ``leaves`` (``(path, kind)``), or of those named in
    ``columns`` when dask projects the dataframe onto fewer columns."""
    import pandas as pd

    from . import Table

    t = Table(_open_raw(path, "table"), "r")
    _check_generation(path, t._raw, generation)
    start, end = rows
    kinds = dict(leaves)
    names = [p for p, _ in leaves] if columns is None else list(columns)
    data = {p: t._read_leaf(p, kinds[p], start, end) for p in names}
    return pd.DataFrame(data, index=pd.RangeIndex(start, end))


def read_table(
    path: Any,
    columns: Sequence[str] | str | None = None,
    *,
    task_bytes: int = TASK_BYTES,
) -> Any:
    """The blz table at ``path`` (or a :class:`blz.Table`) as a ``dask.dataframe.DataFrame``:
    the leaf ``columns`` named (all when ``None``), nested ones flattened under their paths
    (``"pos/x"``), indexed by row number, one partition per row range. A range is one
    superchunk file of the first column named, fewer rows when that is more than
    ``task_bytes`` across the columns read."""
    path = _path_of(path)
    kind, raw = _opened(path)
    if kind != "table":
        raise InvalidArgumentError(f"{path}: an array, not a table (use blz.dask.from_blz)")
    return _table(path, raw, columns, task_bytes)


def _table(path: str, raw: Any, columns: Sequence[str] | str | None, task_bytes: int) -> Any:
    import dask.dataframe as dd

    from . import Table

    t = Table(raw, "r")
    _ident, generation, layout = t._raw.layout()
    leaves = dict(t._leaves)
    names = [columns] if isinstance(columns, str) else list(columns) if columns is not None else list(leaves)
    missing = [c for c in names if c not in leaves]
    if missing:
        raise InvalidArgumentError(f"{path}: no leaf column {missing[0]!r} (columns: {list(leaves)})")
    if not names:
        raise InvalidArgumentError(f"{path}: no columns to read")
    chunklen, per_file = next((cl, s) for p, cl, s in layout if p == names[0])
    chunklen = max(1, chunklen)
    row_bytes = sum(16 if leaves[c] in VAR_KINDS else np.dtype(leaves[c]).itemsize for c in names)
    rows = max(1, chunklen * max(1, per_file))
    if rows * row_bytes > task_bytes:
        rows = max(chunklen, task_bytes // row_bytes // chunklen * chunklen)
    n = t.nrows
    ranges = [(s, min(s + rows, n)) for s in range(0, n, rows)] or [(0, 0)]
    divisions = tuple(s for s, _ in ranges) + (n - 1,) if n else None
    cols = [(c, leaves[c]) for c in names]
    meta = _read_partition((0, 0), path, generation, cols)
    return dd.from_map(
        _read_partition,
        ranges,
        args=[path, generation, cols],
        meta=meta,
        divisions=divisions,
        label="from-blz",
        enforce_metadata=False,
    )


def from_blz(
    source: Any,
    columns: Sequence[str] | str | None = None,
    *,
    locate: Locator | None = file_hosts,
    task_bytes: int = TASK_BYTES,
) -> Any:
    """The blz dataset at ``source`` (a path, a :class:`blz.Array` or a :class:`blz.Table`) as
    a dask collection: an array as a ``dask.array.Array`` whose blocks are whole superchunk
    files along axis 0 (or blz chunks, see the module's notes), a table as a
    ``dask.dataframe.DataFrame`` of ``columns`` (:func:`read_table`).

    The array's name derives from the path, the dataset's identity and commit generation
    and the blocks, so the same dataset gives the same graph. ``locate`` maps the dataset's
    root to ``{file path relative to the root: [hosts]}`` (default :func:`file_hosts`);
    each read task is annotated with its file's hosts (``None``: no annotations; an ``s3://``
    URL gets none and its tasks reopen it by URL on the workers)."""
    path = _path_of(source)
    kind, raw = _opened(path)
    if kind == "table":
        return _table(path, raw, columns, task_bytes)
    if columns is not None:
        raise InvalidArgumentError(f"{path}: an array has no columns")
    return _array(path, raw, locate, task_bytes)


def _write_region(session_dir: str, first_row: int, block: np.ndarray, store: str) -> int:
    """A worker's task: rows ``first_row..`` of a staged write as the complete superchunk
    files holding them, written into the session directory (no lock, nothing else opened).
    Returns the number of files written."""
    data = np.ascontiguousarray(block, dtype=np.dtype(store))
    return len(_blz.staged_write_rows(session_dir, int(first_row), data))


def _check_source(x: Any) -> np.dtype:
    if x.ndim == 0:
        raise ValueError("blz arrays have at least one axis: reshape a 0-d array to (1,)")
    if any(math.isnan(n) for c in x.chunks for n in c):
        raise ValueError("blz.dask needs known chunk sizes (x.compute_chunk_sizes())")
    dt = np.dtype(x.dtype)
    if dt.names or dt.kind == "O":
        raise ValueError(f"blz arrays hold fixed-size elements, not {dt}")
    return dt


def _run_staged(x: Any, staged: Any, store: np.dtype) -> Any:
    """Writes ``x`` through the staged write ``staged``: the rows that fill the dataset's
    partly filled last superchunk file are computed and sent to this process, which writes
    them at the commit; every other superchunk file is encoded and written by a task of its
    own, wherever the scheduler runs it (the workers of a distributed cluster). The commit
    happens here, once, after every task succeeded; any failure aborts the write (nothing of
    it stays) and is re-raised. Returns what the commit returns."""
    import dask
    from dask.base import tokenize

    head_rows, start, end, unit = staged.geometry()
    n = int(x.shape[0])
    if end - start + head_rows != n:
        staged.abort()
        raise ValueError(f"the staged write expects {end - start + head_rows} rows, x has {n}")
    try:
        rows: list[int] = []
        if head_rows:
            rows.append(head_rows)
        rows += [min(unit, end - r) for r in range(start, end, unit)]
        if n:
            x = x.rechunk((tuple(rows),) + tuple((s,) for s in x.shape[1:]))
        blocks = list(x.to_delayed().ravel()) if n else []
        session = os.fspath(staged.dir)
        token = tokenize(session, x.name)
        writes = []
        for i, r in enumerate(range(start, end, unit)):
            block = blocks[i + (1 if head_rows else 0)]
            writes.append(
                dask.delayed(_write_region, pure=True)(
                    session, r, block, store.str, dask_key_name=f"blz-write-{token}-{i}"
                )
            )
        head_block = blocks[0] if head_rows else None
        head, *_ = dask.compute(head_block, *writes)
        if head is None:
            head = np.empty((0,), dtype=store)
        return staged.commit(np.ascontiguousarray(head, dtype=store))
    except BaseException as e:
        try:
            staged.abort()
        except Exception as cleanup:  # the next writer removes what is left; keep the cause
            e.add_note(f"blz: removing the staged write failed too: {cleanup}")
        raise


def to_blz(
    x: Any,
    path: str | os.PathLike[str],
    *,
    chunks: Any = None,
    codec: str = "lz4",
    clevel: int = 5,
    filter: str = "shuffle",  # noqa: A002 - blz.create's keyword
    checksum: str = "crc32",
    fill: Any = None,
    attrs: dict[str, Any] | None = None,
    overwrite: bool = False,
    superchunksize: int | None = None,
    mode: str = "w",
) -> Any:
    """Stores the dask array ``x`` as a new blz array at ``path`` (options as
    :func:`blz.create`) and returns it open for writing; ``mode="a"`` appends it to the
    array at ``path`` instead (:func:`append`; the create options are then ignored).

    Every superchunk file is encoded and written by a task of its own, where the scheduler
    runs it (in parallel on the workers of a distributed cluster, next to the computation
    of its rows), into a session directory of the dataset being built; this process then
    commits them all at once (``blz::array::staged``). The dataset appears whole, or not at
    all: a task that fails, a worker killed, or an exception here leaves nothing at ``path``
    (and an existing dataset there, replaced only with ``overwrite``, untouched). A task
    retried by the scheduler writes the same files again.

    ``path`` may be an ``s3://`` URL: each task then uploads its superchunk files as objects
    of the write's session on the store (with the worker's ``AWS_*`` environment), and this
    process checks them and commits once, with one conditional write of the dataset's state
    (``spec/object-store.md`` §8). Uploads of a failed or killed task, or of a write that
    never commits, are named by no state: ``blz gc`` removes them."""
    import json

    from . import Array, _fill_json
    from ._array import _json_default
    from ._index import native

    if mode == "a":
        return append(x, path)
    if mode != "w":
        raise ValueError(f"mode must be 'w' or 'a', not {mode!r}")
    path = os.fspath(path)
    dt = _check_source(x)
    store = native(dt)
    if chunks is not None:
        chunks = [int(chunks)] if np.ndim(chunks) == 0 else [int(c) for c in chunks]
    staged = _blz.RawArray.create_staged(
        path,
        store.str,
        [int(n) for n in x.shape[1:]],
        chunks,
        codec,
        int(clevel),
        filter,
        checksum,
        _fill_json(fill, dt),
        json.dumps(attrs, default=_json_default) if attrs else None,
        overwrite,
        None if superchunksize is None else int(superchunksize),
        int(x.shape[0]),
    )
    return Array(_run_staged(x, staged, store), "r+")


def append(x: Any, target: Any) -> Any:
    """Appends the dask array ``x`` along axis 0 to the blz array ``target`` (a path, opened
    for writing here, or a :class:`blz.Array` open for writing, whose writer lock serves)
    and returns the array.

    The rows that fill the array's partly filled last superchunk file come to this process,
    which writes them at the commit; every further superchunk file is written by a task of
    its own on the workers, and this process commits all of it in one transaction, holding
    the writer lock throughout. A failure anywhere leaves the array exactly as it was. An
    ``s3://`` target works as in :func:`to_blz`: one commit, all or nothing."""
    from . import Array
    from ._index import native

    dt = _check_source(x)
    opened = not isinstance(target, Array)
    if opened:
        path = _path_of(target)
        kind, raw = _opened(path, True)
        if kind != "array":
            raw.close()
            raise InvalidArgumentError(f"{path}: a table, not an array")
        a = Array(raw, "r+")
    else:
        a = target
        if not a._raw.writable:
            raise InvalidArgumentError(f"{a.path}: open for reading only (blz.open(path, 'r+'))")
    try:
        if tuple(x.shape[1:]) != tuple(a.shape[1:]):
            raise ValueError(
                f"rows of shape {tuple(x.shape[1:])} do not fit an array of shape {a.shape}"
            )
        if not np.can_cast(dt, a.dtype, casting="same_kind"):
            raise ValueError(f"cannot append {dt} to an array of {a.dtype}")
        staged = a._raw.begin_staged(int(x.shape[0]))
        try:
            _run_staged(x, staged, native(a.dtype))
        finally:
            a._refresh()
    except BaseException:
        if opened:
            a.close()  # the writer lock goes now, not when the traceback is freed
        raise
    return a
