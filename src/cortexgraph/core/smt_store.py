"""The sparse Merkle tree of :mod:`cortexgraph.core.roots`, laid out for a key-value table.

``core.roots`` stores the SMT content-addressed, one 65-byte row per node, so every
changed key costs ~17 reads, ~18 writes and ~17 deletes of random rows. This module keeps
the *same tree* (same roots, same proof bytes, see invariants S1 and S3) in rows that each
hold a height-4 binary subtree, a *chunk*, addressed by its position instead of its hash.
This module owns the layout: the row keys, the chunk shapes and encodings, the meta row,
and the functions that read, prove and check the stored tree.
:mod:`cortexgraph.core.smt_apply` applies a whole batch of updates in one pass over the
affected paths, with the layout helpers exported here. Everything here is pure: reads go
through ``get(row_key) -> bytes | None`` (and the bulk update returns the rows to write),
so the caller decides where the table lives (an LMDB table in ``store/``, a dict in tests).

Chunks
======

Bits of a 256-bit key are numbered from 0, the most significant bit of ``key[0]``. The
chunk at depth ``d`` (a multiple of 4, ``0 <= d <= 252``) covering the ``d``-bit prefix
``p`` is the top four levels of the subtree below ``p``. Its 16 *slots* are the subtrees at
depth ``d + 4``, numbered by the four key bits ``d .. d+3`` (the *nibble* at ``d``)::

    depth d            1                 <- chunk root: the subtree at prefix p
                     /   \\
    d + 1          2       3             heap numbering: node i has children 2i, 2i+1
                  / \\     / \\
    d + 2        4   5   6   7
                / \\ / \\ / \\ / \\
    d + 3       8 9 .. .. .. .. 14 15
               /\\ ...            ... /\\
    d + 4     16 17 ....... ..... 30 31   slot s is node 16 + s

A slot is EMPTY (no key below), a LEAF (exactly one key below: its key and value hash are
stored inline) or a CHILD (two or more keys below: the child chunk at depth ``d + 4``,
prefix ``p || s``, exists and the slot holds its root hash). Nodes 1..15 hash with the
rules of ``core.roots``: EMPTY+EMPTY is EMPTY, EMPTY+LEAF and LEAF+EMPTY are that leaf
(its hash ``H(0x00 || key || value_hash)`` passes up unchanged, so a lone leaf sits as
high as it can), and anything else (two or more keys below) is an *inner* node
``H(0x01 || left || right)``. A chunk exists only while its subtree holds two or more
keys, so node 1 is always inner and a lone leaf never sits in a chunk of its own; at depth
252 the slots are at depth 256 and can only be EMPTY or LEAF.

Row keys
========

::

    chunk row    +-----------+------------------------------------------+
                 | d / 4     | p packed MSB first into ceil(d/8) bytes, |
                 | 1 B, 0-63 | the unused low 4 bits (d % 8 == 4) zero  |
                 +-----------+------------------------------------------+
                 depth 0: 0x00          depth 4, p = 1010:  0x01 0xA0
                 depth 8, p = 0x3C: 0x02 0x3C   depth 12, p = 0x3C5: 0x03 0x3C 0x50

    meta row     0xff       (one byte: never a chunk key, whose first byte is <= 63;
                             LMDB refuses empty keys, so b"" is not an option)

Row values
==========

::

    chunk   +-------------+-------------+-----------------------+-----------------------+
            | child u16be | leaf u16be  | inner hashes          | slots                 |
            | bit 15 - s  | bit 15 - s  | 32 B for each inner   | CHILD: child root 32 B|
            | = slot s is | = slot s is | node among 1..15, in  | LEAF: key 32 B then   |
            | a CHILD     | a LEAF      | heap order (node 1,   |   value_hash 32 B     |
            |             |             | the chunk's own hash, | EMPTY: nothing        |
            |             |             | always first)         | in slot order 0..15   |
            +-------------+-------------+-----------------------+-----------------------+

    meta    +-----------+-------------+---------------------------------------+
            | root 32 B | count u64be | count == 1 only: key 32 B, value 32 B |
            +-----------+-------------+---------------------------------------+

The bitmaps are disjoint. The inner nodes are a function of the bitmaps, so the length
of a chunk is ``4 + 32 * (inners + children) + 64 * leaves`` exactly. Caching the inner
hashes lets an update rehash only the path from the changed slots to node 1 (4 hashes
per lone changed slot) and lets a proof read its siblings without hashing subtrees. The
empty tree has no rows at all; a one-key tree has only the meta row, which then holds the
key and value (the root alone would not reveal them); from two keys on, the root chunk
(key ``0x00``) exists and the meta row holds its hash, which is also its node 1.

Invariants
==========

S1  The root returned by :func:`smt_store_apply` (and then read by
    :func:`smt_store_root`) equals the root of ``core.roots``'s
    :class:`~cortexgraph.core.roots.SparseMerkleTree` holding the same key/value set.
S3  :func:`smt_store_prove` returns exactly the bytes of ``core.roots.smt_prove`` for the
    same set and key, so :func:`~cortexgraph.core.roots.verify_smt` accepts them.
S5  Rows are self-consistent: a CHILD slot's hash equals its child chunk's node 1, the
    meta root equals the root chunk's node 1 (or the lone leaf's hash), and every cached
    inner hash equals the hash recomputed from the slots. Readers check the first two
    whenever they cross them; :func:`smt_store_check` checks everything. A row that breaks
    a layout rule raises :class:`~cortexgraph.errors.CorruptionError`, never a wrong root.

S2, S4 and S6 (what a bulk update writes, what it costs, and when it reads) are stated in
:mod:`cortexgraph.core.smt_apply`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CorruptionError, ValidationError
from .hashing import DIGEST_SIZE, HashFunction, hash_function
from .roots import LEAF, NODE
from .smt import EMPTY_SMT_ROOT, SMT_KEY_SIZE, encode_smt_proof

__all__ = [
    "ChunkShape",
    "EMPTY",
    "EMPTY_STATE",
    "HEADER_SIZE",
    "INNER",
    "KEY_BITS",
    "LEAF_SIZE",
    "MAX_CHUNK_DEPTH",
    "NODE_POS",
    "NODE_SLOTS",
    "ONE",
    "SMT_STORE_META_KEY",
    "SmtStoreGet",
    "SubtreeState",
    "check_leaf",
    "check_lone_leaf",
    "chunk_key",
    "nibble",
    "read_chunk",
    "read_meta",
    "require_key",
    "slot_state",
    "smt_store_check",
    "smt_store_count",
    "smt_store_get",
    "smt_store_prove",
    "smt_store_root",
]

SmtStoreGet = Callable[[bytes], bytes | bytearray | memoryview | None]
"""Reads one row of the SMT table (``None`` if absent)."""

SMT_STORE_META_KEY = b"\xff"
"""The reserved row holding the root, the key count and (for one key) the lone leaf."""

_ZERO = EMPTY_SMT_ROOT
_META_SIZE = DIGEST_SIZE + 8
_META_LEAF_SIZE = _META_SIZE + SMT_KEY_SIZE + DIGEST_SIZE

KEY_BITS = 8 * SMT_KEY_SIZE
"""The bits of a key, numbered from 0 (the most significant bit of ``key[0]``)."""
MAX_CHUNK_DEPTH = KEY_BITS - 4
"""The depth of the deepest chunks, whose slots are at depth 256 (EMPTY or LEAF only)."""
LEAF_SIZE = SMT_KEY_SIZE + DIGEST_SIZE
"""The bytes of a LEAF slot: the key, then the value hash."""
HEADER_SIZE = 4
"""The bytes of a chunk's header: the CHILD and the LEAF bitmaps, u16be each."""

