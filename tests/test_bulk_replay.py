"""A whole-journal replay builds the keyword segments in bulk, a top range at a time.

``writing.GatheredKeywords`` builds the rows of each completed top-level range as soon as
the replay passes its end and drops that range's changes, so a replay never holds the
whole journal's terms. The top level spans 65,536 entries, too many for a quick test, so
these tests lower ``MAX_LEVEL`` (in ``core.segments``, which writes use, and in
``writing``, which the gathering uses) to 1: a top range is then 256 entries, and a
journal of about 900 entries crosses three of them.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import cortexgraph as cg
import cortexgraph.core.segments as segments
import cortexgraph.writing as writing
from cortexgraph.core.postings import KeywordChange


@pytest.fixture
def low_top_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segments, "MAX_LEVEL", 1)
    monkeypatch.setattr(writing, "MAX_LEVEL", 1)


def _history(cx: cg.Cortex, seed: int) -> None:
    """Writes, updates, head moves, archives, restores and tombstones in random batches."""
    rng = random.Random(seed)
    words = [
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
    uris: list[cg.MemoryURI] = []
    at = 1_700_000_000_000
    while cx.seq < 900:
        with cx.batch() as b:
            for _ in range(rng.randint(1, 60)):
                at += 1
                roll = rng.random()
                text = " ".join(rng.sample(words, rng.randint(2, 6)))
                if roll < 0.55 or len(uris) < 5:
                    uris.append(b.write(cg.Fact(text=text), at=at))
                    continue
                uri = rng.choice(uris)
                record = b.resolve(uri.head)
                if record.status == "tombstoned":
                    continue
                if roll < 0.75 and record.status == "active":
                    b.update(uri, text=text, at=at)
                elif roll < 0.8 and record.latest > 1 and record.status == "active":
                    b.update_head(uri, version=1 if record.version > 1 else 2, at=at)
                elif roll < 0.88 and record.status == "active":
                    b.archive(uri, at=at)
                elif roll < 0.94 and record.status == "archived":
                    b.record_access([uri.head], at=at)
                elif roll >= 0.94:
                    b.tombstone(uri, at=at)


@pytest.mark.parametrize("seed", [1, 2, 3])
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
