"""A large catch-up embeds part of its texts in a helper process (``vector.parallel``):
the vectors, the cache and the answers are those of embedding in process, byte for byte,
whether the worker runs, fails, dies or hangs; only worker-safe embedders get one.

The worker runs when a catch-up has ``WORKER_MIN`` texts; the tests lower it (and claim
two CPUs, so that they exercise the worker on a machine with one). The embedders below
live at module level so that the worker can unpickle them (it imports this module).
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

import cortexgraph as cg
from cortexgraph.cortex import sync_vectors
from cortexgraph.embed import HashEmbedder
from cortexgraph.errors import EmbedderError
from cortexgraph.vector import parallel
from cortexgraph.vector.parallel import EmbedWorker, worker_capacity

DIM = 32
WORDS = ["deploy", "pipeline", "window", "lunch", "python", "rust", "cache", "index", "merge",
         "review", "friday", "release", "database", "backup", "token"]  # fmt: skip


class DiesInWorker(HashEmbedder):
    """HashEmbedder's vectors, but a worker process that uses it exits at its second call."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.home = os.getpid()
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        if os.getpid() != self.home and self.calls > 1:
            os._exit(3)
        return super().embed(texts)


class HangsInWorker(HashEmbedder):
    """HashEmbedder's vectors, but in a worker process it never returns."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.home = os.getpid()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if os.getpid() != self.home:
            threading.Event().wait()  # blocks for good: the parent must give up on it
        return super().embed(texts)


class RefusesOne(HashEmbedder):
    """Fails on one text, in whichever process embeds it."""

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if any("poison" in text for text in texts):
            raise ValueError("cannot embed the poison text")
        return super().embed(texts)


class Unmarked:
    """HashEmbedder's vectors without its ``worker_safe`` declaration."""

    def __init__(self, dim: int) -> None:
        self._inner = HashEmbedder(dim)
        self.name, self.dim = self._inner.name, dim

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._inner.embed(texts)


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[EmbedWorker]]:
    """Workers for catch-ups of 100 texts or more, on any machine; the list of those
    started."""
    started: list[EmbedWorker] = []
    start = EmbedWorker.start.__func__  # type: ignore[attr-defined]

    def spy(cls: type[EmbedWorker], embedder: object, capacity: int) -> EmbedWorker | None:
        worker: EmbedWorker | None = start(cls, embedder, capacity)
        if worker is not None:
            started.append(worker)
        return worker

    monkeypatch.setattr(parallel, "WORKER_MIN", 100)
    monkeypatch.setattr(parallel, "_cpus", lambda: 2)
    monkeypatch.setattr(EmbedWorker, "start", classmethod(spy))
    yield started


@pytest.fixture
def patient(workers: list[EmbedWorker], monkeypatch: pytest.MonkeyPatch) -> list[EmbedWorker]:
    """Workers whose catch-up waits until they reported every row or ended before it
    collects (without this, this process may embed all their rows itself, and a test
    would not see theirs used)."""
    collect = EmbedWorker.collect

    def waiting(self: EmbedWorker, *args: object) -> int:
        self.flush()
        self._close_input()
        while self.done < self.sent and not self.failed:
            self.poll(5.0)
        return collect(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(EmbedWorker, "collect", waiting)
    return workers


def text_of(i: int) -> str:
    words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(5)]
    return f"{' '.join(words)} note {i % 150}"  # every text twice in 300


def write_store(root: Path, count: int, *, poison: bool = False) -> None:
    with cg.open(root, "a", sync=False, embedder=HashEmbedder(DIM)) as cx:
        with cx.batch() as batch:
            uris = [batch.write(cg.Fact(text=text_of(i))) for i in range(count)]
            if poison:
                batch.write(cg.Fact(text="the poison text"))
        cx.tombstone(uris[5], reason="gone")


def catch_up(root: Path, embedder: object) -> tuple[int, bytes, list[tuple[bytes, bytes]], list]:
    """Catch the vector index of the store at ``root`` up; what was embedded, the index's
    vectors, the cache rows and the answers of a few vector recalls."""
    with cg.open(root, "a", sync=False, embedder=embedder) as cx:
        embedded = sync_vectors(cx)
        h = cx._handle
        index = h.vector_state().index
        vectors = index._vectors()[: len(index._ids)].tobytes()
        with h.env.read() as txn, txn.cursor("emb") as cur:
            cache = [(bytes(key), bytes(value)) for key, value in cur]
        answers = [
            [(str(hit.uri), hit.score) for hit in cx.recall(query, k=5, mode="vector").hits]
            for query in ("deploy pipeline", "lunch window friday", "rust merge")
        ]
    return embedded, vectors, cache, answers


