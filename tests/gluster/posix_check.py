#!/usr/bin/env python3
"""Check the POSIX file operations blz relies on, on a mounted filesystem.

Usage:
    posix_check.py MOUNT [--second-mount MOUNT2] [--keep]

MOUNT is a directory on the filesystem under test (normally the GlusterFS
FUSE mount made by setup.sh, /mnt/blztest).  MOUNT2, if given, is a second
client mount of the same volume: locks, renames and caching are then also
checked between two clients, which is what a dataset shared by several
machines sees.

Every check prints one line: PASS, FAIL, WARN (works, but with a caveat
that blz must know about) or INFO (a fact, not a requirement).  The exit
status is 1 if any check FAILs, 0 otherwise.  The scratch directory
MOUNT/posix-check-PID is removed at the end unless --keep is given.
"""

import errno
import fcntl
import mmap
import os
import re
import shutil
import stat
import struct
import sys
import time

RESULTS = []


def report(status, name, detail=""):
    RESULTS.append((status, name, detail))
    print(f"{status:4}  {name:34} {detail}", flush=True)


def check(name):
    """Decorator: run a check, turning an unexpected exception into FAIL."""

    def wrap(fn):
        def run(*args):
            try:
                fn(*args)
            except Exception as e:  # noqa: BLE001 - any error is a failed check
                report("FAIL", name, f"{type(e).__name__}: {e}")

        run.__name__ = fn.__name__
        return run

    return wrap


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def in_child(fn):
    """Run fn() in a forked child; return its exit status (fn's return value)."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = fn()
        except BaseException:  # noqa: BLE001
            code = 98
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def pathinfo(path):
    try:
        return os.getxattr(path, "glusterfs.pathinfo").rstrip(b"\0").decode()
    except OSError as e:
        return f"<{errno.errorcode.get(e.errno, e.errno)}>"


POSIX_RE = re.compile(r"<POSIX\(([^)]*)\):([^:>]+):([^>]*)>")


def bricks_of(path):
    """(brick root, host, backend path) for each <POSIX(...)> entry of pathinfo."""
    return POSIX_RE.findall(pathinfo(path))


# --------------------------------------------------------------------------
# checks


@check("create/write/read")
def c_basic(d, d2):
    p = os.path.join(d, "__1__.bin")
    data = os.urandom(300_000)
    write_file(p, data)
    ok = read_file(p) == data
    if d2:
        ok = ok and read_file(os.path.join(d2, "__1__.bin")) == data
    report("PASS" if ok else "FAIL", "create/write/read",
           "300 kB round trip" + (", also read via second mount" if d2 else ""))


@check("O_CREAT|O_EXCL")
def c_excl(d, d2):
    p = os.path.join(d, "excl")
    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.close(fd)
    try:
        fd = os.open(os.path.join(d2 or d, "excl"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(fd)
        report("FAIL", "O_CREAT|O_EXCL", "second exclusive create succeeded")
    except FileExistsError:
        report("PASS", "O_CREAT|O_EXCL", "second exclusive create -> EEXIST")


@check("pwrite past EOF")
def c_pwrite(d, d2):
    p = os.path.join(d, "sparse")
    off = 5 * 1024 * 1024
    fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"head")
        n = os.pwrite(fd, b"tail", off)
        st = os.fstat(fd)
        hole = os.pread(fd, off - 4, 4)
        tail = os.pread(fd, 4, off)
    finally:
        os.close(fd)
    ok = n == 4 and st.st_size == off + 4 and hole == bytes(off - 4) and tail == b"tail"
    report("PASS" if ok else "FAIL", "pwrite past EOF",
           f"size={st.st_size}, hole reads zeros={hole == bytes(off - 4)}, "
           f"st_blocks={st.st_blocks} (sparse={st.st_blocks * 512 < off})")


@check("ftruncate")
def c_ftruncate(d, d2):
    p = os.path.join(d, "trunc")
    fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"0123456789")
        os.ftruncate(fd, 3 * 1024 * 1024)
        grown = os.fstat(fd).st_size
        zeros = os.pread(fd, 3 * 1024 * 1024 - 10, 10) == bytes(3 * 1024 * 1024 - 10)
        os.ftruncate(fd, 5)
        shrunk = os.fstat(fd).st_size
        head = os.pread(fd, 100, 0)
    finally:
        os.close(fd)
    ok = grown == 3 * 1024 * 1024 and zeros and shrunk == 5 and head == b"01234"
    report("PASS" if ok else "FAIL", "ftruncate",
           f"grow to {grown} (zero filled={zeros}), shrink to {shrunk} -> {head!r}")


@check("fsync/fdatasync")
def c_fsync(d, d2):
    p = os.path.join(d, "synced")
    fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"x" * 100_000)
        os.fsync(fd)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    report("PASS", "fsync/fdatasync", "file fsync and fdatasync return 0")


@check("fsync of a directory")
def c_dirfsync(d, d2):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    report("PASS", "fsync of a directory", "open(dir, O_DIRECTORY) + fsync return 0")


@check("rename")
def c_rename(d, d2):
    # new name in the same directory: DHT may leave the data on the old
    # brick and put a link file on the brick the new name hashes to.
    a, b = os.path.join(d, "ren-src"), os.path.join(d, "__7__.bin")
    data = os.urandom(50_000)
    write_file(a, data)
    before = pathinfo(a)
    os.rename(a, b)
    after = pathinfo(b)
    ok = read_file(b) == data and not os.path.exists(a)
    if d2:
        ok = ok and read_file(os.path.join(d2, "__7__.bin")) == data
        ok = ok and not os.path.exists(os.path.join(d2, "ren-src"))
    report("PASS" if ok else "FAIL", "rename (same dir)", "content kept, old name gone")
    report("INFO", "rename: pathinfo before/after", f"{before}  ->  {after}")

    # across directories
    sub = os.path.join(d, "sub")
    os.mkdir(sub)
    c = os.path.join(sub, "moved")
    os.rename(b, c)
    ok = read_file(c) == data and not os.path.exists(b)
    report("PASS" if ok else "FAIL", "rename (across dirs)", "content kept, old name gone")

    # a non-empty directory
    os.rename(sub, os.path.join(d, "sub2"))
    ok = read_file(os.path.join(d, "sub2", "moved")) == data and not os.path.exists(sub)
    report("PASS" if ok else "FAIL", "rename (non-empty dir)", "")

    # many renames: look on the bricks (when they are local) for DHT link files
    ren = os.path.join(d, "renamed")
    os.mkdir(ren)
    for i in range(1, 13):
        write_file(os.path.join(ren, f"tmp{i}"), b"%d" % i)
        os.rename(os.path.join(ren, f"tmp{i}"), os.path.join(ren, f"__{i}__.bin"))
    ok = all(read_file(os.path.join(ren, f"__{i}__.bin")) == b"%d" % i for i in range(1, 13))
    ok = ok and sorted(os.listdir(ren)) == sorted(f"__{i}__.bin" for i in range(1, 13))
    report("PASS" if ok else "FAIL", "rename x12, listing", "mount lists exactly the 12 new names")
    links = data = 0
    for _root, _host, backend in bricks_of(ren):
        if not os.path.isdir(backend):
            continue
        for n in os.listdir(backend):
            st = os.lstat(os.path.join(backend, n))
            if stat.S_IMODE(st.st_mode) == stat.S_ISVTX and st.st_size == 0:
                links += 1
            else:
                data += 1
    if links + data:
        named = [b for i in range(1, 13) for b in bricks_of(os.path.join(ren, f"__{i}__.bin"))]
        on_link = sum(1 for b in named if os.lstat(b[2]).st_size == 0)
        report("INFO", "rename x12: files on the bricks",
               f"{data} data files + {links} DHT link files (mode ---------T, 0 bytes)")
        report("PASS" if len(named) == 12 and on_link == 0 else "FAIL", "rename x12: pathinfo",
               f"names the data file's brick ({len({b[0] for b in named})} distinct), "
               f"a link file {on_link} times")


@check("rename over existing")
def c_replace(d, d2):
    # The write-temp, fsync, rename-over pattern used to publish meta files.
    target = os.path.join(d, "meta.json")
    write_file(target, b'{"v": 0}')
    for i in range(1, 21):
        tmp = os.path.join(d, f".meta.json.tmp{i}")
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, b'{"v": %d}' % i)
        os.fsync(fd)
        os.close(fd)
        os.replace(tmp, target)
    names = sorted(n for n in os.listdir(d) if "meta" in n)
    got = read_file(os.path.join(d2 or d, "meta.json"))
    ok = got == b'{"v": 20}' and names == ["meta.json"]
    report("PASS" if ok else "FAIL", "rename over existing (replace)",
           f"20 atomic replaces, final={got!r}, dir entries={names}")


@check("replace under readers")
def c_replace_race(d, d2):
    """A second process reads the target while it is being replaced."""
    target = os.path.join(d, "race.json")
    payload = lambda i: (b"%08d" % i) * 512  # 4 KiB, every 8 bytes equal
    write_file(target, payload(0))
    rdir = d2 or d
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        counts = {"reads": 0, "ENOENT": 0, "ESTALE": 0, "other": 0, "torn": 0}
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                data = read_file(os.path.join(rdir, "race.json"))
                counts["reads"] += 1
                if len(data) != 4096 or data != data[:8] * 512:
                    counts["torn"] += 1
            except FileNotFoundError:
                counts["ENOENT"] += 1
            except OSError as e:
                counts["ESTALE" if e.errno == errno.ESTALE else "other"] += 1
            if os.path.exists(os.path.join(rdir, "race.stop")):
                break
        os.write(w, repr(counts).encode())
        os._exit(0)
    os.close(w)
    for i in range(1, 201):
        tmp = os.path.join(d, ".race.tmp")
        write_file(tmp, payload(i))
        os.replace(tmp, target)
    write_file(os.path.join(d, "race.stop"), b"")
    os.waitpid(pid, 0)
    counts = eval(os.read(r, 4096).decode())  # noqa: S307 - our own child's repr
    os.close(r)
    bad = counts["ENOENT"] + counts["ESTALE"] + counts["other"] + counts["torn"]
    where = "second mount" if d2 else "same mount"
    report("PASS" if bad == 0 else "WARN", "replace under concurrent readers",
           f"200 replaces, reader on {where}: {counts}")


def _flock_try(path, how):
    def child():
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return 0
        except OSError as e:
            return 1 if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else 2
        finally:
            os.close(fd)

    return in_child(child)


@check("flock")
def c_flock(d, d2):
    p = os.path.join(d, "lock-flock")
    write_file(p, b"x")
    for label, other in [("same mount", p)] + ([("second mount", os.path.join(d2, "lock-flock"))] if d2 else []):
        fd = os.open(p, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        blocked = _flock_try(other, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_UN)
        free = _flock_try(other, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_SH)
        shared = _flock_try(other, fcntl.LOCK_SH)
        os.close(fd)
        ok = blocked == 1 and free == 0 and shared == 0
        report("PASS" if ok else "FAIL", f"flock ({label})",
               f"other process: EX while held -> {'EWOULDBLOCK' if blocked == 1 else blocked}, "
               f"after unlock -> {'ok' if free == 0 else free}, SH+SH -> {'ok' if shared == 0 else shared}")

    # blocking wait: the other process waits for LOCK_EX until we release
    other = os.path.join(d2, "lock-flock") if d2 else p
    fd = os.open(p, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)

    def waiter():
        f2 = os.open(other, os.O_RDWR)
        t = time.time()
        fcntl.flock(f2, fcntl.LOCK_EX)
        return 0 if time.time() - t > 0.3 else 3

    pid = os.fork()
    if pid == 0:
        try:
            os._exit(waiter())
        except BaseException:  # noqa: BLE001
            os._exit(2)
    time.sleep(0.8)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    _, st = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(st)
    report("PASS" if code == 0 else "FAIL", "flock blocking wait",
           "waiter blocked, then got the lock after release" if code == 0 else f"code {code}")


FLOCK_FMT = "hhqqi4x"  # struct flock on x86_64 / aarch64 Linux


def _fcntl_try(path, ltype, start, length, getlk=False):
    def child():
        fd = os.open(path, os.O_RDWR)
        try:
            if getlk:
                arg = struct.pack(FLOCK_FMT, ltype, os.SEEK_SET, start, length, 0)
                res = struct.unpack(FLOCK_FMT, fcntl.fcntl(fd, fcntl.F_GETLK, arg))
                # report l_type back: F_UNLCK(2) means free, else the holder's type
                return 10 + res[0]
            fcntl.lockf(fd, (fcntl.LOCK_EX if ltype == fcntl.F_WRLCK else fcntl.LOCK_SH) | fcntl.LOCK_NB,
                        length, start)
            return 0
        except OSError as e:
            return 1 if e.errno in (errno.EACCES, errno.EAGAIN) else 2
        finally:
            os.close(fd)

    return in_child(child)


@check("fcntl locks")
def c_fcntl(d, d2):
    p = os.path.join(d, "lock-fcntl")
    write_file(p, b"x" * 4096)
    for label, other in [("same mount", p)] + ([("second mount", os.path.join(d2, "lock-fcntl"))] if d2 else []):
        fd = os.open(p, os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)  # bytes 0..99
        overlap = _fcntl_try(other, fcntl.F_WRLCK, 50, 100)
        disjoint = _fcntl_try(other, fcntl.F_WRLCK, 200, 100)
        getlk = _fcntl_try(other, fcntl.F_WRLCK, 0, 10, getlk=True) - 10
        fcntl.lockf(fd, fcntl.LOCK_UN, 100, 0)
        after = _fcntl_try(other, fcntl.F_WRLCK, 50, 100)
        os.close(fd)
        ok = overlap == 1 and disjoint == 0 and after == 0 and getlk == fcntl.F_WRLCK
        report("PASS" if ok else "FAIL", f"fcntl/lockf ({label})",
               f"overlapping range -> {'EAGAIN/EACCES' if overlap == 1 else overlap}, "
               f"disjoint range -> {'ok' if disjoint == 0 else disjoint}, "
               f"F_GETLK sees F_WRLCK={getlk == fcntl.F_WRLCK}, after unlock -> {'ok' if after == 0 else after}")


@check("mmap")
def c_mmap(d, d2):
    p = os.path.join(d, "mapped")
    data = os.urandom(1 << 20)
    write_file(p, data)
    with open(p, "r+b") as f:
        m = mmap.mmap(f.fileno(), 0)
        ok_read = m[:] == data
        m[0:4] = b"MMAP"
        m.flush()
        m.close()
    fd = os.open(p, os.O_RDONLY)
    ok_write = os.pread(fd, 4, 0) == b"MMAP"
    os.close(fd)
    seen2 = None
    if d2:
        seen2 = read_file(os.path.join(d2, "mapped"))[:4] == b"MMAP"
    ok = ok_read and ok_write and seen2 is not False
    report("PASS" if ok else "FAIL", "mmap (read, MAP_SHARED write)",
           f"read={ok_read}, write+msync visible to read()={ok_write}"
           + (f", visible on second mount={seen2}" if d2 else ""))


@check("unlink while open")
def c_unlink_open(d, d2):
    p = os.path.join(d, "doomed")
    write_file(p, b"still here")
    fd = os.open(p, os.O_RDONLY)
    os.unlink(p)
    got = os.pread(fd, 100, 0)
    os.close(fd)
    report("PASS" if got == b"still here" else "FAIL", "unlink while open",
           f"read after unlink -> {got!r}")


@check("link/symlink")
def c_links(d, d2):
    p = os.path.join(d, "orig")
    write_file(p, b"o")
    os.link(p, os.path.join(d, "hard"))
    os.symlink("orig", os.path.join(d, "soft"))
    ok = read_file(os.path.join(d, "hard")) == b"o" and read_file(os.path.join(d, "soft")) == b"o"
    report("PASS" if ok else "FAIL", "link/symlink", f"st_nlink={os.stat(p).st_nlink}")


@check("posix_fallocate")
def c_fallocate(d, d2):
    p = os.path.join(d, "falloc")
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    report("PASS" if size == 1 << 20 else "FAIL", "posix_fallocate", f"size={size}")


@check("user xattr")
def c_xattr(d, d2):
    p = os.path.join(d, "__1__.bin")
    try:
        os.setxattr(p, "user.blz", b"1")
        report("INFO", "user.* xattr", f"set/get -> {os.getxattr(p, 'user.blz')!r}")
    except OSError as e:
        report("INFO", "user.* xattr", f"unsupported: {errno.errorcode.get(e.errno)}")
    try:
        os.getxattr(p, "user.absent")
    except OSError as e:
        report("INFO", "missing user.* xattr", f"errno {errno.errorcode.get(e.errno)}")


@check("glusterfs.pathinfo")
def c_pathinfo(d, d2):
    p = os.path.join(d, "__1__.bin")
    raw = os.getxattr(p, "glusterfs.pathinfo")
    report("PASS" if raw.startswith(b"(<") else "FAIL", "glusterfs.pathinfo (file)", repr(raw))
    report("INFO", "glusterfs.pathinfo (dir)", repr(os.getxattr(d, "glusterfs.pathinfo")))
    try:
        os.getxattr(os.path.join(d, "no-such-file"), "glusterfs.pathinfo")
    except OSError as e:
        report("INFO", "glusterfs.pathinfo (missing)", f"errno {errno.errorcode.get(e.errno)}")


def fs_type(path):
    """Type of the filesystem holding path, from /proc/mounts (longest prefix)."""
    best, kind = "", "?"
    real = os.path.realpath(path)
    with open("/proc/mounts") as f:
        for line in f:
            _, mnt, typ = line.split()[:3]
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, kind = mnt, typ
    return kind


@check("pathinfo on local files")
def c_local_pathinfo(d, d2):
    import tempfile

    for base in ("/tmp", "/var/tmp", "/dev/shm"):
        if not os.path.isdir(base):
            continue
        with tempfile.NamedTemporaryFile(dir=base) as f:
            try:
                v = os.getxattr(f.name, "glusterfs.pathinfo")
                report("INFO", f"pathinfo on {base}", f"({fs_type(base)}) returned {v!r}")
            except OSError as e:
                report("INFO", f"pathinfo on {base}", f"({fs_type(base)}) errno {errno.errorcode.get(e.errno)}")


@check("statvfs")
def c_statvfs(d, d2):
    s = os.statvfs(d)
    report("INFO", "statvfs", f"f_bsize={s.f_bsize} f_frsize={s.f_frsize} free={s.f_bavail * s.f_frsize // 2**30} GiB")


@check("cross-client caching")
def c_caching(d, d2):
    if not d2:
        report("INFO", "cross-client caching", "skipped: no --second-mount")
        return
    p, p2 = os.path.join(d, "grow"), os.path.join(d2, "grow")
    write_file(p, b"a" * 10)
    os.stat(p2)  # the second client caches the attributes
    with open(p, "ab") as f:
        f.write(b"b" * 10)
    t0 = time.time()
    stale = os.stat(p2).st_size
    got = read_file(p2)  # a fresh open right away
    while os.stat(p2).st_size != 20 and time.time() - t0 < 10:
        time.sleep(0.05)
    lag = time.time() - t0
    report("WARN" if stale != 20 else "PASS", "size seen by other client after append",
           f"immediately {stale} (want 20), correct after {lag:.2f} s")
    report("PASS" if got == b"a" * 10 + b"b" * 10 else "WARN", "content seen by other client (fresh open)",
           f"open+read right after the append got {len(got)} of 20 bytes")
    # An in-place rewrite that keeps the size (as when blz rewrites a chunk or a header in
    # place): the other client has read the file, so its kernel may hold the old pages.
    read_file(p2)
    fd = os.open(p, os.O_RDWR)
    try:
        os.pwrite(fd, b"c", 5)
        os.fsync(fd)
    finally:
        os.close(fd)
    t0 = time.time()
    first = read_file(p2)[5:6]
    while read_file(p2)[5:6] != b"c" and time.time() - t0 < 5:
        time.sleep(0.05)
    fresh = read_file(p2)[5:6] == b"c"
    report("PASS" if first == b"c" else "WARN", "same-size rewrite seen by other client (fresh open)",
           f"immediately {first!r} (want b'c'), "
           + (f"correct after {time.time() - t0:.2f} s" if fresh else "still stale after 5 s"))
    # negative lookup then create
    q, q2 = os.path.join(d, "late"), os.path.join(d2, "late")
    existed = os.path.exists(q2)
    write_file(q, b"l")
    found = os.path.exists(q2)
    report("PASS" if (not existed and found) else "WARN", "new file seen by other client",
           f"after a failed lookup: found immediately={found}")


def main():
    args = sys.argv[1:]
    keep = "--keep" in args
    args = [a for a in args if a != "--keep"]
    second = None
    if "--second-mount" in args:
        i = args.index("--second-mount")
        second = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    mount = args[0]
    name = f"posix-check-{os.getpid()}"
    d = os.path.join(mount, name)
    os.mkdir(d)
    d2 = os.path.join(second, name) if second else None
    if d2:
        t0 = time.time()
        while not os.path.isdir(d2):
            if time.time() - t0 > 10:
                sys.exit(f"{d2} not visible: is {second} a mount of the same volume?")
            time.sleep(0.1)
    print(f"checking {d}" + (f" (second client: {d2})" if d2 else ""), flush=True)
    try:
        for c in [c_basic, c_excl, c_pwrite, c_ftruncate, c_fsync, c_dirfsync, c_rename, c_replace,
                  c_replace_race, c_flock, c_fcntl, c_mmap, c_unlink_open, c_links, c_fallocate,
                  c_xattr, c_pathinfo, c_local_pathinfo, c_statvfs, c_caching]:
            c(d, d2)
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)
    counts = {s: sum(1 for r in RESULTS if r[0] == s) for s in ("PASS", "FAIL", "WARN", "INFO")}
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed")
    print(f"({counts['WARN']} warnings, {counts['INFO']} informational)")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
