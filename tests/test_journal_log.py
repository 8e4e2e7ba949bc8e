"""The journal log: durable commits with one flush, and recovery after a system stop (L1-L4).

A system stop cannot be caused in a test, so it is staged: the store's directory is copied
while a handle has it open (the copy holds what the kernel held, as a process kill leaves
it), the dirty marker of the copy is given another boot's id, and ``data.mdb`` is damaged,
as unflushed pages that reached the disk in any order could leave it. Opening the copy must
rebuild it from its log into exactly the store that was copied.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import lmdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cortexgraph as cg
import cortexgraph.store.env as env_module
from cortexgraph.errors import CorruptionError, CortexError, StorageError
from cortexgraph.store.journal_log import (
    DIRTY_NAME,
    LOG_NAME,
    MAGIC,
    JournalLog,
    boot_id,
    encode_record,
)

ACTOR = "agent"
T0 = 1_700_000_000_000

pytestmark = pytest.mark.skipif(
    boot_id() is None, reason="log mode needs the system's boot id (Linux)"
)


def _write_some(cx: cg.Cortex, first: int, count: int) -> list[cg.MemoryURI]:
    uris = [
        cx.write(cg.Fact(text=f"deploys go through the pipeline, step {i}"), at=T0 + i)
        for i in range(first, first + count // 2)
    ]
    with cx.batch() as b:
        for i in range(first + count // 2, first + count):
            uris.append(b.write(cg.Fact(text=f"the cache holds run {i}", tags=["ci"]), at=T0 + i))
    return uris


def _history(cx: cg.Cortex) -> None:
    """Writes, a batch, an update, a tombstone, an edge and a snapshot."""
    uris = _write_some(cx, 0, 10)
    cx.update(uris[0], text="deploys go through review first", at=T0 + 100)
    cx.tombstone(uris[1], at=T0 + 101)
    cx.add_edge(uris[2], uris[3], "related", at=T0 + 102)
    cx.snapshot(at=T0 + 103)
    _write_some(cx, 20, 4)


def _state(cx: cg.Cortex) -> dict[str, Any]:
    digests = cx.table_digests()
    digests.pop("emb", None)
    meta = digests.pop("meta")
    assert meta  # the meta table exists; its rows are compared through the log instead
    return {"digests": digests, "roots": cx.roots(), "snapshots": cx.snapshots()}


def _logged(directory: Path) -> bytes:
    """The log's bytes up to its end (the records; zeros follow them)."""
    reader = JournalLog(directory, readonly=True)
    try:
        ends = [record.end for record in reader.records()]
    finally:
        reader.close()
    data = (directory / LOG_NAME).read_bytes()
    assert data[ends[-1] :].count(0) == len(data) - ends[-1]  # only zeros follow
    return data[: ends[-1]]


def _put_at_end(directory: Path, data: bytes) -> None:
    """Write ``data`` where the log's records end, as an append would."""
    end = len(_logged(directory))
    with (directory / LOG_NAME).open("r+b") as f:
        f.seek(end)
        f.write(data)


def _stage_system_stop(source: Path, copy: Path, *, damage: bool = True) -> None:
    """Copy the open store at ``source`` to ``copy`` as a system stop would leave it."""
    shutil.copytree(source, copy)
    (copy / ACTOR / DIRTY_NAME).write_text("a-boot-before-this-one\n", encoding="ascii")
    if damage:
        data = copy / ACTOR / "data.mdb"
        with data.open("r+b") as f:
            f.seek(0)
            f.write(b"\xa5" * 65536)  # the meta pages and the first data pages


def test_log_mode_holds_every_entry_and_row(tmp_path: Path) -> None:
    """A durable handle writes the journal log: it holds every journal entry and every meta
    and snapshots row, LMDB is opened without its own flushes, and verify checks the log."""
    with cg.open(tmp_path, ACTOR) as cx:
        _history(cx)
        env = cx._handle.env
        assert env._log is not None
        assert env._env.flags()["sync"] is False
        assert (tmp_path / ACTOR / DIRTY_NAME).exists()
        with env.read() as txn:
            assert env.check_log(txn) == []
            journal = [bytes(v) for _, v in txn.iter_items("journal", b"")]
        log = JournalLog(tmp_path / ACTOR, readonly=True)
        logged = [entry for record in log.records() for entry in record.entries]
        log.close()
        assert logged == journal
    assert not (tmp_path / ACTOR / DIRTY_NAME).exists()  # a clean close flushed LMDB
    report = cg.verify(tmp_path, ACTOR)
    assert report.ok, report


