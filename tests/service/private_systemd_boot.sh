#!/bin/sh
# tests/service/private_systemd_boot.sh — boots a PRIVATE systemd as PID 1 for
# systemd_service_test.cpp. Run as root by the test, as the first process of new mount, UTS, PID
# and cgroup namespaces (unshare --mount --uts --pid --cgroup --fork --propagation private); it
# execs /lib/systemd/systemd, so systemd is PID 1 of that PID namespace.
#
# What keeps the machine out of reach (a systemd sharing the host's filesystem would empty the
# machine's /tmp at boot and start every enabled unit, e.g. the host's postgresql):
#   - its root is an overlayfs: lower = the host's root filesystem (read-only to it), upper and
#     work dirs on a tmpfs mounted on BOOT_DIR in this mount namespace only; nothing it writes
#     (apt, dpkg, /etc/passwd, the journal, masks) reaches the host's disk;
#   - its own tmpfs on /tmp, /run and /dev (with the harmless device nodes bound in), a new
#     /proc with /proc/sys read-only, /sys read-only, cgroup2 of its own cgroup namespace;
#   - pivot_root into that root: the host's other mounts are gone for it;
#   - `container=` in its environment: systemd runs as in a container (no module loading, no
#     console, `systemctl exit` ends it; units with ConditionVirtualization=!container skip);
#   - every unit file but an allow-list is masked and every generator is disabled (fstab,
#     getty, gpt-auto, ...); the wants of /etc/systemd/system are removed; the default target is
#     sqlstreams-test-boot.target, which wants journald only.
# It shares the host's network namespace (the test's PostgreSQL listens on 127.0.0.1).
# Usage: private_systemd_boot.sh BOOT_DIR INBOX
#   BOOT_DIR  a fresh empty directory NOT under /tmp (a tmpfs is mounted on it here)
#   INBOX     a host directory bound read-write at /mnt/sqlstreams-test inside
set -eu
boot_dir=$1
inbox=$2

mount -t tmpfs -o mode=0700,size=4g sqlstreams-private-systemd "$boot_dir"
mkdir "$boot_dir/upper" "$boot_dir/work" "$boot_dir/root"
mount -t overlay sqlstreams-private-root \
  -o "lowerdir=/,upperdir=$boot_dir/upper,workdir=$boot_dir/work" "$boot_dir/root"
r=$boot_dir/root

mount -t proc proc "$r/proc"
mount --bind "$r/proc/sys" "$r/proc/sys"
mount -o remount,bind,ro "$r/proc/sys"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$r/sys"
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$r/sys/fs/cgroup"
mount -t tmpfs -o mode=0755,nosuid tmpfs "$r/dev"
for d in null zero full random urandom tty; do
  touch "$r/dev/$d"
  mount --bind "/dev/$d" "$r/dev/$d"
done
mkdir "$r/dev/pts" "$r/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$r/dev/pts"
ln -s pts/ptmx "$r/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$r/dev/shm"
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$r/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$r/tmp"
mkdir -p "$r/mnt/sqlstreams-test"
mount --bind "$inbox" "$r/mnt/sqlstreams-test"

# Units: mask all but what boots journald and runs one service; no generators, no wants.
allowed=" -.slice system.slice sysinit.target basic.target sockets.target timers.target \
paths.target slices.target local-fs.target local-fs-pre.target swap.target network.target \
network-pre.target network-online.target nss-lookup.target nss-user-lookup.target \
remote-fs.target multi-user.target shutdown.target exit.target systemd-exit.service \
final.target umount.target emergency.target rescue.target systemd-journald.service \
systemd-journald.socket systemd-journald-dev-log.socket systemd-journal-flush.service "
for f in "$r"/lib/systemd/system/* "$r"/etc/systemd/system/*; do
  [ -f "$f" ] || continue
  name=${f##*/}
  case "$allowed" in *" $name "*) continue ;; esac
  case "$name" in *@*) continue ;; esac  # templates start nothing by themselves
  ln -sf /dev/null "$r/etc/systemd/system/$name"
done
rm -rf "$r"/etc/systemd/system/*.wants "$r"/etc/systemd/system/*.requires
mkdir -p "$r/etc/systemd/system-generators"
for g in "$r"/lib/systemd/system-generators/* "$r"/usr/lib/systemd/system-generators/*; do
  [ -e "$g" ] && ln -sf /dev/null "$r/etc/systemd/system-generators/${g##*/}"
done
cat >"$r/etc/systemd/system/sqlstreams-test-boot.target" <<'EOF'
[Unit]
Description=Private systemd of a SQLStreams test (journald only)
Wants=systemd-journald.service systemd-journald.socket systemd-journald-dev-log.socket
EOF
ln -sf sqlstreams-test-boot.target "$r/etc/systemd/system/default.target"
echo sqlstreams-test >"$r/etc/hostname"
# A machine id of its own (an empty one would be a "first boot": presets applied).
tr -d - </proc/sys/kernel/random/uuid >"$r/etc/machine-id.new"
mv "$r/etc/machine-id.new" "$r/etc/machine-id"

cd "$r"
mkdir -p .sqlstreams-old-root
pivot_root . .sqlstreams-old-root
umount -l /.sqlstreams-old-root
rmdir /.sqlstreams-old-root
exec env -i container=sqlstreams-test PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  /lib/systemd/systemd --system --show-status=no
