"""Merkle math: an RFC 6962 Merkle Mountain Range, a 256-bit sparse Merkle tree, the
OverallRoot, and verifiers for their proofs.

Everything here is pure: no I/O, no clock, no randomness. Persistence is the caller's job.
The tree algorithms are written as functions over an abstract node store (``get_node``),
and they *return* the nodes to write, so ``store/`` can keep the nodes in its LMDB tables
(``mmr``, ``smt``) while :class:`MMR` and :class:`SparseMerkleTree` wrap the same functions
around an in-memory list or dict. ``H`` is the environment's hash (BLAKE3-256 or SHA-256,
see :mod:`cortexgraph.core.hashing`); every digest is 32 bytes.

Merkle Mountain Range (the journal log)
=======================================

RFC 6962 hashing: ``leaf = H(0x00 || data)``, ``node = H(0x01 || left || right)``, and the
root of zero leaves is ``H(b"")``. Nodes are numbered in postorder, the order in which
appending creates them; ``size`` always counts *leaves*::

    height
      2                  6
                       /   \\
      1          2           5             9
                / \\         / \\          /   \\
      0        0   1       3   4        7     8     10
    leaf idx:  0   1       2   3        4     5      6      (size = 7, 11 nodes)

    nodes stored for n leaves      mmr_node_count(n) = 2*n - popcount(n)
    position of leaf i             mmr_leaf_position(i) = mmr_node_count(i)
    perfect subtree of height h    mmr_node_count(s) + 2**(h+1) - 2
      over leaves [s, s + 2**h)    (s a multiple of 2**h)

Appending leaf ``n`` writes its hash at ``mmr_node_count(n)`` and then one parent per
trailing one bit of ``n`` (leaf 3 completes nodes 5 and 6 above). The peaks of a tree of
``n`` leaves are the perfect subtrees of the binary decomposition of ``n``, highest first
(``n = 7``: nodes 6, 9, 10). The root bags them right to left::

    root = H(0x01 || P0 || H(0x01 || P1 || ... H(0x01 || P[k-2] || P[k-1])))

which is exactly RFC 6962's Merkle Tree Hash (MTH), because MTH splits ``n`` leaves at the
largest power of two below ``n``, i.e. at the first peak. The same holds for every node of
the RFC tree: it is either a stored perfect subtree or a bag of stored perfect subtrees,
so proofs for any size ``m <= n`` need O(log n) node reads and never rehash leaves.

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

Invariants
==========

M1  The MMR root of ``n`` leaves is the RFC 6962 MTH of those leaves, and
    ``mmr_root(.., m)`` for ``m <= n`` is the MTH of the first ``m``.
M2  The SMT root is a function of the final key/value set only, never of the order of
    the updates that produced it.
M3  Verifiers (:func:`verify_inclusion`, :func:`verify_consistency`, :func:`verify_smt`,
    :class:`SmtVerifier`) never raise: any malformed input (wrong type, ``bool`` for
    ``int``, a ``bytes`` subclass, negative or beyond-u64 sizes, ``index >= size``, wrong
    lengths, an unknown hash name, over-long proofs, trailing bytes) gives ``False``.
M4  An SMT update costs O(log n) hash calls for hashed keys: one per interior node on the
    key's path, plus the new leaf, plus the nodes separating two keys that share a prefix.
M5  The MMR is append-only: :func:`mmr_append` writes only positions
    ``[mmr_node_count(n), mmr_node_count(n + 1))``; a stored node never changes.
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
M8  Hash inputs are domain separated: 0x00 leaves vs 0x01 interior nodes, and the
    ``cortexgraph/root/v1`` and ``cortexgraph/smt/key`` prefixes with fixed-width or
    length-prefixed fields, so no two distinct inputs share a preimage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..errors import CorruptionError, ValidationError
from .hashing import DIGEST_SIZE, HASH_NAMES, hash_function, local_hash_function

__all__ = [
    "EMPTY_SMT_ROOT",
    "MMR",
    "MmrGetNode",
    "SMT_KEY_SIZE",
    "SmtGetNode",
    "SmtUpdate",
    "SmtVerifier",
    "SparseMerkleTree",
    "mmr_append",
    "mmr_consistency_proof",
    "mmr_inclusion_proof",
    "mmr_leaf_hash",
    "mmr_leaf_position",
    "mmr_node_count",
    "mmr_root",
    "overall_root",
    "smt_get",
    "smt_key",
    "smt_prove",
    "smt_update",
    "verify_consistency",
    "verify_inclusion",
    "verify_smt",
]

MmrGetNode = Callable[[int], bytes | None]
"""Reads the 32-byte MMR node stored at a position (``None`` if absent)."""

SmtGetNode = Callable[[bytes], bytes | None]
"""Reads the 65-byte SMT node encoding stored under a node hash (``None`` if absent)."""

EMPTY_SMT_ROOT = bytes(DIGEST_SIZE)
SMT_KEY_SIZE = 32

_LEAF = b"\x00"
_NODE = b"\x01"
_ZERO = EMPTY_SMT_ROOT
_KEY_BITS = 8 * SMT_KEY_SIZE
_SMT_NODE_SIZE = 1 + 2 * DIGEST_SIZE
_U64_MAX = (1 << 64) - 1
# An RFC 9162 inclusion proof for a tree of at most 2**64 - 1 leaves has at most 64
# elements and a consistency proof at most 65; longer lists are rejected up front.
_MAX_INCLUSION_PROOF = 64
_MAX_CONSISTENCY_PROOF = 65
_ROOT_DOMAIN = b"cortexgraph/root/v1"
_SHARED_DEPTH = 12  # SmtVerifier remembers node inputs of the top 12 levels ...
_MAX_SHARED = 1 << 14  # ... up to this many
_SMT_KEY_DOMAIN = b"cortexgraph/smt/key"


# --------------------------------------------------------------------------- validation


def _require_size(value: object, field: str) -> int:
    if type(value) is not int or not 0 <= value <= _U64_MAX:
        raise ValidationError(f"expected an int in [0, 2**64), got {value!r}", field=field)
    return value


def _require_digest(value: object, field: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != DIGEST_SIZE:
        raise ValidationError(f"expected {DIGEST_SIZE} bytes, got {value!r}", field=field)
    return bytes(value)


def _require_value(value: object) -> bytes | None:
    return None if value is None else _require_digest(value, "value_hash")


def _is_u64(value: object) -> bool:
    return type(value) is int and 0 <= value <= _U64_MAX


def _is_digest(value: object) -> bool:
    return type(value) is bytes and len(value) == DIGEST_SIZE


def _is_proof(value: object, max_len: int) -> bool:
    return (
        isinstance(value, list | tuple)
        and type(value) in (list, tuple)  # no subclass: no caller code runs in a verifier
        and len(value) <= max_len
        and all(_is_digest(p) for p in value)
    )


def _is_hash_name(value: object) -> bool:
    return type(value) is str and value in HASH_NAMES


# -------------------------------------------------------------------------------- MMR


def mmr_node_count(size: int) -> int:
    """Return how many MMR nodes are stored for ``size`` leaves (``2*size - popcount``)."""
    return 2 * size - size.bit_count()


def mmr_leaf_position(index: int) -> int:
    """Return the node position of leaf ``index`` (leaves are numbered from 0)."""
    return mmr_node_count(index)


def _require_data(data: object) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValidationError(f"expected bytes, got {type(data).__name__}", field="data")
    return bytes(data)


def mmr_leaf_hash(hash_name: str, data: bytes) -> bytes:
    """Return the RFC 6962 leaf hash ``H(0x00 || data)``."""
    return hash_function(hash_name)(_LEAF + _require_data(data))


def _split(n: int) -> int:
    """The largest power of two strictly below ``n`` (``n >= 2``): RFC 6962's ``k``."""
    return 1 << ((n - 1).bit_length() - 1)


