# cortexgraph — the README's two commands are `make demo` and `make test`.
# Both create .venv and install what they need on a fresh machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# The `local` extra needs torch. A plain `torch` requirement would pull a CUDA build of several
# GB; torch 2.13.0 (CPU build) is installed first and pinned in the same resolve, so pip never
# swaps it. Override on other machines: make install TORCH_PIN='torch==2.9.1'.
TORCH_PIN ?= torch==2.13.0

.PHONY: demo test lint typecheck pytest bench install clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install '$(TORCH_PIN)'
	$(PIP) install -e '.[dev,local,http]' '$(TORCH_PIN)'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/cortexgraph demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benches tools

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest exits 5 when it collected no tests; that is a failure here like any non-zero code
# (tests/test_ci.py checks it). PYTEST_ARGS narrows a run: make pytest PYTEST_ARGS="-k uri".
PYTEST_ARGS ?=
pytest: $(STAMP)
	CORTEXGRAPH_INVARIANTS=1 $(BIN)/python -m pytest $(PYTEST_ARGS)

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python benches/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .benchmarks
