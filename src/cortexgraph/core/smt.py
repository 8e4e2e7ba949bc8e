"""The sparse Merkle tree of the current heads: updates, proofs and their verifiers.

Pure, as :mod:`cortexgraph.core.roots` describes: the functions work over an abstract
node store (``get_node``) and return the nodes to write and delete;
:class:`SparseMerkleTree` keeps them in a dict.

Sparse Merkle tree (the current heads)
======================================

Keys are 256-bit strings (32 bytes); bit 0 is the most significant bit of ``key[0]`` and
chooses the root's child (0 = left). A subtree holding the key set ``S`` at depth ``d``
hashes to::

    S empty                    EMPTY = 32 zero bytes           (the zero placeholder)
    S = {(key, value_hash)}    H(0x00 || key || value_hash)    (a shortcut leaf, any depth)
    |S| >= 2                   H(0x01 || left || right)        (children split on bit d)

Equivalently: a full 256-level tree in which an interior node with one empty child and
one leaf child collapses to that leaf. The root of the empty tree is EMPTY.

Node store (content-addressed; the ``smt`` table holds ``node_hash -> encoding``, and the
encoding is the hash preimage, so ``H(encoding) == node_hash``; EMPTY is never stored)::

    leaf       +------+----------------+---------------------+
               | 0x00 | key (32 bytes) | value_hash (32)     |   65 bytes
               +------+----------------+---------------------+
    interior   +------+----------------+---------------------+
               | 0x01 | left (32)      | right (32)          |   65 bytes
               +------+----------------+---------------------+

Proof for ``key`` (:func:`smt_prove`; ``depth`` = number of interior nodes on the path)::

    +------+-------------+-------------------+--------------------+-----------------------+
    | kind | depth u16be | bitmap            | siblings           | other leaf (kind 2)   |
    | 1 B  | 2 B, <= 256 | ceil(depth/8) B   | 32 B per set bit   | key 32 B | value 32 B |
    +------+-------------+-------------------+--------------------+-----------------------+

    kind 0  the path ends in an empty subtree             (non-membership)
    kind 1  the path ends in key's own leaf               (membership; value from caller)
    kind 2  the path ends in the leaf of another key that shares the first depth bits
            with key; its key and value_hash follow        (non-membership)

Bitmap bit ``i`` (most significant bit of the first byte is ``i = 0``) says whether the
sibling of the path node at depth ``i + 1`` is non-empty; the non-empty siblings follow
in the same order (root side first); the last ``8*ceil(depth/8) - depth`` bits are zero.
A verifier rebuilds the path from the bottom: it starts from the leaf (or EMPTY) and
hashes ``H(0x01 || left || right)`` up, taking side from bit ``i`` of ``key``.

Invariants (M3 and M8, shared with the Merkle Mountain Range, are in ``core.roots``)
====================================================================================

M2  The SMT root is a function of the final key/value set only, never of the order of
    the updates that produced it.
M4  An SMT update costs O(log n) hash calls for hashed keys: one per interior node on the
    key's path, plus the new leaf, plus the nodes separating two keys that share a prefix.
M6  If an SMT node table holds exactly the nodes reachable from ``root``, then writing
    ``added`` and deleting ``removed`` from :func:`smt_update` leaves exactly the nodes
    reachable from the new root: the table is a function of the key/value set (J4).
M7  SMT proofs are canonical: for a given root and key there is one accepted proof, so
    every changed bit is rejected. The verifier requires the exact length, zero padding
    bits, no all-zero sibling marked present, a present deepest sibling when
    ``depth > 0`` (otherwise the leaf would sit higher), at most 256 siblings, and for
    kind 2 a different key sharing the first ``depth`` bits. Soundness rests on the
    hashes: a non-canonical path cannot rebuild the root, so most of these checks only
    reject early. The exception is "kind 2 names a *different* key": without it, a
    present key's own leaf would rebuild the true root and "prove" the key absent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..errors import CorruptionError, ValidationError
from .hashing import DIGEST_SIZE, hash_function, local_hash_function
from .roots import LEAF, NODE, is_digest, is_hash_name, require_digest

__all__ = [
    "EMPTY_SMT_ROOT",
    "SMT_KEY_SIZE",
    "SmtGetNode",
    "SmtUpdate",
    "SmtVerifier",
    "SparseMerkleTree",
    "smt_get",
    "smt_key",
    "smt_prove",
    "smt_update",
    "verify_smt",
]

SmtGetNode = Callable[[bytes], bytes | None]
"""Reads the 65-byte SMT node encoding stored under a node hash (``None`` if absent)."""

EMPTY_SMT_ROOT = bytes(DIGEST_SIZE)
SMT_KEY_SIZE = 32

_ZERO = EMPTY_SMT_ROOT
_KEY_BITS = 8 * SMT_KEY_SIZE
_SMT_NODE_SIZE = 1 + 2 * DIGEST_SIZE
_SHARED_DEPTH = 12  # SmtVerifier remembers node inputs of the top 12 levels ...
_MAX_SHARED = 1 << 14  # ... up to this many
_SMT_KEY_DOMAIN = b"cortexgraph/smt/key"


def _require_value(value: object) -> bytes | None:
    return None if value is None else require_digest(value, "value_hash")



class SmtUpdate(NamedTuple):
    """What :func:`smt_update` changed.

    Attributes:
        root: the new root.
        added: ``(node_hash, encoding)`` pairs to store.
        removed: node hashes no longer reachable from ``root``; deleting them keeps the
            table equal to the reachable set (M6). Keep them instead to serve proofs for
            older roots.
        old_value: the key's value hash before the update (``None``: it was absent).
    """

    root: bytes
    added: list[tuple[bytes, bytes]]
    removed: list[bytes]
    old_value: bytes | None


def _require_key(key: object) -> bytes:
    if not isinstance(key, bytes) or len(key) != SMT_KEY_SIZE:
        raise ValidationError(f"expected a {SMT_KEY_SIZE}-byte key, got {key!r}", field="key")
    return bytes(key)


def _read_smt_node(get_node: SmtGetNode, node_hash: bytes) -> bytes:
    enc = get_node(node_hash)
    if isinstance(enc, bytearray | memoryview):
        enc = bytes(enc)
    if type(enc) is not bytes or len(enc) != _SMT_NODE_SIZE or enc[0] > 1:
        raise CorruptionError(f"SMT node {node_hash.hex()} is missing or malformed")
    return enc


def _descend(
    get_node: SmtGetNode, root: bytes, kint: int
) -> tuple[list[bytes], list[bytes], bytes | None]:
    """Walk from ``root`` towards key ``kint``.

    Returns the sibling of each path node below the root (root side first), the hashes of
    the non-empty nodes on the path, and the encoding of the leaf the path ends in
    (``None`` when it ends in an empty subtree).
    """
    siblings: list[bytes] = []
    path: list[bytes] = []
    node = root
    while node != _ZERO:
        enc = _read_smt_node(get_node, node)
        path.append(node)
        if enc[0] == 0:
            return siblings, path, enc
        depth = len(siblings)
        if depth == _KEY_BITS:
            raise CorruptionError("SMT interior node at depth 256")
        if kint >> (_KEY_BITS - 1 - depth) & 1:
            siblings.append(enc[1:33])
            node = enc[33:]
        else:
            siblings.append(enc[33:])
            node = enc[1:33]
    return siblings, path, None


def smt_get(get_node: SmtGetNode, root: bytes, key: bytes) -> bytes | None:
    """Return the value hash stored under ``key`` in the tree ``root``, or ``None``."""
    key = _require_key(key)
    root = require_digest(root, "root")
    _, _, leaf = _descend(get_node, root, int.from_bytes(key, "big"))
    if leaf is not None and leaf[1:33] == key:
        return leaf[33:]
    return None


def smt_update(
    hash_name: str, get_node: SmtGetNode, root: bytes, key: bytes, value_hash: bytes | None
) -> SmtUpdate:
    """Set ``key`` to ``value_hash`` (``None`` deletes it) in the tree ``root``.

    Reads O(depth) nodes through ``get_node`` and makes O(depth) hash calls (M4). Nothing
    is written: the caller stores ``added`` and, to keep only reachable nodes, deletes
    ``removed`` (M6). Setting a key to its current value, or deleting an absent key,
    returns the same root and no changes.

    Raises:
        ValidationError: a key, value hash or root of the wrong type or length.
        CorruptionError: ``get_node`` returned a missing or malformed node.
    """
    h = hash_function(hash_name)
    key = _require_key(key)
    value_hash = _require_value(value_hash)
    root = require_digest(root, "root")
    kint = int.from_bytes(key, "big")
    siblings, old_path, leaf = _descend(get_node, root, kint)
    depth = len(siblings)
    old_value = leaf[33:] if leaf is not None and leaf[1:33] == key else None
    if old_value == value_hash:
        return SmtUpdate(root, [], [], old_value)

    created: list[tuple[bytes, bytes]] = []

    def make(enc: bytes) -> bytes:
        node = h(enc)
        created.append((node, enc))
        return node

    def bit(i: int) -> int:
        return kint >> (_KEY_BITS - 1 - i) & 1

    relocated = b""  # another key's leaf pushed down by an insertion, still reachable
    cur_is_leaf = value_hash is not None
    if value_hash is None:
        cur = _ZERO  # the key's own leaf goes away
    else:
        cur = make(LEAF + key + value_hash)
        if leaf is not None and old_value is None:
            # The path ended in another key's leaf: both leaves go below the first bit
            # at which the keys differ, under a chain of interior nodes with empty sides.
            relocated = old_path[-1]
            split = _KEY_BITS - (kint ^ int.from_bytes(leaf[1:33], "big")).bit_length()
            if split < depth:
                raise CorruptionError("SMT leaf found off its key's path")
            pair = (cur, relocated) if bit(split) == 0 else (relocated, cur)
            cur = make(NODE + pair[0] + pair[1])
            for i in range(split - 1, depth - 1, -1):
                cur = make(NODE + (cur + _ZERO if bit(i) == 0 else _ZERO + cur))
            cur_is_leaf = False
    for i in range(depth - 1, -1, -1):
        sibling = siblings[i]
        if sibling == _ZERO:
            if cur == _ZERO or cur_is_leaf:
                continue  # a lone leaf (or nothing) moves up: the collapse rule
        elif cur == _ZERO and _read_smt_node(get_node, sibling)[0] == 0:
            cur, cur_is_leaf = sibling, True  # the sibling leaf is now alone: it moves up
            continue
        cur = make(NODE + (cur + sibling if bit(i) == 0 else sibling + cur))
        cur_is_leaf = False

    old = set(old_path)
    new = {node for node, _ in created}
    added = [(node, enc) for node, enc in created if node not in old]
    removed = [node for node in old_path if node not in new and node != relocated]
    return SmtUpdate(cur, added, removed, old_value)


def smt_prove(get_node: SmtGetNode, root: bytes, key: bytes) -> bytes:
    """Return the proof for ``key`` in the tree ``root`` (layout in the module docstring).

    The same bytes prove membership when the key is present and non-membership when it
    is absent; :func:`verify_smt` takes the claim (a value hash or ``None``).
    """
    key = _require_key(key)
    root = require_digest(root, "root")
    siblings, _, leaf = _descend(get_node, root, int.from_bytes(key, "big"))
    if leaf is None:
        return encode_smt_proof(0, siblings, b"")
    if leaf[1:33] == key:
        return encode_smt_proof(1, siblings, b"")
    return encode_smt_proof(2, siblings, leaf[1:])


def encode_smt_proof(kind: int, siblings: list[bytes], tail: bytes) -> bytes:
    """The proof bytes for a path: ``kind``, the siblings from the root down (EMPTY ones
    are left out and marked absent in the bitmap), and for kind 2 the other leaf."""
    depth = len(siblings)
    bitmap = 0
    present = []
    for i, sibling in enumerate(siblings):
        if sibling != _ZERO:
            bitmap |= 1 << (depth - 1 - i)
            present.append(sibling)
    width = (depth + 7) >> 3
    return b"".join(
        [
            bytes([kind]),
            depth.to_bytes(2, "big"),
            (bitmap << (8 * width - depth)).to_bytes(width, "big"),
            *present,
            tail,
        ]
    )


def verify_smt(
    hash_name: str, root: bytes, key: bytes, value_hash: bytes | None, proof: bytes
) -> bool:
    """Check an SMT proof; never raises (M3).

    With a ``value_hash`` this checks that ``key`` maps to it (membership); with ``None``
    that ``key`` is absent (non-membership). Only the canonical encoding is accepted (M7).
    To check many proofs against one root, :class:`SmtVerifier` gives the same answers
    faster.
    """
    if not is_hash_name(hash_name):
        return False
    return _verify_smt(local_hash_function(hash_name), root, key, value_hash, proof, None)


class SmtVerifier:
    """Checks SMT proofs against one root: ``SmtVerifier(h, root).verify(key, value_hash,
    proof) == verify_smt(h, root, key, value_hash, proof)`` for every argument, and never
    raises (M3).

    The proofs of many keys share the nodes near the root, so the verifier remembers the
    hash of each interior-node input it computes in the top 12 levels (up to 16,384 of
    them, about 3 MB) and looks it up when another proof presents the same input: the
    same computation as :func:`verify_smt` (a cache of a pure function), minus repeated
    hash calls: the 1,000 memory proofs of ``benches/lifecycle.py`` make 56% fewer. It
    holds a reusable hasher: use one verifier per thread.
    """

    def __init__(self, hash_name: str, root: bytes) -> None:
        self._h = local_hash_function(hash_name) if is_hash_name(hash_name) else None
        self._root = root
        self._shared: dict[bytes, bytes] = {}

    def verify(self, key: bytes, value_hash: bytes | None, proof: bytes) -> bool:
        """``verify_smt(hash_name, root, key, value_hash, proof)``."""
        if self._h is None:
            return False
        return _verify_smt(self._h, self._root, key, value_hash, proof, self._shared)


def _verify_smt(
    h: Callable[[bytes], bytes], root: bytes, key: bytes, value_hash: bytes | None,
    proof: bytes, shared: dict[bytes, bytes] | None,
) -> bool:
    """:func:`verify_smt` with the hash function resolved; with ``shared``, hashes of the
    top levels' inputs are looked up there first and added to it (see
    :class:`SmtVerifier`)."""
    if not (
        is_digest(root)
        and type(key) is bytes
        and len(key) == SMT_KEY_SIZE
        and (value_hash is None or is_digest(value_hash))
        and type(proof) is bytes
        and len(proof) >= 3
    ):
        return False
    kind = proof[0]
    depth = proof[1] << 8 | proof[2]
    if kind > 2 or depth > _KEY_BITS or (kind == 1) != (value_hash is not None):
        return False
    width = (depth + 7) >> 3
    end = 3 + width
    if len(proof) < end:
        return False
    bitmap = int.from_bytes(proof[3:end], "big")
    padding = 8 * width - depth
    if bitmap & ((1 << padding) - 1):
        return False
    bitmap >>= padding
    if depth and not bitmap & 1:
        return False  # the deepest sibling is empty: the leaf would sit one level up
    end += DIGEST_SIZE * bitmap.bit_count()
    if len(proof) != end + (2 * DIGEST_SIZE if kind == 2 else 0):
        return False
    kint = int.from_bytes(key, "big")
    if value_hash is not None:  # kind 1
        node = h(LEAF + key + value_hash)
    elif kind == 0:
        node = _ZERO
    else:
        other = proof[end : end + SMT_KEY_SIZE]
        oint = int.from_bytes(other, "big")
        if oint == kint or (oint ^ kint) >> (_KEY_BITS - depth):
            return False  # the same key, or a leaf that is not on key's path
        node = h(LEAF + proof[end:])
    # Bottom up: bit 0 of ``bitmap`` and of ``path`` belong to the deepest level.
    path = kint >> (_KEY_BITS - depth)
    memo = {} if shared is None else shared
    top = 0 if shared is None else _SHARED_DEPTH  # levels i < top go through the memo
    keep = len(memo) < _MAX_SHARED
    for i in range(depth - 1, -1, -1):
        if bitmap & 1:
            start = end - DIGEST_SIZE
            sibling = proof[start:end]
            end = start
            if sibling == _ZERO:
                return False
        else:
            sibling = _ZERO
        data = NODE + sibling + node if path & 1 else NODE + node + sibling
        if i < top:
            known = memo.get(data)
            if known is None:
                known = h(data)
                if keep:
                    memo[data] = known
            node = known
        else:
            node = h(data)
        bitmap >>= 1
        path >>= 1
    return node == root


class SparseMerkleTree:
    """An in-memory 256-bit sparse Merkle tree of 32-byte value hashes.

    A thin wrapper around :func:`smt_update` and friends with a dict as node store
    holding exactly the reachable nodes (M6). The root depends only on the key/value set
    (M2).
    """

    def __init__(self, hash_name: str = "blake3") -> None:
        hash_function(hash_name)
        self._hash_name = hash_name
        self._nodes: dict[bytes, bytes] = {}
        self._root = EMPTY_SMT_ROOT
        self._count = 0

    @property
    def hash_name(self) -> str:
        """The hash this tree commits with."""
        return self._hash_name

    def update(self, key: bytes, value_hash: bytes | None) -> None:
        """Set ``key`` (32 bytes) to ``value_hash`` (32 bytes), or delete it with ``None``."""
        change = smt_update(self._hash_name, self._nodes.get, self._root, key, value_hash)
        for node, enc in change.added:
            self._nodes[node] = enc
        for node in change.removed:
            del self._nodes[node]
        self._root = change.root
        self._count += (value_hash is not None) - (change.old_value is not None)

    def get(self, key: bytes) -> bytes | None:
        """Return the value hash stored under ``key``, or ``None``."""
        return smt_get(self._nodes.get, self._root, key)

    def root(self) -> bytes:
        """Return the root hash (32 zero bytes when empty)."""
        return self._root

    def prove(self, key: bytes) -> bytes:
        """Return a (non-)membership proof for ``key``, for :func:`verify_smt`."""
        return smt_prove(self._nodes.get, self._root, key)

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"SparseMerkleTree(hash_name={self._hash_name!r}, len={self._count})"




def smt_key(hash_name: str, ns: str, memory_id: bytes) -> bytes:
    """Return the SMT key of a memory:
    ``H("cortexgraph/smt/key" || u16be(len(ns_utf8)) || ns_utf8 || memory_id)``.

    The length prefix keeps ``(ns, memory_id)`` pairs apart that concatenate to the same
    bytes (``("a", b"bc")`` vs ``("ab", b"c")``); ``memory_id`` is last, so it needs none.

    Raises:
        ValidationError: ``ns`` is not a string, not encodable as UTF-8 or longer than
            65535 bytes encoded; ``memory_id`` is not bytes.
    """
    h = hash_function(hash_name)
    if type(ns) is not str:
        raise ValidationError(f"expected str, got {type(ns).__name__}", field="ns")
    try:
        ns_utf8 = ns.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("not encodable as UTF-8", field="ns") from None
    if len(ns_utf8) > 0xFFFF:
        raise ValidationError("longer than 65535 bytes in UTF-8", field="ns")
    if not isinstance(memory_id, bytes):
        raise ValidationError(f"expected bytes, got {type(memory_id).__name__}", field="memory_id")
    return h(_SMT_KEY_DOMAIN + len(ns_utf8).to_bytes(2, "big") + ns_utf8 + memory_id)