def test_a_system_stop_rebuilds_the_store_from_its_log(tmp_path: Path) -> None:
    """After a staged system stop, opening the store sets the damaged LMDB file aside and
    makes the store again from the log: same tables, roots and snapshots, and it verifies."""
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _history(cx)
        expected = _state(cx)
        _stage_system_stop(tmp_path / "a", tmp_path / "b")
    with cg.open(tmp_path / "b", ACTOR) as cx:
        assert _state(cx) == expected
        assert (tmp_path / "b" / ACTOR / "data.mdb.untrusted").exists()
        _write_some(cx, 40, 4)  # and it goes on
    assert cg.verify(tmp_path / "b", ACTOR).ok


def test_a_process_kill_leaves_lmdb_trusted(tmp_path: Path) -> None:
    """A dirty marker of this boot means only a process died: LMDB is used as it is."""
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _history(cx)
        expected = _state(cx)
        shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b" / ACTOR / DIRTY_NAME).read_text().strip() == boot_id()
    with cg.open(tmp_path / "b", ACTOR) as cx:
        assert _state(cx) == expected
    assert not (tmp_path / "b" / ACTOR / "data.mdb.untrusted").exists()


def test_a_read_only_open_refuses_an_untrusted_store(tmp_path: Path) -> None:
    """A read-only handle cannot recover, so it refuses, naming what to do, and changes
    nothing."""
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _history(cx)
        _stage_system_stop(tmp_path / "a", tmp_path / "b", damage=False)
    before = sorted(os.listdir(tmp_path / "b" / ACTOR))
    with pytest.raises(StorageError, match="open it writable once"):
        cg.open(tmp_path / "b", ACTOR, readonly=True)
    assert sorted(os.listdir(tmp_path / "b" / ACTOR)) == before


def test_a_torn_last_record_is_dropped(tmp_path: Path) -> None:
    """A record cut short by the stop (never reported done) is left out of the recovery and
    cut off the log."""
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _history(cx)
        expected = _state(cx)
        _stage_system_stop(tmp_path / "a", tmp_path / "b")
    store = tmp_path / "b" / ACTOR
    before = _logged(store)
    _put_at_end(store, encode_record(10_000, [b"\x01"], [])[:-5])
    with cg.open(tmp_path / "b", ACTOR) as cx:
        assert _state(cx) == expected
    # the torn bytes are gone (_logged checks that only zeros follow the records), and the
    # rebuild's record went where they were
    assert _logged(store).startswith(before)


def test_a_recovery_cut_short_is_finished(tmp_path: Path) -> None:
    """A recovery stopped after it set ``data.mdb`` aside (the store has a log and no LMDB
    file) is finished by the next open."""
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _history(cx)
        expected = _state(cx)
        _stage_system_stop(tmp_path / "a", tmp_path / "b")
    store = tmp_path / "b" / ACTOR
    os.replace(store / "data.mdb", store / "data.mdb.untrusted")
    with cg.open(tmp_path / "b", ACTOR, create=False) as cx:
        assert _state(cx) == expected


def test_a_log_damaged_before_its_end_is_refused(tmp_path: Path) -> None:
    """A record that does not match its hash and is not the last write is damage: the open
    says so and sets nothing aside (the LMDB file is left for the user to judge)."""
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _history(cx)
        _stage_system_stop(tmp_path / "a", tmp_path / "b", damage=False)
    store = tmp_path / "b" / ACTOR
    data = bytearray((store / LOG_NAME).read_bytes())
    data[data.index(b"pipeline, step 1")] ^= 0x01
    (store / LOG_NAME).write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="does not match its hash"):
        cg.open(tmp_path / "b", ACTOR)
    assert (store / "data.mdb").exists() and not (store / "data.mdb.untrusted").exists()


