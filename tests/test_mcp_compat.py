"""``--compat memory-server``: the reference MCP memory server's tools over a cortexgraph
store. A replay of the server's documented calls (its README's examples and the
behaviour its tool list documents) checks the documented results; the mapping onto
memories keeps deletions in the audit trail."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp

import cortexgraph as cg
from cortexgraph.integrations.mcp import build_server
from cortexgraph.integrations.mcp.compat import NS

T0 = 1_700_000_000_000
TOOLS = [
    "create_entities", "create_relations", "add_observations", "delete_entities",
    "delete_observations", "delete_relations", "read_graph", "search_nodes", "open_nodes",
]  # fmt: skip

JOHN = {"name": "John_Smith", "entityType": "person", "observations": ["Speaks fluent Spanish"]}
ANTHROPIC = {"name": "Anthropic", "entityType": "organization", "observations": []}
WORKS_AT = {"from": "John_Smith", "to": "Anthropic", "relationType": "works_at"}


def serve(root: Path, script: Callable[[mcp.Client], Awaitable[Any]]) -> Any:
    """Run ``script`` against a fresh in-process compat server over ``root``."""
    server = build_server(root, "agent", compat="memory-server", clock=cg.ManualClock(T0))

    async def go() -> Any:
        async with mcp.Client(server) as client:
            return await script(client)

    return anyio.run(go)


async def call(client: mcp.Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


def test_tool_set_and_argument_shapes(tmp_path: Path) -> None:
    """Exactly the reference server's nine tools, with its argument names (camelCase
    ``entityType``, ``entityName``, ``from``/``to``/``relationType``) and required
    fields."""

    async def script(client: mcp.Client) -> dict[str, Any]:
        return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    schemas = serve(tmp_path, script)
    assert sorted(schemas) == sorted(TOOLS)
    entity = schemas["create_entities"]["$defs"]["EntityIn"]
    assert entity["required"] == ["name", "entityType", "observations"]
    relation = schemas["create_relations"]["$defs"]["RelationIn"]
    assert relation["required"] == ["from", "to", "relationType"]
    assert schemas["add_observations"]["$defs"]["ObservationIn"]["required"] == [
        "entityName", "contents"
    ]  # fmt: skip
    assert schemas["delete_entities"]["required"] == ["entityNames"]
    assert schemas["delete_observations"]["$defs"]["DeletionIn"]["required"] == [
        "entityName", "observations"
    ]  # fmt: skip
    assert schemas["search_nodes"]["required"] == ["query"]
    assert schemas["open_nodes"]["required"] == ["names"]
    assert schemas["read_graph"].get("required", []) == []


def test_replay_of_the_documented_calls(tmp_path: Path) -> None:
    """The README's entity, relation and observation examples, replayed call by call,
    with each documented behaviour checked: existing entities and duplicate relations
    are ignored, only new observations are added, a missing entity fails, searches
    match names, types and observations case-insensitively, open_nodes returns the
    relations between the nodes asked for and skips unknown names, deletes are silent
    for what does not exist, and deleting an entity removes its relations."""

    async def script(client: mcp.Client) -> None:
        created = await call(client, "create_entities", entities=[JOHN, ANTHROPIC])
        assert created == {"entities": [JOHN, ANTHROPIC]}
        again = await call(client, "create_entities", entities=[JOHN])  # ignored: exists
        assert again == {"entities": []}

        assert await call(client, "create_relations", relations=[WORKS_AT]) == {
            "relations": [WORKS_AT]
        }
        assert await call(client, "create_relations", relations=[WORKS_AT]) == {"relations": []}

        added = await call(
            client,
            "add_observations",
            observations=[
                {
                    "entityName": "John_Smith",
                    "contents": [
                        "Speaks fluent Spanish", "Graduated in 2019", "Prefers morning meetings"
                    ],
                }
            ],
        )  # fmt: skip
        assert added == {
            "results": [
                {
                    "entityName": "John_Smith",
                    "addedObservations": ["Graduated in 2019", "Prefers morning meetings"],
                }
            ]
        }
        missing = await client.call_tool(
            "add_observations",
            {"observations": [
                {"entityName": "Anthropic", "contents": ["AI safety company"]},
                {"entityName": "Nobody", "contents": ["x"]},
            ]},
        )  # fmt: skip
        assert missing.is_error
        assert "Entity with name Nobody not found" in missing.content[0].text  # type: ignore[union-attr]

        john = {
            **JOHN,
            "observations": [
                "Speaks fluent Spanish", "Graduated in 2019", "Prefers morning meetings"
            ],
        }  # fmt: skip
        graph = await call(client, "read_graph")
        # the failed call wrote nothing, not even Anthropic's observation
        assert graph == {"entities": [john, ANTHROPIC], "relations": [WORKS_AT]}

        assert await call(client, "search_nodes", query="SPANISH") == {
            "entities": [john], "relations": []
        }  # fmt: skip
        assert await call(client, "search_nodes", query="organ") == {
            "entities": [ANTHROPIC], "relations": []
        }  # fmt: skip
        assert await call(client, "search_nodes", query="n") == graph  # both names
        assert await call(client, "open_nodes", names=["Anthropic", "John_Smith", "Ghost"]) == (
            graph
        )
        assert await call(client, "open_nodes", names=["John_Smith"]) == {
            "entities": [john], "relations": []
        }  # fmt: skip

        ok = await call(
            client,
            "delete_observations",
            deletions=[
                {"entityName": "John_Smith", "observations": ["Graduated in 2019", "never said"]},
                {"entityName": "Ghost", "observations": ["x"]},
            ],
        )
        assert ok == {"success": True, "message": "Observations deleted successfully"}
        ghost = {"from": "Ghost", "to": "Anthropic", "relationType": "haunts"}
        assert await call(client, "delete_relations", relations=[ghost]) == {
            "success": True, "message": "Relations deleted successfully"
        }  # fmt: skip
        john["observations"] = ["Speaks fluent Spanish", "Prefers morning meetings"]
        assert await call(client, "read_graph") == {
            "entities": [john, ANTHROPIC], "relations": [WORKS_AT]
        }  # fmt: skip

        assert await call(client, "delete_entities", entityNames=["Anthropic", "Ghost"]) == {
            "success": True, "message": "Entities deleted successfully"
        }  # fmt: skip
        assert await call(client, "read_graph") == {"entities": [john], "relations": []}

        await call(client, "create_relations", relations=[WORKS_AT])  # a dangling one is kept
        await call(client, "delete_relations", relations=[WORKS_AT])
        assert (await call(client, "read_graph"))["relations"] == []

    serve(tmp_path, script)


def test_mapping_keeps_the_audit_trail_and_survives_a_restart(tmp_path: Path) -> None:
    """Entities, observations and relations are memories in namespace ``kg`` (an
    observation ``refines`` its entity, a relation ``relates_to`` its endpoints); deletes
    are tombstones, so every memory stays resolvable with its history, and a new server
    on the same store reads the same graph. Names and types are kept exactly, spaces,
    parentheses and all."""
    odd = {"name": "Dr. Ada (Lovelace)", "entityType": "person (historical)", "observations": []}

    async def build(client: mcp.Client) -> Any:
        await call(client, "create_entities", entities=[JOHN, ANTHROPIC, odd])
        await call(client, "create_relations", relations=[WORKS_AT])
        await call(client, "delete_entities", entityNames=["Anthropic"])
        return await call(client, "read_graph")

    graph = serve(tmp_path, build)
    assert graph["entities"] == [JOHN, odd] and graph["relations"] == []

    async def read(client: mcp.Client) -> Any:
        return await call(client, "read_graph")

    assert serve(tmp_path, read) == graph

    with cg.open(tmp_path, "agent") as cx:
        ops = [e.op for e in cx.journal()]
        assert ops.count("tombstone") == 2  # Anthropic and the works_at relation
        everything = cx.find(cg.Q.ns(NS) & cg.Q.tag("kg:entity"), limit=10)
        texts = sorted(h.record.memory.text for h in everything)
        assert texts == ["Dr. Ada (Lovelace)", "John_Smith"]
        gone = cx.find(
            cg.Q.ns(NS) & cg.Q.tag("kg:entity") & cg.Q.status("tombstoned"), limit=10
        )
        assert [h.record.memory.text for h in gone] == ["Anthropic"]
        assert [r.status for r in cx.history(gone.hits[0].uri)] == ["tombstoned"]
        john = next(h for h in everything if h.record.memory.text == "John_Smith")
        observed = cx.traverse(john.uri, depth=1, direction="in")
        assert [(n.relation, cx.resolve(n.uri).memory.text) for n in observed] == [
            ("refines", "Speaks fluent Spanish")
        ]


def test_what_a_memory_cannot_hold_is_a_tool_error_that_writes_nothing(tmp_path: Path) -> None:
    """An empty observation, an empty name, a name too long for the summary, a missing
    required field and a wrong type each come back as a tool error; the calls are
    all or nothing, so the graph and the journal are as before."""

    async def script(client: mcp.Client) -> tuple[Any, list[str]]:
        await call(client, "create_entities", entities=[JOHN])
        before = await call(client, "read_graph")
        bad: list[tuple[str, dict[str, Any], str]] = [
            ("create_entities", {"entities": [ANTHROPIC, {**JOHN, "name": "Ann",
                                 "observations": ["ok", ""]}]}, "ValidationError"),
            ("create_entities", {"entities": [{**ANTHROPIC, "name": ""}]}, "ValidationError"),
            ("create_entities", {"entities": [{**ANTHROPIC, "name": "x" * 1100}]},
             "ValidationError"),
            ("add_observations", {"observations": [{"entityName": "John_Smith",
                                  "contents": ["fine", ""]}]}, "ValidationError"),
            ("create_relations", {"relations": [{**WORKS_AT, "to": "y" * 1100}]},
             "ValidationError"),
            ("create_entities", {"entities": [{"name": "NoType", "observations": []}]},
             "validation error"),
            ("delete_entities", {"entityNames": "John_Smith"}, "validation error"),
        ]  # fmt: skip
        texts = []
        for tool, arguments, kind in bad:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            texts.append(result.content[0].text)  # type: ignore[union-attr]
            assert kind in texts[-1], (tool, texts[-1])
        assert await call(client, "read_graph") == before
        return before, texts

    serve(tmp_path, script)
    with cg.open(tmp_path, "agent") as cx:  # John and his one observation, nothing else
        assert [e.op for e in cx.journal()] == ["write", "write", "edge"]
