#!/bin/sh
# Server CPU per MiB sent over HTTPS with kernel TLS on and off (issue 14): a sanity check for
# `make test-vm`'s guest, whose kernel has the tls module (this host's has not, so here both
# runs encrypt in user space). Prints one line per mode: CPU ms of the server per MiB and MB/s.
#   bench/ktls_cpu.sh [ENGINE [MIB [RUNS]]]     (uring, 64, 3)
# Needs build/ringhttpd, openssl and curl; works in a temporary directory it removes.
# Must not: be read as a benchmark under qemu's software emulation: compare the two lines only.
set -eu
engine=${1:-uring} mib=${2:-64} runs=${3:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
pid=
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/k.pem" \
    -out "$dir/c.pem" -subj /CN=localhost -addext subjectAltName=DNS:localhost -days 1 2>/dev/null
mkdir "$dir/www"
head -c $((mib << 20)) /dev/urandom >"$dir/www/f.bin"
tick=$(getconf CLK_TCK)
for mode in on off; do
    "$repo/build/ringhttpd" -t 1 --engine "$engine" --access-log off -b 127.0.0.1 -p 0 \
        --tls-port 0 --tls-cert "$dir/c.pem" --tls-key "$dir/k.pem" --ktls $mode -v \
        "$dir/www" 2>"$dir/err.$mode" &
    pid=$!
    for _ in $(seq 100); do grep -q 'listening on https' "$dir/err.$mode" && break; sleep 0.1; done
    port=$(sed -n 's|.*listening on https://127.0.0.1:\([0-9]*\)/.*|\1|p' "$dir/err.$mode")
    cpu0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    t0=$(date +%s.%N)
    for _ in $(seq "$runs"); do
        curl -sS --fail --cacert "$dir/c.pem" --resolve "localhost:$port:127.0.0.1" \
            -o /dev/null "https://localhost:$port/f.bin"
    done
    t1=$(date +%s.%N)
    cpu1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    kill $pid; wait $pid || true; pid=
    awk -v c=$((cpu1 - cpu0)) -v hz="$tick" -v m=$((mib * runs)) -v t0="$t0" -v t1="$t1" \
        -v mode=$mode -v line="$(grep 'kTLS:' "$dir/err.$mode")" 'BEGIN {
        printf "ktls %s: %.2f ms server CPU per MiB, %.1f MB/s (%s)\n", mode,
               c * 1000 / hz / m, m * 1.048576 / (t1 - t0), line }'
done
