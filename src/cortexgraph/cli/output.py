"""What the ``cortexgraph`` command prints: records and journal entries as JSON-ready
dicts, records for people, one JSON document or a line of text per result, and errors on
stderr (progress bars: :mod:`.progress`)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .. import Record

__all__ = [
    "Output",
    "fail",
    "print_record",
    "record_json",
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
