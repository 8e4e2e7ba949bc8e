"""The reference MCP memory server's tool set (``@modelcontextprotocol/server-memory``)
over a cortexgraph store, for clients configured for that server.

Same tool names, argument shapes and results: ``create_entities``, ``create_relations``,
``add_observations``, ``delete_entities``, ``delete_observations``, ``delete_relations``,
``read_graph``, ``search_nodes`` and ``open_nodes``; the graph tools return
``{entities: [{name, entityType, observations}], relations: [{from, to, relationType}]}``.

Mapping (every memory lives in namespace ``kg`` and is a ``Fact`` written with origin
``llm``, the graph being written by a model):

- an **entity** is one memory: text ``name``, summary ``name (entityType)`` (the exact
  type is read back from it), tags ``kg:entity``, ``kg:e-<h>`` (``h`` = the first 24 hex
  digits of the SHA-256 of the name, the lookup key) and ``entity:<type as a tag>``;
- each **observation** is one memory: text the observation, tags ``kg:observation`` and
  ``kg:o-<h>`` of its entity, and an edge ``observation --refines--> entity``;
- each **relation** is one memory (edges have seven fixed relations, a relation's type is
  free text): text ``from relationType to``, summary the exact ``[from, relationType,
  to]`` as JSON, tags ``kg:relation``, ``kg:from-<h>``, ``kg:to-<h>``, and a
  ``relates_to`` edge to each endpoint entity that exists when it is created.

Order is creation order (journal seq). Deleting tombstones: the memories leave the graph,
their history stays (``cx.history``, ``cortexgraph journal``). Semantics follow the
reference server: creating an existing entity or relation is ignored; observations
already on the entity are not added again; ``add_observations`` on a missing entity
fails (nothing is written); deleting what does not exist is not an error; deleting an
entity deletes its observations and every relation from or to it; ``search_nodes``
matches the query case-insensitively in names, types and observations, and the graph
tools return the relations between the entities they return. The differences: a name
repeated within one ``create_entities`` (or a relation within one ``create_relations``)
is created once; text is stored in Unicode NFC; and what a memory cannot hold (an empty
name or observation, a name or relation longer than a summary's 1,024 characters) is a
tool error that writes nothing.
"""

import hashlib
import json
import re
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

import cortexgraph as cg

from .store import Store, tool_errors

__all__ = ["NS", "add_memory_server_tools"]

#: the namespace of the knowledge graph's memories
NS = "kg"
_ALL = 1_000_000  # find needs a bound; the graph is read whole
_ENTITY, _OBSERVATION, _RELATION = "kg:entity", "kg:observation", "kg:relation"
_UNTAGGABLE = re.compile(r"[^a-z0-9._:-]+")


def _key(name: str) -> str:
    """A name's lookup key: the first 24 hex digits of its SHA-256 (names are free text,
    tags are short lowercase words)."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:24]


def _type_tag(entity_type: str) -> list[str]:
    body = _UNTAGGABLE.sub("-", entity_type.lower()).strip("-")
    return [("entity:" + body)[:64]] if body else []


# -- shapes -------------------------------------------------------------------------------


class EntityIn(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    name: str = Field(description="The name of the entity")
    entity_type: str = Field(alias="entityType", description="The type of the entity")
    observations: list[str] = Field(
        description="An array of observation contents associated with the entity"
    )


class RelationIn(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    source: str = Field(alias="from", description="The entity where the relation starts")
    target: str = Field(alias="to", description="The entity where the relation ends")
    relation_type: str = Field(alias="relationType", description="The type of the relation")


class ObservationIn(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    entity_name: str = Field(alias="entityName", description="The entity to add them to")
    contents: list[str] = Field(description="An array of observation contents to add")


class DeletionIn(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    entity_name: str = Field(alias="entityName", description="The entity holding them")
    observations: list[str] = Field(description="An array of observations to delete")


class Entity(TypedDict):
    name: str
    entityType: str
    observations: list[str]
Relation = TypedDict("Relation", {"from": str, "to": str, "relationType": str})
class Added(TypedDict):
    entityName: str
    addedObservations: list[str]


class Graph(TypedDict):
    entities: list[Entity]
    relations: list[Relation]


class EntitiesResult(TypedDict):
    entities: list[Entity]


class RelationsResult(TypedDict):
    relations: list[Relation]


class AddedResult(TypedDict):
    results: list[Added]


class DeleteResult(TypedDict):
    success: bool
    message: str


# -- the graph as stored ----------------------------------------------------------------


class _Node:
    """An entity as stored: its memory, its type and its observations' memories."""

    def __init__(self, record: cg.Record) -> None:
        self.record = record
        name = record.memory.text
        summary = record.memory.summary or ""
        self.name = name
        self.entity_type = summary[len(name) + 2 : -1]
        self.observations: list[cg.Record] = []

    def as_dict(self) -> Entity:
        return {
            "name": self.name,
            "entityType": self.entity_type,
            "observations": [o.memory.text for o in self.observations],
        }


