# cortexgraph — the README's two commands are `make demo` and `make test`.
# Both create .venv and install what they need on a fresh machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# The model files of the embedders are distributions in models/; they are installed from here
# first, so that the extras that name them resolve without an index.
MODELS := ./models/minilm-onnx ./models/minilm-static
# Only the `torch` extra needs torch, and `make test` does not install it. A plain `torch`
# requirement would pull a CUDA build of several GB; torch 2.13.0 (CPU build) is installed
# first and pinned in the same resolve, so pip never swaps it. Override on other machines:
# make test-torch TORCH_PIN='torch==2.9.1'.
TORCH_PIN ?= torch==2.13.0
TORCH_STAMP := $(VENV)/.installed-torch

.PHONY: demo test test-torch lint typecheck pytest bench install clean

# The modules cortexgraph.compiled lists are compiled with mypyc when the package is
# installed (setup.py), with the C SMT (core/smt_native.c); COMPILED stamps that build, and an
# edit of one of their sources builds them again (until then they run as their sources:
# see cortexgraph.compiled).
COMPILED := $(VENV)/.compiled
COMPILED_SOURCES := setup.py src/cortexgraph/compiled.py src/cortexgraph/core/smt_native.c $(shell $(PYTHON) -c "import runpy; \
	names = runpy.run_path('src/cortexgraph/compiled.py')['MODULES']; \
	print(*('src/' + name.replace('.', '/') + '.py' for name in names))")

$(STAMP): pyproject.toml $(wildcard models/*/pyproject.toml models/*/src/*/__init__.py)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install $(MODELS)
	$(PIP) install -e '.[dev,local,static,http,mcp,langgraph,sign,ray]'
	@touch $(STAMP) $(COMPILED)

$(COMPILED): $(STAMP) $(COMPILED_SOURCES)
	$(PIP) install --no-deps -e .
	@touch $(COMPILED)

$(TORCH_STAMP): $(STAMP)
	$(PIP) install '$(TORCH_PIN)'
	$(PIP) install -e '.[torch]' '$(TORCH_PIN)'
	@touch $(TORCH_STAMP)

install: $(STAMP) $(COMPILED)

demo: $(STAMP) $(COMPILED)
	$(BIN)/cortexgraph demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benches tools conftest.py setup.py

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest exits 5 when it collected no tests; that is a failure here like any non-zero code
# (tests/test_ci.py checks it). PYTEST_ARGS narrows a run: make pytest PYTEST_ARGS="-k uri".
# The suite runs twice: on the compiled modules (which must be there, unless
# CORTEXGRAPH_PURE_PYTHON is set), then on their sources (CORTEXGRAPH_PURE_PYTHON=1).
PYTEST_ARGS ?=
export REQUIRE_COMPILED := import sys, cortexgraph.compiled as c; print(c.describe()); \
	sys.exit(0 if c.state()[0] or c.pure_requested() else 1)
pytest: $(STAMP) $(COMPILED)
	@$(BIN)/python -c "$$REQUIRE_COMPILED"
	CORTEXGRAPH_INVARIANTS=1 $(BIN)/python -m pytest $(PYTEST_ARGS)
	CORTEXGRAPH_INVARIANTS=1 CORTEXGRAPH_PURE_PYTHON=1 $(BIN)/python -m pytest $(PYTEST_ARGS)

test: lint typecheck pytest

# The torch extra's tests (TorchEmbedder, and LocalEmbedder against the torch model in the same
# process); `make test` skips them, saying the extra is not installed.
test-torch: $(TORCH_STAMP)
	CORTEXGRAPH_INVARIANTS=1 $(BIN)/python -m pytest -m torch $(PYTEST_ARGS)

bench: $(TORCH_STAMP) $(COMPILED)
	$(BIN)/python benches/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .benchmarks build
	find src -name '*.so' -delete
	rm -f src/cortexgraph/_compiled_sources.json
