"""Reader for ``mcp-memory``: the JSON Lines file of the reference MCP memory server
(``@modelcontextprotocol/server-memory``, ``memory.jsonl``).

The server writes one JSON object per line, entities first::

    {"type":"entity","name":"Alice","entityType":"person","observations":["Likes tea"]}
    {"type":"relation","from":"Alice","to":"Acme","relationType":"works_at"}

Mapping:

- each entity becomes one memory: its text is ``name (entityType)``, one ``- observation``
  line per observation, and one ``relationType -> to`` line per relation it starts, so
  the original relation names stay readable and searchable; the summary is the first
  line. The type follows the entity type when it names one of ours (``preference``,
  ``goal``, ``constraint``/``rule``, ``pattern``, ``event``), else :class:`Fact`. Tags:
  ``from:mcp-memory``, the source tag of the name, ``entity:<entityType>``.
- each relation becomes an edge (:data:`RELATION_MAP`; anything else is ``relates_to``).
  The server's relations are written by a model through tools, so a ``supersedes``
  relation is imported as a *suggested* ``relates_to`` edge: replacing a memory is a
  person's decision.
- the file has no timestamps: every entry takes the import's ``at``.

Unlike the server, which skips lines it cannot parse, the reader refuses the file: a line
that is not UTF-8 or JSON, not an entity or relation, a duplicate entity name or a
relation naming an unknown entity is a ``ValidationError`` naming the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.taxonomy import Constraint, Event, Fact, Goal, Memory, Pattern, Preference, Source
from ..errors import ValidationError
from .plan import (
    Item,
    Link,
    Plan,
    as_tag,
    make_memory,
    parse_json,
    read_source,
    require,
    source_tag,
)

__all__ = ["FORMAT", "RELATION_MAP", "read_mcp_memory"]

FORMAT = "mcp-memory"

#: relationType (lowercased, spaces and hyphens as ``_``) -> our relation
RELATION_MAP = {
    "relates_to": "relates_to",
    "related_to": "relates_to",
    "derived_from": "derived_from",
    "based_on": "derived_from",
    "contradicts": "contradicts",
    "conflicts_with": "contradicts",
    "exemplifies": "exemplifies",
    "example_of": "exemplifies",
    "instance_of": "exemplifies",
    "refines": "refines",
    "extends": "refines",
    "source_of": "source_of",
    "implements": "source_of",
}
_TYPES: dict[str, type[Memory]] = {
    "preference": Preference,
    "goal": Goal,
    "constraint": Constraint,
    "rule": Constraint,
    "pattern": Pattern,
    "event": Event,
}


def read_mcp_memory(path: Path, *, actor: str) -> Plan:
    """Parse a ``memory.jsonl`` of the MCP memory server into a plan.

    Args:
        path: the JSON Lines file.
        actor: the store's actor (unused: the server's graph belongs to no user).

    Raises:
        ValidationError: the file is missing, or a line is bad (its number is named).
    """
    del actor
    entities: list[tuple[str, dict[str, Any]]] = []
    relations: list[tuple[str, dict[str, Any]]] = []
    for number, raw in enumerate(read_source(path).split(b"\n"), start=1):
        where = f"line {number}"
        if not raw.strip():
            continue
        record = parse_json(
            raw, first_line=number, field="line", hint="is this an mcp-memory JSON Lines file?"
        )
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "entity":
            require(record, "name", str, where)
            require(record, "entityType", str, where)
            observations = require(record, "observations", list, where)
            if not all(type(o) is str for o in observations):
                raise ValidationError(
                    f"{where}: every observation must be a string", field="observations"
                )
            entities.append((where, record))
        elif kind == "relation":
            for name in ("from", "to", "relationType"):
                require(record, name, str, where)
            relations.append((where, record))
        else:
            raise ValidationError(
                f'{where}: not an entity or relation line ("type" is {kind!r}); is this an'
                " mcp-memory JSON Lines file?",
                field="type",
            )
    outgoing: dict[str, list[str]] = {}
    for _, rel in relations:
        outgoing.setdefault(rel["from"], []).append(f"{rel['relationType']} -> {rel['to']}")
    items = [_item(where, e, outgoing.get(e["name"], [])) for where, e in entities]
    links = [_link(where, r) for where, r in relations]
    return Plan(FORMAT, items, links)


def _item(where: str, entity: dict[str, Any], outgoing: list[str]) -> Item:
    name, kind = entity["name"], entity["entityType"]
    head = f"{name} ({kind})"
    lines = [head, *(f"- {o}" for o in entity["observations"]), *outgoing]
    tags = ["from:" + FORMAT, source_tag(FORMAT, name)]
    entity_tag = as_tag(kind, prefix="entity:")
    if entity_tag is not None:
        tags.append(entity_tag)
    summary = " ".join(head.split())[:1024]
    cls = _TYPES.get(kind.strip().lower(), Fact)
    memory = make_memory(
        cls, where, text="\n".join(lines), summary=summary, tags=tags, source=Source(origin="llm")
    )
    return Item(key=name, locator=where, memory=memory, ns="default")


def _link(where: str, relation: dict[str, Any]) -> Link:
    name = "_".join(relation["relationType"].strip().lower().replace("-", " ").split())
    if name in ("supersedes", "supersede"):
        return Link(relation["from"], relation["to"], "relates_to", where, status="suggested")
    return Link(relation["from"], relation["to"], RELATION_MAP.get(name, "relates_to"), where)
