"""Long-lived handles, several processes, bad paths: the store stays usable and every
failure is a typed error.

- Growing the map while reads are live in this process (a recall that fills the embedding
  cache right after a batch outgrew a 64 KiB map; reader threads against a writer).
- A map grown by another process, seen by long-lived read-write and read-only handles.
- ``close`` when saving the vector index fails.
- ``open`` on paths and options that are not a store, and on a foreign LMDB environment.
"""

from __future__ import annotations

import errno
import hashlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import lmdb
import pytest

import cortexgraph as cg
from cortexgraph.vector.hnsw import VectorIndex

TINY = 1 << 16
T0 = 1_700_000_000_000
FILLER = "lorem ipsum dolor sit amet " * 18  # ~500 characters


def _data_size(path: Path) -> int:
    return (path / "data.mdb").stat().st_size


def test_recall_after_a_batch_outgrew_a_tiny_map(tmp_path: Path) -> None:
    """300 memories of ~500 characters in one batch on a 64 KiB map, then a hybrid recall,
    which writes the embedding cache while its read is live: the map grows again under
    the read, and the recall answers."""
    with cg.open(tmp_path, "a", map_size=TINY, sync=False, clock=cg.ManualClock(T0)) as cx:
        with cx.batch() as b:
            uris = [b.write(cg.Fact(text=f"note{i} {FILLER}")) for i in range(300)]
        size = _data_size(cx.path)
        hits = cx.recall("note17 lorem", k=3)
        assert hits[0].uri == uris[17]
        vector = cx.recall("note17 lorem", k=3, mode="vector")
        assert len(vector) == 3
        assert _data_size(cx.path) > size  # the cache rows needed more map
        assert cx.resolve(uris[299]).memory.text.startswith("note299 ")


