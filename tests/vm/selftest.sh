#!/usr/bin/env bash
# tests/vm/selftest.sh: checks scripts/vm/run itself, on the host (`make test-vm` runs it before
# the suite): one boot that must return its command's status and output, run in the caller's
# directory on a 6.1 kernel with the tls ULP, the host's / read-only, the working directory
# copy-on-write, /tmp a tmpfs, a -w directory writable from the guest, and kernel TLS keys taken
# (the kernel loads the crypto modules they need on demand); then a run that must time out (124)
# and a usage error (125, nothing booted). Two boots: about 30 s on an idle host.
# Must not: write on the host outside build/vm/.
set -u
cd "$(dirname "$0")/../.." || exit 1
repo=$PWD
mkdir -p build/vm
share=$(mktemp -d "$repo/build/vm/selftest.XXXXXX")
trap 'rm -rf "$share"' EXIT
passed=0
failed=0
check() { # check WHAT CONDITION...
    local what=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "vm selftest: FAILED: $what"
    fi
}

# shellcheck disable=SC2016 # expanded in the guest
out=$(scripts/vm/run -t 900 -w "$share" -- sh -c '
    echo "cwd=$(pwd)"
    echo "kernel=$(uname -r)"
    echo "ulp=$(cat /proc/sys/net/ipv4/tcp_available_ulp)"
    echo "tmp=$(stat -f -c %T /tmp)"
    echo from-guest >"$1/note"
    if touch /etc/vm-selftest 2>/dev/null; then echo etc=writable; else echo etc=read-only; fi
    if echo x >vm-selftest-cow; then echo cwd=writable; fi
    python3 tests/vm/ktls_keys.py
    exit 7' sh "$share")
rc=$?
echo "$out"
has() { grep -qx -- "$1" <<<"$out"; }
check "the command's status (7) is returned, got $rc" [ $rc -eq 7 ]
check "the command runs in the caller's directory" has "cwd=$repo"
check "the kernel is 6.1" grep -q '^kernel=6\.1\.' <<<"$out"
check "the tls ULP is there" grep -q '^ulp=.*\btls\b' <<<"$out"
check "/tmp is a tmpfs" has "tmp=tmpfs"
check "the host's / is read-only" has "etc=read-only"
check "the working directory is writable in the guest" has "cwd=writable"
check "... and the host's copy is unchanged" [ ! -e vm-selftest-cow ]
check "a -w directory is written through to the host" grep -qx from-guest "$share/note"
check "kernel TLS takes an AES-GCM key (its modules load on demand)" has "tls_tx=aes-gcm"
check "kernel TLS takes a ChaCha20-Poly1305 key" has "tls_tx=chacha20"

scripts/vm/run -t 3 -- true
rc=$?
check "a run past -t ends with 124, got $rc" [ $rc -eq 124 ]
scripts/vm/run -t 3 2>/dev/null
rc=$?
check "a usage error is 125, got $rc" [ $rc -eq 125 ]

echo "vm selftest: $passed passed, $failed failed"
[ $failed -eq 0 ]
