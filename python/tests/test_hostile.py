"""Hostile sizes and a writer that never stops: clear errors in bounded memory, and reads that
show one commit whole."""

import os
import re
import resource
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import blz


def _in_a_capped_process(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter limited to 4 GiB of address space, so that an
    allocation that grows with a declared size fails there, not on the machine."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=cap,
    )


def test_huge_creates_and_resizes_are_value_errors_in_bounded_memory(tmp_path):
    r = _in_a_capped_process(
        f"""
        import numpy as np, blz
        d = {str(tmp_path)!r}
        for shape in (2**60, (1000, 2**40), (10**9, 10**9)):
            try:
                blz.create(d + "/e.blz", shape=shape, dtype="f8")
            except ValueError as e:
                print("refused", shape, e)
            else:
                raise SystemExit(f"created {{shape}}")
        a = blz.create(d + "/r.blz", np.zeros((2, 6)), chunks=(64, 4))
        for n in (2**63, 10**15):
            try:
                a.resize(n)
            except ValueError as e:
                print("refused", n, e)
            else:
                raise SystemExit(f"resized to {{n}}")
        assert a.shape == (2, 6), a.shape
        print("ok")
        """
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("ok"), r.stdout
    assert "numpy's limit" in r.stdout and "1048576" in r.stdout, r.stdout


def test_a_grow_within_the_limits_reads_back_as_fill(tmp_path):
    a = blz.create(tmp_path / "g.blz", np.arange(5, dtype="i4"), chunks=10, fill=-1)
    a.resize(1_000_000)
    r = blz.open(tmp_path / "g.blz")
    assert r.shape == (1_000_000,)
    np.testing.assert_array_equal(r[3:8], [3, 4, -1, -1, -1])
    assert (r[5:] == -1).all()


_WRITER = """
import sys, numpy as np, blz
p, n = sys.argv[1], int(sys.argv[2])
a = blz.open(p, mode="r+")
base = np.arange(len(a)) % 3
for k in range(1, n + 1):
    a[:] = k + base
print("done", flush=True)
"""


def test_reads_in_another_process_never_mix_two_commits(tmp_path):
    # The case: a writer process rewrites every element in place, over and over;
    # this process reads the whole array meanwhile. Each read holds one k.
    p = tmp_path / "w.blz"
    n = 2_000_000
    blz.create(p, np.arange(n, dtype="i8") % 3, chunks=20000, superchunksize=8).close()
    w = subprocess.Popen([sys.executable, "-c", _WRITER, str(p), "60"],
                         stdout=subprocess.PIPE, text=True)
    reads = 0
    base = np.arange(n) % 3
    try:
        while w.poll() is None:
            v = blz.open(p)[...]
            ks = np.unique(v - base)
            assert len(ks) == 1, f"a read held values of commits {ks}"
            reads += 1
    finally:
        w.wait(timeout=300)
    assert w.returncode == 0
    assert reads > 0


def test_reads_in_threads_never_mix_two_commits(tmp_path):
    import threading

    p = tmp_path / "t.blz"
    n = 400_000
    t = blz.create(p, {"a": np.arange(n, dtype="i8") % 3, "b": np.arange(n, dtype="i8") % 3},
                   chunks=10_000)
    base = np.arange(n) % 3
    done = threading.Event()
    seen = []

    def read() -> None:
        r = blz.open(p)
        while not done.is_set():
            rows = r[:]
            ks = np.unique(np.concatenate([rows["a"] - base, rows["b"] - base]))
            seen.append(len(ks))

    threads = [threading.Thread(target=read) for _ in range(2)]
    for th in threads:
        th.start()
    try:
        for k in range(1, 30):
            t[0:n] = {"a": k + base, "b": k + base}
    finally:
        done.set()
        for th in threads:
            th.join()
    assert seen and max(seen) == 1, f"reads mixed commits: {sorted(set(seen))}"


def test_long_where_expressions_are_blz_errors_not_a_crash(tmp_path):
    # The expressions killed Python with SIGSEGV (the parser and the evaluator
    # recursed once per operator of a chain). In a child, so that a crash fails this test
    # rather than killing pytest.
    r = _in_a_capped_process(
        f"""
        import numpy as np, blz
        d = {str(tmp_path)!r}
        t = blz.create(d + "/t.blz", {{"x": np.arange(100, dtype="i8")}}, chunks=16)
        a = blz.create(d + "/a.blz", np.arange(100, dtype="i8"), chunks=16)
        exprs = [
            "x" + " + x" * 15000 + " > 1",
            "(x > 1)" + " & (x > 1)" * 20000,
            " | ".join(f"(x == {{i}})" for i in range(20000)),
            "(" * 100000 + "x > 1" + ")" * 100000,
            "-" * 100000 + "x > 1",
        ]
        for e in exprs:
            for q in (t.where, t.where_rows, a.where, a.where_indices):
                try:
                    q(e)
                except blz.Error as err:
                    assert isinstance(err, blz.InvalidArgumentError), type(err)
                    assert "too deep" in str(err) or "too long" in str(err), str(err)[:200]
                else:
                    raise SystemExit(f"accepted {{e[:40]}}...")
        # Within the limits: a thousand alternatives (chains of `|` are balanced).
        alts = " | ".join(f"(x == {{3 * i}})" for i in range(1000))
        assert list(a.where_indices(alts)) == list(range(0, 100, 3))
        print("ok")
        """
    )
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    assert r.stdout.strip().endswith("ok"), r.stdout


def test_where_compares_uint64_exactly_and_negation_wraps(tmp_path):
    # 2**53 and 2**53 + 1 are one float64 but two integers; -int64.min is int64.min (numpy).
    u = np.array([2**53, 2**53 + 1], dtype="u8")
    t = blz.create(tmp_path / "u.blz", {"u": u})
    np.testing.assert_array_equal(t.where_rows("u == 9007199254740993"), [1])
    x = np.array([np.iinfo("i8").min] * 4 + [5] * 4, dtype="i8")
    a = blz.create(tmp_path / "x.blz", x, chunks=4)
    with np.errstate(over="ignore"):
        want = np.flatnonzero(-x < 0)
    np.testing.assert_array_equal(a.where_indices("-x < 0"), want)


def _numpy_where(expr, cols):
    """numpy's rows for ``expr`` over ``cols``, or None where numpy raises OverflowError."""
    with np.errstate(all="ignore"):
        try:
            return np.flatnonzero(eval(expr, {}, dict(cols)))  # noqa: S307 (test expressions)
        except OverflowError:
            return None


_INTEGER_CASES = {
    "ux": (
        {
            "u": np.array([2**53, 2**53 + 1, 0, 2**64 - 1, 1, 2, 3, 4], dtype="u8"),
            "x": np.array([np.iinfo("i8").min] * 4 + [5] * 4, dtype="i8"),
        },
        [
            "-u < 0",
            "u - 1 > 100",
            "u * 2 == 18446744073709551614",
            "u * 2 < 5",
            "u % 3 == 0",
            "u == 18446744073709551616",
            "u < 18446744073709551616",
            "u != -1",
            "x > -9223372036854775809",
            "x < 170141183460469231731687303715884105727",
            "x == -170141183460469231731687303715884105728",
            "u + x > 0",
            "u + x == -9214364837600034816.0",
            "u == 18446744073709551616 - 1",
            "18446744073709551615 < -u / 1",
            "u + (-1) > 0",
            "u * 18446744073709551616 > 0",
        ],
    ),
    "small": (
        {
            "a": np.array([0, 1, 254, 255, 200, 7], dtype="u1"),
            "b": np.array([5, -128, 2, 127, 100, -1], dtype="i1"),
            "c": np.array([1, 70000, 2**32 - 1, 0, 5, 6], dtype="u4"),
            "s": np.array([32767, -1, 0, 1, 2, 3], dtype="i2"),
        },
        [
            "a + 1 < 2",
            "b * 100 > 0",
            "-b < 0",
            "-a > 200",
            "b - 1 > 0",
            "a * a == 4",
            "a + b == 300",
            "b + s < 0",
            "c * 2 == 4294967294",
            "c + b == 4294967294",
            "a / 300 < 0.5",
            "a < 300",
            "a == -1",
            "a + 1.5 > 255",
            "a + 300 > 0",
            "a + (-1) > 0",
            "a % 300 > 0",
            "b * -129 > 0",
            "s + 100000 > 0",
            "c - (-1) > 0",
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(_INTEGER_CASES))
@pytest.mark.parametrize("chunks", [1, 2, 4])
def test_where_integers_follow_numpy(tmp_path, case, chunks):
    # numpy 2's rules (NEP 50): an integer dtype computes in itself and wraps (uint64 too);
    # a Python int takes the column's dtype in arithmetic (OverflowError when it does not
    # fit: blz's InvalidArgumentError), and compares exactly however large.
    cols, exprs = _INTEGER_CASES[case]
    t = blz.create(tmp_path / "t.blz", cols, chunks=chunks)
    arrays = {n: blz.create(tmp_path / f"{n}.blz", v, chunks=chunks) for n, v in cols.items()}
    for e in exprs:
        want = _numpy_where(e, cols)
        if want is None:
            with pytest.raises(blz.InvalidArgumentError, match="out of range"):
                t.where_rows(e)
            continue
        np.testing.assert_array_equal(t.where_rows(e), want, err_msg=e)
        # Each column alone as an array, its elements named x.
        for n, a in arrays.items():
            if set(re.findall(r"[a-z]+", e)) != {n}:
                continue
            alone = re.sub(r"[a-z]+", "x", e)
            np.testing.assert_array_equal(a.where_indices(alone), want, err_msg=e)
