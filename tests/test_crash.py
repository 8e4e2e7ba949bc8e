"""Crash safety: SIGKILL a writer at chosen moments and check what it left (J1, J3, J4).

``scripts/crash_writer.py`` loops forever writing batches of 1..25 operations (memories,
versions, head moves, tombstones, edges added and removed) on a map small enough to grow
several times, recalling and saving its vector index every few batches; each batch is a pure
function of its number and the state the earlier batches left, and every entry names its
batch (see that file). The test SIGKILLs it in five ways, in turn, so that kills land in
every window around LMDB's commit:

- ``time``: after a random time (in start-up, recovery, a batch, a recall or an index save);
- ``commits``: after a random number of committed batches, then up to a few milliseconds;
- ``paused``: the writer stops right before LMDB commits a chosen batch, and is killed there;
- ``inside``: while it is paused, ``strace`` attaches and kills it at the entry of one of the
  commit's writes of data pages to ``data.mdb`` (the first single page, or the first to
  third run of pages); or, every other time, ``gdb`` attaches and kills it at LMDB's
  ``mdb_env_write_meta``, when every data page is written and the meta page is not;
- ``after``: ``gdb`` lets that commit take effect and kills it at the next commit's meta
  page (whatever the writer did in between has happened), or, every other time,
  ``strace`` kills it at its first ``flock`` after the pause: the writer lock's release,
  after the commit and before the writer could report it.

Every kill is checked to be the SIGKILL (the writer never exits by itself), and after each
one the test opens the store and checks:

- the journal is dense, 1..N, and what earlier runs committed is unchanged (J1);
- every batch is whole or absent, and the next run continued with the next batch (J3);
- a kill inside the commit left the batch out, one after it left the batch in;
- every memory and edge the new entries touched reads back as the journal says;
- the vector index on disk reflects at least the writer's last save.

After the last kill it checks every memory, replays the surviving journal through the
public API into a fresh store and compares every table's digest (nothing partial was left
in a derived table, J4), compares vector recall with a fresh index, and runs the writer
in-process, never killed, to the same batch: the journal must be byte-identical, so
recovery after each restart found exactly the committed state.

Not covered: power loss or an OS crash (the writer runs with ``sync=False``, and a kill
never loses what the kernel was handed); see ``docs/reliability.md``.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import random
import shutil
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
from cortexgraph.cortex import sync_vectors
from cortexgraph.embed import HashEmbedder
from cortexgraph.vector.hnsw import VectorIndex

WRITER_PATH = Path(__file__).parent / "scripts" / "crash_writer.py"
WAIT_LIMIT_S = 60.0  # only reached if the writer hangs; the test then fails
MODES = ("time", "commits", "paused", "inside", "after")
STRACE, GDB = shutil.which("strace"), shutil.which("gdb")
# Killing inside or right after LMDB's commit needs them; without them those kills become
# "paused" ones (right before the commit) and the inside and after windows go unchecked.
TRACERS = STRACE is not None and GDB is not None


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

    def __init__(self, root: Path, pause_batch: int | None = None) -> None:
        self.root = root
        self.lines: list[str] = []
        self.eof = False
        self.stderr = ""
        self._cond = threading.Condition()
        self.started = time.monotonic()
        pause = [] if pause_batch is None else [str(pause_batch)]
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER_PATH), str(root), *pause],
            stdin=subprocess.PIPE,
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

    def go(self) -> None:
        """Let a paused writer commit."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """SIGKILL the writer (unless it died already) and collect everything it printed."""
        self.proc.kill()
        self.collect()

    def collect(self) -> None:
        """Wait for the writer's death and collect everything it printed."""
        try:
            self.proc.wait(WAIT_LIMIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        assert self.proc.stdin is not None
        self.stderr = self.proc.stderr.read()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            pipe.close()

    def failure(self) -> str:
        return f"exit code {self.proc.returncode}, stderr:\n{self.stderr}"


def count_commits(lines: list[str]) -> int:
    return sum(1 for line in lines if line.startswith("commit "))


def numbers(lines: list[str], word: str) -> list[int]:
    """The numbers of the writer's ``<word> <number>`` lines, in order."""
    return [int(line.split()[1]) for line in lines if line.startswith(f"{word} ")]


def strace_kill(run: WriterProcess, path: Path, inject: list[str], log: Path) -> str:
    """Attach ``strace`` to the paused writer, let it go, and have strace SIGKILL it at the
    entry of the first system call on ``path`` that an ``inject`` expression names.

    Returns the system call it was killed in (the last one strace saw, unfinished).
    """
    assert STRACE is not None
    command = [STRACE, "-p", str(run.proc.pid), "-o", str(log), "-y", "-s", "0", "-P", str(path)]
    command += ["-e", "trace=pwrite64,writev,flock"]
    for expression in inject:
        command += ["-e", f"inject={expression}:signal=SIGKILL"]
    tracer = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert tracer.stderr is not None
    attached = tracer.stderr.readline()  # "strace: Process N attached"
    assert "attached" in attached, attached + tracer.stderr.read()
    run.go()
    run.collect()
    tracer.wait(WAIT_LIMIT_S)
    tracer.stderr.close()
    calls = log.read_text().splitlines()
    assert calls[-1] == "+++ killed by SIGKILL +++", calls
    assert calls[-2].endswith(" = ?"), calls  # the call strace killed the writer in
    return calls[-2]


def kill_among_data_pages(run: WriterProcess, rng: random.Random, log: Path) -> str:
    """Kill the paused writer at one of its commit's writes of data pages to ``data.mdb``.

    LMDB writes the dirty pages (one ``pwrite64`` per single page, ``lseek`` and ``writev``
    per run of pages) and then the meta page (``pwrite64``), which is what makes the
    commit; so the first ``pwrite64`` is always inside this commit. Returns ``"meta"``
    if the kill came at the meta page after all (a commit with no single page), else
    ``"data"``.
    """
    data = run.root / ACTOR / "data.mdb"
    call = strace_kill(run, data, ["pwrite64:when=1", f"writev:when={rng.randint(1, 3)}"], log)
    if call.startswith("writev("):
        return "data"
    # pwrite64(fd</path>, ""..., size, offset): the meta page is small and in page 0 or 1
    assert call.startswith("pwrite64("), call
    size, offset = (int(x) for x in call.removesuffix(" = ?").rstrip(")").split(", ")[-2:])
    return "meta" if size < 4096 and offset < 8192 else "data"


def kill_at_meta_page(run: WriterProcess, *, next_commit: bool = False) -> str:
    """Kill the paused writer when its commit has written every data page and is about to
    write the meta page (a ``gdb`` breakpoint on LMDB's ``mdb_env_write_meta``), or, if
    ``next_commit``, when the *next* commit gets there: the paused one took effect (and
    anything between the two, such as a second transaction of the same batch, too)."""
    assert GDB is not None
    command = [GDB, "-q", "-nx", "-batch", "-p", str(run.proc.pid), "-ex", "set auto-load off"]
    command += ["-ex", "break mdb_env_write_meta", "-ex", "shell echo armed >&2"]
    command += ["-ex", "continue", *(["-ex", "continue"] if next_commit else []), "-ex", "kill"]
    debugger = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert debugger.stdout is not None and debugger.stderr is not None
    errors = []
    while (line := debugger.stderr.readline()) and "armed" not in line:
        errors.append(line)
    run.go()
    run.collect()
    out, err = debugger.communicate(timeout=WAIT_LIMIT_S)
    assert out.count("hit Breakpoint 1") == 1 + next_commit, out + "".join(errors) + err
    return "meta"


def kill_right_after_commit(run: WriterProcess, log: Path) -> None:
    """Kill the paused writer when it releases its writer lock after the commit (its next
    ``flock``), before it can report the commit."""
    call = strace_kill(run, run.root / ACTOR / "writer.lock", ["flock:when=1"], log)
    assert call.startswith("flock("), call


@attrs.define
class Memory:
    """What the journal says one memory is."""

    ns: str
    created_at: int
    versions: list[tuple[int, int, dict[str, Any]]]  # (seq, at, body) of version 1, 2, ...
    head: int = 1
    status: str = "active"


EdgeKey = tuple[bytes, str, bytes]  # (src, relation, dst)


@attrs.define
class Model:
    """The journal the test has checked so far, and what it says about each memory and
    edge (the edge's strength in ppm and the seq that set it)."""

    raw: list[bytes] = attrs.field(factory=list)
    memories: dict[bytes, Memory] = attrs.field(factory=dict)
    edges: dict[EdgeKey, tuple[int, int]] = attrs.field(factory=dict)
    last_batch: int = 0

    def apply(self, entry: cg.Entry) -> None:
        fields = entry.fields
        if entry.op in ("edge", "unedge"):
            key = (fields["src"], fields["rel"], fields["dst"])
            assert self.memories[key[0]].status == self.memories[key[2]].status == "active"
            if entry.op == "edge":
                self.edges[key] = (fields["strength"], entry.seq)
            else:
                del self.edges[key]
            return
        mid = fields["id"]
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


def touched(entries: Iterable[cg.Entry]) -> tuple[list[bytes], list[bytes]]:
    """The memories ``entries`` changed, and the sources of the edges they changed."""
    memories = [e.fields["id"] for e in entries if "id" in e.fields]
    sources = [e.fields["src"] for e in entries if e.op in ("edge", "unedge")]
    return list(dict.fromkeys(memories)), list(dict.fromkeys(sources))


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


def check_edges(cx: cg.Cortex, model: Model, sources: Iterable[bytes]) -> None:
    """The out-edges of every memory in ``sources`` are what the journal says."""
    for src in sources:
        expected = sorted(
            (rel, dst, ppm, seq) for (s, rel, dst), (ppm, seq) in model.edges.items() if s == src
        )
        actual = sorted(
            (e.relation, e.dst.id, round(e.strength * 1_000_000), e.seq)
            for e in cx.edges(src, direction="out")
        )
        assert expected == actual


def saved_watermark(root: Path) -> int:
    """The journal seq the vector index on disk reflects (0 if there is none)."""
    directory = root / ACTOR / "vectors"
    return VectorIndex.saved_watermark(directory, name=HashEmbedder().name) or 0


def check_after_kill(root: Path, model: Model, lines: list[str]) -> None:
    """Open the store a killed writer left, check it, and advance ``model`` to it."""
    ready = numbers(lines, "ready")
    assert ready in ([], [model.last_batch + 1]), "the writer did not resume after the store"
    assert saved_watermark(root) >= max(numbers(lines, "saved"), default=0)
    if not (root / ACTOR / "data.mdb").exists():  # killed before it created the store
        assert model.raw == []
        return
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
        memories, sources = touched(new)
        check_memories(cx, model, memories)
        check_edges(cx, model, sources)
    model.raw.extend(data for _, data in raw[old:])
    model.last_batch = last_batch
    # What the writer reported agrees with the store: every batch it saw commit is there,
    # and nothing beyond the batch it had begun.
    begun = numbers(lines, "begin")
    assert max(numbers(lines, "commit"), default=0) <= last_batch <= max(begun, default=last_batch)


def window_of(lines: list[str], model: Model, inside: bool) -> str:
    """Where a kill landed: in ``start-up`` (no batch begun), ``before`` the last begun
    batch's commit (so it is absent), ``inside`` it (strace saw the kill at one of its
    writes), or ``after`` it (the batch is in the store)."""
    begun = numbers(lines, "begin")
    if inside:
        return "inside"
    if not begun:
        return "start-up"
    return "after" if model.last_batch >= begun[-1] else "before"


def replay(entries: list[cg.Entry], root: Path) -> cg.Cortex:
    """A fresh store built by replaying ``entries`` through the public API, batch by batch."""
    cx = cg.open(root, ACTOR, sync=False)
    for _, group in itertools.groupby(entries, key=lambda e: writer.batch_of(e.at)[0]):
        with cx.batch() as b:
            for e in group:
                fields = e.fields
                if e.op == "edge":
                    b.add_edge(
                        fields["src"],
                        fields["dst"],
                        fields["rel"],
                        strength=fields["strength"] / 1_000_000,
                        status=fields["status"],
                        origin=fields["origin"],
                        at=e.at,
                    )
                elif e.op == "unedge":
                    b.remove_edge(fields["src"], fields["dst"], fields["rel"], at=e.at)
                elif e.op == "write":
                    uri = b.write(memory_from_body(fields["body"]), ns=e.ns, at=e.at)
                    assert fields["id"] == uri.id
                elif e.op == "update":
                    changes = attrs.asdict(memory_from_body(fields["body"]), recurse=False)
                    version = b.update(fields["id"], at=e.at, **changes).version
                    assert fields["version"] == version
                elif e.op == "head":
                    b.update_head(fields["id"], version=fields["version"], at=e.at)
                else:
                    b.tombstone(fields["id"], reason=fields.get("reason", ""), at=e.at)
    return cx


def derived(digests: dict[str, str]) -> dict[str, str]:
    """Table digests without ``emb``: that cache holds whatever the writer's recalls
    embedded, which depends on where the kills fell, not on the journal."""
    return {name: digest for name, digest in digests.items() if name != "emb"}


def vector_results(root: Path) -> tuple[list[str], list[list[float]]]:
    """What the store's vector index holds: the ids it indexes, and the similarities of the
    8 nearest memories of a few queries by brute-force cosine over its own vectors. An index
    caught up across saves and kills must hold what a fresh one holds. (hnswlib's
    approximate search is not asked, since its answers depend on insertion order; ids are
    not compared per query, since memories of the same text tie.)"""
    with cg.open(root, ACTOR, create=False, sync=False) as cx:
        sync_vectors(cx)
        index, embedder = cx._vector_state().index, cx.embedder
        nearest = [
            [round(similarity, 5) for _, similarity in
             index.exact_search(embedder.embed([f"batch {n} op 0"])[0], 8)]
            for n in range(1, 60, 7)
        ]
        return sorted(memory_id.hex() for memory_id in index.ids()), nearest


@pytest.mark.slow
@pytest.mark.parametrize(("kills", "seed"), [pytest.param(45, 20240601, id="45-kills")])
def test_sigkill_leaves_whole_batches_and_a_replayable_journal(
    tmp_path: Path, kills: int, seed: int
) -> None:
    """SIGKILL before, inside and right after LMDB's commit never leaves a torn batch, a
    gap or a partial derived table.

    Each kill is one of the five in the module docstring, in turn, and is followed by the
    checks listed there; the next writer run recovers from the journal and appends after
    it. At the end the surviving journal, replayed through the public API, rebuilds
    byte-identical tables, vector recall equals that of a fresh index, and an
    uninterrupted run of the same batches writes a byte-identical journal.
    """
    rng = random.Random(seed)
    root = tmp_path / "crashed"
    model = Model()
    windows: dict[str, int] = dict.fromkeys(("start-up", "before", "inside", "after"), 0)
    at_page: dict[str, int] = {"data": 0, "meta": 0}
    grew, saved = [], []
    for kill in range(kills):
        mode = MODES[kill % len(MODES)]
        if mode in ("inside", "after") and not TRACERS:
            mode = "paused"
        pause = model.last_batch + 1 + rng.randint(0, 8)
        run = WriterProcess(root, pause if mode in ("paused", "inside", "after") else None)
        if mode == "time":  # a random time after the start
            time.sleep(max(0.0, run.started + rng.uniform(0.03, 0.6) - time.monotonic()))
        elif mode == "commits":  # a random number of commits, then up to about a batch
            target = rng.randint(1, 40)
            run.wait_for(lambda lines, target=target: count_commits(lines) >= target)
            time.sleep(rng.uniform(0.0, 0.005))
        else:
            run.wait_for(lambda lines, pause=pause: f"paused {pause}" in lines)
        exited = run.proc.poll() is not None
        if mode == "inside" and kill % (2 * len(MODES)) == MODES.index("inside"):
            at_page[kill_among_data_pages(run, rng, tmp_path / "strace.log")] += 1
        elif mode == "inside":
            at_page[kill_at_meta_page(run)] += 1
        elif mode == "after" and kill % (2 * len(MODES)) == MODES.index("after"):
            kill_right_after_commit(run, tmp_path / "strace.log")
        elif mode == "after":
            kill_at_meta_page(run, next_commit=True)
        else:
            run.kill()
        assert not exited, f"the writer exited by itself: {run.failure()}"
        assert run.proc.returncode == -signal.SIGKILL, run.failure()
        check_after_kill(root, model, run.lines)
        window = window_of(run.lines, model, inside=mode == "inside")
        if mode == "after":  # the paused batch committed, whatever the writer began next
            window = "after" if model.last_batch >= pause else window
        windows[window] += 1
        if mode in ("paused", "inside"):  # the commit never happened: the batch is absent
            expected = "inside" if mode == "inside" else "before"
            assert (window, model.last_batch) == (expected, pause - 1)
        elif mode == "after":  # committed (at the flock: though the writer never reported it)
            assert window == "after", (model.last_batch, pause)
            if kill % (2 * len(MODES)) == MODES.index("after"):  # killed at the flock
                assert f"commit {pause}" not in run.lines
        grew += numbers(run.lines, "grew")
        saved += numbers(run.lines, "saved")

    print(f"kills by window: {windows}; inside commits, killed at a page of: {at_page}")
    # The kills did what the test is about: every window was hit, the map grew and the
    # vector index was saved along the way.
    assert windows["before"] >= 1, windows
    if TRACERS:
        assert min(windows["inside"], windows["after"], *at_page.values()) >= 1, at_page
    assert grew and saved and saved_watermark(root) > 0

    with cg.open(root, ACTOR, create=False, sync=False) as cx:
        check_memories(cx, model, model.memories)
        check_edges(cx, model, dict.fromkeys(src for src, _, _ in model.edges))
        entries = list(cx.journal())
        digests = derived(cx.table_digests())
    assert model.last_batch == writer.batch_of(entries[-1].at)[0]
    recalled = vector_results(root)
    shutil.rmtree(root / ACTOR / "vectors")
    assert recalled == vector_results(root)

    with replay(entries, tmp_path / "replayed") as rebuilt:
        assert model.raw == [data for _, data in rebuilt.journal_bytes()]
        assert digests == derived(rebuilt.table_digests())

    reference_root = tmp_path / "reference"
    with cg.open(reference_root, ACTOR, sync=False, map_size=writer.MAP_SIZE) as reference:
        writer.run_batches(reference, writer.State(), model.last_batch)
        assert model.raw == [data for _, data in reference.journal_bytes()]
        assert digests == derived(reference.table_digests())


def test_the_writer_pauses_once_when_the_paused_commit_runs_out_of_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LMDB can run out of map inside a commit (saving its free list): the batch grows the
    map and commits again. The test writer must not pause before that second commit, as the
    kills above send one line and wait for the commit (a second pause hung a run)."""
    from cortexgraph.store import env as store_env
    from cortexgraph.store.guards import MapFull

    commit = store_env.WriteTxn.commit
    failed: list[int] = []

    def watched(txn: store_env.WriteTxn) -> None:
        try:
            commit(txn)
        except MapFull:
            failed.append(state.next_batch)
            raise

    # First find, on a fresh store, a batch whose commit itself runs out of map. Whether
    # one does depends on how the pages fall, so a few starting map sizes are tried.
    monkeypatch.setattr(store_env.WriteTxn, "commit", watched)
    for map_size in (writer.MAP_SIZE, 7 << 15, 1 << 16):
        state = writer.State()
        with cg.open(tmp_path / f"probe{map_size}", ACTOR, sync=False, map_size=map_size) as cx:
            while not failed and state.next_batch <= 400:
                writer.run_batch(cx, state)
        if failed:
            break
    assert failed, "no commit of the first 400 batches ran out of map: pick another workload"
    target = failed[0]

    # Then pause at that batch, as a kill would, and let it go with one line.
    monkeypatch.setattr(store_env.WriteTxn, "commit", commit)
    lines: list[str] = []
    monkeypatch.setattr(sys, "stdin", _OneLine(lines))
    state = writer.State()
    writer.pause_before_commit(state, target)
    with cg.open(tmp_path / "paused", ACTOR, sync=False, map_size=map_size) as cx:
        writer.run_batches(cx, state, target)
        assert writer.batch_of(list(cx.journal())[-1].at)[0] == target
    assert lines == ["go\n"]


class _OneLine:
    """A stdin holding one line: a second read fails the test instead of blocking."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def readline(self) -> str:
        if self._lines:
            raise AssertionError("the writer paused a second time")
        self._lines.append("go\n")
        return "go\n"
