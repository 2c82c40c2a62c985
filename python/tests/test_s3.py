"""Datasets on an S3-compatible object store through ``s3://`` URLs. ``tests/s3/run.sh``
runs these against a local moto server (it sets ``AWS_ENDPOINT_URL`` and the test bucket);
without an endpoint they are skipped."""

import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

import blz

pytestmark = pytest.mark.skipif(
    "AWS_ENDPOINT_URL" not in os.environ or "BLZ_S3_TEST_BUCKET" not in os.environ,
    reason="no S3 endpoint (AWS_ENDPOINT_URL): run through tests/s3/run.sh",
)


def url(name: str) -> str:
    return f"s3://{os.environ['BLZ_S3_TEST_BUCKET']}/py-{uuid.uuid4().hex}/{name}"


def test_array_round_trip():
    u = url("a.blz")
    data = np.arange(100_000, dtype=np.float64) * 0.5
    a = blz.create(u, data, chunks=(4096,), superchunksize=4)
    a.append(np.full(10, -1.0))
    a.attrs["units"] = "m"
    r = blz.open(u)
    assert isinstance(r, blz.Array)
    assert r.shape == (100_010,)
    np.testing.assert_array_equal(r[:100_000], data)
    np.testing.assert_array_equal(r[-10:], np.full(10, -1.0))
    assert r[12345] == data[12345]
    assert r.attrs["units"] == "m"


def test_table_round_trip():
    u = url("t.blz")
    cols = {"id": np.arange(50, dtype=np.int64), "x": np.linspace(0, 1, 50)}
    t = blz.create(u, cols)
    t.append({"id": np.array([50], dtype=np.int64), "x": np.array([2.0])})
    r = blz.open(u)
    assert isinstance(r, blz.Table)
    assert len(r) == 51
    np.testing.assert_array_equal(r["id"][:], np.arange(51))


def test_missing_dataset_is_not_found():
    with pytest.raises(blz.NotFoundError):
        blz.open(url("nothing.blz"))


def test_a_stale_writer_gets_a_conflict():
    u = url("c.blz")
    blz.create(u, np.zeros(10, dtype=np.int64))
    w = blz.open(u, "r+")
    # Another process commits first.
    code = f"import blz, numpy as np; blz.open({u!r}, 'r+').append(np.ones(5, dtype=np.int64))"
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(blz.ConflictError) as e:
        w.append(np.full(3, 7, dtype=np.int64))
    assert u in str(e.value)
    r = blz.open(u)
    np.testing.assert_array_equal(r[:], np.r_[np.zeros(10), np.ones(5)].astype(np.int64))