def test_a_flushed_record_lmdb_never_committed(tmp_path: Path) -> None:
    """A record beyond ``log_end`` (its writer died between the flush and LMDB's commit) is
    overwritten by the next writer when LMDB is trusted, and recovered after a system stop,
    when the log is all there is (its write had not been reported either way)."""
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _history(cx)
    with cg.open(tmp_path / "b", ACTOR) as cx:
        _history(cx)
        extra = _write_some(cx, 60, 1)
        expected = _state(cx)
    log_b = _logged(tmp_path / "b" / ACTOR)
    base = _logged(tmp_path / "a" / ACTOR)
    assert log_b.startswith(base) and len(log_b) > len(base)
    # the last record of b (the extra write) is what a's writer flushed and then died
    tail = log_b[len(base) :]
    shutil.copytree(tmp_path / "a", tmp_path / "c")
    (tmp_path / "c" / ACTOR / DIRTY_NAME).write_text("a-boot-before-this-one\n")
    _put_at_end(tmp_path / "c" / ACTOR, tail)
    with cg.open(tmp_path / "c", ACTOR) as cx:
        assert cx.exists(extra[0])
        assert _state(cx) == expected
    # with LMDB trusted the record is not LMDB's: a writable open drops it at once (so a
    # later recovery cannot bring back a write the store was seen without), and the next
    # write takes its place
    _put_at_end(tmp_path / "a" / ACTOR, tail)
    with cg.open(tmp_path / "a", ACTOR, readonly=True) as cx:
        assert not cx.exists(extra[0])
    assert _logged(tmp_path / "a" / ACTOR) == base + tail  # a reader changes nothing
    with cg.open(tmp_path / "a", ACTOR, sync=False) as cx:
        assert _logged(tmp_path / "a" / ACTOR) == base
        assert not cx.exists(extra[0])
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _write_some(cx, 70, 2)
        with cx._handle.env.read() as txn:
            assert cx._handle.env.check_log(txn) == []


class _FailingCommit:
    """A stand-in for py-lmdb's transaction whose commit fails as a full disk would."""

    def __init__(self, txn: Any) -> None:
        self._txn = txn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)

    def commit(self) -> None:
        self._txn.abort()
        raise lmdb.DiskError("fake: the commit failed")


def test_a_failed_commit_takes_its_record_back(tmp_path: Path) -> None:
    """When LMDB's commit fails after the record was flushed, the record is cut off again:
    a later recovery must not bring back a write that was reported failed (L1)."""
    with cg.open(tmp_path, ACTOR) as cx:
        _history(cx)
        env = cx._handle.env
        logged, last = _logged(tmp_path / ACTOR), cx.seq
        txn = env.begin_write()
        txn.append_entry(last + 1, b"\xa0")
        txn._txn = _FailingCommit(txn._txn)
        with pytest.raises(StorageError):
            txn.commit()
        assert _logged(tmp_path / ACTOR) == logged
        assert cx.seq == last
        _write_some(cx, 80, 2)
        with env.read() as reader:
            assert env.check_log(reader) == []


def _check_log(cx: cg.Cortex) -> list[str]:
    with cx._handle.env.read() as txn:
        return cx._handle.env.check_log(txn)


def test_a_batch_writes_its_record_before_its_last_work(tmp_path: Path) -> None:
    """A batch stages its record (L5): once staged, the record is in the file before the
    commit, and it is the very record the commit flushes; nothing the log carries can be
    added to the transaction after it."""
    with cg.open(tmp_path, ACTOR) as cx:
        _history(cx)
        env = cx._handle.env
        before = _logged(tmp_path / ACTOR)
        with cx.batch() as b:
            b.write(cg.Fact(text="the staged record holds this fact"), at=T0 + 500)
            txn = b.txn
            txn.stage_log()
            assert txn.staged is not None
            offset, end = txn.staged
            assert offset == len(before)
            raw = (tmp_path / ACTOR / LOG_NAME).read_bytes()
            assert raw[:offset] == before and raw[offset:end].strip(b"\0")
            staged = raw[offset:end]
            txn.stage_log()  # once staged, staging again changes nothing
            assert txn.staged == (offset, end)
            with pytest.raises(CortexError, match="record is already written"):
                txn.append_entry(txn.last_seq() + 1, b"\xa0")
            with pytest.raises(CortexError, match="record is already written"):
                txn.put("meta", b"late", b"\x01")
            with pytest.raises(CortexError, match="record is already written"):
                txn.put_snapshot(b"late", b"\x01")
        assert _logged(tmp_path / ACTOR) == before + staged
        assert _check_log(cx) == []
        assert env._log is not None and not env._log.starts_record(len(before + staged))


