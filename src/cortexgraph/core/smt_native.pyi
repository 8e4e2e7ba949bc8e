"""The types of the C forms in ``smt_native.c``: the SMT's bulk update and build (their
reference, and the meaning of each argument, is :mod:`cortexgraph.core.smt_apply`), BLAKE3
of one chunk (:mod:`cortexgraph.core.hashing`) and the columns of
``cortexgraph.core.segments.Postings.from_docs``."""

from collections.abc import Callable
from typing import Any

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
def columns(values: list[Any], rank: dict[str, int]) -> tuple[bytes, bytes] | None: ...
