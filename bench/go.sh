#!/usr/bin/env bash
# bench/go.sh — a Go that builds bench/h3load and caddy (both need Go 1.26), installed the
# project's way when missing. Prints the directory to put first on PATH; with it, GOTOOLCHAIN
# (printed as a second line, "GOTOOLCHAIN=..." or empty) must be exported.
#
# Debian 12's golang-go is 1.19, which cannot fetch a newer toolchain; Go 1.21 and later can,
# from the module proxy (GOTOOLCHAIN=go1.26.8: the go command downloads that release like a
# module). So: the Go on PATH if it is 1.21 or later; else backports' golang-1.23-go, the
# bookworm-backports suite added to the machine's own Debian source when it lacks it (no host
# of ours: the same mirror, one more suite), as root. Exit 1 when there is none and we cannot
# install one.
set -euo pipefail

WANT=go1.26.8 # the toolchain quic-go v0.65 and caddy v2.11 build with

minor() { "$1" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'; }

pick() {
    local go m
    for go in "$(command -v go || true)" /usr/lib/go-1.2[1-9]/bin/go; do
        [[ -n "$go" && -x "$go" ]] || continue
        m=$(minor "$go")
        [[ -n "$m" && "$m" -ge 21 ]] || continue
        dirname "$(readlink -f "$go")"
        if [[ "$m" -ge 26 ]]; then echo; else echo "GOTOOLCHAIN=$WANT"; fi
        return 0
    done
    return 1
}

# Adds bookworm-backports to the Suites of the deb822 stanza (or the one-line source) that
# already names bookworm, once.
enable_backports() {
    local f=/etc/apt/sources.list.d/debian.sources
    if [[ -f "$f" ]]; then
        grep -q 'bookworm-backports' "$f" ||
            sed -E -i '0,/^Suites:(.* )?bookworm( .*)?$/s//& bookworm-backports/' "$f"
        grep -q 'bookworm-backports' "$f" && return 0
    fi
    f=/etc/apt/sources.list
    [[ -f "$f" ]] || return 1
    grep -q '^deb .* bookworm-backports ' "$f" && return 0
    local line
    line=$(grep -m1 -E '^deb [^ ]+ bookworm ' "$f") || return 1
    echo "${line/ bookworm / bookworm-backports }" >>"$f"
}

pick && exit 0
if [[ $(id -u) -ne 0 ]]; then
    echo "bench: no Go 1.21 or later; as root, bench/go.sh installs golang-1.23-go" >&2
    exit 1
fi
echo "bench: installing golang-1.23-go from bookworm-backports" >&2
enable_backports || { echo "bench: found no bookworm source to add backports to" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends -t bookworm-backports golang-1.23-go >/dev/null
pick
