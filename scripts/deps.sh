#!/usr/bin/env bash
# Installs what `make` needs and is missing, on Debian/Ubuntu as root. Each need is checked
# first, so a machine that has everything runs no package manager at all.
#   scripts/deps.sh build   the toolchain (gcc, make, libc6-dev), liburing, Brotli, zstd,
#                           libdeflate, nghttp2, OpenSSL 3 (libssl-dev: the TLS transport),
#                           libyaml and libcrypt headers, pkg-config, <sys/sdt.h> (USDT probes; a
#                           header only): BUILD_DEPS below, the one list of build dependencies
#   scripts/deps.sh test    build + python3-venv (for the pytest virtualenv), curl, ss, tcpdump,
#                           systemd (systemd-socket-activate, systemd-analyze), groff (man lint),
#                           openssl (the TLS tests make certificates and run s_client),
#                           certutil (libnss3-tools: the HTTPS browser test trusts its CA),
#                           htpasswd (apache2-utils: the basic-auth tests' password files),
#                           pebble (Let's Encrypt's test CA, with pebble-challtestsrv: test_acme),
#                           knot and knot-dnsutils (test_acme_dns01: RFC 2136 with TSIG),
#                           promtool (Debian's prometheus package: the metrics test checks the
#                           exposition with it), bpftrace (the probe test attaches it), nghttp
#                           and h2load (nghttp2-client), gtlsclient (ngtcp2-client: HTTP/3),
#                           haproxy (test_proxy: the balancer in front, PROXY v1 and v2),
#                           goaccess (test_pages reads --log-format vcombined with it),
#                           h2spec (built from its Go module, versions pinned in
#                           scripts/h2spec/go.mod, with Debian's golang-go when no Go is
#                           installed, into build-independent .tools/bin)
#   scripts/deps.sh fuzz    test + clang and its libFuzzer runtime
#   scripts/deps.sh format  clang-format (make format, make format-check)
#   scripts/deps.sh systemd test + systemd-nspawn (systemd-container), which `make test-systemd`
#                           boots a container with to run the units under a real systemd
#   scripts/deps.sh vm      test + what `make test-vm` boots: Debian's packaged kernel
#                           (linux-image-amd64, 6.1 on Debian 12) and its modules, qemu
#                           (qemu-system-x86: its 9p shares), busybox-static and cpio for the
#                           guest's initramfs (scripts/vm/run), kmod (its modprobe)
#   scripts/deps.sh deb     build + dpkg-dev, debhelper and build-essential (make deb:
#                           dpkg-buildpackage)
#   scripts/deps.sh packaging  deb + what `make test-packaging` uses: lintian, mmdebstrap (fresh
#                           Debian 12 roots), systemd-nspawn (systemd-container) to boot one,
#                           podman and runc (crun, podman's default, refuses this kind of
#                           machine's hybrid cgroup hierarchy); for the image's tests pebble
#                           (its ACME client), curl, and python3-yaml (the Kubernetes
#                           manifests are read with Debian's python3, the venv has no YAML)
#   scripts/deps.sh --list build   prints BUILD_DEPS' package names, one a line, whatever is
#                           installed: the Containerfile's build stage installs exactly these, and
#                           tests/integration/test_packaging.py checks debian/control's
#                           Build-Depends against them
set -eu

want=()
need_pkg() { want+=("$1"); }

have_header() { printf '#include <%s>\n' "$1" | cc -E -x c - >/dev/null 2>&1; }

# The build dependencies, Debian 12's names: "package  how to tell it is installed".
BUILD_DEPS=(
    "gcc                cmd cc"
    "make               cmd make"
    "libc6-dev          header stdio.h"
    "pkg-config         cmd pkg-config"
    "liburing-dev       header liburing.h"
    "libbrotli-dev      header brotli/encode.h"
    "libzstd-dev        header zstd.h"
    "libdeflate-dev     header libdeflate.h"
    "libssl-dev         header openssl/ssl.h"
    "systemtap-sdt-dev  header sys/sdt.h"
    "libnghttp2-dev     header nghttp2/nghttp2.h"
    "libyaml-dev        header yaml.h"
    "libcrypt-dev       header crypt.h"
    "libcurl4-openssl-dev header curl/curl.h"
    "libjansson-dev     header jansson.h"
    "libngtcp2-dev      header ngtcp2/ngtcp2.h"
    "libngtcp2-crypto-gnutls-dev header ngtcp2/ngtcp2_crypto_gnutls.h"
    "libnghttp3-dev     header nghttp3/nghttp3.h"
    "libgnutls28-dev    header gnutls/gnutls.h"
)
# The last four: HTTP/3 (issue 29), ngtcp2 (QUIC) with its GnuTLS crypto helper (the only
# backend Debian packages: OpenSSL 3.0 has no QUIC API) and nghttp3, which the server no longer
# links (src/http/h3 frames HTTP/3 and src/http/h3/qpack does QPACK): fuzz_h3 keeps it as an oracle.

if [ "${1:-}" = --list ]; then
    [ "${2:-}" = build ] || { echo "usage: deps.sh --list build" >&2; exit 2; }
    for dep in "${BUILD_DEPS[@]}"; do
        read -r pkg _ <<<"$dep"
        echo "$pkg"
    done
    exit 0
fi