def copy_of(root: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(root, target)
    return target


def test_a_catch_up_with_a_worker_gives_what_one_without_gives(
    tmp_path: Path, patient: list[EmbedWorker]
) -> None:
    """With a worker embedding most of 300 texts (each given twice, one memory
    tombstoned), the count embedded, the index's vectors, the cache rows and the answers
    are those of the catch-up in process, byte for byte."""
    workers = patient
    write_store(tmp_path / "s", 300)
    with_worker = catch_up(copy_of(tmp_path / "s", tmp_path, "w"), HashEmbedder(DIM))
    assert len(workers) == 1 and workers[0].sent == int(299 * parallel.WORKER_SHARE)
    assert workers[0].done == workers[0].sent and not workers[0].failed
    parallel.WORKER_MIN = 10**9  # the fixture restores it
    alone = catch_up(copy_of(tmp_path / "s", tmp_path, "a"), HashEmbedder(DIM))
    assert len(workers) == 1
    assert with_worker == alone
    assert with_worker[0] == 150  # distinct texts
    assert len(with_worker[2]) == 150


def test_a_worker_that_dies_is_replaced_by_this_process(
    tmp_path: Path, patient: list[EmbedWorker]
) -> None:
    """A worker that exits midway is reaped, and this process embeds what it did not
    report: the same vectors, cache and answers as a catch-up without a worker."""
    write_store(tmp_path / "s", 600)  # the worker's share takes two calls
    got = catch_up(copy_of(tmp_path / "s", tmp_path, "w"), DiesInWorker(DIM))
    (worker,) = patient
    assert worker.failed and worker.done == 256 < worker.sent
    assert worker._proc.returncode == 3  # reaped
    parallel.WORKER_MIN = 10**9
    assert got == catch_up(copy_of(tmp_path / "s", tmp_path, "a"), HashEmbedder(DIM))


def test_a_worker_that_hangs_costs_nothing_but_its_share(
    tmp_path: Path, workers: list[EmbedWorker]
) -> None:
    """A worker that never answers is killed and reaped once this process has embedded
    its whole share itself (no timeout to wait for): the same vectors, cache and answers
    as a catch-up without a worker."""
    write_store(tmp_path / "s", 600)
    got = catch_up(copy_of(tmp_path / "s", tmp_path, "w"), HangsInWorker(DIM))
    (worker,) = workers
    assert worker.done == 0 and worker.sent > 0
    assert worker._proc.returncode is not None and worker._proc.returncode < 0  # killed
    parallel.WORKER_MIN = 10**9
    assert got == catch_up(copy_of(tmp_path / "s", tmp_path, "a"), HashEmbedder(DIM))


def test_an_embedder_error_surfaces_as_without_a_worker(
    tmp_path: Path, workers: list[EmbedWorker]
) -> None:
    """An embedder that fails on a text the worker was given fails the catch-up with the
    EmbedderError it gives in process, and the worker is reaped."""
    write_store(tmp_path / "s", 300, poison=True)
    with (
        cg.open(tmp_path / "s", "a", sync=False, embedder=RefusesOne(DIM)) as cx,
        pytest.raises(EmbedderError, match="cannot embed the poison text"),
    ):
        sync_vectors(cx)
    (worker,) = workers
    assert worker._proc.returncode is not None  # reaped


def test_the_progress_counts_the_workers_rows_and_ends_full(
    tmp_path: Path, workers: list[EmbedWorker]
) -> None:
    """Progress with a worker starts at 0, never goes back, and ends at the total."""
    write_store(tmp_path / "s", 300)
    calls: list[tuple[int, int]] = []
    with cg.open(tmp_path / "s", "a", sync=False, embedder=HashEmbedder(DIM)) as cx:
        assert sync_vectors(cx, progress=lambda done, total: calls.append((done, total))) == 150
    assert workers
    assert calls[0] == (0, 150) and calls[-1] == (150, 150)
    assert all(a[0] < b[0] for a, b in itertools.pairwise(calls))


def test_only_large_catch_ups_with_worker_safe_embedders_get_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """worker_capacity: WORKER_SHARE of the texts for a worker-safe embedder with at
    least WORKER_MIN of them on two CPUs; none otherwise. An embedder without the
    declaration is embedded in process, whatever the count."""
    monkeypatch.setattr(parallel, "_cpus", lambda: 2)
    count = parallel.WORKER_MIN
    assert worker_capacity(HashEmbedder(DIM), count) == int(count * parallel.WORKER_SHARE)
    assert worker_capacity(HashEmbedder(DIM), count - 1) == 0
    assert worker_capacity(Unmarked(DIM), 10 * count) == 0  # type: ignore[arg-type]
    monkeypatch.setattr(parallel, "_cpus", lambda: 1)
    assert worker_capacity(HashEmbedder(DIM), 10 * count) == 0


def test_a_worker_that_cannot_start_leaves_the_work_here(
    tmp_path: Path, workers: list[EmbedWorker], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No interpreter to run (an embedded Python) or an embedder that does not pickle (a
    class defined in a function): no worker, the same answers."""

    class Local(HashEmbedder):
        pass

    write_store(tmp_path / "s", 300)
    assert EmbedWorker.start(Local(DIM), 200) is None
    monkeypatch.setattr(parallel.sys, "executable", "")
    got = catch_up(copy_of(tmp_path / "s", tmp_path, "w"), HashEmbedder(DIM))
    assert workers == []
    parallel.WORKER_MIN = 10**9
    assert got == catch_up(copy_of(tmp_path / "s", tmp_path, "a"), HashEmbedder(DIM))


def test_the_worker_embeds_what_it_is_sent_up_to_its_capacity() -> None:
    """EmbedWorker on its own: it takes texts up to its capacity, and collect gives the
    embedder's rows of the texts it took, byte for byte, whether the worker embedded them
    or this process did (from the end, while waiting)."""
    texts = [text_of(i) + " ü straße" * (i % 3) for i in range(700)]
    embedder = HashEmbedder(DIM)
    worker = EmbedWorker.start(embedder, 600)
    assert worker is not None
    here: list[tuple[int, int]] = []
    out = np.zeros((600, DIM), dtype=np.float32)

    def embed_here(start: int, stop: int) -> None:
        here.append((start, stop))
        out[start:stop] = embedder.embed(texts[start:stop])

    with worker:
        assert worker.send(texts[:400]) == 400
        assert worker.send(texts[400:]) == 200  # its room
        assert worker.send(texts) == 0
        from_worker = worker.collect(out, embed_here)
    assert worker._proc.returncode is not None
    assert from_worker == (here[-1][0] if here else 600)
    assert all(stop - start <= parallel.EMBED_BATCH for start, stop in here)
    assert out.tobytes() == embedder.embed(texts[:600]).tobytes()
