"""The persisted column snapshot: a loaded-and-caught-up index equals a build, and a
snapshot that does not match the store is never served.

A new process loads the image of a build from ``<store>/columns.snapshot`` instead of
scanning every memory, then catches up from the journal. These tests hold that index to
the one a scan gives (row for row against a build at the snapshot's seq caught up the
same way; memory for memory against a build at the end), and check that every kind of
unusable file (missing, damaged, truncated, forged with a valid checksum, foreign,
stale, ahead of the store) is passed over for a scan, that read-only handles never
write, and that a writable handle rewrites the file only every ``SNAPSHOT_EVERY``
entries, atomically.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.codec import decode_unchecked, encode
from cortexgraph.index import ColumnIndex
from cortexgraph.index.snapshot import (
    _HEADER,
    SNAPSHOT_EVERY,
    SNAPSHOT_FILE,
    SnapshotFile,
    catch_up_limit,
)
from signal_ops import SignalOps

T0 = 1_700_000_000_000
HOUR = 3_600_000
WORDS = ["deploy", "billing", "cache", "queue", "retry", "schema", "token", "worker"]


# ---------------------------------------------------------------------------
# what a table holds, for comparisons


def rows_state(index: ColumnIndex) -> dict[str, Any]:
    """Everything a table holds, row for row (two tables equal here answer alike)."""
    count = len(index.ids)
    return {
        "ids": list(index.ids),
        "row_of": dict(index.row_of),
        "cols": {name: column[:count].tolist() for name, column in index.cols.items()},
        "tags": list(index.tags),
        "postings": {key: rows for key, rows in index.postings.items() if rows},
        "ns": (list(index.ns_names), dict(index.ns_code)),
        "sorted_rows": index.sorted_rows,
        "built_at": index.built_at,
        "seq": index.seq,
        "scale": (index.max_access, index.max_indeg, index.weights),
    }


def memory_state(index: ColumnIndex) -> dict[str, Any]:
    """Everything a table holds, per memory id (independent of row numbering and of
    ``gen``, which a build starts at 0)."""
    ids = index.ids
    cols = {name: column[: len(ids)].tolist() for name, column in index.cols.items()}
    per_id = {
        memory_id: (
            {name: values[row] for name, values in cols.items() if name not in ("gen", "ns")},
            index.ns_names[cols["ns"][row]],
            index.tags[row],
        )
        for row, memory_id in enumerate(ids)
    }
    postings = {key: {ids[row] for row in rows} for key, rows in index.postings.items() if rows}
    return {
        "memories": per_id,
        "postings": postings,
        "scale": (index.max_access, index.max_indeg, index.weights),
    }


def built(cx: cg.Cortex) -> ColumnIndex:
    """A column index built by a scan of the store as it is now."""
    index = ColumnIndex()
    with cx._env.read() as txn:
        index.refresh(txn)
    return index


def loaded(cx: cg.Cortex) -> ColumnIndex:
    """A column index whose first build may load the store's snapshot file."""
    index = ColumnIndex(cx._handle.snapshot_file())
    with cx._env.read() as txn:
        index.refresh(txn)
    return index


def save_now(cx: cg.Cortex) -> None:
    """Write the snapshot of the handle's index at the store's current seq."""
    with cx._handle.indexed_read() as (txn, index, _):
        cx._handle.snapshot_file().save(index.export(), txn)


def fill(cx: cg.Cortex, count: int, *, start: int = 0, read: bool = True) -> list[cg.MemoryURI]:
    """``count`` tagged Facts in two namespaces, one batch; then (``read``) a find, so
    the handle has a column index (only such a handle writes the snapshot on close)."""
    with cx.batch() as batch:
        uris = [
            batch.write(
                cg.Fact(text=f"{WORDS[i % 8]} {WORDS[i * 3 % 8]} note {i}", tags=(WORDS[i % 3],)),
                ns="default" if i % 4 else "other",
                at=T0 + i,
            )
            for i in range(start, start + count)
        ]
    if read:
        cx.find(cg.Q.type(cg.Fact), limit=1)
    return uris


