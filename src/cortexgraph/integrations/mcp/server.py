"""The MCP server: cortexgraph's tools and resources over one actor's store.

Every tool has a typed signature (the SDK generates its JSON schema from it) and returns
a ``TypedDict`` (the SDK fills ``structured_content`` from it and a JSON text block for
older clients). A :class:`~cortexgraph.CortexError` never escapes a tool: it comes back
as a tool error (``is_error``) whose text is ``"<ErrorType>: <message>"``, and the store
is unchanged, since every verb validates before it writes.
"""

import base64
import os
from typing import Any, Literal, cast

import attrs
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

import cortexgraph as cg
from cortexgraph.cli.output import (
    context_json,
    edge_json,
    recall_json,
    record_json,
    traversal_json,
)
from cortexgraph.io import readable

from .compat import add_memory_server_tools
from .store import Store, tool_errors

__all__ = ["COMPAT_MODES", "Filter", "build_server"]

#: what ``--compat`` accepts: the tool sets of other memory servers this one can stand in for
COMPAT_MODES = ("memory-server",)

# -- argument and result shapes -----------------------------------------------------------


class Filter(BaseModel):
    """The filter language of ``find``, ``recall`` and ``scope``: every field given must
    hold (AND); ``types`` matches any of its types, ``tags`` needs all of its tags.

    ``find`` and ``scope`` need ``types`` or ``tags`` (a query must name what it looks
    for); ``recall`` takes any filter, its text bounds the search.
    """

    model_config = ConfigDict(extra="forbid")

    types: list[str] | None = Field(default=None, description="memory types, any of them")
    tags: list[str] | None = Field(default=None, description="tags, all of them")
    ns: str | None = Field(default=None, description="only this namespace")
    status: str | None = Field(
        default=None,
        description="active (the default), tombstoned, archived, pruned or merged",
    )
    min_priority: int | None = Field(default=None, description="priority at least (1..10)")
    min_confidence: float | None = Field(default=None, description="confidence at least (0..1)")
    since: int | None = Field(default=None, description="head written at or after (ms)")
    until: int | None = Field(default=None, description="head written before (ms)")

    def predicate(self) -> Any:
        """The filter as a ``cg.Q`` predicate (``None`` when no field is given).

        Raises:
            ValidationError: a bad value (the field names it).
        """
        return cg.Q.fields(
            types=self.types,
            tags=self.tags,
            ns=self.ns,
            status=self.status,
            min_priority=self.min_priority,
            min_confidence=self.min_confidence,
            since=self.since,
            until=self.until,
        )


class UriResult(TypedDict):
    uri: str


class ForgetResult(TypedDict):
    uri: str
    status: str


class RecordResult(TypedDict):
    """One version of a memory (as ``cortexgraph get --json`` prints it)."""

    uri: str
    type: str
    version: int
    head: int
    latest: int
    status: str
    seq: int
    at: int
    created_at: int
    memory: dict[str, Any]


class GetResult(TypedDict):
    records: list[RecordResult]


class RecallHitResult(TypedDict):
    uri: str
    score: float
    ranks: dict[str, int]
    text: str
    via: str | None


class RecallResult(TypedDict):
    hits: list[RecallHitResult]
    mode: str
    seq: int


class FindHitResult(TypedDict):
    uri: str
    score: int
    tokens: int
    text: str


class FindResult(TypedDict):
    hits: list[FindHitResult]
    tokens: int
    matched: int
    seq: int


class EdgeResult(TypedDict):
    src: str
    dst: str
    relation: str
    strength: float
    status: str
    origin: str
    seq: int


class NeighborResult(TypedDict):
    depth: int
    uri: str
    via: str
    relation: str
    direction: str
    strength: float


class TraverseResult(TypedDict):
    start: str
    found: list[NeighborResult]


class ContextResult(TypedDict):
    text: str
    tokens: int
    digest: str
    items: list[list[str]]


class ProofResult(TypedDict):
    """A memory proof with every byte string as hex (``verify_memory_proof`` checks it
    once rebuilt: ``MemoryProof(**fields)`` with the hex decoded)."""

    uri: str
    overall_root: str
    proof: dict[str, Any]


class RootResult(TypedDict):
    actor: str
    seq: int
    hash_name: str
    mmr_root: str
    smt_root: str
    overall_root: str


class ScopeResult(TypedDict):
    """A scope bundle (base64) and the root it must verify against."""

    bundle: str
    bytes: int
    memories: int
    seq: int
    overall_root: str


def _require_filter(where: Filter, field: str) -> Any:
    predicate = where.predicate()
    if predicate is None:
        raise cg.ValidationError("give at least types or tags", field=field)
    return predicate


# -- the server -----------------------------------------------------------------------------


