"""The Merkle Mountain Range of the journal: RFC 6962 hashing, proofs and their verifiers.

Pure, as :mod:`cortexgraph.core.roots` describes: the functions work over an abstract
node store (``get_node``) and return the nodes to write; :class:`MMR` keeps them in a list.

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
trailing one bit of ``n`` (leaf 3 completes nodes 5 and 6 above): the node of height ``h``
that appending leaf ``n`` writes roots the leaves ``(n - 2**h, n]``. Conversely
:func:`mmr_node_origin` maps a position to the leaf whose append wrote it and the node's
height (position 5: leaf 3, height 1), which is how a store that keeps one row per leaf
(the leaf hash, then the parents its append completes) finds a node. The peaks of a tree of
``n`` leaves are the perfect subtrees of the binary decomposition of ``n``, highest first
(``n = 7``: nodes 6, 9, 10). The root bags them right to left::

    root = H(0x01 || P0 || H(0x01 || P1 || ... H(0x01 || P[k-2] || P[k-1])))

which is exactly RFC 6962's Merkle Tree Hash (MTH), because MTH splits ``n`` leaves at the
largest power of two below ``n``, i.e. at the first peak. The same holds for every node of
the RFC tree: it is either a stored perfect subtree or a bag of stored perfect subtrees,
so proofs for any size ``m <= n`` need O(log n) node reads and never rehash leaves.

Invariants (M3 and M8, shared with the sparse Merkle tree, are in ``core.roots``)
==================================================================================

M1  The MMR root of ``n`` leaves is the RFC 6962 MTH of those leaves, and
    ``mmr_root(.., m)`` for ``m <= n`` is the MTH of the first ``m``.
M5  The MMR is append-only: :func:`mmr_append` writes only positions
    ``[mmr_node_count(n), mmr_node_count(n + 1))``; a stored node never changes.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CorruptionError, ValidationError
from .hashing import DIGEST_SIZE, hash_function
from .roots import LEAF, NODE, is_digest, is_hash_name, is_u64, require_digest, require_size

__all__ = [
    "MMR",
    "MmrGetNode",
    "mmr_append",
    "mmr_consistency_proof",
    "mmr_inclusion_proof",
    "mmr_leaf_hash",
    "mmr_leaf_position",
    "mmr_node_count",
    "mmr_root",
    "verify_consistency",
    "verify_inclusion",
]

MmrGetNode = Callable[[int], bytes | None]
"""Reads the 32-byte MMR node stored at a position (``None`` if absent)."""

# An RFC 9162 inclusion proof for a tree of at most 2**64 - 1 leaves has at most 64
# elements and a consistency proof at most 65; longer lists are rejected up front.
_MAX_INCLUSION_PROOF = 64
_MAX_CONSISTENCY_PROOF = 65


def _is_proof(value: object, max_len: int) -> bool:
    return (
        isinstance(value, list | tuple)
        and type(value) in (list, tuple)  # no subclass: no caller code runs in a verifier
        and len(value) <= max_len
        and all(is_digest(p) for p in value)
    )



def mmr_node_count(size: int) -> int:
    """Return how many MMR nodes are stored for ``size`` leaves (``2*size - popcount``)."""
    return 2 * size - size.bit_count()


def mmr_node_origin(position: int) -> tuple[int, int]:
    """Return ``(index, height)``: the leaf whose append writes the node at ``position``,
    and the node's height (0 for the leaf itself), so the node is the ``height``-th one
    :func:`mmr_append` returns for leaf ``index``. ``index`` has at least ``height``
    trailing one bits.

    Arithmetic, O(log position): it descends the perfect trees that hold ``position`` in
    postorder (left half, right half, root), taking only the steps into a right half.
    """
    base = 0  # the first leaf of the perfect subtree being descended
    while position:
        # the smallest perfect tree starting at ``base`` that holds ``position``: it has
        # 2**(height+1) - 1 nodes, and ``position`` is past its left half
        height = (position + 1).bit_length() - 1
        half = (1 << height) - 1  # the nodes of each half, and the root's offset in leaves
        if position >= 2 * half:  # the tree's root: its last leaf's append completes it
            return base + half, height
        position -= half  # into the right half
        base += 1 << (height - 1)
    return base, 0


def mmr_leaf_position(index: int) -> int:
    """Return the node position of leaf ``index`` (leaves are numbered from 0)."""
    return mmr_node_count(index)


def _require_data(data: object) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValidationError(f"expected bytes, got {type(data).__name__}", field="data")
    return bytes(data)


def mmr_leaf_hash(hash_name: str, data: bytes) -> bytes:
    """Return the RFC 6962 leaf hash ``H(0x00 || data)``."""
    return hash_function(hash_name)(LEAF + _require_data(data))


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
        acc = h(NODE + peak + acc)
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
    require_size(size, "size")
    cur = require_digest(leaf_hash, "leaf_hash")
    pos = mmr_node_count(size)
    out = [(pos, cur)]
    height = 0
    n = size
    while n & 1:  # each trailing one bit of the leaf index completes one parent
        left = _read_mmr_node(get_node, pos - ((2 << height) - 1))
        cur = h(NODE + left + cur)
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
    require_size(size, "size")
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
    require_size(index, "index")
    require_size(size, "size")
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
    require_size(old_size, "old_size")
    require_size(new_size, "new_size")
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
        is_hash_name(hash_name)
        and is_u64(index)
        and is_u64(size)
        and index < size
        and is_digest(leaf_hash)
        and is_digest(root)
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
            r = h(NODE + p + r)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            r = h(NODE + r + p)
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
        is_hash_name(hash_name)
        and is_u64(old_size)
        and is_u64(new_size)
        and old_size <= new_size
        and is_digest(old_root)
        and is_digest(new_root)
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
            fr = h(NODE + c + fr)
            sr = h(NODE + c + sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = h(NODE + sr + c)
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
        return self._hash(LEAF + _require_data(data))

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
        require_size(size, field)
        if size > self._size:
            raise ValidationError(f"{size} is above the MMR size {self._size}", field=field)
        return size

    def __repr__(self) -> str:
        return f"MMR(hash_name={self._hash_name!r}, size={self._size})"