# Node kinds: no key below, exactly one key below (a leaf), two or more keys below.
EMPTY, ONE, INNER = 0, 1, 2

# A subtree state as the recursion passes it around: (kind, a, b) with
#   (EMPTY, b"", b"")   no key
#   (ONE, key, value)   exactly one key (a shortcut leaf)
#   (INNER, hash, b"")  two or more keys: a chunk at this position, with root ``hash``
SubtreeState = tuple[int, bytes, bytes]
EMPTY_STATE: SubtreeState = (EMPTY, b"", b"")

# Heap numbering inside a chunk: node 1 is the chunk root, node n has children 2n and
# 2n + 1, and slot s is node 16 + s. Interior node n (1..15) sits at level k (its depth
# below the chunk root) and covers 16 >> k slots; in the per-level bit masks of ChunkShape
# its bit is at NODE_POS[n], the position of the last slot it covers in a slot mask.
_LEVEL = (0, *(n.bit_length() - 1 for n in range(1, 16)))
NODE_POS = (0, *((16 >> k) * ((1 << k) - 1 - (n - (1 << k))) for n, k in enumerate(_LEVEL) if n))
NODE_SLOTS = (
    0,
    *(((1 << (16 >> k)) - 1) << NODE_POS[n] for n, k in enumerate(_LEVEL) if n),
)  # the slot mask of the slots below interior node n (slot s is bit 15 - s)