# ---------------------------------------------------------------------------
# generated histories: the loaded index equals a build


def _write_op() -> st.SearchStrategy[tuple[Any, ...]]:
    return st.tuples(
        st.just("write"),
        st.sampled_from(["fact", "event", "preference"]),
        st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=2),
        st.sampled_from(["default", "other", "third"]),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    )


OPS = st.lists(
    st.one_of(
        _write_op(),
        _write_op(),
        st.tuples(st.just("retext"), st.integers(0, 50), st.lists(st.sampled_from(WORDS),
                  min_size=1, max_size=4)),
        st.tuples(st.just("retag"), st.integers(0, 50), st.sampled_from([(), ("a",), ("d",)])),
        st.tuples(st.just("edge"), st.integers(0, 50), st.integers(0, 50)),
        st.tuples(st.just("access"), st.integers(0, 50), st.integers(1, 3)),
        st.tuples(st.just("pin"), st.integers(0, 50)),
        st.tuples(st.just("tombstone"), st.integers(0, 50)),
        st.tuples(st.just("attest"), st.integers(0, 50), st.sampled_from(["success", "failure"])),
    ),
    min_size=1,
    max_size=30,
)  # fmt: skip


def _write(cx: cg.Cortex, op: tuple[Any, ...], at: int) -> cg.MemoryURI:
    _, kind, tags, ns, words = op
    memory = {"fact": cg.Fact, "event": cg.Event, "preference": cg.Preference}[kind]
    return cx.write(memory(text=" ".join(words), tags=tuple(tags)), ns=ns, at=at)


def _carry_out(cx: cg.Cortex, model: SignalOps, op: tuple[Any, ...], at: int) -> None:
    if op[0] in ("retext", "retag"):
        target = model.uris[op[1] % len(model.uris)]
        if target.id in model.tombstoned:
            return
        changes = {"text": " ".join(op[2])} if op[0] == "retext" else {"tags": list(op[2])}
        cx.update(target, at=at, **changes)
        return
    model.carry_out(cx, op, at, lambda write_op: _write(cx, write_op, at))


@settings(max_examples=100, deadline=None)
@given(OPS, OPS)
def test_a_loaded_snapshot_caught_up_equals_a_build(
    tmp_path_factory: Any, before: Any, after: Any
) -> None:
    """After a random history, the snapshot written from a handle's caught-up index is
    the image of a build at that seq; after more random operations, loading it and
    catching up gives exactly (row for row) the build at that seq caught up the same
    way, and memory for memory the build of the final store."""
    root = tmp_path_factory.mktemp("snapshot")
    at = T0
    with cg.open(root, "agent", sync=False) as cx:
        model = SignalOps([cx.write(cg.Fact(text="seed", tags=("a",)), at=at)])
        cx.find(cg.Q.type(cg.Fact), limit=1)  # the handle's index, caught up from here on
        for op in before:
            at += HOUR
            _carry_out(cx, model, op, at)
            cx.find(cg.Q.type(cg.Fact), limit=1)
        save_now(cx)
        at_save = built(cx)
        assert rows_state(loaded(cx)) == rows_state(at_save)
        for op in after:
            at += HOUR
            _carry_out(cx, model, op, at)
        with cx._env.read() as txn:
            at_save.refresh(txn)  # the build at the snapshot's seq, caught up
        from_file = loaded(cx)
        assert from_file.snapshot is not None
        assert from_file.snapshot.status == "loaded"  # type: ignore[attr-defined]
        assert rows_state(from_file) == rows_state(at_save)
        assert memory_state(from_file) == memory_state(built(cx))