def _read_mmr_node(get_node: MmrGetNode, pos: int) -> bytes:
    node = get_node(pos)
    if isinstance(node, bytearray | memoryview):
        node = bytes(node)
    if type(node) is not bytes or len(node) != DIGEST_SIZE:
        raise CorruptionError(f"MMR node {pos} is missing or not {DIGEST_SIZE} bytes")
    return node


def _range_hash(h: Callable[[bytes], bytes], get_node: MmrGetNode, start: int, end: int) -> bytes:
    """MTH of leaves ``[start, end)``, a node of the RFC 6962 tree (so ``start`` is a
    multiple of the smallest power of two >= ``end - start``), from stored peaks."""
    peaks = []
    n = end - start
    for height in range(n.bit_length() - 1, -1, -1):
        if n >> height & 1:
            peaks.append(_read_mmr_node(get_node, mmr_node_count(start) + (2 << height) - 2))
            start += 1 << height
    acc = peaks[-1]
    for peak in reversed(peaks[:-1]):
        acc = h(_NODE + peak + acc)
    return acc


def mmr_append(
    hash_name: str, get_node: MmrGetNode, size: int, leaf_hash: bytes
) -> list[tuple[int, bytes]]:
    """Append a leaf to an MMR of ``size`` leaves.

    Args:
        hash_name: the environment's hash.
        get_node: reads stored nodes; only positions below ``mmr_node_count(size)`` are read.
        size: the number of leaves already appended.
        leaf_hash: ``H(0x00 || data)`` of the new leaf (see :func:`mmr_leaf_hash`).

    Returns:
        The new ``(position, hash)`` nodes, in increasing position order: the leaf, then
        the parents it completes. The caller persists all of them (M5).

    Raises:
        ValidationError: bad ``size`` or ``leaf_hash``.
        CorruptionError: ``get_node`` returned a missing or malformed node.
    """
    h = hash_function(hash_name)
    _require_size(size, "size")
    cur = _require_digest(leaf_hash, "leaf_hash")
    pos = mmr_node_count(size)
    out = [(pos, cur)]
    height = 0
    n = size
    while n & 1:  # each trailing one bit of the leaf index completes one parent
        left = _read_mmr_node(get_node, pos - ((2 << height) - 1))
        cur = h(_NODE + left + cur)
        pos += 1
        out.append((pos, cur))
        n >>= 1
        height += 1
    return out


