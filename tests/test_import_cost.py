"""What ``import cortexgraph`` costs a fresh interpreter: which modules it loads.

Every entry point (the library, the ``cortexgraph`` command, the Claude Code hooks) starts
a new interpreter, so the package must not pull in heavy optional dependencies (an
embedding model's torch, an HTTP client, the vector index) just to be imported. The public
names are imported on first access instead (a PEP 562 ``__getattr__`` in the package's
``__init__``). The time itself is measured by ``benches/import_time.py``, not asserted here:
a timing bound would be flaky on a loaded machine.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cortexgraph as cg

SRC = Path(__file__).resolve().parent.parent / "src"

HEAVY = [
    "torch",
    "sentence_transformers",
    "hnswlib",
    "httpx",
    "onnxruntime",
    "tokenizers",
    "safetensors",
    "numpy",
    "lmdb",
    "tqdm",
    "sqlite3",
    "mcp",
    "langgraph",
    "langchain_core",
    "pydantic",
    "anyio",
    "cryptography",
    "ray",
]


def _modules_after(code: str, *, top_level: bool = True) -> set[str]:
    """The modules loaded by a fresh interpreter that runs ``code``: their top-level names,
    or with ``top_level=False`` their full dotted names."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    names = json.loads(done.stdout.splitlines()[-1])
    return {name.split(".")[0] for name in names} if top_level else set(names)


def test_import_loads_no_heavy_module() -> None:
    """``import cortexgraph`` alone loads none of the heavy third-party modules."""
    loaded = _modules_after("import cortexgraph")
    assert "cortexgraph" in loaded
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_first_access_imports_the_defining_module() -> None:
    """Touching a lazy public name loads what it needs (numpy, LMDB), and nothing else
    heavy: ``cortexgraph.open`` works without torch or the HTTP client."""
    loaded = _modules_after("import cortexgraph\ncortexgraph.open")
    assert {"numpy", "lmdb"} <= loaded
    assert loaded.isdisjoint({"torch", "sentence_transformers", "httpx", "onnxruntime"})


def test_lazy_names_are_the_public_ones_and_resolve_to_their_definitions() -> None:
    """Every public name is either defined at import or listed for lazy import, each lazy
    name resolves to the object its module defines, and ``dir()`` lists them all."""
    lazy = cg._LAZY
    assert set(cg.__all__) <= set(lazy) | set(vars(cg))
    for name, module in lazy.items():
        assert getattr(cg, name) is getattr(importlib.import_module(module, "cortexgraph"), name)
    assert set(cg.__all__) <= set(dir(cg))


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name the package does not define raises AttributeError naming it, as before."""
    with pytest.raises(AttributeError, match="no_such_name"):
        cg.no_such_name  # noqa: B018


def test_cli_parser_loads_no_store() -> None:
    """Building the ``cortexgraph`` command's parser (what ``--help`` and every usage error
    do) loads neither numpy nor LMDB: each command imports the library when it runs."""
    loaded = _modules_after("from cortexgraph.cli import build_parser\nbuild_parser()")
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_cli_help_exits_cleanly() -> None:
    """``python -m cortexgraph.cli --help`` still prints every command and exits 0."""
    done = subprocess.run(
        [sys.executable, "-m", "cortexgraph.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    for command in ("recall", "remember", "export", "extract"):
        assert command in done.stdout


def test_a_keyword_recall_loads_no_rarely_used_verb(tmp_path: Path) -> None:
    """A ``cortexgraph recall --mode keyword`` process (the hot path of a prompt hook) loads
    neither the export format, replay verification, scope bundles, compaction nor the
    context packer: those load in the commands and methods that use them."""
    cg.open(tmp_path, "agent").close()
    argv = ["recall", "deploy", "--mode", "keyword", "--root", str(tmp_path)]
    code = (
        "import io, contextlib\n"
        "from cortexgraph.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main({argv!r}) == 0"
    )
    loaded = _modules_after(code, top_level=False)
    assert "cortexgraph.recall" in loaded
    rare = {f"cortexgraph.{name}" for name in ("io", "replay", "scope", "compact", "context")}
    assert loaded.isdisjoint(rare), sorted(loaded & rare)
