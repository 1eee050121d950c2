#!/bin/sh
# systemd-container.sh BINARY: runs dist/ringhttpd.service and dist/ringhttpd.socket, as shipped
# (only @BINDIR@ filled in, the port and DOCROOT set by drop-ins), under a real systemd: a
# container booted by systemd-nspawn from this machine's /usr and a copy of its /etc, with a
# private network. `make test-systemd` runs it; it needs root and systemd-nspawn
# (scripts/deps.sh systemd) and prints one line per check, exit status 0 when all pass.
# Checks: Type=notify start and STATUS=, a request, reload, a clean stop (exit 0, no 2 s wait),
# socket activation with three restarts under a 4-client load (no failed request), and the
# epoll fallback under a drop-in that forbids io_uring.
# Why --system-call-filter: nspawn 252's own seccomp filter does not know the Landlock calls.
set -eu
BIN=$(realpath "${1:?usage: systemd-container.sh BINARY}")
REPO=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v systemd-nspawn >/dev/null; then
    echo "systemd-nspawn missing: scripts/deps.sh systemd"
    exit 77
fi
[ "$(id -u)" = 0 ] || { echo "needs root (systemd-nspawn)"; exit 77; }
[ -L /bin ] || { echo "needs a merged-/usr system (Debian 12)"; exit 77; }

T=$(mktemp -d /tmp/ringhttpd-systemd.XXXXXX)
NSPID=
cleanup() {
    [ -n "$NSPID" ] && kill "$NSPID" 2>/dev/null && wait "$NSPID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT INT TERM

mkdir -p "$T/root/usr" "$T/root/var" "$T/root/tmp" "$T/rh/bin" "$T/rh/www" \
    "$T/units/ringhttpd.service.d" "$T/units/ringhttpd.socket.d"
cp -a /etc "$T/root/etc"
rm -f "$T/root/etc/os-release" "$T/root/etc/machine-id"
cp -L /etc/os-release "$T/root/etc/os-release"
: > "$T/root/etc/machine-id"
for d in bin lib lib64 sbin; do [ -e "/$d" ] && ln -s "usr/$d" "$T/root/$d"; done
cp "$BIN" "$T/rh/bin/ringhttpd"
echo hello-from-systemd > "$T/rh/www/index.html"
cp "$REPO/scripts/systemd-load.py" "$T/rh/load.py"
chmod -R a+rX "$T/rh"
sed 's|@BINDIR@|/run/rh/bin|g' "$REPO/dist/ringhttpd.service" > "$T/units/ringhttpd.service"
cp "$REPO/dist/ringhttpd.socket" "$T/units/ringhttpd.socket"
printf '[Service]\nExecStart=\nExecStart=/run/rh/bin/ringhttpd --port 8080 /run/rh/www\n' \
    > "$T/units/ringhttpd.service.d/test.conf"
printf '[Socket]\nListenStream=\nListenStream=8080\n' > "$T/units/ringhttpd.socket.d/test.conf"

systemd-nspawn -q -D "$T/root" -b --register=no --keep-unit --private-network -M ringhttpd-test \
    --system-call-filter="landlock_create_ruleset landlock_add_rule landlock_restrict_self" \
    --bind-ro=/usr --bind-ro="$T/rh:/run/rh" --bind-ro="$T/units:/run/systemd/system" \
    systemd.unit=basic.target > "$T/boot.log" 2>&1 < /dev/null &
NSPID=$!
INIT=
for _ in $(seq 100); do
    INIT=$(pgrep -P "$NSPID" -x systemd || true)
    [ -n "$INIT" ] && state=$(nsenter -t "$INIT" -a systemctl is-system-running 2>/dev/null) &&
        case $state in running|degraded) break ;; esac
    sleep 0.3
done
[ -n "$INIT" ] || { echo "the container did not boot:"; cat "$T/boot.log"; exit 1; }
in_ct() { nsenter -t "$INIT" -a "$@"; }

fails=0
check() { # check NAME COMMAND...: one PASS or FAIL line, with the command's output on a failure
    name=$1
    shift
    if "$@" >"$T/out" 2>&1; then
        echo "PASS $name"
    else
        echo "FAIL $name"
        sed 's/^/    /' "$T/out"
        fails=$((fails + 1))
    fi
}
get() {
    in_ct python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:8080/").read().decode())'
}
prop_is() { [ "$(in_ct systemctl show -p "$2" --value "$1")" = "$3" ]; }
journal_has() { in_ct journalctl -u ringhttpd.service --no-pager -b | grep -q -- "$1"; }
journal_lacks() { ! journal_has "$1"; }
status_serving() {
    in_ct systemctl show -p StatusText --value ringhttpd.service | grep -q '^serving /run/rh/www'
}
user_is() { [ "$(in_ct ps -o user= -C ringhttpd)" = "$1" ]; }

check "start (Type=notify)" in_ct systemctl start ringhttpd.service
check "STATUS= says what it serves" status_serving
check "a request answered" get
check "runs as www-data" user_is www-data
check "reload" in_ct systemctl reload ringhttpd.service
check "reload logged" journal_has "reload (SIGHUP): serving"
check "stop" in_ct systemctl stop ringhttpd.service
check "stop: exit 0" prop_is ringhttpd.service Result success
check "stop: sock_diag allowed" journal_lacks "cannot count the listeners"
check "socket activation" in_ct systemctl start ringhttpd.socket
check "a request through systemd's socket" get
check "on sockets from systemd" journal_has "on sockets from systemd"
check "three restarts under load, no failed request" \
    in_ct python3 /run/rh/load.py 8080 3 systemctl restart ringhttpd.service
check "the socket unit still active" prop_is ringhttpd.socket ActiveState active
in_ct systemctl stop ringhttpd.socket ringhttpd.service
printf '[Service]\nSystemCallFilter=~io_uring_setup io_uring_enter io_uring_register\n' \
    >"$T/units/ringhttpd.service.d/no-uring.conf"
in_ct systemctl daemon-reload
check "io_uring forbidden: starts" in_ct systemctl start ringhttpd.service
check "io_uring forbidden: engine epoll" journal_has "(engine epoll"
check "io_uring forbidden: a request answered" get
in_ct systemctl stop ringhttpd.service
echo "systemd-container: $fails failed"
[ "$fails" = 0 ]
