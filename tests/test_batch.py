"""Batches: one LMDB write transaction each (J3), nothing partial ever visible (J2, J3)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import cortexgraph as cg
import cortexgraph.writing as writing_module
from cortexgraph.core.keys import version_key


def test_error_in_the_middle_of_a_batch_leaves_nothing(cx: cg.Cortex) -> None:
    """An exception after several successful ops rolls back every one of them: no table
    changes, the seq does not move, and the memories written in the batch do not exist."""
    kept = cx.write(cg.Fact(text="before the batch"))
    before = cx.table_digests()
    written: list[cg.MemoryURI] = []
    with pytest.raises(RuntimeError, match="boom"), cx.batch() as b:
        written.append(b.write(cg.Fact(text="one", tags=["x"])))
        written.append(b.write(cg.Event(text="two"), ns="chat"))
        b.update(kept, text="changed inside the batch")
        b.tombstone(written[0])
        raise RuntimeError("boom")
    assert cx.table_digests() == before
    assert cx.seq == 1
    for uri in written:
        assert not cx.exists(uri)
    assert cx.resolve(kept.head).memory.text == "before the batch"


def test_typed_error_in_the_middle_of_a_batch_leaves_nothing(cx: cg.Cortex) -> None:
    """A library error that escapes the batch (here a tombstoned update) rolls it back."""
    dead = cx.write(cg.Fact(text="gone"))
    cx.tombstone(dead)
    before = cx.table_digests()
    with pytest.raises(cg.TombstonedError), cx.batch() as b:
        b.write(cg.Fact(text="would be lost"))
        b.update(dead, text="not allowed")
    assert cx.table_digests() == before


def test_caught_validation_error_keeps_the_batch_usable(cx: cg.Cortex) -> None:
    """Validation happens before the store is touched, so a caller may catch it and go on;
    the other operations of the batch commit."""
    with cx.batch() as b:
        a = b.write(cg.Fact(text="first"))
        with pytest.raises(cg.ValidationError):
            b.write(cg.Fact(text="x", priority=0))
        c = b.write(cg.Fact(text="third"))
    assert cx.seq == 2
    assert cx.resolve(a).memory.text == "first"
    assert cx.resolve(c).seq == 2


@pytest.mark.pure_python
def test_failure_after_touching_the_store_poisons_the_batch(
    cx: cg.Cortex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If applying an entry fails after its journal put, catching the error does not let
    the batch commit half an operation: the batch rolls back and says why."""
    before = cx.table_digests()

    def failing_apply(*args: object, **kwargs: object) -> list[object]:
        raise cg.CorruptionError("simulated failure while applying")

    with pytest.raises(cg.CortexError, match="rolled back"), cx.batch() as b:
        b.write(cg.Fact(text="fine"))
        monkeypatch.setattr(writing_module, "apply", failing_apply)
        with pytest.raises(cg.CorruptionError):
            b.write(cg.Fact(text="half applied"))
        monkeypatch.undo()
    assert cx.table_digests() == before


def test_mutation_without_a_journal_entry_is_refused(cx: cg.Cortex) -> None:
    """J2: a batch that changed a table but appended no entry refuses to commit with
    BatchNoJournalError, and rolls back."""
    before = cx.table_digests()
    with pytest.raises(cg.BatchNoJournalError, match="without a journal entry"), cx.batch() as b:
        b._txn.put("heads", b"\x00" * 16, b"forged")
    assert cx.table_digests() == before
    txn = cx._env.begin_write()
    txn.put("salience", b"mforged", b"")
    with pytest.raises(cg.BatchNoJournalError):
        txn.commit()
    assert cx.table_digests() == before