# --------------------------------------------------------------------------- helpers


def require_key(key: object) -> bytes:
    """Return ``key`` if it is a 32-byte key, else raise :class:`ValidationError`."""
    if not isinstance(key, bytes) or len(key) != SMT_KEY_SIZE:
        raise ValidationError(f"expected a {SMT_KEY_SIZE}-byte key, got {key!r}", field="key")
    return bytes(key)


def _read(get: SmtStoreGet, row: bytes) -> bytes | None:
    raw = get(row)
    if raw is None or type(raw) is bytes:
        return raw
    if isinstance(raw, bytes | bytearray | memoryview):
        return bytes(raw)
    raise CorruptionError(f"SMT row {row.hex()} is not bytes: {type(raw).__name__}")


def chunk_key(depth: int, key: bytes) -> bytes:
    """The row key of the chunk at ``depth`` on the path of ``key``."""
    n = depth >> 3
    if depth & 4:
        return bytes((depth >> 2,)) + key[:n] + bytes((key[n] & 0xF0,))
    return bytes((depth >> 2,)) + key[:n]


def _child_key(row: bytes, depth: int, slot: int) -> bytes:
    """The row key of the chunk below ``slot`` of the chunk ``row`` at ``depth``."""
    if depth & 4:
        return bytes(((depth + 4) >> 2,)) + row[1:-1] + bytes((row[-1] | slot,))
    return bytes(((depth + 4) >> 2,)) + row[1:] + bytes((slot << 4,))


def nibble(key: bytes, depth: int) -> int:
    """The four key bits ``depth .. depth+3``: the slot of ``key`` in the chunk at ``depth``."""
    return key[depth >> 3] >> (4 - (depth & 4)) & 0xF


# ---------------------------------------------------------------------------- chunks