class _Edge:
    """A relation as stored: its memory and the exact triple."""

    def __init__(self, record: cg.Record) -> None:
        self.record = record
        self.source, self.relation_type, self.target = json.loads(record.memory.summary or "")

    @property
    def triple(self) -> tuple[str, str, str]:
        return (self.source, self.relation_type, self.target)

    def as_dict(self) -> Relation:
        return {"from": self.source, "to": self.target, "relationType": self.relation_type}


def _records(cx: cg.Cortex, tag: str) -> list[cg.Record]:
    """The active memories of the graph with ``tag``, in creation order."""
    found = cx.find(cg.Q.ns(NS) & cg.Q.tag(tag), limit=_ALL, order_by="recent")
    return sorted((hit.record for hit in found), key=lambda r: (r.created_at, r.seq))


class _Snapshot:
    """The whole graph, read from the store."""

    def __init__(self, cx: cg.Cortex) -> None:
        self.nodes = {n.name: n for n in map(_Node, _records(cx, _ENTITY))}
        by_key = {_key(name): node for name, node in self.nodes.items()}
        for record in _records(cx, _OBSERVATION):
            for tag in record.memory.tags:
                if tag.startswith("kg:o-") and tag[5:] in by_key:
                    by_key[tag[5:]].observations.append(record)
        self.edges = [_Edge(r) for r in _records(cx, _RELATION)]

    def graph(self, names: set[str] | None = None) -> Graph:
        """The graph, or the entities named and the relations between them."""
        nodes = [n for n in self.nodes.values() if names is None or n.name in names]
        kept = {n.name for n in nodes}
        edges = [
            e for e in self.edges if names is None or (e.source in kept and e.target in kept)
        ]
        return {
            "entities": [n.as_dict() for n in nodes],
            "relations": [e.as_dict() for e in edges],
        }


def _fact(text: str, *, summary: str | None = None, tags: list[str]) -> Any:
    return cg.Fact(text=text, summary=summary, tags=tags, source=cg.Source(origin="llm"))


# -- the tools --------------------------------------------------------------------------


