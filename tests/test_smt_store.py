"""The chunked SMT table (cortexgraph.core.smt_store, smt_apply) against core.roots.

The table is a dict here; ``store/`` keeps the same rows in LMDB. Every comparison is
with ``core.roots.SparseMerkleTree`` (itself checked against a full-depth reference in
test_merkle_smt.py) fed the same final key/value set: roots (S1), proofs byte for byte
(S3), and the table against the one a single call builds from scratch (S2, J4).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cortexgraph.core import hashing
from cortexgraph.core import smt_apply as smt_apply_module
from cortexgraph.core import smt_store as smt_store_module
from cortexgraph.core.smt import SparseMerkleTree, verify_smt
from cortexgraph.core.smt_apply import smt_store_apply, smt_store_build
from cortexgraph.core.smt_store import (
    SMT_STORE_META_KEY,
    smt_store_check,
    smt_store_count,
    smt_store_get,
    smt_store_prove,
    smt_store_root,
)
from cortexgraph.errors import CorruptionError, ValidationError

VECTORS = Path(__file__).resolve().parent.parent / "fixtures" / "vectors"
ZERO = bytes(32)
ONES = b"\xff" * 32
BASE = hashlib.sha256(b"base").digest()
META = SMT_STORE_META_KEY

Table = dict[bytes, bytes]


# --------------------------------------------------------------------------- helpers


def key_of(i: int, salt: bytes = b"k") -> bytes:
    return hashlib.sha256(salt + i.to_bytes(8, "big")).digest()


def value_of(i: int, salt: bytes = b"v") -> bytes:
    return hashlib.sha256(salt + i.to_bytes(8, "big")).digest()


def near(base: bytes, n: int, tail: bytes) -> bytes:
    """A key sharing exactly ``n`` leading bits with ``base`` (bit n flipped, the rest
    from ``tail``)."""
    low = (1 << (255 - n)) - 1
    b = int.from_bytes(base, "big") ^ (1 << (255 - n))
    return ((b & ~low) | (int.from_bytes(tail, "big") & low)).to_bytes(32, "big")


def flip(data: bytes, i: int) -> bytes:
    out = bytearray(data)
    out[i // 8] ^= 0x80 >> (i % 8)
    return bytes(out)


def apply(table: Table, hash_name: str, updates: Mapping[bytes, bytes | None]) -> bytes:
    """Run smt_store_apply against ``table`` and store its writes, as the caller does."""
    root, writes = smt_store_apply(hash_name, table.get, updates)
    for row, value in writes.items():
        if value is None:
            del table[row]
        else:
            table[row] = value
    return root


def table_of(hash_name: str, entries: Mapping[bytes, bytes]) -> Table:
    """The table one call builds from an empty store."""
    table: Table = {}
    apply(table, hash_name, entries)
    return table


def batched_table(hash_name: str, entries: Mapping[bytes, bytes], seed: int) -> Table:
    """The table random batches reach ``entries`` with (in a shuffled order, with a
    detour: half the keys inserted with another value first, a third deleted again)."""
    rng = random.Random(seed)
    items = list(entries.items())
    rng.shuffle(items)
    table: Table = {}
    apply(table, hash_name, {k: value_of(1) for k, _ in items[: len(items) // 2]})
    apply(table, hash_name, {k: None for k, _ in items[: len(items) // 3]})
    while items:
        cut = rng.randint(1, len(items))
        apply(table, hash_name, dict(items[:cut]))
        items = items[cut:]
    return table


def tree_of(hash_name: str, entries: Mapping[bytes, bytes]) -> SparseMerkleTree:
    tree = SparseMerkleTree(hash_name)
    for key, value in entries.items():
        tree.update(key, value)
    return tree


def assert_agrees(
    hash_name: str, table: Table, entries: dict[bytes, bytes], probes: list[bytes]
) -> None:
    """S1, S2, S3 and the readers, for ``table`` holding ``entries``."""
    tree = tree_of(hash_name, entries)
    root = tree.root()
    assert smt_store_root(table.get) == root
    assert table == table_of(hash_name, entries)
    assert smt_store_count(table.get) == len(entries)
    assert smt_store_check(hash_name, table.get) == len(table)
    for key in [*entries, *probes]:
        value = entries.get(key)
        assert smt_store_get(table.get, key) == value
        proof = smt_store_prove(hash_name, table.get, key)
        assert proof == tree.prove(key)
        assert verify_smt(hash_name, root, key, value, proof)


# ----------------------------------------------------------------------- strategies

BASES = st.sampled_from([ZERO, ONES, BASE])
TAILS = st.binary(min_size=32, max_size=32)
KEYS = st.one_of(
    BASES,  # the all-zero and all-ones keys themselves
    st.builds(near, BASES, st.integers(0, 40), TAILS),  # 0..40 common leading bits
    st.builds(near, BASES, st.integers(248, 255), TAILS),  # chunks at depth 248 and 252
    TAILS,
)
VALUES = st.binary(min_size=32, max_size=32)
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------ properties


@FAST
@given(
    pool=st.lists(KEYS, min_size=1, max_size=30, unique=True),
    data=st.data(),
    hash_name=st.sampled_from(["sha256", "blake3"]),
)
@example(
    pool=[ZERO, ONES, near(ZERO, 255, ZERO), near(ONES, 0, ONES)], data=None, hash_name="sha256"
)
def test_batches_agree_with_core_merkle(pool: list[bytes], data: Any, hash_name: str) -> None:
    """S1-S3 and J4: for a random pool of keys (sharing 0..40 or 248..255 leading bits,
    the all-zero and all-ones keys, random ones) and random batches of inserts, overwrites,
    deletes and deletes of absent keys, after every call the root equals core.roots's for
    the same final set, the table is byte for byte the one a single call builds from an
    empty store, count/get/check are right, and every proof (present keys and absent
    probes) equals SparseMerkleTree.prove and verifies."""
    if data is None:  # the pinned example: insert all, then delete all but one, then all
        batches: list[dict[bytes, bytes | None]] = [
            {k: value_of(i) for i, k in enumerate(pool)},
            {k: None for k in pool[1:]},
            {pool[0]: None, pool[1]: None},
        ]
    else:
        batch = st.dictionaries(st.sampled_from(pool), st.one_of(st.none(), VALUES), max_size=12)
        batches = data.draw(st.lists(batch, min_size=1, max_size=5), label="batches")
    table: Table = {}
    entries: dict[bytes, bytes] = {}
    probes = [flip(pool[0], i) for i in (0, 3, 40, 255)]
    for updates in batches:
        root = apply(table, hash_name, updates)
        for key, value in updates.items():
            if value is None:
                entries.pop(key, None)
            else:
                entries[key] = value
        assert root == tree_of(hash_name, entries).root()
        assert_agrees(hash_name, table, entries, [*pool, *probes])
    assert (not entries) == (not table)  # the empty set has no rows at all


@settings(FAST, max_examples=30)
@given(
    entries=st.dictionaries(KEYS, VALUES, min_size=2, max_size=40),
    seed=st.integers(0, 2**32 - 1),
    hash_name=st.sampled_from(["sha256", "blake3"]),
)
def test_any_batching_gives_the_same_table(
    entries: dict[bytes, bytes], seed: int, hash_name: str
) -> None:
    """S2 / J4: reaching the same set through random batch boundaries, a detour (keys
    inserted with other values and deleted again) and a reversed order gives the same rows,
    byte for byte, as one call."""
    table = batched_table(hash_name, entries, seed)
    assert table == table_of(hash_name, entries)
    one_by_one: Table = {}
    for key in sorted(entries, reverse=True):
        apply(one_by_one, hash_name, {key: entries[key]})
    assert one_by_one == table


def test_full_top_chunks_agree_with_core_merkle() -> None:
    """S1/S2 where the top chunks are full (16 CHILD slots: 4,000 keys fill depths 0 and 4):
    three batches of 400 mixed updates keep the root equal to core.roots's, updated key
    by key, and the table equal to a one-call build of the final set."""
    entries = {key_of(i): value_of(i) for i in range(4000)}
    table = table_of("sha256", entries)
    tree = tree_of("sha256", entries)
    assert table[b"\x00"][:4] == b"\xff\xff\x00\x00"
    assert all(table[bytes([1, n << 4])][:4] == b"\xff\xff\x00\x00" for n in range(16))
    keys = list(entries)
    for seed in range(3):
        updates = mixed_updates(keys, 400, seed)
        root = apply(table, "sha256", updates)
        for key, value in updates.items():
            tree.update(key, value)
            if value is None:
                entries.pop(key, None)
            else:
                entries[key] = value
        assert root == tree.root()
    assert table == table_of("sha256", entries)
    assert smt_store_check("sha256", table.get) == len(table)


# ------------------------------------------------------------------- fixed cases


@pytest.mark.parametrize("hash_name", ["sha256", "blake3"])
def test_known_answer_vectors(hash_name: str) -> None:
    """S1/S3: the table reproduces every root and proof of fixtures/vectors/smt_<hash>.json
    (the full-depth reference's output), including depth-256 proofs and the empty tree."""
    vectors = json.loads((VECTORS / f"smt_{hash_name}.json").read_text("utf-8"))
    for case in vectors["cases"]:
        entries = {bytes.fromhex(k): bytes.fromhex(v) for k, v in case["entries"]}
        table = table_of(hash_name, entries)
        assert smt_store_root(table.get).hex() == case["root"], case["name"]
        for p in case["proofs"]:
            key = bytes.fromhex(p["key"])
            assert smt_store_prove(hash_name, table.get, key).hex() == p["proof"], case["name"]


def test_row_layout_known_answer() -> None:
    """The documented table contract, byte for byte: two keys splitting at bit 7 give the
    meta row (root, u64 count), the root chunk 0x00 (slot 0 a CHILD) and the chunk 0x01 0x00
    at depth 4 (slots 0 and 1 LEAF); a chunk is header (child u16, leaf u16), inner hashes in
    heap order from node 1, then slot payloads in slot order."""
    h = hashing.hash_function("sha256")
    k1, k2 = ZERO, b"\x01" + bytes(31)
    v1, v2 = value_of(1), value_of(2)
    table = table_of("sha256", {k2: v2, k1: v1})

    def node(left: bytes, right: bytes) -> bytes:
        return h(b"\x01" + left + right)

    n8 = node(h(b"\x00" + k1 + v1), h(b"\x00" + k2 + v2))  # slots 0 and 1
    n4, n2 = node(n8, ZERO), node(node(n8, ZERO), ZERO)
    n1 = node(n2, ZERO)
    lower = b"\x00\x00\xc0\x00" + n1 + n2 + n4 + n8 + k1 + v1 + k2 + v2
    r8 = node(n1, ZERO)  # the root chunk: slot 0 holds the lower chunk's hash n1
    r4, r2 = node(r8, ZERO), node(node(r8, ZERO), ZERO)
    r1 = node(r2, ZERO)
    upper = b"\x80\x00\x00\x00" + r1 + r2 + r4 + r8 + n1
    assert table == {
        META: r1 + (2).to_bytes(8, "big"),
        b"\x00": upper,
        b"\x01\x00": lower,
    }
    assert r1 == tree_of("sha256", {k1: v1, k2: v2}).root()


def test_empty_and_one_key_tables() -> None:
    """The empty tree has no rows and root EMPTY; a one-key tree has only the meta row
    (root, count 1, key, value); deleting the key empties the table again."""
    table: Table = {}
    assert smt_store_root(table.get) == ZERO
    assert smt_store_count(table.get) == 0
    assert smt_store_prove("blake3", table.get, BASE) == b"\x00\x00\x00"
    root = apply(table, "blake3", {BASE: value_of(1)})
    leaf = hashing.hash_function("blake3")(b"\x00" + BASE + value_of(1))
    assert root == leaf
    assert table == {META: leaf + (1).to_bytes(8, "big") + BASE + value_of(1)}
    assert_agrees("blake3", table, {BASE: value_of(1)}, [flip(BASE, 0), flip(BASE, 255)])
    assert apply(table, "blake3", {BASE: None}) == ZERO
    assert table == {}


def test_noop_updates_write_nothing() -> None:
    """Setting keys to their current values, deleting absent keys and an empty batch return
    the current root and no writes (S4), on empty, one-key and larger trees."""
    for n in (0, 1, 50):
        entries = {key_of(i): value_of(i) for i in range(n)}
        table = table_of("sha256", entries)
        root = smt_store_root(table.get)
        noop: dict[bytes, bytes | None] = {key_of(i): value_of(i) for i in range(n)}
        noop.update({key_of(1000 + i): None for i in range(5)})
        assert smt_store_apply("sha256", table.get, noop) == (root, {})
        assert smt_store_apply("sha256", table.get, {}) == (root, {})


def test_depth_252_chunk_and_depth_256_proofs() -> None:
    """Keys differing only in their last bits live in a chunk at depth 252 (row key 0x3f +
    31.5 bytes of prefix); proofs reach depth 256 and match core.roots."""
    low = bytes(32)
    entries = {low: value_of(1), flip(low, 255): value_of(2), flip(low, 252): value_of(3)}
    table = table_of("blake3", entries)
    assert bytes([63]) + bytes(32) in table
    assert_agrees("blake3", table, entries, [flip(low, 254), flip(low, 253), flip(low, 0)])
    proof = smt_store_prove("blake3", table.get, low)
    assert proof[1:3] == (256).to_bytes(2, "big")


def test_each_row_is_read_once_and_get_returns_any_buffer() -> None:
    """S6: one call reads every row at most once (so the caller may apply the writes after
    the call); ``get`` may return memoryview or bytearray (LMDB with buffers=True)."""
    entries = {key_of(i): value_of(i) for i in range(500)}
    table = table_of("blake3", entries)
    reads: list[bytes] = []

    def get(row: bytes) -> memoryview | None:
        reads.append(row)
        value = table.get(row)
        return None if value is None else memoryview(bytearray(value))

    updates: dict[bytes, bytes | None] = {key_of(i): value_of(i, b"w") for i in range(0, 500, 7)}
    updates.update({key_of(i): None for i in range(3, 500, 11)})
    updates.update({key_of(i): value_of(i) for i in range(500, 560)})
    root, _ = smt_store_apply("blake3", get, updates)
    assert len(reads) == len(set(reads))
    assert root == smt_store_apply("blake3", table.get, updates)[0]
    assert smt_store_prove("blake3", get, key_of(5)) == smt_store_prove(
        "blake3", table.get, key_of(5)
    )


# --------------------------------------------------------------------------- cost (S4)


class Counting:
    """Counts get calls, hash calls (by wrapping the hash function that the bulk update and
    the reads resolve)."""

    def __init__(self, table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
        self.table = table
        self.gets = 0
        self.hashes = 0
        real = hashing.hash_function

        def counting(hash_name: str) -> Callable[[bytes], bytes]:
            function = real(hash_name)

            def counted(data: bytes) -> bytes:
                self.hashes += 1
                return function(data)

            return counted

        monkeypatch.setattr(smt_apply_module, "local_hash_function", counting)
        monkeypatch.setattr(smt_store_module, "hash_function", counting)

    def get(self, row: bytes) -> bytes | None:
        self.gets += 1
        return self.table.get(row)


@pytest.fixture(scope="module")
def big_table() -> Iterator[tuple[Table, list[bytes]]]:
    """A 100,000-key tree built in one call (about 1.5 s)."""
    keys = [key_of(i) for i in range(100_000)]
    yield table_of("blake3", {k: value_of(i) for i, k in enumerate(keys)}), keys


def mixed_updates(keys: list[bytes], n: int, seed: int) -> dict[bytes, bytes | None]:
    """``n`` random updates: 40% inserts, 40% overwrites, 20% deletes."""
    rng = random.Random(seed)
    updates: dict[bytes, bytes | None] = {}
    while len(updates) < n:
        x = rng.random()
        if x < 0.4:
            updates[key_of(rng.getrandbits(60), b"new")] = rng.randbytes(32)
        elif x < 0.8:
            updates[rng.choice(keys)] = rng.randbytes(32)
        else:
            updates[rng.choice(keys)] = None
    return updates


@pytest.mark.pure_python
def test_cost_of_a_bulk_update_in_a_100k_tree(
    big_table: tuple[Table, list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """S4: 1,000 random updates (40% inserts, 40% overwrites, 20% deletes) into a
    100,000-key tree in one call cost about 2 row reads, 2 row writes and 10 hash calls per
    key (core.roots's content-addressed nodes: ~17 reads, ~18 writes, ~17 deletes and ~18
    hashes per key, one key at a time); the bounds are generous and ``-s`` shows the
    numbers. Every updated key then proves its new value (or absence) against the root."""
    table, keys = big_table
    counting = Counting(table, monkeypatch)
    updates = mixed_updates(keys, 1000, seed=1)
    root, writes = smt_store_apply("blake3", counting.get, updates)
    per_key = {
        "gets": counting.gets / len(updates),
        "writes": len(writes) / len(updates),
        "hashes": counting.hashes / len(updates),
    }
    print("smt_store per key:", {name: round(value, 2) for name, value in per_key.items()})
    assert per_key["gets"] <= 5
    assert per_key["writes"] <= 4
    assert per_key["hashes"] <= 20
    monkeypatch.undo()
    after = dict(table)
    for row, value in writes.items():
        if value is None:
            del after[row]
        else:
            after[row] = value
    assert smt_store_root(after.get) == root
    for key, value in list(updates.items())[:50]:
        assert verify_smt("blake3", root, key, value, smt_store_prove("blake3", after.get, key))


@pytest.mark.pure_python
def test_cost_of_a_single_update_in_a_100k_tree(
    big_table: tuple[Table, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """S4: one update alone reads the meta row and the ~5 chunks on its path, writes at
    most those plus the meta row, and hashes at most 4 nodes per chunk plus its leaves."""
    table, keys = big_table
    for updates in (
        {keys[7]: value_of(7, b"w")},
        {keys[8]: None},
        {key_of(123, b"fresh"): value_of(1)},
    ):
        counting = Counting(table, monkeypatch)
        _, writes = smt_store_apply("blake3", counting.get, updates)
        assert counting.gets <= 8
        assert len(writes) <= 8
        assert counting.hashes <= 4 * 7 + 4
        monkeypatch.undo()


# ------------------------------------------------------------------- corruption (S5)


@pytest.fixture
def small() -> tuple[Table, dict[bytes, bytes]]:
    """300 hashed keys: all 16 slots of the root chunk are CHILD slots."""
    entries = {key_of(i): value_of(i) for i in range(300)}
    return table_of("sha256", entries), entries


def readers(table: Table, key: bytes) -> list[Callable[[], object]]:
    """Every function that reads ``key``'s path."""
    return [
        lambda: smt_store_apply("sha256", table.get, {key: value_of(9, b"x")}),
        lambda: smt_store_get(table.get, key),
        lambda: smt_store_prove("sha256", table.get, key),
        lambda: smt_store_check("sha256", table.get),
    ]


def key_in_slot(entries: Mapping[bytes, bytes], nibble: int) -> bytes:
    return next(k for k in entries if k[0] >> 4 == nibble)


def test_truncated_or_missing_chunks_raise(small: tuple[Table, dict[bytes, bytes]]) -> None:
    """A truncated chunk, a chunk with a byte too many and a missing chunk raise
    CorruptionError from apply, get, prove and check."""
    table, entries = small
    key = key_in_slot(entries, 5)
    row = b"\x01\x50"  # the depth-4 chunk below slot 5 of the root chunk
    good = table[row]
    for bad in (good[:-1], good[:35], good + b"\x00", None):
        if bad is None:
            del table[row]
        else:
            table[row] = bad
        for read in readers(table, key):
            with pytest.raises(CorruptionError):
                read()
    table[row] = good
    assert smt_store_check("sha256", table.get) == len(table)


def test_flipped_child_hash_raises(small: tuple[Table, dict[bytes, bytes]]) -> None:
    """A flipped bit in a CHILD slot's hash (the last 32 bytes of the root chunk: slot 15)
    no longer matches the child chunk's node 1: every reader of that path raises."""
    table, entries = small
    root_chunk = table[b"\x00"]
    assert root_chunk[:2] == b"\xff\xff"  # all 16 slots are CHILD
    table[b"\x00"] = flip(root_chunk, 8 * len(root_chunk) - 3)
    for read in readers(table, key_in_slot(entries, 15)):
        with pytest.raises(CorruptionError):
            read()


def test_stale_cached_inner_hash_is_found_by_check(
    small: tuple[Table, dict[bytes, bytes]],
) -> None:
    """A flipped cached inner hash below node 1 (node 2 of the root chunk) is caught by
    smt_store_check, which recomputes every hash."""
    table, _ = small
    table[b"\x00"] = flip(table[b"\x00"], 8 * 36 + 1)
    with pytest.raises(CorruptionError, match="stale"):
        smt_store_check("sha256", table.get)


def test_bad_headers_and_leaves_raise(small: tuple[Table, dict[bytes, bytes]]) -> None:
    """A slot marked both CHILD and LEAF, a chunk holding a single leaf, a CHILD slot at
    depth 252, a leaf off its chunk's path and a non-bytes row all raise CorruptionError."""
    table, _ = small
    root_chunk = table[b"\x00"]
    table[b"\x00"] = root_chunk[:2] + b"\x80\x00" + root_chunk[4:]
    with pytest.raises(CorruptionError, match="both"):
        smt_store_get(table.get, BASE)
    table[b"\x00"] = b"\x00\x00\x80\x00" + bytes(32) + BASE + ZERO
    with pytest.raises(CorruptionError, match="fewer than two"):
        smt_store_get(table.get, BASE)
    table[b"\x00"] = root_chunk

    deep = table_of("sha256", {ZERO: value_of(1), flip(ZERO, 255): value_of(2)})
    row = bytes([63]) + bytes(32)
    deep[row] = b"\x20\x00" + deep[row][2:]  # slot 2, empty, marked CHILD
    with pytest.raises(CorruptionError):
        smt_store_get(deep.get, ZERO)

    pair = table_of("sha256", {ZERO: value_of(1), ONES: value_of(2)})
    chunk = pair[b"\x00"]  # slots 0 and 15 are leaves: move ONES's leaf under ZERO's key
    pair[b"\x00"] = chunk[:-64] + flip(ZERO, 200) + chunk[-32:]
    for read in (
        lambda: smt_store_check("sha256", pair.get),
        lambda: smt_store_prove("sha256", pair.get, flip(ONES, 100)),
    ):
        with pytest.raises(CorruptionError, match="off its path"):
            read()

    with pytest.raises(CorruptionError):
        smt_store_root(lambda row: "not bytes")  # type: ignore[arg-type,return-value]


def test_bad_meta_rows_raise(small: tuple[Table, dict[bytes, bytes]]) -> None:
    """A meta row of the wrong length, a zero count or root, a lone-leaf row whose root is
    not the leaf's hash, and a count that disagrees with the tree raise CorruptionError."""
    table, entries = small
    meta = table[META]
    for bad in (meta[:-1], meta[:32] + bytes(8), bytes(32) + meta[32:], meta + bytes(64)):
        table[META] = bad
        with pytest.raises(CorruptionError):
            smt_store_root(table.get)
    table[META] = meta[:32] + (7).to_bytes(8, "big")
    with pytest.raises(CorruptionError, match="counts 7"):
        smt_store_check("sha256", table.get)
    with pytest.raises(CorruptionError, match="count"):
        smt_store_apply("sha256", table.get, {k: None for k in entries})
    one = table_of("sha256", {BASE: value_of(1)})
    one[META] = flip(one[META], 3)
    with pytest.raises(CorruptionError, match="lone leaf"):
        smt_store_prove("sha256", one.get, BASE)


def test_bad_arguments_raise_validation_error() -> None:
    """Keys and value hashes of the wrong type or length, a non-mapping batch and an unknown
    hash name raise ValidationError before anything is read."""
    table: Table = {}
    for updates in (
        {b"short": ZERO},
        {BASE: b"short"},
        {"k" * 32: ZERO},
        {BASE: "v" * 32},
        [(BASE, ZERO)],
    ):
        with pytest.raises(ValidationError):
            smt_store_apply("sha256", table.get, updates)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        smt_store_apply("md5", table.get, {BASE: ZERO})
    with pytest.raises(ValidationError):
        smt_store_get(table.get, b"short")
    with pytest.raises(ValidationError):
        smt_store_prove("sha256", table.get, BASE[:31])
    assert table == {}


# ------------------------------------------------------------------------ bulk build


def built(hash_name: str, entries: Mapping[bytes, bytes]) -> tuple[bytes, Table]:
    """``smt_store_build``'s root and rows, checking the rows come sorted by key."""
    root, rows = smt_store_build(hash_name, entries.items())
    assert [key for key, _ in rows] == sorted(key for key, _ in rows)
    return root, dict(rows)


@settings(FAST, max_examples=100)
@given(
    entries=st.dictionaries(KEYS, VALUES, max_size=60),
    seed=st.integers(0, 2**32 - 1),
    hash_name=st.sampled_from(["sha256", "blake3"]),
)
@example(entries={}, seed=0, hash_name="sha256")
@example(entries={ZERO: BASE}, seed=0, hash_name="sha256")
@example(entries={ZERO: BASE, near(ZERO, 255, ZERO): BASE}, seed=0, hash_name="sha256")
def test_bulk_build_equals_incremental_batches(
    entries: dict[bytes, bytes], seed: int, hash_name: str
) -> None:
    """S2 for the bulk build: the rows ``smt_store_build`` gives from the final set alone
    (in a shuffled order) are byte for byte the table that random batches of incremental
    updates leave, with a detour through other values and deletes, and its root is
    core.roots's; the empty set has no rows."""
    items = list(entries.items())
    random.Random(seed).shuffle(items)
    root, rows = built(hash_name, dict(items))
    assert rows == batched_table(hash_name, entries, seed)
    assert root == tree_of(hash_name, entries).root()


@pytest.mark.parametrize("size", [100, 4000])
def test_bulk_build_of_full_top_chunks(size: int) -> None:
    """S2 where chunks hold many keys (their slot ranges are found by bisection): the bulk
    build of 100 and 4,000 keys equals the table one incremental call builds, and the
    whole-table check accepts it."""
    entries = {key_of(i): value_of(i) for i in range(size)}
    root, rows = built("blake3", entries)
    assert rows == table_of("blake3", entries)
    assert smt_store_check("blake3", rows.get) == len(rows)
    assert root == smt_store_root(rows.get)


@pytest.mark.parametrize("hash_name", ["sha256", "blake3"])
def test_bulk_build_known_answer_vectors(hash_name: str) -> None:
    """S1/S3 for the bulk build: its rows reproduce every root and proof of
    fixtures/vectors/smt_<hash>.json."""
    vectors = json.loads((VECTORS / f"smt_{hash_name}.json").read_text("utf-8"))
    for case in vectors["cases"]:
        entries = {bytes.fromhex(k): bytes.fromhex(v) for k, v in case["entries"]}
        root, rows = built(hash_name, entries)
        assert root.hex() == case["root"] == smt_store_root(rows.get).hex(), case["name"]
        for p in case["proofs"]:
            key = bytes.fromhex(p["key"])
            assert smt_store_prove(hash_name, rows.get, key).hex() == p["proof"], case["name"]


def test_bulk_build_bad_arguments_raise_validation_error() -> None:
    """Keys and value hashes of the wrong type or length, a missing value hash, a key
    given twice and an unknown hash name raise ValidationError naming what is wrong."""
    cases: list[tuple[list[Any], str]] = [
        ([(b"short", ZERO)], "key"),
        ([(BASE, b"short")], "value_hash"),
        ([("k" * 32, ZERO)], "key"),
        ([(BASE, None)], "value_hash"),
        ([(BASE, ZERO), (ONES, ZERO), (BASE, ONES)], "key"),
    ]
    for items, field in cases:
        with pytest.raises(ValidationError) as info:
            smt_store_build("sha256", items)
        assert info.value.field == field, items
    with pytest.raises(ValidationError, match="given twice"):
        smt_store_build("sha256", [(BASE, ZERO), (BASE, ZERO)])
    with pytest.raises(ValidationError):
        smt_store_build("md5", [(BASE, ZERO)])
