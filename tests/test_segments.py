"""Keyword segments (``core.segments``, ``writing.KeywordSegments``): the block codec, the
incremental writer against the bulk build in any batching (K3, J4), liveness through
updates, head moves, archives, restores and tombstones (K1, K2), merges at 16, 256 and
4096, single writes that add one row each, reads against brute-force BM25, and a SIGKILL in
the middle of a merge."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.postings import KeywordChange, index_terms
from cortexgraph.core.segments import (
    BLOCK_BUDGET,
    SEGMENT,
    STATS,
    Postings,
    block_term,
    build_postings,
    decode_block,
    decode_stats,
    docs_blocks,
    merge_level,
    segment_blocks,
    segment_of_key,
    segments_at,
)
from cortexgraph.core.signals import AttrsRow, attrs_key
from cortexgraph.errors import CorruptionError
from cortexgraph.store.env import Environment
from cortexgraph.writing import KeywordSegments
from test_recall import live_terms, reference_bm25

T0 = 1_700_000_000_000
VOCAB = ["deploy", "pipeline", "window", "lunch", "rust", "cache", "merge", "friday", "z" * 60]

_ids = st.binary(min_size=16, max_size=16)
_terms = st.dictionaries(st.sampled_from(VOCAB), st.integers(1, 2**32 - 1), max_size=6)
_docs = st.dictionaries(_ids, _terms, max_size=12)


# -- the block codec -------------------------------------------------------------------------


def _rows_of(postings: Postings) -> list[tuple[bytes, bytes, int]]:
    out = []
    at = 0
    for term, count in zip(postings.terms, postings.counts.tolist(), strict=True):
        for i in range(at, at + count):
            out.append((term, postings.ids[i].tobytes(), int(postings.tf[i])))
        at += count
    return out


@given(docs=_docs, level=st.integers(0, 4), k=st.integers(0, 5))
@example(docs={}, level=0, k=0)
@example(docs={bytes(16): {"a": 1}}, level=4, k=0)
def test_blocks_round_trip(docs: dict[bytes, dict[str, int]], level: int, k: int) -> None:
    """A segment's blocks decode to exactly its postings (terms ascending, ids ascending
    per term), each key names its segment and its block's last term, and a lookup of
    every term (and of terms absent) in the block its key range points to answers as the
    documents say."""
    first = k * 16**level + 1
    postings = Postings.from_docs(docs)
    rows = segment_blocks(level, first, postings)
    expected = sorted(
        (t.encode(), mid, tf) for mid, terms in docs.items() for t, tf in terms.items()
    )
    decoded: list[tuple[bytes, bytes, int]] = []
    for key, value in rows:
        assert segment_of_key(key) == (level, first)
        block = decode_block(value, key[10:])
        assert block.terms[-1] == key[10:]
        decoded.extend(_rows_of(block))
    assert decoded == expected
    assert [key for key, _ in rows] == sorted(key for key, _ in rows)
    assert Postings.from_docs(postings.docs()).docs() == postings.docs()
    assert {mid: terms for mid, terms in postings.docs().items()} == {
        mid: terms for mid, terms in docs.items() if terms
    }
    for term in [*VOCAB, "absent", "a"]:
        raw = term.encode()
        want = [(mid, tf) for t, mid, tf in expected if t == raw]
        key_of = [value for key, value in rows if key[10:] >= raw]
        hit = block_term(key_of[0], raw) if key_of else None
        got = [] if hit is None else [(r.tobytes(), tf) for r, tf in zip(*hit, strict=True)]
        assert got == want


def test_blocks_close_at_the_budget() -> None:
    """A segment whose postings exceed the byte budget is cut into several blocks, none
    past the budget unless a single term's postings are; each block holds whole terms."""
    docs = {
        i.to_bytes(16, "big"): {f"term{j:04d}": 1 for j in range(i % 50, 300)} for i in range(60)
    }
    rows = segment_blocks(1, 1, Postings.from_docs(docs))
    assert len(rows) > 2
    assert all(len(value) <= BLOCK_BUDGET for _, value in rows)
    terms = [t for _, value in rows for t in decode_block(value).terms]
    assert terms == sorted(set(terms))
    wide = {i.to_bytes(16, "big"): {"common": 1} for i in range(BLOCK_BUDGET // 20 + 10)}
    (only,) = segment_blocks(0, 1, Postings.from_docs(wide))
    assert len(only[1]) > BLOCK_BUDGET  # one term is never split


@given(docs=_docs.filter(bool).filter(lambda d: any(d.values())))
def test_every_truncation_and_header_bit_flip_is_corruption(
    docs: dict[bytes, dict[str, int]],
) -> None:
    """Every truncation of a block, and every single bit flipped in its 13-byte header,
    fails with CorruptionError (the value's length is a function of the header), both
    for a full decode and for a term lookup."""
    key, value = segment_blocks(0, 1, Postings.from_docs(docs))[0]
    term = decode_block(value).terms[0]
    for end in range(len(value)):
        with pytest.raises(CorruptionError):
            decode_block(value[:end])
        with pytest.raises(CorruptionError):
            block_term(value[:end], term)
    for bit in range(13 * 8):
        flipped = bytearray(value)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(CorruptionError):
            decode_block(bytes(flipped))
        with pytest.raises(CorruptionError):
            block_term(bytes(flipped), term)
    with pytest.raises(CorruptionError):
        decode_block(value, key[10:] + b"x")  # the key names another last term


def test_stats_and_keys_reject_malformed_values() -> None:
    """The statistics row and segment keys are checked: a wrong length, a segment key of
    an unknown level or a first seq off its level's grid is CorruptionError."""
    assert decode_stats(None) == (0, 0)
    with pytest.raises(CorruptionError):
        decode_stats(b"\0" * 15)
    for key in (b"g\x05" + (1).to_bytes(8, "big") + b"a", b"g\x01" + (2).to_bytes(8, "big") + b"a",
                b"g\x00" + (0).to_bytes(8, "big") + b"a", b"g\x00" + (1).to_bytes(8, "big")):
        with pytest.raises(CorruptionError):
            segment_of_key(key)


def test_segments_at_cover_the_journal_disjointly() -> None:
    """The segments of a store at any seq are disjoint aligned ranges covering [1, seq]
    (a level-0 one per entry), at most 15 per level below the top, and merges happen
    exactly at range ends."""
    for seq in [*range(0, 600), 4095, 4096, 4097, 65535, 65536, 65537, 1_000_000]:
        covered = 0
        per_level = [0, 0, 0, 0, 0]
        for level, first in segments_at(seq):
            assert first == covered + 1 and (first - 1) % 16**level == 0
            covered = first + 16**level - 1
            per_level[level] += 1
        assert covered == seq
        assert max(per_level[:4]) <= 15
    merges = [merge_level(s) for s in (15, 16, 240, 255, 256, 4096, 65536, 65536 * 16)]
    assert merges == [0, 1, 1, 0, 2, 3, 4, 4]


# -- incremental against bulk ------------------------------------------------------------------


class _Model:
    """Index seqs and lengths per memory: what the attributes rows hold."""

    def __init__(self) -> None:
        self.seq: dict[bytes, int] = {}
        self.length: dict[bytes, int] = {}


def _events(rng: random.Random, entries: int, memories: int) -> list[list[tuple[bytes, Any]]]:
    """Per entry, the memories it (re)indexes (terms) or stops indexing (None); many
    entries change nothing (edges), a few change several memories (a restoring read)."""
    out: list[list[tuple[bytes, Any]]] = []
    for _ in range(entries):
        roll = rng.random()
        count = 0 if roll < 0.25 else (rng.randint(2, 3) if roll > 0.95 else 1)
        ids = rng.sample(range(memories), count)
        changes = []
        for i in ids:
            terms = None
            if rng.random() < 0.75:
                terms = {w: rng.randint(1, 3) for w in rng.sample(VOCAB, rng.randint(0, 4))}
            changes.append((i.to_bytes(16, "big"), terms))
        out.append(changes)
    return out


def _row(index_seq: int, length: int) -> bytes:
    return AttrsRow("fact", "active" if index_seq else "archived", False, 5, 1.0, 0, 0, 0,
                    "default", (), index_seq, length).encode()


def _apply_incrementally(
    root: Path, events: list[list[tuple[bytes, Any]]], sizes: Iterator[int]
) -> tuple[list[tuple[bytes, bytes]], list[tuple[int, bytes, Any]]]:
    """Feed the events to KeywordSegments in batches of the given sizes (one write
    transaction and one writer each, as a Batch does), keeping the attributes rows' index
    seqs as apply would; returns the postings rows and the changes in seq order."""
    env = Environment(root, "a", create=True, readonly=False, map_size=1 << 28, sync=False,
                      hash_name="blake3")
    model = _Model()
    history: list[tuple[int, bytes, Any]] = []
    seq = 0
    try:
        while seq < len(events):
            txn = env.begin_write(replay=True)
            writer = KeywordSegments()
            for _ in range(max(1, next(sizes))):
                if seq == len(events):
                    break
                seq += 1
                changes = []
                for memory_id, terms in events[seq - 1]:
                    before = model.seq.get(memory_id, 0)
                    before_length = model.length.get(memory_id, 0)
                    if terms is None and not before:
                        continue
                    length = 0 if terms is None else sum(terms.values())
                    changes.append(KeywordChange(memory_id, before, before_length, terms, length))
                    model.seq[memory_id] = 0 if terms is None else seq
                    model.length[memory_id] = length
                    txn.put("salience", attrs_key(memory_id), _row(model.seq[memory_id], length))
                    history.append((seq, memory_id, terms))
                writer.advance(txn, seq, changes)
            writer.flush(txn)
            txn.commit()
        with env.read() as txn:
            rows = [(bytes(k), bytes(v)) for k, v in txn.iter_items("postings", b"")]
    finally:
        env.close()
    return rows, history


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    entries=st.integers(1, 560),
    sizes=st.lists(st.integers(1, 300), min_size=1, max_size=8),
)
def test_incremental_in_any_batching_equals_the_bulk_build(
    tmp_path_factory: Any, seed: int, entries: int, sizes: list[int]
) -> None:
    """Random index / de-index events, applied incrementally in batches of random sizes
    (crossing the level-2 merges at 256 and 512), leave exactly the rows the bulk build
    computes from the same changes: segment boundaries and contents depend on seq alone."""
    events = _events(random.Random(seed), entries, 40)
    rows, history = _apply_incrementally(
        tmp_path_factory.mktemp("inc"), events, iter(sizes * (entries // min(sizes) + 1))
    )
    assert rows == build_postings(history, entries)
    one, _ = _apply_incrementally(tmp_path_factory.mktemp("one"), events, iter([1] * entries))
    assert one == rows


def test_level_two_merge_at_4096_equals_the_bulk_build(tmp_path: Path) -> None:
    """Across the merge at 4096 (every level-2, level-1 and level-0 segment of the range
    into one level-3 segment) and on to 4,400 entries, batches of 1, 100 and 997 and the
    bulk build give the same rows; the rows hold one level-3 segment and no lower one of
    the first 4096 seqs."""
    events = _events(random.Random(7), 4400, 600)
    results = []
    for size in (1, 100, 997):
        rows, history = _apply_incrementally(tmp_path / str(size), events, iter([size] * 5000))
        results.append(rows)
    assert results[0] == results[1] == results[2] == build_postings(history, 4400)
    levels = {segment_of_key(key) for key, _ in results[0] if key[:1] == SEGMENT}
    assert (3, 1) in levels and not any(lv < 3 and first <= 4096 for lv, first in levels)


# -- through the store -------------------------------------------------------------------------


def _postings_rows(cx: cg.Cortex) -> list[tuple[bytes, bytes]]:
    with cx._env.read() as txn:
        return [(bytes(k), bytes(v)) for k, v in txn.iter_items("postings", b"")]


def _segment_of(cx: cg.Cortex, uri: cg.MemoryURI) -> set[tuple[int, int]]:
    """The segments holding a live posting of the memory."""
    with cx._env.read() as txn:
        row = AttrsRow.decode(txn.get("salience", attrs_key(uri.id)))
        found = set()
        for key, value in txn.iter_items("postings", SEGMENT):
            level, first = segment_of_key(bytes(key))
            block = decode_block(bytes(value))
            holds = uri.id in {r.tobytes() for r in block.ids}
            if holds and first <= row.index_seq < first + 16**level:
                found.add((level, first))
        return found


def _stats(cx: cg.Cortex) -> tuple[int, int]:
    with cx._env.read() as txn:
        return decode_stats(txn.get("postings", STATS))


def test_liveness_follows_updates_heads_archives_restores_and_tombstones(cx: cg.Cortex) -> None:
    """A memory's live postings are always its head version's terms, in the segment of
    its latest indexing, and N and S count it exactly while it is active (K1, K2): after
    an update, a head move back, an archive, a late-binding read that restores it, and a
    tombstone."""
    other = cx.write(cg.Fact(text="lunch window friday"), at=T0)
    a = cx.write(cg.Fact(text="deploy pipeline"), at=T0)
    base = _stats(cx)
    assert base == (2, 5)

    def check(memory: cg.MemoryURI, active: bool) -> None:
        with cx._env.read() as txn:
            live = live_terms(txn)
        record = cx.resolve(memory.id.hex())
        assert live.get(memory.id) == (index_terms(record.memory) if active else None)
        hits = [hit.uri.id for hit in cx.recall("deploy", mode="keyword")]
        assert hits == ([memory.id] if active else [])

    check(a, True)
    cx.update(a, text="deploy deploy rust", at=T0 + 1)
    check(a, True)
    assert _stats(cx) == (2, 6)
    cx.update_head(a.id, version=1, at=T0 + 2)
    check(a, True)
    assert _stats(cx) == (2, 5)
    cx.archive(a, at=T0 + 3)
    check(a, False)
    assert _stats(cx) == (1, 3)
    cx._record_access([a.head], at=T0 + 4)  # a late-binding read restores it
    check(a, True)
    assert _stats(cx) == (2, 5)
    assert _segment_of(cx, a) == {(0, cx.seq)}  # the entry that restored it
    cx.tombstone(a, at=T0 + 5)
    check(a, False)
    assert _stats(cx) == (1, 3)
    assert [hit.uri.id for hit in cx.recall("friday", mode="keyword")] == [other.id]
    digest = cx.table_digests()["postings"]
    cx.rebuild()
    assert cx.table_digests()["postings"] == digest


def test_merges_keep_recall_equal_to_brute_force(tmp_path: Path) -> None:
    """Over 600 entries (level-2 merges at 256 and 512) with updates, archives, restores
    and tombstones, written in batches of varying sizes, keyword recall equals a
    brute-force BM25 and every memory's live postings are its head version's terms iff it
    is active; a rebuild gives the same postings rows."""
    rng = random.Random(3)
    words = ["deploy", "pipeline", "window", "lunch", "rust", "cache", "merge", "friday",
             "review", "token", "backup", "python"]
    with cg.open(tmp_path, "agent", sync=False) as cx:
        uris: list[cg.MemoryURI] = []
        while cx.seq < 600:
            with cx.batch() as b:
                for _ in range(rng.randint(1, 40)):
                    roll = rng.random()
                    text = " ".join(rng.choices(words, k=rng.randint(1, 6)))
                    if roll < 0.5 or not uris:
                        uris.append(b.write(cg.Fact(text=text), at=T0))
                        continue
                    target = rng.choice(uris)
                    status = b.resolve(target.id.hex()).status
                    if status == "active" and roll < 0.75:
                        b.update(target, text=text, at=T0)
                    elif status == "active" and roll < 0.85:
                        b.archive(target, at=T0)
                    elif status == "archived" and roll < 0.95:
                        b.record_access([target.head], at=T0)
                    elif status == "active":
                        b.tombstone(target, at=T0)
        for query in ("deploy", "rust cache", "friday review token", "lunch merge"):
            expected = reference_bm25(cx, query)[:10]
            got = cx.recall(query, k=10, mode="keyword", now=T0)
            assert [h.uri.id for h in got] == [mid for mid, _ in expected]
            for hit, (_, score) in zip(got, expected, strict=True):
                assert hit.scores["keyword"] == pytest.approx(score, rel=1e-12)
        with cx._env.read() as txn:
            live = live_terms(txn)
        for uri in uris:
            record = cx.resolve(uri.id.hex())
            assert live.get(uri.id) == (index_terms(record.memory) if record.status == "active"
                                        else None)
        rows = _postings_rows(cx)
        assert any(key[:2] == b"g\x02" for key, _ in rows)
        cx.rebuild()
        assert _postings_rows(cx) == rows


def test_autolink_inside_a_batch_sees_the_batchs_own_postings(tmp_path: Path) -> None:
    """A batch keeps its entries' level-0 segments in memory; a read of the postings
    inside the batch (auto-linking) still sees the memories the batch wrote before."""
    with cg.open(tmp_path, "agent", sync=False, autolink=True) as cx:
        with cx.batch() as b:
            a = b.write(cg.Fact(text="deploy pipeline friday window rust cache"), at=T0)
            c = b.write(cg.Fact(text="deploy pipeline friday lunch token backup"), at=T0)
        (edge,) = cx.traverse(c, depth=1).levels[0]
        assert edge.uri == a.head


# -- a kill in the middle of a merge -----------------------------------------------------------

_MERGE_WRITER = textwrap.dedent(
    """
    import sys
    import cortexgraph as cg
    import cortexgraph.writing as writing

    root, mode = sys.argv[1], sys.argv[2]
    real = writing._replace

    def paused(txn, old, rows):
        if mode == "pause" and any(key[1] >= 1 for key in old):  # a merge of segments
            real(txn, old[: len(old) // 2], [])  # half the children deleted, nothing put
            print("merging", flush=True)
            sys.stdin.readline()  # killed here
        real(txn, old, rows)

    writing._replace = paused
    with cg.open(root, "agent", sync=True) as cx:
        while cx.seq < 250:
            with cx.batch() as b:
                for i in range(cx.seq, min(cx.seq + 50, 250)):
                    b.write(cg.Fact(text=f"deploy pipeline number{i} friday"), at={T0} + i)
        print("committed", cx.seq, flush=True)
        with cx.batch() as b:
            for i in range(250, 270):
                b.write(cg.Fact(text=f"deploy window number{i}"), at={T0} + i)
        print("done", cx.seq, flush=True)
    """
).replace("{T0}", str(T0))


def test_sigkill_during_a_segment_merge_leaves_a_store_that_opens_and_verifies(
    tmp_path: Path,
) -> None:
    """A writer killed (SIGKILL) in the middle of the merge at seq 256, with half the
    children deleted in its transaction, leaves the store as its last commit: it opens,
    verifies, recalls, and a writer run again completes the batch into the same state a
    run never killed reaches."""
    script = tmp_path / "writer.py"
    script.write_text(_MERGE_WRITER)
    store = tmp_path / "killed"
    # the writer patches a function of a compiled module: it runs the sources
    env = dict(os.environ, CORTEXGRAPH_PURE_PYTHON="1")
    with subprocess.Popen([sys.executable, str(script), str(store), "pause"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                          env=env) as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip(), proc.stdout.readline().strip()]
        proc.kill()  # SIGKILL, paused inside the merge
        proc.wait()
    assert lines == ["committed 250", "merging"] and proc.returncode == -signal.SIGKILL
    report = cg.verify(store, "agent")
    assert report.ok, report.actors[0].problems
    with cg.open(store, "agent", sync=False) as cx:
        assert cx.seq == 250
        assert len(cx.recall("deploy", k=300, mode="keyword")) == 250
    again = subprocess.run([sys.executable, str(script), str(store), "run"],
                           capture_output=True, text=True, check=True)
    assert again.stdout.split()[-2:] == ["done", "270"]
    clean = tmp_path / "clean"
    subprocess.run([sys.executable, str(script), str(clean), "run"], check=True,
                   capture_output=True)
    assert cg.verify(store, "agent").ok
    with cg.open(store, "agent") as cx, cg.open(clean, "agent") as fresh:
        assert cx.table_digests() == fresh.table_digests()
        assert np.array_equal(
            [h.uri.id for h in cx.recall("deploy window", k=50, mode="keyword")],
            [h.uri.id for h in fresh.recall("deploy window", k=50, mode="keyword")],
        )


@given(docs=_docs, level=st.integers(0, 4))
@example(docs={bytes(16): {}}, level=0)
@example(docs={b"\x01" * 16: {"z" * 60: 3, "a": 1, "\u00e9": 2, "e\u0301": 5}}, level=0)
@example(docs={bytes(16): {f"t{i:05d}{'x' * 200}": 1 for i in range(400)}}, level=0)
def test_the_plain_encoder_of_small_segments_gives_the_same_bytes(
    docs: dict[bytes, dict[str, int]], level: int
) -> None:
    """The plain-Python encoders the writer uses for level-0 and level-1 segments (one
    for a single memory's, one for several) give exactly the bytes of the array encoder
    the merges and the bulk build use, also past the block budget."""
    assert docs_blocks(level, 1, docs) == segment_blocks(level, 1, Postings.from_docs(docs))


def _segment_keys(rows: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    return {key: value for key, value in rows if key[:1] == SEGMENT}


def test_a_single_write_adds_its_own_segment_and_rewrites_no_other_row(tmp_path: Path) -> None:
    """A single write that indexes a memory adds one level-0 row, keyed by its seq and
    holding that memory's terms, and leaves every other segment row as it was; the write
    that ends a 16-entry range replaces the range's level-0 rows with one level-1
    segment of their live memories. A rebuild computes the same rows."""
    rng = random.Random(5)
    words = ["deploy", "pipeline", "window", "lunch", "rust", "cache", "merge", "friday"]
    with cg.open(tmp_path, "agent", sync=False) as cx:
        before = _segment_keys(_postings_rows(cx))
        uris: list[cg.MemoryURI] = []
        for i in range(40):
            text = " ".join(rng.sample(words, 3))
            if uris and i % 5 == 4:
                uris.append(cx.update(uris.pop(0), text=text, at=T0 + i))
            else:
                uris.append(cx.write(cg.Fact(text=text), at=T0 + i))
            after = _segment_keys(_postings_rows(cx))
            seq = cx.seq
            if seq % 16:
                added = {key: after[key] for key in after.keys() - before.keys()}
                assert before.items() <= after.items()
                ((key, value),) = added.items()
                assert segment_of_key(key) == (0, seq)
                record = cx.resolve(uris[-1].id.hex())
                expected = {term.encode(): tf for term, tf in index_terms(record.memory).items()}
                block = decode_block(value)
                assert {r.tobytes() for r in block.ids} == {uris[-1].id}
                assert dict(zip(block.terms, block.tf.tolist(), strict=True)) == expected
            else:
                completed = {segment_of_key(key) for key in after.keys() - before.keys()}
                assert completed == {(1, seq - 15)}
                assert not any(segment_of_key(key)[0] == 0 for key in after)
            before = after
        rows = _postings_rows(cx)
        cx.rebuild()
        assert _postings_rows(cx) == rows


def test_a_writer_that_joins_a_range_midway_completes_it_from_the_table(tmp_path: Path) -> None:
    """A handle whose first write falls inside a 16-entry range another handle began
    reads that range's level-0 segments from the table when the range ends, keeping only
    the postings still live there: a memory indexed again or tombstoned since is left
    out of the level-1 segment. The rows equal a rebuild's, and recall finds exactly the
    live memories."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        first = [cx.write(cg.Fact(text=f"deploy alpha{i}"), at=T0 + i) for i in range(5)]
    with cg.open(tmp_path, "agent", sync=False) as cx:
        assert cx._handle.keywords is None  # nothing to resume: a fresh writer
        updated = cx.update(first[1], text="window rust", at=T0 + 10)
        cx.tombstone(first[2], at=T0 + 11)
        while cx.seq < 16:
            cx.write(cg.Fact(text=f"lunch beta{cx.seq}"), at=T0 + 12 + cx.seq)
        rows = _postings_rows(cx)
        ((key, value),) = _segment_keys(rows).items()
        assert segment_of_key(key) == (1, 1)
        held = decode_block(value).docs()
        assert first[1].id not in held or "alpha1" not in held[first[1].id]
        assert first[2].id not in held
        assert held[updated.id] == {"window": 1, "rust": 1}
        assert {first[i].id for i in (0, 3, 4)} <= held.keys()
        deploy = {hit.uri.id for hit in cx.recall("deploy", k=20, mode="keyword")}
        assert deploy == {first[i].id for i in (0, 3, 4)}
        cx.rebuild()
        assert _postings_rows(cx) == rows


# ids sharing their first 8 bytes, or all but those bytes' last bits (which a sort key
# holding the term index in its top bits leaves out)
_tied_ids = st.builds(
    lambda high, low: high + low,
    st.sampled_from(
        [bytes(8), b"\x01" * 8, b"\xff" * 8, b"\x01" * 7 + b"\x00", b"\x01" * 7 + b"\x03"]
    ),
    st.binary(min_size=8, max_size=8),
)


@given(
    parts=st.lists(
        st.tuples(st.dictionaries(_ids | _tied_ids, _terms, max_size=8), st.randoms()),
        max_size=4,
    )
)
@example(
    parts=[({bytes(8) + b"\x02" * 8: {"a": 1}, bytes(8) + b"\x01" * 8: {"a": 2}}, random.Random(0))]
)
def test_a_merge_orders_postings_as_a_sort_by_term_then_whole_id(
    parts: list[tuple[dict[bytes, dict[str, int]], random.Random]]
) -> None:
    """Postings.merge of parts (each with a random mask of live postings, no memory in two
    parts) gives each term's ids in ascending byte order, as a sort by (term, id) does,
    also when distinct ids share their first 8 bytes (the faster sort then defers to the
    three-key one); the result equals the postings of the live docs built directly."""
    seen: set[bytes] = set()
    masked: list[tuple[Postings, Any]] = []
    live: dict[bytes, dict[str, int]] = {}
    for docs, rng in parts:
        docs = {key: terms for key, terms in docs.items() if key not in seen and terms}
        seen.update(docs)
        postings = Postings.from_docs(docs)
        keep = {key for key in docs if rng.random() < 0.7}
        masked.append((postings, np.array([row.tobytes() in keep for row in postings.ids],
                                          dtype=np.bool_)))
        live.update((key, docs[key]) for key in keep)
    merged = Postings.merge(masked)
    expected = sorted((term.encode(), key, tf) for key, terms in live.items()
                      for term, tf in terms.items())
    assert _rows_of(merged) == expected
    assert segment_blocks(0, 1, merged) == docs_blocks(0, 1, live)


def test_a_batch_that_flushes_midway_writes_each_entrys_segment_once(tmp_path: Path) -> None:
    """A batch whose postings are written midway (a read inside the batch) and again at
    its commit writes each entry's level-0 segment once, under its own seq: the rows are
    the rebuild's."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        cx.write(cg.Fact(text="deploy window"), at=T0)
        with cx.batch() as batch:
            batch.write(cg.Fact(text="deploy yak"), at=T0 + 1)
            batch.keyword_txn()  # writes the level-0 segment of seq 2
            batch.write(cg.Fact(text="deploy zebra"), at=T0 + 2)
        rows = _postings_rows(cx)
        assert [segment_of_key(key) for key in _segment_keys(rows)] == [(0, 1), (0, 2), (0, 3)]
        cx.rebuild()
        assert _postings_rows(cx) == rows


def test_index_seqs_read_one_row_per_memory_and_name_a_missing_one(tmp_path: Path) -> None:
    """A merge's liveness read gives every posting its memory's index seq (ids repeated
    across terms read once, also ids that share their first 8 bytes, which the sort
    orders by), and a memory without an attributes row is a CorruptionError naming it, not
    a wrong liveness."""
    from cortexgraph.writing import _index_seqs

    env = Environment(tmp_path, "a", create=True, readonly=False, map_size=1 << 24, sync=False,
                      hash_name="blake3")
    try:
        known = {bytes([i]) * 16: 100 + i for i in range(1, 6)}
        known |= {bytes([7]) * 8 + bytes([i]) * 8: 200 + i for i in range(1, 4)}
        txn = env.begin_write(replay=True)
        for memory_id, seq in known.items():
            txn.put("salience", attrs_key(memory_id), _row(seq, 3))
        order = [3, 1, 5, 3, 2, 1, 4, 5]
        ids = np.frombuffer(b"".join(bytes([i]) * 16 for i in order), np.uint8).reshape(-1, 16)
        assert _index_seqs(txn, ids).tolist() == [100 + i for i in order]
        rng = random.Random(3)
        mixed = [rng.choice(list(known)) for _ in range(200)]
        ids = np.frombuffer(b"".join(mixed), np.uint8).reshape(-1, 16)
        assert _index_seqs(txn, ids).tolist() == [known[memory_id] for memory_id in mixed]
        missing = bytes([9]) * 16
        with_missing = np.concatenate([ids, np.frombuffer(missing, np.uint8).reshape(1, 16)])
        with pytest.raises(CorruptionError, match=missing.hex()):
            _index_seqs(txn, with_missing)
        txn.abort()
    finally:
        env.close()


def test_a_batch_resumes_the_segments_of_its_handles_last_batch_only(tmp_path: Path) -> None:
    """A handle's next batch takes over the keyword segments its last batch left in memory
    (the completed segments the next merges need are not read back), but not after another
    process committed in between, nor after a batch that failed or a rebuild; in every case
    the tables equal the ones a bulk rebuild computes from the journal."""
    rng = random.Random(11)
    words = [f"w{i}" for i in range(300)]
    with cg.open(tmp_path, "agent", sync=False) as cx:
        h = cx._handle
        uris: list[cg.MemoryURI] = []
        at = T0
        resumed = 0
        for size in [1, 40, 300, 7, 256, 600, 1, 1, 90, 1000, 1500, 900]:  # merges up to 4096
            carried = h.keywords
            with cx.batch() as batch:
                if carried is not None:  # this handle's last batch committed: taken over
                    assert batch._writer.keywords is carried[1]
                    resumed += 1
                for _ in range(size):
                    at += 1
                    text = " ".join(rng.choice(words) for _ in range(4))
                    if uris and rng.random() < 0.35:  # re-index or drop an earlier memory
                        uri = uris.pop(rng.randrange(len(uris)))
                        if rng.random() < 0.7:
                            uris.append(batch.update(uri, text=text, at=at))
                        else:
                            batch.tombstone(uri, reason="gone", at=at)
                    else:
                        uris.append(batch.write(cg.Fact(text=text), at=at))
            assert h.keywords is not None and h.keywords[0] == cx.seq
        assert resumed == 11

        # another process commits a batch: the state this handle holds is not resumed
        script = textwrap.dedent(
            f"""
            import cortexgraph as cg
            with cg.open({str(tmp_path)!r}, "agent", sync=False) as cx:
                cx.write(cg.Fact(text="w1 w2 from elsewhere"), at={at + 1})
            """
        )
        subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ))
        carried = h.keywords
        assert carried is not None and carried[0] == cx.seq - 1
        with cx.batch() as batch:
            assert batch._writer.keywords is not carried[1]
            batch.write(cg.Fact(text="w1 w3"), at=at + 2)

        # a batch that fails leaves nothing to resume
        with pytest.raises(RuntimeError), cx.batch() as batch:
            batch.write(cg.Fact(text="w4 w5"), at=at + 3)
            raise RuntimeError("abandoned")
        assert h.keywords is None
        cx.write(cg.Fact(text="w4 w6"), at=at + 4)

        rows, digests = _postings_rows(cx), cx.table_digests()
        levels = {segment_of_key(key)[0] for key, _ in rows if key[:1] == SEGMENT}
        assert levels == {0, 1, 2, 3}
        assert h.keywords is not None
        cx.rebuild()  # a repair drops what a batch held
        assert h.keywords is None
        assert _postings_rows(cx) == rows and cx.table_digests() == digests
