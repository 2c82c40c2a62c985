"""Comparisons against numpy models."""

import os

import numpy as np


def same(got, want):
    """Equal shape, dtype and bytes (NaN payloads, -0.0 and byte order included)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), (got, want)


def die_once(block, marker=None, block_info=None):
    """A dask block function that kills its worker process the first time it runs for block 3
    (a marker file says it did), after other tasks wrote their files."""
    import signal
    import time

    if block_info[0]["chunk-location"][0] == 3 and not os.path.exists(marker):
        time.sleep(0.5)
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return block
