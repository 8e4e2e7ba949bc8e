"""Reader for ``mem0``: the JSON that mem0's ``Memory.get_all()`` returns, saved to a file.

Shape (mem0 2.x OSS; ``metadata``, the timestamps and the ids may be absent or null)::

    {"results": [{"id": "…", "memory": "Likes tea", "hash": "…", "metadata": {…},
                  "created_at": "2026-01-05T10:00:00-08:00", "updated_at": null,
                  "user_id": "alice", "agent_id": null, "run_id": "onboarding"}]}

A bare list of such records (mem0's older ``get_all`` output) is read the same way.

Mapping:

- **Owner.** A record belongs to its ``user_id``, or to its ``agent_id`` when it has no
  user. Only the records of one owner go into a store: by default the store's actor;
  others are skipped with the reason. A record with neither belongs to every owner.
  When a record has both, the agent becomes the tag ``agent:<agent_id>``.
- ``run_id`` becomes the namespace (a run id that is not a valid namespace name becomes
  ``run-`` and 20 hex digits of its SHA-256); no run id: ``default``.
- Each record becomes a :class:`Fact` (a :class:`Pattern` when ``metadata.memory_type``
  is ``procedural_memory``), origin ``llm`` (mem0 extracts memories with a model), written
  at ``created_at`` (else ``updated_at``, else the import's ``at``). A list of strings
  under ``metadata.categories`` becomes tags. The rest of ``metadata`` and ``hash`` are
  not kept. Tags ``from:mem0`` and ``mem0:<id>``.
- A record whose ``memory`` is empty is skipped. Duplicate ids, a record that is not an
  object, or a field of the wrong type is a ``ValidationError`` naming ``results[N]``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ..core.taxonomy import Fact, Pattern, Source
from ..core.uri import check_name
from ..errors import ValidationError
from .plan import (
    Item,
    Plan,
    as_tag,
    make_memory,
    parse_json,
    parse_time,
    read_source,
    require,
    source_tag,
)

__all__ = ["FORMAT", "read_mem0"]

FORMAT = "mem0"


def read_mem0(path: Path, *, actor: str, owner: str | None = None) -> Plan:
    """Parse a saved ``Memory.get_all()`` result into a plan.

    Args:
        path: the JSON file.
        actor: the store's actor.
        owner: the mem0 ``user_id`` (or ``agent_id``) whose memories to import
            (default: ``actor``).

    Raises:
        ValidationError: the file is missing or not such a document, or a record is bad
            (``results[N]`` is named).
    """
    owner = actor if owner is None else owner
    document = parse_json(
        read_source(path),
        first_line=1,
        field="path",
        hint="a mem0 import reads the JSON document of Memory.get_all()",
    )
    results = document.get("results") if isinstance(document, dict) else document
    if not isinstance(results, list):
        raise ValidationError(
            'not a mem0 get_all() result: expected {"results": [...]} or a list of records',
            field="results",
        )
    items: list[Item] = []
    skipped: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for index, record in enumerate(results):
        where = f"results[{index}]"
        if not isinstance(record, dict):
            raise ValidationError(
                f"{where}: a record must be an object, not {type(record).__name__}",
                field="results",
            )
        fields = _fields(where, record)
        key = fields["id"]
        if key in seen:
            raise ValidationError(
                f"{where}: duplicate id {key!r} (first at {seen[key]})", field="id"
            )
        seen[key] = where
        belongs = fields["user_id"] or fields["agent_id"]
        if belongs is not None and belongs != owner:
            skipped.append((where, f"belongs to {belongs!r}, not to {owner!r}"))
        elif not fields["memory"].strip():
            skipped.append((where, "the memory is empty"))
        else:
            items.append(_item(where, fields))
    return Plan(FORMAT, items, [], skipped)


def _fields(where: str, record: dict[str, Any]) -> dict[str, Any]:
    """The record's fields, each checked for its type; timestamps in ms."""
    fields = {
        "id": require(record, "id", str, where),
        "memory": require(record, "memory", str, where),
        "metadata": require(record, "metadata", dict, where, optional=True) or {},
    }
    for name in ("user_id", "agent_id", "run_id"):
        fields[name] = require(record, name, str, where, optional=True)
    for name in ("created_at", "updated_at"):
        value = record.get(name)
        fields[name] = None if value is None else parse_time(value, where=where, field=name)
    if not fields["id"]:
        raise ValidationError(f"{where}: 'id' must not be empty", field="id")
    return fields


def _item(where: str, fields: dict[str, Any]) -> Item:
    metadata = fields["metadata"]
    tags = ["from:" + FORMAT, source_tag(FORMAT, fields["id"])]
    categories = metadata.get("categories")
    if isinstance(categories, list):
        tags.extend(t for t in (as_tag(c) for c in categories if type(c) is str) if t)
    if fields["user_id"] is not None and fields["agent_id"] is not None:
        agent_tag = as_tag(fields["agent_id"], prefix="agent:")
        if agent_tag is not None:
            tags.append(agent_tag)
    cls = Pattern if metadata.get("memory_type") == "procedural_memory" else Fact
    memory = make_memory(cls, where, text=fields["memory"], tags=tags, source=Source(origin="llm"))
    at = fields["created_at"] if fields["created_at"] is not None else fields["updated_at"]
    return Item(
        key=fields["id"], locator=where, memory=memory, ns=_namespace(fields["run_id"]), at=at
    )


def _namespace(run_id: str | None) -> str:
    """The namespace of a mem0 run: the run id itself when it is a valid name."""
    if run_id is None:
        return "default"
    try:
        return check_name(run_id, "ns")
    except ValidationError:
        return "run-" + hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:20]
