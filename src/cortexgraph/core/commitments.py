"""What the OverallRoot commits to, and the proofs that tie one memory to it.

Two Merkle structures are maintained inside every write batch (derived, so J4 applies):

- the MMR over journal entries (``mmr`` table): leaf ``i`` is ``H(0x00 | entry bytes)`` of
  the entry at seq ``i + 1``. The table holds one row per entry, the nodes that appending
  its leaf writes (``core.mmr``), and nothing else::

      key    u64be(i)                      the leaf index, seq - 1
      value  leaf | parent 1 | ... | parent t      32 bytes each, lowest first, where
                                                   t = the trailing one bits of i

  The parent of height ``k`` roots leaves ``(i - 2**k, i]``; its left child is the last
  node of row ``i - 2**(k-1)``, which has exactly ``k - 1`` trailing ones. A reader of node
  position ``p`` takes ``(i, k) = core.mmr.mmr_node_origin(p)`` and slices node ``k`` out
  of row ``i`` (:func:`mmr_getter`). A row of any other length is ``CorruptionError``;
- the SMT over the heads of all memories and over every edge (``smt`` table, chunk layout
  in ``core.smt_store``). A memory's key is ``smt_key(ns, id)``, its value the *head
  commitment*

      head_commitment = H("cortexgraph/head/v1" | u32be(len head) | head | version)

  where ``head`` is the memory's ``heads`` record and ``version`` the ``versions`` record
  of its head version (``core.state`` layouts). Tombstoned memories stay in the tree, with
  their status in the head record, so a proof shows a memory was forgotten. An edge's key
  is ``H("cortexgraph/smt/edge" | src | u8 relation | dst)`` and its value
  ``H("cortexgraph/edge/v1" | edge record)`` (``core.graph`` layout); a removed edge
  leaves the tree. So a scope can prove the edges among its memories too.

``OverallRoot = H("cortexgraph/root/v1" | u64be(journal size) | mmr_root | smt_root)``.

Invariants:

- M9 after every committed batch, the ``mmr`` table holds exactly one row per journal
  entry, the nodes of the MMR of all journal entries, and the ``smt`` table exactly the
  SMT of the head commitments of all memories (both functions of the journal: rebuild ==
  incremental, and :func:`build_mmr_rows` == the rows of :func:`mmr_mutations`).
- M10 a :class:`SnapshotManifest` stored at seq ``s`` equals the manifest a rebuild computes
  at seq ``s``; ``replay.verify`` checks every stored one.
- M11 :func:`verify_memory_proof` never raises; it accepts a proof only if the head record,
  version record and entry hash into the trusted OverallRoot through both trees.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs

from ..errors import CorruptionError, ValidationError
from .codec import as_map, decode, encode
from .hashing import DIGEST_SIZE, HASH_NAMES, hash_function, hash_parts, local_hash_function
from .journal import Entry, Identity, Mutation, decode_entry
from .journal import memory_id as make_memory_id
from .mmr import (
    mmr_inclusion_proof,
    mmr_leaf_hash,
    mmr_node_origin,
    mmr_root,
    verify_inclusion,
)
from .roots import overall_root
from .smt import EMPTY_SMT_ROOT, smt_key, verify_smt
from .smt_apply import smt_store_apply, smt_store_build
from .smt_store import smt_store_prove, smt_store_root
from .state import HeadState, VersionState
from .uri import MemoryURI

__all__ = [
    "SCHEMA",
    "MemoryProof",
    "SnapshotManifest",
    "build_memory_proof",
    "build_mmr_rows",
    "build_smt_rows",
    "edge_commitment",
    "edge_smt_key",
    "empty_roots",
    "head_commitment",
    "manifest_for",
    "mmr_getter",
    "mmr_key",
    "mmr_mutations",
    "mmr_row",
    "roots",
    "smt_getter",
    "smt_mutations",
    "verify_memory_proof",
]

SCHEMA = 1
_HEAD_DOMAIN = b"cortexgraph/head/v1"
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
#: the layout byte, the head version and the namespace length of a ``heads`` record
#: (``core.state``: 01 | type | status | head u32 | latest u32 | 2 x u64 | len(ns) u8 | ns ...)
_HEAD_PREFIX = struct.Struct(">B2xI4x16xB")
_MMR_LEAF = b"\x00"
_MMR_NODE = b"\x01"
_SMT_KEY_DOMAIN = b"cortexgraph/smt/key"  # core.roots.smt_key's domain
_EDGE_KEY_DOMAIN = b"cortexgraph/smt/edge"
_EDGE_DOMAIN = b"cortexgraph/edge/v1"

Get = Callable[[str, bytes], "bytes | None"]


def mmr_key(index: int) -> bytes:
    """The ``mmr`` table key of the row of leaf ``index`` (the entry at seq ``index + 1``)."""
    return _U64.pack(index)


def head_commitment(hash_name: str, head: bytes, version: bytes) -> bytes:
    """The SMT value of a memory: its head record and head version record, hashed."""
    return hash_parts(hash_name, _HEAD_DOMAIN, _U32.pack(len(head)), head, version)


def mmr_row(index: int, row: object) -> bytes:
    """Return the ``mmr`` row of leaf ``index`` as bytes, checked for its length.

    Raises:
        CorruptionError: the row is not ``32 * (1 + trailing one bits of index)`` bytes.
    """
    if type(row) is not bytes:
        row = bytes(row) if isinstance(row, bytearray | memoryview) else b""
    nodes = (~index & (index + 1)).bit_length()  # 1 + the trailing one bits of index
    if len(row) != DIGEST_SIZE * nodes:
        raise CorruptionError(
            f"mmr row of leaf {index} (seq {index + 1}) is {len(row)} bytes,"
            f" not {DIGEST_SIZE * nodes} ({nodes} nodes)",
            table="mmr",
            operation="get",
        )
    return row


def mmr_getter(get: Get) -> Callable[[int], bytes | None]:
    """The ``mmr`` table as ``position -> node hash`` (what the MMR math reads): the node
    is sliced out of the row of the leaf whose append wrote it (``None`` if no such row).

    Raises (from the returned function):
        CorruptionError: that row has the wrong length (:func:`mmr_row`).
    """

    def node(position: int) -> bytes | None:
        index, height = mmr_node_origin(position)
        row = get("mmr", _U64.pack(index))
        if row is None:
            return None
        at = DIGEST_SIZE * height
        return mmr_row(index, row)[at : at + DIGEST_SIZE]

    return node


def mmr_mutations(
    hash_name: str,
    get: Get,
    size: int,
    entry_bytes: bytes,
    *,
    peaks: dict[int, bytes] | None = None,
) -> list[Mutation]:
    """The ``mmr`` row that appending the entry at seq ``size + 1`` writes: one put, of
    the leaf ``H(0x00 | entry)`` followed by the parents it completes, lowest first
    (:func:`~cortexgraph.core.mmr.mmr_append` written out flat: this runs per entry).

    Args:
        peaks: a writer's memory of the rows it appended, across calls: leaf index -> the
            last (highest) node of its row, while that node is a peak. A left sibling found
            there is not read; the call records its own row's and drops the ones it
            consumed, so it never holds more than the peaks (at most 64).

    Raises:
        ValidationError: ``size`` is not a non-negative int.
        CorruptionError: a row holding a left sibling is missing or has the wrong length.
    """
    h = hash_function(hash_name)
    if type(entry_bytes) is not bytes:
        entry_bytes = bytes(entry_bytes)
    if type(size) is not int or size < 0:
        raise ValidationError(f"expected a non-negative size, got {size!r}", field="size")
    cur = h(_MMR_LEAF + entry_bytes)
    nodes = [cur]
    pack = _U64.pack
    step = 1  # 2**height of the subtree ``cur`` roots
    n = size
    while n & 1:  # each trailing one bit of the leaf index completes one parent
        # The left sibling roots leaves (size - 2 * step, size - step]: it is the last
        # (highest) node of the row of leaf size - step.
        index = size - step
        sibling = None if peaks is None else peaks.pop(index, None)
        if sibling is None:
            left = get("mmr", pack(index))
            if type(left) is not bytes or len(left) != DIGEST_SIZE * len(nodes):
                if left is None:
                    raise CorruptionError(
                        f"mmr row of leaf {index} (seq {index + 1}) is missing",
                        table="mmr",
                        operation="get",
                    )
                left = mmr_row(index, left)
            sibling = left[-DIGEST_SIZE:]
        cur = h(_MMR_NODE + sibling + cur)
        nodes.append(cur)
        n >>= 1
        step <<= 1
    if peaks is not None:
        peaks[size] = cur
    return [("mmr", pack(size), b"".join(nodes))]


def build_mmr_rows(hash_name: str, entries: Iterable[bytes]) -> Iterator[tuple[bytes, bytes]]:
    """The ``mmr`` rows of a whole journal, in key order, in one pass: for the entry bytes
    of seq 1, 2, ..., the ``(key, row)`` pairs that :func:`mmr_mutations` writes one entry
    at a time, byte for byte. Each row's first 32 bytes are its entry's leaf hash.

    Nothing is read back: the left siblings a row needs are the peaks of the MMR so far,
    kept on a stack (at most 64 hashes).
    """
    h = local_hash_function(hash_name)  # one generator runs on one thread
    pack = _U64.pack
    peaks: list[bytes] = []  # the peaks of the MMR so far, highest first
    for index, data in enumerate(entries):
        cur = h(_MMR_LEAF + data)
        row = cur
        n = index
        while n & 1:
            cur = h(_MMR_NODE + peaks.pop() + cur)
            row += cur
            n >>= 1
        peaks.append(cur)
        yield pack(index), row


def smt_getter(get: Get) -> Callable[[bytes], bytes | None]:
    """The ``smt`` table as ``key -> row`` (what the SMT store reads)."""
    return lambda key: get("smt", key)


def smt_mutations(
    hash_name: str,
    get: Get,
    memory_ids: Iterable[bytes],
    edges: Iterable[bytes] = (),
) -> list[Mutation]:
    """The ``smt`` chunk writes that bring the heads of ``memory_ids`` and the edges whose
    out-keys are ``edges`` (``core.graph.edge_out_key``) up to date.

    ``get`` must already see the batch's ``heads``, ``versions`` and ``edges`` writes. A
    removed edge's leaf is removed.
    """
    updates = _smt_leaves(hash_name, get, memory_ids, edges)
    if not updates:
        return []
    _, writes = smt_store_apply(hash_name, smt_getter(get), updates)
    return [("smt", key, value) for key, value in sorted(writes.items())]


def build_smt_rows(
    hash_name: str, get: Get, memory_ids: Iterable[bytes], edges: Iterable[bytes] = ()
) -> list[tuple[bytes, bytes]]:
    """Every ``smt`` row of a store whose memories are ``memory_ids`` and whose edges
    have the out-keys ``edges``, built bottom-up in one pass
    (:func:`~cortexgraph.core.smt_apply.smt_store_build`), sorted by row key.

    For a rebuild: ``get`` sees the final ``heads``, ``versions`` and ``edges`` tables,
    and the rows equal, byte for byte, what :func:`smt_mutations` leaves after any
    batching of the same journal (S2). An out-key without an edge record has no leaf.

    Raises:
        CorruptionError: a memory has no head record or no head version record.
    """
    updates = _smt_leaves(hash_name, get, memory_ids, edges)
    leaves = [(key, value) for key, value in updates.items() if value is not None]
    return smt_store_build(hash_name, leaves)[1]


def _smt_leaves(
    hash_name: str, get: Get, memory_ids: Iterable[bytes], edges: Iterable[bytes]
) -> dict[bytes, bytes | None]:
    """The SMT key and value of each memory and each edge (``None``: the edge is gone)."""
    h = local_hash_function(hash_name)  # one call runs on one thread
    updates: dict[bytes, bytes | None] = {}
    unpack = _HEAD_PREFIX.unpack_from
    for memory_id in memory_ids:
        raw_head = get("heads", memory_id)
        if raw_head is None:
            raise CorruptionError(f"memory {memory_id.hex()} has no head record")
        # Only the namespace and the head version are needed here, and ``apply`` wrote
        # this record in this transaction. One that is not plainly well-formed takes the
        # full decode, which names what is wrong with it.
        layout, head, ns_len = unpack(raw_head)
        end = _HEAD_PREFIX.size + ns_len
        if layout != 1 or not 0 < head <= 0xFFFFFFFF or len(raw_head) < end + 2:
            head = HeadState.decode(raw_head).head
        ns_utf8 = raw_head[_HEAD_PREFIX.size : end]
        raw_version = get("versions", memory_id + _U32.pack(head))
        if raw_version is None:
            raise CorruptionError(f"memory {memory_id.hex()} has no head version record")
        key = h(_SMT_KEY_DOMAIN + _U16.pack(ns_len) + ns_utf8 + memory_id)
        updates[key] = h(_HEAD_DOMAIN + _U32.pack(len(raw_head)) + raw_head + raw_version)
    for out_key in edges:
        record = get("edges", out_key)
        updates[edge_smt_key(hash_name, out_key)] = (
            None if record is None else edge_commitment(hash_name, record)
        )
    return updates


def edge_smt_key(hash_name: str, out_key: bytes) -> bytes:
    """The SMT key of an edge: ``H("cortexgraph/smt/edge" | src id | u8 relation | dst id)``
    (the edge's out-key without its ``o`` tag), apart from every memory key by its domain."""
    return hash_function(hash_name)(_EDGE_KEY_DOMAIN + out_key[1:])


def edge_commitment(hash_name: str, record: bytes) -> bytes:
    """The SMT value of an edge: ``H("cortexgraph/edge/v1" | edge record)``."""
    return hash_function(hash_name)(_EDGE_DOMAIN + record)


def roots(hash_name: str, get: Get, size: int) -> tuple[bytes, bytes, bytes]:
    """``(mmr_root, smt_root, overall_root)`` of a store whose journal holds ``size``."""
    mmr = mmr_root(hash_name, mmr_getter(get), size)
    smt = smt_store_root(smt_getter(get))
    return mmr, smt, overall_root(hash_name, size, mmr, smt)


# ---------------------------------------------------------------------------
# Snapshots


def _digest(value: Any, what: str) -> bytes:
    if type(value) is not bytes or len(value) != 32:
        raise CorruptionError(f"{what} is not a 32-byte digest")
    return value


@attrs.frozen
class SnapshotManifest:
    """The roots of a store at one seq; stored in ``snapshots`` and checked by replay."""

    actor: str
    seq: int
    mmr_root: bytes
    smt_root: bytes
    overall_root: bytes
    hash_name: str
    schema: int = SCHEMA
    at: int = 0

    def encode(self) -> bytes:
        return encode(attrs.asdict(self))

    @classmethod
    def decode(cls, data: bytes) -> SnapshotManifest:
        m = as_map(decode(data, what="a snapshot manifest"), "a snapshot manifest")
        if m.keys() != {f.name for f in attrs.fields(cls)}:
            raise CorruptionError("a snapshot manifest has the wrong fields")
        if m["hash_name"] not in HASH_NAMES or type(m["seq"]) is not int:
            raise CorruptionError("a snapshot manifest has a bad hash name or seq")
        return cls(
            actor=str(m["actor"]),
            seq=m["seq"],
            mmr_root=_digest(m["mmr_root"], "mmr_root"),
            smt_root=_digest(m["smt_root"], "smt_root"),
            overall_root=_digest(m["overall_root"], "overall_root"),
            hash_name=m["hash_name"],
            schema=int(m["schema"]),
            at=int(m["at"]),
        )

    def same_roots(self, other: SnapshotManifest) -> bool:
        """Whether both commit to the same state (``at`` aside)."""
        return (self.seq, self.mmr_root, self.smt_root, self.overall_root) == (
            other.seq,
            other.mmr_root,
            other.smt_root,
            other.overall_root,
        )


# ---------------------------------------------------------------------------
# Memory proofs


@attrs.frozen
class MemoryProof:
    """Everything needed to check one memory version against an OverallRoot.

    ``head_record`` and ``head_version_record`` are what the SMT commits to (the memory's
    ``heads`` record and the record of its head version); ``version_record`` is the record
    of the version being proved (the same bytes when that is the head). ``entry`` is the
    journal entry that wrote that version, and ``mmr_proof`` its inclusion proof in the MMR
    of ``journal_size`` entries.

    ``origin_entry`` is the ``write`` entry that created the memory, and
    ``origin_mmr_proof`` its inclusion proof; both are empty when the proved version is
    version 1 (``entry`` is that write). The write binds the actor: a memory's id is
    ``H(actor | ns | seq | body)[:16]``, so a proof whose URI names another actor than
    the one whose journal the root commits to does not verify.
    """

    hash_name: str
    uri: MemoryURI
    head_record: bytes
    head_version_record: bytes
    version_record: bytes
    smt_proof: bytes
    entry: bytes
    mmr_proof: tuple[bytes, ...]
    journal_size: int
    mmr_root: bytes
    smt_root: bytes
    origin_entry: bytes = b""
    origin_mmr_proof: tuple[bytes, ...] = ()

    @property
    def overall_root(self) -> bytes:
        return overall_root(self.hash_name, self.journal_size, self.mmr_root, self.smt_root)


def build_memory_proof(
    hash_name: str, get: Get, uri: MemoryURI, size: int, version: int
) -> MemoryProof:
    """Collect the proof of version ``version`` of ``uri``'s memory at journal ``size``."""
    raw_head = get("heads", uri.id)
    if raw_head is None:
        raise CorruptionError(f"{uri} has no head record")
    head = HeadState.decode(raw_head)
    head_version = get("versions", uri.id + _U32.pack(head.head))
    wanted = get("versions", uri.id + _U32.pack(version))
    if head_version is None or wanted is None:
        raise CorruptionError(f"{uri} lacks a version record")
    seq = VersionState.decode(wanted).seq
    entry = get("journal", _U64.pack(seq))
    if entry is None:
        raise CorruptionError(f"journal entry {seq} is missing")
    mmr, smt, _ = roots(hash_name, get, size)
    key = smt_key(hash_name, head.ns, uri.id)
    origin: bytes = b""
    origin_proof: list[bytes] = []
    if version != 1:  # the write that created the memory binds its id to the actor
        first = get("versions", uri.id + _U32.pack(1))
        if first is None:
            raise CorruptionError(f"{uri} lacks its version 1 record")
        origin_seq = VersionState.decode(first).seq
        origin = get("journal", _U64.pack(origin_seq)) or b""
        if not origin:
            raise CorruptionError(f"journal entry {origin_seq} is missing")
        origin_proof = mmr_inclusion_proof(hash_name, mmr_getter(get), origin_seq - 1, size)
    return MemoryProof(
        hash_name=hash_name,
        uri=MemoryURI.trusted(uri.actor, head.ns, uri.id, version),
        head_record=raw_head,
        head_version_record=head_version,
        version_record=wanted,
        smt_proof=smt_store_prove(hash_name, smt_getter(get), key),
        entry=entry,
        mmr_proof=tuple(mmr_inclusion_proof(hash_name, mmr_getter(get), seq - 1, size)),
        journal_size=size,
        mmr_root=mmr,
        smt_root=smt,
        origin_entry=origin,
        origin_mmr_proof=tuple(origin_proof),
    )


def verify_memory_proof(proof: object, trusted_root: object) -> bool:
    """Check a :class:`MemoryProof` against a trusted OverallRoot. Never raises (M11).

    True only if: the roots hash to ``trusted_root``; the head and head-version records
    are in the SMT under the memory's key; the proved version record was written by
    ``entry`` (same seq, same memory, same version, same body bytes); ``entry`` is in
    the MMR at its seq; and the memory's creating write (``entry`` for version 1, else
    ``origin_entry``, in the MMR too) made its id from the actor the URI names.
    """
    try:
        return _verify(proof, trusted_root)
    except Exception:
        return False


def _verify(proof: Any, trusted_root: Any) -> bool:
    if type(proof) is not MemoryProof or type(trusted_root) is not bytes:
        return False
    h = proof.hash_name
    if h not in HASH_NAMES or proof.overall_root != trusted_root:
        return False
    head = HeadState.decode(proof.head_record)
    version = VersionState.decode(proof.version_record)
    value = head_commitment(h, proof.head_record, proof.head_version_record)
    key = smt_key(h, head.ns, proof.uri.id)
    if head.ns != proof.uri.ns or not verify_smt(h, proof.smt_root, key, value, proof.smt_proof):
        return False
    number = proof.uri.version
    if number is None or not 1 <= number <= head.latest:
        return False
    if number == head.head and proof.version_record != proof.head_version_record:
        return False
    entry = decode_entry(proof.entry)
    if entry.seq != version.seq or entry.fields.get("id") != proof.uri.id:
        return False
    written = 1 if entry.op == "write" else entry.fields.get("version")
    if entry.op not in ("write", "update") or written != number:
        return False
    # the whole version record (seq, time and body) must be what this entry wrote
    if VersionState(entry.seq, entry.at, encode(entry.fields["body"])).encode() != (
        proof.version_record
    ):
        return False
    if entry.ns != head.ns:
        return False
    leaf = mmr_leaf_hash(h, proof.entry)
    if not verify_inclusion(
        h, entry.seq - 1, proof.journal_size, leaf, list(proof.mmr_proof), proof.mmr_root
    ):
        return False
    return _binds_actor(proof, entry, head.ns)


def _binds_actor(proof: MemoryProof, entry: Entry, ns: str) -> bool:
    """The write that created the proved memory is in the MMR and made its id with the
    actor the proof's URI names (ids hash the actor's name; the roots do not)."""
    h = proof.hash_name
    if entry.op == "write":
        if proof.origin_entry != b"" or proof.origin_mmr_proof != ():
            return False  # exactly empty: nothing unproved rides along
        origin = entry
    else:
        origin = decode_entry(proof.origin_entry)
        leaf = mmr_leaf_hash(h, proof.origin_entry)
        path = list(proof.origin_mmr_proof)
        if not verify_inclusion(h, origin.seq - 1, proof.journal_size, leaf, path, proof.mmr_root):
            return False
    if origin.op != "write" or origin.ns != ns or origin.fields.get("id") != proof.uri.id:
        return False
    body = encode(origin.fields["body"]) if origin.body_bytes is None else origin.body_bytes
    return make_memory_id(Identity(proof.uri.actor, h), ns, origin.seq, body) == proof.uri.id


def manifest_for(actor: str, hash_name: str, get: Get, size: int, at: int) -> SnapshotManifest:
    """The manifest of the store as ``get`` sees it with ``size`` journal entries."""
    mmr, smt, overall = roots(hash_name, get, size)
    return SnapshotManifest(actor, size, mmr, smt, overall, hash_name, SCHEMA, at)


def empty_roots(hash_name: str) -> tuple[bytes, bytes, bytes]:
    """The roots of an empty store."""
    mmr = hash_function(hash_name)(b"")
    return mmr, EMPTY_SMT_ROOT, overall_root(hash_name, 0, mmr, EMPTY_SMT_ROOT)
