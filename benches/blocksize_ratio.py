#!/usr/bin/env python3
"""What 128 KiB Blosc blocks cost in compression ratio against c-blosc's own choice (1 MiB
for most of these), for kinds of data a store holds, beside the ratio of the chunk's first
32 KiB compressed alone: the probe blz's automatic block size judges a chunk by
(spec/blosc.md, "How blz chooses the block size it writes"). Chunks of 1e6 elements,
c-blosc 1.x through python-blosc, lz4 clevel 5 byte shuffle.

    pip install blosc numpy
    python benches/blocksize_ratio.py
"""

import blosc
import numpy as np

N = 1_000_000
PROBE = 32 * 1024
SMALL = 128 * 1024


def cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)

    def walk(dt):
        return np.cumsum(rng.random(N) - 0.5).astype(dt)

    sin = np.sin(np.arange(N) / 1000)
    image = np.add.outer(np.arange(1000), np.arange(1000)) // 8 % 256
    return {
        "walk f64": walk(np.float64),
        "walk f32": walk(np.float32),
        "linspace f64": np.linspace(0, 1, N),
        "noise f64 round3": np.round(rng.normal(size=N), 3),
        "int64 0..1000": rng.integers(0, 1000, N).astype(np.int64),
        "int32 0..1e6": rng.integers(0, 10**6, N).astype(np.int32),
        "timestamps i64": np.cumsum(rng.integers(0, 100, N)).astype(np.int64) + 1_600_000_000_000,
        "sin+noise f64": sin + rng.normal(scale=1e-3, size=N),
        "sin+noise f32": (sin + rng.normal(scale=1e-3, size=N)).astype(np.float32),
        "uint8 image": (image + rng.integers(0, 4, (1000, 1000))).astype(np.uint8).ravel(),
        "int16 audio": (3000 * np.sin(np.arange(N) / 20) + rng.normal(scale=300, size=N)).astype(np.int16),
        "int64 ids": np.arange(N, dtype=np.int64) * 7 + 1000,
        "bool sparse": rng.random(N) < 0.01,
        "f64 uniform": rng.random(N),
        "zeros+spikes f64": np.where(rng.random(N) < 0.001, rng.random(N), 0.0),
    }


def ratio(raw: bytes, typesize: int, forced: int) -> tuple[float, int]:
    """Compression ratio and the block size c-blosc used."""
    blosc.set_blocksize(forced)
    try:
        c = blosc.compress(raw, typesize, 5, blosc.SHUFFLE, "lz4")
        return len(raw) / len(c), blosc.get_cbuffer_sizes(c)[2]
    finally:
        blosc.set_blocksize(0)


def main() -> None:
    print(f"{'data':<18} {'ts':>3} {'probe':>7} {'c-blosc':>8} {'blocks':>8} {'128 KiB':>8} "
          f"{'lost':>6}  blz writes")
    for name, a in cases().items():
        raw, ts = a.tobytes(), a.dtype.itemsize
        probe, _ = ratio(raw[: PROBE // ts * ts], ts, 0)
        own, own_bs = ratio(raw, ts, 0)
        # c-blosc multiplies a forced block size by the typesize where blocks split.
        small, small_bs = ratio(raw, ts, SMALL // ts if ts <= 16 else SMALL)
        assert small_bs <= SMALL
        pick = "c-blosc's" if own_bs <= SMALL or probe >= 1.6 else "128 KiB"
        print(f"{name:<18} {ts:>3} {probe:>7.2f} {own:>8.2f} {own_bs // 1024:>5} KiB {small:>8.2f} "
              f"{100 * (1 - small / own):>5.1f}%  {pick}")


if __name__ == "__main__":
    main()
