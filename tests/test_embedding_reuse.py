"""Embeddings are computed once, by writers, and reused by every reader.

A writer embeds either at write time (``open(..., embed_on_write=True)``) or by an explicit,
resumable back-fill (``Cortex.backfill_embeddings``); a read-only handle then loads the
saved vector index, takes what it lacks from the ``emb`` cache, and embeds only its query.
What nobody embedded, a read-only handle embeds in memory, once for its whole life.
A counting fake embedder (HashEmbedder's vectors under HashEmbedder's name) proves each
claim by counting the texts handed to ``embed``.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

import cortexgraph as cg
from cortexgraph.cli import main
from cortexgraph.cortex import sync_vectors
from cortexgraph.embed import HashEmbedder
from cortexgraph.vector.hnsw import VectorIndex
from cortexgraph.vector.parallel import EMBED_BATCH
from cortexgraph.vector.state import save_due

ROOT = Path(__file__).resolve().parents[1]
DIM = 64
CHUNK = EMBED_BATCH  # the back-fill embeds and caches this many texts at a time
WORDS = ["deploy", "pipeline", "window", "lunch", "python", "rust", "cache", "index", "merge",
         "review", "friday", "release", "database", "backup", "token"]


class CountingFakeEmbedder:
    """A fake embedder for tests: HashEmbedder(DIM)'s vectors and name, recording the texts
    of every ``embed`` call (so a store made with it opens with HashEmbedder too)."""

    def __init__(self, on_call: Callable[[int], None] | None = None) -> None:
        self.inner = HashEmbedder(DIM)
        self.calls: list[list[str]] = []
        self.on_call = on_call

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        if self.on_call is not None:
            self.on_call(len(self.calls))
        return self.inner.embed(texts)

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]


def text_of(i: int) -> str:
    """A distinct text for memory ``i`` (so texts and vectors correspond one to one)."""
    return f"{WORDS[i % 15]} {WORDS[(i * 7) % 15]} {WORDS[(i // 15) % 15]} note {i}"


def write_store(root: Path, count: int, **options: object) -> None:
    """Write ``count`` memories in batches of 1,000 (no fsync: tests need no durability)."""
    with cg.open(root, "a", sync=False, embedder=HashEmbedder(DIM), **options) as cx:
        for start in range(0, count, 1000):
            with cx.batch() as batch:
                for i in range(start, min(count, start + 1000)):
                    batch.write(cg.Fact(text=text_of(i)), at=1_700_000_000_000 + i)


def cached_vectors(root: Path) -> int:
    with cg.open(root, "a", readonly=True) as cx:
        return cx.stats().tables["emb"]


def assert_reader_embeds_only_queries(root: Path) -> None:
    """A read-only handle answers vector and hybrid recall embedding only each query."""
    fake = CountingFakeEmbedder()
    with cg.open(root, "a", readonly=True, embedder=fake) as ro:
        hits = ro.recall("deploy cache note", k=5, mode="vector")
        assert len(hits) == 5
        assert fake.calls == [["deploy cache note"]]
        ro.recall("pipeline friday", k=5, mode="hybrid")
        assert fake.calls == [["deploy cache note"], ["pipeline friday"]]


@pytest.mark.slow
def test_read_only_recall_embeds_only_the_query_after_a_backfill(tmp_path: Path) -> None:
    """On a 20,000-memory store a writer back-filled, vector recall on a read-only handle
    embeds one text in one call: the query (the saved index is fresh, the cache full)."""
    count = 20_000
    write_store(tmp_path, count)
    fake = CountingFakeEmbedder()
    with cg.open(tmp_path, "a", sync=False, embedder=fake) as cx:
        assert cx.backfill_embeddings() == count
    assert len(fake.texts) == count and cached_vectors(tmp_path) == count
    assert_reader_embeds_only_queries(tmp_path)


@pytest.mark.slow
def test_read_only_recall_embeds_only_the_query_after_embedding_on_write(
    tmp_path: Path,
) -> None:
    """On a 20,000-memory store written with ``embed_on_write=True``, every memory is
    embedded once by the writer, the saved index lags the journal by less than its save
    rule allows (1,000 entries or a quarter of the saved ones), and a read-only handle
    embeds only its query."""
    count = 20_000
    fake = CountingFakeEmbedder()
    write_store(tmp_path, count, embed_on_write=True)
    with cg.open(tmp_path, "a", sync=False, embedder=fake, embed_on_write=True) as cx:
        cx.write(cg.Fact(text="one more, written by a second writer"))
    assert fake.texts == ["[fact] [default] one more, written by a second writer"]
    assert cached_vectors(tmp_path) == count + 1
    saved = VectorIndex.saved_watermark(tmp_path / "a" / "vectors", name=fake.name)
    assert saved is not None and not save_due(count + 1, saved)
    assert_reader_embeds_only_queries(tmp_path)


def test_read_only_handle_embeds_what_nobody_embedded_once(tmp_path: Path) -> None:
    """On a store nobody embedded, a read-only handle embeds each memory at most once over
    two recalls (it keeps its in-memory index), caches nothing, and the second recall
    embeds only its query."""
    count = 300
    write_store(tmp_path, count)
    fake = CountingFakeEmbedder()
    with cg.open(tmp_path, "a", readonly=True, embedder=fake) as ro:
        ro.recall("deploy cache", k=5, mode="vector")
        ro.recall("pipeline friday", k=5, mode="hybrid")
    seen = Counter(fake.texts)
    memories = [text for text in seen if text.startswith("[fact]")]
    assert len(memories) == count and max(seen.values()) == 1
    assert fake.calls[-1] == ["pipeline friday"]
    assert cached_vectors(tmp_path) == 0
    assert not (tmp_path / "a" / "vectors").exists()


def test_read_only_handle_reuses_what_a_writer_cached_and_embeds_the_rest(
    tmp_path: Path,
) -> None:
    """A reader takes the vectors a writer cached and embeds (in memory) only the memories
    written after the back-fill; ``sync_vectors`` reports how many and its progress."""
    write_store(tmp_path, 600)
    with cg.open(tmp_path, "a", sync=False) as cx:
        assert cx.backfill_embeddings() == 600
        with cx.batch() as batch:
            for i in range(600, 640):
                batch.write(cg.Fact(text=text_of(i)))
    fake = CountingFakeEmbedder()
    calls: list[tuple[int, int]] = []
    with cg.open(tmp_path, "a", readonly=True, embedder=fake) as ro:
        assert sync_vectors(ro, progress=lambda done, total: calls.append((done, total))) == 40
        assert sorted(fake.texts) == sorted(f"[fact] [default] {text_of(i)}"
                                            for i in range(600, 640))
        assert calls == [(0, 40), (40, 40)]
        assert sync_vectors(ro) == 0
        ro.recall("deploy", k=3, mode="vector")
        assert len(fake.calls) == 2  # the 40, then the query
    assert cached_vectors(tmp_path) == 600  # the reader cached nothing


def test_backfill_reports_progress_and_skips_what_is_cached(tmp_path: Path) -> None:
    """``backfill_embeddings`` reports ``(0, total)``, then after each chunk, ending at
    ``(total, total)``; it embeds only the active memories without a cached vector (not
    tombstoned ones), and a second run embeds nothing."""
    write_store(tmp_path, 700)
    fake = CountingFakeEmbedder()
    with cg.open(tmp_path, "a", sync=False, embedder=fake) as cx:
        cx.tombstone(cx.write(cg.Fact(text="forgotten before it was embedded")))
        calls: list[tuple[int, int]] = []
        assert cx.backfill_embeddings(progress=lambda d, t: calls.append((d, t))) == 700
        assert calls == [(0, 700), (256, 700), (512, 700), (700, 700)]
        assert [len(call) for call in fake.calls] == [256, 256, 188]
        assert cx.backfill_embeddings(progress=lambda d, t: calls.append((d, t))) == 0
        assert calls[-1] == (0, 0)
        assert len(fake.calls) == 3


def test_backfill_is_refused_on_a_read_only_handle(tmp_path: Path) -> None:
    """A read-only handle cannot back-fill: ReadOnlyError, nothing cached."""
    write_store(tmp_path, 10)
    with cg.open(tmp_path, "a", readonly=True) as ro, pytest.raises(cg.ReadOnlyError):
        ro.backfill_embeddings()
    assert cached_vectors(tmp_path) == 0


def test_backfill_checks_its_progress_argument(tmp_path: Path) -> None:
    """A progress that is not callable is a ValidationError naming ``progress``, before
    anything is embedded."""
    write_store(tmp_path, 10)
    with cg.open(tmp_path, "a") as cx, pytest.raises(cg.ValidationError) as err:
        cx.backfill_embeddings(progress=3)  # type: ignore[arg-type]
    assert err.value.field == "progress"
    assert cached_vectors(tmp_path) == 0


def test_embed_on_write_caches_new_and_changed_memories(tmp_path: Path) -> None:
    """With ``embed_on_write=True`` each committed batch's new and changed active memories
    are embedded (one call per batch) and cached; a tombstone embeds nothing."""
    fake = CountingFakeEmbedder()
    with cg.open(tmp_path, "a", sync=False, embedder=fake, embed_on_write=True) as cx:
        uri = cx.write(cg.Fact(text="deploys go through CI"))
        assert fake.calls == [["[fact] [default] deploys go through CI"]]
        with cx.batch() as batch:
            batch.write(cg.Constraint(text="never push to main"))
            batch.update(uri, text="deploys go through the CI pipeline")
        assert sorted(fake.calls[1]) == ["[constraint] [default] never push to main",
                                         "[fact] [default] deploys go through the CI pipeline"]
        cx.tombstone(uri)
        assert len(fake.calls) == 2
        assert cx.stats().tables["emb"] == 3


def test_embed_on_write_failure_keeps_the_write_and_warns(tmp_path: Path) -> None:
    """An embedder failing after a committed batch does not undo or fail the write (a
    caller could otherwise write it twice): a RuntimeWarning says a back-fill embeds it
    later, and a back-fill then does."""

    def fail(call: int) -> None:
        raise RuntimeError("model server is down")

    broken = CountingFakeEmbedder(on_call=fail)
    with cg.open(tmp_path, "a", sync=False, embedder=broken, embed_on_write=True) as cx:
        with pytest.warns(RuntimeWarning, match="backfill"):
            uri = cx.write(cg.Fact(text="deploys go through CI"))
        assert cx.resolve(uri).memory.text == "deploys go through CI"
        assert cx.stats().tables["emb"] == 0
    with cg.open(tmp_path, "a", sync=False) as cx:
        assert cx.backfill_embeddings() == 1


def test_embed_on_write_is_refused_on_a_read_only_handle(tmp_path: Path) -> None:
    """``embed_on_write`` must be a bool, and False on a read-only handle."""
    write_store(tmp_path, 1)
    for kwargs in ({"readonly": True, "embed_on_write": True}, {"embed_on_write": 1}):
        with pytest.raises(cg.ValidationError) as err:
            cg.open(tmp_path, "a", **kwargs)  # type: ignore[arg-type]
        assert err.value.field == "embed_on_write"


CHILD = """
import sys
import cortexgraph as cg
from cortexgraph.embed import HashEmbedder

