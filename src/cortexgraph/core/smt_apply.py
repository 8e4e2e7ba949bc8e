"""The bulk update of the chunked SMT store of :mod:`cortexgraph.core.smt_store`.

That module owns the layout (row keys, chunks, the meta row) and the reads; this one
owns :func:`smt_store_apply`, which turns a batch of key updates into the rows to write,
and :func:`smt_store_build`, which builds every row of a tree from its key/value set
alone (a rebuild). Both are pure like the layout: rows are read through ``get`` and the
writes are returned.

How it works
============

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
from the two bitmaps by word-wide bit operations and popcounts
(:class:`~cortexgraph.core.smt_store.ChunkShape`). The common cases get flat code paths:

- one update below an existing chunk (nearly every chunk below the top levels) skips the
  grouping by nibble, and when one slot changed, the chunk is the old bytes with the four
  ancestors' hashes and the slot spliced in: it walks up against the stored siblings like
  ``core.roots.smt_update`` does;
- a second key joining a lone leaf (or two new keys in an empty slot) writes the chunks
  of that two-key subtree directly, reading nothing: one CHILD slot per chunk down to the
  one where the keys part, which holds both leaves;
- a chunk whose 16 slots are and stay CHILD (the top levels of a big tree) has every node
  at a fixed offset;
- any other chunk with several changed slots is read once into per-node lists, the nodes
  above the changed slots are rehashed children first, and the chunk is written out whole.

The bulk build sorts the keys once and builds each chunk once, children first: a chunk
finds its slots' key ranges (by bisection when it holds many keys), recurses into the
slots holding two or more keys (two keys take the direct path above), and hashes its four
levels over the occupied nodes only. It reads nothing. By S2 its rows are the rows any
sequence of :func:`smt_store_apply` calls leaves for the same final set.

The C form
==========

Where the compiled modules run (:mod:`cortexgraph.compiled`), both functions hand the
recursion of a BLAKE3 tree to ``cortexgraph.core.smt_native`` (``smt_native.c``): the same
algorithm in its general form (a chunk decoded into its 31 nodes, the changed slots set,
the nodes above them hashed again, the chunk encoded), with BLAKE3 written there for
inputs of one chunk, since each hash is of 65 bytes. This module stays the reference: it
runs in the pure-Python build and for SHA-256 trees, and the tests hold the two to the
same rows byte for byte. The C form decides nothing about damage: on a row the layout
does not allow it gives the call back, and this module, reading afresh, raises the error
that names the row. A 1,000-key batch into a 100,000-key tree costs about 3.4 µs a key
there against 12.5 µs here (compiled), a single key 7 against 20 µs, and a bulk build
1.2 against 2.4 µs a key.

Invariants
==========

S1, S3 and S5 (the root, the proofs, the rows' consistency) are stated in
:mod:`cortexgraph.core.smt_store`.

S2  The table is a function of the key/value set only: whatever the batches, their order
    or their no-ops, the rows (keys and bytes) equal those of one call that inserts the
    final set into an empty table, and those :func:`smt_store_build` gives for that set.
    The empty set has no rows. This is what J4 needs.
S4  Cost of one :func:`smt_store_apply` call: one read of the meta row and of each chunk
    on the union of the updated keys' paths, at most one write or delete per row read
    (plus the rows of newly built chunks), nothing at all when no value changes; hash
    calls only for the inner nodes above changed slots (at most 4 per changed slot and
    chunk, 15 per chunk) and for the leaves those nodes hash over. For 1,000 random
    updates to a 100,000-key tree that is ~1.9 reads, ~2.0 writes and ~10 hash calls per
    key, against ~17 reads, ~18 writes, ~17 deletes and ~18 hashes for ``core.roots``.
S6  ``get`` is read as of before the call: no row is read after the call decides to
    write it, so the caller applies the returned writes afterwards. A call reads each
    row at most once, but for one that the C form gives back: that is read again by
    this module (nothing was written in between).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import CorruptionError, ValidationError
from .hashing import DIGEST_SIZE, HashFunction, local_hash_function, native_core
from .roots import LEAF, NODE
from .smt import EMPTY_SMT_ROOT, SMT_KEY_SIZE
from .smt_store import (
    EMPTY,
    EMPTY_STATE,
    HEADER_SIZE,
    INNER,
    KEY_BITS,
    LEAF_SIZE,
    MAX_CHUNK_DEPTH,
    NODE_POS,
    NODE_SLOTS,
    ONE,
    SMT_STORE_META_KEY,
    ChunkShape,
    SmtStoreGet,
    SubtreeState,
    check_leaf,
    check_lone_leaf,
    chunk_key,
    nibble,
    read_chunk,
    read_meta,
    require_key,
    slot_state,
)

__all__ = ["smt_store_apply", "smt_store_build"]

_ZERO = EMPTY_SMT_ROOT
_U64_MAX = (1 << 64) - 1
# Walking up from slot s: its ancestors at levels 3 to 0 (nodes 8..15, 4..7, 2..3, 1).
_ANCESTORS = tuple((8 + (s >> 1), 4 + (s >> 2), 2 + (s >> 3), 1) for s in range(16))
# Walking up from slot s: the path node at each level from 4 to 1 and its parent's level.
_UPWARD = tuple(tuple(((16 + s) >> i, 3 - i) for i in range(4)) for s in range(16))


def _require_value(value: object) -> bytes | None:
    """Return a 32-byte value hash, or ``None`` (delete), else raise :class:`ValidationError`."""
    if value is None:
        return None
    if not isinstance(value, bytes) or len(value) != DIGEST_SIZE:
        raise ValidationError(f"expected {DIGEST_SIZE} bytes, got {value!r}", field="value_hash")
    return bytes(value)


#: the C form of the bulk update and build (``smt_native.c``, BLAKE3 trees only) when the
#: compiled modules run, else ``None``. This module is the C form's reference: it runs
#: wherever that is ``None``, and on any input the C form gives back (a row the layout does
#: not allow: the reference then raises the error that names it).
_NATIVE: Any = native_core()


def _native_for(hash_name: str) -> Any:
    """The C form for a tree hashed with ``hash_name``: BLAKE3 trees only, else ``None``."""
    return _NATIVE if hash_name == "blake3" else None


_NO_CHUNK = bytes(HEADER_SIZE)  # a chunk with no slots: what a position without a row holds
_NO_SHAPE = ChunkShape(0, 0)


class _Apply:
    __slots__ = ("delta", "get", "h", "items", "writes")

    def __init__(
        self, h: HashFunction, get: SmtStoreGet, items: list[tuple[bytes, bytes | None]]
    ) -> None:
        self.h = h
        self.get = get
        self.items = items
        self.delta = 0
        self.writes: dict[bytes, bytes | None] = {}

    def subtree(self, depth: int, state: SubtreeState, lo: int, hi: int) -> SubtreeState:
        """Apply ``items[lo:hi]`` (sorted, all below the same ``depth``-bit prefix) to the
        subtree in ``state`` at ``depth``; return its new state and record row writes."""
        items = self.items
        kind = state[0]
        if kind != INNER and hi - lo == 1:  # one update, at most one key: no chunk here
            key, value = items[lo]
            if kind == EMPTY:
                if value is None:
                    return state
                self.delta += 1
                return (ONE, key, value)
            if key == state[1]:
                if value == state[2]:
                    return state
                if value is None:
                    self.delta -= 1
                    return EMPTY_STATE
                return (ONE, key, value)
            if value is None:
                return state
            # A second key joins the lone leaf: the chunks below hold exactly two keys.
            if depth <= MAX_CHUNK_DEPTH:
                return self.pair(depth, state[1], state[2], key, value)
        elif kind == EMPTY and hi - lo == 2 and depth <= MAX_CHUNK_DEPTH:
            (a_key, a_value), (b_key, b_value) = items[lo], items[lo + 1]
            if a_value is not None and b_value is not None:
                self.delta += 1
                return self.pair(depth, a_key, a_value, b_key, b_value)
        elif kind == INNER and hi - lo == 1:
            return self.one(depth, state, lo)
        if depth > MAX_CHUNK_DEPTH:  # two distinct keys cannot share 256 bits
            raise CorruptionError("SMT leaf found off its key's path")
        row = chunk_key(depth, items[lo][0])
        # ``changed`` holds the new state of every slot that differs from ``enc``. A
        # position without a row is read as an empty chunk, plus the lone leaf if any.
        changed: dict[int, SubtreeState] = {}
        if kind == INNER:
            enc, old = read_chunk(self.get, depth, row, state[1])
        else:
            enc, old = _NO_CHUNK, _NO_SHAPE
            if kind == ONE:
                home = nibble(state[1], depth)
                changed[home] = check_leaf(depth, row, home, state)
        moved = False
        shift = 4 - (depth & 4)
        byte = depth >> 3
        i = lo
        while i < hi:
            slot = items[i][0][byte] >> shift & 0xF
            j = i + 1
            while j < hi and items[j][0][byte] >> shift & 0xF == slot:
                j += 1
            before = changed.get(slot) or slot_state(enc, old, slot)
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
                children = old.children & ~bit | (bit if after[0] == INNER else 0)
                leaves = old.leaves & ~bit | (bit if after[0] == ONE else 0)
                if children == old.children == 0xFFFF:
                    return self.rebuild_full(row, enc, changed)
                if children or leaves & (leaves - 1):  # still two or more keys
                    header = (children << 16 | leaves).to_bytes(HEADER_SIZE, "big")
                    return self.rebuild_one(row, enc, old, header, slot, after)
        return self.rebuild(row, kind == INNER, enc, old, changed)

    def one(self, depth: int, state: SubtreeState, lo: int) -> SubtreeState:
        """:meth:`subtree` for one update below an existing chunk (the common case below
        the top chunks): the same steps with a single slot, without the grouping."""
        key = self.items[lo][0]
        row = chunk_key(depth, key)
        enc, old = read_chunk(self.get, depth, row, state[1])
        slot = key[depth >> 3] >> (4 - (depth & 4)) & 0xF
        bit = 0x8000 >> slot
        children, leaves = old.children, old.leaves
        if (children | leaves) & bit:
            shift = 16 - slot
            at = (
                old.slots_at
                + DIGEST_SIZE * (children >> shift).bit_count()
                + LEAF_SIZE * (leaves >> shift).bit_count()
            )
            if children & bit:
                before: SubtreeState = (INNER, enc[at : at + DIGEST_SIZE], b"")
            else:
                before = (
                    ONE,
                    enc[at : at + SMT_KEY_SIZE],
                    enc[at + SMT_KEY_SIZE : at + LEAF_SIZE],
                )
        else:
            before = EMPTY_STATE
        after = self.subtree(depth + 4, before, lo, lo + 1)
        if after == before:
            return state
        kind = after[0]
        children = children & ~bit | (bit if kind == INNER else 0)
        leaves = leaves & ~bit | (bit if kind == ONE else 0)
        if children == old.children == 0xFFFF:
            return self.rebuild_full(row, enc, {slot: after})
        if children or leaves & (leaves - 1):  # still two or more keys
            header = (children << 16 | leaves).to_bytes(HEADER_SIZE, "big")
            return self.rebuild_one(row, enc, old, header, slot, after)
        return self.rebuild(row, True, enc, old, {slot: after})

    def pair(
        self, depth: int, a_key: bytes, a_value: bytes, b_key: bytes, b_value: bytes
    ) -> SubtreeState:
        """The subtree at ``depth`` holding exactly two keys (one of them new), written
        directly: the chunks from ``depth`` down to the one where the keys part each have
        one CHILD slot, and that chunk has the two LEAF slots (a lone leaf sits as high as
        it can, so there is nothing below). This is what :meth:`rebuild` would write for
        them, without reading anything: no row exists below a subtree of fewer than two
        keys. ``a_key`` may be the lone leaf already there; it must lie on the path."""
        row = chunk_key(depth, b_key)
        if chunk_key(depth, a_key) != row:
            raise CorruptionError(f"SMT chunk {row.hex()} holds a leaf off its path")
        h = self.h
        writes = self.writes
        self.delta += 1
        split = (
            KEY_BITS - (int.from_bytes(a_key, "big") ^ int.from_bytes(b_key, "big")).bit_length()
        )
        at = split & ~3  # the depth of the chunk where the two keys part
        a_slot, b_slot = nibble(a_key, at), nibble(b_key, at)
        if a_slot < b_slot:
            left, right = a_key + a_value, b_key + b_value
        else:
            left, right = b_key + b_value, a_key + a_value
        cur = h(NODE + h(LEAF + left) + h(LEAF + right))
        path = [cur]  # the inner nodes of that chunk, deepest (the keys' meeting node) first
        node = (16 + a_slot) >> (4 - (split - at))
        while node > 1:
            cur = h(NODE + (_ZERO + cur if node & 1 else cur + _ZERO))
            path.append(cur)
            node >>= 1
        path.reverse()
        leaves = 0x8000 >> a_slot | 0x8000 >> b_slot
        writes[chunk_key(at, b_key)] = (
            leaves.to_bytes(HEADER_SIZE, "big") + b"".join(path) + left + right
        )
        while at > depth:  # the chunks above: one CHILD slot each, four inner nodes
            at -= 4
            slot = nibble(b_key, at)
            child = cur
            node = 16 + slot
            path = []
            while node > 1:
                cur = h(NODE + (_ZERO + cur if node & 1 else cur + _ZERO))
                path.append(cur)
                node >>= 1
            path.reverse()
            path.append(child)
            writes[chunk_key(at, b_key)] = (0x8000_0000 >> slot).to_bytes(
                HEADER_SIZE, "big"
            ) + b"".join(path)
        return (INNER, cur, b"")

    def rebuild(
        self,
        row: bytes,
        existed: bool,
        enc: bytes,
        old: ChunkShape,
        changed: dict[int, SubtreeState],
    ) -> SubtreeState:
        """Write the chunk ``enc`` (shape ``old``) with the slots in ``changed`` replaced,
        or delete it when fewer than two keys are left; return the subtree's state."""
        children, leaves = old.children, old.leaves
        for slot, state in changed.items():
            bit = 0x8000 >> slot
            children &= ~bit
            leaves &= ~bit
            if state[0] == INNER:
                children |= bit
            elif state[0] == ONE:
                leaves |= bit
        if not children and leaves & (leaves - 1) == 0:  # at most one key: collapse
            if existed:
                self.writes[row] = None
            if not leaves:
                return EMPTY_STATE
            slot = 16 - leaves.bit_length()
            return changed.get(slot) or slot_state(enc, old, slot)
        header = (children << 16 | leaves).to_bytes(HEADER_SIZE, "big")
        if len(changed) == 1:
            for slot, state in changed.items():
                return self.rebuild_one(row, enc, old, header, slot, state)
        if children == old.children == 0xFFFF:
            return self.rebuild_full(row, enc, changed)
        # Several slots changed: read the whole chunk into per-node lists, recompute the
        # nodes above the changed slots, and write the chunk out again. Nodes with no
        # changed slot below keep their kind and, if inner, their cached hash.
        h = self.h
        kind = [EMPTY] * 32  # node 1..31 of the new chunk: EMPTY, ONE or INNER
        data = [b""] * 32  # its hash (INNER) or its lone leaf's key and value (ONE)
        cached: dict[int, bytes] = {}  # the old chunk's inner hashes, by node
        if old.inners:
            at = HEADER_SIZE
            for node in old.nodes():
                cached[node] = enc[at : at + DIGEST_SIZE]
                at += DIGEST_SIZE
        at = old.slots_at
        ochildren, oleaves = old.children, old.leaves
        for slot in range(16):
            bit = 0x8000 >> slot
            if ochildren & bit:
                kind[16 + slot] = INNER
                data[16 + slot] = enc[at : at + DIGEST_SIZE]
                at += DIGEST_SIZE
            elif oleaves & bit:
                kind[16 + slot] = ONE
                data[16 + slot] = enc[at : at + LEAF_SIZE]
                at += LEAF_SIZE
        dirty = 0  # bit n: node n has a changed slot below
        for slot, state in changed.items():
            node = 16 + slot
            kind[node] = state[0]
            data[node] = state[1] if state[0] == INNER else state[1] + state[2]
            while node > 1:
                node >>= 1
                dirty |= 1 << node
        inner: list[bytes] = []  # the new chunk's inner hashes, node 15 down to node 1
        for node in range(15, 0, -1):
            left, right = 2 * node, 2 * node + 1
            kl, kr = kind[left], kind[right]
            if kl == EMPTY or kr == EMPTY:  # at most one side holds keys: it moves up
                if kl == EMPTY:
                    left = right
                kind[node] = kind[left]
                data[node] = data[left]
                if kind[left] == INNER:
                    if dirty >> node & 1:
                        value = h(
                            NODE + (data[left] + _ZERO if left == 2 * node else _ZERO + data[left])
                        )
                    else:
                        value = cached[node]
                    data[node] = value
                    inner.append(value)
                continue
            kind[node] = INNER
            if dirty >> node & 1:
                pair = []
                for child in (left, right):
                    if kind[child] == INNER:
                        pair.append(data[child])
                    else:
                        pair.append(h(LEAF + data[child]))
                value = h(NODE + pair[0] + pair[1])
            else:
                value = cached[node]
            data[node] = value
            inner.append(value)
        inner.reverse()
        slots = [data[node] for node in range(16, 32) if kind[node] != EMPTY]
        self.writes[row] = header + b"".join(inner) + b"".join(slots)
        return (INNER, data[1], b"")

    def rebuild_full(
        self, row: bytes, enc: bytes, changed: dict[int, SubtreeState]
    ) -> SubtreeState:
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
            value = h(NODE + out[at : at + 2 * DIGEST_SIZE])
            at = 32 * node - 28
            out[at : at + DIGEST_SIZE] = value
        self.writes[row] = bytes(out)
        return (INNER, value, b"")

    def rebuild_one(
        self, row: bytes, enc: bytes, old: ChunkShape, header: bytes, slot: int, state: SubtreeState
    ) -> SubtreeState:
        """:meth:`rebuild` for one changed slot (the common case below the top chunks):
        walk up its four ancestors as ``core.roots.smt_update`` does, against the stored
        siblings, and splice the new hashes in. The chunk keeps two or more keys.

        Written out flat (no helper calls but the hash): this is the hot loop."""
        h = self.h
        children, leaves = old.children, old.leaves
        inner, some, before, slots_at = old.inner, old.some, old.before, old.slots_at
        kind = state[0]
        # ``cur`` is the path node's hash; for a lone leaf it stays b"" (``leaf`` holds
        # the leaf's bytes) until a parent needs it.
        cur = state[1] if kind == INNER else _ZERO if kind == EMPTY else b""
        leaf = state[1] + state[2] if kind == ONE else b""
        # Level 4: the sibling is a slot.
        t = slot ^ 1
        bit = 0x8000 >> t
        if children & bit or leaves & bit:
            shift = 16 - t
            at = (
                slots_at
                + DIGEST_SIZE * (children >> shift).bit_count()
                + LEAF_SIZE * (leaves >> shift).bit_count()
            )
            other = INNER if children & bit else ONE
        else:
            other = EMPTY
            at = 0
        splice = []  # (offset, stored?, new hash or None) of the ancestors, deepest first
        for node, level in _UPWARD[slot]:
            # ``node`` is the path node at level + 1; ``other`` and ``at`` describe its
            # sibling (kind, and where its hash or lone leaf is stored).
            if other == EMPTY and kind != INNER:
                value = None  # nothing, or a lone leaf moving up: no hash
            elif kind == EMPTY and other == ONE:
                kind, leaf, cur, value = ONE, enc[at : at + LEAF_SIZE], b"", None
            else:
                if not cur:
                    cur = h(LEAF + leaf)
                if other == INNER:
                    sibling = enc[at : at + DIGEST_SIZE]
                elif other == ONE:
                    sibling = h(LEAF + enc[at : at + LEAF_SIZE])
                else:
                    sibling = _ZERO
                cur = h(NODE + (sibling + cur if node & 1 else cur + sibling))
                kind = INNER
                value = cur
            # The parent: where its cached hash is, and whether it was stored.
            parent = node >> 1
            pos = NODE_POS[parent]
            mask = inner[level]
            splice.append(
                (
                    HEADER_SIZE + DIGEST_SIZE * (before[level] + (mask >> (pos + 1)).bit_count()),
                    mask >> pos & 1,
                    value,
                )
            )
            if level == 0:
                break
            # The parent's sibling, one level up.
            sib = parent ^ 1
            pos = NODE_POS[sib]
            mask = inner[level]
            if mask >> pos & 1:
                other = INNER
                at = HEADER_SIZE + DIGEST_SIZE * (before[level] + (mask >> (pos + 1)).bit_count())
            elif some[level] >> pos & 1:
                other = ONE
                shift = (leaves & NODE_SLOTS[sib]).bit_length()  # 16 - lone slot
                at = (
                    slots_at
                    + DIGEST_SIZE * (children >> shift).bit_count()
                    + LEAF_SIZE * (leaves >> shift).bit_count()
                )
            else:
                other = EMPTY
        parts = [header]
        pos = HEADER_SIZE
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
            + LEAF_SIZE * (leaves >> shift).bit_count()
        )
        parts.append(enc[pos:at])
        if state[0] == INNER:
            parts.append(state[1])
        elif state[0] == ONE:
            parts += (state[1], state[2])
        pos = at + (DIGEST_SIZE if children & bit else LEAF_SIZE if leaves & bit else 0)
        parts.append(enc[pos:])
        self.writes[row] = b"".join(parts)
        return (INNER, cur, b"")


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
    h = local_hash_function(hash_name)  # one call runs on one thread
    if not isinstance(updates, Mapping):
        raise ValidationError(f"expected a mapping, got {type(updates).__name__}", field="updates")
    given: Iterable[tuple[object, object]] = updates.items()  # checked here, not by the type
    items = sorted((require_key(key), _require_value(value)) for key, value in given)
    root, count, state = read_meta(get)
    if not items:
        return root, {}
    check_lone_leaf(h, root, state)
    native = _native_for(hash_name)
    writes: dict[bytes, bytes | None] = {}
    # the same rows, in C; None: the reference reads afresh and names what is wrong
    done = None if native is None else native.apply(get, items, state, writes)
    if done is not None:
        new, delta = done
    else:
        run = _Apply(h, get, items)
        new, delta, writes = run.subtree(0, state, 0, len(items)), run.delta, run.writes
    if new == state:
        return root, {}
    count += delta
    kind = new[0]
    expected = EMPTY if count == 0 else ONE if count == 1 else INNER
    if kind != expected or not 0 <= count <= _U64_MAX:
        raise CorruptionError(f"SMT meta row: count {count} does not match the tree")
    if kind == EMPTY:
        writes[SMT_STORE_META_KEY] = None
        return _ZERO, writes
    if kind == ONE:
        root = h(LEAF + new[1] + new[2])
        writes[SMT_STORE_META_KEY] = root + (1).to_bytes(8, "big") + new[1] + new[2]
        return root, writes
    root = new[1]
    writes[SMT_STORE_META_KEY] = root + count.to_bytes(8, "big")
    return root, writes


