"""A whole-journal replay builds the keyword segments in bulk, a top range at a time.

``writing.GatheredKeywords`` builds the rows of each completed top-level range as soon as
the replay passes its end and drops that range's changes, so a replay never holds the
whole journal's terms. The top level spans 65,536 entries, too many for a quick test, so
these tests lower ``MAX_LEVEL`` (in ``core.segments``, which writes use, and in
``writing``, which the gathering uses) to 2: a top range is then 256 entries, and a
journal of about 900 entries crosses three of them.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cortexgraph as cg
import cortexgraph.core.segments as segments
import cortexgraph.writing as writing
from cortexgraph.core.postings import KeywordChange

_WORDS = [
    "deploy",
    "cluster",
    "blue",
    "green",
    "queue",
    "worker",
    "cache",
    "token",
    "retry",
    "limit",
    "alert",
]
_OPS = ("write", "update", "head", "tombstone", "archive", "access", "edge", "unedge", "attest")


def operations(min_size: int, max_size: int) -> st.SearchStrategy[list[tuple[str, int, int]]]:
    """Lists of ``(op, x, y)`` for :func:`_apply`."""
    return st.lists(
        st.tuples(st.sampled_from(_OPS), st.integers(0, 10**6), st.integers(0, 10**6)),
        min_size=min_size,
        max_size=max_size,
    )


@pytest.fixture
def low_top_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segments, "MAX_LEVEL", 2)
    monkeypatch.setattr(writing, "MAX_LEVEL", 2)


def _history(cx: cg.Cortex, seed: int) -> None:
    """About 900 entries of the operations ``_apply`` makes (writes first of all), drawn
    from a seeded generator, in batches of random sizes."""
    rng = random.Random(seed)
    weighted = ("write",) * 11 + _OPS[1:]
    uris: list[cg.MemoryURI] = []
    at = 1_700_000_000_000
    while cx.seq < 900:
        with cx.batch() as b:
            for _ in range(rng.randint(1, 60)):
                at += 1
                op = rng.choice(weighted)
                _apply(b, uris, op, rng.randrange(10**6), rng.randrange(10**6), at)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.pure_python
@pytest.mark.usefixtures("low_top_level")
def test_a_rebuild_equals_the_written_tables_across_top_ranges(tmp_path: Path, seed: int) -> None:
    """With top ranges of 256 entries, a journal of about 900 entries rebuilt in bulk
    (each completed top range built and dropped as the replay passes it) gives the tables
    the writes left, byte for byte, and keyword recall answers the same."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        _history(cx, seed)
        written = cx.table_digests()
        before = [h.uri for h in cx.recall("deploy green", mode="keyword", k=20).hits]
        assert cx.seq >= 900
        cx.rebuild()
        assert cx.table_digests() == written
        assert [h.uri for h in cx.recall("deploy green", mode="keyword", k=20).hits] == before
    assert cg.verify(tmp_path, "agent").ok


@pytest.mark.pure_python
@pytest.mark.usefixtures("low_top_level")
def test_gathering_drops_each_completed_top_range() -> None:
    """The gathering keeps only the changes of the top range in progress, and its
    statistics count every memory indexed."""
    gathered = writing.GatheredKeywords()
    for seq in range(1, 301):
        gathered.add(seq, [KeywordChange(seq.to_bytes(16, "big"), 0, 0, {"note": 1}, 1)])
        assert len(gathered.changes) == (seq - 1) % 256 + 1 if seq % 256 else not gathered.changes
    rows = gathered.finish(300)
    assert rows[-1][0] == segments.STATS
    assert segments.decode_stats(rows[-1][1]) == (300, 300)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=operations(5, 120),
    cuts=st.lists(st.integers(1, 30), min_size=1, max_size=20),
    compact_at=st.integers(0, 120),
)
def test_a_bulk_rebuild_equals_any_incremental_history(
    ops: list[tuple[str, int, int]], cuts: list[int], compact_at: int
) -> None:
    """Random writes, updates, head moves, tombstones, archives, accesses (which restore
    archived memories), edges added and removed, attests and a compact, applied in batches
    of random sizes: a bulk rebuild gives byte-identical tables and the same OverallRoot,
    and the store verifies (J4)."""
    with tempfile.TemporaryDirectory() as tmp:
        with cg.open(tmp, "agent", sync=False) as cx:
            uris: list[cg.MemoryURI] = []
            at = 1_700_000_000_000
            position = 0
            for batch_number, size in enumerate(cuts * 10):
                if position >= len(ops):
                    break
                if batch_number == 1 or position >= compact_at > 0:
                    cx.compact(now=at + 400 * 86_400_000)
                    compact_at = 0
                with cx.batch() as b:
                    for op, x, y in ops[position : position + size]:
                        at += 1_000
                        _apply(b, uris, op, x, y, at)
                position += size
            digests, root = cx.table_digests(), cx.overall_root()
            cx.rebuild()
            assert cx.table_digests() == digests
            assert cx.overall_root() == root
        assert cg.verify(tmp, "agent").ok


def _apply(b: cg.Batch, uris: list[cg.MemoryURI], op: str, x: int, y: int, at: int) -> None:
    text = " ".join(_WORDS[(x + i * y) % len(_WORDS)] for i in range(2 + x % 5))
    if op == "write" or not uris:
        uris.append(b.write(cg.Fact(text=text, tags=[_WORDS[y % len(_WORDS)]]), at=at))
        return
    uri, other = uris[x % len(uris)], uris[y % len(uris)]
    record = b.resolve(uri.head)
    if record.status == "tombstoned":
        return
    try:
        if op == "update" and record.status == "active":
            b.update(uri, text=text, at=at)
        elif op == "head" and record.latest > 1 and record.status == "active":
            b.update_head(uri, version=1 + y % record.latest, at=at)
        elif op == "tombstone":
            b.tombstone(uri, at=at)
        elif op == "archive" and record.status == "active":
            b.archive(uri, at=at)
        elif op == "access":
            b.record_access([uri.head], at=at)
        elif op == "edge" and other != uri:
            b.add_edge(uri, other, "relates_to", strength=(y % 100) / 100, at=at)
        elif op == "unedge" and other != uri:
            b.remove_edge(uri, other, "relates_to", at=at)
        elif op == "attest":
            b.attest([uri], outcome="success" if y % 2 else "failure", at=at)
    except (cg.NotFoundError, cg.TombstonedError, cg.ValidationError):
        pass  # a refused op (an edge that is not there, a tombstoned end) changes nothing
