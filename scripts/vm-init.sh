#!/bin/sh
# /init of the `make test-vm` guest (scripts/vm.sh builds it into the initramfs): mounts the
# host's / read-only over virtio-9p, chroots into it, and runs the smoke suite there against the
# repository's own build; writes the suite's status to the output share and powers off.
# Must not: write anywhere but tmpfs and the output share (the host's / is mounted read-only).
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /lib/modules/order); do
    insmod /lib/modules/$m || echo "vm-init: insmod $m failed"
done
# The guest's / is a tmpfs holding a bind mount of each of the host's top-level directories
# (read-only over 9p) and its own proc, sys, dev, tmp and run: nothing is mounted onto a 9p
# directory, whose dentries the 9p client may drop and look up again (losing the mount on it).
h=/mnt/host
r=/mnt/root
mkdir -p $h /out
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot $h ||
    { echo "vm-init: cannot mount the host's /"; poweroff -f; }
mount -t 9p -o trans=virtio,version=9p2000.L,rw,msize=512000 out /out ||
    { echo "vm-init: cannot mount the output share"; poweroff -f; }
. /out/env
mount -t tmpfs root $r
for p in $h/* $h/.[!.]*; do
    [ -e "$p" ] || [ -L "$p" ] || continue
    d=${p#$h/}
    case $d in
    proc|sys|dev|tmp|run|mnt) mkdir -p $r/$d ;;
    *)
        if [ -d "$p" ] && [ ! -L "$p" ]; then
            mkdir -p $r/$d && mount -o bind "$p" $r/$d
        else
            cp -a "$p" $r/
        fi ;;
    esac
done
mount -t proc proc $r/proc
mount -t sysfs sys $r/sys
mount -t devtmpfs dev $r/dev
mkdir -p $r/dev/shm
mount -t tmpfs shm $r/dev/shm
mount -t tmpfs tmp $r/tmp
mount -t tmpfs run $r/run
mount -o bind /out $r$REPO/build/vm/out ||
    { echo "vm-init: cannot mount the output share in the chroot"; poweroff -f; }
ip link set lo up
for m in net/ipv4/inet_diag.ko net/ipv4/tcp_diag.ko net/tls/tls.ko; do
    insmod $h/lib/modules/$KVER/kernel/$m || echo "vm-init: insmod $m failed"
done
echo "vm-init: kernel $(cat /proc/sys/kernel/osrelease);" \
    "tcp_available_ulp: $(cat /proc/sys/net/ipv4/tcp_available_ulp)"
chroot $r /bin/bash $REPO/scripts/vm-guest.sh
echo $? >/out/status
sync
poweroff -f