def test_an_aborted_batch_takes_its_staged_record_back(tmp_path: Path) -> None:
    """A transaction that aborts after staging zeroes its record again (L5): the log ends
    where it did, and the next commit's record takes its place."""
    with cg.open(tmp_path, ACTOR) as cx:
        _history(cx)
        before = (tmp_path / ACTOR / LOG_NAME).read_bytes()
        seq = cx.seq
        with pytest.raises(RuntimeError, match="the caller gave up"), cx.batch() as b:
            for i in range(30):
                b.write(cg.Fact(text=f"a batch that is rolled back, fact {i}"), at=T0 + i)
            b.txn.stage_log()
            assert b.txn.staged is not None
            raise RuntimeError("the caller gave up")
        assert (tmp_path / ACTOR / LOG_NAME).read_bytes() == before
        assert cx.seq == seq
        _write_some(cx, 600, 2)
        assert _check_log(cx) == []


def test_a_staged_record_that_cannot_be_taken_back_is_cleared_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If zeroing an aborted transaction's staged record fails, the abort still ends the
    transaction, and the bytes are zeroed when the next record is written: a shorter
    record must not leave the longer one's tail behind it (the log would read as
    damaged)."""
    with cg.open(tmp_path, ACTOR) as cx:
        _history(cx)
        env = cx._handle.env
        before = _logged(tmp_path / ACTOR)
        failing = {"left": 1}
        clear_from = JournalLog.clear_from

        def clear_once_failing(
            self: JournalLog, end: int, stop: int | None = None, *, flush: bool = True
        ) -> None:
            if failing["left"]:
                failing["left"] -= 1
                raise StorageError("fake: the disk refused the zeros")
            clear_from(self, end, stop, flush=flush)

        monkeypatch.setattr(JournalLog, "clear_from", clear_once_failing)
        with pytest.raises(RuntimeError, match="gave up"), cx.batch() as b:
            for i in range(40):
                b.write(cg.Fact(text=f"a long batch that is rolled back, fact {i}"), at=T0 + i)
            b.txn.stage_log()
            staged_end = b.txn.staged[1] if b.txn.staged else 0
            raise RuntimeError("gave up")
        assert not failing["left"]  # the take-back's zeros were refused
        assert staged_end > len(before) and env._log is not None
        assert env._log.leftover_end(len(before)) == staged_end  # the record is still there
        assert env._writer._depth.n == 0  # the abort ended the transaction all the same
        uri = cx.write(cg.Fact(text="short"), at=T0 + 900)
        assert _logged(tmp_path / ACTOR).startswith(before)
        assert _check_log(cx) == []
        assert cx.exists(uri)


def test_a_batch_that_grows_the_map_stages_its_record_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose last work runs out of map aborts (taking its staged record back),
    grows the map and commits: the log holds the batch once, as the journal does."""
    taken_back = []
    stage = env_module.Environment._log_stage

    def counting_stage(self: Any, txn: Any) -> Any:
        take_back = stage(self, txn)
        if take_back is None:
            return None
        return lambda: (taken_back.append(txn.staged), take_back())

    monkeypatch.setattr(env_module.Environment, "_log_stage", counting_stage)
    with cg.open(tmp_path, ACTOR, map_size=1 << 16) as cx:
        start = cx._handle.env.map_size()
        for round_ in range(4):
            with cx.batch() as b:
                for i in range(60):
                    b.write(
                        cg.Fact(text=f"round {round_} fact {i} about growing maps"),
                        at=T0 + round_ * 100 + i,
                    )
        assert cx._handle.env.map_size() > start
        assert cx.seq == 240
        assert taken_back  # some batch ran out of map after staging its record
        assert _check_log(cx) == []


def test_a_large_log_grows_by_a_bounded_step(tmp_path: Path) -> None:
    """The log grows by zeros ahead of its records, by an eighth of its size but never by
    more than 16 MiB at once (beyond what the record needs): one commit into a large log
    must not write tens of megabytes of zeros."""
    log = JournalLog(tmp_path)
    try:
        size = 512 << 20  # a log of 512 MiB (sparse): an eighth would be 64 MiB
        os.truncate(log.path, size)
        end = log.append(size - 10, b"\0\0\0\x01" + b"x" * 100)
        grown = log.size()
        assert end < grown <= size + (16 << 20)
        assert grown - size >= 1 << 20
        big = b"y" * (20 << 20)  # a record bigger than the step still fits
        end = log.append(grown - 10, big)
        assert log.size() >= end
    finally:
        log.close()


