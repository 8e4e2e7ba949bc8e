"""The sparse Merkle tree of :mod:`cortexgraph.core.merkle`, laid out for a key-value table.

``core.merkle`` stores the SMT content-addressed, one 65-byte row per node, so every
changed key costs ~17 reads, ~18 writes and ~17 deletes of random rows. This module keeps
the *same tree* (same roots, same proof bytes, see invariants S1 and S3) in rows that each
hold a height-4 binary subtree, a *chunk*, addressed by its position instead of its hash,
and applies a whole batch of updates in one pass over the affected paths. Everything here
is pure: reads go through ``get(row_key) -> bytes | None`` and the rows to write are
returned, so the caller decides where the table lives (an LMDB table in ``store/``, a dict
in tests).

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
rules of ``core.merkle``: EMPTY+EMPTY is EMPTY, EMPTY+LEAF and LEAF+EMPTY are that leaf
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

Bulk update
===========

:func:`smt_store_apply` sorts the updates by key and recurses once from the root: at a
chunk it splits the (sorted, so contiguous) updates by nibble, recurses into each touched
slot, and then rehashes only the inner nodes above the slots whose state changed. A slot
recursion on a LEAF or EMPTY slot that gains a second key builds the new chunk(s) below it
the same way, starting from an all-EMPTY chunk holding the old leaf; a chunk whose keys
drop below two is deleted and its lone leaf (or nothing) moves up into the parent slot,
repeatedly, which is the collapse rule. Every row on the union of the updated keys' paths
is read once and written (or deleted) at most once, so shared upper chunks cost once per
call, not once per key.

Which nodes of a chunk are inner, and where each cached hash and slot payload sits, follow
from the two bitmaps by word-wide bit operations and popcounts (:class:`_Shape`). The
common cases get flat code paths:

- one update below an existing chunk (nearly every chunk below the top levels) skips the
  grouping by nibble, and when one slot changed, the chunk is the old bytes with the four
  ancestors' hashes and the slot spliced in: it walks up against the stored siblings like
  ``core.merkle.smt_update`` does;
- a second key joining a lone leaf (or two new keys in an empty slot) writes the chunks
  of that two-key subtree directly, reading nothing: one CHILD slot per chunk down to the
  one where the keys part, which holds both leaves;
- a chunk whose 16 slots are and stay CHILD (the top levels of a big tree) has every node
  at a fixed offset;
- any other chunk with several changed slots is read once into per-node lists, the nodes
  above the changed slots are rehashed children first, and the chunk is written out whole.

Invariants
==========

S1  The root returned by :func:`smt_store_apply` (and then read by
    :func:`smt_store_root`) equals the root of ``core.merkle``'s
    :class:`~cortexgraph.core.merkle.SparseMerkleTree` holding the same key/value set.
S2  The table is a function of the key/value set only: whatever the batches, their order
    or their no-ops, the rows (keys and bytes) equal those of one call that inserts the
    final set into an empty table. The empty set has no rows. This is what J4 needs.
S3  :func:`smt_store_prove` returns exactly the bytes of ``core.merkle.smt_prove`` for the
    same set and key, so :func:`~cortexgraph.core.merkle.verify_smt` accepts them.
S4  Cost of one :func:`smt_store_apply` call: one read of the meta row and of each chunk
    on the union of the updated keys' paths, at most one write or delete per row read
    (plus the rows of newly built chunks), nothing at all when no value changes; hash
    calls only for the inner nodes above changed slots (at most 4 per changed slot and
    chunk, 15 per chunk) and for the leaves those nodes hash over. For 1,000 random
    updates to a 100,000-key tree that is ~1.9 reads, ~2.0 writes and ~10 hash calls per
    key, against ~17 reads, ~18 writes, ~17 deletes and ~18 hashes for ``core.merkle``.
S5  Rows are self-consistent: a CHILD slot's hash equals its child chunk's node 1, the
    meta root equals the root chunk's node 1 (or the lone leaf's hash), and every cached
    inner hash equals the hash recomputed from the slots. Readers check the first two
    whenever they cross them; :func:`smt_store_check` checks everything. A row that breaks
    a layout rule raises :class:`~cortexgraph.errors.CorruptionError`, never a wrong root.
S6  ``get`` is read as of before the call: no row is read after the call decides to
    write it, so the caller applies the returned writes afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..errors import CorruptionError, ValidationError
from .hashing import DIGEST_SIZE, hash_function
from .smt import EMPTY_SMT_ROOT, SMT_KEY_SIZE, encode_smt_proof

__all__ = [
    "SMT_STORE_META_KEY",
    "SmtStoreGet",
    "smt_store_apply",
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
_LEAF = b"\x00"
_NODE = b"\x01"
_KEY_BITS = 8 * SMT_KEY_SIZE
_MAX_CHUNK_DEPTH = _KEY_BITS - 4
_META_SIZE = DIGEST_SIZE + 8
_META_LEAF_SIZE = _META_SIZE + SMT_KEY_SIZE + DIGEST_SIZE
_LEAF_SIZE = SMT_KEY_SIZE + DIGEST_SIZE
_HEADER = 4
_U64_MAX = (1 << 64) - 1

# Node kinds: no key below, exactly one key below (a leaf), two or more keys below.
_EMPTY, _ONE, _INNER = 0, 1, 2

# A subtree state as the recursion passes it around: (kind, a, b) with
#   (_EMPTY, b"", b"")   no key
#   (_ONE, key, value)   exactly one key (a shortcut leaf)
#   (_INNER, hash, b"")  two or more keys: a chunk at this position, with root ``hash``
_State = tuple[int, bytes, bytes]
_EMPTY_STATE: _State = (_EMPTY, b"", b"")

_Hash = Callable[[bytes], bytes]

# Heap numbering inside a chunk: node 1 is the chunk root, node n has children 2n and
# 2n + 1, and slot s is node 16 + s. Interior node n (1..15) sits at level k (its depth
# below the chunk root) and covers 16 >> k slots; in the per-level bit masks of _Shape its
# bit is at _POS[n], the position of the last slot it covers in a slot mask.
_LEVEL = (0, *(n.bit_length() - 1 for n in range(1, 16)))
_POS = (0, *((16 >> k) * ((1 << k) - 1 - (n - (1 << k))) for n, k in enumerate(_LEVEL) if n))
_RANGE = (
    0,
    *(((1 << (16 >> k)) - 1) << _POS[n] for n, k in enumerate(_LEVEL) if n),
)  # the slot mask of the slots below interior node n (slot s is bit 15 - s)
_ANCESTORS = tuple((8 + (s >> 1), 4 + (s >> 2), 2 + (s >> 3), 1) for s in range(16))
# Walking up from slot s: the path node at each level from 4 to 1 and its parent's level.
_UPWARD = tuple(tuple(((16 + s) >> i, 3 - i) for i in range(4)) for s in range(16))


# --------------------------------------------------------------------------- helpers


def _require_key(key: object) -> bytes:
    if not isinstance(key, bytes) or len(key) != SMT_KEY_SIZE:
        raise ValidationError(f"expected a {SMT_KEY_SIZE}-byte key, got {key!r}", field="key")
    return bytes(key)


def _require_value(value: object) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, bytes) or len(value) != DIGEST_SIZE:
        raise ValidationError(f"expected {DIGEST_SIZE} bytes, got {value!r}", field="value_hash")
    return bytes(value)


def _read(get: SmtStoreGet, row: bytes) -> bytes | None:
    raw = get(row)
    if raw is None or type(raw) is bytes:
        return raw
    if isinstance(raw, bytes | bytearray | memoryview):
        return bytes(raw)
    raise CorruptionError(f"SMT row {row.hex()} is not bytes: {type(raw).__name__}")


def _chunk_key(depth: int, key: bytes) -> bytes:
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


def _nibble(key: bytes, depth: int) -> int:
    return key[depth >> 3] >> (4 - (depth & 4)) & 0xF


# ---------------------------------------------------------------------------- chunks


class _Shape:
    """Which nodes of a chunk are inner, hold one key or are empty, and where their
    bytes sit, computed from the two slot bitmaps with word-wide bit operations.

    ``inner[k]`` and ``some[k]`` are the level-``k`` masks (bit ``_POS[n]`` for node n):
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
        self.slots_at = _HEADER + DIGEST_SIZE * self.inners
        self.size = (
            self.slots_at + DIGEST_SIZE * children.bit_count() + _LEAF_SIZE * leaves.bit_count()
        )

    def kind(self, node: int) -> int:
        """The kind of node 1..31."""
        if node >= 16:
            bit = 0x8000 >> (node - 16)
            return _INNER if self.children & bit else _ONE if self.leaves & bit else _EMPTY
        level, pos = _LEVEL[node], _POS[node]
        if self.inner[level] >> pos & 1:
            return _INNER
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
        return self.inner[_LEVEL[node]] >> _POS[node] & 1

    def inner_at(self, node: int) -> int:
        """Where interior node ``node``'s hash is (or would be) stored."""
        level = _LEVEL[node]
        before = self.before[level] + (self.inner[level] >> (_POS[node] + 1)).bit_count()
        return _HEADER + DIGEST_SIZE * before

    def slot_at(self, slot: int) -> int:
        """Where slot ``slot``'s payload is (or would be) stored."""
        shift = 16 - slot
        return (
            self.slots_at
            + DIGEST_SIZE * (self.children >> shift).bit_count()
            + _LEAF_SIZE * (self.leaves >> shift).bit_count()
        )

    def lone(self, node: int) -> int:
        """The slot of the one leaf below a ``_ONE`` interior node."""
        return 16 - (self.leaves & _RANGE[node]).bit_length()


