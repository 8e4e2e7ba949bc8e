"""Build script: the package is in ``pyproject.toml``; this adds the compiled modules.

The modules listed in ``src/cortexgraph/compiled.py`` (``MODULES``) are compiled with
mypyc into C extensions beside their sources, with the one C extension written as C
(``NATIVE``, the SMT's bulk update and build), and the SHA-256 of each source is recorded
in ``src/cortexgraph/_compiled_sources.json``, so that an edited source never runs as its
stale compiled form (``cortexgraph.compiled`` then runs the sources, all of them).
With ``CORTEXGRAPH_PURE_PYTHON`` set (not ``0``) nothing is compiled, and where compiling
fails (no C compiler) the build says so and installs the sources alone, which run as they are.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
PACKAGE = HERE / "src" / "cortexgraph"


def _compiled_module() -> Any:
    spec = importlib.util.spec_from_file_location("_cortexgraph_compiled", PACKAGE / "compiled.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COMPILED = _compiled_module()
SOURCES_FILE = PACKAGE / COMPILED.SOURCES_FILE


def ext_modules() -> list[object]:
    # an editable build compiles into the source tree: drop what an earlier build left
    # there (a module no longer compiled would otherwise be found before its source)
    for stale in [*PACKAGE.rglob("*.so"), *PACKAGE.parent.glob(f"{COMPILED.GROUP}.*")]:
        stale.unlink()
    if COMPILED.pure_requested():
        SOURCES_FILE.unlink(missing_ok=True)
        return []
    from mypyc.build import mypycify

    paths = [str(Path("src", *name.split(".")).with_suffix(".py")) for name in COMPILED.MODULES]
    # The build's environment holds only the build requirements: the runtime libraries
    # mypy cannot see there are typed Any for compiling (`make typecheck` checks them).
    flags = ["--ignore-missing-imports", "--no-warn-return-any", "--no-warn-unused-ignores"]
    extensions = mypycify([*flags, *paths], opt_level="3", group_name="cortexgraph")
    native = Extension(
        COMPILED.NATIVE,
        [str(Path("src", "cortexgraph", *COMPILED.NATIVE_SOURCE.split("/")))],
        extra_compile_args=["-O3"],
    )
    digests = COMPILED.source_digests(PACKAGE)
    SOURCES_FILE.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", "utf-8")
    return [*extensions, native]


class BuildExt(build_ext):  # type: ignore[misc]
    """Builds the extensions, or, where that fails, leaves the package pure Python."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, or a compile error: the sources still run
            SOURCES_FILE.unlink(missing_ok=True)
            self.warn(f"compiling with mypyc failed ({exc}); cortexgraph runs as its sources")


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildExt})
