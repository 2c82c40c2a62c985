#!/usr/bin/env bash
# Bring up a local GlusterFS volume for blz's tests: a distributed volume of
# three bricks on this machine, mounted with FUSE.  Must run as root.
#
#   tests/gluster/setup.sh            # prints the mount point (/mnt/blztest) last
#
# Idempotent: an existing healthy volume and mount are kept as they are.  It
# repairs what an interrupted earlier run can leave behind: glusterd dead with
# a stale pid file, a stopped volume or dead brick processes, brick dirs that
# still carry an old volume's .glusterfs and trusted.glusterfs.volume-id, and a
# FUSE mount whose client died ("Transport endpoint is not connected").
# Names come from common.sh and can be overridden with BLZ_GLUSTER_* variables.
# Progress goes to stderr; on failure it says why on stderr and exits 1.
set -Eeuo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"

PACKAGES=(glusterfs-server glusterfs-client attr)

install_packages() {
    local missing=() p apt_log=$STATE_DIR/apt.log
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        local apt=(apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold "${missing[@]}")
        if ! "${apt[@]}" >"$apt_log" 2>&1 9>&-; then
            log "apt-get install failed; running apt-get update and retrying"
            apt-get update -qq >>"$apt_log" 2>&1 9>&- || true
            "${apt[@]}" >>"$apt_log" 2>&1 9>&- || {
                tail -n 20 "$apt_log" >&2
                die "apt-get install ${missing[*]} failed (full log: $apt_log)"
            }
        fi
    fi
    for p in glusterd gluster glusterfs getfattr; do
        command -v "$p" >/dev/null || die "$p not found after installing ${PACKAGES[*]}"
    done
}

check_fuse() {
    [ -c /dev/fuse ] || modprobe fuse 2>/dev/null || true
    [ -c /dev/fuse ] || die "/dev/fuse is missing: FUSE mounts are not possible here"
}

# The host name in brick addresses must resolve to this machine, and gluster
# refuses localhost and 127.x.x.x written out.
choose_host() {
    HOST=${BLZ_GLUSTER_HOST:-$(hostname)}
    [ -n "$HOST" ] || die "no host name: set BLZ_GLUSTER_HOST"
    case $HOST in
        localhost | localhost.* | 127.* | ::1 | 0.*)
            die "gluster refuses '$HOST' in brick addresses; set BLZ_GLUSTER_HOST to this machine's host name" ;;
    esac
    if ! getent hosts "$HOST" >/dev/null; then
        [ -z "${BLZ_GLUSTER_HOST:-}" ] || die "BLZ_GLUSTER_HOST=$HOST does not resolve"
        log "host name $HOST does not resolve; adding '127.0.1.1 $HOST' to /etc/hosts"
        # write in place: /etc/hosts may be a bind mount that cannot be replaced
        echo "127.0.1.1 $HOST $HOSTS_MARK" >>/etc/hosts
        getent hosts "$HOST" >/dev/null || die "$HOST still does not resolve after editing /etc/hosts"
    fi
    log "using host name $HOST ($(getent hosts "$HOST" | awk '{ print $1; exit }'))"
}

ensure_glusterd() {
    local pids ours p
    ours=$(cat "$STARTED_FILE" 2>/dev/null || true)
    if glusterd_answers; then
        # a glusterd we did not start (ours died and another took over): forget ours
        if [[ $ours =~ ^[0-9]+$ ]] && ! pid_is "$ours" glusterd; then rm -f "$STARTED_FILE"; fi
        return 0
    fi
    pids=$(live_pids glusterd)
    if [ -n "$pids" ]; then
        log "glusterd is running (pid $(join_lines <<<"$pids")) but does not answer yet; waiting up to 30 s"
        wait_for 30 glusterd_answers && return 0
        if [[ $ours =~ ^[0-9]+$ ]] && grep -qx "$ours" <<<"$pids"; then
            log "stopping the unresponsive glusterd $ours that an earlier setup.sh started"
            kill_pid "$ours" || die "could not stop glusterd $ours"
        else
            die "glusterd (pid $(join_lines <<<"$pids")) is running but 'gluster volume list' gets no answer; stop it and retry"
        fi
    fi
    if [ -f "$GLUSTERD_PIDFILE" ]; then
        p=$(cat "$GLUSTERD_PIDFILE" 2>/dev/null || true)
        if ! pid_is "$p" glusterd; then
            log "removing stale $GLUSTERD_PIDFILE (pid ${p:-none} is not a running glusterd)"
            rm -f "$GLUSTERD_PIDFILE"
        fi
    fi
    rm -f "$STARTED_FILE"
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
        log "starting glusterd with systemctl"
        systemctl start glusterd 9>&- || die "systemctl start glusterd failed"
        echo systemd >"$STARTED_FILE"
    else
        log "starting glusterd (no systemd)"
        glusterd -p "$GLUSTERD_PIDFILE" --log-level INFO 9>&- ||
            die "glusterd failed to start; see /var/log/glusterfs/glusterd.log"
        wait_for 10 test -s "$GLUSTERD_PIDFILE" || true
        p=$(cat "$GLUSTERD_PIDFILE" 2>/dev/null || live_pids glusterd | tail -n 1)
        [ -n "$p" ] || die "glusterd exited at once; see /var/log/glusterfs/glusterd.log"
        echo "$p" >"$STARTED_FILE"
    fi
    wait_for 30 glusterd_answers ||
        die "glusterd does not answer 'gluster volume list' after 30 s; see /var/log/glusterfs/glusterd.log"
}