def mmr_root(hash_name: str, get_node: MmrGetNode, size: int) -> bytes:
    """Return the MTH of the first ``size`` leaves (M1); ``H(b"")`` when ``size == 0``.

    ``size`` may be any value up to the number of leaves stored.
    """
    h = hash_function(hash_name)
    _require_size(size, "size")
    if size == 0:
        return h(b"")
    return _range_hash(h, get_node, 0, size)


def mmr_inclusion_proof(hash_name: str, get_node: MmrGetNode, index: int, size: int) -> list[bytes]:
    """Return the RFC 9162 section 2.1.3.1 audit path of leaf ``index`` in the tree of the
    first ``size`` leaves, leaf side first.

    Raises:
        ValidationError: unless ``0 <= index < size``.
    """
    h = hash_function(hash_name)
    _require_size(index, "index")
    _require_size(size, "size")
    if index >= size:
        raise ValidationError(f"index {index} is not below size {size}", field="index")
    proof = []
    lo, hi = 0, size
    while hi - lo > 1:
        mid = lo + _split(hi - lo)
        if index < mid:
            proof.append(_range_hash(h, get_node, mid, hi))
            hi = mid
        else:
            proof.append(_range_hash(h, get_node, lo, mid))
            lo = mid
    proof.reverse()
    return proof


def mmr_consistency_proof(
    hash_name: str, get_node: MmrGetNode, old_size: int, new_size: int
) -> list[bytes]:
    """Return the RFC 9162 section 2.1.4.1 consistency proof ``PROOF(old_size, D[new_size])``.

    The RFC defines it for ``0 < old_size < new_size``; for ``old_size == 0`` and for
    ``old_size == new_size`` the proof is empty (see :func:`verify_consistency`).

    Raises:
        ValidationError: unless ``0 <= old_size <= new_size``.
    """
    h = hash_function(hash_name)
    _require_size(old_size, "old_size")
    _require_size(new_size, "new_size")
    if old_size > new_size:
        raise ValidationError(f"old_size {old_size} is above new_size {new_size}", field="old_size")
    if old_size in (0, new_size):
        return []
    proof = []
    lo, hi = 0, new_size
    m = old_size  # leaves of the old tree inside [lo, hi)
    whole = True  # the RFC's flag b: [0, lo + m) is the old tree the verifier knows
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            proof.append(_range_hash(h, get_node, lo + k, hi))
            hi = lo + k
        else:
            proof.append(_range_hash(h, get_node, lo, lo + k))
            lo += k
            m -= k
            whole = False
    if not whole:
        proof.append(_range_hash(h, get_node, lo, hi))
    proof.reverse()
    return proof