def test_reader_threads_read_while_a_writer_grows_the_map(tmp_path: Path) -> None:
    """Two threads find, recall and resolve in a loop while the main thread writes batches
    that double a 64 KiB map many times: no read fails, and every read sees whole batches
    (the count of memories seen is always a multiple of the batch size)."""
    per_batch, batches = 20, 40
    cx = cg.open(tmp_path, "a", map_size=TINY, sync=False, clock=cg.ManualClock(T0))
    done = threading.Event()
    errors: list[BaseException] = []
    counts: list[int] = []

    def read() -> None:
        while not done.is_set():
            try:
                found = cx.find(cg.Q.tag("bulk"), limit=10_000)
                counts.append(len(found))
                if len(found):
                    cx.resolve(found[0].uri)
                    cx.recall("bulk note", k=5)
            except BaseException as exc:  # every failure fails the test
                errors.append(exc)
                return

    threads = [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for i in range(batches):
            with cx.batch() as b:
                for j in range(per_batch):
                    b.write(cg.Fact(text=f"bulk note {i}/{j} {FILLER}", tags=["bulk"]))
    finally:
        done.set()
        for thread in threads:
            thread.join()
    try:
        assert errors == []
        assert counts and all(count % per_batch == 0 for count in counts)
        assert len(cx.find(cg.Q.tag("bulk"), limit=10_000)) == per_batch * batches
        assert _data_size(cx.path) > 16 * TINY  # at least four doublings under the readers
    finally:
        cx.close()


GROW_ELSEWHERE = """
import sys, cortexgraph as cg
with cg.open(sys.argv[1], "a", sync=False, clock=cg.ManualClock(1_800_000_000_000)) as cx:
    with cx.batch() as b:
        for i in range(2000):
            b.write(cg.Fact(text=f"elsewhere{i} " + "x y z w " * 120, tags=["far"]))
"""


def _grow_in_another_process(root: Path) -> None:
    subprocess.run([sys.executable, "-c", GROW_ELSEWHERE, str(root)], check=True)


@pytest.mark.parametrize("readonly", [False, True])
def test_handles_outlive_growth_by_another_process(tmp_path: Path, readonly: bool) -> None:
    """A long-lived handle keeps working after another process grew the map far beyond
    its own: reads see the other process's writes, and a read-write handle writes on."""
    with cg.open(tmp_path, "a", map_size=TINY, sync=False, clock=cg.ManualClock(T0)) as cx:
        first = cx.write(cg.Fact(text="written before the other process", tags=["near"]))
    # a small map: the other process's growth takes the data file far beyond it
    cx = cg.open(
        tmp_path, "a", readonly=readonly, map_size=TINY, sync=False, clock=cg.ManualClock(T0)
    )
    try:
        assert cx.resolve(first).version == 1
        before = _data_size(cx.path)
        _grow_in_another_process(tmp_path)
        assert _data_size(cx.path) > 64 * before
        assert cx.seq == 2001
        assert len(cx.find(cg.Q.tag("far"), limit=5000)) == 2000
        assert cx.recall("elsewhere1999", k=1, mode="keyword")[0].record.memory.text.startswith(
            "elsewhere1999 "
        )
        assert len(list(cx.journal(since=1990))) == 11
        if not readonly:
            again = cx.write(cg.Fact(text="written after", tags=["near"]))
            assert cx.resolve(again).seq == 2002
            _grow_in_another_process(tmp_path)  # and once more, with the write's map
            assert len(cx.find(cg.Q.tag("far"), limit=5000)) == 4000
    finally:
        cx.close()
    assert cg.verify(tmp_path, "a").ok


def test_close_closes_even_when_the_vector_index_cannot_be_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed save of the vector index (a full disk) still closes the handle: ``close``
    raises StorageError after closing, ``closed`` is True, and the store reopens."""
    cx = cg.open(tmp_path, "a", sync=False, clock=cg.ManualClock(T0))
    uri = cx.write(cg.Fact(text="an indexed memory"))
    assert len(cx.recall("indexed memory", k=1, mode="vector")) == 1

    def no_space(self: VectorIndex, watermark: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(VectorIndex, "save", no_space)
    with pytest.raises(cg.StorageError, match="vector index could not be saved"):
        cx.close()
    assert cx.closed
    monkeypatch.undo()
    with cg.open(tmp_path, "a", sync=False) as again:
        assert again.resolve(uri).memory.text == "an indexed memory"
        assert again.recall("indexed memory", k=1, mode="vector")[0].uri == uri


@pytest.mark.parametrize(
    ("make", "kwargs", "field"),
    [
        ("root-file", {}, "root"),
        ("actor-file", {}, "actor"),
        ("none", {}, "root"),
        ("bytes", {}, "root"),
        ("dir", {"map_size": 2**70}, "map_size"),
        ("dir", {"readonly": "yes"}, "readonly"),
    ],
)
def test_open_rejects_what_is_not_a_store_path(
    tmp_path: Path, make: str, kwargs: dict[str, object], field: str
) -> None:
    """A root that is a file, an actor path that is a file, a root that is None or bytes,
    a map larger than the largest one, a non-bool flag: ValidationError naming the field,
    and nothing created."""
    root: object = tmp_path / "root"
    if make == "root-file":
        (tmp_path / "root").write_text("not a directory")
    elif make == "actor-file":
        (tmp_path / "root").mkdir()
        (tmp_path / "root" / "a").write_text("not a directory")
    elif make == "none":
        root = None
    elif make == "bytes":
        root = bytes(tmp_path / "root")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(cg.ValidationError) as caught:
        cg.open(root, "a", **kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def _foreign_env(path: Path) -> str:
    """An LMDB environment made by another program (a named table and a key in the main
    database); returns the SHA-256 of its data file."""
    env = lmdb.open(str(path), max_dbs=4, map_size=1 << 20)
    with env.begin(write=True) as txn:
        other = env.open_db(b"settings", txn=txn)
        txn.put(b"theme", b"dark", db=other)
    env.close()
    return hashlib.sha256((path / "data.mdb").read_bytes()).hexdigest()


@pytest.mark.parametrize("readonly", [False, True])
def test_open_refuses_a_foreign_lmdb_environment(tmp_path: Path, readonly: bool) -> None:
    """``open`` on an LMDB environment that another program made raises StorageError
    naming it, and leaves its data file byte for byte as it was (no table is added)."""
    digest = _foreign_env(tmp_path / "foreign")
    with pytest.raises(cg.StorageError, match="not a cortexgraph store"):
        cg.open(tmp_path, "foreign", readonly=readonly)
    assert hashlib.sha256((tmp_path / "foreign" / "data.mdb").read_bytes()).hexdigest() == digest
    with cg.open(tmp_path, "mine") as cx:  # a store beside it is unaffected
        cx.write(cg.Fact(text="still fine"))


def test_an_empty_lmdb_file_is_a_store_to_create(tmp_path: Path) -> None:
    """A crash after LMDB created its file but before the store's one creating transaction
    committed leaves an empty environment: ``open`` creates the store in it, and a
    read-only open of it says there is no store (NotFoundError)."""
    lmdb.open(str(tmp_path / "a"), map_size=1 << 20).close()
    with pytest.raises(cg.NotFoundError, match="empty"):
        cg.open(tmp_path, "a", readonly=True)
    with cg.open(tmp_path, "a", clock=cg.ManualClock(T0)) as cx:
        uri = cx.write(cg.Fact(text="created in an empty environment"))
    with cg.open(tmp_path, "a", readonly=True) as cx:
        assert cx.resolve(uri).version == 1


def _until(condition: Callable[[], bool]) -> None:
    """Spin (yielding the GIL) until ``condition()`` holds; fail after 30 s."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0)


def test_a_resize_waits_for_live_reads_admits_nested_ones_and_holds_new_ones_back(
    tmp_path: Path,
) -> None:
    """While a thread reads, a resize waits for it (it would invalidate the read); that
    thread may still begin a nested read (or it would wait for the resize that waits for
    it); a read begun by another thread once the resize is pending runs after it, and sees
    the doubled map."""
    cx = cg.open(tmp_path, "a", map_size=TINY, sync=False)
    env, gate = cx._env, cx._env._gate
    size = env.map_size()
    reading, release = threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def holder() -> None:
        with env.read():
            reading.set()
            _until(lambda: gate._resizing)
            with env.read():
                seen["nested"] = env.map_size()
            release.wait()
            seen["holder"] = env.map_size()

    def newcomer() -> None:
        with env.read():
            seen["newcomer"] = env.map_size()

    first = threading.Thread(target=holder)
    first.start()
    reading.wait()
    resize = threading.Thread(target=env.grow)
    resize.start()
    _until(lambda: gate._resizing)
    later = threading.Thread(target=newcomer)
    later.start()
    _until(lambda: later.ident is not None)
    assert "newcomer" not in seen or seen["newcomer"] == 2 * size
    release.set()
    for thread in (first, resize, later):
        thread.join()
    try:
        assert seen == {"nested": size, "holder": size, "newcomer": 2 * size}
        assert env.map_size() == 2 * size
    finally:
        cx.close()