def build_server(
    root: str | os.PathLike[str],
    actor: str,
    *,
    compat: str | None = None,
    clock: cg.Clock | None = None,
    embedder: Any = None,
    name: str = "cortexgraph",
) -> MCPServer[None]:
    """An MCP server over the memory of ``actor`` under ``root``.

    The store is opened when the server starts (its lifespan) and closed when it stops;
    ``cg.open`` errors (a bad root or actor, a store another process holds) surface
    then. Writes are synced before each tool returns.

    Args:
        root: the directory holding one store per actor (``cg.open``'s ``root``).
        actor: whose memory the server serves.
        compat: ``None`` for cortexgraph's tools, or ``"memory-server"`` for the
            reference MCP memory server's tool set (see :mod:`.compat`).
        clock: the clock writes are stamped with (default: the system clock).
        embedder: the embedder vector recall uses (``cg.open``'s ``embedder``).
        name: the server name the client sees.

    Raises:
        ValidationError: an unknown ``compat``.
    """
    if compat is not None and compat not in COMPAT_MODES:
        raise cg.ValidationError(
            f"unknown compatibility mode {compat!r}; expected one of {', '.join(COMPAT_MODES)}",
            field="compat",
        )
    options: dict[str, Any] = {"clock": clock, "sync": True, "embed_on_write": True}
    if embedder is not None:
        options["embedder"] = embedder
    store = Store(root, actor, options)
    server: MCPServer[None] = MCPServer(
        name,
        instructions=(
            f"The long-term memory of {actor}: a verifiable memory graph."
            if compat is None
            else f"A knowledge graph of entities, relations and observations ({actor})."
        ),
        lifespan=store.lifespan,
        log_level="WARNING",
    )
    if compat is None:
        _add_tools(server, store)
        _add_resources(server, store)
    else:
        add_memory_server_tools(server, store)
    return server


