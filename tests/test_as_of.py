"""As-of views: the memory as it was after an earlier journal entry, with proofs.

``cx.as_of(seq)`` must answer exactly what a store that only ever held the journal's first
``seq`` entries answers. The reference here is built independently: a fresh store of the
same actor that appends those entries through ``append_entries`` (the import path, which
applies them through a write transaction, entry by entry), not through the in-memory
replay and bulk load the view is made with.
"""

from __future__ import annotations

import tempfile
from itertools import islice
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.merkle import verify_memory_proof
from test_bulk_replay import _apply, operations

T0 = 1_700_000_000_000


def _answers(cx: cg.Cortex, ids: list[cg.MemoryURI]) -> dict[str, object]:
    """What a reader sees: every memory's head, tag filters, keyword recall, traversals
    and a context bundle."""
    out: dict[str, object] = {
        "seq": cx.seq,
        "root": cx.overall_root(),
        "digests": {k: v for k, v in cx.table_digests().items() if k not in ("meta", "emb")},
    }
    heads = []
    for uri in ids:
        try:
            record = cx.resolve(uri.head)
        except cg.NotFoundError:
            heads.append(None)
            continue
        heads.append((record.uri, record.status, record.memory))
    out["heads"] = heads
    out["find"] = [
        [h.uri for h in cx.find(cg.Q.type("fact") & cg.Q.tag(tag), limit=20, now=T0 * 2)]
        for tag in ("deploy", "cluster", "green")
    ]
    out["recall"] = [
        [(h.uri, h.score) for h in cx.recall(q, mode="keyword", k=10, now=T0 * 2).hits]
        for q in ("deploy green", "queue worker cache", "token")
    ]
    existing = [uri for uri, head in zip(ids, heads, strict=True) if head is not None]
    out["traverse"] = [
        list(cx.traverse(uri.head, depth=2, direction="both")) for uri in existing[:5]
    ]
    out["context"] = cx.context(query="deploy green", budget_tokens=400, now=T0 * 2).text
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=operations(3, 80),
    size=st.integers(1, 25),
    where=st.floats(0.0, 1.0),
)
def test_as_of_answers_as_a_store_of_the_first_entries(
    ops: list[tuple[str, int, int]], size: int, where: float
) -> None:
    """For a random history and a random seq, the view answers exactly what an
    independently built store of the first seq entries answers, its root is root_at(seq),
    and its proofs verify against root_at(seq)."""
    with tempfile.TemporaryDirectory() as tmp, cg.open(Path(tmp) / "a", "agent", sync=False) as cx:
        uris: list[cg.MemoryURI] = []
        at = T0
        for start in range(0, len(ops), size):
            with cx.batch() as b:
                for op, x, y in ops[start : start + size]:
                    at += 1_000
                    _apply(b, uris, op, x, y, at)
        seq = round(where * cx.seq)
        entries = list(islice(cx.journal_bytes(), seq))
        root = cx.root_at(seq)
        with cg.open(Path(tmp) / "b", "agent", sync=False) as reference:
            reference.append_entries(entries)
            expected = _answers(reference, uris)
        with cx.as_of(seq) as past:
            assert past.readonly and past.as_of_seq == seq
            assert _answers(past, uris) == expected
            assert past.overall_root() == root == expected["root"]
            for uri in uris:
                if past.exists(uri.head):
                    assert verify_memory_proof(past.prove(uri.head), root)
            directory = past.path.parent
        assert not directory.exists()


def test_as_of_refuses_a_seq_outside_the_journal_and_writes(tmp_path: Path) -> None:
    """A seq below 0 or beyond the journal (or not an integer) is a ValidationError naming
    ``seq``; a view is read-only; root_at refuses the same seqs and equals the current
    root at the current seq."""
    with cg.open(tmp_path, "agent") as cx:
        uri = cx.write(cg.Fact(text="first"), at=T0)
        cx.update(uri, text="second", at=T0 + 1)
        for bad in (-1, 3, 1.0, "1"):
            with pytest.raises(cg.ValidationError) as caught:
                cx.as_of(bad)  # type: ignore[arg-type]
            assert caught.value.field == "seq"
            with pytest.raises(cg.ValidationError):
                cx.root_at(bad)  # type: ignore[arg-type]
        assert cx.root_at(2) == cx.overall_root()
        with cx.as_of(1) as past:
            assert past.resolve(uri.head).memory.text == "first"
            with pytest.raises(cg.ReadOnlyError):
                past.write(cg.Fact(text="no"))
        with cx.as_of(0) as empty:
            assert empty.seq == 0 and not empty.exists(uri.head)


def test_root_at_uses_a_stored_snapshot_and_agrees_with_a_replay(tmp_path: Path) -> None:
    """root_at(seq) is the OverallRoot the store had at seq, whether a snapshot was stored
    there (read) or not (replayed)."""
    with cg.open(tmp_path, "agent") as cx:
        roots = [cx.overall_root()]
        for i in range(6):
            cx.write(cg.Fact(text=f"fact {i}"), at=T0 + i)
            roots.append(cx.overall_root())
            if i == 2:
                cx.snapshot(at=T0 + 100)
        assert [cx.root_at(seq) for seq in range(7)] == roots