class ChunkShape:
    """Which nodes of a chunk are inner, hold one key or are empty, and where their
    bytes sit, computed from the two slot bitmaps with word-wide bit operations.

    ``inner[k]`` and ``some[k]`` are the level-``k`` masks (bit ``NODE_POS[n]`` for node n):
    node n holds two or more keys, resp. at least one key.
    """

    __slots__ = ("before", "children", "inner", "inners", "leaves", "size", "slots_at", "some")

    def __init__(self, children: int, leaves: int) -> None:
        self.children = children
        self.leaves = leaves
        some3 = children | leaves
        some3 = (some3 | some3 >> 1) & 0x5555
        inner3 = (children | children >> 1 | (leaves & leaves >> 1)) & 0x5555
        some2 = (some3 | some3 >> 2) & 0x1111
        inner2 = (inner3 | inner3 >> 2 | (some3 & some3 >> 2)) & 0x1111
        some1 = (some2 | some2 >> 4) & 0x0101
        inner1 = (inner2 | inner2 >> 4 | (some2 & some2 >> 4)) & 0x0101
        some0 = (some1 | some1 >> 8) & 1
        inner0 = (inner1 | inner1 >> 8 | (some1 & some1 >> 8)) & 1
        self.inner = (inner0, inner1, inner2, inner3)
        self.some = (some0, some1, some2, some3)
        n1 = inner0 + inner1.bit_count()
        n2 = n1 + inner2.bit_count()
        self.before = (0, inner0, n1, n2)  # inner nodes on the levels above level k
        self.inners = n2 + inner3.bit_count()
        self.slots_at = HEADER_SIZE + DIGEST_SIZE * self.inners
        self.size = (
            self.slots_at + DIGEST_SIZE * children.bit_count() + LEAF_SIZE * leaves.bit_count()
        )

    def kind(self, node: int) -> int:
        """The kind of node 1..31."""
        if node >= 16:
            bit = 0x8000 >> (node - 16)
            return INNER if self.children & bit else ONE if self.leaves & bit else EMPTY
        level, pos = _LEVEL[node], NODE_POS[node]
        if self.inner[level] >> pos & 1:
            return INNER
        return self.some[level] >> pos & 1

    def nodes(self) -> tuple[int, ...]:
        """The inner nodes among 1..15, in heap order (the order their hashes are stored)."""
        inner = self.inner
        return (
            _LEVEL_NODES[0][inner[0]]
            + _LEVEL_NODES[1][inner[1]]
            + _LEVEL_NODES[2][inner[2]]
            + _LEVEL_NODES[3][inner[3]]
        )

    def is_inner(self, node: int) -> int:
        return self.inner[_LEVEL[node]] >> NODE_POS[node] & 1

    def inner_at(self, node: int) -> int:
        """Where interior node ``node``'s hash is (or would be) stored."""
        level = _LEVEL[node]
        before = self.before[level] + (self.inner[level] >> (NODE_POS[node] + 1)).bit_count()
        return HEADER_SIZE + DIGEST_SIZE * before

    def slot_at(self, slot: int) -> int:
        """Where slot ``slot``'s payload is (or would be) stored."""
        shift = 16 - slot
        return (
            self.slots_at
            + DIGEST_SIZE * (self.children >> shift).bit_count()
            + LEAF_SIZE * (self.leaves >> shift).bit_count()
        )

    def lone(self, node: int) -> int:
        """The slot of the one leaf below a ``ONE`` interior node."""
        return 16 - (self.leaves & NODE_SLOTS[node]).bit_length()


def _level_nodes(level: int) -> dict[int, tuple[int, ...]]:
    """For each possible level-``level`` mask of :class:`ChunkShape`, its nodes in heap order."""
    nodes = [n for n in range(1 << level, 2 << level)]
    out: dict[int, tuple[int, ...]] = {}
    for subset in range(1 << len(nodes)):
        chosen = tuple(n for i, n in enumerate(nodes) if subset >> i & 1)
        out[sum(1 << NODE_POS[n] for n in chosen)] = chosen
    return out


_LEVEL_NODES = tuple(_level_nodes(level) for level in range(4))

# Shapes of chunks with at most three occupied slots (the many small chunks at the bottom
# of a tree) or with 16 CHILD slots (the top chunks): at most 4,994 entries, whatever the
# trees, so the cache stays bounded.
_SHAPES: dict[int, ChunkShape] = {}


def _shape(children: int, leaves: int) -> ChunkShape:
    key = children << 16 | leaves
    shape = _SHAPES.get(key)
    if shape is None:
        shape = ChunkShape(children, leaves)
        if (children | leaves).bit_count() <= 3 or key == 0xFFFF_0000:
            _SHAPES[key] = shape
    return shape


def read_chunk(get: SmtStoreGet, depth: int, row: bytes, expect: bytes) -> tuple[bytes, ChunkShape]:
    """Read the chunk at ``row``, check its layout and its hash (S5), return it and its shape."""
    enc = _read(get, row)
    if enc is None:
        raise CorruptionError(f"SMT chunk {row.hex()} is missing")
    if len(enc) < HEADER_SIZE + DIGEST_SIZE:
        raise CorruptionError(f"SMT chunk {row.hex()} is truncated")
    children = enc[0] << 8 | enc[1]
    leaves = enc[2] << 8 | enc[3]
    if children & leaves:
        raise CorruptionError(f"SMT chunk {row.hex()} marks a slot both CHILD and LEAF")
    if children and depth == MAX_CHUNK_DEPTH:
        raise CorruptionError(f"SMT chunk {row.hex()} has a CHILD slot at depth 256")
    shape = _shape(children, leaves)
    if not shape.inner[0]:
        raise CorruptionError(f"SMT chunk {row.hex()} holds fewer than two keys")
    if len(enc) != shape.size:
        raise CorruptionError(f"SMT chunk {row.hex()} is {len(enc)} bytes, not {shape.size}")
    if enc[HEADER_SIZE : HEADER_SIZE + DIGEST_SIZE] != expect:
        raise CorruptionError(f"SMT chunk {row.hex()} does not hash to its parent's slot")
    return enc, shape