def test_the_writeback_hint_is_found_on_linux(tmp_path: Path) -> None:
    """Where log mode runs (Linux), ``sync_file_range`` is found and accepts the call a
    staged record makes: without it every staged record would silently lose the overlap."""
    from cortexgraph.store import journal_log

    assert journal_log._range_sync is not None
    with (tmp_path / "f").open("wb") as f:
        f.write(b"x" * 5000)
        f.flush()
        assert journal_log._range_sync(f.fileno(), 0, 5000, 2) == 0
        journal_log.start_writeback(f.fileno(), 4096, 904)


def test_a_store_without_a_log_gets_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store written without log mode (no boot id, or an earlier release) gets its whole
    journal and rows written to a new log at its first durable commit, and can then be
    recovered from it."""
    monkeypatch.setattr(env_module, "boot_id", lambda: None)
    with cg.open(tmp_path / "a", ACTOR) as cx:
        assert cx._handle.env._log is None
        assert cx._handle.env._env.flags()["sync"] is True
        _history(cx)
    assert not (tmp_path / "a" / ACTOR / LOG_NAME).exists()
    monkeypatch.undo()
    with cg.open(tmp_path / "a", ACTOR) as cx:
        assert not (tmp_path / "a" / ACTOR / LOG_NAME).exists()  # opening writes nothing
        _write_some(cx, 50, 2)  # the first logged commit writes the log whole
        expected = _state(cx)
        with cx._handle.env.read() as txn:
            assert cx._handle.env.check_log(txn) == []
        _stage_system_stop(tmp_path / "a", tmp_path / "b")
    with cg.open(tmp_path / "b", ACTOR) as cx:
        assert _state(cx) == expected


def test_a_system_stop_while_a_store_gets_its_first_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first logged commit of a store without a log writes the whole log; a system
    stop in the middle of that write leaves a torn log. LMDB was flushed before (the store
    had no unflushed commit), so it must stay trusted: the dirty marker is created only
    once the log is flushed, and the store opens as it was, without that commit."""
    monkeypatch.setattr(env_module, "boot_id", lambda: None)
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _history(cx)
        expected = _state(cx)
    monkeypatch.undo()
    stopped = tmp_path / "stopped"
    append = JournalLog.append

    def append_and_stop(self: JournalLog, offset: int, record: bytes) -> int:
        end = append(self, offset, record)
        if not stopped.exists():
            # the disk as a stop in the middle of the write leaves it: half the record
            _stage_system_stop(tmp_path / "a", stopped, damage=False)
            marker = stopped / ACTOR / DIRTY_NAME
            if not (tmp_path / "a" / ACTOR / DIRTY_NAME).exists():
                marker.unlink()  # no marker was there to copy
            with (stopped / ACTOR / LOG_NAME).open("r+b") as f:
                f.truncate(offset + len(record) // 2)
        return end

    monkeypatch.setattr(JournalLog, "append", append_and_stop)
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _write_some(cx, 50, 2)
    monkeypatch.undo()
    assert stopped.exists()
    with cg.open(stopped, ACTOR) as cx:
        assert _state(cx) == expected
        _write_some(cx, 60, 2)  # the next logged commit writes the log whole again
        assert _check_log(cx) == []
    assert cg.verify(stopped, ACTOR).ok


def test_entries_of_a_handle_without_log_mode_are_caught_up(tmp_path: Path) -> None:
    """A ``sync=False`` handle does not write the log; what it commits marks the log as
    behind (``log_end`` goes), so verify has nothing to hold against it, and the next
    durable commit writes the log whole again."""
    with cg.open(tmp_path, ACTOR) as cx:
        _history(cx)
    with cg.open(tmp_path, ACTOR, sync=False) as cx:
        _write_some(cx, 90, 4)
        cx.snapshot(at=T0 + 200)
    assert cg.verify(tmp_path, ACTOR).ok
    with cg.open(tmp_path, ACTOR) as cx:
        _write_some(cx, 95, 2)
        with cx._handle.env.read() as txn:
            assert cx._handle.env.check_log(txn) == []
        expected = _state(cx)
        _stage_system_stop(tmp_path, tmp_path.parent / (tmp_path.name + "-copy"))
    with cg.open(tmp_path.parent / (tmp_path.name + "-copy"), ACTOR) as cx:
        assert _state(cx) == expected


def test_a_system_stop_while_the_log_is_written_whole_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handle without log mode commits while a durable one holds unflushed commits (the
    dirty marker is there); the durable handle's next commit writes the log whole again,
    over the old one. A system stop in the middle of that write must not leave a torn
    log as the only way back: LMDB is flushed and the marker removed before the log is
    rewritten, so the store opens as it was before that commit."""
    stopped = tmp_path / "stopped"
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _history(cx)
        env = cx._handle.env
        assert (tmp_path / "a" / ACTOR / DIRTY_NAME).exists()
        boot, env._boot = env._boot, None  # as a handle without log mode commits
        _write_some(cx, 90, 2)
        env._boot = boot
        with cx._handle.env.read() as txn:
            assert env._log_end(txn) is None  # the log is behind: written whole next
        expected = _state(cx)
        append = JournalLog.append

        def append_and_stop(self: JournalLog, offset: int, record: bytes) -> int:
            end = append(self, offset, record)
            if not stopped.exists():
                _stage_system_stop(tmp_path / "a", stopped, damage=False)
                if not (tmp_path / "a" / ACTOR / DIRTY_NAME).exists():
                    (stopped / ACTOR / DIRTY_NAME).unlink()  # no marker was there to copy
                with (stopped / ACTOR / LOG_NAME).open("r+b") as f:
                    f.truncate(offset + len(record) // 2)  # half the whole log written
            return end

        monkeypatch.setattr(JournalLog, "append", append_and_stop)
        _write_some(cx, 95, 2)
        monkeypatch.undo()
        assert _check_log(cx) == []
    assert stopped.exists()
    with cg.open(stopped, ACTOR) as cx:
        assert _state(cx) == expected
        _write_some(cx, 99, 2)
        assert _check_log(cx) == []
    assert cg.verify(stopped, ACTOR).ok


def test_verify_reports_a_log_that_differs(tmp_path: Path) -> None:
    """A journal log whose entry differs from the journal's is reported by verify."""
    with cg.open(tmp_path, ACTOR) as cx:
        _history(cx)
    log = tmp_path / ACTOR / LOG_NAME
    data = bytearray(log.read_bytes())
    at = data.index(b"pipeline, step 1")
    data[at] ^= 0x01
    log.write_bytes(bytes(data))
    report = cg.verify(tmp_path, ACTOR)
    assert not report.ok
    assert any(LOG_NAME in problem for problem in report.actors[0].problems), report


_WRITER = textwrap.dedent(
    """
    import sys
    import cortexgraph as cg
    root, first = sys.argv[1], int(sys.argv[2])
    with cg.open(root, "agent") as cx:
        for i in range(first, first + 30):
            cx.write(cg.Fact(text=f"process {first} wrote {i}"), at=1_700_000_000_000 + i)
    """
)


def test_a_dead_writers_longer_record_is_cleared_by_a_writer_already_open(
    tmp_path: Path,
) -> None:
    """A writer that dies after writing its record and before LMDB commits leaves the
    record past ``log_end``. Another process, already open (so it never ran the open's
    clean-up), writes its own record at the same offset: when its record is shorter, the
    dead one's tail must not stay behind it, or the log would read as damaged after a
    system stop."""
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _history(cx)
    with cg.open(tmp_path / "a", ACTOR) as cx:  # the writer already open
        base = _logged(tmp_path / "a" / ACTOR)
        long_text = "a long memory that its writer never committed " * 40
        with cg.open(tmp_path / "scratch", ACTOR) as other:
            _history(other)
            other.write(cg.Fact(text=long_text), at=T0 + 70)
        tail = _logged(tmp_path / "scratch" / ACTOR)[len(base) :]
        assert len(tail) > 1000
        _put_at_end(tmp_path / "a" / ACTOR, tail)  # the dead writer's record
        cx.write(cg.Fact(text="short"), at=T0 + 70)
        logged = _logged(tmp_path / "a" / ACTOR)  # only zeros follow the records
        assert logged.startswith(base) and len(logged) - len(base) < len(tail)
        assert _check_log(cx) == []
        expected = _state(cx)
        _stage_system_stop(tmp_path / "a", tmp_path / "b")
    with cg.open(tmp_path / "b", ACTOR) as cx:
        assert _state(cx) == expected


def test_leftover_end_walks_the_records_past_the_end(tmp_path: Path) -> None:
    """``leftover_end`` finds where uncommitted records stop: by their lengths, at the
    zeros after them; at the file's end when a length is damaged or cut."""
    log = JournalLog(tmp_path)
    try:
        start = log.header_end
        assert log.leftover_end(start) == start  # a fresh log: only zeros
        one = encode_record(1, [b"\xa1", b"\xa2"], [])
        two = encode_record(3, [b"\xa3"], [("meta", b"k", b"v")])
        end_one = log.append(start, one)
        end_two = log.append(end_one, two)
        assert log.leftover_end(start) == end_two
        assert log.leftover_end(end_one) == end_two
        assert log.leftover_end(end_two) == end_two
        size = log.size()
        with log.path.open("r+b") as f:  # a damaged length in the second record
            f.seek(end_one)
            f.write(b"\xff\xff\xff\xff")
        assert log.leftover_end(start) == size
    finally:
        log.close()
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    log = JournalLog(tiny)
    try:
        with log.path.open("r+b") as f:  # a file that ends two bytes into a length
            f.seek(log.header_end)
            f.write(b"\x00\x01")
            f.truncate(log.header_end + 2)
        assert log.leftover_end(log.header_end) == log.header_end + 2
    finally:
        log.close()


@pytest.mark.slow
def test_two_processes_writing_share_one_log(tmp_path: Path) -> None:
    """Two processes writing the same store at once each append their records where the
    other's end (L2): the log holds every entry once, in seq order, and rebuilds the store."""
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _write_some(cx, 0, 4)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path / "a"), str(first)], env=env)
        for first in (1000, 2000)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with cg.open(tmp_path / "a", ACTOR) as cx:
        assert cx.seq == 64
        with cx._handle.env.read() as txn:
            assert cx._handle.env.check_log(txn) == []
        expected = _state(cx)
        _stage_system_stop(tmp_path / "a", tmp_path / "b")
    with cg.open(tmp_path / "b", ACTOR) as cx:
        assert _state(cx) == expected


