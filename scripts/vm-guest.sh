#!/bin/bash
# Runs inside the `make test-vm` guest, chrooted into the host's / (see scripts/vm-init.sh):
# records what `ringhttpd -v` finds on this kernel, then runs the smoke subset of the
# integration suite on both engines against build/ringhttpd. Output goes to build/vm/out (the
# guest's only writable share); the exit status is the suite's.
set -u
out=$(dirname "$0")/../build/vm/out
. "$out/env"
mapfile -t extra <"$out/pytest-args"
cd "$REPO" || exit 1
export HOME=/tmp TMPDIR=/tmp PYTHONDONTWRITEBYTECODE=1 RINGHTTPD=$REPO/build/ringhttpd

# What the probe says here: -v, then stop it once it listens (bounded: 60 s at most).
timeout -s INT 60 build/ringhttpd -v -p 0 -b 127.0.0.1 -t 1 www >"$out/verbose.txt" 2>&1 &
pid=$!
for _ in $(seq 60); do
    grep -q 'listening on' "$out/verbose.txt" && break
    sleep 1
done
kill -INT "$pid" 2>/dev/null
wait "$pid"
echo "--- ringhttpd -v on $(uname -r):"
cat "$out/verbose.txt"

# The smoke subset: GET/HEAD, keep-alive, pipelining, large files, ranges, and what -v says
# about this kernel (io_uring usable, tls ULP present once tls.ko is loaded); both engines.
smoke=(tests/integration/test_basic.py tests/integration/test_keepalive.py
       tests/integration/test_pipelining.py tests/integration/test_largefiles.py
       tests/integration/test_ranges.py tests/integration/test_probe.py)
mapfile -t chosen <"$out/tests" # VM_TESTS, when given, instead
[ ${#chosen[@]} -eq 0 ] || smoke=("${chosen[@]}")
.venv/bin/python -m pytest -p no:cacheprovider -q -m "not slow" \
    --junitxml="$out/junit.xml" "${smoke[@]}" "${extra[@]}" 2>&1 | tee "$out/pytest.txt"
exit "${PIPESTATUS[0]}"
