# Two entry points on a fresh Debian machine (as root):
#   make demo   - set up .venv and run the LeNet demo on the simulated nv_small
#   make test   - set up .venv (+ iverilog, flatc) and run every test tier
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# pytest-xdist workers for `make test` (auto: one per CPU, at most 4); 0 runs in-process
TEST_JOBS ?= auto
STAMP  := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test test-fast lint clean setup tools

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

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