def _level_nodes(level: int) -> dict[int, tuple[int, ...]]:
    """For each possible level-``level`` mask of :class:`_Shape`, its nodes in heap order."""
    nodes = [n for n in range(1 << level, 2 << level)]
    out: dict[int, tuple[int, ...]] = {}
    for subset in range(1 << len(nodes)):
        chosen = tuple(n for i, n in enumerate(nodes) if subset >> i & 1)
        out[sum(1 << _POS[n] for n in chosen)] = chosen
    return out


_LEVEL_NODES = tuple(_level_nodes(level) for level in range(4))

# Shapes of chunks with at most three occupied slots (the many small chunks at the bottom
# of a tree) or with 16 CHILD slots (the top chunks): at most 4,994 entries, whatever the
# trees, so the cache stays bounded.
_SHAPES: dict[int, _Shape] = {}


def _shape(children: int, leaves: int) -> _Shape:
    key = children << 16 | leaves
    shape = _SHAPES.get(key)
    if shape is None:
        shape = _Shape(children, leaves)
        if (children | leaves).bit_count() <= 3 or key == 0xFFFF_0000:
            _SHAPES[key] = shape
    return shape


def _read_chunk(get: SmtStoreGet, depth: int, row: bytes, expect: bytes) -> tuple[bytes, _Shape]:
    """Read the chunk at ``row``, check its layout and its hash (S5), return it and its shape."""
    enc = _read(get, row)
    if enc is None:
        raise CorruptionError(f"SMT chunk {row.hex()} is missing")
    if len(enc) < _HEADER + DIGEST_SIZE:
        raise CorruptionError(f"SMT chunk {row.hex()} is truncated")
    children = enc[0] << 8 | enc[1]
    leaves = enc[2] << 8 | enc[3]
    if children & leaves:
        raise CorruptionError(f"SMT chunk {row.hex()} marks a slot both CHILD and LEAF")
    if children and depth == _MAX_CHUNK_DEPTH:
        raise CorruptionError(f"SMT chunk {row.hex()} has a CHILD slot at depth 256")
    shape = _shape(children, leaves)
    if not shape.inner[0]:
        raise CorruptionError(f"SMT chunk {row.hex()} holds fewer than two keys")
    if len(enc) != shape.size:
        raise CorruptionError(f"SMT chunk {row.hex()} is {len(enc)} bytes, not {shape.size}")
    if enc[_HEADER : _HEADER + DIGEST_SIZE] != expect:
        raise CorruptionError(f"SMT chunk {row.hex()} does not hash to its parent's slot")
    return enc, shape


