"""What the ``cortexgraph`` command prints: records, edges, traversals, recall results and
context bundles as JSON-ready dicts (the MCP server returns the same shapes), records for
people, one JSON document or a line of text per result, and errors on stderr (progress
bars: :mod:`.progress`)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .. import ContextBundle, Edge, RecallResult, Record, Traversal

__all__ = [
    "Output",
    "context_json",
    "edge_json",
    "fail",
    "print_record",
    "recall_json",
    "record_json",
    "traversal_json",
]


def record_json(record: Record) -> dict[str, Any]:
    """A record as a JSON-ready dict."""
    return {
        "uri": str(record.uri),
        "type": record.memory.type_name,
        "version": record.version,
        "head": record.head,
        "latest": record.latest,
        "status": record.status,
        "seq": record.seq,
        "at": record.at,
        "created_at": record.created_at,
        "memory": record.memory.to_dict(),
    }


def edge_json(edge: Edge) -> dict[str, Any]:
    """An edge as a JSON-ready dict."""
    return {
        "src": str(edge.src),
        "dst": str(edge.dst),
        "relation": edge.relation,
        "strength": edge.strength,
        "status": edge.status,
        "origin": edge.origin,
        "seq": edge.seq,
    }


def traversal_json(traversal: Traversal) -> dict[str, Any]:
    """A traversal as a JSON-ready dict: its start and every memory found, nearest first."""
    found = [
        {
            "depth": n.depth,
            "uri": str(n.uri),
            "via": str(n.via),
            "relation": n.relation,
            "direction": n.direction,
            "strength": n.strength,
        }
        for n in traversal
    ]
    return {"start": str(traversal.start), "found": found}


def recall_json(result: RecallResult) -> dict[str, Any]:
    """A recall result as a JSON-ready dict: its hits, mode and seq."""
    hits = [
        {
            "uri": str(h.uri),
            "score": h.score,
            "ranks": dict(h.ranks),
            "text": h.record.memory.text,
            "via": None if h.via is None else str(h.via),
        }
        for h in result
    ]
    return {"hits": hits, "mode": result.mode, "seq": result.seq}


def context_json(bundle: ContextBundle) -> dict[str, Any]:
    """A context bundle as a JSON-ready dict."""
    return {
        "text": bundle.text,
        "tokens": bundle.tokens,
        "digest": bundle.digest,
        "items": [[str(u), layer, form] for u, layer, form in bundle.items],
    }


def print_record(record: Record) -> None:
    memory = record.memory
    flags = [] if record.status == "active" else [record.status]
    if not record.is_head:
        flags.append(f"head is v{record.head}")
    suffix = f"  ({', '.join(flags)})" if flags else ""
    print(f"{record.uri}  [{memory.type_name}] v{record.version}/{record.latest}{suffix}")
    print(f"  {memory.text}")
    if memory.tags:
        print(f"  tags: {', '.join(memory.tags)}")
    print(f"  confidence {memory.confidence:g}  priority {memory.priority}  seq {record.seq}")


class Output:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def emit(self, data: Any, text: str | None = None) -> None:
        if self.as_json:
            print(json.dumps(data, ensure_ascii=False, sort_keys=True))
        elif text is not None:
            print(text)


def fail(out: Output, kind: str, message: str) -> None:
    if out.as_json:
        print(json.dumps({"error": kind, "message": message}), file=sys.stderr)
    else:
        print(f"cortexgraph: {kind}: {message}", file=sys.stderr)