what=${1:-build}
for dep in "${BUILD_DEPS[@]}"; do
    read -r pkg kind arg <<<"$dep"
    case $kind in
    cmd) command -v "$arg" >/dev/null || need_pkg "$pkg" ;;
    header) command -v cc >/dev/null && have_header "$arg" || need_pkg "$pkg" ;;
    esac
done
if [ "$what" = deb ] || [ "$what" = packaging ]; then
    command -v dpkg-buildpackage >/dev/null || need_pkg dpkg-dev
    command -v dh >/dev/null || need_pkg debhelper
    # dpkg-buildpackage requires it beside Build-Depends
    dpkg -s build-essential >/dev/null 2>&1 || need_pkg build-essential
fi
if [ "$what" = packaging ]; then
    command -v lintian >/dev/null || need_pkg lintian
    command -v mmdebstrap >/dev/null || need_pkg mmdebstrap
    command -v systemd-nspawn >/dev/null || need_pkg systemd-container
    command -v podman >/dev/null || need_pkg podman
    command -v runc >/dev/null || need_pkg runc
    command -v pgrep >/dev/null || need_pkg procps
    command -v pebble >/dev/null || need_pkg pebble
    command -v curl >/dev/null || need_pkg curl
    /usr/bin/python3 -c 'import yaml' 2>/dev/null || need_pkg python3-yaml
fi
if [ "$what" = test ] || [ "$what" = fuzz ] || [ "$what" = vm ] || [ "$what" = systemd ]; then
    python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkg python3-venv
    command -v curl >/dev/null || need_pkg curl
    command -v ss >/dev/null || need_pkg iproute2
    command -v tcpdump >/dev/null || need_pkg tcpdump
    command -v promtool >/dev/null || need_pkg prometheus
    command -v bpftrace >/dev/null || need_pkg bpftrace
    command -v systemd-socket-activate >/dev/null || need_pkg systemd
    command -v systemd-analyze >/dev/null || need_pkg systemd
    command -v groff >/dev/null || need_pkg groff-base
    command -v nghttp >/dev/null || need_pkg nghttp2-client
    command -v h2load >/dev/null || need_pkg nghttp2-client
    [ -x .tools/bin/h2spec ] || command -v go >/dev/null || need_pkg golang-go
    command -v openssl >/dev/null || need_pkg openssl
    command -v certutil >/dev/null || need_pkg libnss3-tools # the browser test trusts its CA
    command -v htpasswd >/dev/null || need_pkg apache2-utils  # test_sites makes htpasswd files
    command -v pebble >/dev/null || need_pkg pebble # test_acme: a test CA (and pebble-challtestsrv)
    # test_acme_dns01: an authoritative server taking RFC 2136 updates signed with TSIG (knotd,
    # keymgr), and kdig to look at its zone
    [ -x /usr/sbin/knotd ] || need_pkg knot
    command -v kdig >/dev/null || need_pkg knot-dnsutils
    command -v gtlsclient >/dev/null || need_pkg ngtcp2-client # test_h3's second HTTP/3 client
    command -v haproxy >/dev/null || need_pkg haproxy # test_proxy: a balancer sending PROXY v1/v2
    command -v goaccess >/dev/null || need_pkg goaccess # test_pages parses --log-format vcombined
fi
if [ "$what" = fuzz ]; then
    command -v clang >/dev/null || need_pkg clang
    ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
        need_pkg libclang-rt-14-dev
fi
if [ "$what" = format ]; then
    command -v clang-format >/dev/null || need_pkg clang-format
fi
if [ "$what" = systemd ]; then
    command -v systemd-nspawn >/dev/null || need_pkg systemd-container
fi
if [ "$what" = vm ]; then
    { ls /boot/vmlinuz-6.1* && ls -d /lib/modules/6.1*/kernel; } >/dev/null 2>&1 ||
        need_pkg linux-image-amd64
    command -v qemu-system-x86_64 >/dev/null || need_pkg qemu-system-x86
    dpkg -s busybox-static >/dev/null 2>&1 || need_pkg busybox-static
    command -v cpio >/dev/null || need_pkg cpio
    [ -x /sbin/modprobe ] || need_pkg kmod # the guest loads modules on demand with it
fi

# h2spec is no Debian package: built once here (never at test time) from the module versions
# pinned in scripts/h2spec/go.mod, which Debian 12's Go 1.19 builds.
build_h2spec() {
    case "$what" in test | fuzz | vm) ;; *) return 0 ;; esac
    [ -x .tools/bin/h2spec ] && return 0
    local go
    go=$(command -v go || echo /usr/lib/go-1.19/bin/go)
    echo "deps: building h2spec into .tools/bin"
    mkdir -p .tools/bin
    (cd scripts/h2spec && GOFLAGS=-modcacherw GOTOOLCHAIN=local \
        "$go" build -o ../../.tools/bin/h2spec github.com/summerwind/h2spec/cmd/h2spec)
}

if [ ${#want[@]} -eq 0 ]; then
    build_h2spec
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "deps: missing ${want[*]}; install them (as root: apt-get install ${want[*]})" >&2
    exit 1
fi
echo "deps: installing ${want[*]}"
# The prometheus package (wanted for promtool alone) ships a service: keep apt from starting
# it, with a policy-rc.d that says "no" while installing, only when the machine has none.
own_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
[ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d && trap - EXIT
build_h2spec