_STEP_WRITER = textwrap.dedent(
    """
    import sys
    import cortexgraph as cg
    with cg.open(sys.argv[1], "agent") as cx:
        print("ready", flush=True)
        for n, line in enumerate(sys.stdin):  # one short write per line read
            cx.write(cg.Fact(text=f"step {n}"), at=1_700_000_000_000 + n)
            print("done", flush=True)
    """
)


@pytest.mark.slow
def test_a_writer_killed_beside_another_leaves_a_log_that_recovers(tmp_path: Path) -> None:
    """Two durable writers share a store. One, writing long records, is killed at random
    instants (while its record is staged, between its flush and LMDB's commit, anywhere);
    the other, open all along (so its open never cleaned up after the dead one), then
    writes one short record where the dead one's may lie. The log must read to its end
    with nothing but zeros after its records, hold exactly the journal, and rebuild the
    store after a staged system stop."""
    import random
    import signal
    import time

    rng = random.Random(11)
    with cg.open(tmp_path / "a", ACTOR) as cx:
        _write_some(cx, 0, 4)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def start(script: str, *args: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / "a"), *args],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        return proc

    step = start(_STEP_WRITER)
    assert step.stdin is not None and step.stdout is not None
    try:
        for _ in range(8):
            victim = start(_LOOPING_WRITER, "60")  # long records
            time.sleep(rng.uniform(0.05, 0.25))
            victim.send_signal(signal.SIGKILL)
            assert victim.wait(timeout=60) == -signal.SIGKILL
            for pipe in (victim.stdin, victim.stdout):
                assert pipe is not None
                pipe.close()
            step.stdin.write(b"w\n")
            step.stdin.flush()
            assert step.stdout.readline() == b"done\n"
            _logged(tmp_path / "a" / ACTOR)  # records, then zeros only: nothing left over
            with cg.open(tmp_path / "a", ACTOR, readonly=True) as cx:
                assert _check_log(cx) == []
    finally:
        step.stdin.close()
        assert step.wait(timeout=60) == 0
        step.stdout.close()
    assert cg.verify(tmp_path / "a", ACTOR).ok
    with cg.open(tmp_path / "a", ACTOR) as cx:
        journal = list(cx.journal_bytes())
        _stage_system_stop(tmp_path / "a", tmp_path / "b", damage=True)
    with cg.open(tmp_path / "b", ACTOR) as cx:
        assert list(cx.journal_bytes()) == journal
    assert cg.verify(tmp_path / "b", ACTOR).ok


