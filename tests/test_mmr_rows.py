"""The ``mmr`` table at one row per journal entry (``core.commitments``, M1, M5, M9).

Row ``u64be(i)`` holds the leaf of the entry at seq ``i + 1`` and the parents its append
completes. These tests check the position -> (row, offset) mapping against an
enumeration of what each append writes, that roots and proofs read through the rows are
exactly those of the in-memory :class:`~cortexgraph.core.mmr.MMR`, that the one-pass bulk
build gives the incremental rows byte for byte, and that a row of the wrong length is a
``CorruptionError`` naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.commitments import (
    build_mmr_rows,
    mmr_getter,
    mmr_key,
    mmr_mutations,
    mmr_row,
)
from cortexgraph.core.mmr import (
    MMR,
    mmr_consistency_proof,
    mmr_inclusion_proof,
    mmr_leaf_hash,
    mmr_node_count,
    mmr_node_origin,
    mmr_root,
)
from cortexgraph.errors import CorruptionError
from cortexgraph.store.env import LAYOUT_KEY
from cortexgraph.store.txn import WriteTxn

HASHES = st.sampled_from(["blake3", "sha256"])


def _trailing_ones(index: int) -> int:
    return (~index & (index + 1)).bit_length() - 1


def _incremental_table(hash_name: str, entries: list[bytes]) -> dict[bytes, bytes]:
    """The ``mmr`` table the write path leaves: ``mmr_mutations`` per entry."""
    table: dict[bytes, bytes] = {}

    def get(name: str, key: bytes) -> bytes | None:
        assert name == "mmr"
        return table.get(key)

    for size, entry in enumerate(entries):
        for _, key, value in mmr_mutations(hash_name, get, size, entry):
            assert isinstance(value, bytes)
            table[key] = value
    return table


def _store_rows(cx: cg.Cortex) -> list[tuple[bytes, bytes]]:
    with cx._env.read() as txn, txn.cursor("mmr") as cur:
        return [(bytes(key), bytes(value)) for key, value in cur]


def _getter(table: dict[bytes, bytes]) -> Callable[[int], bytes | None]:
    return mmr_getter(lambda name, key: table.get(key))


def test_node_origin_matches_an_enumeration_of_appends() -> None:
    """For every position of an MMR of 4,100 leaves, ``mmr_node_origin`` names the leaf
    whose append writes that node and the node's rank in that append (its height), as
    enumerating the appends in order gives them: leaf i writes 1 + (trailing ones of i)
    consecutive positions."""
    enumerated = [(i, k) for i in range(4_100) for k in range(1 + _trailing_ones(i))]
    assert len(enumerated) == mmr_node_count(4_100)
    assert [mmr_node_origin(pos) for pos in range(len(enumerated))] == enumerated


@given(position=st.integers(0, 2**64 - 1))
@example(position=0)
@example(position=2**64 - 1)
@example(position=2**64 - 2)
def test_node_origin_for_any_u64_position(position: int) -> None:
    """For any u64 position, the origin ``(i, k)`` satisfies what defines it: ``k`` is at
    most the trailing ones of ``i`` and ``i``'s append writes its nodes from position
    ``mmr_node_count(i)`` on, so the node is at ``mmr_node_count(i) + k``."""
    index, height = mmr_node_origin(position)
    assert 0 <= height <= _trailing_ones(index)
    assert mmr_node_count(index) + height == position


@given(
    hash_name=HASHES,
    entries=st.lists(st.binary(max_size=8), max_size=300),
    data=st.data(),
)
@example(hash_name="blake3", entries=[b"%d" % i for i in range(256)], data=None)
def test_rows_give_the_roots_and_proofs_of_the_in_memory_mmr(
    hash_name: str, entries: list[bytes], data: st.DataObject | None
) -> None:
    """Read through ``mmr_getter``, the rows of ``mmr_mutations`` give the roots, inclusion
    proofs and consistency proofs of :class:`MMR` over the same entries, for every size up
    to the journal's (so nothing beyond a size is read); there is one row per entry, its
    length is 32 x (1 + trailing ones), and the bulk build gives the same rows."""
    table = _incremental_table(hash_name, entries)
    assert sorted(table) == [mmr_key(i) for i in range(len(entries))]
    for i, entry in enumerate(entries):
        row = table[mmr_key(i)]
        assert len(row) == 32 * (1 + _trailing_ones(i))
        assert row[:32] == mmr_leaf_hash(hash_name, entry)
    assert list(build_mmr_rows(hash_name, entries)) == sorted(table.items())
    mmr = MMR(hash_name)
    for entry in entries:
        mmr.append(entry)
    get = _getter(table)
    n = len(entries)
    sizes = range(n + 1) if data is None else [data.draw(st.integers(0, n)) for _ in range(5)]
    for size in sizes:
        assert mmr_root(hash_name, get, size) == mmr.root_at(size)
        assert mmr_consistency_proof(hash_name, get, size, n) == mmr.consistency_proof(size)
        indexes = range(size) if data is None else {size // 2, size - 1} & set(range(size))
        for index in indexes:
            assert mmr_inclusion_proof(hash_name, get, index, size) == mmr.inclusion_proof(
                index, size
            )


@pytest.mark.parametrize("index", [0, 1, 3, 6, 7, 14, 15])
@pytest.mark.parametrize("change", ["short", "long", "empty"])
def test_a_row_of_the_wrong_length_is_corruption_naming_it(index: int, change: str) -> None:
    """A row whose length is not 32 x (1 + trailing ones of its leaf index) makes the
    reads through it (a root, a proof) raise ``CorruptionError`` naming the row's leaf and
    seq and the length expected, and so does ``mmr_row``."""
    entries = [b"e%d" % i for i in range(16)]
    table = _incremental_table("blake3", entries)
    row = table[mmr_key(index)]
    table[mmr_key(index)] = {"short": row[:-1], "long": row + b"\0" * 32, "empty": b""}[change]
    nodes = 1 + _trailing_ones(index)
    message = f"leaf {index} \\(seq {index + 1}\\) is .* not {32 * nodes} \\({nodes} nodes\\)"
    get = _getter(table)
    # the root of index + 1 leaves ends with row index's highest node; the proof of the
    # neighbouring leaf needs row index's leaf as its first sibling
    with pytest.raises(CorruptionError, match=message) as info:
        mmr_root("blake3", get, index + 1)
    assert info.value.table == "mmr"
    with pytest.raises(CorruptionError, match=message):
        mmr_inclusion_proof("blake3", get, index ^ 1, 16)
    with pytest.raises(CorruptionError, match=message):
        mmr_row(index, table[mmr_key(index)])


def test_a_missing_row_is_corruption() -> None:
    """A root over a journal whose row is missing raises ``CorruptionError`` (the node
    reader finds no row to slice), and so does the append that needs it."""
    entries = [b"e%d" % i for i in range(8)]
    table = _incremental_table("blake3", entries)
    del table[mmr_key(3)]
    with pytest.raises(CorruptionError, match="MMR node 6 is missing"):
        mmr_root("blake3", _getter(table), 4)  # one peak: node 6, the top of row 3
    with pytest.raises(CorruptionError, match=r"leaf 3 .* missing"):
        mmr_mutations("blake3", lambda name, key: table.get(key), 7, b"e7")


def test_a_store_keeps_one_mmr_row_per_entry(tmp_path: Path) -> None:
    """A store's ``mmr`` table holds one row per journal entry, each starting with its
    entry's leaf hash, and equals the bulk build over its journal; its MMR root is the
    in-memory MMR's over the journal's entries."""
    with cg.open(tmp_path / "s", "agent", clock=cg.ManualClock(1_700_000_000_000)) as cx:
        with cx.batch() as batch:
            for i in range(37):
                batch.write(cg.Fact(text=f"fact number {i}"))
        cx.write(cg.Fact(text="one more"))
        assert cx.stats().tables["mmr"] == cx.seq == 38
        rows = _store_rows(cx)
        entries = [entry for _, entry in cx.journal_bytes()]
        assert rows == list(build_mmr_rows(cx.hash_name, entries))
        mmr = MMR(cx.hash_name)
        for entry in entries:
            mmr.append(entry)
        assert cx.roots().mmr_root == mmr.root()


def test_a_store_with_a_row_per_mmr_node_is_rebuilt_on_open(tmp_path: Path) -> None:
    """A store of the previous release's layout (an ``mmr`` row per node, keyed by
    postorder position, and no layout record) is refused read-only and rebuilt by its
    first writable open: then it has one row per entry, the same MMR root and
    OverallRoot, and verifies."""
    root = tmp_path / "s"
    with cg.open(root, "agent", clock=cg.ManualClock(1_700_000_000_000)) as cx:
        with cx.batch() as batch:
            for i in range(11):
                batch.write(cg.Fact(text=f"fact number {i}"))
        manifest = cx.roots()
        rows = _store_rows(cx)
        nodes = b"".join(row for _, row in rows)  # the rows' nodes, in position order
        assert len(nodes) == 32 * mmr_node_count(11)
        old = [(pos.to_bytes(8, "big"), nodes[32 * pos : 32 * pos + 32]) for pos in range(19)]

        def old_layout(txn: WriteTxn) -> None:
            txn.drop("mmr")
            txn.put_sorted("mmr", old)
            txn.delete("meta", LAYOUT_KEY)

        cx._env.write_small(old_layout)
    with pytest.raises(cg.ReadOnlyError, match="layout 1"):
        cg.open(root, "agent", readonly=True)
    with cg.open(root, "agent") as cx:
        assert cx.roots().same_roots(manifest)
        assert _store_rows(cx) == rows
    assert cg.verify(root, "agent").ok


@given(
    hash_name=HASHES,
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=6),
)
def test_a_writer_that_keeps_its_peaks_writes_the_same_rows_and_reads_none_it_wrote(
    hash_name: str, sizes: list[int]
) -> None:
    """``mmr_mutations`` with a writer's ``peaks`` (one dict per writer, writers one after
    another as batches are) writes the rows it writes without them, reads only rows that
    earlier writers wrote, and never holds more than the current peaks."""
    entries = [b"entry %d" % i for i in range(sum(sizes))]
    expected = _incremental_table(hash_name, entries)
    table: dict[bytes, bytes] = {}
    size = 0
    for count in sizes:
        start = size
        peaks: dict[int, bytes] = {}

        def get(name: str, key: bytes, start: int = start) -> bytes | None:
            assert int.from_bytes(key, "big") < start  # a row of an earlier writer
            return table.get(key)

        for _ in range(count):
            for _, key, value in mmr_mutations(hash_name, get, size, entries[size], peaks=peaks):
                assert isinstance(value, bytes)
                table[key] = value
            size += 1
            assert len(peaks) <= size.bit_count()  # the MMR of size leaves has that many
    assert table == expected
