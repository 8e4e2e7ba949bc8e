"""Crash safety: SIGKILL a writer at random moments and check what it left (J1, J3, J4).

``scripts/crash_writer.py`` loops forever writing batches of 1..25 operations; each batch
is a pure function of its number and the state the earlier batches left, and every entry
names its batch (see that file). The test kills it with SIGKILL - after a random time or
after a random number of committed batches, so that most kills land inside a batch - and
after every kill opens the store and checks:

- the journal is dense, 1..N, and what earlier runs committed is unchanged (J1);
- every batch is whole or absent, and the next run continued with the next batch (J3);
- every memory the new entries touched resolves, and its history is what the journal says.

After the last kill it checks every memory, replays the surviving journal through the
public API into a fresh store and compares every table's digest (nothing partial was left
in a derived table, J4), and runs the writer in-process, never killed, to the same batch:
the journal must be byte-identical, so recovery after each restart found exactly the
committed state.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest

import cortexgraph as cg
from cortexgraph.core.body import memory_from_body, memory_to_body

WRITER_PATH = Path(__file__).parent / "scripts" / "crash_writer.py"
WAIT_LIMIT_S = 60.0  # only reached if the writer hangs; the test then fails


def _load_writer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crash_writer", WRITER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


writer = _load_writer()
ACTOR: str = writer.ACTOR


class WriterProcess:
    """The writer as a subprocess, its stdout collected line by line by a thread."""

    def __init__(self, root: Path) -> None:
        self.lines: list[str] = []
        self.eof = False
        self.stderr = ""
        self._cond = threading.Condition()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER_PATH), str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),  # PYTHONPATH and CORTEXGRAPH_INVARIANTS=1 pass through
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.strip())
                self._cond.notify_all()
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    def wait_for(self, done: Callable[[list[str]], bool]) -> None:
        """Block until ``done(lines)`` holds; fail if the writer exits or hangs first."""
        with self._cond:
            ok = self._cond.wait_for(lambda: done(self.lines) or self.eof, WAIT_LIMIT_S)
            if ok and not self.eof:
                return
        self.kill()
        raise AssertionError(f"the writer stopped early: {self.failure()}")

    def kill(self) -> None:
        """SIGKILL the writer and collect everything it printed."""
        self.proc.kill()
        self.proc.wait()
        self._reader.join()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()

    def failure(self) -> str:
        return f"exit code {self.proc.returncode}, stderr:\n{self.stderr}"


def count_commits(lines: list[str]) -> int:
    return sum(1 for line in lines if line.startswith("commit "))


@attrs.define
class Memory:
    """What the journal says one memory is."""

    ns: str
    created_at: int
    versions: list[tuple[int, int, dict[str, Any]]]  # (seq, at, body) of version 1, 2, ...
    head: int = 1
    status: str = "active"


@attrs.define
class Model:
    """The journal the test has checked so far, and what it says about each memory."""

    raw: list[bytes] = attrs.field(factory=list)
    memories: dict[bytes, Memory] = attrs.field(factory=dict)
    last_batch: int = 0

    def apply(self, entry: cg.Entry) -> None:
        mid, fields = entry.fields["id"], entry.fields
        if entry.op == "write":
            assert mid not in self.memories
            version = (entry.seq, entry.at, fields["body"])
            self.memories[mid] = Memory(entry.ns, entry.at, [version])
            return
        memory = self.memories[mid]
        assert memory.status == "active"
        if entry.op == "update":
            assert fields["version"] == len(memory.versions) + 1
            memory.versions.append((entry.seq, entry.at, fields["body"]))
            memory.head = fields["version"]
        elif entry.op == "head":
            memory.head = fields["version"]
        else:
            assert entry.op == "tombstone"
            memory.status = "tombstoned"


def check_batches(entries: list[cg.Entry], first_batch: int) -> int:
    """Check that ``entries`` are whole batches ``first_batch, first_batch + 1, ...``.

    Returns the number of the last batch (``first_batch - 1`` if there is none).
    """
    n = first_batch - 1
    for n, group in itertools.groupby(entries, key=lambda e: writer.batch_of(e.at)[0]):
        batch = list(group)
        k = writer.batch_size(n)
        assert n == first_batch, f"batch {first_batch} is missing (found batch {n})"
        assert [writer.batch_of(e.at)[1] for e in batch] == list(range(k)), f"batch {n} is torn"
        for i, entry in enumerate(batch):
            if entry.op in ("write", "update"):
                body = entry.fields["body"]
                assert {f"batch-{n}", f"size-{k}"} <= set(body["tags"])
                assert body["text"].startswith(f"batch {n} op {i}: ")
            elif entry.op == "tombstone":
                assert entry.fields["reason"] == f"batch-{n} size-{k} op-{i}"
        first_batch += 1
    return n


def check_memories(cx: cg.Cortex, model: Model, ids: Iterable[bytes]) -> None:
    """Every memory in ``ids`` resolves, and its history is what the journal says."""
    for mid in ids:
        memory = model.memories[mid]
        latest = len(memory.versions)
        expected = [
            (v, seq, at, body, memory.head, latest, memory.status, memory.created_at)
            for v, (seq, at, body) in enumerate(memory.versions, start=1)
        ]
        actual = [
            (
                r.version,
                r.seq,
                r.at,
                memory_to_body(r.memory),
                r.head,
                r.latest,
                r.status,
                r.created_at,
            )
            for r in cx.history(mid)
        ]
        assert expected == actual
        head_uri = cg.MemoryURI(ACTOR, memory.ns, mid)
        assert head_uri.at_version(memory.head) == cx.resolve(head_uri).uri


def check_after_kill(root: Path, model: Model, lines: list[str]) -> bool:
    """Open the store a killed writer left, check it, and advance ``model`` to it.

    Returns whether the kill rolled back a batch the writer had begun.
    """
    ready = [int(line.split()[1]) for line in lines if line.startswith("ready ")]
    assert ready in ([], [model.last_batch + 1]), "the writer did not resume after the store"
    if not (root / ACTOR / "data.mdb").exists():  # killed before it created the store
        assert model.raw == []
        return False
    with cg.open(root, ACTOR, create=False, sync=False) as cx:
        raw = list(cx.journal_bytes())
        assert [seq for seq, _ in raw] == list(range(1, len(raw) + 1))
        assert cx.seq == len(raw)
        old = len(model.raw)
        assert [data for _, data in raw[:old]] == model.raw, "committed entries changed"
        new = list(cx.journal(since=old))
        assert [e.seq for e in new] == list(range(old + 1, len(raw) + 1))
        last_batch = check_batches(new, model.last_batch + 1)
        for entry in new:
            model.apply(entry)
        check_memories(cx, model, dict.fromkeys(e.fields["id"] for e in new))
    model.raw.extend(data for _, data in raw[old:])
    model.last_batch = last_batch
    # What the writer reported agrees with the store: every batch it saw commit is there,
    # and nothing beyond the batch it had begun.
    begun = [int(line.split()[1]) for line in lines if line.startswith("begin ")]
    committed = [int(line.split()[1]) for line in lines if line.startswith("commit ")]
    assert max(committed, default=0) <= last_batch <= max(begun, default=last_batch)
    return bool(lines) and lines[-1].startswith("begin ") and last_batch < begun[-1]


def replay(entries: list[cg.Entry], root: Path) -> cg.Cortex:
    """A fresh store built by replaying ``entries`` through the public API, batch by batch."""
    cx = cg.open(root, ACTOR, sync=False)
    for _, group in itertools.groupby(entries, key=lambda e: writer.batch_of(e.at)[0]):
        with cx.batch() as b:
            for e in group:
                mid, fields = e.fields["id"], e.fields
                if e.op == "write":
                    uri = b.write(memory_from_body(fields["body"]), ns=e.ns, at=e.at)
                    assert mid == uri.id
                elif e.op == "update":
                    changes = attrs.asdict(memory_from_body(fields["body"]), recurse=False)
                    assert fields["version"] == b.update(mid, at=e.at, **changes).version
                elif e.op == "head":
                    b.update_head(mid, version=fields["version"], at=e.at)
                else:
                    b.tombstone(mid, reason=fields.get("reason", ""), at=e.at)
    return cx


@pytest.mark.parametrize(
    ("kills", "seed"),
    [pytest.param(24, 20240601, id="24-kills"), pytest.param(150, 7, marks=pytest.mark.slow)],
)
def test_sigkill_leaves_whole_batches_and_a_replayable_journal(
    tmp_path: Path, kills: int, seed: int
) -> None:
    """SIGKILL at random moments never leaves a torn batch, a gap or a partial derived table.

    Each kill is followed by the checks in the module docstring; the next writer run
    recovers from the journal and appends after it. At the end the surviving journal,
    replayed through the public API, rebuilds byte-identical tables, and an uninterrupted
    run of the same batches writes a byte-identical journal.
    """
    rng = random.Random(seed)
    root = tmp_path / "crashed"
    model = Model()
    rolled_back = grew = 0
    for kill in range(kills):
        run = WriterProcess(root)
        if kill % 2 == 0:  # a random time after the start: in start-up, recovery or a batch
            time.sleep(max(0.0, run.started + rng.uniform(0.03, 0.4) - time.monotonic()))
        else:  # a random number of commits, then up to about two batches' time
            target = rng.randint(1, 40)
            run.wait_for(lambda lines, target=target: count_commits(lines) >= target)
            time.sleep(rng.uniform(0.0, 0.005))
        exited = run.proc.poll() is not None
        run.kill()
        assert not exited, f"the writer exited by itself: {run.failure()}"
        assert run.proc.returncode == -signal.SIGKILL, run.failure()
        before = len(model.raw)
        rolled_back += check_after_kill(root, model, run.lines)
        grew += len(model.raw) > before

    # The kills did what the test is about: the writer made progress in most runs, and
    # several kills landed inside a batch that had not committed yet.
    assert grew >= kills // 2
    assert rolled_back >= kills // 6

    with cg.open(root, ACTOR, create=False, sync=False) as cx:
        check_memories(cx, model, model.memories)
        entries = list(cx.journal())
        digests = cx.table_digests()
    assert model.last_batch == writer.batch_of(entries[-1].at)[0]

    with replay(entries, tmp_path / "replayed") as rebuilt:
        assert model.raw == [data for _, data in rebuilt.journal_bytes()]
        assert digests == rebuilt.table_digests()

    with cg.open(tmp_path / "reference", ACTOR, sync=False) as reference:
        writer.run_batches(reference, writer.State(), model.last_batch)
        assert model.raw == [data for _, data in reference.journal_bytes()]
        assert digests == reference.table_digests()
