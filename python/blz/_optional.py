"""The optional packages that blz's submodules build on, and the error that names the extra.

``blz.dask`` needs dask (``pip install 'blz[dask]'``), ``blz.xarray`` xarray
(``pip install 'blz[xarray]'``). ``import blz`` needs neither: the package loads those
submodules on first use (``blz.dask.from_blz(...)`` after a plain ``import blz``).
"""

from __future__ import annotations

import importlib.util


def missing(
    submodule: str, extra: str, package: str, cause: BaseException | None = None
) -> ImportError:
    """The error for ``submodule`` when ``package`` (or a package it needs, as ``cause``
    names it) is not installed: it says which extra of blz to install. A
    ``ModuleNotFoundError``, as Python's own."""
    name = (getattr(cause, "name", None) or package).split(".")[0]
    if name == package:
        what = f"{package}, which is not installed"
    else:
        what = f"{package}, which needs {name}, which is not installed"
    return ModuleNotFoundError(f"{submodule} needs {what}: pip install 'blz[{extra}]'", name=name)


def require(submodule: str, extra: str, package: str) -> None:
    """Raises :func:`missing`'s error unless ``package`` can be imported; imports nothing
    (``importlib.util.find_spec``), so that the submodule's own import stays quick."""
    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise missing(submodule, extra, package)
