# ringhttpd. `make run` serves ./www on :8080; `make check` builds and runs every test.
CC       ?= cc
BUILD    ?= build
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Wshadow -Werror
CPPFLAGS += -D_GNU_SOURCE -Isrc -MMD -MP
LDLIBS   := -luring -lpthread
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
PORT     ?= 8080
VENV     := .venv
PY       := $(VENV)/bin/python

CORE_SRC   := $(wildcard src/core/*.c)
SERVER_SRC := $(CORE_SRC) $(wildcard src/*.c src/engine/*.c src/rt/*.c)
UNIT_SRC   := $(wildcard tests/unit/*.c)
TOOL_SRC   := $(wildcard tests/tools/*.c)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))

.PHONY: all run check unit integration asan deps venv fuzz bench bench-quick clean format

all: $(BUILD)/ringhttpd $(BUILD)/unit $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -std=gnu11 $(WARN) $(CFLAGS) -c $< -o $@

$(BUILD)/ringhttpd: $(call obj,$(SERVER_SRC))
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The unit binary also links the engines' shared send loop (tested against real sockets), the
# timer wheel and the file cache (tested against a real directory).
$(BUILD)/unit: $(call obj,$(CORE_SRC) src/engine/sendplan.c src/rt/timer.c src/rt/fcache.c $(UNIT_SRC))
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

unit: all asan
	$(BUILD)/unit
	build/asan/unit

integration: all asan venv
	RINGHTTPD=$(abspath $(BUILD)/ringhttpd) $(PY) -m pytest -q tests/integration
	RINGHTTPD=$(abspath build/asan/ringhttpd) $(PY) -m pytest -q -m "not slow" tests/integration

check: deps
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)

# libFuzzer targets, one per parser; `make fuzz FUZZ_SECONDS=600` for a longer run. Target
# fuzz_NAME starts from the seeds in tests/fuzz/seeds/NAME/ (and its own corpus in build/fuzz).
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_SECONDS ?= 60
CHECK_FUZZ_SECONDS ?= 10 # per target, inside `make check`
fuzz:
	@scripts/deps.sh fuzz
	@mkdir -p build/fuzz
	@set -e; for f in $(FUZZ_SRC); do \
	    n=$$(basename $$f .c); \
	    clang -g -O1 -D_GNU_SOURCE -Isrc -fsanitize=fuzzer,address,undefined \
	        $$f $(CORE_SRC) -o build/fuzz/$$n; \
	    mkdir -p build/fuzz/corpus-$$n; \
	    seeds=tests/fuzz/seeds/$${n#fuzz_}; [ -d $$seeds ] || seeds=; \
	    echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	    build/fuzz/$$n -max_total_time=$(FUZZ_SECONDS) -max_len=20000 \
	        build/fuzz/corpus-$$n $$seeds 2>build/fuzz/$$n.log || \
	        { tail -40 build/fuzz/$$n.log; exit 1; }; \
	done

bench:
	bench/run

bench-quick:
	bench/run --quick

format:
	clang-format -i $(SERVER_SRC) $(wildcard src/*.h src/*/*.h) $(UNIT_SRC)

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
