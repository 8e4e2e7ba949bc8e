"""The core is pure: no clock, randomness, environment, files, or shell libraries.

This is the import contract of docs/architecture.md, checked two ways: statically over the
source of every module in ``cortexgraph.core``, and dynamically by importing the core in a
fresh interpreter and looking at what got loaded.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "src" / "cortexgraph" / "core"

ALLOWED_MODULES = {
    # standard library modules that do no I/O and read no clock or randomness
    "__future__",
    "base64",
    "binascii",
    "bisect",
    "collections",
    "collections.abc",
    "dataclasses",
    "enum",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "json",
    "math",
    "operator",
    "re",
    "struct",
    "typing",
    "unicodedata",
    # pure third-party libraries of the runtime
    "attrs",
    "blake3",
    "cbor2",
    "numpy",
}
FORBIDDEN_NAMES = {"open", "input", "print", "exec", "eval", "compile", "__import__"}


def core_modules() -> list[Path]:
    return sorted(CORE.glob("*.py"))


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: p.name)
def test_core_module_imports_only_pure_modules(path: Path) -> None:
    """Every import in a core module is an allowed pure module, another core module, or
    cortexgraph.errors; no forbidden builtins (open, print, eval, ...) are called."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name in ALLOWED_MODULES, f"{path.name} imports {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                assert node.module in ALLOWED_MODULES, f"{path.name} imports {node.module}"
            elif node.level == 2:
                assert node.module == "errors", f"{path.name} imports ..{node.module}"
            else:
                assert node.level == 1, f"{path.name} has a relative import of level {node.level}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in FORBIDDEN_NAMES, f"{path.name} calls {node.func.id}()"


def test_the_checker_catches_an_impure_module(tmp_path: Path) -> None:
    """The static check is not vacuous: it flags a module that reads the clock."""
    bad = tmp_path / "bad.py"
    bad.write_text("import time\n\ndef now():\n    return time.time()\n")
    with pytest.raises(AssertionError, match="imports time"):
        test_core_module_imports_only_pure_modules(bad)


def test_importing_the_core_loads_no_shell_library() -> None:
    """A fresh interpreter that imports every core module (with the package's __init__
    bypassed, since it imports the facade on purpose) has loaded no shell library and no
    shell package of cortexgraph."""
    modules = [f"cortexgraph.core.{p.stem}" for p in core_modules() if p.stem != "__init__"]
    script = f"""
import importlib, sys, types
package = types.ModuleType("cortexgraph")
package.__path__ = [{str(CORE.parent)!r}]
sys.modules["cortexgraph"] = package
for name in {modules!r}:
    importlib.import_module(name)
shell = {{"lmdb", "hnswlib", "torch", "httpx", "sentence_transformers", "onnxruntime",
         "tokenizers", "safetensors"}}
pure = ("cortexgraph.core", "cortexgraph.errors")
bad = [m for m in sys.modules if m.split(".")[0] in shell
       or (m.startswith("cortexgraph.") and not m.startswith(pure))]
print(",".join(sorted(bad)))
# the C form of the SMT (core/smt_native.c) is a core module without a .py source, loaded
# by smt_apply where it was built: it reads nothing either
print(len([m for m in sys.modules
           if m.startswith("cortexgraph.core.") and m != "cortexgraph.core.smt_native"]))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    bad, loaded = out.stdout.splitlines()
    assert bad == ""
    assert int(loaded) == len(modules)
