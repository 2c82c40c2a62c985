#!/usr/bin/env bash
# Run blz's GlusterFS integration tests (tests/distributed.rs) on a real volume: bring the
# volume up with setup.sh, mount it a second time as another client, run the tests, and tear
# everything down on exit.  Must run as root.  Called by .ci/run.
#
#   tests/gluster/run.sh                  # setup, test, teardown
#   BLZ_GLUSTER_KEEP=1 tests/gluster/run.sh   # leave the volume up afterwards
#
# Any failure (setup included) exits non-zero with a message on stderr: the tests are never
# skipped.
set -Eeuo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
say() { echo "gluster/run: $*" >&2; }
fail() {
    say "FAILED: $*"
    exit 1
}

[ "$(id -u)" -eq 0 ] || fail "must run as root (setup.sh mounts with FUSE and runs glusterd)"

mount2=""
cleanup() {
    local rc=$?
    if [ -n "$mount2" ] && mountpoint -q "$mount2"; then
        umount "$mount2" 2>/dev/null || umount -l "$mount2" || true
        rmdir "$mount2" 2>/dev/null || true
    fi
    if [ -z "${BLZ_GLUSTER_KEEP:-}" ]; then
        "$here/teardown.sh" || { say "teardown.sh failed"; [ $rc -ne 0 ] || rc=1; }
    fi
    exit $rc
}
trap cleanup EXIT

out=$("$here/setup.sh") || fail "tests/gluster/setup.sh could not bring up the GlusterFS volume (see its messages above)"
mnt=$(tail -n 1 <<<"$out")
if [ -z "$mnt" ] || ! mountpoint -q "$mnt"; then
    fail "setup.sh printed '$mnt', which is not a mount point"
fi
export BLZ_GLUSTER_MOUNT=$mnt

# A second client of the same volume: the tests read every state back through it.
# Same options as setup.sh's mount (MOUNT_ARGS and mount_client in common.sh).
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"
trap - ERR # common.sh's; run.sh reports its own failures
src=$(findmnt -n -o SOURCE --target "$mnt")
mount2=${mnt}-client2
mkdir -p "$mount2"
mount_client "$src" "$mount2" || fail "mounting $src a second time at $mount2 failed"
for _ in $(seq 50); do
    mountpoint -q "$mount2" && break
    sleep 0.2
done
mountpoint -q "$mount2" || fail "$mount2 is not mounted 10 s after starting its client"

# A new client connects to the bricks one by one: wait until the second one reads files
# written through the first on every brick (12 names that hash to all three).
second_client_reads_all() {
    local dir=.blz-client2-probe i seen= info
    for i in $(seq 1 12); do
        [ "$(cat "$mount2/$dir/__${i}__.bin" 2>/dev/null)" = "probe $i" ] || return 1
        info=$(getfattr --absolute-names --only-values -n glusterfs.pathinfo "$mount2/$dir/__${i}__.bin" 2>/dev/null | tr -d '\0') || return 1
        [[ $info =~ \<POSIX\(([^\)]*)\) ]] || return 1
        [[ " $seen " == *" ${BASH_REMATCH[1]} "* ]] || seen="$seen ${BASH_REMATCH[1]}"
    done
    [ "$(wc -w <<<"$seen")" -eq 3 ]
}
rm -rf "$mnt/.blz-client2-probe"
mkdir "$mnt/.blz-client2-probe"
for i in $(seq 1 12); do echo "probe $i" >"$mnt/.blz-client2-probe/__${i}__.bin"; done
for _ in $(seq 60); do
    second_client_reads_all && break
    sleep 1
done
second_client_reads_all || fail "the second client at $mount2 does not read files on every brick after 60 s"
rm -rf "$mnt/.blz-client2-probe"
export BLZ_GLUSTER_MOUNT2=$mount2

say "running the tests on $BLZ_GLUSTER_MOUNT (second client: $BLZ_GLUSTER_MOUNT2)"
cd "$repo"
# BLZ_PROFILE: the cargo profile (default release; CI passes `dev`, sharing tests/all.sh's build).
cargo test --profile "${BLZ_PROFILE:-release}" --test distributed -- --nocapture --test-threads=1 ||
    fail "cargo test --test distributed"

# blz.dask on the volume: the Python package's dask tests with every dataset on the mount
# (pytest's temporary directories there), the real placement included. The package and its
# venv come from tests/all.sh, which .ci/run runs first.
py=$repo/target/py-venv/bin/python
[ -x "$py" ] || fail "$py is missing: run bash tests/all.sh first (it builds the Python package)"
say "running the dask tests on $BLZ_GLUSTER_MOUNT"
rm -rf "$BLZ_GLUSTER_MOUNT/pytest-dask"
"$py" -m pytest -q -p no:cacheprovider --basetemp="$BLZ_GLUSTER_MOUNT/pytest-dask" \
    python/tests/test_dask.py || fail "the dask tests on the GlusterFS volume"
rm -rf "$BLZ_GLUSTER_MOUNT/pytest-dask"
say "passed"