# ---------------------------------------------------------------------------- bulk build

# Above this many keys, a chunk finds where its slots start by bisection, not by a scan.
_BISECT_FROM = 48


class _Build:
    """The chunks of a whole tree, bottom-up from its sorted keys (:func:`smt_store_build`)."""

    __slots__ = ("h", "keys", "pairs", "values", "writes")

    def __init__(self, h: HashFunction, keys: list[bytes], values: list[bytes]) -> None:
        self.h = h
        self.keys = keys
        self.values = values
        # the two-key subtrees are written by the incremental path's direct builder
        self.pairs = _Apply(h, lambda row: None, [])
        self.writes = self.pairs.writes

    def chunk(self, depth: int, lo: int, hi: int) -> bytes:
        """Write the chunk at ``depth`` holding ``keys[lo:hi]`` (two or more keys, all
        below one ``depth``-bit prefix) and those below it; return its hash (node 1)."""
        keys, values, h = self.keys, self.values, self.h
        byte = depth >> 3
        shift = 4 - (depth & 4)
        children = leaves = 0
        payload: list[bytes] = []  # the slots' bytes, in slot order
        # node -> (hash, b"") for a node over two or more keys, (b"", key | value) for one
        level: dict[int, tuple[bytes, bytes]] = {}
        i = lo
        while i < hi:
            slot = keys[i][byte] >> shift & 0xF
            if hi - i > _BISECT_FROM and slot < 15:
                # the first key past this slot: the chunk's prefix, then nibble slot + 1
                first = keys[i]
                high = first[byte] & 0xF0 if shift == 0 else 0  # the prefix's bits of byte
                bound = first[:byte] + bytes((high | (slot + 1) << shift,))
                j = bisect_left(keys, bound, i + 1, hi)
            else:
                j = i + 1
                while j < hi and keys[j][byte] >> shift & 0xF == slot:
                    j += 1
            bit = 0x8000 >> slot
            if j - i == 1:
                leaf = keys[i] + values[i]
                leaves |= bit
                payload.append(leaf)
                level[16 + slot] = (b"", leaf)
            else:
                if j - i == 2:
                    child = self.pairs.pair(
                        depth + 4, keys[i], values[i], keys[i + 1], values[i + 1]
                    )[1]
                else:
                    child = self.chunk(depth + 4, i, j)
                children |= bit
                payload.append(child)
                level[16 + slot] = (child, b"")
            i = j
        # Hash up the four levels over the occupied nodes only: a lone leaf moves up past
        # an empty sibling, anything else becomes an inner node, cached in the chunk.
        inner: list[list[bytes]] = []  # the inner hashes of each level, deepest first
        for _ in range(4):
            hashes: list[bytes] = []  # in node order: the order a chunk stores them
            up: dict[int, tuple[bytes, bytes]] = {}
            for node, (digest, leaf) in level.items():
                parent = node >> 1
                if parent in up:  # done with its left sibling
                    continue
                other = level.get(node ^ 1) if not node & 1 else None
                if other is None:
                    if leaf:
                        up[parent] = (b"", leaf)
                        continue
                    digest = h(NODE + (_ZERO + digest if node & 1 else digest + _ZERO))
                else:
                    right = other[0] or h(LEAF + other[1])
                    digest = h(NODE + (digest or h(LEAF + leaf)) + right)
                up[parent] = (digest, b"")
                hashes.append(digest)
            inner.append(hashes)
            level = up
        header = (children << 16 | leaves).to_bytes(HEADER_SIZE, "big")
        self.writes[chunk_key(depth, keys[lo])] = b"".join(
            [header, *inner[3], *inner[2], *inner[1], *inner[0], *payload]
        )
        return inner[3][0]  # node 1: the chunk holds two or more keys