def test_the_snapshot_of_a_caught_up_index_is_byte_identical_to_a_builds(tmp_path: Path) -> None:
    """The file is a function of the store's state: written from an index caught up
    over updates, tags, namespaces and tombstones, or from a fresh build, the bytes are
    the same."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        uris = fill(cx, 40)
        cx.find(cg.Q.type(cg.Fact), limit=1)
        fill(cx, 40, start=40)  # caught up: appended rows, out of id order
        cx.update(uris[3], tags=["z"], at=T0 + 100)
        cx.tombstone(uris[5], at=T0 + 101)
        save_now(cx)
        caught_up = (tmp_path / "agent" / SNAPSHOT_FILE).read_bytes()
        index = built(cx)
        with cx._env.read() as txn:
            cx._handle.snapshot_file().save(index.export(), txn)
        assert (tmp_path / "agent" / SNAPSHOT_FILE).read_bytes() == caught_up


def test_recall_and_find_answer_the_same_from_a_snapshot(tmp_path: Path) -> None:
    """A new handle on a store with a snapshot answers recall and find exactly as a
    handle that scanned the store, before and after writes past the snapshot."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        fill(cx, SNAPSHOT_EVERY + 10)
    assert (tmp_path / "agent" / SNAPSHOT_FILE).exists()

    def answers(root: Path) -> tuple[Any, ...]:
        with cg.open(root, "agent", readonly=True) as cx:
            hits = cx.recall("billing queue", mode="keyword", k=10, now=T0)
            found = cx.find(cg.Q.tag("b") & cg.Q.ns("other"), limit=20, now=T0)
            status = cx._column_index().snapshot.status  # type: ignore[attr-defined]
            return [(h.uri, h.score) for h in hits], [r.uri for r in found], status

    scanned = tmp_path / "scanned"
    shutil.copytree(tmp_path / "agent", scanned / "agent")
    (scanned / "agent" / SNAPSHOT_FILE).unlink()
    for extra in (0, 30):
        if extra:
            for root in (tmp_path, scanned):
                with cg.open(root, "agent", sync=False) as cx:
                    fill(cx, extra, start=1000)
            (scanned / "agent" / SNAPSHOT_FILE).unlink(missing_ok=True)  # a close wrote one
        *from_snapshot, status = answers(tmp_path)
        *from_scan, scan_status = answers(scanned)
        assert (status, scan_status) == ("loaded", "missing")
        assert from_snapshot == from_scan


# ---------------------------------------------------------------------------
# unusable files are passed over


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store of SNAPSHOT_EVERY + 10 memories whose close wrote a snapshot."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        fill(cx, SNAPSHOT_EVERY + 10)
    assert (tmp_path / "agent" / SNAPSHOT_FILE).exists()
    return tmp_path


def _status_and_check(root: Path) -> str:
    """The snapshot status a new read-only handle finds; its index must equal a scan's."""
    with cg.open(root, "agent", readonly=True) as cx:
        index = loaded(cx)
        assert memory_state(index) == memory_state(built(cx))
        return index.snapshot.status  # type: ignore[attr-defined]


def _reseal(data: bytes) -> bytes:
    """``data`` with its trailing checksum recomputed (a forged, well-sealed file)."""
    import blake3

    return data[:-32] + blake3.blake3(data[:-32]).digest()


def _flip(data: bytes, at: int) -> bytes:
    """``data`` with one bit of byte ``at`` flipped."""
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


def _forge(path: Path, change: Any) -> None:
    """Rewrite the file's body through ``change`` and reseal it."""
    data = path.read_bytes()
    body = decode_unchecked(data[_HEADER.size : -32])
    change(body)
    path.write_bytes(_reseal(data[: _HEADER.size] + encode(body) + bytes(32)))


def _swap_ids(body: dict[str, Any]) -> None:
    ids = body["ids"]
    body["ids"] = ids[16:32] + ids[:16] + ids[32:]


def _bad_type(body: dict[str, Any]) -> None:
    body["columns"]["type"] = b"\xff" + body["columns"]["type"][1:]


def _short_column(body: dict[str, Any]) -> None:
    body["columns"]["at"] = body["columns"]["at"][:-8]


def _tag_out_of_range(body: dict[str, Any]) -> None:
    body["tag_of"] = (10_000).to_bytes(4, "little") + body["tag_of"][4:]