_ENTRY = st.binary(min_size=1, max_size=40)
_ROW = st.tuples(
    st.sampled_from(["meta", "snapshots"]), st.binary(max_size=8), st.none() | st.binary(max_size=8)
)


@given(
    records=st.lists(
        st.tuples(st.lists(_ENTRY, max_size=4), st.lists(_ROW, max_size=2)), min_size=1, max_size=5
    ),
    cut=st.integers(min_value=0),
)
def test_records_read_back_and_a_cut_log_reads_a_prefix(
    tmp_path_factory: pytest.TempPathFactory, records: list[Any], cut: int
) -> None:
    """Records read back as written; a log cut anywhere (a torn write) reads back as the
    records that lie whole before the cut, never a damaged one."""
    directory = tmp_path_factory.mktemp("log")
    log = JournalLog(directory)
    offset, seq, ends = log.header_end, 1, []
    for entries, rows in records:
        offset = log.append(offset, encode_record(seq, entries, rows))
        seq += len(entries)
        ends.append(offset)
    read = [(r.first_seq, r.entries, r.rows, r.end) for r in log.records()]
    expected, seq = [], 1
    for (entries, rows), end in zip(records, ends, strict=True):
        expected.append((seq, entries, [tuple(row) for row in rows], end))
        seq += len(entries)
    assert read == expected
    cut_at = len(MAGIC) + cut % (offset - len(MAGIC) + 1)
    log.clear_from(cut_at)  # a write torn at cut_at: zeros from there on
    assert [r.end for r in log.records()] == [end for end in ends if end <= cut_at]
    os.truncate(directory / LOG_NAME, cut_at)  # a file that ends at cut_at
    assert [r.end for r in log.records()] == [end for end in ends if end <= cut_at]
    log.close()


