"""Comparisons against numpy models."""

import numpy as np


def same(got, want):
    """Equal shape, dtype and bytes (NaN payloads, -0.0 and byte order included)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), (got, want)
