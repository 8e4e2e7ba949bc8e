"""Collection rules for the whole suite (tests, doctests in the sources and the docs).

The suite runs twice (``make pytest``): with the compiled modules of
``cortexgraph.compiled.MODULES``, then with ``CORTEXGRAPH_PURE_PYTHON=1`` on their sources.
A compiled module is an extension, not its source file, so its doctests are collected in
the second pass only.
"""

from __future__ import annotations

from pathlib import Path

from cortexgraph import compiled

_SOURCES = frozenset(
    Path(__file__).resolve().parent.joinpath("src", *name.split(".")).with_suffix(".py")
    for name in compiled.MODULES
)


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    if collection_path.resolve() in _SOURCES and compiled.state()[0]:
        return True  # its doctests run in the pure-Python pass
    return None
