"""The journal: one canonical entry per mutation, and ``apply``, the one function that
turns an entry into derived state (used by writes and by replay alike).

Entry layout (canonical CBOR map, text keys only)::

    {"v": 1, "seq": n, "at": ms, "op": op, "ns": ns, ...op fields}

    op           fields
    write        id (16 bytes), body (memory map)
    update       id, version (the new version, = latest + 1), body
    head         id, version (an existing version)
    tombstone    id, reason? (omitted when empty)
    status       id, status (a lifecycle move: archived, pruned, active again, merged),
                 reason? (an archive by hand may give one; omitted when empty)
    edge         src, dst (ids), rel (canonical relation), strength (ppm), status, origin
    unedge       src, dst, rel
    access       ids (sorted, distinct ids, all in the entry's namespace)

``ns`` is the namespace of the memory an entry changes (for edges, the source's; the
target may live in another namespace of the same actor). An ``access`` entry records a
late-binding read: one per namespace that the read returned memories from.

Invariants:

- J1 seq is dense from 1 and strictly increasing; an entry is never rewritten.
- J2 every store mutation happens in a batch that appended at least one entry.
- J3 a batch is one LMDB write transaction (see ``store``).
- J4 derived state is a pure function of the journal: :func:`apply` reads only the
  derived state earlier entries produced, so rebuild == incremental, byte for byte.
- J5 a tombstone blocks ``update`` and ``head``; old versions stay resolvable.
- J6 decoding checks canonical form (``core.codec.decode``).

Ids: ``id = H("cortexgraph/id/v1" | u16be(len actor) | actor | u16be(len ns) | ns |
u64be(seq) | canonical body)[:16]``, with the environment's hash; the length prefixes keep
``("ab", "c")`` and ``("a", "bc")`` apart.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

from ..errors import CorruptionError, ValidationError
from .body import check_body, encode_body, memory_from_body
from .codec import decode_unchecked, encode_head, encode_trusted
from .graph import EDGE_STATUSES, PPM, RELATIONS, EdgeState, edge_in_key, edge_out_key
from .hashing import hash_function
from .keys import (
    ID_SIZE,
    version_key,
)
from .postings import KeywordChange, index_terms
from .signals import (
    CONSOLIDATION_PPM,
    AttrsRow,
    access_mutations,
    attrs_key,
    candidate_key,
    degree_mutations,
    weights_mutation,
)
from .state import STATUSES, HeadState, VersionState
from .taxonomy import ORIGINS, LearnWeights, Memory, type_by_name
from .uri import check_name

__all__ = [
    "ENTRY_VERSION",
    "HEAD_OPS",
    "STATUS_MOVES",
    "OPS",
    "Entry",
    "Identity",
    "Mutation",
    "StateView",
    "apply",
    "decode_entry",
    "edge_keys",
    "encode_entry",
    "head_ids",
    "memory_id",
]

ENTRY_VERSION = 1
OPS = ("write", "update", "head", "tombstone", "status", "edge", "unedge", "access")
#: ops that change a memory's head (and so its SMT leaf); an access may too (a restore)
HEAD_OPS = frozenset({"write", "update", "head", "tombstone", "status"})
#: the lifecycle moves a ``status`` entry may make: (from, to)
STATUS_MOVES = frozenset(
    {
        ("active", "archived"),
        ("archived", "pruned"),
        ("archived", "active"),
        ("active", "merged"),
        ("archived", "merged"),
    }
)
MAX_ACCESS_IDS = 10_000

_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")
_ID_DOMAIN = b"cortexgraph/id/v1"

#: A derived-state change: ``(table, key, value)``; ``value is None`` deletes the key.
Mutation = tuple[str, bytes, bytes | None]

_OP_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # op: (required fields, optional fields)
    "write": (frozenset({"id", "body"}), frozenset()),
    "update": (frozenset({"id", "version", "body"}), frozenset()),
    "head": (frozenset({"id", "version"}), frozenset()),
    "tombstone": (frozenset({"id"}), frozenset({"reason"})),
    "status": (frozenset({"id", "status"}), frozenset({"reason"})),
    "edge": (frozenset({"src", "dst", "rel", "strength", "status", "origin"}), frozenset()),
    "unedge": (frozenset({"src", "dst", "rel"}), frozenset()),
    "access": (frozenset({"ids"}), frozenset()),
}
_COMMON = frozenset({"v", "seq", "at", "op", "ns"})
#: op -> (its required fields, every field it may have)
_OP_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    op: (required, required | optional) for op, (required, optional) in _OP_FIELDS.items()
}


@attrs.frozen
class Identity:
    """What every entry of an environment is interpreted against."""

    actor: str
    hash_name: str


@attrs.frozen
class Entry:
    """One journal entry. ``fields`` holds the op-specific fields (see the module doc).

    Writers that built ``body`` from a validated memory pass it as ``memory`` (with its
    canonical bytes as ``body_bytes``) so that :func:`apply` need not validate it again;
    neither is part of the entry's value or equality.
    """

    seq: int
    at: int
    op: str
    ns: str
    fields: Mapping[str, Any] = attrs.field(factory=dict)
    memory: Memory | None = attrs.field(default=None, eq=False, repr=False)
    body_bytes: bytes | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def memory_id(self) -> bytes:
        """The id of the memory the entry is about (the source, for edge ops)."""
        value: bytes = self.fields["id"] if "id" in self.fields else self.fields["src"]
        return value


def head_ids(op: str, fields: Mapping[str, Any]) -> tuple[bytes, ...]:
    """The memories whose head record an entry may change (and so their SMT leaves, their
    keyword postings and their vectors): the memory of a head op, every memory an
    ``access`` names (reading an archived memory restores it); none for edge ops."""
    if op in HEAD_OPS:
        return (fields["id"],)
    if op == "access":
        return tuple(fields["ids"])
    return ()


def edge_keys(op: str, fields: Mapping[str, Any]) -> tuple[bytes, ...]:
    """The out-keys of the edges an entry adds, changes or removes (their SMT leaves)."""
    if op == "edge" or op == "unedge":
        return (edge_out_key(fields["src"], fields["rel"], fields["dst"]),)
    return ()


def memory_id(identity: Identity, ns: str, seq: int, body_bytes: bytes) -> bytes:
    """The deterministic 16-byte id of the memory a ``write`` entry creates."""
    actor = identity.actor.encode("utf-8")
    ns_b = ns.encode("utf-8")
    data = b"".join(
        (
            _ID_DOMAIN,
            _U16.pack(len(actor)),
            actor,
            _U16.pack(len(ns_b)),
            ns_b,
            _U64.pack(seq),
            body_bytes,
        )
    )
    return hash_function(identity.hash_name)(data)[:ID_SIZE]


_KEY_BYTES = {
    key: encode_head(3, len(key)) + key.encode("utf-8")
    for key in ("v", "seq", "at", "op", "ns", "id", "version", "body", "reason")
}
#: every field an entry may hold, in canonical map order (shortest key first, then bytes)
_ENTRY_ORDER = tuple(sorted(_KEY_BYTES, key=lambda k: (len(k), k)))
_WRITE_PREFIX = encode_head(5, 7) + _KEY_BYTES["v"] + b"\x01" + _KEY_BYTES["at"]
_WRITE_OP = _KEY_BYTES["op"] + encode_trusted("write") + _KEY_BYTES["seq"]


def write_entry(
    identity: Identity, ns: str, seq: int, at: int, memory: Memory
) -> tuple[Entry, bytes]:
    """The ``write`` entry at ``seq`` of ``memory`` (which the caller checked), and its
    canonical bytes; the new memory's id is ``entry.fields["id"]``. One call for what a
    batched write does per memory before it applies the entry."""
    body, body_bytes = encode_body(memory)
    mid = memory_id(identity, ns, seq, body_bytes)
    entry = Entry(seq, at, "write", ns, {"id": mid, "body": body}, memory, body_bytes)
    return entry, encode_entry(entry)


def encode_entry(entry: Entry) -> bytes:
    """The canonical bytes of an entry (the caller built ``fields`` from valid parts).

    Equal to ``encode({"v": 1, "seq": ..., **fields})`` (a property test checks it); the
    body's canonical bytes are spliced in when the writer already has them.
    """
    fields = entry.fields
    if entry.op == "write" and entry.body_bytes is not None and len(fields) == 2:
        # the hot path: {"v", "at", "id", "ns", "op", "seq", "body"} in canonical order
        return b"".join(
            (
                _WRITE_PREFIX,
                encode_head(0, entry.at),
                _KEY_BYTES["id"],
                encode_trusted(fields["id"]),
                _KEY_BYTES["ns"],
                encode_trusted(entry.ns),
                _WRITE_OP,
                encode_head(0, entry.seq),
                _KEY_BYTES["body"],
                entry.body_bytes,
            )
        )
    if not fields.keys() <= _KEY_BYTES.keys():
        value = {"v": ENTRY_VERSION, "seq": entry.seq, "at": entry.at, "op": entry.op}
        value["ns"] = entry.ns
        value.update(fields)
        return encode_trusted(value)
    common = {"v": b"\x01", "seq": encode_head(0, entry.seq), "at": encode_head(0, entry.at)}
    parts = [encode_head(5, len(fields) + 5)]
    for key in _ENTRY_ORDER:
        if key in common:
            encoded = common[key]
        elif key == "op":
            encoded = encode_trusted(entry.op)
        elif key == "ns":
            encoded = encode_trusted(entry.ns)
        elif key not in fields:
            continue
        elif key == "body" and entry.body_bytes is not None:
            encoded = entry.body_bytes
        else:
            encoded = encode_trusted(fields[key])
        parts.append(_KEY_BYTES[key])
        parts.append(encoded)
    return b"".join(parts)


def _is_id(value: Any) -> bool:
    return type(value) is bytes and len(value) == ID_SIZE


def _is_ids(value: Any) -> bool:
    return (
        type(value) is list
        and 0 < len(value) <= MAX_ACCESS_IDS
        and all(_is_id(v) for v in value)
        and all(a < b for a, b in itertools.pairwise(value))
    )


_FIELD_CHECKS: dict[str, Callable[[Any], bool]] = {
    "id": _is_id,
    "src": _is_id,
    "dst": _is_id,
    "ids": _is_ids,
    "version": lambda v: type(v) is int and v >= 1,
    "reason": lambda v: type(v) is str and bool(v),
    "rel": lambda v: type(v) is str and v in RELATIONS,
    "strength": lambda v: type(v) is int and 0 <= v <= PPM,
    "origin": lambda v: type(v) is str and v in ORIGINS,
}
#: ``status`` means an edge's status in ``edge`` entries and a memory's in ``status`` ones
_STATUS_CHECKS: dict[str, Callable[[Any], bool]] = {
    "edge": lambda v: type(v) is str and v in EDGE_STATUSES,
    "status": lambda v: type(v) is str and v in STATUSES,
}


def decode_entry(data: bytes) -> Entry:
    """Decode and check one journal entry.

    The entry comes back with its body already validated as a memory (``entry.memory``,
    ``entry.body_bytes``). Canonical form (J6) is checked by re-encoding the validated
    entry and comparing bytes, which also proves the body is exactly the canonical body
    of that memory.

    Raises:
        CorruptionError: not canonical (J6), an unknown op or version, missing or extra
            fields, fields of the wrong type, or a body that is not a valid memory.
    """
    m = decode_unchecked(data, what="a journal entry")
    if type(m) is not dict:
        raise CorruptionError("a journal entry is not a CBOR map")
    if m.get("v") != ENTRY_VERSION:
        raise CorruptionError(f"a journal entry has unknown format version {m.get('v')!r}")
    op = m.get("op")
    if type(op) is not str or op not in _OP_FIELDS:
        raise CorruptionError(f"a journal entry has unknown op {op!r}")
    required, allowed = _OP_KEYS[op]
    keys = m.keys() - _COMMON
    if not m.keys() >= _COMMON or not required <= keys or not keys <= allowed:
        raise CorruptionError(f"a journal {op} entry has missing or extra fields")
    seq, at, ns = m["seq"], m["at"], m["ns"]
    if type(seq) is not int or seq < 1 or type(at) is not int or at < 0:
        raise CorruptionError("a journal entry has a bad seq or at")
    try:
        check_name(ns, "ns")
    except Exception:
        raise CorruptionError(f"journal entry {seq} has a bad namespace") from None
    fields = {k: m[k] for k in keys}
    for name, value in fields.items():
        check = _STATUS_CHECKS[op] if name == "status" else _FIELD_CHECKS.get(name)
        if check is not None and not check(value):
            raise CorruptionError(f"journal entry {seq} has a bad {name}")
    memory: Memory | None = None
    body_bytes: bytes | None = None
    if "body" in fields:
        try:
            memory = memory_from_body(fields["body"])
        except ValidationError as exc:
            raise CorruptionError(f"journal entry {seq} holds an invalid memory: {exc}") from None
        body_bytes = encode_body(memory)[1]
    entry = Entry(seq, at, op, ns, fields, memory, body_bytes)
    if encode_entry(entry) != data:
        raise CorruptionError(f"journal entry {seq} is not in canonical CBOR form")
    return entry


class StateView(Protocol):
    """Read access to derived state as earlier entries left it."""

    def get(self, table: str, key: bytes) -> bytes | None: ...


# ---------------------------------------------------------------------------
# apply


def _load_head(view: StateView, entry: Entry) -> HeadState:
    raw = view.get("heads", entry.memory_id)
    if raw is None:
        raise CorruptionError(f"journal entry {entry.seq} ({entry.op}) names an unknown memory")
    head = HeadState.decode(raw)
    if head.ns != entry.ns:
        raise CorruptionError(f"journal entry {entry.seq} names the memory in the wrong namespace")
    return head


def _load_version(view: StateView, memory_id: bytes, version: int, seq: int) -> VersionState:
    raw = view.get("versions", version_key(memory_id, version))
    if raw is None:
        raise CorruptionError(f"journal entry {seq} needs a version that does not exist")
    return VersionState.decode(raw)


def _entry_body(entry: Entry) -> tuple[Memory, bytes]:
    """The memory an entry's body holds and its canonical bytes, validating if needed."""
    if entry.memory is not None and entry.body_bytes is not None:
        return entry.memory, entry.body_bytes
    body = entry.fields["body"]
    return check_body(body, f"journal entry {entry.seq}"), encode_trusted(body)


