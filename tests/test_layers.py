"""The package's import layering and module privacy, checked statically with ``ast``.

Layers, lowest first: ``errors``; the pure ``core``; the shell (``store``, ``vector``,
``embed``, ``index``, ``clock``, ``signing``); the plumbing the verbs share (``records``,
``reading``, ``writing``, ``handle``); the verb modules (``batch``, ``embedding``, ``find``,
``recall``, ``context``, ``compact``, ``scope``, ``replay``, ``trust``, ``fleet``); the
facade (``cortex``, ``merkle`` and the package's ``__init__``); and what is built on the
public API (``cli``, ``demo``, ``integrations``, ``extract``, ``io``, ``migrate``). A module
may import its own layer or lower ones, never a higher one, and the import graph has no
cycle. Every import counts: top-level,
in-function and ``TYPE_CHECKING`` ones alike.

Privacy: no module imports a ``_private`` name from another module of the package, and no
module reads ``x._name`` unless ``_name`` is defined in that module (``self._x`` of its
own classes, module-local helpers).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "cortexgraph"

#: (layer name, top-level names under the package), lowest layer first
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("errors", frozenset({"errors", "compiled"})),
    ("core", frozenset({"core"})),
    ("shell", frozenset({"store", "vector", "embed", "index", "clock", "signing"})),
    ("plumbing", frozenset({"records", "reading", "writing", "handle"})),
    (
        "verbs",
        frozenset(
            {
                "batch",
                "embedding",
                "find",
                "recall",
                "context",
                "compact",
                "scope",
                "scope_env",
                "replay",
                "trust",
                "fleet",
            }
        ),
    ),
    ("facade", frozenset({"cortex", "merkle", "replication", "__init__"})),
    ("outer", frozenset({"cli", "demo", "integrations", "extract", "io", "migrate", "__main__"})),
]


def modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join([package, *parts])] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imports_of(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """The package modules ``name`` (at ``path``) imports, each with its line."""
    base = name if _is_package(path) else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target not in known:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in known else target), node.lineno


def import_graph(root: Path, package: str) -> dict[str, dict[str, int]]:
    """Module -> {imported package module: line of the first such import}."""
    files = modules(root, package)
    known = set(files)
    graph: dict[str, dict[str, int]] = {}
    for name, path in files.items():
        edges = graph.setdefault(name, {})
        for target, line in imports_of(name, path, known):
            if target != name:
                edges.setdefault(target, line)
    return graph


def layer_of(module: str, package: str) -> int:
    """The index in :data:`LAYERS` of a module's layer."""
    rest = module[len(package) + 1 :] if module != package else "__init__"
    top = rest.split(".")[0]
    for rank, (_, names) in enumerate(LAYERS):
        if top in names:
            return rank
    raise AssertionError(f"{module} belongs to no layer; add it to LAYERS")