def _slot_state(enc: bytes, shape: _Shape, slot: int) -> _State:
    bit = 0x8000 >> slot
    if shape.children & bit:
        at = shape.slot_at(slot)
        return (_INNER, enc[at : at + DIGEST_SIZE], b"")
    if shape.leaves & bit:
        at = shape.slot_at(slot)
        return (_ONE, enc[at : at + SMT_KEY_SIZE], enc[at + SMT_KEY_SIZE : at + _LEAF_SIZE])
    return _EMPTY_STATE


def _stored_hash(h: _Hash, enc: bytes, shape: _Shape, node: int) -> bytes:
    """The hash of node 1..31 of a stored chunk: cached, a child's, or a leaf's."""
    kind = shape.kind(node)
    if kind == _EMPTY:
        return _ZERO
    if kind == _INNER:
        at = shape.inner_at(node) if node < 16 else shape.slot_at(node - 16)
        return enc[at : at + DIGEST_SIZE]
    at = shape.slot_at(node - 16 if node >= 16 else shape.lone(node))
    return h(_LEAF + enc[at : at + _LEAF_SIZE])


def _check_leaf(depth: int, row: bytes, slot: int, state: _State) -> _State:
    key = state[1]
    if _chunk_key(depth, key) != row or _nibble(key, depth) != slot:
        raise CorruptionError(f"SMT chunk {row.hex()} holds a leaf off its path")
    return state


# ------------------------------------------------------------------------------ meta


def _read_meta(get: SmtStoreGet) -> tuple[bytes, int, _State]:
    """Return ``(root, count, root state)``; an absent meta row is the empty tree."""
    enc = _read(get, SMT_STORE_META_KEY)
    if enc is None:
        return _ZERO, 0, _EMPTY_STATE
    if len(enc) not in (_META_SIZE, _META_LEAF_SIZE):
        raise CorruptionError(f"SMT meta row is {len(enc)} bytes")
    root = enc[:DIGEST_SIZE]
    count = int.from_bytes(enc[DIGEST_SIZE:_META_SIZE], "big")
    if root == _ZERO or count == 0 or (count == 1) != (len(enc) == _META_LEAF_SIZE):
        raise CorruptionError("SMT meta row is malformed")
    if count == 1:
        return root, 1, (_ONE, enc[_META_SIZE : _META_SIZE + SMT_KEY_SIZE], enc[-DIGEST_SIZE:])
    return root, count, (_INNER, root, b"")