def slot_state(enc: bytes, shape: ChunkShape, slot: int) -> SubtreeState:
    """The state of slot ``slot`` of the stored chunk ``enc`` (of shape ``shape``)."""
    bit = 0x8000 >> slot
    if shape.children & bit:
        at = shape.slot_at(slot)
        return (INNER, enc[at : at + DIGEST_SIZE], b"")
    if shape.leaves & bit:
        at = shape.slot_at(slot)
        return (ONE, enc[at : at + SMT_KEY_SIZE], enc[at + SMT_KEY_SIZE : at + LEAF_SIZE])
    return EMPTY_STATE


def _stored_hash(h: HashFunction, enc: bytes, shape: ChunkShape, node: int) -> bytes:
    """The hash of node 1..31 of a stored chunk: cached, a child's, or a leaf's."""
    kind = shape.kind(node)
    if kind == EMPTY:
        return _ZERO
    if kind == INNER:
        at = shape.inner_at(node) if node < 16 else shape.slot_at(node - 16)
        return enc[at : at + DIGEST_SIZE]
    at = shape.slot_at(node - 16 if node >= 16 else shape.lone(node))
    return h(LEAF + enc[at : at + LEAF_SIZE])


def check_leaf(depth: int, row: bytes, slot: int, state: SubtreeState) -> SubtreeState:
    """Return the lone leaf ``state`` found in ``slot`` of the chunk ``row`` at ``depth``,
    or raise :class:`CorruptionError` when its key does not lead there."""
    key = state[1]
    if chunk_key(depth, key) != row or nibble(key, depth) != slot:
        raise CorruptionError(f"SMT chunk {row.hex()} holds a leaf off its path")
    return state


# ------------------------------------------------------------------------------ meta


def read_meta(get: SmtStoreGet) -> tuple[bytes, int, SubtreeState]:
    """Return ``(root, count, root state)``; an absent meta row is the empty tree."""
    enc = _read(get, SMT_STORE_META_KEY)
    if enc is None:
        return _ZERO, 0, EMPTY_STATE
    if len(enc) not in (_META_SIZE, _META_LEAF_SIZE):
        raise CorruptionError(f"SMT meta row is {len(enc)} bytes")
    root = enc[:DIGEST_SIZE]
    count = int.from_bytes(enc[DIGEST_SIZE:_META_SIZE], "big")
    if root == _ZERO or count == 0 or (count == 1) != (len(enc) == _META_LEAF_SIZE):
        raise CorruptionError("SMT meta row is malformed")
    if count == 1:
        return root, 1, (ONE, enc[_META_SIZE : _META_SIZE + SMT_KEY_SIZE], enc[-DIGEST_SIZE:])
    return root, count, (INNER, root, b"")


def check_lone_leaf(h: HashFunction, root: bytes, state: SubtreeState) -> None:
    """Raise :class:`CorruptionError` when a one-key tree's root is not its leaf's hash."""
    if state[0] == ONE and h(LEAF + state[1] + state[2]) != root:
        raise CorruptionError("SMT meta row: the root is not the lone leaf's hash")


# ----------------------------------------------------------------------------- reads


def smt_store_root(get: SmtStoreGet) -> bytes:
    """Return the root of the stored tree (32 zero bytes when empty)."""
    return read_meta(get)[0]


def smt_store_count(get: SmtStoreGet) -> int:
    """Return the number of keys in the stored tree."""
    return read_meta(get)[1]