def verify_inclusion(
    hash_name: str, index: int, size: int, leaf_hash: bytes, proof: list[bytes], root: bytes
) -> bool:
    """Check an RFC 9162 inclusion proof (section 2.1.3.2); never raises (M3).

    ``leaf_hash`` is the hashed leaf, ``H(0x00 || data)``. As in the RFC, ``size`` enters
    only through the shape of the path, so ``root`` must come from a trusted source for
    that size (a snapshot manifest or scope bundle): two sizes whose audit paths for
    ``index`` have the same shape accept the same proof.
    """
    if not (
        _is_hash_name(hash_name)
        and _is_u64(index)
        and _is_u64(size)
        and index < size
        and _is_digest(leaf_hash)
        and _is_digest(root)
        and _is_proof(proof, _MAX_INCLUSION_PROOF)
    ):
        return False
    h = hash_function(hash_name)
    fn, sn = index, size - 1
    r = leaf_hash
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = h(_NODE + p + r)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            r = h(_NODE + r + p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    hash_name: str,
    old_size: int,
    new_size: int,
    old_root: bytes,
    new_root: bytes,
    proof: list[bytes],
) -> bool:
    """Check that the tree ``(new_size, new_root)`` extends ``(old_size, old_root)``;
    never raises (M3).

    For ``0 < old_size < new_size`` this is RFC 9162 section 2.1.4.2 exactly (an empty
    proof fails). The RFC leaves the other cases out; here:

    * ``old_size > new_size``: ``False``.
    * ``old_size == new_size``: ``True`` iff the proof is empty and the roots are equal
      (and, for size 0, equal to ``H(b"")``).
    * ``old_size == 0 < new_size``: ``True`` iff the proof is empty and ``old_root`` is
      ``H(b"")``; every tree extends the empty one, so ``new_root`` is not constrained.
    """
    if not (
        _is_hash_name(hash_name)
        and _is_u64(old_size)
        and _is_u64(new_size)
        and old_size <= new_size
        and _is_digest(old_root)
        and _is_digest(new_root)
        and _is_proof(proof, _MAX_CONSISTENCY_PROOF)
    ):
        return False
    h = hash_function(hash_name)
    if old_size == 0:
        return not proof and old_root == h(b"") and (new_size > 0 or new_root == old_root)
    if old_size == new_size:
        return not proof and old_root == new_root
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # the old tree is a perfect subtree of the new one
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = h(_NODE + c + fr)
            sr = h(_NODE + c + sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = h(_NODE + sr + c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


class MMR:
    """An in-memory Merkle Mountain Range over byte leaves (RFC 6962 hashing).

    A thin wrapper around :func:`mmr_append` and friends with a list as node store; the
    LMDB store calls the same functions. ``root()`` is the RFC 6962 MTH (M1).
    """

    def __init__(self, hash_name: str = "blake3") -> None:
        self._hash = hash_function(hash_name)
        self._hash_name = hash_name
        # Invariant: len(self._nodes) == mmr_node_count(self._size) (M5).
        self._nodes: list[bytes] = []
        self._size = 0

    @property
    def hash_name(self) -> str:
        """The hash this MMR commits with."""
        return self._hash_name

    @property
    def size(self) -> int:
        """The number of leaves appended."""
        return self._size

    def leaf_hash(self, data: bytes) -> bytes:
        """Return ``H(0x00 || data)``, the hash :meth:`append` stores for ``data``."""
        return self._hash(_LEAF + _require_data(data))

    def append(self, data: bytes) -> int:
        """Append ``data`` as a leaf and return its 0-based index."""
        return self.append_leaf_hash(self.leaf_hash(data))

    def append_leaf_hash(self, leaf_hash: bytes) -> int:
        """Append a leaf given its hash ``H(0x00 || data)`` and return its index."""
        # mmr_append returns consecutive positions starting at len(self._nodes) (M5).
        self._nodes.extend(
            node for _, node in mmr_append(self._hash_name, self._get, self._size, leaf_hash)
        )
        self._size += 1
        return self._size - 1

    def root(self) -> bytes:
        """Return the MTH of all leaves (``H(b"")`` when empty)."""
        return mmr_root(self._hash_name, self._get, self._size)

    def root_at(self, size: int) -> bytes:
        """Return the MTH of the first ``size`` leaves."""
        return mmr_root(self._hash_name, self._get, self._check_size(size, "size"))

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """Return the audit path of leaf ``index`` in the tree of the first ``size`` leaves
        (default: all)."""
        size = self._size if size is None else self._check_size(size, "size")
        return mmr_inclusion_proof(self._hash_name, self._get, index, size)

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        """Return the consistency proof from the first ``old_size`` leaves to the first
        ``new_size`` leaves (default: all)."""
        new_size = self._size if new_size is None else self._check_size(new_size, "new_size")
        return mmr_consistency_proof(self._hash_name, self._get, old_size, new_size)

    def _get(self, pos: int) -> bytes:
        return self._nodes[pos]

    def _check_size(self, size: int, field: str) -> int:
        _require_size(size, field)
        if size > self._size:
            raise ValidationError(f"{size} is above the MMR size {self._size}", field=field)
        return size

    def __repr__(self) -> str:
        return f"MMR(hash_name={self._hash_name!r}, size={self._size})"


# -------------------------------------------------------------------------------- SMT


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
    root = _require_digest(root, "root")
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
    root = _require_digest(root, "root")
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
        cur = make(_LEAF + key + value_hash)
        if leaf is not None and old_value is None:
            # The path ended in another key's leaf: both leaves go below the first bit
            # at which the keys differ, under a chain of interior nodes with empty sides.
            relocated = old_path[-1]
            split = _KEY_BITS - (kint ^ int.from_bytes(leaf[1:33], "big")).bit_length()
            if split < depth:
                raise CorruptionError("SMT leaf found off its key's path")
            pair = (cur, relocated) if bit(split) == 0 else (relocated, cur)
            cur = make(_NODE + pair[0] + pair[1])
            for i in range(split - 1, depth - 1, -1):
                cur = make(_NODE + (cur + _ZERO if bit(i) == 0 else _ZERO + cur))
            cur_is_leaf = False
    for i in range(depth - 1, -1, -1):
        sibling = siblings[i]
        if sibling == _ZERO:
            if cur == _ZERO or cur_is_leaf:
                continue  # a lone leaf (or nothing) moves up: the collapse rule
        elif cur == _ZERO and _read_smt_node(get_node, sibling)[0] == 0:
            cur, cur_is_leaf = sibling, True  # the sibling leaf is now alone: it moves up
            continue
        cur = make(_NODE + (cur + sibling if bit(i) == 0 else sibling + cur))
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
    root = _require_digest(root, "root")
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
    if not _is_hash_name(hash_name):
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
        self._h = local_hash_function(hash_name) if _is_hash_name(hash_name) else None
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
        _is_digest(root)
        and type(key) is bytes
        and len(key) == SMT_KEY_SIZE
        and (value_hash is None or _is_digest(value_hash))
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
        node = h(_LEAF + key + value_hash)
    elif kind == 0:
        node = _ZERO
    else:
        other = proof[end : end + SMT_KEY_SIZE]
        oint = int.from_bytes(other, "big")
        if oint == kint or (oint ^ kint) >> (_KEY_BITS - depth):
            return False  # the same key, or a leaf that is not on key's path
        node = h(_LEAF + proof[end:])
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
        data = _NODE + sibling + node if path & 1 else _NODE + node + sibling
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


# ----------------------------------------------------------------------- overall root


def overall_root(hash_name: str, journal_size: int, mmr_root: bytes, smt_root: bytes) -> bytes:
    """Return ``H("cortexgraph/root/v1" || u64be(journal_size) || mmr_root || smt_root)``."""
    h = hash_function(hash_name)
    _require_size(journal_size, "journal_size")
    return h(
        _ROOT_DOMAIN
        + journal_size.to_bytes(8, "big")
        + _require_digest(mmr_root, "mmr_root")
        + _require_digest(smt_root, "smt_root")
    )


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