def _other_actor(body: dict[str, Any]) -> None:
    body["identity"]["actor"] = "mallory"


def _other_root(body: dict[str, Any]) -> None:
    body["root"] = bytes(32)


@pytest.mark.parametrize(
    ("damage", "status"),
    [
        (lambda p: p.write_bytes(_flip(p.read_bytes(), 5000)), "damaged"),
        (lambda p: p.write_bytes(p.read_bytes()[:100]), "damaged"),
        (lambda p: p.write_bytes(b""), "damaged"),
        (lambda p: p.write_bytes(_reseal(b"NOTASNAP" + p.read_bytes()[8:])), "damaged"),
        (lambda p: p.write_bytes(_reseal(p.read_bytes()[:8] + b"\0\0\0\x09" + p.read_bytes()[12:])),
         "damaged"),
        (lambda p: p.write_bytes(_reseal(p.read_bytes()[:-100] + bytes(32))), "damaged"),
        (lambda p: _forge(p, _swap_ids), "damaged"),
        (lambda p: _forge(p, _bad_type), "damaged"),
        (lambda p: _forge(p, _short_column), "damaged"),
        (lambda p: _forge(p, _tag_out_of_range), "damaged"),
        (lambda p: _forge(p, _other_actor), "foreign"),
        (lambda p: _forge(p, _other_root), "foreign"),
        (lambda p: p.unlink(), "missing"),
    ],
    ids=["bit-flip", "truncated", "empty", "magic", "format", "body-garbage", "ids-order",
         "type-code", "short-column", "tag-range", "other-actor", "other-root", "missing"],
)  # fmt: skip
def test_an_unusable_snapshot_is_passed_over_for_a_scan(
    store: Path, damage: Any, status: str
) -> None:
    """Each kind of damage, including forged files with a valid checksum, is detected
    (the status names it) and the index is the one a scan builds."""
    damage(store / "agent" / SNAPSHOT_FILE)
    assert _status_and_check(store) == status


def test_a_snapshot_of_another_store_is_foreign(store: Path, tmp_path_factory: Any) -> None:
    """A file copied from another store of the same actor (same seq, other history) is
    refused by the journal root it records."""
    other = tmp_path_factory.mktemp("other")
    with cg.open(other, "agent", sync=False) as cx:
        with cx.batch() as batch:
            for i in range(SNAPSHOT_EVERY + 10):
                batch.write(cg.Fact(text=f"something else {i}"), at=T0 + i)
        cx.find(cg.Q.type(cg.Fact), limit=1)
    shutil.copy(other / "agent" / SNAPSHOT_FILE, store / "agent" / SNAPSHOT_FILE)
    assert _status_and_check(store) == "foreign"


def test_a_snapshot_of_a_diverged_history_is_foreign(tmp_path: Path) -> None:
    """Two stores whose journals differ only before the snapshot's seq (the entry at
    that seq is byte-identical) are told apart: the file records the root over the whole
    journal up to its seq, not only its last entry."""
    for name, first in (("a", "first in a"), ("b", "first in b")):
        with cg.open(tmp_path / name, "agent", sync=False) as cx:
            cx.write(cg.Fact(text=first), at=T0)
            cx.write(cg.Fact(text="the same second write"), at=T0 + 1)
            if name == "a":
                save_now(cx)
    with cg.open(tmp_path / "a", "agent", readonly=True) as a, cg.open(
        tmp_path / "b", "agent", readonly=True
    ) as b:
        entries = [next(iter(cx.journal(since=1))) for cx in (a, b)]
    assert entries[0] == entries[1]  # the entry at the snapshot's seq is the same
    shutil.copy(tmp_path / "a" / "agent" / SNAPSHOT_FILE, tmp_path / "b" / "agent")
    assert _status_and_check(tmp_path / "a") == "loaded"
    assert _status_and_check(tmp_path / "b") == "foreign"