def _add_tools(server: MCPServer[None], store: Store) -> None:
    @server.tool()
    @tool_errors
    async def remember(
        text: str,
        type: Literal["fact", "goal", "preference", "constraint", "pattern", "event"] = "fact",
        tags: list[str] | None = None,
        ns: str = "default",
        summary: str | None = None,
        priority: int | None = None,
        confidence: float | None = None,
        pinned: bool = False,
    ) -> UriResult:
        """Write a new memory; returns its URI (cx://actor/ns/id@1)."""
        fields: dict[str, Any] = {"type": type, "text": text, "pinned": pinned}
        for key, value in (
            ("tags", tags),
            ("summary", summary),
            ("priority", priority),
            ("confidence", confidence),
        ):
            if value is not None:
                fields[key] = value
        uri = store.cx.write(cg.Memory.from_dict(fields), ns=ns)
        return {"uri": str(uri)}

    @server.tool()
    @tool_errors
    async def recall(
        text: str,
        k: int = 10,
        mode: Literal["keyword", "vector", "hybrid"] = "hybrid",
        where: Filter | None = None,
    ) -> RecallResult:
        """What the memory knows about ``text``, best first (keyword, vector or hybrid)."""
        result = store.cx.recall(
            text, k=k, mode=mode, where=None if where is None else where.predicate()
        )
        return cast(RecallResult, recall_json(result))

    @server.tool()
    @tool_errors
    async def find(
        where: Filter,
        limit: int = 10,
        order_by: Literal["salience", "recent", "priority", "confidence"] = "salience",
        form: Literal["short", "medium", "full"] = "short",
        budget_tokens: int | None = None,
    ) -> FindResult:
        """The memories matching a filter (types or tags required), ranked and rendered."""
        result = store.cx.find(
            _require_filter(where, "where"),
            limit=limit,
            budget_tokens=budget_tokens,
            order_by=order_by,
            form=form,
        )
        hits: list[FindHitResult] = [
            {"uri": str(h.uri), "score": h.score, "tokens": h.tokens, "text": h.text}
            for h in result
        ]
        return {
            "hits": hits,
            "tokens": result.tokens,
            "matched": result.matched,
            "seq": result.seq,
        }

    @server.tool()
    @tool_errors
    async def get(uri: str, history: bool = False) -> GetResult:
        """The version a URI names (its head without @version), or every version."""
        cx = store.cx
        records = cx.history(uri) if history else [cx.resolve(uri)]
        return {"records": [record_json(r) for r in records]}  # type: ignore[misc]

    @server.tool()
    @tool_errors
    async def update(
        uri: str,
        text: str | None = None,
        summary: str | None = None,
        tags: list[str] | None = None,
        priority: int | None = None,
        confidence: float | None = None,
        expected_version: int | None = None,
    ) -> UriResult:
        """Write a new version of a memory with the fields given changed."""
        changes: dict[str, Any] = {
            key: value
            for key, value in (
                ("text", text),
                ("summary", summary),
                ("tags", tags),
                ("priority", priority),
                ("confidence", confidence),
            )
            if value is not None
        }
        new = store.cx.update(uri, expected_version=expected_version, **changes)
        return {"uri": str(new)}

    @server.tool()
    @tool_errors
    async def forget(uri: str, reason: str = "") -> ForgetResult:
        """Tombstone a memory: it leaves recall and find, its history stays."""
        gone = store.cx.tombstone(uri, reason=reason)
        return {"uri": str(gone), "status": "tombstoned"}

    @server.tool()
    @tool_errors
    async def link(
        src: str,
        relation: str,
        dst: str,
        strength: float = 1.0,
        status: Literal["active", "suggested"] = "active",
        origin: Literal["human", "llm", "system"] = "llm",
    ) -> EdgeResult:
        """Add (or change) the edge src --relation--> dst (relates_to, derived_from,
        contradicts, exemplifies, refines, supersedes, source_of)."""
        edge = store.cx.add_edge(
            src, dst, relation, strength=strength, status=status, origin=origin
        )
        return cast(EdgeResult, edge_json(edge))

    @server.tool()
    @tool_errors
    async def traverse(
        uri: str,
        depth: int = 2,
        relations: list[str] | None = None,
        direction: Literal["out", "in", "both"] = "out",
        min_strength: float = 0.0,
    ) -> TraverseResult:
        """Breadth-first walk of the graph from a memory along active edges (depth <= 5)."""
        result = store.cx.traverse(
            uri, depth=depth, relations=relations, direction=direction, min_strength=min_strength
        )
        return cast(TraverseResult, traversal_json(result))

    @server.tool()
    @tool_errors
    async def context(
        budget_tokens: int = 2000, query: str | None = None, channel: str | None = None
    ) -> ContextResult:
        """A token-budgeted context bundle for a prompt (floor, foreground, background)."""
        bundle = store.cx.context(query=query, budget_tokens=budget_tokens, channel=channel)
        return cast(ContextResult, context_json(bundle))

    @server.tool()
    @tool_errors
    async def prove(uri: str) -> ProofResult:
        """A proof that a memory version is committed by the current root (check it with
        cortexgraph.merkle.verify_memory_proof against the root you trust)."""
        proof = store.cx.prove(uri)
        fields = readable(attrs.asdict(proof, recurse=False))
        fields["uri"] = str(proof.uri)
        return {"uri": str(proof.uri), "overall_root": proof.overall_root.hex(), "proof": fields}

    @server.tool()
    @tool_errors
    async def scope(
        uris: list[str] | None = None, where: Filter | None = None, limit: int = 100
    ) -> ScopeResult:
        """A proof-checked slice of the memory (base64) for a sub-agent: the memories
        named by ``uris`` or matching ``where``; check it with cortexgraph.verify_scope
        against ``root``."""
        if (uris is None) == (where is None):
            raise cg.ValidationError("give exactly one of uris and where", field="where")
        cx = store.cx
        selected: Any = uris if where is None else _require_filter(where, "where")
        blob = cx.scope(selected, limit=limit)
        view = cg.verify_scope(blob, trusted_root=None)
        return {
            "bundle": base64.b64encode(blob).decode("ascii"),
            "bytes": len(blob),
            "memories": len(view),
            "seq": view.seq,
            "overall_root": view.overall_root.hex(),
        }

    @server.tool()
    @tool_errors
    async def root() -> RootResult:
        """The store's current roots: the OverallRoot commits to every memory and the
        journal."""
        manifest = store.cx.roots()
        return {
            "actor": manifest.actor,
            "seq": manifest.seq,
            "hash_name": manifest.hash_name,
            "mmr_root": manifest.mmr_root.hex(),
            "smt_root": manifest.smt_root.hex(),
            "overall_root": manifest.overall_root.hex(),
        }


def _add_resources(server: MCPServer[None], store: Store) -> None:
    import json

    @server.resource("cx://root", name="root", mime_type="application/json")
    def current_root() -> str:
        """The store's current roots (as the root tool returns them)."""
        manifest = store.cx.roots()
        data = readable(attrs.asdict(manifest))
        del data["at"]
        return json.dumps(data, sort_keys=True)

    @server.resource(
        "cx://{actor}/{ns}/{id}", name="memory", mime_type="application/json"
    )
    def memory(actor: str, ns: str, id: str) -> str:
        """A memory by its URI (``@version`` pins a version; the head otherwise)."""
        try:
            record = store.cx.resolve(f"cx://{actor}/{ns}/{id}")
        except cg.CortexError as exc:
            raise ResourceError(f"{type(exc).__name__}: {exc}") from exc
        return json.dumps(record_json(record), sort_keys=True)