def _check_lone_leaf(h: _Hash, root: bytes, state: _State) -> None:
    if state[0] == _ONE and h(_LEAF + state[1] + state[2]) != root:
        raise CorruptionError("SMT meta row: the root is not the lone leaf's hash")


# ----------------------------------------------------------------------------- apply

_NO_CHUNK = bytes(_HEADER)  # a chunk with no slots: what a position without a row holds
_NO_SHAPE = _Shape(0, 0)


class _Apply:
    __slots__ = ("delta", "get", "h", "items", "writes")

    def __init__(self, h: _Hash, get: SmtStoreGet, items: list[tuple[bytes, bytes | None]]) -> None:
        self.h = h
        self.get = get
        self.items = items
        self.delta = 0
        self.writes: dict[bytes, bytes | None] = {}

    def subtree(self, depth: int, state: _State, lo: int, hi: int) -> _State:
        """Apply ``items[lo:hi]`` (sorted, all below the same ``depth``-bit prefix) to the
        subtree in ``state`` at ``depth``; return its new state and record row writes."""
        items = self.items
        kind = state[0]
        if kind != _INNER and hi - lo == 1:  # one update, at most one key: no chunk here
            key, value = items[lo]
            if kind == _EMPTY:
                if value is None:
                    return state
                self.delta += 1
                return (_ONE, key, value)
            if key == state[1]:
                if value == state[2]:
                    return state
                if value is None:
                    self.delta -= 1
                    return _EMPTY_STATE
                return (_ONE, key, value)
            if value is None:
                return state
            # A second key joins the lone leaf: the chunks below hold exactly two keys.
            if depth <= _MAX_CHUNK_DEPTH:
                return self.pair(depth, state[1], state[2], key, value)
        elif kind == _EMPTY and hi - lo == 2 and depth <= _MAX_CHUNK_DEPTH:
            (a_key, a_value), (b_key, b_value) = items[lo], items[lo + 1]
            if a_value is not None and b_value is not None:
                self.delta += 1
                return self.pair(depth, a_key, a_value, b_key, b_value)
        elif kind == _INNER and hi - lo == 1:
            return self.one(depth, state, lo)
        if depth > _MAX_CHUNK_DEPTH:  # two distinct keys cannot share 256 bits
            raise CorruptionError("SMT leaf found off its key's path")
        row = _chunk_key(depth, items[lo][0])
        # ``changed`` holds the new state of every slot that differs from ``enc``. A
        # position without a row is read as an empty chunk, plus the lone leaf if any.
        changed: dict[int, _State] = {}
        if kind == _INNER:
            enc, old = _read_chunk(self.get, depth, row, state[1])
        else:
            enc, old = _NO_CHUNK, _NO_SHAPE
            if kind == _ONE:
                home = _nibble(state[1], depth)
                changed[home] = _check_leaf(depth, row, home, state)
        moved = False
        shift = 4 - (depth & 4)
        byte = depth >> 3
        i = lo
        while i < hi:
            slot = items[i][0][byte] >> shift & 0xF
            j = i + 1
            while j < hi and items[j][0][byte] >> shift & 0xF == slot:
                j += 1
            before = changed.get(slot) or _slot_state(enc, old, slot)
            after = self.subtree(depth + 4, before, i, j)
            if after != before:
                changed[slot] = after
                moved = True
            i = j
        if not moved:
            return state
        if len(changed) == 1:  # the common case below the top chunks: one path to rehash
            for slot, after in changed.items():
                bit = 0x8000 >> slot
                children = old.children & ~bit | (bit if after[0] == _INNER else 0)
                leaves = old.leaves & ~bit | (bit if after[0] == _ONE else 0)
                if children == old.children == 0xFFFF:
                    return self.rebuild_full(row, enc, changed)
                if children or leaves & (leaves - 1):  # still two or more keys
                    header = (children << 16 | leaves).to_bytes(_HEADER, "big")
                    return self.rebuild_one(row, enc, old, header, slot, after)
        return self.rebuild(row, kind == _INNER, enc, old, changed)

    def one(self, depth: int, state: _State, lo: int) -> _State:
        """:meth:`subtree` for one update below an existing chunk (the common case below
        the top chunks): the same steps with a single slot, without the grouping."""
        key = self.items[lo][0]
        row = _chunk_key(depth, key)
        enc, old = _read_chunk(self.get, depth, row, state[1])
        slot = key[depth >> 3] >> (4 - (depth & 4)) & 0xF
        bit = 0x8000 >> slot
        children, leaves = old.children, old.leaves
        if (children | leaves) & bit:
            shift = 16 - slot
            at = (
                old.slots_at
                + DIGEST_SIZE * (children >> shift).bit_count()
                + _LEAF_SIZE * (leaves >> shift).bit_count()
            )
            if children & bit:
                before: _State = (_INNER, enc[at : at + DIGEST_SIZE], b"")
            else:
                before = (
                    _ONE,
                    enc[at : at + SMT_KEY_SIZE],
                    enc[at + SMT_KEY_SIZE : at + _LEAF_SIZE],
                )
        else:
            before = _EMPTY_STATE
        after = self.subtree(depth + 4, before, lo, lo + 1)
        if after == before:
            return state
        kind = after[0]
        children = children & ~bit | (bit if kind == _INNER else 0)
        leaves = leaves & ~bit | (bit if kind == _ONE else 0)
        if children == old.children == 0xFFFF:
            return self.rebuild_full(row, enc, {slot: after})
        if children or leaves & (leaves - 1):  # still two or more keys
            header = (children << 16 | leaves).to_bytes(_HEADER, "big")
            return self.rebuild_one(row, enc, old, header, slot, after)
        return self.rebuild(row, True, enc, old, {slot: after})

    def pair(
        self, depth: int, a_key: bytes, a_value: bytes, b_key: bytes, b_value: bytes
    ) -> _State:
        """The subtree at ``depth`` holding exactly two keys (one of them new), written
        directly: the chunks from ``depth`` down to the one where the keys part each have
        one CHILD slot, and that chunk has the two LEAF slots (a lone leaf sits as high as
        it can, so there is nothing below). This is what :meth:`rebuild` would write for
        them, without reading anything: no row exists below a subtree of fewer than two
        keys. ``a_key`` may be the lone leaf already there; it must lie on the path."""
        row = _chunk_key(depth, b_key)
        if _chunk_key(depth, a_key) != row:
            raise CorruptionError(f"SMT chunk {row.hex()} holds a leaf off its path")
        h = self.h
        writes = self.writes
        self.delta += 1
        split = (
            _KEY_BITS - (int.from_bytes(a_key, "big") ^ int.from_bytes(b_key, "big")).bit_length()
        )
        at = split & ~3  # the depth of the chunk where the two keys part
        a_slot, b_slot = _nibble(a_key, at), _nibble(b_key, at)
        if a_slot < b_slot:
            left, right = a_key + a_value, b_key + b_value
        else:
            left, right = b_key + b_value, a_key + a_value
        cur = h(_NODE + h(_LEAF + left) + h(_LEAF + right))
        path = [cur]  # the inner nodes of that chunk, deepest (the keys' meeting node) first
        node = (16 + a_slot) >> (4 - (split - at))
        while node > 1:
            cur = h(_NODE + (_ZERO + cur if node & 1 else cur + _ZERO))
            path.append(cur)
            node >>= 1
        path.reverse()
        leaves = 0x8000 >> a_slot | 0x8000 >> b_slot
        writes[_chunk_key(at, b_key)] = (
            leaves.to_bytes(_HEADER, "big") + b"".join(path) + left + right
        )
        while at > depth:  # the chunks above: one CHILD slot each, four inner nodes
            at -= 4
            slot = _nibble(b_key, at)
            child = cur
            node = 16 + slot
            path = []
            while node > 1:
                cur = h(_NODE + (_ZERO + cur if node & 1 else cur + _ZERO))
                path.append(cur)
                node >>= 1
            path.reverse()
            path.append(child)
            writes[_chunk_key(at, b_key)] = (0x8000_0000 >> slot).to_bytes(
                _HEADER, "big"
            ) + b"".join(path)
        return (_INNER, cur, b"")

    def rebuild(
        self,
        row: bytes,
        existed: bool,
        enc: bytes,
        old: _Shape,
        changed: dict[int, _State],
    ) -> _State:
        """Write the chunk ``enc`` (shape ``old``) with the slots in ``changed`` replaced,
        or delete it when fewer than two keys are left; return the subtree's state."""
        children, leaves = old.children, old.leaves
        for slot, state in changed.items():
            bit = 0x8000 >> slot
            children &= ~bit
            leaves &= ~bit
            if state[0] == _INNER:
                children |= bit
            elif state[0] == _ONE:
                leaves |= bit
        if not children and leaves & (leaves - 1) == 0:  # at most one key: collapse
            if existed:
                self.writes[row] = None
            if not leaves:
                return _EMPTY_STATE
            slot = 16 - leaves.bit_length()
            return changed.get(slot) or _slot_state(enc, old, slot)
        header = (children << 16 | leaves).to_bytes(_HEADER, "big")
        if len(changed) == 1:
            for slot, state in changed.items():
                return self.rebuild_one(row, enc, old, header, slot, state)
        if children == old.children == 0xFFFF:
            return self.rebuild_full(row, enc, changed)
        # Several slots changed: read the whole chunk into per-node lists, recompute the
        # nodes above the changed slots, and write the chunk out again. Nodes with no
        # changed slot below keep their kind and, if inner, their cached hash.
        h = self.h
        kind = [_EMPTY] * 32  # node 1..31 of the new chunk: _EMPTY, _ONE or _INNER
        data = [b""] * 32  # its hash (_INNER) or its lone leaf's key and value (_ONE)
        cached: dict[int, bytes] = {}  # the old chunk's inner hashes, by node
        if old.inners:
            at = _HEADER
            for node in old.nodes():
                cached[node] = enc[at : at + DIGEST_SIZE]
                at += DIGEST_SIZE
        at = old.slots_at
        ochildren, oleaves = old.children, old.leaves
        for slot in range(16):
            bit = 0x8000 >> slot
            if ochildren & bit:
                kind[16 + slot] = _INNER
                data[16 + slot] = enc[at : at + DIGEST_SIZE]
                at += DIGEST_SIZE
            elif oleaves & bit:
                kind[16 + slot] = _ONE
                data[16 + slot] = enc[at : at + _LEAF_SIZE]
                at += _LEAF_SIZE
        dirty = 0  # bit n: node n has a changed slot below
        for slot, state in changed.items():
            node = 16 + slot
            kind[node] = state[0]
            data[node] = state[1] if state[0] == _INNER else state[1] + state[2]
            while node > 1:
                node >>= 1
                dirty |= 1 << node
        inner: list[bytes] = []  # the new chunk's inner hashes, node 15 down to node 1
        for node in range(15, 0, -1):
            left, right = 2 * node, 2 * node + 1
            kl, kr = kind[left], kind[right]
            if kl == _EMPTY or kr == _EMPTY:  # at most one side holds keys: it moves up
                if kl == _EMPTY:
                    left = right
                kind[node] = kind[left]
                data[node] = data[left]
                if kind[left] == _INNER:
                    if dirty >> node & 1:
                        value = h(
                            _NODE + (data[left] + _ZERO if left == 2 * node else _ZERO + data[left])
                        )
                    else:
                        value = cached[node]
                    data[node] = value
                    inner.append(value)
                continue
            kind[node] = _INNER
            if dirty >> node & 1:
                pair = []
                for child in (left, right):
                    if kind[child] == _INNER:
                        pair.append(data[child])
                    else:
                        pair.append(h(_LEAF + data[child]))
                value = h(_NODE + pair[0] + pair[1])
            else:
                value = cached[node]
            data[node] = value
            inner.append(value)
        inner.reverse()
        slots = [data[node] for node in range(16, 32) if kind[node] != _EMPTY]
        self.writes[row] = header + b"".join(inner) + b"".join(slots)
        return (_INNER, data[1], b"")

    def rebuild_full(self, row: bytes, enc: bytes, changed: dict[int, _State]) -> _State:
        """:meth:`rebuild` for a chunk whose 16 slots are and stay CHILD (the top chunks of
        a big tree): every node is inner, so node n's hash sits at ``32 * n - 28`` and the
        children of node n are the 64 bytes at ``64 * n - 28``."""
        h = self.h
        out = bytearray(enc)
        for slot, state in changed.items():
            at = 32 * (16 + slot) - 28
            out[at : at + DIGEST_SIZE] = state[1]
        if len(changed) == 1:
            for slot in changed:
                dirty: tuple[int, ...] | list[int] = _ANCESTORS[slot]
        else:
            dirty = sorted({node for slot in changed for node in _ANCESTORS[slot]}, reverse=True)
        for node in dirty:
            at = 64 * node - 28
            value = h(_NODE + out[at : at + 2 * DIGEST_SIZE])
            at = 32 * node - 28
            out[at : at + DIGEST_SIZE] = value
        self.writes[row] = bytes(out)
        return (_INNER, value, b"")

    def rebuild_one(
        self, row: bytes, enc: bytes, old: _Shape, header: bytes, slot: int, state: _State
    ) -> _State:
        """:meth:`rebuild` for one changed slot (the common case below the top chunks):
        walk up its four ancestors as ``core.merkle.smt_update`` does, against the stored
        siblings, and splice the new hashes in. The chunk keeps two or more keys.

        Written out flat (no helper calls but the hash): this is the hot loop."""
        h = self.h
        children, leaves = old.children, old.leaves
        inner, some, before, slots_at = old.inner, old.some, old.before, old.slots_at
        kind = state[0]
        # ``cur`` is the path node's hash; for a lone leaf it stays b"" (``leaf`` holds
        # the leaf's bytes) until a parent needs it.
        cur = state[1] if kind == _INNER else _ZERO if kind == _EMPTY else b""
        leaf = state[1] + state[2] if kind == _ONE else b""
        # Level 4: the sibling is a slot.
        t = slot ^ 1
        bit = 0x8000 >> t
        if children & bit or leaves & bit:
            shift = 16 - t
            at = (
                slots_at
                + DIGEST_SIZE * (children >> shift).bit_count()
                + _LEAF_SIZE * (leaves >> shift).bit_count()
            )
            other = _INNER if children & bit else _ONE
        else:
            other = _EMPTY
            at = 0
        splice = []  # (offset, stored?, new hash or None) of the ancestors, deepest first
        for node, level in _UPWARD[slot]:
            # ``node`` is the path node at level + 1; ``other`` and ``at`` describe its
            # sibling (kind, and where its hash or lone leaf is stored).
            if other == _EMPTY and kind != _INNER:
                value = None  # nothing, or a lone leaf moving up: no hash
            elif kind == _EMPTY and other == _ONE:
                kind, leaf, cur, value = _ONE, enc[at : at + _LEAF_SIZE], b"", None
            else:
                if not cur:
                    cur = h(_LEAF + leaf)
                if other == _INNER:
                    sibling = enc[at : at + DIGEST_SIZE]
                elif other == _ONE:
                    sibling = h(_LEAF + enc[at : at + _LEAF_SIZE])
                else:
                    sibling = _ZERO
                cur = h(_NODE + (sibling + cur if node & 1 else cur + sibling))
                kind = _INNER
                value = cur
            # The parent: where its cached hash is, and whether it was stored.
            parent = node >> 1
            pos = _POS[parent]
            mask = inner[level]
            splice.append(
                (
                    _HEADER + DIGEST_SIZE * (before[level] + (mask >> (pos + 1)).bit_count()),
                    mask >> pos & 1,
                    value,
                )
            )
            if level == 0:
                break
            # The parent's sibling, one level up.
            sib = parent ^ 1
            pos = _POS[sib]
            mask = inner[level]
            if mask >> pos & 1:
                other = _INNER
                at = _HEADER + DIGEST_SIZE * (before[level] + (mask >> (pos + 1)).bit_count())
            elif some[level] >> pos & 1:
                other = _ONE
                shift = (leaves & _RANGE[sib]).bit_length()  # 16 - lone slot
                at = (
                    slots_at
                    + DIGEST_SIZE * (children >> shift).bit_count()
                    + _LEAF_SIZE * (leaves >> shift).bit_count()
                )
            else:
                other = _EMPTY
        parts = [header]
        pos = _HEADER
        for at, stored, value in reversed(splice):
            parts.append(enc[pos:at])
            if value is not None:
                parts.append(value)
            pos = at + DIGEST_SIZE * stored
        bit = 0x8000 >> slot
        shift = 16 - slot
        at = (
            slots_at
            + DIGEST_SIZE * (children >> shift).bit_count()
            + _LEAF_SIZE * (leaves >> shift).bit_count()
        )
        parts.append(enc[pos:at])
        if state[0] == _INNER:
            parts.append(state[1])
        elif state[0] == _ONE:
            parts += (state[1], state[2])
        pos = at + (DIGEST_SIZE if children & bit else _LEAF_SIZE if leaves & bit else 0)
        parts.append(enc[pos:])
        self.writes[row] = b"".join(parts)
        return (_INNER, cur, b"")