def test_batch_returns_uris_and_reads_its_own_writes(cx: cg.Cortex) -> None:
    """Inside a batch, resolve (on the batch or the handle) sees the batch's writes; seqs
    are consecutive; the facade verbs called inside the `with` join the batch."""
    with cx.batch() as b:
        a = b.write(cg.Fact(text="a"))
        assert b.resolve(a).memory.text == "a"
        a2 = cx.update(a, text="a2")  # the handle joins the open batch
        assert cx.resolve(a.head).version == 2
        c = cx.write(cg.Goal(text="g"))
    assert [e.seq for e in cx.journal()] == [1, 2, 3]
    assert a2.version == 2
    assert cx.resolve(c).seq == 3


def test_other_threads_do_not_see_an_uncommitted_batch(cx: cg.Cortex) -> None:
    """Readers in other threads see the state before the batch until it commits."""
    seen: dict[str, object] = {}
    with cx.batch() as b:
        uri = b.write(cg.Fact(text="pending"))

        def reader() -> None:
            seen["exists"] = cx.exists(uri)
            seen["seq"] = cx.seq

        t = threading.Thread(target=reader)
        t.start()
        t.join()
    assert seen == {"exists": False, "seq": 0}
    assert cx.exists(uri)


def test_batches_do_not_nest_and_are_single_use(cx: cg.Cortex) -> None:
    """Opening a batch inside a batch is an error (it would deadlock LMDB); so is reusing
    a finished batch or calling its verbs outside the `with`."""
    with cx.batch(), pytest.raises(cg.CortexError, match="do not nest"):
        cx.batch().__enter__()
    b = cx.batch()
    with pytest.raises(cg.CortexError, match="not open"):
        b.write(cg.Fact(text="x"))
    with b:
        pass
    with pytest.raises(cg.CortexError, match="once"):
        b.__enter__()
    with pytest.raises(cg.CortexError, match="not open"):
        b.write(cg.Fact(text="x"))


def test_empty_batch_journals_nothing(cx: cg.Cortex) -> None:
    """A batch with no operations commits nothing and changes nothing."""
    before = cx.table_digests()
    with cx.batch():
        pass
    assert cx.table_digests() == before


def test_all_tables_of_a_batch_commit_together(tmp_path: Path) -> None:
    """J3: after a committed batch, a fresh process-level handle sees journal, heads,
    versions and attributes rows for every op (they were one transaction)."""
    with cg.open(tmp_path, "agent") as cx, cx.batch() as b:
        uris = [b.write(cg.Fact(text=f"m{i}", tags=["t"]), at=i) for i in range(5)]
    with cg.open(tmp_path, "agent", readonly=True) as cx, cx._env.read() as txn:
        assert txn.last_seq() == 5
        for uri in uris:
            assert txn.get("heads", uri.id) is not None
            assert txn.get("versions", version_key(uri.id, 1)) is not None
        assert all(txn.get("salience", b"m" + uri.id) is not None for uri in uris)


@pytest.mark.pure_python
def test_a_full_map_at_the_keyword_flush_inside_a_batch_grows_the_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads inside a batch that must see its keyword postings (auto-linking, ingestion)
    write the batch's keyword segments first; a full map there grows the map and the batch goes on,
    instead of the internal ``MapFull`` reaching the caller."""
    from cortexgraph.store.guards import MapFull

    flush = writing_module.KeywordSegments.flush
    calls: list[int] = []

    def full_once(self: writing_module.KeywordSegments, txn: object) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise MapFull()
        flush(self, txn)  # type: ignore[arg-type]

    with cg.open(tmp_path, "agent", sync=False) as cx:
        with cx.batch() as b:
            uri = b.write(cg.Fact(text="deploy window friday"), at=1_700_000_000_000)
            before = cx._handle.env.map_size()
            monkeypatch.setattr(writing_module.KeywordSegments, "flush", full_once)
            txn = b.keyword_txn()
            monkeypatch.undo()
            assert cx._handle.env.map_size() == 2 * before and len(calls) == 2
            assert txn is b.txn and txn.count("postings") > 0  # the segment is written
        assert [hit.uri.id for hit in cx.recall("deploy", mode="keyword").hits] == [uri.id]
        digests = cx.table_digests()
        cx.rebuild()
        assert cx.table_digests() == digests