def test_a_snapshot_ahead_of_the_store_is_not_served(store: Path, tmp_path_factory: Any) -> None:
    """A store restored from a copy older than its snapshot (the file is at a seq the
    journal does not reach) builds from a scan, and the next writable handle that reads
    replaces the file on close."""
    older = tmp_path_factory.mktemp("older")
    shutil.copytree(store / "agent", older / "agent")
    with cg.open(store, "agent", sync=False) as cx:
        fill(cx, SNAPSHOT_EVERY, start=5000)  # the close moves the snapshot on
    shutil.copy(store / "agent" / SNAPSHOT_FILE, older / "agent" / SNAPSHOT_FILE)
    assert _status_and_check(older) == "ahead"
    with cg.open(older, "agent", sync=False) as cx:
        assert not cx._handle.save_column_snapshot()  # no read yet: no index to save
        cx.find(cg.Q.type(cg.Fact), limit=1)
        with cx._env.read() as txn:
            last = txn.last_seq()
        assert cx._handle.save_column_snapshot()
    assert SnapshotFile(older / "agent" / SNAPSHOT_FILE, {}).seq_on_disk() == last


def test_a_snapshot_too_far_behind_is_stale(store: Path) -> None:
    """When catching up would cost more than a scan (more entries behind than
    ``catch_up_limit`` of its rows), the snapshot is not used."""
    path = store / "agent" / SNAPSHOT_FILE
    kept = path.read_bytes()
    rows = SNAPSHOT_EVERY + 10
    with cg.open(store, "agent", sync=False) as cx:
        fill(cx, catch_up_limit(rows) + 1, start=5000)
    path.write_bytes(kept)
    assert _status_and_check(store) == "stale"


# ---------------------------------------------------------------------------
# who writes the file, and when


def test_a_read_only_handle_never_writes_the_snapshot(tmp_path: Path) -> None:
    """A read-only handle that builds its index from a scan leaves no file behind."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        fill(cx, SNAPSHOT_EVERY + 10)
    path = tmp_path / "agent" / SNAPSHOT_FILE
    path.unlink()
    with cg.open(tmp_path, "agent", readonly=True) as cx:
        assert cx.recall("billing", mode="keyword", k=3)
        assert not cx._handle.save_column_snapshot()
    assert not path.exists()


def test_a_small_store_gets_no_snapshot(tmp_path: Path) -> None:
    """Below SNAPSHOT_EVERY entries a scan is cheap: a writable close writes nothing."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        fill(cx, SNAPSHOT_EVERY - 1)
        cx.find(cg.Q.type(cg.Fact), limit=1)
    assert not (tmp_path / "agent" / SNAPSHOT_FILE).exists()


