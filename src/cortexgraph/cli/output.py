"""What the ``cortexgraph`` command prints: records and journal entries as JSON-ready
dicts, records for people, one JSON document or a line of text per result, errors on
stderr, and a progress bar on a terminal."""

from __future__ import annotations

import json
import sys
from typing import Any

from .. import Entry, Record

__all__ = [
    "Output",
    "ProgressBar",
    "entry_json",
    "fail",
    "jsonable",
    "print_record",
    "record_json",
]


def jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


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


def entry_json(entry: Entry) -> dict[str, Any]:
    """A journal entry as a JSON-ready dict (bytes as hex)."""
    return {
        "seq": entry.seq,
        "at": entry.at,
        "op": entry.op,
        "ns": entry.ns,
        **jsonable(dict(entry.fields)),
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


class ProgressBar:
    """A progress bar (tqdm's) on stderr, drawn only when stderr is a terminal and the
    bar is enabled; ``bar(label, done, total)`` starts a new bar for a new label."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: Any = None  # tqdm.tqdm, imported only when a bar is drawn
        self._label = ""

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._bar is None or label != self._label or total != self._bar.total:
            from tqdm import tqdm

            self.finish()
            self._bar = tqdm(total=total, desc=label, file=sys.stderr, dynamic_ncols=True)
            self._label = label
        self._bar.update(done - self._bar.n)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


def fail(out: Output, kind: str, message: str) -> None:
    if out.as_json:
        print(json.dumps({"error": kind, "message": message}), file=sys.stderr)
    else:
        print(f"cortexgraph: {kind}: {message}", file=sys.stderr)
