#!/usr/bin/env bash
# Undo setup.sh: unmount the FUSE mount, stop and delete the volume, remove
# the brick dirs, and stop glusterd if setup.sh started it (and no other
# volume needs it).  Idempotent: whatever is already gone is skipped.
# Packages stay installed.  Must run as root.
#
#   tests/gluster/teardown.sh
set -Eeuo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"

stop_glusterd() {
    local what others
    what=$(cat "$STARTED_FILE" 2>/dev/null || true)
    [ -n "$what" ] || return 0
    others=$({ gl volume list 2>/dev/null || true; } | grep -vx "$VOL" | grep -v '^No volumes present' || true)
    if [ -n "$others" ]; then
        log "leaving glusterd running: other volumes exist ($(join_lines <<<"$others"))"
        return 0
    fi
    if [ "$what" = systemd ]; then
        log "stopping glusterd with systemctl"
        systemctl stop glusterd || die "systemctl stop glusterd failed"
    elif pid_is "$what" glusterd; then
        log "stopping glusterd $what (started by setup.sh)"
        kill_pid "$what" || die "glusterd $what does not stop"
        rm -f "$GLUSTERD_PIDFILE"
    fi
    rm -f "$STARTED_FILE"
}

# Drop the /etc/hosts line setup.sh added, unless a remaining volume uses that name.
remove_hosts_line() {
    local name kept
    name=$(grep -F "$HOSTS_MARK" /etc/hosts 2>/dev/null | awk '{ print $2; exit }' || true)
    [ -n "$name" ] || return 0
    if command -v gluster >/dev/null && { gl volume info 2>/dev/null || true; } | grep -q "^Brick[0-9]*: $name:"; then
        log "keeping '$name' in /etc/hosts: another volume uses it"
        return 0
    fi
    log "removing the /etc/hosts line setup.sh added for $name"
    # rewrite in place: /etc/hosts may be a bind mount that cannot be replaced
    kept=$(grep -vF "$HOSTS_MARK" /etc/hosts || true)
    printf '%s\n' "$kept" >/etc/hosts
}

main() {
    local i
    check_settings
    mkdir -p "$STATE_DIR"
    take_lock

    unmount_all

    if command -v gluster >/dev/null; then
        # The volume is known to glusterd but glusterd is down: start it to delete the volume.
        if ! glusterd_answers && [ -d "/var/lib/glusterd/vols/$VOL" ] && [ -z "$(live_pids glusterd)" ]; then
            log "starting glusterd to delete volume $VOL"
            rm -f "$GLUSTERD_PIDFILE"
            glusterd -p "$GLUSTERD_PIDFILE" --log-level INFO 9>&- || die "glusterd failed to start"
            wait_for 30 glusterd_answers || die "glusterd does not answer; see /var/log/glusterfs/glusterd.log"
            cat "$GLUSTERD_PIDFILE" >"$STARTED_FILE"
        fi
        if gl volume info "$VOL" >/dev/null 2>&1; then
            log "stopping and deleting volume $VOL"
            gl volume stop "$VOL" force >&2 || true
            gl volume delete "$VOL" >&2 || die "could not delete volume $VOL"
        elif [ -d "/var/lib/glusterd/vols/$VOL" ]; then
            die "glusterd does not answer, so volume $VOL cannot be deleted"
        fi
    fi

    for i in $(brick_pids); do
        log "stopping leftover brick process $i"
        kill_pid "$i" || die "brick process $i does not stop"
    done

    for ((i = 1; i <= NBRICKS; i++)); do
        rm -rf "$(brick_path "$i")"
    done
    rmdir "$BRICKS_DIR" 2>/dev/null || true
    [ -n "$(mount_entries)" ] || rmdir "$MNT" 2>/dev/null || true

    command -v gluster >/dev/null && stop_glusterd

    remove_hosts_line
    rm -f "$STATE_DIR/apt.log"
    rmdir "$STATE_DIR" 2>/dev/null || true
    log "done"
}

main "$@"
