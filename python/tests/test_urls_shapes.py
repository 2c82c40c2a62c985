"""Names and shapes blz cannot serve are refused where they are given: a URL of a scheme
blz does not serve is an error (never a local directory named ``gs:``), a ``file://`` URL is
a local path, a ``memory://`` URL a dataset in memory, and a shape numpy cannot hold is refused at create (even beside a zero extent,
as numpy refuses it) and at open."""

import json
import os

import numpy as np
import pytest

import blz


@pytest.mark.parametrize("url", ["gs://bucket/x.blz", "mem://x.blz", "https://example.com/x.blz"])
def test_urls_of_schemes_blz_does_not_serve_are_refused(tmp_path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    scheme = url.split("://")[0]
    for attempt in (
        lambda: blz.create(url, np.arange(3)),
        lambda: blz.create(url, np.zeros(2, dtype=[("x", "i8")])),
        lambda: blz.open(url),
        lambda: blz.open(url, "r+"),
        lambda: blz.build_layer(url, [(1,), (2,)]),
    ):
        with pytest.raises(blz.UnsupportedError, match=f"{scheme}://"):
            attempt()
    assert os.listdir(tmp_path) == []


def test_memory_urls_are_served_from_memory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = blz.create("memory://urls_shapes.blz", np.arange(3))
    assert a.path == "memory://urls_shapes.blz" and a.in_memory
    assert os.listdir(tmp_path) == []
    del a
    blz.remove("memory://urls_shapes.blz")


def test_file_urls_are_local_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "a b.blz"
    blz.create(p.as_uri(), np.arange(5.0))
    assert (p / "meta" / "sizes").is_file()
    assert blz.open(p.as_uri())[:].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    blz.create("file://rel.blz", np.zeros(2, dtype=[("x", "i8")]))
    assert len(blz.open(str(tmp_path / "rel.blz"))) == 2


@pytest.mark.parametrize("shape", [(0, 2**63), (0, 2**64 - 1), (0, 2**40, 2**40), (2**63, 0)])
def test_shapes_numpy_cannot_hold_are_refused_at_create(tmp_path, shape):
    with pytest.raises(ValueError):
        np.empty(shape, dtype=np.uint8)  # numpy's own rule
    p = tmp_path / "z.blz"
    with pytest.raises(ValueError, match="numpy's limit"):
        blz.create(str(p), shape=shape, dtype=np.uint8)
    assert not p.exists()


def test_a_shape_numpy_cannot_hold_is_refused_at_open(tmp_path):
    p = tmp_path / "z.blz"
    blz.create(str(p), shape=(0, 4), dtype=np.float64, chunks=(4, 4))
    sizes = p / "meta" / "sizes"
    doc = json.loads(sizes.read_text())
    doc["shape"] = [0, 2**63]
    sizes.write_text(json.dumps(doc))
    with pytest.raises(blz.CorruptionError, match="numpy's limit"):
        blz.open(str(p))
