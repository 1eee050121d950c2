#!/bin/sh
# fleet.sh: two ringhttpd instances behind HAProxy on one machine, as a fleet is set up on
# many: each instance serves its own copy of the site (made with cp -r: other inodes and
# mtimes, the same bytes, so the same ETags), and all share the secret files an operator
# distributes (TLS session-ticket keys, the QUIC Retry/reset secret), so a session, a Retry
# token or a revalidation made at one instance is good at the other. HAProxy passes TLS
# through (mode tcp) with a PROXY v2 header, and cleartext with a v1 header.
#
#   contrib/fleet/fleet.sh SITE STATE      start (in the foreground; Ctrl-C or SIGTERM stops)
#   contrib/fleet/fleet.sh rotate STATE    rotate the secrets and reload both instances
#
# STATE (created) holds the secret files (made once, kept), the two copies a/ and b/, their
# access logs and pid files. Environment (defaults in brackets): RINGHTTPD [ringhttpd],
# HAPROXY [haproxy], FLEET_CERT, FLEET_KEY (a PEM pair for the sites' names; required),
# FLEET_BIND [127.0.0.1], FLEET_HTTPS [8443], FLEET_HTTP [8080] (the balancer's ports),
# FLEET_A [127.0.0.1], FLEET_A_HTTPS [9443], FLEET_A_HTTP [9080], FLEET_B [127.0.0.1],
# FLEET_B_HTTPS [9444], FLEET_B_HTTP [9081] (the instances'), FLEET_BALANCER [127.0.0.1]
# (the address HAProxy connects from: the only one whose PROXY headers are trusted),
# FLEET_LIMIT_CONN [100], FLEET_ENGINE [auto].
set -eu

here=$(cd "$(dirname "$0")" && pwd)
: "${RINGHTTPD:=ringhttpd}" "${HAPROXY:=haproxy}"
: "${FLEET_BIND:=127.0.0.1}" "${FLEET_HTTPS:=8443}" "${FLEET_HTTP:=8080}"
: "${FLEET_A:=127.0.0.1}" "${FLEET_A_HTTPS:=9443}" "${FLEET_A_HTTP:=9080}"
: "${FLEET_B:=127.0.0.1}" "${FLEET_B_HTTPS:=9444}" "${FLEET_B_HTTP:=9081}"
: "${FLEET_BALANCER:=127.0.0.1}" "${FLEET_LIMIT_CONN:=100}" "${FLEET_ENGINE:=auto}"
export FLEET_BIND FLEET_HTTPS FLEET_HTTP FLEET_A FLEET_A_HTTPS FLEET_A_HTTP FLEET_B \
    FLEET_B_HTTPS FLEET_B_HTTP

# A secret file of n random bytes, made once: every instance must be given the same bytes.
secret() {
    [ -s "$1" ] || (umask 077 && openssl rand "$2" > "$1")
}

if [ "${1:-}" = rotate ]; then
    # Each kind is a current file (makes tickets and tokens) and a previous one (still
    # accepted), so clients holding the old keep working while the fleet reloads one by one.
    state=${2:?usage: fleet.sh rotate STATE}
    for kind in ticket.key:80 quic.secret:32; do
        f=$state/${kind%:*}
        cp "$f" "$f.previous"
        rm -f "$f"
        secret "$f" "${kind#*:}"
    done
    for name in a b; do
        kill -HUP "$(cat "$state/$name.pid")"
    done
    exit 0
fi

site=${1:?usage: fleet.sh SITE STATE}
state=${2:?usage: fleet.sh SITE STATE}
: "${FLEET_CERT:?a certificate for the sites (PEM)}" "${FLEET_KEY:?its key (PEM)}"
mkdir -p "$state"
secret "$state/ticket.key" 80          # nginx's ssl_session_ticket_key format
secret "$state/ticket.key.previous" 80
secret "$state/quic.secret" 32
secret "$state/quic.secret.previous" 32

pids=
stop() {
    trap - INT TERM EXIT
    # shellcheck disable=SC2086 # the list of pids this script started
    [ -z "$pids" ] || kill $pids 2>/dev/null || true
    wait
}
trap stop INT TERM EXIT

# instance NAME ADDR HTTP HTTPS SERVER_ID
instance() {
    rm -rf "${state:?}/$1"
    cp -r "$site" "$state/$1"
    "$RINGHTTPD" -b "$2" -p "$3" --tls-port "$4" --tls-cert "$FLEET_CERT" --tls-key "$FLEET_KEY" \
        --engine "$FLEET_ENGINE" --health /healthz --limit-conn "$FLEET_LIMIT_CONN" \
        --proxy-protocol-from "$FLEET_BALANCER" \
        --ticket-key-file "$state/ticket.key" --ticket-key-file "$state/ticket.key.previous" \
        --quic-secret-file "$state/quic.secret" --quic-secret-file "$state/quic.secret.previous" \
        --quic-server-id "$5" --access-log "$state/$1.access.log" "$state/$1" &
    echo $! > "$state/$1.pid"
    pids="$pids $!"
}
instance a "$FLEET_A" "$FLEET_A_HTTP" "$FLEET_A_HTTPS" 0x000000000000000a
instance b "$FLEET_B" "$FLEET_B_HTTP" "$FLEET_B_HTTPS" 0x000000000000000b
"$HAPROXY" -db -f "$here/haproxy.cfg" &
pids="$pids $!"
wait