def apply(
    identity: Identity,
    entry: Entry,
    view: StateView,
    *,
    trusted: bool = False,
    keywords: list[KeywordChange] | None = None,
) -> list[Mutation]:
    """The derived-state changes ``entry`` makes, given the state before it.

    Pure: the result depends only on ``identity``, ``entry`` and what ``view`` returns.
    Writers call it after checking preconditions, with ``trusted=True`` because they
    computed the entry's id themselves; replay calls it on every entry and the id of each
    ``write`` is recomputed and checked.

    The keyword index is not among the mutations: each memory the entry (re)indexes or
    stops indexing is appended to ``keywords`` (when given), and the write sequence
    (``writing.EntryWriter``) turns those changes into segments (``core.segments``).

    Raises:
        CorruptionError: the entry cannot follow the state (an unknown memory, a wrong id,
            an update of a tombstone, a version out of sequence).
    """
    op = entry.op
    if op == "edge" or op == "unedge":
        return _apply_edge(entry, view)
    if keywords is None:
        keywords = []
    if op == "access":
        return _apply_access(entry, view, keywords)
    out: list[Mutation] = []
    mid = entry.memory_id
    ns = entry.ns
    if op == "write":
        memory, body_bytes = _entry_body(entry)
        if not trusted and memory_id(identity, ns, entry.seq, body_bytes) != mid:
            raise CorruptionError(f"journal entry {entry.seq} has an id that does not match")
        if view.get("heads", mid) is not None:
            raise CorruptionError(f"journal entry {entry.seq} writes an existing memory")
        head = HeadState(ns, memory.type_name, 1, 1, "active", entry.at, entry.at)
        out.append(("heads", mid, head.encode()))
        out.append(
            (
                "versions",
                version_key(mid, 1),
                VersionState(entry.seq, entry.at, body_bytes).encode(),
            )
        )
        terms = index_terms(memory)
        length = sum(terms.values())
        keywords.append(KeywordChange(mid, 0, 0, terms, length))
        row = AttrsRow.of(
            memory,
            ns=ns,
            status="active",
            at=entry.at,
            created_at=entry.at,
            updated_at=entry.at,
            index_seq=entry.seq,
            length=length,
        )
        out.append(("salience", attrs_key(mid), row.encode()))
        if isinstance(memory, LearnWeights):
            out.append(weights_mutation(memory.weights))
        return out

    head = _load_head(view, entry)
    if head.status == "tombstoned":
        raise CorruptionError(f"journal entry {entry.seq} changes a tombstoned memory")
    if op == "update":
        version = entry.fields["version"]
        memory, body_bytes = _entry_body(entry)
        if version != head.latest + 1 or memory.type_name != head.type_name:
            raise CorruptionError(f"journal entry {entry.seq} is not the next version")
        new = VersionState(entry.seq, entry.at, body_bytes)
        out.append(("versions", version_key(mid, version), new.encode()))
        head = HeadState(
            head.ns, head.type_name, version, version, head.status, head.created_at, entry.at,
            head.reason,
        )
        _put_head(view, entry.seq, mid, head, memory, new.at, out, keywords)
    elif op == "head":
        version = entry.fields["version"]
        if not 1 <= version <= head.latest or version == head.head:
            raise CorruptionError(f"journal entry {entry.seq} moves the head to a bad version")
        new = _load_version(view, mid, version, entry.seq)
        memory = new.memory()
        head = HeadState(
            head.ns, head.type_name, version, head.latest, head.status, head.created_at,
            entry.at, head.reason,
        )
        _put_head(view, entry.seq, mid, head, memory, new.at, out, keywords)
    elif op == "tombstone":
        reason = entry.fields.get("reason", "")
        out.extend(_set_status(view, entry, mid, head, "tombstoned", keywords, reason=reason))
    elif op == "status":
        status = entry.fields["status"]
        if (head.status, status) not in STATUS_MOVES:
            raise CorruptionError(
                f"journal entry {entry.seq} moves a memory from {head.status} to {status}"
            )
        reason = entry.fields.get("reason", "")
        out.extend(_set_status(view, entry, mid, head, status, keywords, reason=reason))
    else:  # pragma: no cover - decode_entry admits only known ops
        raise CorruptionError(f"journal entry {entry.seq} has unknown op {op!r}")
    return out


