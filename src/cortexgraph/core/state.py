"""Derived records: what ``heads`` and ``versions`` hold, and what ``resolve`` returns.

These tables are derived (J4), so their layout is ours to choose; it is fixed-width binary
so that the hot paths (``resolve``, every write) decode with one ``struct`` call. Each
layout has exactly one byte representation per value; decoding checks every length and
range and raises :class:`~cortexgraph.errors.CorruptionError` on anything else::

    heads[id]:
    +----+------+--------+----------+--------+------------+------------+-----+----+-----+--------+
    | 01 | type | status | head u32 | latest | created_at | updated_at | len | ns | len | reason |
    |    | u8   | u8     |          | u32    | u64 (ms)   | u64 (ms)   | u8  |    | u16 | UTF-8  |
    +----+------+--------+----------+--------+------------+------------+-----+----+-----+--------+

    versions[id|u32 version]:
    +----+----------+----------+------------------------------------+
    | 01 | seq u64  | at u64   | body: canonical CBOR memory map    |
    +----+----------+----------+------------------------------------+

``head`` is the version ``resolve`` returns for an unpinned URI; ``latest`` the highest
version that exists (``update_head`` may move ``head`` below it). ``updated_at`` is the
``at`` of the last entry that changed the memory. ``status`` codes: 1 active, 2 tombstoned,
3 archived, 4 pruned, 5 merged.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, ClassVar, Final, final

import attrs

from ..errors import CorruptionError, ValidationError
from .body import encode_body, memory_from_body
from .codec import decode_unchecked
from .taxonomy import MEMORY_TYPES, Memory
from .uri import MemoryURI, check_name

__all__ = [
    "STATUSES",
    "DerivedRow",
    "HeadState",
    "Record",
    "VersionState",
    "memory_from_stored",
]

STATUSES = ("active", "tombstoned", "archived", "pruned", "merged")
_STATUS_CODE = {name: code for code, name in enumerate(STATUSES, start=1)}
_TYPE_NAME = {t.type_code: t.type_name for t in MEMORY_TYPES}
_TYPE_CODE = {t.type_name: t.type_code for t in MEMORY_TYPES}

_LAYOUT = 1
_HEAD = struct.Struct(">BBBIIQQB")
_U16 = struct.Struct(">H")
_VERSION = struct.Struct(">BQQ")


class DerivedRow:
    """Equality, hashing and a repr by field, for the fixed-layout rows of derived tables.

    The rows are plain classes rather than attrs classes so that the compiled build makes
    them native: their construction and attribute reads are then C, where they run once or
    more per memory on the write path and per entry in a replay. Their attributes are
    ``Final``: mypy rejects an assignment, and compiled, one raises ``AttributeError``.
    """

    __slots__ = ()
    #: the fields, in the order :meth:`values` gives them
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def values(self) -> tuple[object, ...]:
        """The fields' values, in :data:`FIELDS` order."""
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, DerivedRow)
        return self.values() == other.values()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={v!r}" for n, v in zip(self.FIELDS, self.values(), strict=True))
        return f"{type(self).__name__}({fields})"


@final
class HeadState(DerivedRow):
    """The current state of one memory, as stored in ``heads``."""

    __slots__ = ("created_at", "head", "latest", "ns", "reason", "status", "type_name",
                 "updated_at")  # fmt: skip
    FIELDS: ClassVar[tuple[str, ...]] = (
        "ns", "type_name", "head", "latest", "status", "created_at", "updated_at", "reason"
    )  # fmt: skip

    def __init__(
        self,
        ns: str,
        type_name: str,
        head: int,
        latest: int,
        status: str,
        created_at: int,
        updated_at: int,
        reason: str = "",
    ) -> None:
        self.ns: Final = ns
        self.type_name: Final = type_name
        self.head: Final = head
        self.latest: Final = latest
        self.status: Final = status
        self.created_at: Final = created_at
        self.updated_at: Final = updated_at
        self.reason: Final = reason

    def encode(self) -> bytes:
        ns = self.ns.encode("utf-8")
        reason = self.reason.encode("utf-8")
        return (
            _HEAD.pack(
                _LAYOUT,
                _TYPE_CODE[self.type_name],
                _STATUS_CODE[self.status],
                self.head,
                self.latest,
                self.created_at,
                self.updated_at,
                len(ns),
            )
            + ns
            + _U16.pack(len(reason))
            + reason
        )

    @staticmethod
    def decode(data: bytes) -> HeadState:
        try:
            layout, type_code, status_code, head, latest, created, updated, ns_len = (
                _HEAD.unpack_from(data)
            )
            end = _HEAD.size + ns_len
            if layout != _LAYOUT or len(data) < end:
                raise ValueError("bad layout or length")
            ns = check_name(data[_HEAD.size : end].decode("utf-8"), "ns")
            (reason_len,) = _U16.unpack_from(data, end)
            if len(data) != end + 2 + reason_len:
                raise ValueError("bad reason length")
            reason = data[end + 2 :].decode("utf-8")
            type_name = _TYPE_NAME[type_code]
            status = STATUSES[status_code - 1]
        except (struct.error, ValueError, KeyError, IndexError, ValidationError) as exc:
            raise CorruptionError(f"a head record is malformed ({exc})") from None
        if not 1 <= head <= latest or status_code < 1:
            raise CorruptionError("a head record is inconsistent")
        return HeadState(ns, type_name, head, latest, status, created, updated, reason)