def smt_store_build(
    hash_name: str, items: Iterable[tuple[bytes, bytes]]
) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """Build the rows of the tree holding ``items`` from nothing, bottom-up.

    The keys are sorted once and each chunk is built once from its slots (no per-key
    update, no reads), so this is what a rebuild of the whole table calls. By S2 the
    rows are exactly those any sequence of :func:`smt_store_apply` calls leaves for the
    same final key/value set.

    Args:
        hash_name: the environment's hash.
        items: ``(key, value_hash)`` pairs, 32 bytes each, in any order, keys distinct.

    Returns:
        ``(root, rows)``: the root (EMPTY for no items) and every row of the table as
        ``(row_key, value)``, sorted by row key (the meta row last), ready to append.

    Raises:
        ValidationError: an unknown hash, a key or value hash of the wrong type or length,
            or a key given twice.
    """
    h = local_hash_function(hash_name)  # one call runs on one thread
    pairs: list[tuple[bytes, bytes]] = []
    given: Iterable[tuple[object, object]] = items  # checked here, not by the type
    for raw_key, raw_value in given:
        key = (
            raw_key
            if type(raw_key) is bytes and len(raw_key) == SMT_KEY_SIZE
            else require_key(raw_key)
        )
        if type(raw_value) is bytes and len(raw_value) == DIGEST_SIZE:
            value = raw_value
        else:
            checked = _require_value(raw_value)
            if checked is None:
                raise ValidationError(f"key {key.hex()} has no value hash", field="value_hash")
            value = checked
        pairs.append((key, value))
    by_key = dict(pairs)
    if len(by_key) != len(pairs):
        seen: set[bytes] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValidationError(f"key {key.hex()} is given twice", field="key")
            seen.add(key)
    keys = sorted(by_key)  # sorting the keys alone is faster than sorting the pairs
    values = [by_key[key] for key in keys]
    count = len(keys)
    if count == 0:
        return _ZERO, []
    if count == 1:
        root = h(LEAF + keys[0] + values[0])
        return root, [(SMT_STORE_META_KEY, root + (1).to_bytes(8, "big") + keys[0] + values[0])]
    native = _native_for(hash_name)
    built: dict[bytes, bytes | None] = {}
    native_root = None if native is None else native.build(keys, values, built)
    if native_root is not None:  # the same rows, in C
        root = native_root
    else:
        run = _Build(h, keys, values)
        root, built = run.chunk(0, 0, count), run.writes
    # the builders only put rows (a delete needs a row read first, and nothing is read)
    rows = [(row, value) for row, value in sorted(built.items()) if value is not None]
    rows.append((SMT_STORE_META_KEY, root + count.to_bytes(8, "big")))
    return root, rows