def _put_head(
    view: StateView,
    seq: int,
    memory_id: bytes,
    head: HeadState,
    memory: Memory,
    version_at: int,
    out: list[Mutation],
    keywords: list[KeywordChange],
) -> None:
    """A new head version: the head record and the attributes row; an active memory is
    indexed again, at ``seq``."""
    out.append(("heads", memory_id, head.encode()))
    terms = index_terms(memory) if head.status == "active" else None
    index_seq, length = _reindex(keywords, seq, memory_id, _load_attrs(view, memory_id, seq), terms)
    row = AttrsRow.of(
        memory,
        ns=head.ns,
        status=head.status,
        at=version_at,
        created_at=head.created_at,
        updated_at=head.updated_at,
        index_seq=index_seq,
        length=length,
    )
    out.append(("salience", attrs_key(memory_id), row.encode()))


def _set_status(
    view: StateView,
    entry: Entry,
    memory_id: bytes,
    head: HeadState,
    status: str,
    keywords: list[KeywordChange],
    *,
    reason: str = "",
) -> list[Mutation]:
    """Move a memory to ``status``: head and attributes row; it is indexed at the entry's
    seq if it becomes active, and no longer indexed otherwise."""
    out: list[Mutation] = []
    changed = HeadState(
        head.ns, head.type_name, head.head, head.latest, status, head.created_at, entry.at,
        reason or head.reason,
    )
    out.append(("heads", memory_id, changed.encode()))
    before = _load_attrs(view, memory_id, entry.seq)
    terms = None
    if status == "active":
        terms = index_terms(_load_version(view, memory_id, head.head, entry.seq).memory())
    index_seq, length = _reindex(keywords, entry.seq, memory_id, before, terms)
    row = before.with_status(status, entry.at, index_seq, length)
    out.append(("salience", attrs_key(memory_id), row.encode()))
    return out


