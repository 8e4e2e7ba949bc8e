"""The types of the C form of the SMT's bulk update and build (``smt_native.c``); its
reference, and the meaning of each argument, is :mod:`cortexgraph.core.smt_apply`."""

from collections.abc import Callable

SubtreeState = tuple[int, bytes, bytes]

def apply(
    get: Callable[[bytes], object],
    items: list[tuple[bytes, bytes | None]],
    state: SubtreeState,
    writes: dict[bytes, bytes | None],
) -> tuple[SubtreeState, int] | None: ...
def build(
    keys: list[bytes], values: list[bytes], writes: dict[bytes, bytes | None]
) -> bytes | None: ...
def blake3(data: bytes) -> bytes: ...