def layering_problems(graph: dict[str, dict[str, int]], package: str) -> list[str]:
    """Every import of a higher layer, as ``"a:line imports b (layer x above y)"``."""
    problems = []
    for module, edges in sorted(graph.items()):
        own = layer_of(module, package)
        for target, line in sorted(edges.items()):
            theirs = layer_of(target, package)
            if theirs > own:
                problems.append(
                    f"{module}:{line} imports {target}"
                    f" ({LAYERS[theirs][0]} is above {LAYERS[own][0]})"
                )
    return problems


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import cycle as a list of modules (first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def _defined_private_names(tree: ast.Module) -> set[str]:
    """The ``_names`` a module defines: functions, classes, assigned names and
    attributes, slots, parameters and imports bound under a private alias."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # __slots__ entries, attrs field names
    return {name for name in names if name.startswith("_")}


#: namedtuple's public API, whose names start with an underscore
_NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make"})

def privacy_problems(path: Path, known: set[str]) -> list[str]:
    """Private names of other modules that the module at ``path`` uses."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _defined_private_names(tree)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or node.module in known):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    problems.append(f"{path.name}:{node.lineno} imports {alias.name}")
        elif isinstance(node, ast.Attribute):
            name = node.attr
            if not name.startswith("_") or name.startswith("__") or name in own | _NAMEDTUPLE_API:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            problems.append(f"{path.name}:{node.lineno} reads .{name}")
    return problems


def test_layers_are_respected() -> None:
    """No module of the package imports a module of a higher layer."""
    graph = import_graph(PACKAGE, "cortexgraph")
    assert layering_problems(graph, "cortexgraph") == []


def test_the_import_graph_has_no_cycle() -> None:
    """The package's import graph, every import counted, is acyclic."""
    assert find_cycle(import_graph(PACKAGE, "cortexgraph")) is None


def test_no_module_uses_another_modules_private_names() -> None:
    """No ``from m import _name`` of a package module, and no ``x._name`` for a ``_name``
    the module does not define itself."""
    files = modules(PACKAGE, "cortexgraph")
    problems = [p for path in files.values() for p in privacy_problems(path, set(files))]
    assert problems == []


def _plant(root: Path, files: dict[str, str]) -> Path:
    package = root / "cortexgraph"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A small package laid out like the real one, with clean imports."""
    return _plant(
        tmp_path,
        {
            "__init__.py": "from .cortex import Cortex\n",
            "errors.py": "",
            "core/__init__.py": "",
            "core/keys.py": "from ..errors import CortexError\n",
            "store/__init__.py": "",
            "store/env.py": "from ..core.keys import x\n",
            "handle.py": "from .store.env import Environment\n",
            "find.py": "from .handle import Handle\n",
            "cortex.py": "from . import find\nfrom .handle import Handle\n",
            "cli.py": "from . import cortex\n",
        },
    )


def test_the_checker_passes_a_clean_package(planted: Path) -> None:
    """The synthetic package, as planted, has no layering problem and no cycle (so the
    failures below come from the one import each adds)."""
    graph = import_graph(planted, "cortexgraph")
    assert graph["cortexgraph.cortex"] == {"cortexgraph.find": 1, "cortexgraph.handle": 2}
    assert layering_problems(graph, "cortexgraph") == []
    assert find_cycle(graph) is None


def test_a_planted_back_import_fails_the_layering(planted: Path) -> None:
    """A verb module importing the facade inside a function (the old way of hiding a
    cycle) is caught as a layering violation and as a cycle."""
    (planted / "find.py").write_text(
        "from .handle import Handle\n\ndef run():\n    from .cortex import Cortex\n"
    )
    graph = import_graph(planted, "cortexgraph")
    assert layering_problems(graph, "cortexgraph") == [
        "cortexgraph.find:4 imports cortexgraph.cortex (facade is above verbs)"
    ]
    assert find_cycle(graph) == ["cortexgraph.cortex", "cortexgraph.find", "cortexgraph.cortex"]


def test_a_planted_type_checking_import_of_the_shell_from_core_fails(planted: Path) -> None:
    """A ``TYPE_CHECKING`` import still counts: ``core`` importing ``store`` is caught."""
    (planted / "core" / "keys.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..store.env import E\n"
    )
    problems = layering_problems(import_graph(planted, "cortexgraph"), "cortexgraph")
    assert problems == [
        "cortexgraph.core.keys:3 imports cortexgraph.store.env (shell is above core)"
    ]


def test_the_privacy_check_catches_a_reach_into_another_module(planted: Path) -> None:
    """``cx._env`` in a module that does not define ``_env``, and ``from m import _x``,
    are both reported; ``self._x`` and a module's own ``_helper`` are not."""
    (planted / "find.py").write_text(
        "from .handle import _parse\n"
        "def _own():\n    pass\n"
        "class A:\n    def f(self, cx):\n        self._y = 1\n        _own()\n"
        "        return cx._env\n"
    )
    files = modules(planted, "cortexgraph")
    assert privacy_problems(planted / "find.py", set(files)) == [
        "find.py:1 imports _parse",
        "find.py:8 reads ._env",
    ]