def smt_store_apply(
    hash_name: str, get: SmtStoreGet, updates: Mapping[bytes, bytes | None]
) -> tuple[bytes, dict[bytes, bytes | None]]:
    """Apply a batch of updates to the tree stored in the table read by ``get``.

    Args:
        hash_name: the environment's hash.
        get: reads rows of the table as of before the call (S6).
        updates: ``key (32 bytes) -> value_hash (32 bytes)``, or ``None`` to delete the
            key; deleting an absent key, or setting a key to its value, changes nothing.

    Returns:
        ``(root, writes)``: the new root (EMPTY for the empty tree) and the rows to store,
        ``row_key -> value``, where ``None`` deletes the row. Applying them leaves the
        table equal to the one any other batching of the same final set gives (S2).

    Raises:
        ValidationError: an unknown hash, or a key or value hash of the wrong type or length.
        CorruptionError: a row on an updated path is missing or malformed.
    """
    h = hash_function(hash_name)
    if not isinstance(updates, Mapping):
        raise ValidationError(f"expected a mapping, got {type(updates).__name__}", field="updates")
    items = sorted((_require_key(key), _require_value(value)) for key, value in updates.items())
    root, count, state = _read_meta(get)
    if not items:
        return root, {}
    _check_lone_leaf(h, root, state)
    run = _Apply(h, get, items)
    new = run.subtree(0, state, 0, len(items))
    if new == state:
        return root, {}
    count += run.delta
    writes = run.writes
    kind = new[0]
    expected = _EMPTY if count == 0 else _ONE if count == 1 else _INNER
    if kind != expected or not 0 <= count <= _U64_MAX:
        raise CorruptionError(f"SMT meta row: count {count} does not match the tree")
    if kind == _EMPTY:
        writes[SMT_STORE_META_KEY] = None
        return _ZERO, writes
    if kind == _ONE:
        root = h(_LEAF + new[1] + new[2])
        writes[SMT_STORE_META_KEY] = root + (1).to_bytes(8, "big") + new[1] + new[2]
        return root, writes
    root = new[1]
    writes[SMT_STORE_META_KEY] = root + count.to_bytes(8, "big")
    return root, writes


