#!/usr/bin/env bash
# `make test-vm`: runs a smoke subset of the integration suite, on both engines, under Debian's
# packaged kernel (the oldest we support, 6.1) in qemu, so "kernel >= 6.1" is a tested claim.
#   scripts/vm.sh initramfs   build build/vm/initramfs.cpio.gz (busybox, /init, the 9p modules)
#   scripts/vm.sh run [PYTEST ARGS...]   boot it and run the suite; exit with the suite's status
# VM_TESTS='tests/integration/test_x.py ...' replaces the smoke list (scripts/vm-guest.sh), e.g.
# for kernel TLS, whose module the guest loads; VM_TIMEOUT bounds the run (seconds, 1500).
# The VM mounts this machine's / read-only over virtio-9p and chroots into it, so it runs this
# repository's build/ringhttpd and .venv as they are; build/vm/out is shared read-write for the
# results. Software emulation only (-accel tcg: /dev/kvm hangs on the machines we develop on),
# no network device at all (loopback inside the VM is all the tests use), bounded by a timeout.
# Must not: write outside build/vm/ on the host.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
vm=$repo/build/vm
kver=${VM_KERNEL:-$(ls /boot/vmlinuz-6.1* 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -V |
    tail -1)}
mods=/lib/modules/$kver
boot_timeout=${VM_TIMEOUT:-1500} # seconds for the whole run, boot included

die() { echo "vm: $*" >&2; exit 1; }
[ -n "$kver" ] && [ -r "/boot/vmlinuz-$kver" ] && [ -d "$mods" ] ||
    die "no 6.1 kernel in /boot (scripts/deps.sh vm installs linux-image-amd64)"

# A module and what it needs (modules.dep), each once, dependencies first.
mod_closure() {
    local m=$1 dep
    for dep in $(awk -v m="kernel/$m" -F': *' '$1 == m { print $2 }' "$mods/modules.dep"); do
        mod_closure "${dep#kernel/}"
    done
    case " $closure " in *" $m "*) ;; *) closure="$closure $m" ;; esac
}

initramfs() {
    local root=$vm/initramfs
    rm -rf "$root"
    mkdir -p "$root"/{bin,dev,proc,sys,mnt/root,lib/modules}
    cp /bin/busybox "$root/bin/busybox"
    for app in sh cp mount umount insmod mkdir cat echo ip chroot poweroff sleep sync; do
        ln -s busybox "$root/bin/$app"
    done
    closure=""
    for m in drivers/virtio/virtio_pci.ko net/9p/9pnet_virtio.ko fs/9p/9p.ko; do
        mod_closure "$m"
    done
    for m in $closure; do
        cp "$mods/kernel/$m" "$root/lib/modules/"
    done
    printf '%s\n' $closure | sed 's|.*/||' >"$root/lib/modules/order"
    cp "$repo/scripts/vm-init.sh" "$root/init"
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$vm/initramfs.cpio.gz"
    echo "vm: $vm/initramfs.cpio.gz (kernel $kver)"
}

run() {
    [ -x "$repo/build/ringhttpd" ] || die "build/ringhttpd is missing (make all)"
    [ -x "$repo/.venv/bin/python" ] || die ".venv is missing (make venv)"
    initramfs
    rm -rf "$vm/out"
    mkdir -p "$vm/out"
    # What the guest needs to know: plain assignments for busybox sh, pytest's extra arguments
    # one a line.
    printf 'REPO=%s\nKVER=%s\n' "$repo" "$kver" >"$vm/out/env"
    : >"$vm/out/pytest-args"
    [ $# -eq 0 ] || printf '%s\n' "$@" >"$vm/out/pytest-args"
    : >"$vm/out/tests"
    [ -z "${VM_TESTS:-}" ] || printf '%s\n' $VM_TESTS >"$vm/out/tests"
    local rc=0
    timeout --foreground -k 10 "$boot_timeout" qemu-system-x86_64 \
        -accel tcg,thread=multi -cpu max -smp 2 -m 2048 \
        -nographic -no-reboot -nic none \
        -kernel "/boot/vmlinuz-$kver" -initrd "$vm/initramfs.cpio.gz" \
        -append "console=ttyS0 panic=-1 quiet loglevel=3" \
        -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on" \
        -virtfs "local,path=$vm/out,mount_tag=out,security_model=none" \
        </dev/null | tee "$vm/console.log" || rc=$?
    if [ "$rc" -ne 0 ]; then
        die "qemu ended with status $rc (124: the ${boot_timeout}s timeout); see $vm/console.log"
    fi
    [ -r "$vm/out/status" ] || die "the guest wrote no status; see $vm/console.log"
    local status
    status=$(cat "$vm/out/status")
    echo "vm: suite status $status on kernel $kver (results in $vm/out)"
    exit "$status"
}

case ${1:-run} in
initramfs) initramfs ;;
run) shift || true; run "$@" ;;
*) die "usage: $0 initramfs | run [PYTEST ARGS...]" ;;
esac
