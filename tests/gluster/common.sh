# shellcheck shell=bash disable=SC2034
# Settings and helpers shared by setup.sh and teardown.sh.  Sourced, not run.
#
# Every name can be overridden from the environment:
#   BLZ_GLUSTER_VOLUME      volume name                    (blztest)
#   BLZ_GLUSTER_MOUNT       FUSE mount point               (/mnt/$BLZ_GLUSTER_VOLUME)
#   BLZ_GLUSTER_BRICKS_DIR  parent of the brick dirs b1..3 (/var/lib/blz-gluster/bricks)
#   BLZ_GLUSTER_HOST        host name used in brick and mount addresses
#                           (this machine's host name; gluster refuses
#                           localhost and 127.x.x.x addresses for bricks)
#   BLZ_GLUSTER_STATE_DIR   where setup.sh records what it started
#                           (/var/lib/blz-gluster)

VOL=${BLZ_GLUSTER_VOLUME:-blztest}
MNT=${BLZ_GLUSTER_MOUNT:-/mnt/$VOL}
BRICKS_DIR=${BLZ_GLUSTER_BRICKS_DIR:-/var/lib/blz-gluster/bricks}
STATE_DIR=${BLZ_GLUSTER_STATE_DIR:-/var/lib/blz-gluster}
NBRICKS=3

# glusterd's own pid file, as in Debian's glusterd.service
GLUSTERD_PIDFILE=/run/glusterd.pid
# Present only while a glusterd started by setup.sh may be running: holds its
# pid, or "systemd" when it was started with systemctl.
STARTED_FILE=$STATE_DIR/glusterd-started
# Marks the /etc/hosts line setup.sh adds when the host name does not resolve.
HOSTS_MARK="# added by blz tests/gluster/setup.sh"
LOCK_FILE=/run/blz-gluster.lock

# Coherence between clients.  blz rewrites superchunk headers, offsets and chunks in place
# (through its journal); with the default caches another client of the volume can read the
# old bytes or size of such a file.  These settings together made every client see every
# committed change at once (see README.md, "Caveat -- caching between clients"):
#  * the FUSE attribute cache off on each client (--attribute-timeout=0);
#  * the kernel page cache dropped at every open on each client (--fopen-keep-cache=false):
#    glusterfs 10.3 keeps it by default, and a file rewritten in place without a change of
#    size was then read stale by the other client for minutes (510 s once);
#  * the md-cache (stat-prefetch) and quick-read translators off on the volume.
# mount.glusterfs 10.3 cannot pass --fopen-keep-cache=false (it hands glusterfs
# "--fopen-keep-cache==false", which it refuses), so mount_client starts the client itself.
MOUNT_ARGS=(--attribute-timeout=0 --fopen-keep-cache=false)
# cluster.min-free-disk=0: the three bricks share one disk, and by default DHT stops placing
# new files on bricks with less than 10% free; on a disk over 90% full (seen in CI) every
# file then went to the first brick and nothing was distributed.
VOLUME_OPTS=(performance.stat-prefetch=off performance.quick-read=off cluster.min-free-disk=0)

SELF=$(basename "$0" .sh)

log() { echo "$SELF: [${SECONDS}s] $*" >&2; }
die() {
    echo "$SELF: error: $*" >&2
    exit 1
}

# A failing command that is not handled explicitly must never pass silently.
trap 'die "unexpected failure (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

check_settings() {
    [ "$(id -u)" -eq 0 ] || die "must run as root: it installs packages, runs glusterd and mounts with FUSE"
    [[ $VOL =~ ^[A-Za-z0-9_-]+$ ]] || die "BLZ_GLUSTER_VOLUME='$VOL': use letters, digits, '-' and '_' only"
    [[ $MNT == /?* && $MNT != *[[:space:]]* ]] || die "BLZ_GLUSTER_MOUNT='$MNT' must be an absolute path without spaces"
    [[ $BRICKS_DIR == /?* && $BRICKS_DIR != *[[:space:]]* ]] ||
        die "BLZ_GLUSTER_BRICKS_DIR='$BRICKS_DIR' must be an absolute path without spaces"
    BRICKS_DIR=${BRICKS_DIR%/}
    [[ $BRICKS_DIR != "" && $MNT/ != "$BRICKS_DIR"/* && $BRICKS_DIR/ != "$MNT"/* ]] ||
        die "the mount point and the bricks dir must not contain one another"
}

# Serialise concurrent runs of setup.sh / teardown.sh.
take_lock() {
    exec 9>"$LOCK_FILE"
    flock -w 120 9 && return 0
    local holders
    holders=$(find /proc/[0-9]*/fd -lname "$LOCK_FILE" 2>/dev/null | cut -d/ -f3 | sort -un | join_lines || true)
    die "$LOCK_FILE is still locked after 120 s by pid(s) ${holders:-?} (another setup.sh/teardown.sh?)"
}

join_lines() { paste -sd' ' -; }

brick_path() { echo "$BRICKS_DIR/b$1"; }

gl() { timeout -k 5 60 gluster --mode=script "$@" 9>&-; }

# glusterd answers the CLI within 10 s?
glusterd_answers() {
    command -v gluster >/dev/null &&
        timeout -k 2 10 gluster --mode=script volume list >/dev/null 2>&1 9>&-
}

# wait_for SECONDS COMMAND...: retry COMMAND every 0.2 s until it succeeds
# or SECONDS have passed
wait_for() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.2
    done
}

