# Two entry points on a fresh Debian machine (as root):
#   make demo   - set up .venv and run the LeNet demo on the simulated nv_small
#   make test   - set up .venv (+ iverilog) and run every test tier
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test test-fast lint clean setup iverilog

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

iverilog:
	@command -v iverilog >/dev/null 2>&1 || { \
	  echo "installing iverilog (apt-get)"; \
	  apt-get update -qq && apt-get install -y -qq iverilog; }

demo: $(STAMP)
	$(BIN)/opendla demo

test: $(STAMP) iverilog
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not rtl and not fpga and not conformance"

lint: $(STAMP)
	$(BIN)/ruff check accel tengine_host opendla fpga tests benchmarks scripts

clean:
	rm -rf build .pytest_cache .hypothesis
