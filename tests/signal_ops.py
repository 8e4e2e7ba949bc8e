"""Generated store operations that move the salience signals, for the column-index tests.

An operation is a tuple naming what to do, then the target's index into the list of URIs
(taken modulo its length): ``("edge", i, j)``, ``("access", i)`` or
``("access", i, times)``, ``("pin", i)``, ``("tombstone", i)``,
``("attest", i, outcome)``; or ``("write", ...)``, which the caller's ``write`` carries out.

Some generated operations are meant to be refused (a self-edge, a change to a tombstoned
memory). :class:`SignalOps` decides which from its own model of the store (which memories
it tombstoned), expects exactly those refusals with their error type, and counts them; any
other refusal, or an expected refusal that does not happen, fails the test.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import cortexgraph as cg


class SignalOps:
    """The URIs of a store's memories and the test's model of which are tombstoned.

    Attributes:
        uris: every memory's URI as written (a write appends its URI).
        tombstoned: the ids of the memories this model has tombstoned.
        refused: how many operations the store refused, by ``(operation, error type)``.
    """

    def __init__(self, uris: Iterable[cg.MemoryURI]) -> None:
        self.uris = list(uris)
        self.tombstoned: set[bytes] = set()
        self.refused: Counter[tuple[str, str]] = Counter()

    def expected_refusal(self, op: tuple[Any, ...]) -> type[cg.CortexError] | None:
        """The error the store must refuse ``op`` with, or None if it must carry it out."""
        if op[0] == "write":
            return None
        target = self.uris[op[1] % len(self.uris)].id
        if op[0] == "edge":
            other = self.uris[op[2] % len(self.uris)].id
            if other == target:
                return cg.ValidationError  # a memory cannot be linked to itself
            if {target, other} & self.tombstoned:
                return cg.TombstonedError
            return None
        if op[0] in ("pin", "tombstone") and target in self.tombstoned:
            return cg.TombstonedError
        return None  # access and attest are allowed for any memory

    def carry_out(
        self,
        cx: cg.Cortex,
        op: tuple[Any, ...],
        at: int,
        write: Callable[[tuple[Any, ...]], cg.MemoryURI],
    ) -> bool:
        """Carry out ``op`` at ``at``; False when the store refused it as the model
        expects (then nothing changed).

        Raises:
            AssertionError: the store refused an operation the model expects it to carry
                out, with another error than expected, or carried out one it must refuse.
        """
        expected = self.expected_refusal(op)
        try:
            self._run(cx, op, at, write)
        except cg.CortexError as error:
            if expected is None or not isinstance(error, expected):
                raise AssertionError(f"{op!r} was refused unexpectedly: {error!r}") from error
            self.refused[op[0], type(error).__name__] += 1
            return False
        if expected is not None:
            raise AssertionError(f"{op!r} was carried out; expected {expected.__name__}")
        if op[0] == "tombstone":
            self.tombstoned.add(self.uris[op[1] % len(self.uris)].id)
        return True

    def _run(
        self,
        cx: cg.Cortex,
        op: tuple[Any, ...],
        at: int,
        write: Callable[[tuple[Any, ...]], cg.MemoryURI],
    ) -> None:
        if op[0] == "write":
            self.uris.append(write(op))
            return
        uris = self.uris
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
