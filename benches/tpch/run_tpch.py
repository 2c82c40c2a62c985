"""TPC-H through blz.sql, checked against duckdb and timed beside duckdb and DataFusion.

    python benches/tpch/run_tpch.py --sf 1            # generate, load, check, time
    python benches/tpch/run_tpch.py --sf 1 -q 1,6,18  # some queries only

Steps (each skipped when its output exists under --data, by default target/tpch):
1. ``tpchgen-cli parquet -s SF --output-dir DATA/sfSF/generated`` (tpchgen-cli 4.0.0:
   ``cargo install tpchgen-cli --version 4.0.0``, or ``pip install tpchgen-cli==4.0.0``, the
   same program built for PyPI).
2. The same rows as parquet with the decimal columns as float64 (DATA/sfSF/parquet): blz
   keeps decimals as float64, so every engine reads the same values of the same types.
   Row groups as tpchgen-cli wrote them.
3. Each table into a blz table (DATA/sfSF/blz/<table>.blz) with ``blz.create(path, columns)``
   (columns as numpy arrays: integers, float64, strings, and dates as ``datetime64[D]``).
   A blz that does not store ``datetime64`` yet gets the dates as int32 days since
   1970-01-01, and each query then reads its tables through a CAST to DATE (printed).
4. Each query (queries.sql) through every engine: one run to warm up, then the best of
   --repeat runs. Engines: blz (``blz.sql``), duckdb over the parquet (``SET threads``),
   DataFusion over the parquet (the ``datafusion`` Python package of blz's DataFusion
   major version) and DataFusion over the same rows in memory (record batches in as many
   partitions as threads: the engine's ceiling). Every answer is compared with duckdb's:
   numbers within a relative 1e-6, strings and dates exact, rows in the order the query
   gives (a query without ORDER BY: as sets).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_queries(sf: float) -> dict[int, str]:
    text = (HERE / "queries.sql").read_text()
    out = {}
    for m in re.finditer(r"^-- Q(\d+)\n(.*?)(?=^-- Q\d+\n|\Z)", text, re.S | re.M):
        q = m.group(2).strip().rstrip(";")
        out[int(m.group(1))] = q.replace("{q11_fraction}", repr(0.0001 / sf))
    assert sorted(out) == list(range(1, 23)), sorted(out)
    return out


# 1. generate ---------------------------------------------------------------------------

def generate(sf: float, gen_dir: Path) -> None:
    if all((gen_dir / f"{t}.parquet").exists() for t in TABLES):
        return
    exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    cmd = [exe, "parquet", "-s", str(sf), "--output-dir", str(gen_dir)]
    log("generating: " + " ".join(cmd))
    subprocess.run(cmd, check=True)


# 2. float64 parquet --------------------------------------------------------------------

def as_float_decimals(table: pa.Table) -> pa.Table:
    cols = []
    fields = []
    for f, c in zip(table.schema, table.columns):
        if pa.types.is_decimal(f.type):
            c = pc.cast(c, pa.float64())
            f = pa.field(f.name, pa.float64(), nullable=f.nullable)
        elif pa.types.is_string_view(f.type) or pa.types.is_large_string(f.type):
            c = pc.cast(c, pa.string())
            f = pa.field(f.name, pa.string(), nullable=f.nullable)
        cols.append(c)
        fields.append(pa.field(f.name, f.type, nullable=f.nullable))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def float_parquet(gen_dir: Path, pq_dir: Path) -> None:
    pq_dir.mkdir(parents=True, exist_ok=True)
    for t in TABLES:
        out = pq_dir / f"{t}.parquet"
        if out.exists():
            continue
        src = pq.ParquetFile(gen_dir / f"{t}.parquet")
        rows = src.metadata.row_group(0).num_rows if src.metadata.num_row_groups else None
        table = as_float_decimals(src.read())
        tmp = out.with_suffix(".tmp")
        pq.write_table(table, tmp, row_group_size=rows, compression="snappy")
        tmp.rename(out)
        log(f"parquet (decimals as float64): {out} ({table.num_rows} rows)")


# 3. blz tables -------------------------------------------------------------------------

def blz_columns(table: pa.Table, dates_as_days: bool) -> dict[str, np.ndarray]:
    cols: dict[str, np.ndarray] = {}
    for f, c in zip(table.schema, table.columns):
        c = c.combine_chunks()
        if pa.types.is_date32(f.type):
            if dates_as_days:
                cols[f.name] = c.view(pa.int32()).to_numpy()
            else:
                cols[f.name] = c.to_numpy(zero_copy_only=False).astype("datetime64[D]")
        elif pa.types.is_string(f.type):
            cols[f.name] = c.to_numpy(zero_copy_only=False).astype(object)
        else:
            cols[f.name] = c.to_numpy()
    return cols


def date_columns(pq_dir: Path) -> dict[str, list[str]]:
    out = {}
    for t in TABLES:
        schema = pq.read_schema(pq_dir / f"{t}.parquet")
        out[t] = [f.name for f in schema if pa.types.is_date32(f.type)]
    return out


def load_blz(pq_dir: Path, blz_dir: Path) -> bool:
    """The blz tables, made from the float64 parquet. True when dates are int32 days."""
    import blz

    blz_dir.mkdir(parents=True, exist_ok=True)
    marker = blz_dir / "DATES_AS_DAYS"
    for t in TABLES:
        path = blz_dir / f"{t}.blz"
        if path.exists():
            continue
        table = pq.read_table(pq_dir / f"{t}.parquet")
        t0 = time.perf_counter()
        days = marker.exists()
        if not days:
            try:
                blz.create(path, blz_columns(table, False), overwrite=True)
            except (TypeError, ValueError, blz.Error) as e:
                if not any(pa.types.is_date32(f.type) for f in table.schema):
                    raise
                log(f"blz does not store datetime64[D] here ({e}): dates as int32 days")
                marker.touch()
                days = True
                if path.exists():
                    shutil.rmtree(path)
        if days:
            blz.create(path, blz_columns(table, True), overwrite=True)
        log(f"blz: {path} ({table.num_rows} rows, {time.perf_counter() - t0:.1f} s)")
    return marker.exists()


def with_dates(query: str, dates: dict[str, list[str]], pq_dir: Path) -> str:
    """`query` reading each table through a CAST of its int32 day columns to DATE."""
    import pyarrow.parquet as pq

    ctes = []
    for t in TABLES:
        if not re.search(rf"\b{t}\b", query) or not dates[t]:
            continue
        names = [f.name for f in pq.read_schema(pq_dir / f"{t}.parquet")]
        cols = ", ".join(
            f"CAST({n} AS DATE) AS {n}" if n in dates[t] else n for n in names
        )
        ctes.append(f"{t} AS (SELECT {cols} FROM {t}_days)")
    if not ctes:
        return query
    if query.lstrip().lower().startswith("with "):
        return "WITH " + ", ".join(ctes) + ", " + query.lstrip()[5:]
    return "WITH " + ", ".join(ctes) + " " + query


# 4. engines ----------------------------------------------------------------------------

class Blz:
    name = "blz"

    def __init__(self, blz_dir: Path, days: bool, dates: dict[str, list[str]], pq_dir: Path):
        import blz

        self.blz = blz
        suffix = "_days" if days else ""
        self.tables = {
            f"{t}{suffix if dates[t] else ''}": str(blz_dir / f"{t}.blz") for t in TABLES
        }
        self.days = days
        self.dates = dates
        self.pq_dir = pq_dir

    def run(self, q: str) -> pa.Table:
        if self.days:
            q = with_dates(q, self.dates, self.pq_dir)
        return self.blz.sql(q, **self.tables).to_arrow()


class DuckDB:
    name = "duckdb"

    def __init__(self, pq_dir: Path, threads: int):
        import duckdb

        self.con = duckdb.connect()
        self.con.execute(f"SET threads={threads}")
        for t in TABLES:
            self.con.execute(
                f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{pq_dir / (t + '.parquet')}')"
            )

    def run(self, q: str) -> pa.Table:
        return self.con.sql(q).to_arrow_table()


class DataFusionParquet:
    name = "df-parquet"

    def __init__(self, pq_dir: Path, threads: int):
        import datafusion

        cfg = datafusion.SessionConfig().with_target_partitions(threads)
        self.ctx = datafusion.SessionContext(cfg)
        for t in TABLES:
            self.ctx.register_parquet(t, str(pq_dir / f"{t}.parquet"))

    def run(self, q: str) -> pa.Table:
        return self.ctx.sql(q).to_arrow_table()


class DataFusionMemory:
    name = "df-memory"

    def __init__(self, pq_dir: Path, threads: int):
        import datafusion

        cfg = datafusion.SessionConfig().with_target_partitions(threads)
        self.ctx = datafusion.SessionContext(cfg)
        for t in TABLES:
            table = pq.read_table(pq_dir / f"{t}.parquet")
            batches = table.to_batches(max_chunksize=8192)
            parts = [batches[i::threads] for i in range(threads)]
            self.ctx.register_record_batches(t, [p for p in parts if p] or [[]])

    def run(self, q: str) -> pa.Table:
        return self.ctx.sql(q).to_arrow_table()


# 5. answers ----------------------------------------------------------------------------

def rows_of(t: pa.Table) -> list[tuple]:
    cols = [c.to_pylist() for c in t.columns]
    return list(zip(*cols)) if cols else []


def same_value(a, b, rel: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (datetime.date, datetime.datetime)) or isinstance(
        b, (datetime.date, datetime.datetime)
    ):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if hasattr(a, "__float__") and hasattr(b, "__float__"):
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return math.isclose(x, y, rel_tol=rel, abs_tol=1e-9)
    return a == b


def compare(got: pa.Table, want: pa.Table, ordered: bool, rel: float = 1e-6) -> str | None:
    """None when `got` is duckdb's answer `want`, else what differs."""
    if got.num_columns != want.num_columns:
        return f"{got.num_columns} columns where duckdb gives {want.num_columns}"
    g, w = rows_of(got), rows_of(want)
    if len(g) != len(w):
        return f"{len(g)} rows where duckdb gives {len(w)}"
    if not ordered:
        key = lambda r: tuple((x is None, str(x)) for x in r)  # noqa: E731
        g, w = sorted(g, key=key), sorted(w, key=key)
    for i, (rg, rw) in enumerate(zip(g, w)):
        for j, (a, b) in enumerate(zip(rg, rw)):
            if not same_value(a, b, rel):
                return f"row {i} column {want.column_names[j]}: {a!r} where duckdb gives {b!r}"
    return None


