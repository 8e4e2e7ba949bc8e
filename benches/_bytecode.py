"""Bytecode for the child interpreters a whole-process benchmark times.

An installed package runs from cached bytecode (``pip`` compiles it; otherwise the first
run writes ``__pycache__``). A machine that sets ``PYTHONDONTWRITEBYTECODE=1`` (as some
containers and CI images do), or a source tree that is read-only, makes every child
compile every module it imports from source, about 85 ms for a hook: a cost no user pays.
:func:`bytecode_env` gives the children a private bytecode cache (``PYTHONPYCACHEPREFIX``)
that a warm-up run fills, and forbids writing to it afterwards, so each timed run reads
bytecode and a module the warm-up missed shows up as a slow run rather than being
compiled silently.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["bytecode_env", "describe", "warm_up"]


def bytecode_env(base: Mapping[str, str], prefix: Path) -> dict[str, str]:
    """``base`` with bytecode read from (and only from) the cache under ``prefix``."""
    env = dict(base)
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # warm_up fills the cache; timed runs only read it
    return env


def warm_up(
    commands: Sequence[Sequence[str]], env: Mapping[str, str], stdin: Sequence[str]
) -> None:
    """Run each command once (fed the matching ``stdin``) with bytecode writing allowed,
    so that every module it imports is compiled into the cache ``env`` names."""
    writing = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for command, text in zip(commands, stdin, strict=True):
        subprocess.run(
            list(command), input=text, text=True, env=writing, check=True, capture_output=True
        )


def describe(env: Mapping[str, str]) -> str:
    """How the children get their bytecode, for a table's caption."""
    prefix = env.get("PYTHONPYCACHEPREFIX")
    if prefix:
        return "bytecode cached (PYTHONPYCACHEPREFIX, filled by one warm-up run per command)"
    if env.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return "no bytecode cache (PYTHONDONTWRITEBYTECODE): every run compiles from source"
    return "bytecode from __pycache__"
