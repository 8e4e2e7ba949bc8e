"""Reader for ``claude-memory-sqlite``: the SQLite database of the Claude Code memory
plugin ("Cortex", ``.memory/cortex.db``), whose data model is::

    memories(id, content, summary, memory_type, category, voyage_embedding,
             local_embedding, confidence, priority, pinned, source_type, source_session,
             source_context, tags, access_count, last_accessed_at, created_at,
             updated_at, status)
    edges(id, source_id, target_id, relation_type, strength, bidirectional, status,
          created_at)                    -- unique on (source_id, target_id, relation_type)
    extractions(id, session_id, cursor_position, extracted_at)

Mapping (the table is in ``docs/migration.md``):

- ``memory_type`` -> our type (:data:`TYPE_MAP`); every memory keeps its source type as a
  tag, its ``category`` as ``scope:<category>``, and its JSON ``tags``.
- ``confidence``, ``priority``, ``pinned`` as they are; ``source_session`` and
  ``source_context`` (the branch) in :class:`~cortexgraph.Source`, whose origin follows
  ``source_type`` (:data:`ORIGIN_MAP`, else ``system``).
- ``status``: active, archived and pruned as they are; superseded becomes ``merged``
  (replaced by another memory) with the tag ``superseded``.
- ``access_count`` accesses are journaled, the last at ``last_accessed_at``; at most
  :data:`MAX_ACCESSES` of them, so that a corrupt or hostile count cannot make an import
  write without bound (salience reads the count relative to the store's largest, so the
  cap changes nothing below it).
- edges keep their relation, strength and status; ``supersedes`` edges have origin
  ``human`` (the plugin lets only people supersede), the others ``system``. A
  bidirectional edge is imported in both directions.
- ``created_at`` is when a memory or edge is written (ISO 8601 text, or integer seconds
  or milliseconds). The embeddings are not imported (the store embeds with its own
  embedder), nor are the extraction cursors.

A file that is not a SQLite database, a missing table or column, invalid UTF-8, an
unknown type, status or relation, a duplicate id or an edge naming an unknown memory is a
``ValidationError`` naming the table and row (the rowid).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ..core.graph import RELATIONS, normalise_relation
from ..core.taxonomy import ArtifactRef, Constraint, Event, Fact, Memory, Pattern, Source
from ..errors import ValidationError
from .plan import Item, Link, Plan, as_tag, make_memory, parse_time, read_source, source_tag

__all__ = ["FORMAT", "ORIGIN_MAP", "TYPE_MAP", "read_claude_sqlite"]

#: the most reads journaled for one memory (``access_count`` above it is imported as this)
MAX_ACCESSES = 1_000

FORMAT = "claude-memory-sqlite"

#: the plugin's eight memory types -> ours
TYPE_MAP: dict[str, type[Memory]] = {
    "architecture": Fact,
    "decision": Fact,
    "context": Fact,
    "pattern": Pattern,
    "gotcha": Constraint,
    "progress": Event,
    "code_description": Fact,
    "code": ArtifactRef,
}
#: source_type -> origin; any other source type is "system"
ORIGIN_MAP = {
    "manual": "human",
    "remember": "human",
    "human": "human",
    "user": "human",
    "extraction": "llm",
    "extracted": "llm",
    "llm": "llm",
    "consolidation": "llm",
}
_STATUS_MAP = {
    "active": "active",
    "archived": "archived",
    "pruned": "pruned",
    "superseded": "merged",
}
_MEMORY_COLUMNS = (
    "id", "content", "summary", "memory_type", "category", "confidence", "priority", "pinned",
    "source_type", "source_session", "source_context", "tags", "access_count",
    "last_accessed_at", "created_at", "updated_at", "status",
)  # fmt: skip
_EDGE_COLUMNS = (
    "id", "source_id", "target_id", "relation_type", "strength", "bidirectional", "status",
    "created_at",
)  # fmt: skip


def read_claude_sqlite(path: Path, *, actor: str) -> Plan:
    """Read the plugin's database into a plan (the file is opened read-only).

    Args:
        path: the SQLite database.
        actor: the store's actor (unused: a plugin database belongs to one user).

    Raises:
        ValidationError: the file is missing or not such a database, or a row is bad
            (``<table> row N`` is named).
    """
    del actor
    if not path.is_file():
        read_source(path)  # reports a missing or unreadable file as the other formats do
        raise ValidationError(f"not a file: {path}", field="path")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise ValidationError(f"cannot open {path} as SQLite: {error}", field="path") from None
    try:
        db.text_factory = bytes
        memories = _rows(db, "memories", _MEMORY_COLUMNS)
        edges = _rows(db, "edges", _EDGE_COLUMNS)
    except sqlite3.DatabaseError as error:
        raise ValidationError(
            f"not a readable SQLite database ({error}); a claude-memory-sqlite import reads"
            " the plugin's cortex.db",
            field="path",
        ) from None
    finally:
        db.close()
    items = [_item(f"memories row {rowid}", row) for rowid, row in memories]
    links: list[Link] = []
    for rowid, row in edges:
        links.extend(_links(f"edges row {rowid}", row))
    return Plan(FORMAT, items, links)


def _rows(
    db: sqlite3.Connection, table: str, columns: tuple[str, ...]
) -> list[tuple[int, dict[str, Any]]]:
    """Every row of ``table`` as ``(rowid, {column: value})``, text decoded, by rowid.

    Raises:
        ValidationError: the table or a column is missing, or a text is not UTF-8.
        sqlite3.DatabaseError: the file is not a database, or a damaged one.
    """
    found = db.execute(f"SELECT name FROM pragma_table_info('{table}')").fetchall()
    if not found:
        raise ValidationError(
            f"no table {table!r}: not a claude-memory-sqlite database", field=table
        )
    have = {name.decode("utf-8", "replace") for (name,) in found}
    missing = [c for c in columns if c not in have]
    if missing:
        raise ValidationError(
            f"table {table!r} has no column {missing[0]!r}: not a claude-memory-sqlite database",
            field=table,
        )
    query = f"SELECT rowid, {', '.join(columns)} FROM {table} ORDER BY rowid"
    rows = []
    for rowid, *values in db.execute(query):
        row = {}
        for column, value in zip(columns, values, strict=True):
            if type(value) is bytes:
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise ValidationError(
                        f"{table} row {rowid}: invalid UTF-8 in {column} at byte {error.start}",
                        field=column,
                    ) from None
            row[column] = value
        rows.append((rowid, row))
    return rows


def _text(row: dict[str, Any], name: str, where: str, *, optional: bool = False) -> Any:
    value = row[name]
    if value is None and optional:
        return None
    if type(value) is not str:
        got = "NULL" if value is None else type(value).__name__
        raise ValidationError(f"{where}: {name} must be text, not {got}", field=name)
    return value


def _number(row: dict[str, Any], name: str, where: str, kind: type, default: Any) -> Any:
    value = row[name]
    if value is None:
        return default
    if kind is float and type(value) is int:
        value = float(value)
    if type(value) is not kind:
        raise ValidationError(
            f"{where}: {name} must be {'an integer' if kind is int else 'a number'},"
            f" not {type(value).__name__}",
            field=name,
        )
    return value


def _item(where: str, row: dict[str, Any]) -> Item:
    key = _text(row, "id", where) if type(row["id"]) is not int else str(row["id"])
    content = _text(row, "content", where)
    summary = _text(row, "summary", where, optional=True)
    kind = _text(row, "memory_type", where)
    if kind not in TYPE_MAP:
        raise ValidationError(
            f"{where}: unknown memory_type {kind!r} (one of {', '.join(TYPE_MAP)})",
            field="memory_type",
        )
    status = _text(row, "status", where, optional=True) or "active"
    if status not in _STATUS_MAP:
        raise ValidationError(
            f"{where}: unknown status {status!r} (one of {', '.join(_STATUS_MAP)})",
            field="status",
        )
    tags = ["from:" + FORMAT, source_tag(FORMAT, key), kind]
    category = _text(row, "category", where, optional=True)
    if category:
        tags.append(as_tag(category, prefix="scope:") or "scope:project")
    if status == "superseded":
        tags.append("superseded")
    tags.extend(_tags(row, where))
    created = _time(row, "created_at", where)
    fields: dict[str, Any] = {
        "text": content,
        "summary": _one_line(summary),
        "tags": tags,
        "confidence": _number(row, "confidence", where, float, 1.0),
        "priority": _number(row, "priority", where, int, 5),
        "pinned": bool(_number(row, "pinned", where, int, 0)),
        "source": Source(
            origin=ORIGIN_MAP.get(_text(row, "source_type", where, optional=True) or "", "system"),
            session=_one_line(_text(row, "source_session", where, optional=True)),
            branch=_one_line(_text(row, "source_context", where, optional=True)),
        ),
    }
    cls = TYPE_MAP[kind]
    if cls is ArtifactRef:
        # the code is kept byte-exact as content; the text is what search and forms show
        first = content.strip().splitlines()[0] if content.strip() else ""
        fields["content"] = content
        fields["text"] = _one_line(summary) or _one_line(first) or "code"
    if cls is Event:
        fields.update(kind="progress", occurred_at=created)
    accesses = _number(row, "access_count", where, int, 0)
    if accesses < 0:
        raise ValidationError(f"{where}: access_count {accesses} is negative", field="access_count")
    accesses = min(accesses, MAX_ACCESSES)
    return Item(
        key=key,
        locator=where,
        memory=make_memory(cls, where, **fields),
        ns="default",
        at=created,
        status=_STATUS_MAP[status],
        access_count=accesses,
        last_access=_time(row, "last_accessed_at", where),
    )


def _time(row: dict[str, Any], name: str, where: str) -> int | None:
    value = row[name]
    return None if value is None else parse_time(value, where=where, field=name)


def _tags(row: dict[str, Any], where: str) -> list[str]:
    raw = _text(row, "tags", where, optional=True)
    if not raw:
        return []
    try:
        tags = json.loads(raw)
    except json.JSONDecodeError:
        raise ValidationError(f"{where}: tags is not a JSON list", field="tags") from None
    if not isinstance(tags, list) or not all(type(t) is str for t in tags):
        raise ValidationError(f"{where}: tags must be a JSON list of strings", field="tags")
    return [t for t in (as_tag(tag) for tag in tags) if t]


def _one_line(value: str | None) -> str | None:
    """``value`` as a summary or source field takes it: one line of at most 1024
    characters (longer text is cut, line breaks become spaces)."""
    if value is None:
        return None
    return " ".join(value.split())[:1024] or None


def _links(where: str, row: dict[str, Any]) -> list[Link]:
    ends = []
    for name in ("source_id", "target_id"):
        value = row[name]
        ends.append(str(value) if type(value) is int else _text(row, name, where))
    relation = _text(row, "relation_type", where)
    try:
        rel = normalise_relation(relation)
    except ValidationError:
        raise ValidationError(
            f"{where}: unknown relation_type {relation!r} (one of {', '.join(RELATIONS)})",
            field="relation_type",
        ) from None
    status = _text(row, "status", where, optional=True) or "active"
    if status not in ("active", "suggested"):
        raise ValidationError(
            f"{where}: unknown edge status {status!r} (active or suggested)", field="status"
        )
    at = _time(row, "created_at", where)
    strength = _number(row, "strength", where, float, 1.0)
    if not 0.0 <= strength <= 1.0:
        raise ValidationError(f"{where}: strength {strength} is not in 0..1", field="strength")
    common = {
        "strength": strength,
        "status": status,
        "origin": "human" if rel == "supersedes" else "system",
        "at": at,
    }
    links = [Link(ends[0], ends[1], rel, where, **common)]
    if _number(row, "bidirectional", where, int, 0):
        links.append(Link(ends[1], ends[0], rel, f"{where} (reverse)", **common))
    return links