def smt_store_get(get: SmtStoreGet, key: bytes) -> bytes | None:
    """Return the value hash stored under ``key`` (32 bytes), or ``None``.

    Raises:
        ValidationError: ``key`` is not 32 bytes.
        CorruptionError: a row on the key's path is missing or malformed.
    """
    key = require_key(key)
    _, _, state = read_meta(get)
    depth = 0
    while state[0] == INNER:
        row = chunk_key(depth, key)
        enc, shape = read_chunk(get, depth, row, state[1])
        state = slot_state(enc, shape, nibble(key, depth))
        depth += 4
    if state[0] == ONE and state[1] == key:
        return state[2]
    return None


def smt_store_prove(hash_name: str, get: SmtStoreGet, key: bytes) -> bytes:
    """Return the proof for ``key``: the bytes ``core.roots.smt_prove`` gives for the
    same key/value set (S3), to check with :func:`~cortexgraph.core.roots.verify_smt`.

    Raises:
        ValidationError: an unknown hash, or ``key`` is not 32 bytes.
        CorruptionError: a row on the key's path is missing or malformed.
    """
    h = hash_function(hash_name)
    key = require_key(key)
    root, _, state = read_meta(get)
    check_lone_leaf(h, root, state)
    siblings: list[bytes] = []
    depth = 0
    while state[0] == INNER:
        row = chunk_key(depth, key)
        enc, shape = read_chunk(get, depth, row, state[1])
        slot = nibble(key, depth)
        node = 1
        for level in (3, 2, 1, 0):  # walk down while the node holds two or more keys
            node = 2 * node + (slot >> level & 1)
            siblings.append(_stored_hash(h, enc, shape, node ^ 1))
            kind = shape.kind(node)
            if kind != INNER:
                break
        if kind == INNER:
            state = slot_state(enc, shape, slot)
        elif kind == ONE:
            lone = node - 16 if node >= 16 else shape.lone(node)
            state = check_leaf(depth, row, lone, slot_state(enc, shape, lone))
        else:
            state = EMPTY_STATE
        depth += 4
    if state[0] == EMPTY:
        return encode_smt_proof(0, siblings, b"")
    if state[1] == key:
        return encode_smt_proof(1, siblings, b"")
    return encode_smt_proof(2, siblings, state[1] + state[2])


def smt_store_check(hash_name: str, get: SmtStoreGet) -> int:
    """Walk the whole stored tree and recompute every hash (S5).

    Checks every chunk's layout, that every cached inner hash and CHILD hash equals the
    hash recomputed from the rows below, that every leaf lies on its path, and that the
    meta root and count match the tree. Returns the number of rows reachable from the
    meta row (itself included): a table holding more rows has stale ones (S2 broken).

    Raises:
        ValidationError: an unknown hash.
        CorruptionError: the first inconsistency found.
    """
    h = hash_function(hash_name)
    root, count, state = read_meta(get)
    if state[0] == EMPTY:
        return 0
    check_lone_leaf(h, root, state)
    if state[0] == ONE:
        return 1
    rows = 1
    keys = 0

    def walk(depth: int, row: bytes, expect: bytes) -> None:
        nonlocal rows, keys
        enc, shape = read_chunk(get, depth, row, expect)
        rows += 1
        for slot in range(16):
            state = slot_state(enc, shape, slot)
            if state[0] == INNER:
                walk(depth + 4, _child_key(row, depth, slot), state[1])
            elif state[0] == ONE:
                check_leaf(depth, row, slot, state)
                keys += 1
        for node in range(15, 0, -1):
            if shape.is_inner(node):
                left = _stored_hash(h, enc, shape, 2 * node)
                right = _stored_hash(h, enc, shape, 2 * node + 1)
                if h(NODE + left + right) != _stored_hash(h, enc, shape, node):
                    raise CorruptionError(f"SMT chunk {row.hex()}: inner node {node} is stale")

    walk(0, chunk_key(0, root), root)
    if keys != count:
        raise CorruptionError(f"SMT meta row counts {count} keys, the tree holds {keys}")
    return rows