# 6. timing -----------------------------------------------------------------------------

def timed(engine, q: str, repeat: int) -> tuple[float, pa.Table]:
    result = engine.run(q)  # warm-up: caches, the first open of each dataset
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = engine.run(q)
        best = min(best, time.perf_counter() - t0)
    return best, result


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    ap.add_argument("--data", type=Path, default=ROOT / "target" / "tpch")
    ap.add_argument("-q", "--queries", default="", help="comma-separated numbers (default all)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per query (best kept)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument(
        "--engines", default="blz,duckdb,df-parquet,df-memory",
        help="the engines to time (duckdb always answers, as the reference)",
    )
    args = ap.parse_args()
    sf_name = f"sf{args.sf:g}"
    base = args.data / sf_name
    gen_dir, pq_dir, blz_dir = base / "generated", base / "parquet", base / "blz"

    generate(args.sf, gen_dir)
    float_parquet(gen_dir, pq_dir)
    names = [e for e in args.engines.split(",") if e]
    days = load_blz(pq_dir, blz_dir) if "blz" in names else False
    dates = date_columns(pq_dir)
    queries = read_queries(args.sf)
    wanted = [int(x) for x in args.queries.split(",") if x] or sorted(queries)

    import datafusion
    import duckdb

    threads = "-"
    if "blz" in names:
        import blz

        threads = blz.num_threads()
    log(
        f"TPC-H SF{args.sf:g}, {args.threads} threads: blz (threads {threads}), "
        f"duckdb {duckdb.__version__}, datafusion (Python) "
        f"{datafusion.__version__}; dates in blz as {'int32 days + CAST' if days else 'datetime64[D]'}"
    )
    engines = {"duckdb": DuckDB(pq_dir, args.threads)}
    if "blz" in names:
        engines["blz"] = Blz(blz_dir, days, dates, pq_dir)
    if "df-parquet" in names:
        engines["df-parquet"] = DataFusionParquet(pq_dir, args.threads)
    if "df-memory" in names:
        log("df-memory: reading the parquet into memory")
        engines["df-memory"] = DataFusionMemory(pq_dir, args.threads)
    order = [e for e in ["blz", "duckdb", "df-parquet", "df-memory"] if e in engines]

    times: dict[str, dict[int, float]] = {e: {} for e in order}
    wrong: list[str] = []
    rows: dict[int, int] = {}
    for n in wanted:
        q = queries[n]
        # Every query with ORDER BY has it at the top (the others give one row).
        ordered = re.search(r"\border\s+by\b", q, re.I) is not None
        results = {}
        for e in order:
            try:
                t, r = timed(engines[e], q, args.repeat)
            except Exception as exc:  # an engine's failure is reported, the run goes on
                wrong.append(f"Q{n} {e}: {type(exc).__name__}: {exc}")
                times[e][n] = float("nan")
                continue
            times[e][n] = t
            results[e] = r
        want = results.get("duckdb")
        rows[n] = want.num_rows if want is not None else -1
        for e, r in results.items():
            if e == "duckdb" or want is None:
                continue
            diff = compare(r, want, ordered)
            if diff:
                wrong.append(f"Q{n} {e}: {diff}")
        log(
            f"Q{n:<2} " + "  ".join(f"{e} {times[e][n] * 1e3:8.1f} ms" for e in order)
        )

    # The table: times, then each peer's time over blz's (above 1: blz is faster).
    peers = [e for e in order if e != "blz"]
    head = f"{'query':>5} {'rows':>6} " + " ".join(f"{e + ' ms':>14}" for e in order)
    if "blz" in order:
        head += " " + " ".join(f"{e + '/blz':>15}" for e in peers)
    print(head)
    ratios: dict[str, list[float]] = {e: [] for e in peers}
    for n in wanted:
        line = f"{'Q' + str(n):>5} {rows[n]:>6} " + " ".join(
            f"{times[e][n] * 1e3:>14.1f}" for e in order
        )
        if "blz" in order:
            for e in peers:
                r = times[e][n] / times["blz"][n]
                ratios[e].append(r)
                line += f" {r:>15.2f}"
        print(line)
    gm = {e: geomean([times[e][n] for n in wanted]) for e in order}
    line = f"{'geo':>5} {'':>6} " + " ".join(f"{gm[e] * 1e3:>14.1f}" for e in order)
    if "blz" in order:
        line += " " + " ".join(f"{geomean(ratios[e]):>15.2f}" for e in peers)
    print(line)
    if wrong:
        print(f"\n{len(wrong)} answers differ from duckdb's or failed:")
        for w in wrong:
            print("  " + w)
    else:
        print(f"\nevery answer ({len(wanted)} queries x {len(order) - 1} engines) equals duckdb's")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
