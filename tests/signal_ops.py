"""Generated store operations that move the salience signals, for the column-index tests.

An operation is a tuple naming what to do, then the target's index into a list of URIs
(taken modulo its length): ``("edge", i, j)``, ``("access", i)`` or
``("access", i, times)``, ``("pin", i)``, ``("tombstone", i)``,
``("attest", i, outcome)``; or ``("write", ...)``, which the caller's ``write`` carries out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cortexgraph as cg


def carry_out(
    cx: cg.Cortex,
    uris: list[cg.MemoryURI],
    op: tuple[Any, ...],
    at: int,
    write: Callable[[tuple[Any, ...]], cg.MemoryURI],
) -> bool:
    """Carry out ``op`` at ``at`` (a write's URI is appended to ``uris``); False when the
    store refused it (a self-edge, a tombstoned target, ...), so nothing changed."""
    try:
        if op[0] == "write":
            uris.append(write(op))
            return True
        target = uris[op[1] % len(uris)]
        if op[0] == "edge":
            cx.add_edge(target, uris[op[2] % len(uris)], "relates_to", at=at)
        elif op[0] == "access":
            for _ in range(op[2] if len(op) > 2 else 1):
                cx._record_access([target.head], at=at)
        elif op[0] == "pin":
            cx.update(target, pinned=True, at=at)
        elif op[0] == "tombstone":
            cx.tombstone(target, at=at)
        elif op[0] == "attest":
            cx.attest([target], outcome=op[2], at=at)
        else:
            raise AssertionError(f"unknown operation {op!r}")
    except cg.CortexError:
        return False
    return True
