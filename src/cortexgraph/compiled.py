"""Which of cortexgraph's modules run compiled, and the switch back to their sources.

The write path's and the replay's hot modules (:data:`MODULES`) are plain, fully typed
Python that the build also compiles with mypyc (``setup.py``) into C extensions beside
their sources: the same code, about 1.5x faster. The sources stay the reference, and are
what runs when:

- ``CORTEXGRAPH_PURE_PYTHON`` is set to anything but ``""`` or ``"0"`` (the test suite's
  second pass runs so, and so can anyone who wants the interpreted code, to debug it);
- nothing was compiled (built without a C compiler, or with ``CORTEXGRAPH_PURE_PYTHON``
  set at build time), or the compiled modules cannot be loaded;
- a source changed after the build (its SHA-256 differs from the one the build recorded
  in ``_compiled_sources.json``): an edited checkout never runs stale compiled code.

The choice is all or nothing (compiled modules call each other directly, so a mix would
run the old code of a compiled module from a new source's caller) and is made once, at
the first import of one of :data:`MODULES` (``import cortexgraph`` alone reads nothing).
:func:`state` says what was chosen and why, and ``cortexgraph --version`` prints it.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from pathlib import Path
from types import ModuleType

__all__ = [
    "ENV",
    "GROUP",
    "MODULES",
    "NATIVE",
    "NATIVE_SOURCE",
    "SOURCES_FILE",
    "decide",
    "describe",
    "install",
    "pure_requested",
    "source_digests",
    "state",
]

#: the compiled modules: what a write, a rebuild and a verify spend their time in
MODULES: tuple[str, ...] = (
    "cortexgraph.core.body",
    "cortexgraph.core.codec",
    "cortexgraph.core.commitments",
    "cortexgraph.core.hashing",
    "cortexgraph.core.journal",
    "cortexgraph.core.keys",
    "cortexgraph.core.postings",
    "cortexgraph.core.segments",
    "cortexgraph.core.signals",
    "cortexgraph.core.smt_apply",
    "cortexgraph.core.smt_store",
    "cortexgraph.core.state",
    "cortexgraph.core.text",
    "cortexgraph.store.memtxn",
    "cortexgraph.writing",
)
#: the C extension the build also compiles, from a C source beside the core's modules: the
#: SMT's bulk update and build (``core.smt_apply``, its reference, uses it when it runs
#: compiled itself); its source's digest is recorded with theirs
NATIVE = "cortexgraph.core.smt_native"
NATIVE_SOURCE = "core/smt_native.c"
#: the shared library mypyc builds for :data:`MODULES` (a top-level module)
GROUP = "cortexgraph__mypyc"
#: the SHA-256 of each compiled module's source at build time, beside this file
SOURCES_FILE = "_compiled_sources.json"
ENV = "CORTEXGRAPH_PURE_PYTHON"

_PACKAGE = Path(__file__).resolve().parent
_decision: tuple[bool, str] | None = None


def _source(name: str, package: Path = _PACKAGE) -> Path:
    """The source file of module ``name`` (one of :data:`MODULES`, or :data:`NATIVE`)."""
    if name == NATIVE:
        return package.joinpath(*NATIVE_SOURCE.split("/"))
    return package.joinpath(*name.split(".")[1:]).with_suffix(".py")


def source_digests(package: Path = _PACKAGE) -> dict[str, str]:
    """The SHA-256 (hex) of the sources of :data:`MODULES` and :data:`NATIVE` under
    ``package``."""
    return {
        name: hashlib.sha256(_source(name, package).read_bytes()).hexdigest()
        for name in (*MODULES, NATIVE)
    }


def decide(package: Path = _PACKAGE) -> tuple[bool, str]:
    """Whether the modules of ``package`` are to run compiled, and why (see the module
    docstring); :func:`state` is this for the installed package, decided once."""
    if pure_requested():
        return False, f"{ENV} is set"
    try:
        recorded = json.loads((package / SOURCES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False, "no compiled modules were built"
    try:
        current = source_digests(package)
    except OSError as exc:
        return False, f"a compiled module's source cannot be read ({exc})"
    changed = sorted(name for name in current if recorded.get(name) != current[name])
    if changed:
        return False, f"sources changed since the build: {', '.join(changed)}"
    if importlib.util.find_spec(GROUP) is None or importlib.util.find_spec(NATIVE) is None:
        return False, "the compiled modules are not installed"
    return True, "compiled with mypyc"


def describe() -> str:
    """One line for people: how the hot modules run, and why."""
    compiled, why = state()
    return f"{len(MODULES)} hot modules run {'compiled' if compiled else 'as sources'} ({why})"


def state() -> tuple[bool, str]:
    """Whether :data:`MODULES` run compiled, and why (decided on first call)."""
    global _decision
    if _decision is None:
        _decision = decide()
    return _decision


class _SourceFinder(MetaPathFinder):
    """Finds :data:`MODULES` as their sources when they are not to run compiled (an
    extension module beside its source would otherwise be found first)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _NAMES or state()[0]:
            return None
        source = str(_source(fullname))
        loader = importlib.machinery.SourceFileLoader(fullname, source)
        return importlib.util.spec_from_file_location(fullname, source, loader=loader)


_NAMES = frozenset(MODULES)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _SourceFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder())


def pure_requested() -> bool:
    """Whether ``CORTEXGRAPH_PURE_PYTHON`` asks for the sources."""
    return os.environ.get(ENV, "") not in ("", "0")