class SignallingEmbedder:
    # HashEmbedder's vectors; on its third call (two chunks are cached by then) it says
    # so on stdout and blocks until it is killed
    name, dim = HashEmbedder(%(dim)d).name, %(dim)d

    def __init__(self):
        self.inner, self.calls = HashEmbedder(%(dim)d), 0

    def embed(self, texts):
        self.calls += 1
        if self.calls == 3:
            print("two chunks cached", flush=True)
            sys.stdin.read()  # the parent never writes: this blocks until SIGKILL
        return self.inner.embed(texts)

with cg.open(sys.argv[1], "a", embedder=SignallingEmbedder()) as cx:
    cx.backfill_embeddings()
print("finished", flush=True)
"""


@pytest.mark.slow
def test_backfill_resumes_after_sigkill(tmp_path: Path) -> None:
    """A back-fill killed by SIGKILL in its third chunk leaves the two chunks before it
    cached and a store that verifies; a second back-fill embeds exactly the rest."""
    count = 1000
    write_store(tmp_path, count)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD % {"dim": DIM}, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        assert child.stdout.readline() == b"two chunks cached\n"
    finally:
        child.kill()  # SIGKILL
        child.wait()
        child.stdout.close()
        child.stdin.close()
    assert child.returncode == -signal.SIGKILL
    assert cached_vectors(tmp_path) == 2 * CHUNK
    report = cg.verify(tmp_path)
    assert report.ok, report.to_dict()
    fake = CountingFakeEmbedder()
    with cg.open(tmp_path, "a", sync=False, embedder=fake) as cx:
        assert cx.backfill_embeddings() == count - 2 * CHUNK
    assert len(fake.texts) == count - 2 * CHUNK
    assert cached_vectors(tmp_path) == count
    assert_reader_embeds_only_queries(tmp_path)


# --- the command line -------------------------------------------------------------------------


class FakeTerminal(io.StringIO):
    """A stderr that says it is a terminal, so that progress bars are drawn into it."""

    def isatty(self) -> bool:
        return True


def test_cli_writes_embed_and_recall_embeds_only_the_query(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`remember` and `update` embed what they write, so the read-only `recall` finds the
    cache full: it embeds nothing before its query, prints no back-fill hint, and `backfill`
    has nothing left to do."""
    where = ["--root", str(tmp_path), "--actor", "a", "--json"]
    assert main(["remember", "deploys go through CI", *where]) == 0
    uri = json.loads(capsys.readouterr().out)["uri"]
    assert main(["update", uri, "--text", "deploys go through Argo", *where]) == 0
    capsys.readouterr()
    assert cached_vectors(tmp_path) == 2
    with cg.open(tmp_path, "a", readonly=True) as ro:
        assert sync_vectors(ro) == 0
    assert main(["recall", "argo", "--mode", "vector", *where[:-1]]) == 0
    out, err = capsys.readouterr()
    assert "deploys go through Argo" in out and err == ""
    assert main(["backfill", *where]) == 0
    assert json.loads(capsys.readouterr().out) == {"embedded": 0, "embedder": "hash-v1-384"}