def test_a_writable_close_rewrites_the_snapshot_every_snapshot_every_entries(
    store: Path,
) -> None:
    """The file moves on only once the store is SNAPSHOT_EVERY entries past it, and
    only at the close of a handle that read (whose index is there to export)."""
    path = store / "agent" / SNAPSHOT_FILE
    first = SnapshotFile(path, {}).seq_on_disk()
    assert first == SNAPSHOT_EVERY + 10
    with cg.open(store, "agent", sync=False) as cx:
        fill(cx, SNAPSHOT_EVERY - 1, start=5000)
    assert SnapshotFile(path, {}).seq_on_disk() == first
    with cg.open(store, "agent", sync=False) as cx:
        fill(cx, 1, start=9000, read=False)
    assert SnapshotFile(path, {}).seq_on_disk() == first  # this handle never read
    with cg.open(store, "agent", sync=False) as cx:
        fill(cx, 1, start=9500)
    assert SnapshotFile(path, {}).seq_on_disk() == first + SNAPSHOT_EVERY + 1
    assert _status_and_check(store) == "loaded"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is written under a temporary name and renamed over the old one: when
    the rename fails, the old file is intact, the temporary is gone and the close
    succeeds (the file is only an optimisation)."""
    path = store / "agent" / SNAPSHOT_FILE
    before = path.read_bytes()

    def fail(*args: Any) -> None:
        raise OSError("disk full")

    with cg.open(store, "agent", sync=False) as cx:
        fill(cx, SNAPSHOT_EVERY, start=5000)
        monkeypatch.setattr(os, "replace", fail)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in (store / "agent").iterdir()) == [
        SNAPSHOT_FILE,
        "data.mdb",
        "lock.mdb",
        "writer.lock",
    ]


def test_the_file_holds_little_endian_arrays_of_the_stored_columns(store: Path) -> None:
    """The column arrays are stored little-endian with one entry per row, whatever the
    machine, so a snapshot moves between machines with the store."""
    data = (store / "agent" / SNAPSHOT_FILE).read_bytes()
    body = decode_unchecked(data[_HEADER.size : -32])
    rows = body["count"]
    assert rows == SNAPSHOT_EVERY + 10
    at = np.frombuffer(body["columns"]["at"], dtype="<i8")
    assert len(at) == rows and sorted(at.tolist()) == [T0 + i for i in range(rows)]


def test_concurrent_writers_and_readers_see_whole_files(store: Path) -> None:
    """Two writers replacing the file with images at two seqs while a reader loads it
    over and over: every load finds a whole file (one of the two images, caught up to
    the same table), never a torn one, and no temporary file is left."""
    import threading

    with cg.open(store, "agent", sync=False) as cx:
        older = cx._handle.column_index()
        with cx._env.read() as txn:
            older.refresh(txn)
            old_image = older.export()
        fill(cx, 10, start=5000)
        path = store / "agent" / SNAPSHOT_FILE
        snapshot = cx._handle.snapshot_file()
        expected = memory_state(built(cx))
        errors: list[BaseException] = []
        statuses: list[str] = []

        def write(image: Any) -> None:
            try:
                for _ in range(100):
                    with cx._env.read() as txn:
                        snapshot.save(image, txn)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        with cx._handle.indexed_read() as (_, index, _):
            new_image = index.export()
        images = (old_image, new_image)
        writers = [threading.Thread(target=write, args=(image,)) for image in images]
        for thread in writers:
            thread.start()
        while any(thread.is_alive() for thread in writers) or not statuses:
            index = loaded(cx)
            statuses.append(index.snapshot.status)  # type: ignore[attr-defined]
            assert memory_state(index) == expected
        for thread in writers:
            thread.join()
    assert not errors
    assert set(statuses) == {"loaded"} and len(statuses) > 10
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_writable_handle_that_found_the_file_unusable_replaces_it(store: Path) -> None:
    """A file whose header is whole but whose body is damaged claims to be current; a
    writable handle whose read found it unusable rewrites it on close all the same,
    while one that never read leaves it (it cannot know without reading it)."""
    path = store / "agent" / SNAPSHOT_FILE
    path.write_bytes(_flip(path.read_bytes(), 5000))
    with cg.open(store, "agent", sync=False):
        pass  # no read: the header says the file is current
    assert _status_and_check(store) == "damaged"
    with cg.open(store, "agent", sync=False) as cx:
        cx.find(cg.Q.type(cg.Fact), limit=1)
        assert cx._column_index().snapshot.status == "damaged"  # type: ignore[attr-defined]
    assert _status_and_check(store) == "loaded"


def test_rebuild_discards_the_column_snapshot(tmp_path: Path) -> None:
    """A rebuild remakes derived state from the journal; the column snapshot (built from
    the tables before it) is deleted, and the next read builds the index afresh."""
    import cortexgraph as cg
    from cortexgraph.index.snapshot import SNAPSHOT_FILE

    with cg.open(tmp_path, "a", clock=cg.ManualClock(1_700_000_000_000)) as cx:
        with cx.batch() as batch:
            for i in range(300):
                batch.write(cg.Fact(text=f"fact number {i} about billing", tags=("t",)))
        cx.find(cg.Q.tag("t"), limit=3)
    snapshot = tmp_path / "a" / SNAPSHOT_FILE
    assert snapshot.exists()
    with cg.open(tmp_path, "a") as cx:
        cx.rebuild()
        assert not snapshot.exists()
        assert len(cx.find(cg.Q.tag("t"), limit=500)) == 300
