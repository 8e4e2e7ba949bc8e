"""The durable inbound queue of a chat runtime, kept in the journal.

Each envelope is an ``Event`` of kind ``inbound`` whose text is the envelope as canonical
JSON. Its state is a tag (``queue-pending``, ``queue-processing``, ``queue-done``,
``queue-failed``) and its tier another (``tier-urgent``, ``tier-normal``,
``tier-background``); its attempts and last error are its ``summary``, as JSON. Every change
of state is one journaled update, so a crash loses nothing: the next
:class:`~cortexgraph.integrations.chat.ChatMemory` puts the items left ``processing`` back
to ``pending``.

Items are handed out urgent first, then normal, then background, and first in, first out
within a tier (by enqueue time, then journal seq).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import attrs

import cortexgraph as cg
from cortexgraph.errors import ValidationError
from cortexgraph.integrations.chat.values import canonical_json

__all__ = ["TIERS", "QueueItem", "QueueState", "check_envelope"]

TIERS = ("urgent", "normal", "background")
QueueState = Literal["pending", "processing", "done", "failed"]
_STATES = ("pending", "processing", "done", "failed")
MAX_ENVELOPE_CHARS = 256 * 1024


def check_envelope(envelope: object) -> str:
    """The envelope as canonical JSON.

    Raises:
        ValidationError: not a mapping with string keys, not JSON-serialisable, or larger
            than 256 KiB as JSON (field ``envelope``).
    """
    if not isinstance(envelope, Mapping) or any(type(k) is not str for k in envelope):
        raise ValidationError("must be a mapping with string keys", field="envelope")
    try:
        text = canonical_json(dict(envelope))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"must be JSON-serialisable ({exc})", field="envelope") from None
    if len(text) > MAX_ENVELOPE_CHARS:
        raise ValidationError("must be at most 256 KiB as JSON", field="envelope")
    return text


@attrs.frozen
class QueueItem:
    """One envelope of the inbound queue.

    Attributes:
        id: its id (the head URI of its Event, as text).
        uri: the Event's URI, pinned to the version that holds this state.
        envelope: the envelope.
        priority: ``urgent``, ``normal`` or ``background``.
        state: ``pending``, ``processing``, ``done`` or ``failed``.
        attempts: how many times it was handed out.
        error: the last error given to ``fail``, if any.
        enqueued_at: when it was enqueued (ms).
        seq: the journal seq that enqueued it.
    """

    id: str
    uri: cg.MemoryURI
    envelope: Mapping[str, Any]
    priority: str
    state: QueueState
    attempts: int
    error: str | None
    enqueued_at: int
    seq: int

    @property
    def order(self) -> tuple[int, int, int]:
        """The hand-out order: tier, then enqueue time, then journal seq."""
        return (TIERS.index(self.priority), self.enqueued_at, self.seq)

    def tags(self) -> list[str]:
        return ["chat-queue", f"queue-{self.state}", f"tier-{self.priority}"]

    def summary_json(self) -> str:
        data: dict[str, Any] = {"attempts": self.attempts}
        if self.error is not None:
            data["error"] = self.error
        return canonical_json(data)

    @classmethod
    def from_record(cls, record: Any, seq: int) -> QueueItem:
        """The item a queue Event's head record holds; ``seq`` is the journal seq of its
        version 1 (the enqueue)."""
        memory = record.memory
        state = next(t[6:] for t in memory.tags if t.startswith("queue-"))
        tier = next(t[5:] for t in memory.tags if t.startswith("tier-"))
        if state not in _STATES or tier not in TIERS:
            raise ValidationError(f"not a queue item: tags {memory.tags}", field="tags")
        extra = json.loads(memory.summary) if memory.summary else {}
        return cls(
            id=str(record.uri.head),
            uri=record.uri,
            envelope=json.loads(memory.text),
            priority=tier,
            state=state,
            attempts=int(extra.get("attempts", 0)),
            error=extra.get("error"),
            enqueued_at=memory.occurred_at,
            seq=seq,
        )

