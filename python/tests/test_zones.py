"""Time-zone-aware datetime columns (spec/table.md §2.3): pandas' ``datetime64[unit, tz]``
stored as UTC instants with the zone in the field, given back exactly by ``to_pandas()``
(pandas itself the oracle), as UTC ``datetime64`` in numpy records, as zoned Arrow
timestamps through the C stream (pyarrow the oracle), and in SQL as TIMESTAMP WITH TIME ZONE
answering as duckdb does with the session in the column's zone."""

import datetime as dt
import zoneinfo

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import blz

ZONES = [
    "UTC",
    "Europe/Paris",
    "America/New_York",
    zoneinfo.ZoneInfo("Asia/Kolkata"),
    dt.timezone(dt.timedelta(hours=5, minutes=30)),
    dt.timezone(-dt.timedelta(hours=8)),
    dt.timezone.utc,
]


def _frame(tz, unit: str, n: int = 300, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    # Instants spread over 2019-2021 (two daylight-saving changes each year), some NaT.
    base = np.datetime64("2019-01-01T00:00:00", "s").astype(f"M8[{unit}]")
    step = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    offs = rng.integers(0, 3 * 365 * 86_400, n) * step + rng.integers(0, step, n)
    when = base + offs.astype(f"m8[{unit}]")
    when[rng.random(n) < 0.1] = np.datetime64("NaT")
    utc = pd.Series(when).dt.tz_localize("UTC")
    return pd.DataFrame(
        {
            "t": utc.dt.tz_convert(tz),
            "x": rng.integers(0, 100, n),
            "naive": pd.Series(when),
        }
    )


@pytest.mark.parametrize("tz", ZONES, ids=str)
@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_frames_round_trip_with_their_zone(tmp_path, tz, unit):
    df = _frame(tz, unit)
    t = blz.create(tmp_path / "z.blz", df, chunks=64)
    back = blz.open(tmp_path / "z.blz").to_pandas()
    pd.testing.assert_frame_equal(back, df)
    assert back["t"].dtype == df["t"].dtype
    # Records show the UTC instants as numpy datetime64 of the unit.
    rec = t[0 : len(df)]
    assert rec["t"].dtype == np.dtype(f"M8[{unit}]")
    want = df["t"].dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
    np.testing.assert_array_equal(rec["t"], want)
    # The Arrow C stream carries the zone: pyarrow reads what from_pandas makes.
    got = pa.table(t)
    ref = pa.Table.from_pandas(df, preserve_index=False)
    assert got.schema.field("t").type == ref.schema.field("t").type
    assert got.column("t").to_pylist() == ref.column("t").to_pylist()
    assert got.to_pandas()["t"].dtype == df["t"].dtype
    info = t.info()["columns"]["t"]
    assert info["timezone"] == str(ref.schema.field("t").type.tz)
    assert "timezone" not in t.info()["columns"]["naive"]


def test_appending_converts_to_the_instants(tmp_path):
    df = _frame("Europe/Paris", "ns", n=50)
    t = blz.create(tmp_path / "a.blz", df)
    more = _frame("Europe/Paris", "ns", n=30, seed=8)
    # The same instants in another zone are the same values.
    more["t"] = more["t"].dt.tz_convert("Asia/Tokyo")
    t.append(more)
    both = pd.concat([df, _frame("Europe/Paris", "ns", n=30, seed=8)], ignore_index=True)
    pd.testing.assert_frame_equal(t.to_pandas(), both)


def test_nullable_zoned_column_keeps_missing_values(tmp_path):
    s = pd.Series(pd.to_datetime(["2020-01-01 10:00", None, "2020-06-01 12:30"])).dt.tz_localize("Europe/Paris")
    df = pd.DataFrame({"t": s, "n": pd.array([1, None, 3], dtype="Int64")})
    t = blz.create(tmp_path / "m.blz", df)
    pd.testing.assert_frame_equal(t.to_pandas(), df)
    assert pa.table(t).column("t").null_count == 1


def test_an_unrecordable_zone_is_refused_naming_the_column(tmp_path):
    # An offset of seconds: neither pyarrow's form nor Arrow's.
    s = pd.Series([pd.Timestamp("2020-01-01")]).dt.tz_localize(dt.timezone(dt.timedelta(seconds=30)))
    with pytest.raises(TypeError, match="column 'odd'"):
        blz.create(tmp_path / "w.blz", pd.DataFrame({"odd": s}))
    assert not (tmp_path / "w.blz").exists()


QUERIES = [
    "SELECT count(*) FROM t WHERE t >= '2020-03-29T01:30:00Z'",
    "SELECT count(*) FROM t WHERE t < '2020-07-01T00:00:00+02:00'",
    "SELECT count(*) FROM t WHERE t IS NULL",
    "SELECT CAST(EXTRACT(hour FROM t) AS BIGINT) AS h, count(*) AS c FROM t GROUP BY 1 ORDER BY 1 NULLS LAST",
    "SELECT CAST(EXTRACT(day FROM t) AS BIGINT) AS d, count(*) AS c FROM t GROUP BY 1 ORDER BY 1 NULLS LAST",
    "SELECT count(DISTINCT date_trunc('day', t)) FROM t",
    "SELECT count(DISTINCT date_trunc('month', t)) FROM t",
    # A string with an offset is an instant (DataFusion types a TIMESTAMP or TIMESTAMPTZ
    # literal without a zone: it then reads as a local time of the column's zone).
    "SELECT min(t) >= '2019-01-01T00:00:00Z', max(t) < '2022-01-01T00:00:00+01:00' FROM t",
]


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/New_York"])
def test_sql_answers_as_duckdb_in_the_zone(tmp_path, zone):
    duckdb = pytest.importorskip("duckdb")
    df = _frame(zone, "us", n=2000, seed=11)[["t", "x"]]
    t = blz.create(tmp_path / "q.blz", df, chunks=128)
    con = duckdb.connect()
    # duckdb shows TIMESTAMPTZ in the session's zone; DataFusion in the column's.
    con.execute(f"SET TimeZone = '{zone}'")
    con.register("t", pa.Table.from_pandas(df, preserve_index=False))
    for q in QUERIES:
        want = con.execute(q).fetchall()
        got = blz.sql(q, t=t).to_arrow()
        rows = list(zip(*[got.column(i).to_pylist() for i in range(got.num_columns)]))
        assert rows == [tuple(r) for r in want], q
    # The answers come from the chunks' statistics too: a range that excludes every chunk.
    got = blz.sql("SELECT count(*) FROM t WHERE t > '2030-01-01T00:00:00Z'", t=t).to_arrow()
    assert got.column(0).to_pylist() == [0]
