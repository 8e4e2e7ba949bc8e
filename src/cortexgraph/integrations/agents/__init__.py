"""The agent process manager's memory: event files ingested into a store, and a runner
that spawns agents with a proof-checked scope (see ``docs/agents.md``).

The runner's modules are imported on first use: ``import cortexgraph.integrations.agents``
stays as light as ``import cortexgraph``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .events import CURSOR_NS, EVENT_TYPES, IngestReport, event_files, follow, ingest_events
    from .runner import AgentRunner, RunResult

__all__ = [
    "CURSOR_NS",
    "EVENT_TYPES",
    "AgentRunner",
    "IngestReport",
    "RunResult",
    "event_files",
    "follow",
    "ingest_events",
]

_LAZY = {
    "CURSOR_NS": ".events",
    "EVENT_TYPES": ".events",
    "IngestReport": ".events",
    "event_files": ".events",
    "follow": ".events",
    "ingest_events": ".events",
    "AgentRunner": ".runner",
    "RunResult": ".runner",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