def _reindex(
    keywords: list[KeywordChange],
    seq: int,
    memory_id: bytes,
    before: AttrsRow,
    terms: dict[str, int] | None,
) -> tuple[int, int]:
    """Index a memory at ``seq`` with ``terms`` (None: stop indexing it), reporting the
    change; returns its new ``(index seq, length)``."""
    if terms is None:
        if before.index_seq:
            keywords.append(KeywordChange(memory_id, before.index_seq, before.length, None, 0))
        return 0, 0
    length = sum(terms.values())
    keywords.append(KeywordChange(memory_id, before.index_seq, before.length, terms, length))
    return seq, length


def _load_attrs(view: StateView, memory_id: bytes, seq: int) -> AttrsRow:
    raw = view.get("salience", attrs_key(memory_id))
    if raw is None:
        raise CorruptionError(f"journal entry {seq} names a memory without an attributes row")
    return AttrsRow.decode(raw)


def _live_head(view: StateView, memory_id: bytes, entry: Entry, ns: str | None) -> HeadState:
    raw = view.get("heads", memory_id)
    if raw is None:
        raise CorruptionError(f"journal entry {entry.seq} ({entry.op}) names an unknown memory")
    head = HeadState.decode(raw)
    if ns is not None and head.ns != ns:
        raise CorruptionError(f"journal entry {entry.seq} names a memory in the wrong namespace")
    if head.status == "tombstoned":
        raise CorruptionError(f"journal entry {entry.seq} links a tombstoned memory")
    return head


