"""Short reads (``a[i:i + 100]``) take their elements from the Blosc blocks that hold them
without decoding those blocks whole (walked back through a compressible stream's LZ4
matches, spec/blosc.md), or from a handle's small cache of decoded blocks when reads land
near each other: they must be numpy's elements, at every kind of place, with the cache on
or off, and no handle may serve a cached block after the chunk changed."""

import numpy as np
import pytest

import blz

N = 3_000_000


def data(kind: str) -> np.ndarray:
    if kind == "linspace":
        # 1 MiB blocks whose byte streams compress ~20:1: short reads walk them.
        return np.arange(N, dtype=np.float64) * (1.0 / (N - 1))
    # 128 KiB blocks of raw and barely compressed streams.
    return np.cumsum(np.random.default_rng(5).random(N) - 0.5)


@pytest.mark.parametrize("cache", [0, 2 << 20])
@pytest.mark.parametrize("kind", ["linspace", "walk"])
def test_short_reads_are_numpys_elements(tmp_path, kind, cache):
    d = data(kind)
    p = tmp_path / "a.blz"
    blz.create(p, d, chunks=1_000_000, codec="lz4", clevel=5, filter="shuffle").close()
    a = blz.open(p)
    assert a.block_cache() == 2 << 20
    assert a.block_cache(cache) == cache
    rng = np.random.default_rng(11)
    starts = list(rng.integers(0, N - 100, size=300))
    # Block edges (1 MiB = 131072 float64; 128 KiB = 16384), chunk edges and the ends.
    starts += [0, 16384 - 50, 131072 - 1, 131072 - 50, 1_000_000 - 50, 999_999, N - 100]
    for s in starts:
        s = int(s)
        for w in (1, 7, 100):
            np.testing.assert_array_equal(a[s : s + w], d[s : s + w], err_msg=f"{kind} {s}+{w}")
    # Strided and reversed short reads go through the same blocks.
    np.testing.assert_array_equal(a[123_457:124_000:7], d[123_457:124_000:7])
    np.testing.assert_array_equal(a[500_100:500_000:-3], d[500_100:500_000:-3])
    # Stepping through blocks in short reads (served from the cache when it is on).
    for s in range(131072 - 1000, 131072 + 1000, 90):
        np.testing.assert_array_equal(a[s : s + 100], d[s : s + 100], err_msg=f"{kind} {s}")


@pytest.mark.parametrize("cache", [0, 2 << 20, 64 << 20])
def test_no_handle_serves_elements_from_before_a_change(tmp_path, cache):
    d = data("linspace")
    p = tmp_path / "a.blz"
    blz.create(p, d, chunks=1_000_000, codec="lz4", clevel=5, filter="shuffle").close()
    r = blz.open(p)
    w = blz.open(p, "r+")
    r.block_cache(cache)
    w.block_cache(cache)
    rng = np.random.default_rng(3)
    places = [int(s) for s in rng.integers(0, N - 200, size=20)]

    def check(h):
        for s in places:  # twice in each block: the second read keeps the block
            np.testing.assert_array_equal(h[s : s + 100], d[s : s + 100])
            np.testing.assert_array_equal(h[s + 50 : s + 150], d[s + 50 : s + 150])
            np.testing.assert_array_equal(h[s + 1 : s + 101], d[s + 1 : s + 101])

    check(r)
    check(w)
    for round_ in range(3):
        for s in places:
            d[s : s + 100] = -np.arange(100) - 1000.0 * round_ - s
            w[s : s + 100] = d[s : s + 100]
        # Neighbours of a changed run, in the same block, change with it too.
        d[places[0] + 100 : places[0] + 200] += 1.5
        w[places[0] + 100 : places[0] + 200] = d[places[0] + 100 : places[0] + 200]
        check(r)  # another handle: shows the new commit
        check(w)  # the writing handle itself
    assert r.block_cache() == cache  # kept across the refreshes
    w.close()
    np.testing.assert_array_equal(r[:], d)
