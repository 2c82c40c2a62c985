#!/usr/bin/env bash
# Show that superchunk-like files written through the mount are spread over
# all the bricks, and that glusterfs.pathinfo names each file's brick.
# Run after setup.sh, as root (the bricks are read directly).
#
#   tests/gluster/spread_check.sh [DIR-NAME]     # default: spread-check
#
# Exits 1 unless every brick holds at least one of the 12 files and the
# pathinfo of every file names the brick that really holds it.
set -Eeuo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"

NAME=${1:-spread-check}
D=$MNT/$NAME
if [ -z "$(mount_entries)" ] || ! mount_answers; then die "$MNT is not mounted: run setup.sh first"; fi

rm -rf "$D"
mkdir -p "$D"
for i in $(seq 1 12); do
    head -c 65536 /dev/urandom >"$D/__${i}__.bin"
done

echo "== files per brick"
bad=0
for ((b = 1; b <= NBRICKS; b++)); do
    files=$(find "$(brick_path "$b")/$NAME" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | join_lines)
    echo "$(brick_path "$b")/$NAME: ${files:-(none)}"
    [ -n "$files" ] || bad=1
done
[ "$bad" -eq 0 ] || die "some brick got none of the 12 files"

echo "== getfattr -n glusterfs.pathinfo $D/__1__.bin"
getfattr --absolute-names -n glusterfs.pathinfo "$D/__1__.bin"

echo "== pathinfo of every file (Python os.getxattr), checked against the bricks"
python3 - "$D" <<'EOF'
import os, re, sys
d = sys.argv[1]
POSIX = re.compile(r"<POSIX\(([^)]*)\):([^:>]+):([^>]*)>")
ok = True
for i in range(1, 13):
    p = os.path.join(d, f"__{i}__.bin")
    raw = os.getxattr(p, "glusterfs.pathinfo")
    entries = POSIX.findall(raw.rstrip(b"\0").decode())
    brick, host, backend = entries[0]
    same = len(entries) == 1 and open(backend, "rb").read() == open(p, "rb").read()
    ok &= same
    print(f"__{i}__.bin  brick={brick}  host={host}  matches backend file={same}")
print("raw value of the last one:", repr(raw))
print("directory:", repr(os.getxattr(d, "glusterfs.pathinfo")))
sys.exit(0 if ok else 1)
EOF
echo "spread over all $NBRICKS bricks; pathinfo correct"