def _apply_edge(entry: Entry, view: StateView) -> list[Mutation]:
    """Add, change (``edge``) or remove (``unedge``) one edge, with in-degree upkeep (G1-G3)."""
    fields = entry.fields
    src, dst, rel = fields["src"], fields["dst"], fields["rel"]
    if src == dst:
        raise CorruptionError(f"journal entry {entry.seq} links a memory to itself")
    _live_head(view, src, entry, entry.ns)
    _live_head(view, dst, entry, None)
    out_key, in_key = edge_out_key(src, rel, dst), edge_in_key(src, rel, dst)
    raw = view.get("edges", out_key)
    old = None if raw is None else EdgeState.decode(raw)
    was_active = old is not None and old.active
    out: list[Mutation] = []
    if entry.op == "unedge":
        if old is None:
            raise CorruptionError(f"journal entry {entry.seq} removes an edge that does not exist")
        out.append(("edges", out_key, None))
        out.append(("edges", in_key, None))
        is_active = False
    else:
        if rel == "supersedes" and fields["origin"] != "human":
            raise CorruptionError(f"journal entry {entry.seq}: G1 supersedes needs origin human")
        state = EdgeState(
            fields["status"], fields["strength"], fields["origin"], entry.at, entry.seq
        )
        value = state.encode()
        out.append(("edges", out_key, value))
        out.append(("edges", in_key, value))
        is_active = state.active
    if is_active != was_active:
        out.extend(degree_mutations(view, dst, 1 if is_active else -1))
    if rel == "relates_to":
        candidate = (
            entry.op == "edge"
            and fields["status"] == "suggested"
            and fields["strength"] >= CONSOLIDATION_PPM
        )
        out.append(("salience", candidate_key(src, dst), b"" if candidate else None))
    return out


def _apply_access(
    entry: Entry, view: StateView, keywords: list[KeywordChange]
) -> list[Mutation]:
    """Count a late-binding read of each memory the entry names; an archived memory that
    is read becomes active again."""
    ids = entry.fields["ids"]
    out: list[Mutation] = []
    for mid in ids:
        raw = view.get("heads", mid)
        head = None if raw is None else HeadState.decode(raw)
        if head is None or head.ns != entry.ns:
            raise CorruptionError(f"journal entry {entry.seq} accesses an unknown memory")
        if head.status == "archived":
            out.extend(_set_status(view, entry, mid, head, "active", keywords))
    out.extend(access_mutations(view, ids, entry.at))
    return out


def type_of(head: HeadState) -> type[Memory]:
    """The memory class of a head record."""
    try:
        return type_by_name(head.type_name)
    except Exception:
        raise CorruptionError(f"a head record names unknown type {head.type_name!r}") from None
