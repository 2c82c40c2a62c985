#!/usr/bin/env bash
# Runs a command against a third local S3 server: Ceph's RADOS Gateway (radosgw, C++, the
# beast frontend) over a one-node Ceph cluster made for the run in a scratch directory (one
# monitor, one OSD keeping its objects in memory, no authentication inside the cluster), all
# stopped and removed when this script exits. Mirrors tests/s3/run_s3s.sh:
#
#   bash tests/s3/run_rgw.sh CMD ARGS   CMD with the gateway up and the AWS_* variables set
#
# Install Ceph once (Debian 12 has 16.2, "pacific"):
#   apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw ceph-common
#
# radosgw 16.2 honours If-None-Match: * on PUT, but compares If-Match with the ETag without
# its quotes, so it refuses every If-Match that quotes it, as S3 and object_store do: a
# dataset's first commit works there, later ones get Conflict. It serves the speed figures
# of creates and reads (benches/compare_s3.py --no-count), not the commit protocol's tests.
# RGW_MEMSTORE_BYTES: the OSD's memory (default 6 GiB).
# RGW_NODELAY=1: the beast frontend's tcp_nodelay=1 (off by default in 16.2: on a reused
#   connection a short answer's body then waits about 40 ms for the client's delayed ACK,
#   which no S3 service does; compare tests/s3/run_s3s.sh, S3S_NODELAY).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$#" -eq 0 ]; then
    echo "usage: bash tests/s3/run_rgw.sh CMD [ARGS...]" >&2
    exit 2
fi
for b in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool ceph-authtool; do
    if ! command -v "$b" >/dev/null; then
        echo "$b not found: apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw ceph-common" >&2
        exit 1
    fi
done

source tests/s3/common.sh

mon_port=$(free_port)
port=$(free_port)
dir=$(mktemp -d)
conf=$dir/ceph.conf
mkdir -p "$dir/mon" "$dir/osd/ceph-0" "$dir/run" "$dir/log"
fsid=$(cat /proc/sys/kernel/random/uuid)
cat >"$conf" <<EOF
[global]
fsid = $fsid
mon initial members = a
mon host = v1:127.0.0.1:$mon_port
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = ${RGW_MEMSTORE_BYTES:-6442450944}
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
run dir = $dir/run
log file = $dir/log/\$name.log
mon data = $dir/mon/\$cluster-\$id
osd data = $dir/osd/\$cluster-\$id
ms bind ipv6 = false
EOF

cleanup() {
    for p in radosgw ceph-osd ceph-mon; do
        pkill -f "$p -c $conf" 2>/dev/null || true
    done
    sleep 1
    for p in radosgw ceph-osd ceph-mon; do
        pkill -9 -f "$p -c $conf" 2>/dev/null || true
    done
    rm -rf "$dir"
}
trap cleanup EXIT

ceph-authtool --create-keyring "$dir/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
monmaptool --create --add a "v1:127.0.0.1:$mon_port" --fsid "$fsid" "$dir/monmap" >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/mon.keyring"
ceph-mon -c "$conf" -i a
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
id=$(timeout 60 ceph -c "$conf" osd create "$osd_uuid")
timeout 120 ceph-osd -c "$conf" -i "$id" --mkfs --osd-uuid "$osd_uuid" >/dev/null 2>&1
timeout 60 ceph -c "$conf" osd crush add-bucket localhost host >/dev/null
timeout 60 ceph -c "$conf" osd crush move localhost root=default >/dev/null
timeout 60 ceph -c "$conf" osd crush add "osd.$id" 1.0 host=localhost >/dev/null
# Starts a daemon (it forks; the command returns once it runs), trying three times: the
# OSD's first start right after the cluster is made sometimes exits at once.
start() {
    local what=$1
    shift
    for _ in 1 2 3; do
        if "$@" 2>"$dir/log/start.err"; then return 0; fi
        sleep 1
    done
    echo "$what did not start:" >&2
    cat "$dir/log/start.err" >&2
    exit 1
}
start ceph-osd ceph-osd -c "$conf" -i "$id"
frontend="beast endpoint=127.0.0.1:$port"
if [ "${RGW_NODELAY:-0}" = 1 ]; then
    frontend="$frontend tcp_nodelay=1"
fi
start radosgw radosgw -c "$conf" -n client.rgw.a --rgw-frontends "$frontend"

server_env "$port"
if ! wait_up "" 600; then
    echo "radosgw did not come up on port $port:" >&2
    tail -20 "$dir/log/client.rgw.a.log" >&2
    exit 1
fi
timeout 120 radosgw-admin -c "$conf" user create --uid=test --display-name=test \
    --access-key=testing --secret-key=testing >/dev/null
# The bucket, ranged reads and If-None-Match checked; If-Match reported (see above).
BLZ_S3_CHECK_IF_MATCH=report "$venv/bin/python" tests/s3/check_server.py

"$@"
