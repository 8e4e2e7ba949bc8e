"""A LangGraph ``StateGraph`` compiled with ``store=CortexStore(...)``: its nodes read and
write the store (by the injected ``store`` argument and by ``get_store()``), synchronously
and asynchronously, and what they wrote survives closing and reopening the store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

import cortexgraph as cg
from cortexgraph.integrations.langgraph import CortexStore

T0 = 1_700_000_000_000


class State(TypedDict, total=False):
    user: str
    note: str
    visits: int
    notes: list[str]


def count_visit(state: State, *, store: BaseStore) -> dict[str, Any]:
    """Reads and bumps the user's visit counter through the injected store."""
    namespace = ("users", state["user"])
    seen = store.get(namespace, "visits")
    visits = (seen.value["count"] if seen else 0) + 1
    store.put(namespace, "visits", {"count": visits})
    store.put(("notes", state["user"]), f"n{visits}", {"text": state["note"]})
    return {"visits": visits}


def read_notes(state: State) -> dict[str, Any]:
    """Lists the user's notes through get_store(), oldest first."""
    items = get_store().search(("notes", state["user"]), limit=100)
    return {"notes": [item.value["text"] for item in reversed(items)]}


def build(store: BaseStore) -> Any:
    graph = StateGraph(State)
    graph.add_node("count_visit", count_visit)
    graph.add_node("read_notes", read_notes)
    graph.add_edge(START, "count_visit")
    graph.add_edge("count_visit", "read_notes")
    graph.add_edge("read_notes", END)
    return graph.compile(store=store)


def test_graph_nodes_use_the_store_and_writes_survive_reopen(tmp_path: Path) -> None:
    """Two runs count two visits and see both notes; after closing and reopening the
    store, a third run (this time through ainvoke) continues from what was written, and
    the items are journaled memories."""
    clock = cg.ManualClock(T0)
    with CortexStore.open(tmp_path, clock=clock, sync=False) as store:
        app = build(store)
        first = app.invoke({"user": "ada", "note": "likes tea"})
        clock.advance(1_000)
        second = app.invoke({"user": "ada", "note": "works nights"})
    assert (first["visits"], first["notes"]) == (1, ["likes tea"])
    assert (second["visits"], second["notes"]) == (2, ["likes tea", "works nights"])

    clock.advance(1_000)
    with CortexStore.open(tmp_path, clock=clock, sync=False) as store:
        app = build(store)
        third = asyncio.run(app.ainvoke({"user": "ada", "note": "prefers email"}))
        assert third["visits"] == 3
        assert third["notes"] == ["likes tea", "works nights", "prefers email"]
        assert store.list_namespaces() == [("notes", "ada"), ("users", "ada")]
        assert store.cx.stats().memories == 4  # the counter and three notes
        visits = store.get(("users", "ada"), "visits")
        assert visits is not None and visits.value == {"count": 3}
