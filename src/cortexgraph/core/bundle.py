"""Scope bundles: a slice of memories a sub-agent can check against an OverallRoot alone.

A bundle is one canonical CBOR map (text keys)::

    {"v": 1,
     "manifest": {"actor", "hash_name", "seq", "mmr_root", "smt_root", "overall_root"},
     "anchor":   {"entry": journal entry 1, "proof": [MMR inclusion proof of leaf 0]} | null,
     "records":  [{"id", "head", "version", "proof"}, ...]      sorted by id, no repeats
     "edges":    [{"key", "record", "proof"}, ...],             sorted by key, no repeats
     "consistency": {...},     optional: a consistency proof ending at this manifest
     "checkpoint":  "..."}     optional: a signed checkpoint of this manifest

``head`` and ``version`` are the memory's ``heads`` record and its head version's
``versions`` record; ``proof`` its SMT membership proof. An edge's ``key`` is its
``edges`` out-key (``o | src | u8 relation | dst``), ``record`` the edge record, ``proof``
the SMT membership proof of the edge leaf.

What verification checks (:func:`verify_scope_bytes`; SC1-SC7):

- SC1 the bytes are canonical CBOR of exactly this shape, within :data:`MAX_SCOPE_BYTES`;
- SC2 ``overall_root = H("cortexgraph/root/v1" | seq | mmr_root | smt_root)`` and, unless
  the caller explicitly passes ``None``, equals the trusted root or extends it (SC6) (only
  that check ties a bundle to a store: anyone can build a self-consistent one);
- SC3 the anchor binds the actor: entry 1 is in the MMR at leaf 0, and it is a write whose
  id equals ``H(actor | ns | 1 | body)`` (a different actor name gives a different id);
- SC4 every record's head commitment is in the SMT under its key, and its body is a valid
  memory (the commitment covers the body's bytes: they are the store's, canonical since
  they were written);
- SC5 every edge leaf is in the SMT, and both its ends are records of the bundle.
- SC6 a ``consistency`` proof (``core.consistency``) ends at the manifest's seq and root; a
  bundle whose root is not the trusted root verifies only with one that starts at the
  trusted root, so a sub-agent that trusts an older root accepts a newer bundle only if
  its journal extends the one it trusts;
- SC7 a ``checkpoint`` is a signed note in the C2SP tlog-checkpoint form
  (``core.checkpoint``) of the manifest's seq and overall root. Its signature is checked by
  :func:`cortexgraph.verify_scope` with the caller's verifier key (signatures are not
  checked here: that needs the ``sign`` extra).

Bundles without the two optional fields are byte-identical to those made before they
existed, and verify as they did.

Any failure raises :class:`~cortexgraph.errors.VerificationError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..errors import CortexError, VerificationError
from .body import memory_from_body
from .checkpoint import Checkpoint, parse_checkpoint_text, split_note
from .codec import canonical_keys, decode_unchecked, encode, encode_head
from .commitments import edge_commitment, edge_smt_key, head_commitment
from .consistency import ConsistencyProof, verify_consistency
from .graph import EdgeState, relation_name
from .hashing import DIGEST_SIZE, HASH_NAMES
from .journal import Identity, decode_entry, memory_id
from .keys import ID_SIZE
from .mmr import mmr_leaf_hash, verify_inclusion
from .roots import overall_root
from .smt import SmtVerifier, smt_key
from .state import HeadState, Record, VersionState
from .uri import MemoryURI, check_name

__all__ = [
    "MAX_SCOPE_BYTES",
    "SCOPE_VERSION",
    "ScopeEdge",
    "VerifiedScope",
    "encode_scope",
    "verify_scope_bytes",
]

SCOPE_VERSION = 1
#: the largest bundle accepted (and produced): 64 MiB
MAX_SCOPE_BYTES = 64 << 20
_MANIFEST_KEYS = {"actor", "hash_name", "seq", "mmr_root", "smt_root", "overall_root"}
_EDGE_KEY_SIZE = 1 + ID_SIZE + 1 + ID_SIZE
_BUNDLE_KEYS = {"v", "manifest", "anchor", "records", "edges"}
_OPTIONAL_KEYS = {"consistency", "checkpoint"}
_RECORD_KEYS = {"id", "head", "version", "proof"}
_EDGE_KEYS = {"key", "record", "proof"}


def encode_scope(
    manifest: Mapping[str, Any],
    anchor: Mapping[str, Any] | None,
    records: Sequence[Mapping[str, Any]],
    edges: Sequence[Mapping[str, Any]],
    *,
    consistency: ConsistencyProof | None = None,
    checkpoint: str | None = None,
) -> bytes:
    """The canonical bytes of a bundle (records sorted by id, edges by key); the optional
    ``consistency`` proof and signed ``checkpoint`` are included only when given."""
    value: dict[str, Any] = {
        "v": SCOPE_VERSION,
        "manifest": dict(manifest),
        "anchor": None if anchor is None else dict(anchor),
        "records": sorted((dict(r) for r in records), key=lambda r: r["id"]),
        "edges": sorted((dict(e) for e in edges), key=lambda e: e["key"]),
    }
    if consistency is not None:
        value["consistency"] = consistency.to_map()
    if checkpoint is not None:
        value["checkpoint"] = checkpoint
    data = encode(value)
    if len(data) > MAX_SCOPE_BYTES:
        raise CortexError(
            f"the scope bundle would take {len(data)} bytes, more than {MAX_SCOPE_BYTES};"
            " ask for fewer memories"
        )
    return data


@attrs.frozen
class ScopeEdge:
    """An edge of a verified scope: ``src --relation--> dst`` (both in the scope)."""

    src: MemoryURI
    dst: MemoryURI
    relation: str
    strength: float
    status: str
    origin: str


@attrs.frozen
class VerifiedScope:
    """What a bundle proved: its manifest and the records and edges it holds.

    ``consistency`` is the bundle's consistency proof (SC6) and ``checkpoint`` its signed
    checkpoint (SC7; its signature is checked only by a caller with a verifier key), None
    when the bundle carries none.
    """

    actor: str
    hash_name: str
    seq: int
    overall_root: bytes
    records: tuple[Record, ...]
    edges: tuple[ScopeEdge, ...]
    consistency: ConsistencyProof | None = None
    checkpoint: Checkpoint | None = None


def _fail(why: str) -> VerificationError:
    return VerificationError(f"the scope bundle does not verify: {why}")


def _map(value: Any, keys: set[str], what: str) -> dict[str, Any]:
    if type(value) is not dict or set(value) != keys:
        raise _fail(f"{what} is malformed")
    return value


def _digest(value: Any, what: str) -> bytes:
    if type(value) is not bytes or len(value) != DIGEST_SIZE:
        raise _fail(f"{what} is not a {DIGEST_SIZE}-byte hash")
    return value


def verify_scope_bytes(blob: object, trusted_root: object) -> VerifiedScope:
    """Check a bundle (SC1-SC5) and return what it proves.

    ``trusted_root`` is the OverallRoot the bundle must commit to, or ``None`` to check
    self-consistency only (no default: the caller decides).

    Raises:
        VerificationError: on anything that does not check out, including a wrong type of
            argument, a bundle over the size cap, and a root other than ``trusted_root``.
    """
    try:
        return _verify(blob, trusted_root)
    except VerificationError:
        raise
    except Exception as exc:  # decoding errors, malformed records: all the same to a caller
        raise _fail(f"{type(exc).__name__}: {exc}") from None


def _verify(blob: object, trusted_root: object) -> VerifiedScope:
    if type(blob) is not bytes:
        raise _fail("it is not bytes")
    if len(blob) > MAX_SCOPE_BYTES:
        raise _fail(f"it is larger than {MAX_SCOPE_BYTES} bytes")
    if trusted_root is not None and (type(trusted_root) is not bytes or len(trusted_root) != 32):
        raise _fail("the trusted root is not 32 bytes")
    # SC1 in two halves: decode and check the shape of every field on the way, then
    # compare the canonical encoding of what was checked with the blob.
    bundle = decode_unchecked(blob, what="a scope bundle")
    if type(bundle) is not dict or not _BUNDLE_KEYS <= set(bundle) <= _BUNDLE_KEYS | _OPTIONAL_KEYS:
        raise _fail("the bundle is malformed")
    if type(bundle["v"]) is not int or bundle["v"] != SCOPE_VERSION:  # not True, not 1.0
        raise _fail(f"unknown bundle version {bundle['v']!r}")
    manifest = _map(bundle["manifest"], _MANIFEST_KEYS, "the manifest")
    actor, h, seq = manifest["actor"], manifest["hash_name"], manifest["seq"]
    if type(actor) is not str or h not in HASH_NAMES or type(seq) is not int or seq < 0:
        raise _fail("the manifest names a bad actor, hash or seq")
    check_name(actor, "actor")
    mmr_root = _digest(manifest["mmr_root"], "mmr_root")
    smt_root = _digest(manifest["smt_root"], "smt_root")
    root = _digest(manifest["overall_root"], "overall_root")
    if overall_root(h, seq, mmr_root, smt_root) != root:  # SC2
        raise _fail("the manifest's roots do not hash to its overall root")
    consistency = _check_consistency(bundle.get("consistency"), h, seq, root, trusted_root)
    checkpoint = _check_checkpoint(bundle.get("checkpoint"), seq, root)
    _check_anchor(bundle["anchor"], actor, h, seq, mmr_root)
    smt = SmtVerifier(h, smt_root)  # one verifier: the proofs share their top levels
    records = _check_records(bundle["records"], smt, actor, h)
    edges = _check_edges(bundle["edges"], smt, h, records)
    if _canonical_bytes(bundle) != blob:  # every field is checked now: the rest of SC1
        raise _fail("it is not in canonical CBOR form")
    return VerifiedScope(
        actor, h, seq, root, tuple(records.values()), edges, consistency, checkpoint
    )


def _check_consistency(
    raw: Any, h: str, seq: int, root: bytes, trusted_root: object
) -> ConsistencyProof | None:
    """SC6 and the trusted-root half of SC2."""
    try:
        proof = None if raw is None else ConsistencyProof.from_map(raw)
    except VerificationError as exc:
        raise _fail(str(exc)) from None
    if proof is not None and (proof.hash_name != h or proof.new_size != seq):
        raise _fail("its consistency proof does not end at its manifest")
    if proof is not None and not verify_consistency(
        proof, old_root=proof.old_root, new_root=root
    ):
        raise _fail("its consistency proof does not verify")
    if trusted_root is None or root == trusted_root:
        return proof
    if proof is None:
        raise _fail("its overall root is not the trusted root")
    if proof.old_root != trusted_root:
        raise _fail(
            "its overall root is not the trusted root, and its consistency proof starts"
            " at another root"
        )
    return proof


def _check_checkpoint(raw: Any, seq: int, root: bytes) -> Checkpoint | None:
    """SC7 (the grammar and the contents; the signature is the caller's to check)."""
    if raw is None:
        return None
    if type(raw) is not str:
        raise _fail("its checkpoint is not text")
    try:
        origin, size, checkpoint_root = parse_checkpoint_text(split_note(raw)[0])
    except VerificationError as exc:
        raise _fail(str(exc)) from None
    if (size, checkpoint_root) != (seq, root):
        raise _fail("its checkpoint is of another seq or root than its manifest")
    return Checkpoint(origin, size, checkpoint_root, raw)


def _check_records(
    raw_records: Any, smt: SmtVerifier, actor: str, h: str
) -> dict[bytes, Record]:
    """SC4, in two passes: the proofs of all records, then their bodies (one pass doing
    both runs about a fifth slower, measured with 1,000 records)."""
    if type(raw_records) is not list:
        raise _fail("records is not a list")
    proven = []
    previous = b""
    for raw in raw_records:
        item = _map(raw, _RECORD_KEYS, "a record")
        mid, head_bytes, version_bytes, proof = (
            item["id"], item["head"], item["version"], item["proof"]
        )
        if type(mid) is not bytes or len(mid) != ID_SIZE or mid <= previous:
            raise _fail("record ids are not 16 bytes in strictly increasing order")
        previous = mid
        if type(head_bytes) is not bytes or type(version_bytes) is not bytes:
            raise _fail("a record's head or version is not bytes")
        head = HeadState.decode(head_bytes)
        value = head_commitment(h, head_bytes, version_bytes)
        if not smt.verify(smt_key(h, head.ns, mid), value, proof):  # SC4 (and proof: bytes)
            raise _fail(f"memory {mid.hex()} is not in the tree with these bytes")
        proven.append((mid, head, version_bytes))
    records: dict[bytes, Record] = {}
    for mid, head, version_bytes in proven:
        version = VersionState.decode(version_bytes)
        # The proof authenticated these exact bytes (they are the store's), so the body
        # needs decoding and validating into a memory, not a canonical re-encoding check.
        memory = memory_from_body(decode_unchecked(version.body, what="a memory body"))
        if memory.type_name != head.type_name:
            raise _fail(f"memory {mid.hex()} has a body of the wrong type")
        records[mid] = Record.of(actor, mid, head, head.head, version, memory)
    return records


_ORDERS = {
    frozenset(keys): canonical_keys(keys)
    for keys in (
        _BUNDLE_KEYS,
        _BUNDLE_KEYS | {"consistency"},
        _BUNDLE_KEYS | {"checkpoint"},
        _BUNDLE_KEYS | _OPTIONAL_KEYS,
    )
}
_RECORD_ORDER = canonical_keys(_RECORD_KEYS)
_EDGE_ORDER = canonical_keys(_EDGE_KEYS)


def _canonical_bytes(bundle: dict[str, Any]) -> bytes:
    """``encode(bundle)`` for a bundle whose every field has been checked (records and
    edges are maps of their keys to bytes), faster: the records and edges are encoded
    here directly, the rest through :func:`~cortexgraph.core.codec.encode`
    (``test_scope.py`` holds the two equal)."""
    order = _ORDERS[frozenset(bundle)]
    out = [encode_head(5, len(order))]
    for key, key_bytes in order:
        out.append(key_bytes)
        if key == "records":
            _encode_byte_maps(bundle[key], _RECORD_ORDER, out)
        elif key == "edges":
            _encode_byte_maps(bundle[key], _EDGE_ORDER, out)
        else:
            out.append(encode(bundle[key]))
    return b"".join(out)


def _encode_byte_maps(
    items: list[dict[str, bytes]], order: tuple[tuple[str, bytes], ...], out: list[bytes]
) -> None:
    """Append the canonical encoding of a list of maps, each holding exactly the keys of
    ``order`` (in canonical order, with their encodings) and bytes values."""
    out.append(encode_head(4, len(items)))
    head = encode_head(5, len(order))
    for item in items:
        out.append(head)
        for key, key_bytes in order:
            value = item[key]
            out += (key_bytes, encode_head(2, len(value)), value)


def _check_anchor(anchor: Any, actor: str, h: str, seq: int, mmr_root: bytes) -> None:
    """SC3: journal entry 1 is in the MMR and its id was made with ``actor``."""
    if anchor is None:
        if seq != 0:
            raise _fail("the anchor entry is missing")
        return
    item = _map(anchor, {"entry", "proof"}, "the anchor")
    entry_bytes, proof = item["entry"], item["proof"]
    if type(entry_bytes) is not bytes or type(proof) is not list:
        raise _fail("the anchor is malformed")
    if not verify_inclusion(h, 0, seq, mmr_leaf_hash(h, entry_bytes), proof, mmr_root):
        raise _fail("the anchor entry is not the journal's first entry")
    entry = decode_entry(entry_bytes)
    if entry.seq != 1 or entry.op != "write" or entry.body_bytes is None:
        raise _fail("the anchor entry is not the first write")
    if memory_id(Identity(actor, h), entry.ns, 1, entry.body_bytes) != entry.memory_id:
        raise _fail(f"the journal was not written by actor {actor!r}")


def _check_edges(
    raw_edges: Any, smt: SmtVerifier, h: str, records: Mapping[bytes, Record]
) -> tuple[ScopeEdge, ...]:
    if type(raw_edges) is not list:
        raise _fail("edges is not a list")
    found = []
    previous = b""
    for raw in raw_edges:
        item = _map(raw, _EDGE_KEYS, "an edge")
        key, record, proof = item["key"], item["record"], item["proof"]
        if type(key) is not bytes or len(key) != _EDGE_KEY_SIZE or key[:1] != b"o":
            raise _fail("an edge key is malformed")
        if key <= previous:
            raise _fail("edge keys are not in strictly increasing order")
        previous = key
        if type(record) is not bytes:
            raise _fail("an edge record is not bytes")
        if not smt.verify(edge_smt_key(h, key), edge_commitment(h, record), proof):
            raise _fail("an edge is not in the tree with these bytes")  # SC5 (and proof: bytes)
        src, dst = key[1 : 1 + ID_SIZE], key[2 + ID_SIZE :]
        if src not in records or dst not in records:
            raise _fail("an edge names a memory outside the scope")
        state = EdgeState.decode(record)
        found.append(
            ScopeEdge(
                records[src].uri.head,
                records[dst].uri.head,
                relation_name(key[1 + ID_SIZE]),
                state.strength / 1_000_000,
                state.status,
                state.origin,
            )
        )
    return tuple(found)
