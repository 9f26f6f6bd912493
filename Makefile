# Two entry points on a fresh Debian machine (as root):
#   make demo   - set up .venv and run the LeNet demo on the simulated nv_small
#   make test   - set up .venv (+ iverilog, flatc) and run every test tier
#
# .venv gets exactly the versions in requirements.lock, the set the whole suite
# last passed with (hash-checked).  `make test DEPS=latest` installs instead the
# newest versions pyproject.toml's ranges allow; `make lock` refreshes the lock
# to those and runs the suite on it (see the README's "Dependencies").
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# pytest-xdist workers for `make test` (auto: one per CPU, at most 4); 0 runs in-process
TEST_JOBS ?= auto
# locked (requirements.lock) or latest (the newest releases pyproject.toml allows)
DEPS   ?= locked
LOCK   := requirements.lock
# The lock is resolved for this Python (the one every machine of the project has).
LOCK_PYTHON   := 3.11
LOCK_PLATFORM := x86_64-manylinux_2_28
STAMP  := $(VENV)/.installed-$(DEPS)
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test test-fast lint clean setup tools lock

ifeq ($(filter $(DEPS),locked latest),)
$(error DEPS=$(DEPS): use DEPS=locked (requirements.lock, the default) or DEPS=latest)
endif

setup: $(STAMP)

# A stamp per kind of install: switching DEPS reinstalls into the same .venv.
$(VENV)/.installed-locked: pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	rm -f $(VENV)/.installed-*
	$(BIN)/python -m pip install --quiet --upgrade pip
	@if $(BIN)/python -c 'import sys; sys.exit(sys.version_info[:2] != tuple(map(int, "$(LOCK_PYTHON)".split("."))))'; then \
	  echo "installing the locked versions ($(LOCK))"; \
	  $(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK); \
	else \
	  echo "warning: $(LOCK) is resolved for Python $(LOCK_PYTHON), .venv has" \
	       "$$($(BIN)/python -c 'import platform; print(platform.python_version())')" \
	       "- installing the newest versions pyproject.toml allows (not the tested set)" >&2; \
	  $(BIN)/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[dev]'; \
	fi
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

$(VENV)/.installed-latest: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	rm -f $(VENV)/.installed-*
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[dev]'
	touch $@

# Refresh the lock: resolve the newest versions pyproject.toml allows (with
# every file's hash), install them into a new .venv and run the whole suite on
# them.  Commit the new lock only when that passes.  uv resolves; it lives in
# its own small venv so it is never part of the tested set.
LOCK_TOOLS := build/lock-tools
lock:
	test -x $(LOCK_TOOLS)/bin/uv || { $(PYTHON) -m venv $(LOCK_TOOLS) && \
	  $(LOCK_TOOLS)/bin/python -m pip install --quiet uv; }
	$(LOCK_TOOLS)/bin/uv pip compile pyproject.toml --extra dev --upgrade --generate-hashes \
	  --python-version $(LOCK_PYTHON) --python-platform $(LOCK_PLATFORM) \
	  --custom-compile-command "make lock" --quiet -o $(LOCK)
	rm -rf $(VENV)
	$(MAKE) test DEPS=locked

# Debian tools the test tiers use: Icarus Verilog (cocotb) and flatc (the
# loadable schema's regeneration check); installed only when missing.
tools:
	@missing=""; \
	command -v iverilog >/dev/null 2>&1 || missing="$$missing iverilog"; \
	command -v flatc >/dev/null 2>&1 || missing="$$missing flatbuffers-compiler"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (apt-get)"; \
	  apt-get update -qq && apt-get install -y -qq $$missing; \
	fi

demo: $(STAMP)
	$(BIN)/opendla demo

# The slow tiers start first (tests/conftest.py: the bitstream build first of all) and
# workers take one test at a time, so nothing waits in the queue of the worker that
# builds the bitstream and the RTL simulations overlap the rest of the suite.
test: $(STAMP) tools
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --maxprocesses 4 --dist load --maxschedchunk 1 \
	  --durations=20

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not rtl and not fpga and not conformance"

lint: $(STAMP)
	$(BIN)/ruff check accel tengine_host opendla fpga tests benchmarks scripts

clean:
	rm -rf build .pytest_cache .hypothesis