expected_bricks() {
    local i
    for ((i = 1; i <= NBRICKS; i++)); do echo "$HOST:$(brick_path "$i")"; done
}

# Number of our bricks that glusterd reports online.
bricks_online() {
    { gl volume status "$VOL" --xml 2>/dev/null || true; } | awk -v pre="$BRICKS_DIR/" '
        /<node>/ { p = ""; s = "" }
        /<path>/ { gsub(/.*<path>|<\/path>.*/, ""); p = $0 }
        /<status>/ { gsub(/.*<status>|<\/status>.*/, ""); s = $0 }
        /<\/node>/ { if (index(p, pre) == 1 && s == "1") n++ }
        END { print n + 0 }'
}
all_bricks_online() { [ "$(bricks_online)" -eq "$NBRICKS" ]; }

# Reuse the volume if it is ours and healthy; otherwise (re)create it.
# $1 = "reset" forces a fresh volume.
ensure_volume() {
    local reset=${1:-} actual other i bricks
    if gl volume info "$VOL" >/dev/null 2>&1; then
        actual=$(volume_bricks "$VOL")
        if [ -n "$reset" ]; then
            log "recreating volume $VOL"
        elif [ "$actual" != "$(expected_bricks)" ] || [ "$(volume_field "$VOL" Type)" != Distribute ]; then
            log "volume $VOL exists with other bricks or type ($(join_lines <<<"$actual")); recreating it"
            reset=1
        else
            if [ "$(volume_field "$VOL" Status)" != Started ]; then
                log "volume $VOL exists but is stopped; starting it"
                gl volume start "$VOL" >&2 || { log "could not start it"; reset=1; }
            fi
            if [ -z "$reset" ] && ! wait_for 10 all_bricks_online; then
                log "only $(bricks_online) of $NBRICKS bricks online; restarting them"
                gl volume start "$VOL" force >&2 || true
                wait_for 15 all_bricks_online || { log "bricks still offline"; reset=1; }
            fi
            if [ -z "$reset" ]; then
                log "volume $VOL exists and all its bricks are online"
                set_volume_options
                return 0
            fi
        fi
        unmount_all
        gl volume stop "$VOL" force >&2 || true
        gl volume delete "$VOL" >&2 || die "could not delete volume $VOL: $(gl volume info "$VOL" 2>&1 | head -n 3)"
    fi
    # Brick dirs shared with another volume must not be wiped.
    other=$({ gl volume info 2>/dev/null || true; } | awk -v pre="$BRICKS_DIR/b" '
        /^Volume Name: / { v = $3 }
        /^Brick[0-9]+: / { sub(/^[^:]*: [^:]*:/, ""); if (index($0, pre) == 1) print v }' | sort -u)
    [ -z "$other" ] || die "bricks under $BRICKS_DIR belong to other volume(s): $(join_lines <<<"$other")"
    # Stray brick processes (glusterd was killed) would hold the old dirs.
    for i in $(brick_pids); do
        log "stopping leftover brick process $i"
        kill_pid "$i" || true
    done
    # Old bricks carry .glusterfs and trusted.glusterfs.volume-id: start afresh.
    for ((i = 1; i <= NBRICKS; i++)); do
        rm -rf "$(brick_path "$i")"
        mkdir -p "$(brick_path "$i")"
    done
    mapfile -t bricks < <(expected_bricks)
    log "creating distributed volume $VOL: ${bricks[*]}"
    gl volume create "$VOL" "${bricks[@]}" force >&2 || die "gluster volume create $VOL failed"
    gl volume start "$VOL" >&2 || die "gluster volume start $VOL failed"
    wait_for 30 all_bricks_online ||
        die "only $(bricks_online) of $NBRICKS bricks came online; see /var/log/glusterfs/bricks/"
    set_volume_options
}

# Turn off the client-side caches that let one client read stale data another wrote in
# place (idempotent; a running client picks the change up).
set_volume_options() {
    local kv
    for kv in "${VOLUME_OPTS[@]}"; do
        [ "$(gl volume get "$VOL" "${kv%%=*}" 2>/dev/null | awk -v k="${kv%%=*}" '$1 == k { print $2 }')" = "${kv#*=}" ] &&
            continue
        log "gluster volume set $VOL ${kv%%=*} ${kv#*=}"
        gl volume set "$VOL" "${kv%%=*}" "${kv#*=}" >&2 || die "gluster volume set $VOL ${kv%%=*} ${kv#*=} failed"
    done
}

mount_log() { echo "/var/log/glusterfs/$(echo "${MNT#/}" | tr / -).log"; }

ensure_mount() {
    local entries
    entries=$(mount_entries)
    if [ -n "$entries" ]; then
        if [ "$entries" = "$HOST:/$VOL fuse.glusterfs" ] && mount_answers; then
            if mount_has_opts; then
                log "$MNT is already mounted"
                return 0
            fi
            log "$MNT is mounted without ${MOUNT_ARGS[*]}; remounting"
        fi
        unmount_all
    fi
    mkdir -p "$MNT"
    log "mounting $HOST:/$VOL at $MNT (${MOUNT_ARGS[*]})"
    mount_client "$HOST:/$VOL" "$MNT" 9>&- || die "mount failed; see $(mount_log)"
    # shellcheck disable=SC2016 # expanded by eval
    wait_for 15 eval '[ "$(mount_entries)" = "$HOST:/$VOL fuse.glusterfs" ] && mount_answers' ||
        die "$MNT does not answer after mounting; see $(mount_log)"
}

# Write, read back and locate files through the mount: the names
# __1__.bin .. __12__.bin always hash to every one of three bricks.
# Returns 2 when everything worked but the files reached fewer bricks.
probe() {
    local dir=$MNT/.blz-setup-probe-$$ i f info seen=
    rm -rf "$MNT"/.blz-setup-probe-* 2>/dev/null || true
    mkdir "$dir" 2>/dev/null || { log "cannot create a directory in $MNT"; return 1; }
    for i in $(seq 1 12); do
        f=$dir/__${i}__.bin
        { echo "blz probe $i" >"$f"; } 2>/dev/null || { log "cannot write $f"; return 1; }
        [ "$(cat "$f" 2>/dev/null)" = "blz probe $i" ] || { log "reading back $f failed"; return 1; }
        info=$(getfattr --absolute-names --only-values -n glusterfs.pathinfo "$f" 2>&1 | tr -d '\0') || true
        # <POSIX(brick root):brick server's own host name:path on the brick>
        [[ $info =~ \<POSIX\(([^\)]*)\):[^:]*:$BRICKS_DIR/b ]] ||
            { log "unexpected glusterfs.pathinfo of $f: $info"; return 1; }
        [[ " $seen " == *" ${BASH_REMATCH[1]} "* ]] || seen="$seen ${BASH_REMATCH[1]}"
    done
    rm -rf "$dir" || { log "cannot remove $dir"; return 1; }
    [ "$(wc -w <<<"$seen")" -eq "$NBRICKS" ] || { log "probe files reached only bricks:$seen"; return 2; }
}

verify() {
    local rc=0
    probe || rc=$?
    if [ $rc -eq 2 ]; then
        log "the disk under $BRICKS_DIR is $(df --output=pcent "$BRICKS_DIR" | tail -n 1 | tr -d ' ') full"
        rc=1
    fi
    return $rc
}

main() {
    local t0=$SECONDS
    check_settings
    mkdir -p "$STATE_DIR"
    take_lock
    install_packages
    check_fuse
    choose_host
    ensure_glusterd
    refuse_foreign_mount
    # A mount whose client died answers nothing: drop it before anything else.
    if [ -n "$(mount_entries)" ] && ! mount_answers; then
        log "$MNT does not answer (stale mount)"
        unmount_all
    fi
    ensure_volume
    ensure_mount
    if ! verify; then
        log "the volume does not work as expected; recreating it once"
        ensure_volume reset
        ensure_mount
        verify || die "$MNT still fails the write/read/pathinfo check; see $(mount_log)"
    fi
    log "ready in $((SECONDS - t0)) s: $HOST:/$VOL on $MNT (bricks $BRICKS_DIR/b1..b$NBRICKS)"
    echo "$MNT"
}

main "$@"
