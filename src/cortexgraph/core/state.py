"""Derived records: what ``heads`` and ``versions`` hold, and what ``resolve`` returns.

Layouts (canonical CBOR maps; keys in ``core.keys``)::

    heads[id]               {"ns", "type", "head", "latest", "status", "created_at",
                             "updated_at", "reason"?}
    versions[id|version]    {"seq", "at", "body"}

``head`` is the version ``resolve`` returns for an unpinned URI; ``latest`` the highest
version that exists (``update_head`` may move ``head`` below it). ``status`` is
``"active"`` or ``"tombstoned"``. ``updated_at`` is the ``at`` of the last entry that
changed the memory. All of it is derived from the journal (J4).
"""

from __future__ import annotations

from typing import Any

import attrs

from ..errors import CorruptionError
from .codec import as_map, decode, encode_trusted
from .taxonomy import Memory, check_body
from .uri import MemoryURI

__all__ = ["STATUSES", "HeadState", "Record", "VersionState"]

STATUSES = ("active", "tombstoned")


def _int(value: Any, what: str) -> int:
    if type(value) is not int or value < 0:
        raise CorruptionError(f"{what} is not a non-negative integer")
    return value


def _str(value: Any, what: str) -> str:
    if type(value) is not str:
        raise CorruptionError(f"{what} is not text")
    return value


@attrs.frozen
class HeadState:
    """The current state of one memory, as stored in ``heads``."""

    ns: str
    type_name: str
    head: int
    latest: int
    status: str
    created_at: int
    updated_at: int
    reason: str = ""

    def encode(self) -> bytes:
        value: dict[str, Any] = {
            "ns": self.ns,
            "type": self.type_name,
            "head": self.head,
            "latest": self.latest,
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
        if self.reason:
            value["reason"] = self.reason
        return encode_trusted(value)

    @classmethod
    def decode(cls, data: bytes) -> HeadState:
        m = as_map(decode(data, what="a head record"), "a head record")
        what = "a head record"
        if not m.keys() <= {
            "ns", "type", "head", "latest", "status", "created_at", "updated_at", "reason"
        }:
            raise CorruptionError(f"{what} has unknown fields")
        try:
            state = cls(
                ns=_str(m["ns"], f"{what} ns"),
                type_name=_str(m["type"], f"{what} type"),
                head=_int(m["head"], f"{what} head"),
                latest=_int(m["latest"], f"{what} latest"),
                status=_str(m["status"], f"{what} status"),
                created_at=_int(m["created_at"], f"{what} created_at"),
                updated_at=_int(m["updated_at"], f"{what} updated_at"),
                reason=_str(m.get("reason", ""), f"{what} reason"),
            )
        except KeyError as exc:
            raise CorruptionError(f"{what} lacks {exc.args[0]!r}") from None
        if state.status not in STATUSES or not 1 <= state.head <= state.latest:
            raise CorruptionError(f"{what} is inconsistent")
        return state


@attrs.frozen
class VersionState:
    """One stored version of a memory."""

    seq: int
    at: int
    body: dict[str, Any]

    def encode(self) -> bytes:
        return encode_trusted({"seq": self.seq, "at": self.at, "body": self.body})

    @classmethod
    def decode(cls, data: bytes) -> VersionState:
        what = "a version record"
        m = as_map(decode(data, what=what), what)
        if m.keys() != {"seq", "at", "body"}:
            raise CorruptionError(f"{what} has the wrong fields")
        body = m["body"]
        if type(body) is not dict:
            raise CorruptionError(f"{what} body is not a map")
        return cls(_int(m["seq"], f"{what} seq"), _int(m["at"], f"{what} at"), body)

    def memory(self) -> Memory:
        return check_body(self.body, "a version record")


@attrs.frozen
class Record:
    """A resolved memory version with its place in the store.

    Attributes:
        uri: the URI pinned to this version.
        memory: the typed memory (one of the nine classes).
        version: this version's number.
        seq: the journal seq of the entry that wrote this version.
        at: when this version was written (ms since the epoch).
        head: the memory's current head version.
        latest: the highest version that exists.
        status: ``"active"`` or ``"tombstoned"``.
        created_at: when version 1 was written.
    """

    uri: MemoryURI
    memory: Memory
    version: int
    seq: int
    at: int
    head: int
    latest: int
    status: str
    created_at: int

    @property
    def is_head(self) -> bool:
        """Whether this version is the one an unpinned URI resolves to."""
        return self.version == self.head
