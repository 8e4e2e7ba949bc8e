"""A fixed set of context candidates, and their packed contexts as JSON.

``tests/test_context.py`` packs these items for the golden files in ``fixtures/context/``
and runs this file in subprocesses with other hash seeds to check that the same items
and budget give the same bytes. Run as a script it prints
``{budget: {"digest": ..., "tokens": ..., "items": [...]}}`` for :data:`BUDGETS`.
"""

from __future__ import annotations

import json

from cortexgraph.core.packing import ContextItem, pack_context
from cortexgraph.core.state import Record
from cortexgraph.core.taxonomy import (
    ArtifactRef,
    Constraint,
    Event,
    Fact,
    Goal,
    Memory,
    Pattern,
    Preference,
)
from cortexgraph.core.uri import MemoryURI

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20.000Z
BUDGETS = (60, 200, 1000)


def _record(n: int, memory: Memory) -> Record:
    uri = MemoryURI("agent", "project", bytes([n] * 8 + list(range(8))), 1)
    return Record(uri, memory, 1, n, T0 + 60_000 * n, 1, 1, "active", T0 + 60_000 * n)


def golden_items() -> list[ContextItem]:
    """Twelve candidates over the three layers, as a shell would rank them."""
    layout: list[tuple[str, int, Memory]] = [
        ("floor", 0, Constraint(text="Never deploy on Fridays.", tags=["deploy"], priority=9,
                                pinned=True)),
        ("floor", 1, Goal(text="Ship the v2 billing API by the end of March.",
                          summary="Ship billing v2", tags=["billing", "release"], priority=8)),
        ("floor", 2, Preference(text="Prefer small pull requests with one reviewer.",
                                tags=["review"], confidence=0.9)),
        ("floor", 3, Constraint(text="All SQL goes through the query builder; no raw strings.",
                                tags=["security", "sql"], priority=8)),
        ("floor", 4, Fact(text="Production runs on Postgres 15 in eu-west-1.",
                          tags=["infra", "postgres"], confidence=0.95, priority=6)),
        ("foreground", 0, Fact(text="Deploys run through `make ship`, which builds, tags and "
                               "pushes the image, then waits for the health check.",
                               summary="make ship deploys", tags=["deploy"], confidence=0.8)),
        ("foreground", 1, Pattern(text="Retry flaky integration tests once before failing "
                                  "the pipeline; log the retry.", tags=["ci", "tests"])),
        ("foreground", 2, Event(text="Deploy 41 failed: the health check timed out.",
                                kind="deploy", channel="ops", speaker="ci",
                                occurred_at=T0 - 3_600_000, tags=["deploy"])),
        ("background", 0, Fact(text="The staging cluster mirrors production at 1/4 scale.",
                               tags=["infra"])),
        ("background", 1, ArtifactRef(text="The deploy script.", path="scripts/ship.sh",
                                      media_type="text/x-shellscript", tags=["deploy"])),
        ("background", 2, Preference(text="Use British spelling in user-facing text.",
                                     tags=["docs"])),
        ("background", 3, Event(text="Alice joined the billing team.", kind="note",
                                tags=["team"])),
    ]  # fmt: skip
    items = []
    for n, (layer, rank, memory) in enumerate(layout, start=1):
        record = _record(n, memory)
        items.append(
            ContextItem(
                uri=str(record.uri),
                type_name=memory.type_name,
                layer=layer,
                rank=rank,
                record=record,
            )
        )
    return items


def packed() -> dict[str, dict[str, object]]:
    """The packed context of :func:`golden_items` at each of :data:`BUDGETS`."""
    out: dict[str, dict[str, object]] = {}
    for budget in BUDGETS:
        result = pack_context(list(reversed(golden_items())), budget)
        out[str(budget)] = {
            "digest": result.digest,
            "tokens": result.tokens,
            "items": [list(item) for item in result.items],
        }
    return out


if __name__ == "__main__":
    print(json.dumps(packed(), sort_keys=True))