_LOOPING_WRITER = textwrap.dedent(
    """
    import sys
    import cortexgraph as cg
    root = sys.argv[1]
    tail = " with a long tail" * (int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    with cg.open(root, "agent") as cx:
        n = cx.seq
        print("ready", flush=True)
        while True:
            if n % 3:
                cx.write(cg.Fact(text=f"single write {n}{tail}"), at=1_700_000_000_000 + n)
                n += 1
            else:
                with cx.batch() as b:
                    for i in range(n, n + 5):
                        b.write(cg.Fact(text=f"batched write {i}"), at=1_700_000_000_000 + i)
                n += 5
    """
)


@pytest.mark.slow
def test_sigkill_of_a_durable_writer_leaves_log_and_lmdb_agreeing(tmp_path: Path) -> None:
    """A durable writer killed at random instants (in the log's flush, between it and LMDB's
    commit, anywhere) leaves a store whose log holds exactly its journal and that verifies.
    A staged system stop after the last kill recovers the journal, plus at most the one
    transaction the writer had flushed to the log and not committed to LMDB (never
    reported done either way)."""
    import random
    import signal
    import time

    rng = random.Random(5)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    seqs = []
    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", _LOOPING_WRITER, str(tmp_path / "a")],
            env=env,
            stdout=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.05, 0.4))
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
        proc.stdout.close()
        with cg.open(tmp_path / "a", ACTOR, readonly=True) as cx:
            seqs.append(cx.seq)
            with cx._handle.env.read() as txn:
                assert cx._handle.env.check_log(txn) == []
    assert seqs == sorted(seqs) and seqs[-1] > seqs[0]
    assert cg.verify(tmp_path / "a", ACTOR).ok
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / ACTOR / DIRTY_NAME).write_text("a-boot-before-this-one\n")
    with cg.open(tmp_path / "a", ACTOR) as cx:
        journal = list(cx.journal_bytes())
    with cg.open(tmp_path / "b", ACTOR) as cx:
        recovered = list(cx.journal_bytes())
    assert recovered[: len(journal)] == journal and len(recovered) - len(journal) in (0, 1, 5)
    assert cg.verify(tmp_path / "b", ACTOR).ok
