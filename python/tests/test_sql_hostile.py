"""blz.sql as a hostile user tries it: statements that are not queries are refused before
anything runs, no query crashes the interpreter, and a query beside a writer sees one
commit (or raises blz's own error)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import blz


@pytest.fixture()
def table(tmp_path):
    p = tmp_path / "t.blz"
    blz.create(str(p), {"k": np.arange(100, dtype=np.int64), "x": np.linspace(0, 1, 100)}, chunks=16)
    return p


def run_python(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Runs `code` in a child interpreter: a crash there fails the test instead of pytest."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)


def test_statements_that_are_not_queries_are_refused_and_nothing_is_touched(tmp_path, table):
    victim = tmp_path / "existing.csv"
    victim.write_text("precious\n")
    out = tmp_path / "out.json"
    refused = [
        f"COPY (SELECT 'x' AS a) TO '{victim}' STORED AS CSV",
        f"COPY (SELECT * FROM t) TO '{out}' STORED AS JSON",
        f"COPY t TO '{out}'",
        f"CREATE EXTERNAL TABLE pw (a VARCHAR) STORED AS CSV LOCATION '{victim}'",
        "CREATE TABLE c AS SELECT * FROM t",
        "CREATE VIEW v AS SELECT * FROM t",
        "DROP TABLE t",
        "INSERT INTO t VALUES (1, 2.0)",
        "SET datafusion.execution.batch_size = 1",
        "RESET datafusion.execution.batch_size",
        "SELECT * INTO newt FROM t",
        f"EXPLAIN COPY (SELECT 1) TO '{out}'",
        f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}'",
        "BEGIN TRANSACTION",
    ]
    for q in refused:
        with pytest.raises(blz.SqlError):
            blz.sql(q, t=table).to_arrow()
    assert victim.read_text() == "precious\n"
    assert not out.exists()
    # The table is still there and whole; queries of every allowed kind run.
    assert blz.sql("SELECT count(*) AS n FROM t", t=table).to_pandas()["n"][0] == 100
    assert blz.sql("WITH w AS (SELECT k FROM t WHERE k < 5) SELECT count(*) AS n FROM w",
                   t=table).to_pandas()["n"][0] == 5
    assert blz.sql("VALUES (1), (2)").to_pandas().shape == (2, 1)
    assert len(blz.sql("EXPLAIN SELECT k FROM t", t=table).to_pandas()) > 0
    assert "t" in set(blz.sql("SHOW TABLES", t=table).to_pandas()["table_name"])


def test_a_nul_byte_in_an_error_is_an_exception_not_an_abort(tmp_path):
    p = tmp_path / "s.blz"
    r = run_python(f"""
        import blz, pyarrow
        blz.create({str(p)!r}, {{"s": ["a\\x00b", "c"]}})
        q = "SELECT CAST(s AS INT) AS i FROM t"
        try:
            blz.sql(q, t={str(p)!r}).to_pandas()
        except blz.Error as e:
            print("blz", type(e).__name__)
        try:
            pyarrow.table(blz.sql(q, t={str(p)!r}))
        except pyarrow.ArrowException as e:
            print("arrow", "\\\\0" in str(e))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["blz", "SqlError", "arrow", "True"], r.stdout + r.stderr


def test_deep_expressions_are_refused_on_any_stack(table):
    limit = 1000
    r = run_python(f"""
        import threading, blz, numpy as np
        threading.stack_size(256 * 1024)
        out = []
        def work():
            p = {str(table)!r}
            # At the limit: sum() over a chain of {limit - 1} terms nests {limit} deep, and runs.
            q = "SELECT sum(" + " + ".join(["k"] * {limit - 1}) + ") AS s FROM t"
            out.append(int(blz.sql(q, t=p).to_pandas()["s"][0]))
            for q in [
                "SELECT " + " + ".join(["k"] * {limit + 1}) + " AS s FROM t",
                "SELECT " + " + ".join(["k"] * 15000) + " AS s FROM t",
                "SELECT k FROM t WHERE " + " OR ".join(f"k = {{i}}" for i in range(20000)),
                "SELECT " + "(" * 5000 + "k" + ")" * 5000 + " FROM t",
            ]:
                try:
                    blz.sql(q, t=p).to_pandas()
                    out.append("ran")
                except blz.SqlError as e:
                    out.append("deep" if "too deep" in str(e) or "RecursionLimit" in str(e) else str(e))
        th = threading.Thread(target=work)
        th.start(); th.join()
        print(out)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str([sum(range(100)) * (limit - 1), "deep", "deep", "deep", "deep"]), (
        r.stdout + r.stderr)


WRITER = textwrap.dedent(
    """
    import sys, numpy as np, blz
    t = blz.open(sys.argv[1], mode="r+")
    n = len(t)
    for i in range(int(sys.argv[2])):
        t[0:n] = {"k": np.arange(n), "x": np.full(n, float(i % 7))}
    print("done")
    """
)


def test_a_query_beside_a_writer_sees_one_commit(tmp_path):
    p = tmp_path / "w.blz"
    n = 20_000
    blz.create(str(p), {"k": np.arange(n), "x": np.zeros(n)}, chunks=1000).close()
    w = subprocess.Popen([sys.executable, "-c", WRITER, str(p), "400"], stdout=subprocess.PIPE,
                         text=True)
    answered = changed = 0
    try:
        while w.poll() is None and answered + changed < 60:
            try:
                d = blz.sql("SELECT min(x) AS lo, max(x) AS hi, count(*) AS n FROM t",
                            t=str(p)).to_pandas()
            except blz.ChangedError:
                changed += 1  # blz's own error, never pyarrow's
                continue
            # Every row of one commit: one value of x throughout.
            assert d["lo"][0] == d["hi"][0] and d["n"][0] == n, d
            answered += 1
    finally:
        w.wait(timeout=120)
    assert answered > 0 and changed <= answered, (answered, changed)
