#!/usr/bin/env bash
# Installs what `make` needs and is missing, on Debian/Ubuntu as root. Each need is checked
# first, so a machine that has everything runs no package manager at all.
#   scripts/deps.sh build   liburing headers, pkg-config
#   scripts/deps.sh test    build + python3-venv (for the pytest virtualenv), curl, ss, tcpdump,
#                           systemd (systemd-socket-activate, systemd-analyze), groff (man lint)
#   scripts/deps.sh fuzz    test + clang and its libFuzzer runtime
set -eu

want=()
need_pkg() { want+=("$1"); }

have_header() { printf '#include <%s>\n' "$1" | cc -E -x c - >/dev/null 2>&1; }

what=${1:-build}
have_header liburing.h || need_pkg liburing-dev
command -v pkg-config >/dev/null || need_pkg pkg-config
if [ "$what" = test ] || [ "$what" = fuzz ]; then
    python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkg python3-venv
    command -v curl >/dev/null || need_pkg curl
    command -v ss >/dev/null || need_pkg iproute2
    command -v tcpdump >/dev/null || need_pkg tcpdump
    command -v systemd-socket-activate >/dev/null || need_pkg systemd
    command -v systemd-analyze >/dev/null || need_pkg systemd
    command -v groff >/dev/null || need_pkg groff-base
fi
if [ "$what" = fuzz ]; then
    command -v clang >/dev/null || need_pkg clang
    ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
        need_pkg libclang-rt-14-dev
fi

[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "deps: missing ${want[*]}; install them (as root: apt-get install ${want[*]})" >&2
    exit 1
fi
echo "deps: installing ${want[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
