"""Pending operations: work the chat runtime dispatched and whose result it awaits.

Lifecycle (each step one journaled update of the operation's ``Event``, kind
``operation``, text the state as canonical JSON, tagged ``chat-op`` and ``op-<status>``)::

    pending --complete--> completed --+
       |                              +--acknowledge--> read --harvest--> gardened
       +------fail------> failed -----+                      (7 days later) --> archived

- ``pending``, and ``completed`` / ``failed`` not yet acknowledged, are shown in the system
  floor under "Active operations"; :meth:`OperationLog.acknowledge` (after the next turn)
  marks them read, which takes them out.
- The gardener's op harvester turns read completed operations into facts and marks every
  read one gardened; gardened operations are archived 7 days later.
- On start-up, operations still pending were orphaned by a crashed run: they fail with
  "orphaned from prior session (startup cleanup)" and, unread, stay visible for one turn.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

import cortexgraph as cg
from cortexgraph.errors import NotFoundError, ValidationError
from cortexgraph.integrations.chat.values import (
    FACT_TAG,
    canonical_json,
    check_channel,
    check_ms,
    check_text,
)

__all__ = ["ORPHANED", "Operation", "OperationLog"]

ORPHANED = "orphaned from prior session (startup cleanup)"
#: Gardened operations are archived this long after they were gardened.
ARCHIVE_OPS_AFTER_MS = 7 * 24 * 3600 * 1000
OP_TAG = "chat-op"
_LIMIT = 100_000


@attrs.frozen
class Operation:
    """One operation and where it is in its lifecycle.

    Attributes:
        id: its id (the head URI of its Event, as text).
        uri: the Event's URI, pinned to the version holding this state.
        type: what kind of work (``"agent"``, ``"search"``, ...).
        description: what was asked.
        expected_channel: the channel the result is for, if any.
        dispatched_at: when it started (ms).
        status: ``pending``, ``completed`` or ``failed``.
        completed_at: when it completed or failed.
        result: its result, or the error for a failed one.
        acknowledged_at: when the model saw its outcome (None: unread).
        gardened_at: when the op harvester took it.
    """

    id: str
    uri: cg.MemoryURI
    type: str
    description: str
    expected_channel: str | None
    dispatched_at: int
    status: str
    completed_at: int | None = None
    result: str | None = None
    acknowledged_at: int | None = None
    gardened_at: int | None = None

    def state_json(self) -> str:
        return _state_json(attrs.asdict(self, filter=lambda a, _: a.name not in ("id", "uri")))

    @property
    def visible(self) -> bool:
        """Shown under "Active operations": pending, or an outcome not yet read."""
        return self.status == "pending" or self.acknowledged_at is None

    def line(self) -> str:
        """Its line in the system floor."""
        head = f"[{self.status}] {self.type}: {self.description}"
        if self.status == "pending":
            return head
        return f"{head} -> {self.result}"


def _state_json(data: dict[str, Any]) -> str:
    return canonical_json(data)


class OperationLog:
    """The operations of one chat namespace, loaded when made (the live ones: archived
    operations are not loaded). Made by :class:`ChatMemory`, which runs the start-up
    cleanup; use it as ``chat.operations``."""

    def __init__(self, cx: cg.Cortex, ns: str) -> None:
        self.cx = cx
        self.ns = ns
        self._ops: dict[str, Operation] = {}
        for hit in cx.find(cg.Q.tag(OP_TAG) & cg.Q.ns(ns), limit=_LIMIT, order_by="recent"):
            data = json.loads(hit.record.memory.text)
            op = Operation(id=str(hit.record.uri.head), uri=hit.record.uri, **data)
            self._ops[op.id] = op

    def _at(self, at: int | None) -> int:
        return self.cx.clock.now_ms() if at is None else check_ms(at, "at")

    def _change(self, ops: list[Operation], at: int, **changes: Any) -> list[Operation]:
        """Apply ``changes`` to ``ops`` in one batch; the loaded state follows only once
        the batch has committed."""
        with self.cx.batch() as batch:
            saved = [self._save(batch, op, at, **changes) for op in ops]
        self._ops.update((op.id, op) for op in saved)
        return saved

    @staticmethod
    def _save(batch: Any, op: Operation, at: int, **changes: Any) -> Operation:
        new = attrs.evolve(op, **changes)
        uri = batch.update(op.uri, at=at, text=new.state_json(),
                           tags=[OP_TAG, f"op-{new.status}"])
        return attrs.evolve(new, uri=uri)

    def start(
        self, type: str, description: str, *, expected_channel: str | None = None,
        at: int | None = None,
    ) -> Operation:
        """Record a dispatched operation, pending."""
        kind = check_text(type, "type", 64)
        what = check_text(description, "description", 4000)
        if expected_channel is not None:
            check_channel(expected_channel)
        when = self._at(at)
        data: dict[str, Any] = {
            "type": kind, "description": what, "expected_channel": expected_channel,
            "dispatched_at": when, "status": "pending", "completed_at": None, "result": None,
            "acknowledged_at": None, "gardened_at": None,
        }
        uri = self.cx.write(
            cg.Event(text=_state_json(data), kind="operation", occurred_at=when,
                     tags=[OP_TAG, "op-pending"]),
            ns=self.ns, at=when,
        )
        op = Operation(id=str(uri.head), uri=uri, **data)
        self._ops[op.id] = op
        return op

    def get(self, op_id: str) -> Operation:
        """The live operation ``op_id``.

        Raises:
            NotFoundError: no live operation has this id.
        """
        if type(op_id) is not str or op_id not in self._ops:
            raise NotFoundError(f"no live operation {op_id!r}")
        return self._ops[op_id]

    def _pending(self, op_id: str) -> Operation:
        op = self.get(op_id)
        if op.status != "pending":
            raise ValidationError(f"operation {op_id} is {op.status}, not pending", field="id")
        return op

    def complete(self, op_id: str, result: str, *, at: int | None = None) -> Operation:
        """A pending operation completed with ``result``."""
        op = self._pending(op_id)
        text = check_text(result, "result", 4000)
        when = self._at(at)
        return self._change([op], when, status="completed", completed_at=when, result=text)[0]

    def fail(self, op_id: str, error: str, *, at: int | None = None) -> Operation:
        """A pending operation failed with ``error``."""
        op = self._pending(op_id)
        text = check_text(error, "error", 4000)
        when = self._at(at)
        return self._change([op], when, status="failed", completed_at=when, result=text)[0]

    def acknowledge(self, *, at: int | None = None) -> list[Operation]:
        """Mark every completed or failed operation not yet read as read (after a turn
        has shown it)."""
        when = self._at(at)
        unread = [op for op in self.live() if op.status != "pending" and op.visible]
        if not unread:
            return []
        return self._change(unread, when, acknowledged_at=when)

    def cleanup(self, *, at: int | None = None) -> list[Operation]:
        """Fail the operations a crashed run left pending (start-up cleanup)."""
        orphans = [op for op in self.live() if op.status == "pending"]
        if not orphans:
            return []
        when = self._at(at)
        return self._change(orphans, when, status="failed", completed_at=when, result=ORPHANED)

    def live(self) -> list[Operation]:
        """The operations not yet archived, oldest first (then by id)."""
        return sorted(self._ops.values(), key=lambda op: (op.dispatched_at, op.id))

    def floor_lines(self) -> tuple[str, ...]:
        """The "Active operations" lines: pending ones and unread outcomes."""
        return tuple(op.line() for op in self.live() if op.visible)

    def harvest(self, *, now: int) -> tuple[list[cg.MemoryURI], int]:
        """Turn read completed operations into facts, mark every read operation gardened,
        and archive those gardened 7 days ago or more. Returns the facts written and how
        many operations were archived."""
        ready = [op for op in self.live() if op.status != "pending"
                 and op.acknowledged_at is not None and op.gardened_at is None]
        old = [op for op in self.live() if op.gardened_at is not None
               and now - op.gardened_at >= ARCHIVE_OPS_AFTER_MS]
        facts: list[cg.MemoryURI] = []
        if not ready and not old:
            return facts, 0
        saved = []
        with self.cx.batch() as batch:
            for op in ready:
                if op.status == "completed":
                    fact = cg.Fact(
                        text=f"{op.type} operation \"{op.description}\" completed: {op.result}",
                        tags=[FACT_TAG, "operation"], source=cg.Source(origin="system"),
                    )
                    facts.append(batch.write(fact, ns=self.ns, at=now))
                saved.append(self._save(batch, op, now, gardened_at=now))
            for op in old:
                batch.archive(op.uri.head, reason="operation gardened 7 days ago", at=now)
        self._ops.update((op.id, op) for op in saved)
        for op in old:
            del self._ops[op.id]
        return facts, len(old)
