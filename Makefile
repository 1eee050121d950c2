# ringhttpd. `make run` serves ./www on :8080; `make check` builds and runs every test.
CC       ?= cc
BUILD    ?= build
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Wshadow -Werror
CPPFLAGS += -D_GNU_SOURCE -Isrc -MMD -MP
LDLIBS   := -luring -lpthread -lbrotlienc -lzstd -ldeflate -lssl -lcrypto -lyaml -lcrypt \
            -lcurl -ljansson
# HTTP/3 (src/quic, src/h3). HTTP3=no leaves it out: make static does, as Debian ships GnuTLS's
# p11-kit and libunistring without static libraries.
HTTP3    ?= yes
ifeq ($(HTTP3),yes)
LDLIBS   += -lngtcp2_crypto_gnutls -lngtcp2 -lgnutls
else
CPPFLAGS += -DRINGHTTPD_NO_HTTP3
endif
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
PORT     ?= 8080
VENV     := .venv
PY       := $(VENV)/bin/python

CORE_SRC   := $(wildcard src/core/*.c)
# The seams' test doubles (a transport that copies, a protocol of lines) are linked into the unit
# binary and into build/ringhttpd-test (tests/seams/main.c picks them by the environment for
# tests/integration/test_transport.py), never into the binary a user runs.
SEAM_SRC   := tests/seams/transport_copy.c tests/seams/proto_lines.c
# The ACME client (src/acme, libcurl). ACME=no swaps it for a stub that refuses --acme-email:
# make static does, as libcurl has no static dependencies on Debian.
ACME       ?= yes
ifeq ($(ACME),yes)
ACME_SRC   := $(wildcard src/server/acme/*.c)
else
ACME_SRC   := $(filter-out src/server/acme/acme.c src/server/acme/answers.c src/server/acme/client.c src/server/acme/ondemand.c,$(wildcard src/server/acme/*.c)) \
              src/server/acme/static/acme_none.c
CPPFLAGS   += -DRINGHTTPD_NO_ACME
LDLIBS     := $(filter-out -lcurl,$(LDLIBS))
endif
SERVER_SRC := $(CORE_SRC) $(wildcard src/*.c src/server/*.c src/http/*.c src/http/h2/*.c src/site/*.c \
                                      src/conn/*.c src/tls/*.c src/engine/*.c src/rt/*.c \
                                      src/config/*.c) \
              $(if $(filter yes,$(HTTP3)),$(wildcard src/quic/*.c src/http/h3/*.c)) $(ACME_SRC)
UNIT_SRC   := $(wildcard tests/unit/*.c)
TOOL_SRC   := $(wildcard tests/tools/*.c)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))

.PHONY: all run check unit integration asan deps venv fuzz fuzz-deps bench bench-quick bench-pageload clean format \
	format-check install uninstall static test-vm soak test-handover test-systemd modgraph

PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     := $(PREFIX)/bin
MANDIR     := $(PREFIX)/share/man
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SHAREDIR   := $(PREFIX)/share/ringhttpd
BPF_SCRIPTS := $(wildcard scripts/*.bt bpftrace/*.bt)

all: $(BUILD)/ringhttpd $(BUILD)/ringhttpd-test $(BUILD)/unit $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -std=gnu11 $(WARN) $(CFLAGS) -c $< -o $@

$(BUILD)/ringhttpd: $(call obj,$(SERVER_SRC))
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/ringhttpd-test: $(call obj,$(filter-out src/main.c,$(SERVER_SRC)) $(SEAM_SRC) tests/seams/main.c)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The unit binary also links the engines' shared send loop (tested against real sockets), their
# capability decision (caps.c needs no ring), the io_uring SQE source (on real rings), the timer
# wheel, the file cache and its file helpers (tested against a real directory), the splice pipe
# sizing and pool, the hand-over's and the client address's steering (tested against loopback
# listeners), the HTTP/2
# session (driven by an nghttp2 client session in memory) and the TLS module (handshakes in
# memory against an OpenSSL client).
UNIT_LINK := src/engine/sendplan.c src/engine/caps.c src/engine/sqe.c src/engine/pipepool.c \
             src/rt/timer.c src/rt/fcache.c src/rt/file.c src/rt/pipesize.c src/server/handover.c src/server/steer.c \
             $(wildcard src/http/h2/*.c) $(wildcard src/tls/*.c) src/engine/ktls.c \
             $(wildcard src/quic/*.c) $(wildcard src/http/h3/*.c) src/engine/udp.c src/engine/uring_udp.c
# ACME's pure parts (JWS, key authorizations, ARI IDs, renewal and backoff times), its state
# directory and the challenge table.
UNIT_LINK += src/server/acme/jws.c src/server/acme/when.c src/server/acme/store.c src/server/acme/dnsmsg.c
# conn is driven through a fake engine table (test_conn.c) on a real worker, so the runtime
# around it (serve, config, the rest of rt/) is linked too; only the engines, server and main
# are left out.
UNIT_LINK += $(wildcard src/conn/*.c src/http/*.c src/site/*.c src/config/*.c) \
             src/server/worker.c src/server/metrics.c tests/seams/transport_copy.c \
             $(filter-out src/rt/timer.c src/rt/fcache.c src/rt/file.c src/rt/pipesize.c,$(wildcard src/rt/*.c))
# libnghttp2 is the unit tests' HTTP/2 client and HPACK oracle only: the server has its own.
$(BUILD)/unit: $(call obj,$(CORE_SRC) $(UNIT_LINK) $(UNIT_SRC))
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lnghttp2

# The option table as text, for the tests that hold README and the man page to it.
$(BUILD)/tools/options: $(call obj,tests/tools/options.c $(wildcard src/config/options*.c) $(CORE_SRC))
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@

$(BUILD)/tools/%: tests/tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -std=gnu11 $(WARN) $(CFLAGS) $< -o $@

deps:
	@scripts/deps.sh build

run: deps
	@$(MAKE) --no-print-directory $(BUILD)/ringhttpd
	$(BUILD)/ringhttpd --port $(PORT) www

# The sanitizer build lives beside the normal one; the integration suite runs against both.
asan:
	@$(MAKE) --no-print-directory BUILD=build/asan CFLAGS="-O1 -g $(SAN)" LDFLAGS="$(SAN)" all

$(VENV)/.done: tests/requirements.txt
	@scripts/deps.sh test
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
	@touch $@

venv: $(VENV)/.done

# h2spec (HTTP/2 conformance), built by scripts/deps.sh from pinned module versions.
H2SPEC := .tools/bin/h2spec
$(H2SPEC): scripts/h2spec/go.mod
	@scripts/deps.sh test

unit: all asan
	$(BUILD)/unit
	build/asan/unit

# The TLS dimension (conftest: scheme) runs on the normal build only: the ASan pass would
# repeat the same TLS code paths test_tls.py and test_tls_fuzz.py already run under it (a
# module marked schemes("https") only, test_tls_io.py, runs over TLS in both passes).
# Four pytest workers (pytest-xdist), a test file each at a time (module fixtures stay whole):
# most tests wait on timeouts and clients (a make check used 7.5 CPU-minutes in 17 minutes on
# two cores), so four halve the wall time again on two cores (the first pass: 10:44 with two,
# 5:23 with four, same machine and load) and keep `make check` under 20 minutes.
# PYTEST_JOBS=0 runs them in one process.
# The ASan pass runs each test on one engine (RINGHTTPD_ENGINE_SPLIT, conftest: a stable hash
# of the test's id picks uring or epoll): both engines' code is still run under ASan across the
# suite, in half the time (the pass before runs every test on both engines).
PYTEST_JOBS ?= 4
PYTEST_PAR := $(if $(filter 0,$(PYTEST_JOBS)),,-n $(PYTEST_JOBS) --dist loadfile)
integration: all asan venv $(H2SPEC)
	RINGHTTPD=$(abspath $(BUILD)/ringhttpd) $(PY) -m pytest -q $(PYTEST_PAR) tests/integration
	RINGHTTPD=$(abspath build/asan/ringhttpd) RINGHTTPD_SCHEMES=http RINGHTTPD_ENGINE_SPLIT=1 \
	    $(PY) -m pytest -q \
	    $(PYTEST_PAR) -m "not slow" tests/integration

# The zero-downtime restart under load (three restarts, zero failed requests, both engines),
# HANDOVER_RUNS times in a row: the reliability check of issue 13. It is part of make check too.
HANDOVER_RUNS ?= 30
test-handover: all venv
	@pass=0; for i in $$(seq $(HANDOVER_RUNS)); do \
	    RINGHTTPD=$(abspath $(BUILD)/ringhttpd) $(PY) -m pytest -q \
	        tests/integration/test_operations.py -k zero_downtime >/dev/null && pass=$$((pass + 1)) \
	        || echo "run $$i failed"; \
	done; echo "test-handover: $$pass of $(HANDOVER_RUNS) runs passed"; \
	test $$pass -eq $(HANDOVER_RUNS)

# The systemd units under a real systemd (a container booted with systemd-nspawn; root).
test-systemd: all
	@scripts/deps.sh systemd
	scripts/systemd-container.sh $(BUILD)/ringhttpd

check: deps
	@$(MAKE) --no-print-directory modgraph
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration
	@$(MAKE) --no-print-directory -j2 fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)
	@$(MAKE) --no-print-directory format-check

# libFuzzer targets, one per parser; `make fuzz FUZZ_SECONDS=600` for a longer run (`-j2` runs
# two at once). Target fuzz_NAME starts from the seeds in tests/fuzz/seeds/NAME/ (and its own
# corpus in build/fuzz). The code under test is compiled once for all of them (objects in
# build/fuzz/obj), each target links what it needs.
FUZZ_SRC   := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(basename $(notdir $(FUZZ_SRC)))
FUZZ_CFLAGS := -g -O1 -D_GNU_SOURCE -Isrc -fsanitize=fuzzer-no-link,address,undefined
fuzz_obj = $(patsubst %.c,build/fuzz/obj/%.o,$(1))
FUZZ_BASE := $(CORE_SRC) src/http/h2/h2session.c src/http/h2/h2in.c src/http/h2/h2out.c src/http/h2/h2req.c \
             src/http/h2/hpack.c
# Targets that need more than the core: their sources and libraries.
FUZZ_EXTRA_fuzz_config := $(wildcard src/config/options*.c) src/config/cfgfile.c
FUZZ_LIBS_fuzz_config  := -lyaml
FUZZ_EXTRA_fuzz_htpasswd := src/site/htpasswd.c src/rt/file.c
FUZZ_LIBS_fuzz_htpasswd  := -lcrypt -lcrypto # file.c: the digests (unused here)
FUZZ_EXTRA_fuzz_h3 := src/http/h3/h3session.c src/http/h3/h3in.c src/http/h3/h3resp.c src/http/h3/h3uni.c src/http/h3/h3req.c src/http/h3/qpack.c src/rt/errlog.c
# Our QPACK against libnghttp3's decoder, the oracle (as fuzz_hpack_diff against libnghttp2).
FUZZ_EXTRA_fuzz_qpack_diff := src/http/h3/qpack.c
FUZZ_LIBS_fuzz_qpack_diff  := -lnghttp3
# QUIC's receive path with a real ngtcp2 endpoint behind a real UDP port (issue 35.1).
FUZZ_EXTRA_fuzz_quic := src/quic/endpoint.c src/quic/handshake.c src/quic/cid.c src/engine/udp.c src/rt/names.c \
                        src/rt/certsets.c
FUZZ_LIBS_fuzz_quic  := -lngtcp2_crypto_gnutls -lngtcp2 -lgnutls
# DNS-01's answers and TSIG key files (issue 40); OpenSSL for the HMAC.
FUZZ_EXTRA_fuzz_dnsmsg := src/server/acme/dnsmsg.c
FUZZ_LIBS_fuzz_dnsmsg  := -lcrypto
FUZZ_SECONDS ?= 60
CHECK_FUZZ_SECONDS ?= 10 # per target, inside `make check`
build/fuzz/obj/%.o: %.c | fuzz-deps
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@
-include $(shell find build/fuzz/obj -name '*.d' 2>/dev/null)
.SECONDEXPANSION:
build/fuzz/fuzz_%: $$(call fuzz_obj,tests/fuzz/fuzz_%.c $$(FUZZ_BASE) $$(FUZZ_EXTRA_fuzz_$$*))
	clang -fsanitize=fuzzer,address,undefined $^ -o $@ $(FUZZ_LIBS_fuzz_$*) -lnghttp2
fuzz-deps:
	@scripts/deps.sh fuzz
fuzz-run-%: build/fuzz/%
	@mkdir -p build/fuzz/corpus-$*
	@seeds=tests/fuzz/seeds/$(*:fuzz_%=%); [ -d $$seeds ] || seeds=; \
	echo "fuzz: $* for $(FUZZ_SECONDS)s"; \
	build/fuzz/$* -max_total_time=$(FUZZ_SECONDS) -max_len=20000 \
	    -artifact_prefix=build/fuzz/ build/fuzz/corpus-$* $$seeds 2>build/fuzz/$*.log || \
	    { tail -40 build/fuzz/$*.log; exit 1; }
fuzz: $(addprefix fuzz-run-,$(FUZZ_NAMES))
# Kept, not removed as intermediates: the next run relinks nothing, and a crash can be replayed.
.SECONDARY: $(call fuzz_obj,$(FUZZ_SRC) $(FUZZ_BASE) $(FUZZ_EXTRA_fuzz_config) \
                            $(FUZZ_EXTRA_fuzz_htpasswd) $(FUZZ_EXTRA_fuzz_h3) \
                            $(FUZZ_EXTRA_fuzz_qpack_diff) $(FUZZ_EXTRA_fuzz_quic)) \
            $(addprefix build/fuzz/,$(FUZZ_NAMES))

# Not in `make check`: boots Debian's packaged kernel (6.1, the oldest we support) in qemu
# without KVM: tests/vm/selftest.sh checks scripts/vm/run (which says how the guest is made),
# then scripts/vm/test runs in the guest: the kernel and its tls ULP, build/unit, a smoke subset
# of the integration suite and the tests marked `vm`, on both engines.
# `make test-vm VM_ARGS='-k keepalive'` passes pytest args; VM_TESTS='tests/integration/test_x.py'
# runs those files instead of the smoke subset;
# VM_SCHEMES=http,https runs the smoke files over TLS too (cleartext only by default).
test-vm: all venv
	@scripts/deps.sh vm
	tests/vm/selftest.sh
	@rm -rf build/vm/out && mkdir -p build/vm/out
	scripts/vm/run -w build/vm/out -- env VM_TESTS='$(VM_TESTS)' \
	    RINGHTTPD_SCHEMES='$(VM_SCHEMES)' scripts/vm/test $(VM_ARGS)

# The binary, ringhttpd(8), the systemd units (ExecStart pointed at the installed binary) and the
# bpftrace scripts when there are any. `make uninstall` removes exactly these files.
install: $(BUILD)/ringhttpd
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR)
	install -m 0755 $(BUILD)/ringhttpd $(DESTDIR)$(BINDIR)/ringhttpd
	install -m 0644 doc/ringhttpd.8 $(DESTDIR)$(MANDIR)/man8/ringhttpd.8
	sed 's|@BINDIR@|$(BINDIR)|g' dist/ringhttpd.service >$(DESTDIR)$(UNITDIR)/ringhttpd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/ringhttpd.service
	install -m 0644 dist/ringhttpd.socket $(DESTDIR)$(UNITDIR)/ringhttpd.socket
	$(if $(BPF_SCRIPTS),install -d $(DESTDIR)$(SHAREDIR) && \
	    install -m 0644 $(BPF_SCRIPTS) $(DESTDIR)$(SHAREDIR)/)

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/ringhttpd $(DESTDIR)$(MANDIR)/man8/ringhttpd.8 \
	    $(DESTDIR)$(UNITDIR)/ringhttpd.service $(DESTDIR)$(UNITDIR)/ringhttpd.socket \
	    $(addprefix $(DESTDIR)$(SHAREDIR)/,$(notdir $(BPF_SCRIPTS)))
	-rmdir $(DESTDIR)$(SHAREDIR) 2>/dev/null

# The small variant: one static binary (glibc, liburing, OpenSSL, the compressors),
# build/static/ringhttpd, 6.9 MB stripped against the image's 23 MB (Containerfile), for a
# scratch root that only serves files over HTTP/1.1, HTTP/2 and TLS. Without HTTP/3 and ACME
# (HTTP3=no, ACME=no above: Debian ships GnuTLS's p11-kit and libunistring, and libcurl's
# dependencies, without static libraries): --version says so, a TLS port's start warns that
# HTTP/3 is not there, --acme-email is refused. A static link names what the shared libraries
# pull in themselves (libbrotlicommon, libm). The linker warns about getpwnam/getgrnam: with a
# static glibc, a --user other than the running user needs the host's NSS libraries.
static:
	@$(MAKE) --no-print-directory BUILD=build/static LDFLAGS="-static" HTTP3=no ACME=no \
	    LDLIBS="$(filter-out -lcurl,$(LDLIBS)) -lbrotlicommon -lm" build/static/ringhttpd

# A Debian package (debian/, debhelper), built by dpkg-buildpackage from a copy of the tree's
# files (tracked, and new ones git does not ignore) in a temporary directory, so the build stays
# out of the source tree; the results land in build/deb: ringhttpd_VERSION_ARCH.deb, its
# .changes and .buildinfo, the -dbgsym package and build.log.
deb:
	@scripts/deps.sh deb
	@rm -rf build/deb && mkdir -p build/deb
	@t=$$(mktemp -d /tmp/ringhttpd-deb.XXXXXX) && trap 'rm -rf "$$t"' EXIT && \
	mkdir "$$t/ringhttpd" && \
	{ git ls-files -z --cached --others --exclude-standard 2>/dev/null | \
	    xargs -0 cp --parents -t "$$t/ringhttpd" 2>/dev/null || tar -C . --exclude=./build \
	    --exclude=./.venv --exclude=./.tools --exclude=./.cache --exclude=./.git -cf - . | \
	    tar -C "$$t/ringhttpd" -xf -; } && \
	echo "deb: dpkg-buildpackage -b -us -uc in $$t/ringhttpd" && \
	(cd "$$t/ringhttpd" && dpkg-buildpackage -b -us -uc) >build/deb/build.log 2>&1 || \
	    { tail -40 build/deb/build.log; exit 1; }; \
	cp "$$t"/*.deb "$$t"/*.changes "$$t"/*.buildinfo build/deb/
	@ls build/deb/*.deb

# The .deb (lintian; installed, run under systemd, removed and purged in a fresh Debian 12 root)
# and the Containerfile (built and run with podman, or its build stage in a fresh root):
# tests/packaging, root, minutes; not in `make check` (its 20 minutes are taken): .ci/run runs it
# after. Debian roots are cached in .cache/packaging (PACKAGING_FRESH=1 makes them anew).
test-packaging: deb venv
	@scripts/deps.sh packaging
	$(PY) -m pytest -q tests/packaging

# Minutes of mixed, partly hostile load against the ASan build on both engines, then fds and
# RSS after an idle period against the start (tests/soak/soak.py). Not part of `check`.
SOAK_SECONDS ?= 600 # in all, split between the engines
soak: asan venv
	SOAK_SECONDS=$(SOAK_SECONDS) RINGHTTPD=$(abspath build/asan/ringhttpd) $(PY) tests/soak/soak.py

bench:
	bench/run
	bench/pageload/run

# The page-load bench alone (issue 42): Chromium, a shaped path, ringhttpd and the HTTP/3
# peers; it skips (exit 0) where root, Chromium or NFQUEUE are missing.
bench-pageload:
	bench/pageload/run

# The HTTP/3 load client the bench runs (h2load from Debian speaks no HTTP/3): quic-go, at the
# versions bench/h3load/go.sum pins, fetched by go from the module proxy on the first build.
# It needs Go 1.26 or later (quic-go's go.mod): bench/run puts one on PATH (bench/go.sh) and
# reports the h3 scenarios missing when it does not build.
build/h3load: bench/h3load/main.go bench/h3load/go.mod bench/h3load/go.sum
	@mkdir -p build
	cd bench/h3load && GOFLAGS=-modcacherw go build -trimpath -o ../../build/h3load .

bench-quick:
	bench/run --quick

# What one QPACK field section costs, ours beside libnghttp3's (bench/qpack_cost.sh counts it
# with callgrind); linked with libnghttp3 as the yardstick only.
build/qpack-cost: bench/qpack_cost.c src/http/h3/qpack.c src/core/huff.c src/http/h3/qpack.h src/core/huff.h
	@mkdir -p build
	$(CC) $(CPPFLAGS) -std=gnu11 $(WARN) $(CFLAGS) $(filter %.c,$^) -o $@ -lnghttp3

# Every C file is laid out as .clang-format says, by Debian 12's clang-format (14; other
# versions break some lines differently). `make format` rewrites them; `make format-check` (part
# of `make check`) lists the ones that differ and fails. Hand-aligned tables are fenced with
# `// clang-format off` / `on`. Files two folders down (src/http/h2/, src/server/acme/...) count
# too: since they moved there (issue 37) the check had passed over them, and 15 had drifted.
FORMAT_SRC := $(sort $(wildcard src/*.[ch] src/*/*.[ch] src/*/*/*.[ch] tests/unit/*.[ch] tests/fuzz/*.c \
                                tests/tools/*.c tests/seams/*.c))
format:
	@scripts/deps.sh format
	clang-format -i $(FORMAT_SRC)

format-check:
	@scripts/deps.sh format
	@bad=; for f in $(FORMAT_SRC); do \
	    clang-format --dry-run -Werror $$f >/dev/null 2>&1 || bad="$$bad $$f"; \
	done; \
	[ -z "$$bad" ] || { echo "format-check: not laid out as .clang-format says" \
	    "(make format rewrites them):"; printf '  %s\n' $$bad; exit 1; }

# The module graph (issue 26): a module is a .c with its .h, an #include of another module's .h
# an edge; fails on any circle and prints one (scripts/modgraph). `make check` runs it first.
modgraph:
	@scripts/modgraph

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
