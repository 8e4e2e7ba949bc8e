"""The MCP server (``cortexgraph.integrations.mcp``): every tool through ``mcp.Client``
in-process, the resources, bad arguments as tool errors with the store unchanged, and
``cortexgraph mcp`` as a subprocess over stdio."""

from __future__ import annotations

import base64
import importlib
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest
from mcp.shared.exceptions import MCPError

import cortexgraph as cg
from cortexgraph.cli import main
from cortexgraph.integrations.mcp import build_server
from cortexgraph.merkle import MemoryProof, verify_memory_proof

T0 = 1_700_000_000_000
SRC = str(Path(__file__).resolve().parent.parent / "src")
DOCS = Path(__file__).resolve().parent.parent / "docs"


def serve(
    root: Path, script: Callable[[mcp.Client], Awaitable[Any]], **options: Any
) -> Any:
    """Run ``script`` against a fresh in-process server over ``root`` (actor ``agent``)."""
    server = build_server(root, "agent", clock=cg.ManualClock(T0), **options)

    async def go() -> Any:
        async with mcp.Client(server) as client:
            return await script(client)

    return anyio.run(go)


async def call(client: mcp.Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def proof_from(data: dict[str, Any]) -> MemoryProof:
    """The ``MemoryProof`` a ``prove`` result describes (hex decoded)."""
    fields = dict(data)
    fields["uri"] = cg.MemoryURI.parse(fields["uri"])
    for name, value in fields.items():
        if name in ("hash_name", "uri", "journal_size"):
            continue
        if isinstance(value, list):
            fields[name] = tuple(bytes.fromhex(v) for v in value)
        else:
            fields[name] = bytes.fromhex(value)
    return MemoryProof(**fields)


def test_tools_have_typed_schemas_and_structured_results(tmp_path: Path) -> None:
    """The twelve tools are listed, each with a JSON schema generated from its signature
    (types, required arguments, enums) and an output schema, so results are structured."""

    async def script(client: mcp.Client) -> dict[str, Any]:
        return {t.name: t for t in (await client.list_tools()).tools}

    tools = serve(tmp_path, script)
    assert sorted(tools) == sorted(
        [
            "remember", "recall", "find", "get", "update", "forget",
            "link", "traverse", "context", "prove", "scope", "root",
        ]
    )  # fmt: skip
    remember = tools["remember"].input_schema
    assert remember["required"] == ["text"]
    assert remember["properties"]["text"]["type"] == "string"
    assert remember["properties"]["pinned"]["type"] == "boolean"
    assert remember["properties"]["type"]["enum"][0] == "fact"
    recall = tools["recall"].input_schema["properties"]
    assert recall["mode"]["enum"] == ["keyword", "vector", "hybrid"]
    assert tools["find"].input_schema["required"] == ["where"]
    filter_schema = tools["find"].input_schema["$defs"]["Filter"]
    assert set(filter_schema["properties"]) == {
        "types", "tags", "ns", "status", "min_priority", "min_confidence", "since", "until"
    }  # fmt: skip
    for tool in tools.values():
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"


def test_every_tool_in_process(tmp_path: Path) -> None:
    """remember, recall, find, get, update, link, traverse, context, prove, scope, root
    and forget, called through ``mcp.Client``, give what the library gives: the proof
    verifies against ``root``, the scope bundle verifies with ``cg.verify_scope``."""

    async def script(client: mcp.Client) -> None:
        first = await call(
            client, "remember", text="Deploys go through the CI pipeline", tags=["deploy"],
            priority=8,
        )  # fmt: skip
        uri = first["uri"]
        assert uri.startswith("cx://agent/default/") and uri.endswith("@1")
        other = (await call(client, "remember", text="CI runs on every push", type="pattern"))[
            "uri"
        ]

        recalled = await call(client, "recall", text="deploys pipeline", mode="keyword", k=5)
        assert recalled["hits"][0]["uri"] == uri and recalled["mode"] == "keyword"
        assert recalled["seq"] == 2

        found = await call(client, "find", where={"tags": ["deploy"], "min_priority": 8})
        assert [h["uri"] for h in found["hits"]] == [uri] and found["matched"] == 1
        assert (await call(client, "find", where={"types": ["pattern"]}))["hits"][0][
            "uri"
        ] == other

        record = (await call(client, "get", uri=uri))["records"][0]
        assert record["memory"]["text"] == "Deploys go through the CI pipeline"
        assert (record["version"], record["status"], record["memory"]["priority"]) == (
            1, "active", 8,
        )  # fmt: skip

        second = await call(
            client, "update", uri=uri, text="Deploys go through Argo", expected_version=1
        )
        assert second["uri"].endswith("@2")
        history = (await call(client, "get", uri=uri, history=True))["records"]
        assert [r["memory"]["text"] for r in history] == [
            "Deploys go through the CI pipeline",
            "Deploys go through Argo",
        ]

        edge = await call(client, "link", src=other, relation="refines", dst=uri)
        assert (edge["relation"], edge["origin"], edge["status"]) == ("refines", "llm", "active")
        walked = await call(client, "traverse", uri=other, depth=1)
        assert [(n["uri"].split("@")[0], n["relation"]) for n in walked["found"]] == [
            (uri.split("@")[0], "refines")
        ]

        bundle = await call(client, "context", budget_tokens=500, query="deploys")
        assert "Deploys go through Argo" in bundle["text"] and bundle["tokens"] <= 500

        root = await call(client, "root")
        assert root["seq"] == 4 and root["actor"] == "agent"
        trusted = bytes.fromhex(root["overall_root"])
        proved = await call(client, "prove", uri=second["uri"])
        assert proved["overall_root"] == root["overall_root"]
        assert verify_memory_proof(proof_from(proved["proof"]), trusted)
        assert not verify_memory_proof(proof_from(proved["proof"]), bytes(32))

        sliced = await call(client, "scope", where={"tags": ["deploy"]})
        view = cg.verify_scope(base64.b64decode(sliced["bundle"]), trusted_root=trusted)
        assert [str(r.uri).split("@")[0] for r in view] == [uri.split("@")[0]]
        assert sliced["memories"] == 1 and sliced["seq"] == 4
        by_uri = await call(client, "scope", uris=[uri, other])
        assert len(cg.verify_scope(base64.b64decode(by_uri["bundle"]), trusted_root=trusted)) == 2

        gone = await call(client, "forget", uri=other, reason="superseded")
        assert gone["status"] == "tombstoned"
        assert (await call(client, "get", uri=other))["records"][0]["status"] == "tombstoned"
        assert (await call(client, "root"))["seq"] == 5

    serve(tmp_path, script)
    with cg.open(tmp_path, "agent") as cx:  # every write was committed to the store
        assert [e.op for e in cx.journal()] == ["write", "write", "update", "edge", "tombstone"]


def test_resources_root_and_memories(tmp_path: Path) -> None:
    """``cx://root`` is the current root, ``cx://actor/ns/id`` resolves a memory (a
    ``@version`` pins one), and an unknown or malformed URI is a resource error naming
    the library's error."""
    import json

    async def script(client: mcp.Client) -> None:
        uri = (await call(client, "remember", text="v1"))["uri"]
        await call(client, "update", uri=uri, text="v2")
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["cx://{actor}/{ns}/{id}"]
        root = json.loads((await client.read_resource("cx://root")).contents[0].text)  # type: ignore[union-attr]
        assert root["overall_root"] == (await call(client, "root"))["overall_root"]
        head = json.loads((await client.read_resource(uri.split("@")[0])).contents[0].text)  # type: ignore[union-attr]
        assert (head["version"], head["memory"]["text"]) == (2, "v2")
        pinned = json.loads((await client.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
        assert (pinned["version"], pinned["memory"]["text"]) == (1, "v1")
        missing = uri.split("/")
        missing[-1] = "0" * 32
        bad_uris = (("/".join(missing), "NotFoundError"), ("cx://agent/default/zz", "URIError"))
        for bad, kind in bad_uris:
            with pytest.raises(MCPError, match=kind):
                await client.read_resource(bad)

    serve(tmp_path, script)


def test_bad_arguments_are_tool_errors_and_change_nothing(tmp_path: Path) -> None:
    """Twenty-three kinds of bad arguments each come back as a tool error (``is_error``)
    naming the error type, the server keeps serving, and the store's seq and root are
    the same afterwards."""

    async def script(client: mcp.Client) -> None:
        uri = (await call(client, "remember", text="Deploys go through CI", tags=["deploy"]))[
            "uri"
        ]
        dead = (await call(client, "remember", text="old"))["uri"]
        await call(client, "forget", uri=dead)
        live = (await call(client, "remember", text="CI runs on every push"))["uri"]
        before = await call(client, "root")
        unknown = uri.rsplit("/", 1)[0] + "/" + "0" * 32
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("remember", {"text": ""}, "ValidationError"),
            ("remember", {"text": "x", "type": "nonsense"}, "validation error"),  # the enum
            ("remember", {"text": "x", "priority": 11}, "ValidationError"),
            ("remember", {"text": "x", "confidence": 2.0}, "ValidationError"),
            ("remember", {"text": "x", "tags": ["t" * 65]}, "ValidationError"),
            ("remember", {"text": "x", "ns": "Not A Namespace!"}, "ValidationError"),
            ("remember", {"text": 42}, "validation error"),  # the schema: text is a string
            ("get", {"uri": "cx://agent/default/zz"}, "URIError"),
            ("get", {"uri": unknown}, "NotFoundError"),
            ("update", {"uri": uri, "text": "y", "expected_version": 7}, "VersionConflictError"),
            ("update", {"uri": dead, "text": "y"}, "TombstonedError"),
            ("forget", {"uri": unknown}, "NotFoundError"),
            ("link", {"src": uri, "relation": "likes", "dst": dead}, "ValidationError"),
            ("link", {"src": uri, "relation": "refines", "dst": live, "strength": 5}, "Validation"),
            ("link", {"src": uri, "relation": "refines", "dst": dead}, "TombstonedError"),
            ("traverse", {"uri": uri, "depth": 9}, "ValidationError"),
            ("find", {"where": {"ns": "default"}}, "TooBroadQueryError"),
            ("find", {"where": {}}, "ValidationError"),
            ("find", {"where": {"tags": ["deploy"], "bogus": 1}}, "validation error"),
            ("recall", {"text": "deploy", "k": 0}, "ValidationError"),
            ("context", {"budget_tokens": -1}, "ValidationError"),
            ("scope", {"uris": [uri], "where": {"tags": ["deploy"]}}, "ValidationError"),
            ("prove", {"uri": uri.replace("@1", "@9")}, "NotFoundError"),
        ]
        for tool, arguments, kind in cases:
            result = await client.call_tool(tool, arguments)
            text = result.content[0].text  # type: ignore[union-attr]
            assert result.is_error, (tool, arguments)
            assert kind in text, (tool, arguments, text)
        assert await call(client, "root") == before

    serve(tmp_path, script)


def test_concurrent_clients_share_one_handle(tmp_path: Path) -> None:
    """Two clients connected to one server at once use the one store handle the
    process may hold (the second does not fail to open it), each sees the other's
    writes, and the handle is closed when the last one leaves."""
    server = build_server(tmp_path, "agent", clock=cg.ManualClock(T0))

    async def go() -> tuple[int, int]:
        async with mcp.Client(server) as a, mcp.Client(server) as b:
            await call(a, "remember", text="written through a")
            await call(b, "remember", text="written through b")
            return (await call(a, "root"))["seq"], (await call(b, "root"))["seq"]

    assert anyio.run(go) == (2, 2)
    with cg.open(tmp_path, "agent") as cx:  # closed: this process can open it again
        assert cx.seq == 2


def test_unknown_compat_mode_is_refused(tmp_path: Path) -> None:
    """``build_server`` names the compatibility modes it knows instead of serving a
    tool set nobody asked for."""
    with pytest.raises(cg.ValidationError, match="memory-server"):
        build_server(tmp_path, "agent", compat="mem0")


def test_cli_refuses_a_bad_store_and_a_bad_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cortexgraph mcp`` opens the store before serving, so a root that is a file is
    exit status 1 with the library's message, and a port outside 1..65535 is a usage
    error (exit 2)."""
    afile = tmp_path / "file"
    afile.write_text("")
    assert main(["mcp", "--root", str(afile), "--actor", "agent"]) == 1
    assert "ValidationError" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--root", str(tmp_path), "--transport", "streamable-http", "--port", "0"])
    assert exc.value.code == 2


def doc_configs() -> list[dict[str, Any]]:
    """The MCP client configurations ``docs/integrations.md`` shows, in order."""
    text = (DOCS / "integrations.md").read_text(encoding="utf-8")
    section = text.split("## MCP\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```json\n(.*?)```", section, flags=re.DOTALL)
    return [json.loads(block)["mcpServers"] for block in blocks]


def launch(config: dict[str, Any], root: Path) -> mcp.StdioServerParameters:
    """A documented server entry as stdio parameters: ``cortexgraph`` run as
    ``python -m cortexgraph.cli`` from this checkout, the store under ``root``."""
    assert config["command"] == "cortexgraph"
    args = list(config["args"])
    args[args.index("--root") + 1] = str(root)
    return mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "cortexgraph.cli", *args],
        env={**os.environ, "PYTHONPATH": SRC},
    )


def test_stdio_subprocess_remember_recall_prove_scope(tmp_path: Path) -> None:
    """The documented client configuration, launched over stdio, serves remember,
    recall, prove and scope; the proof and the scope bundle verify against ``root``."""
    params = launch(doc_configs()[0]["cortexgraph"], tmp_path)

    async def go() -> None:
        async with mcp.Client(params) as client:
            uri = (await call(client, "remember", text="The staging cluster is in eu-west"))[
                "uri"
            ]
            hits = (await call(client, "recall", text="staging cluster", mode="keyword"))["hits"]
            assert [h["uri"] for h in hits] == [uri]
            trusted = bytes.fromhex((await call(client, "root"))["overall_root"])
            proved = await call(client, "prove", uri=uri)
            assert verify_memory_proof(proof_from(proved["proof"]), trusted)
            bundle = base64.b64decode((await call(client, "scope", uris=[uri]))["bundle"])
            view = cg.verify_scope(bundle, trusted_root=trusted)
            assert [str(r.uri) for r in view] == [uri]

    anyio.run(go)
    with cg.open(tmp_path, "assistant") as cx:  # the subprocess's write is durable
        assert cx.seq == 1


def test_documented_compat_configuration_serves_the_memory_server_tools(tmp_path: Path) -> None:
    """The documented ``--compat memory-server`` configuration, launched over stdio,
    serves the reference server's tools (and only those) on the same store."""
    params = launch(doc_configs()[1]["memory"], tmp_path)
    entity = {"name": "Alice", "entityType": "person", "observations": ["Likes tea"]}

    async def go() -> None:
        async with mcp.Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "create_entities" in names and "remember" not in names
            await call(client, "create_entities", entities=[entity])
            assert await call(client, "read_graph") == {"entities": [entity], "relations": []}

    anyio.run(go)


def test_without_the_extra_the_command_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the mcp SDK, importing the server is a ``MissingExtraError`` naming the
    extra, and ``cortexgraph mcp`` exits 1 with that message instead of a traceback."""
    for name in [n for n in sys.modules if n.startswith("cortexgraph.integrations.mcp")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # ``import mcp`` raises ImportError
    with pytest.raises(cg.MissingExtraError, match=r"cortexgraph\[mcp\]") as exc:
        importlib.import_module("cortexgraph.integrations.mcp")
    assert exc.value.extra == "mcp"
    assert main(["mcp", "--root", str(tmp_path), "--actor", "agent"]) == 1
    assert "pip install 'cortexgraph[mcp]'" in capsys.readouterr().err


def test_streamable_http_binds_the_loopback_interface(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--transport streamable-http`` serves on 127.0.0.1 only, on the port given."""
    from mcp.server.mcpserver import MCPServer

    calls: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(
        MCPServer, "run", lambda self, transport, **kw: calls.append((transport, kw))
    )
    argv = ["mcp", "--root", str(tmp_path), "--actor", "agent"]
    assert main([*argv, "--transport", "streamable-http", "--port", "8765"]) == 0
    assert calls == [("streamable-http", {"host": "127.0.0.1", "port": 8765})]