def test_cli_read_only_recall_says_a_backfill_would_help(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only `recall` that must embed many memories shows a progress bar on a
    terminal and says on stderr that `cortexgraph backfill` would embed them once; after
    `backfill` (which shows its own progress), the hint is gone."""
    write_store(tmp_path, 300)
    where = ["--root", str(tmp_path), "--actor", "a"]
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["recall", "deploy cache", *where]) == 0
    err = terminal.getvalue()
    assert "300 memories have no cached vector" in err and "`cortexgraph backfill`" in err
    assert "embedding a: 100%" in err and "300/300" in err
    terminal.seek(0)
    terminal.truncate()
    assert main(["backfill", *where]) == 0
    assert "embedded 300 memories with hash-v1-64" in capsys.readouterr().out
    assert "embedding a: 100%" in terminal.getvalue()
    terminal.seek(0)
    terminal.truncate()
    assert main(["recall", "deploy cache", *where]) == 0
    assert terminal.getvalue() == ""
    assert cached_vectors(tmp_path) == 300


def test_cli_progress_bars_are_drawn_only_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rebuild` and `verify` draw their bars (tqdm) on a terminal stderr; not when stderr
    is not a terminal, nor with --json / --no-progress."""
    write_store(tmp_path, 50)
    where = ["--root", str(tmp_path), "--actor", "a"]
    assert main(["rebuild", *where]) == 0 and main(["verify", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["rebuild", *where, "--json"]) == 0
    assert main(["verify", str(tmp_path), "--no-progress"]) == 0
    assert terminal.getvalue() == ""
    assert main(["rebuild", *where]) == 0
    assert "rebuilding a: 100%" in terminal.getvalue()
    assert main(["verify", str(tmp_path)]) == 0
    assert "verifying a: 100%" in terminal.getvalue()