# A live (not zombie) process?
pid_alive() {
    local st
    [[ $1 =~ ^[0-9]+$ ]] || return 1
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# Live processes named $1 (pgrep also lists zombies, which this machine's
# init may reap only late).
live_pids() {
    local p
    for p in $(pgrep -x "$1" || true); do
        if pid_alive "$p"; then echo "$p"; fi
    done
}

pid_is() { pid_alive "$1" && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]; }

# kill_pid PID: TERM, then KILL after 10 s; wait until it is gone
kill_pid() {
    kill -TERM "$1" 2>/dev/null || return 0
    kill -CONT "$1" 2>/dev/null || true
    wait_for 10 eval "! pid_alive $1" && return 0
    kill -KILL "$1" 2>/dev/null || true
    wait_for 5 eval "! pid_alive $1"
}

# "source fstype" of every mount at $MNT, innermost last
mount_entries() { awk -v m="$MNT" '$2 == m { print $1, $3 }' /proc/mounts; }

# Does the mount at $MNT answer?  A FUSE mount whose client died fails here
# with ENOTCONN ("Transport endpoint is not connected").
# Was the FUSE client at $MNT started with $MOUNT_ARGS?
mount_has_opts() {
    local o
    for o in "${MOUNT_ARGS[@]}"; do
        pgrep -af "glusterfs" | grep -F -- " $MNT" | grep -qF -- " $o" || return 1
    done
}

# mount_client HOST:/VOLUME MOUNTPOINT: start a FUSE client of the volume at MOUNTPOINT with
# $MOUNT_ARGS, as mount -t glusterfs would (same process name and log file,
# /var/log/glusterfs/<mount point with - for />.log).  It returns once the client has
# daemonized; the mount may appear a moment later.
mount_client() {
    glusterfs "${MOUNT_ARGS[@]}" --process-name fuse --volfile-server="${1%%:*}" \
        --volfile-id="/${1#*:/}" "$2"
}

mount_answers() { timeout -s KILL 10 stat -f "$MNT" >/dev/null 2>&1 && timeout -s KILL 10 ls -a "$MNT" >/dev/null 2>&1; }

# Die if something other than glusterfs is mounted at $MNT.
refuse_foreign_mount() {
    local entries
    entries=$(mount_entries)
    if [ -n "$entries" ] && ! awk '$2 != "fuse.glusterfs" { exit 1 }' <<<"$entries"; then
        die "$MNT has a mount that is not glusterfs ($(join_lines <<<"$entries")); not touching it"
    fi
}

# Unmount every glusterfs mount stacked at $MNT, lazily if need be.
unmount_all() {
    local i entries
    for ((i = 0; i < 10; i++)); do
        entries=$(mount_entries)
        [ -n "$entries" ] || return 0
        refuse_foreign_mount
        log "unmounting $MNT"
        umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
    done
    [ -z "$(mount_entries)" ] || die "could not unmount $MNT"
}

# Brick processes still serving one of our bricks (e.g. after glusterd was killed).
brick_pids() {
    local pid cmd i
    for pid in $(live_pids glusterfsd); do
        cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
        for ((i = 1; i <= NBRICKS; i++)); do
            [[ " $cmd " == *" --brick-name $(brick_path "$i") "* ]] && echo "$pid"
        done
    done
    return 0
}

# Bricks of volume $1, one "host:path" a line.
volume_bricks() { { gl volume info "$1" 2>/dev/null || true; } | sed -n 's/^Brick[0-9][0-9]*: //p'; }
volume_field() { { gl volume info "$1" 2>/dev/null || true; } | sed -n "s/^$2: //p"; }