@final
class VersionState(DerivedRow):
    """One stored version of a memory: the entry that wrote it, and its body bytes."""

    __slots__ = ("at", "body", "seq")
    FIELDS: ClassVar[tuple[str, ...]] = ("seq", "at", "body")

    def __init__(self, seq: int, at: int, body: bytes) -> None:
        self.seq: Final = seq
        self.at: Final = at
        self.body: Final = body

    def encode(self) -> bytes:
        return _VERSION.pack(_LAYOUT, self.seq, self.at) + self.body

    @staticmethod
    def decode(data: bytes) -> VersionState:
        if len(data) <= _VERSION.size or data[0] != _LAYOUT:
            raise CorruptionError("a version record is malformed")
        _, seq, at = _VERSION.unpack_from(data)
        return VersionState(seq, at, data[_VERSION.size :])

    def memory(self) -> Memory:
        return memory_from_stored(self.body, "a version record")


def slot_setters(cls: type) -> tuple[Callable[[Any, Any], None], ...]:
    """The ``__set__`` of each attrs field's slot of ``cls``, in field order."""
    setters = []
    for field in attrs.fields(cls):
        slot = cls.__dict__[field.name]
        if type(slot).__name__ != "member_descriptor":  # pragma: no cover - all are slotted
            raise TypeError(f"{cls.__name__}.{field.name} is not a slot")
        setters.append(slot.__set__)
    return tuple(setters)


_new = object.__new__

#: Bodies already verified, by their exact bytes. A hit means these very bytes passed
#: every check before; memories are immutable, so sharing the object is safe. Bounded.
_VERIFIED: dict[bytes, Memory] = {}
_VERIFIED_MAX = 16384
_VERIFIED_MAX_BODY = 4096


def memory_from_stored(body: bytes, what: str) -> Memory:
    """Decode stored body bytes into a validated memory (J6: one canonical form).

    Raises:
        CorruptionError: the bytes are not CBOR, not a valid memory, or not exactly the
            canonical encoding of the memory they decode to.
    """
    known = _VERIFIED.get(body)
    if known is not None:
        return known
    memory = _verify_body(body, what)
    if len(body) <= _VERIFIED_MAX_BODY:
        if len(_VERIFIED) >= _VERIFIED_MAX:
            try:
                del _VERIFIED[next(iter(_VERIFIED))]
            except (KeyError, RuntimeError, StopIteration):  # another thread got there first
                pass
        _VERIFIED[body] = memory
    return memory


def _verify_body(body: bytes, what: str) -> Memory:
    value = decode_unchecked(body, what=what)
    if type(value) is not dict:
        raise CorruptionError(f"{what} body is not a map")
    try:
        memory = memory_from_body(value)
    except ValidationError as exc:
        raise CorruptionError(f"{what} holds an invalid memory: {exc}") from None
    # Re-encoding the validated memory and comparing bytes checks canonical form (J6) and
    # that the stored map is exactly the memory's body (no stray defaults or orderings).
    if encode_body(memory)[1] != body:
        raise CorruptionError(f"{what} body is not in canonical form")
    return memory


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

    @classmethod
    def of(
        cls, actor: str, memory_id: bytes, head: HeadState, version: int, state: VersionState,
        memory: Memory,
    ) -> Record:
        """The record of version ``version`` (stored as ``state``) of a memory."""
        uri = MemoryURI.trusted(actor, head.ns, memory_id, version)
        if cls is not Record:  # pragma: no cover - a subclass gets its own __init__
            return cls(uri, memory, version, state.seq, state.at, head.head, head.latest,
                       head.status, head.created_at)
        # Every part comes from checked state, so set the slots directly (as the decoders
        # above do): attrs' frozen __init__ costs about a microsecond on the read path.
        record = _new(cls)
        _RECORD_SLOTS[0](record, uri)
        _RECORD_SLOTS[1](record, memory)
        _RECORD_SLOTS[2](record, version)
        _RECORD_SLOTS[3](record, state.seq)
        _RECORD_SLOTS[4](record, state.at)
        _RECORD_SLOTS[5](record, head.head)
        _RECORD_SLOTS[6](record, head.latest)
        _RECORD_SLOTS[7](record, head.status)
        _RECORD_SLOTS[8](record, head.created_at)
        return record

    @property
    def is_head(self) -> bool:
        """Whether this version is the one an unpinned URI resolves to."""
        return self.version == self.head


_RECORD_SLOTS = slot_setters(Record)
if tuple(f.name for f in attrs.fields(Record)) != (
    "uri", "memory", "version", "seq", "at", "head", "latest", "status", "created_at"
):  # pragma: no cover - keep Record.of in step with the fields
    raise TypeError("Record changed fields; update Record.of")