def add_memory_server_tools(server: MCPServer[None], store: Store) -> None:
    """Register the reference memory server's nine tools on ``server``."""

    def observe(batch: cg.Batch, entity: cg.MemoryURI, name: str, text: str) -> None:
        uri = batch.write(_fact(text, tags=[_OBSERVATION, f"kg:o-{_key(name)}"]), ns=NS)
        batch.add_edge(uri, entity, "refines", origin="llm")

    @server.tool(description="Create multiple new entities in the knowledge graph")
    @tool_errors
    async def create_entities(entities: list[EntityIn]) -> EntitiesResult:
        cx = store.cx
        existing = set(_Snapshot(cx).nodes)
        new: dict[str, EntityIn] = {}
        for entity in entities:
            if entity.name not in existing and entity.name not in new:
                new[entity.name] = entity
        if new:
            with cx.batch() as b:
                for e in new.values():
                    memory = _fact(
                        e.name,
                        summary=f"{e.name} ({e.entity_type})",
                        tags=[_ENTITY, f"kg:e-{_key(e.name)}", *_type_tag(e.entity_type)],
                    )
                    uri = b.write(memory, ns=NS)
                    for text in e.observations:
                        observe(b, uri, e.name, text)
        return {
            "entities": [
                {"name": e.name, "entityType": e.entity_type, "observations": e.observations}
                for e in new.values()
            ]
        }

    @server.tool(
        description="Create multiple new relations between entities in the knowledge graph."
        " Relations should be in active voice"
    )
    @tool_errors
    async def create_relations(relations: list[RelationIn]) -> RelationsResult:
        cx = store.cx
        snapshot = _Snapshot(cx)
        seen = {e.triple for e in snapshot.edges}
        new: list[RelationIn] = []
        for r in relations:
            triple = (r.source, r.relation_type, r.target)
            if triple not in seen:
                seen.add(triple)
                new.append(r)
        if new:
            with cx.batch() as b:
                for r in new:
                    memory = _fact(
                        f"{r.source} {r.relation_type} {r.target}",
                        summary=json.dumps([r.source, r.relation_type, r.target]),
                        tags=[_RELATION, f"kg:from-{_key(r.source)}", f"kg:to-{_key(r.target)}"],
                    )
                    uri = b.write(memory, ns=NS)
                    for end in dict.fromkeys((r.source, r.target)):
                        if end in snapshot.nodes:
                            node = snapshot.nodes[end].record.uri
                            b.add_edge(uri, node, "relates_to", origin="llm")
        return {
            "relations": [
                {"from": r.source, "to": r.target, "relationType": r.relation_type} for r in new
            ]
        }

    @server.tool(description="Add new observations to existing entities in the knowledge graph")
    @tool_errors
    async def add_observations(observations: list[ObservationIn]) -> AddedResult:
        cx = store.cx
        snapshot = _Snapshot(cx)
        held = {name: {o.memory.text for o in n.observations} for name, n in snapshot.nodes.items()}
        results: list[Added] = []
        for o in observations:
            if o.entity_name not in snapshot.nodes:  # checked for all before anything is written
                raise cg.NotFoundError(f"Entity with name {o.entity_name} not found")
            fresh = [c for c in dict.fromkeys(o.contents) if c not in held[o.entity_name]]
            held[o.entity_name].update(fresh)
            results.append({"entityName": o.entity_name, "addedObservations": fresh})
        if any(r["addedObservations"] for r in results):
            with cx.batch() as b:
                for r in results:
                    node = snapshot.nodes[r["entityName"]]
                    for text in r["addedObservations"]:
                        observe(b, node.record.uri, node.name, text)
        return {"results": results}

    def forget(records: list[cg.Record], reason: str) -> None:
        unique = {r.uri.id: r for r in records}
        if unique:
            with store.cx.batch() as b:
                for record in unique.values():
                    b.tombstone(record.uri, reason=reason)

    @server.tool(
        description="Delete multiple entities and their associated relations from the"
        " knowledge graph"
    )
    @tool_errors
    async def delete_entities(
        entityNames: Annotated[
            list[str], Field(description="An array of entity names to delete")
        ],
    ) -> DeleteResult:
        snapshot = _Snapshot(store.cx)
        names = set(entityNames)
        doomed = [
            record
            for name in names
            if name in snapshot.nodes
            for record in (snapshot.nodes[name].record, *snapshot.nodes[name].observations)
        ]
        doomed += [e.record for e in snapshot.edges if e.source in names or e.target in names]
        forget(doomed, "delete_entities")
        return {"success": True, "message": "Entities deleted successfully"}

    @server.tool(description="Delete specific observations from entities in the knowledge graph")
    @tool_errors
    async def delete_observations(deletions: list[DeletionIn]) -> DeleteResult:
        snapshot = _Snapshot(store.cx)
        doomed = []
        for d in deletions:
            node = snapshot.nodes.get(d.entity_name)
            if node is not None:
                unwanted = set(d.observations)
                doomed += [o for o in node.observations if o.memory.text in unwanted]
        forget(doomed, "delete_observations")
        return {"success": True, "message": "Observations deleted successfully"}

    @server.tool(description="Delete multiple relations from the knowledge graph")
    @tool_errors
    async def delete_relations(relations: list[RelationIn]) -> DeleteResult:
        snapshot = _Snapshot(store.cx)
        unwanted = {(r.source, r.relation_type, r.target) for r in relations}
        forget([e.record for e in snapshot.edges if e.triple in unwanted], "delete_relations")
        return {"success": True, "message": "Relations deleted successfully"}

    @server.tool(description="Read the entire knowledge graph")
    @tool_errors
    async def read_graph() -> Graph:
        return _Snapshot(store.cx).graph()

    @server.tool(description="Search for nodes in the knowledge graph based on a query")
    @tool_errors
    async def search_nodes(
        query: Annotated[
            str,
            Field(
                description="The search query to match against entity names, types, and"
                " observation content"
            ),
        ],
    ) -> Graph:
        snapshot = _Snapshot(store.cx)
        needle = query.lower()
        names = {
            n.name
            for n in snapshot.nodes.values()
            if needle in n.name.lower()
            or needle in n.entity_type.lower()
            or any(needle in o.memory.text.lower() for o in n.observations)
        }
        return snapshot.graph(names)

    @server.tool(description="Open specific nodes in the knowledge graph by their names")
    @tool_errors
    async def open_nodes(
        names: Annotated[list[str], Field(description="An array of entity names to retrieve")],
    ) -> Graph:
        return _Snapshot(store.cx).graph(set(names))