# ----------------------------------------------------------------------------- reads


def smt_store_root(get: SmtStoreGet) -> bytes:
    """Return the root of the stored tree (32 zero bytes when empty)."""
    return _read_meta(get)[0]


def smt_store_count(get: SmtStoreGet) -> int:
    """Return the number of keys in the stored tree."""
    return _read_meta(get)[1]


def smt_store_get(get: SmtStoreGet, key: bytes) -> bytes | None:
    """Return the value hash stored under ``key`` (32 bytes), or ``None``.

    Raises:
        ValidationError: ``key`` is not 32 bytes.
        CorruptionError: a row on the key's path is missing or malformed.
    """
    key = _require_key(key)
    _, _, state = _read_meta(get)
    depth = 0
    while state[0] == _INNER:
        row = _chunk_key(depth, key)
        enc, shape = _read_chunk(get, depth, row, state[1])
        state = _slot_state(enc, shape, _nibble(key, depth))
        depth += 4
    if state[0] == _ONE and state[1] == key:
        return state[2]
    return None


def smt_store_prove(hash_name: str, get: SmtStoreGet, key: bytes) -> bytes:
    """Return the proof for ``key``: the bytes ``core.merkle.smt_prove`` gives for the
    same key/value set (S3), to check with :func:`~cortexgraph.core.merkle.verify_smt`.

    Raises:
        ValidationError: an unknown hash, or ``key`` is not 32 bytes.
        CorruptionError: a row on the key's path is missing or malformed.
    """
    h = hash_function(hash_name)
    key = _require_key(key)
    root, _, state = _read_meta(get)
    _check_lone_leaf(h, root, state)
    siblings: list[bytes] = []
    depth = 0
    while state[0] == _INNER:
        row = _chunk_key(depth, key)
        enc, shape = _read_chunk(get, depth, row, state[1])
        slot = _nibble(key, depth)
        node = 1
        for level in (3, 2, 1, 0):  # walk down while the node holds two or more keys
            node = 2 * node + (slot >> level & 1)
            siblings.append(_stored_hash(h, enc, shape, node ^ 1))
            kind = shape.kind(node)
            if kind != _INNER:
                break
        if kind == _INNER:
            state = _slot_state(enc, shape, slot)
        elif kind == _ONE:
            lone = node - 16 if node >= 16 else shape.lone(node)
            state = _check_leaf(depth, row, lone, _slot_state(enc, shape, lone))
        else:
            state = _EMPTY_STATE
        depth += 4
    if state[0] == _EMPTY:
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
    root, count, state = _read_meta(get)
    if state[0] == _EMPTY:
        return 0
    _check_lone_leaf(h, root, state)
    if state[0] == _ONE:
        return 1
    rows = 1
    keys = 0

    def walk(depth: int, row: bytes, expect: bytes) -> None:
        nonlocal rows, keys
        enc, shape = _read_chunk(get, depth, row, expect)
        rows += 1
        for slot in range(16):
            state = _slot_state(enc, shape, slot)
            if state[0] == _INNER:
                walk(depth + 4, _child_key(row, depth, slot), state[1])
            elif state[0] == _ONE:
                _check_leaf(depth, row, slot, state)
                keys += 1
        for node in range(15, 0, -1):
            if shape.is_inner(node):
                left = _stored_hash(h, enc, shape, 2 * node)
                right = _stored_hash(h, enc, shape, 2 * node + 1)
                if h(_NODE + left + right) != _stored_hash(h, enc, shape, node):
                    raise CorruptionError(f"SMT chunk {row.hex()}: inner node {node} is stale")

    walk(0, _chunk_key(0, root), root)
    if keys != count:
        raise CorruptionError(f"SMT meta row counts {count} keys, the tree holds {keys}")
    return rows
