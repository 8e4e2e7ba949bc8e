"""A writer that loops forever writing batches, for ``tests/test_crash.py`` to SIGKILL.

Usage::

    python tests/scripts/crash_writer.py ROOT [PAUSE_BATCH]

It opens actor ``crash`` under ROOT on a small map (``MAP_SIZE``, so that the batches grow
it), works out from the journal which batches are already committed and what state they
left, prints ``ready <next batch>`` and then, forever::

    begin <n>            (before ``with cx.batch()``)
    paused <n>           (only for n == PAUSE_BATCH: see below)
    commit <n>           (after the batch committed)
    grew <bytes>         (the batch grew the LMDB map to this size)
    saved <seq>          (every ``RECALL_EVERY`` batches: it recalled, which brings the
                         vector index up to the journal, and saved the index at seq)

Batch ``n`` is a pure function of ``n`` and the state the batches before it left:
``batch_size(n)`` operations (1..25) chosen by ``random.Random(n)`` - writes of Facts and
Events, updates, head moves and tombstones of memories written by *earlier* batches, and
edges added between them or removed. Every operation carries its batch: its ``at`` is
``T0 + n * 1000 + i`` for the ``i``-th operation, written and updated bodies are tagged
``batch-<n>`` and ``size-<k>`` and their text says ``batch <n> op <i>``, and tombstone
reasons start with ``batch-<n> size-<k>``. So a run that is killed and restarted any
number of times leaves exactly the journal of a run that was never killed, cut at a batch
boundary - which is what the test checks.

The pause is the test's way into the commit. With ``PAUSE_BATCH``, the writer wraps the
store's ``WriteTxn.commit`` (here, not in the library): right before LMDB commits that
batch's transaction it prints ``paused <n>`` and waits for a line on stdin. The test
then kills it there, or attaches ``strace`` to kill it at one of the commit's writes to
``data.mdb`` or right after the commit, and lets it go on. It pauses once: a commit that
runs out of map is tried again after the map grows, without a second pause.

The test imports this file for :func:`batch_size`, :func:`batch_of` and :func:`run_batches`.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable
from pathlib import Path

import cortexgraph as cg
from cortexgraph.store import env as store_env

ACTOR = "crash"
T0 = 1_700_000_000_000
BATCH_SPAN_MS = 1000  # at = T0 + n * BATCH_SPAN_MS + i, so at names the batch and the op
MAX_BATCH = 25
NAMESPACES = ("default", "ops")
RELATIONS = ("relates_to", "derived_from", "refines")
MAP_SIZE = 1 << 17  # 128 KiB: the first few dozen batches double it several times
RECALL_EVERY = 6
# SIGKILL ends the process, not the machine: LMDB's commit has already handed every page
# and the new meta page to the kernel with write(), so sync=False loses nothing here and
# lets the writer commit many more batches per kill. (Durability against power loss, which
# needs sync=True, is not what this test is about.)
SYNC = False


def batch_size(n: int) -> int:
    """How many operations batch ``n`` has (1..25): deterministic, well spread."""
    return 1 + (n * 7919 + n // 5) % MAX_BATCH


def batch_of(at: int) -> tuple[int, int]:
    """``(batch number, operation index)`` of an entry, from its ``at``."""
    return divmod(at - T0, BATCH_SPAN_MS)


class Tracked:
    """What the writer knows about one memory."""

    __slots__ = ("head", "id", "latest")

    def __init__(self, memory_id: bytes) -> None:
        self.id = memory_id
        self.head = 1
        self.latest = 1


EdgeKey = tuple[bytes, str, bytes]  # (src, relation, dst)


class State:
    """What the committed batches left, as the next batch chooses from it.

    ``live`` holds the memories that are not tombstoned, in order of creation, ``multi``
    those of them with more than one version, in the order they got a second one, and
    ``edges`` the strength (ppm) of every edge between two live memories, in the order the
    edges were first added. A writer that ran every batch itself and one that rebuilt the
    state from the journal with :meth:`observe` hold the same collections in the same
    order, so they choose the same operations.
    """

    def __init__(self) -> None:
        self.live: list[Tracked] = []
        self.multi: list[Tracked] = []
        self.by_id: dict[bytes, Tracked] = {}
        self.edges: dict[EdgeKey, int] = {}
        self.next_batch = 1

    def add(self, tracked: Tracked) -> None:
        self.live.append(tracked)
        self.by_id[tracked.id] = tracked

    def new_version(self, tracked: Tracked, version: int) -> None:
        tracked.head = tracked.latest = version
        if version == 2:
            self.multi.append(tracked)

    def remove(self, tracked: Tracked) -> None:
        self.live.remove(tracked)
        if tracked.latest > 1:
            self.multi.remove(tracked)
        # The store keeps a tombstoned memory's edges; the writer just stops choosing them.
        for key in [key for key in self.edges if tracked.id in (key[0], key[2])]:
            del self.edges[key]

    def observe(self, entries: Iterable[cg.Entry]) -> None:
        """Follow committed journal entries (how a restarted writer recovers its state)."""
        for entry in entries:
            fields = entry.fields
            if entry.op == "write":
                self.add(Tracked(fields["id"]))
            elif entry.op == "update":
                self.new_version(self.by_id[fields["id"]], fields["version"])
            elif entry.op == "head":
                self.by_id[fields["id"]].head = fields["version"]
            elif entry.op == "tombstone":
                self.remove(self.by_id[fields["id"]])
            elif entry.op == "edge":
                self.edges[(fields["src"], fields["rel"], fields["dst"])] = fields["strength"]
            elif entry.op == "unedge":
                del self.edges[(fields["src"], fields["rel"], fields["dst"])]
            self.next_batch = batch_of(entry.at)[0] + 1


def _kind(roll: float, state: State) -> str:
    """Which operation a roll of the batch's random generator makes, given the state."""
    if roll < 0.38 or not state.live:
        return "write"
    if roll < 0.60:
        return "update"
    if roll < 0.70 and state.multi:
        return "head"
    if roll < 0.84 and len(state.live) >= 2:
        return "edge"
    if roll < 0.92 and state.edges:
        return "unedge"
    return "tombstone"


def run_batch(cx: cg.Cortex, state: State) -> int:
    """Run batch ``state.next_batch`` in one ``cx.batch()`` and follow it in ``state``.

    If the batch fails the writer dies with it, so ``state`` is changed as the batch goes;
    memories written by this batch join ``state.live`` only after the commit, so that
    every update, head move, edge and tombstone targets memories of earlier batches.
    """
    n = state.next_batch
    k = batch_size(n)
    rng = random.Random(n)
    tags = [f"batch-{n}", f"size-{k}"]
    written: list[Tracked] = []
    with cx.batch() as b:
        for i in range(k):
            at = T0 + n * BATCH_SPAN_MS + i
            kind = _kind(rng.random(), state)
            if kind == "write":
                cls = cg.Fact if rng.random() < 0.5 else cg.Event
                memory = cls(
                    text=f"batch {n} op {i}: {rng.randrange(10**9)}",
                    tags=[*tags, f"op-{i}"],
                    confidence=rng.randrange(101) / 100,
                    priority=rng.randint(1, 10),
                )
                written.append(Tracked(b.write(memory, ns=rng.choice(NAMESPACES), at=at).id))
            elif kind == "update":
                target = rng.choice(state.live)
                uri = b.update(
                    target.id,
                    expected_version=target.head,
                    text=f"batch {n} op {i}: updated {rng.randrange(10**9)}",
                    tags=tags,
                    at=at,
                )
                if uri.version != target.latest + 1:
                    raise RuntimeError(f"batch {n} op {i}: the update made {uri}")
                state.new_version(target, uri.version)
            elif kind == "head":
                target = rng.choice(state.multi)
                version = rng.choice([v for v in range(1, target.latest + 1) if v != target.head])
                b.update_head(target.id, version=version, at=at)
                target.head = version
            elif kind == "edge":
                src, dst = rng.sample(state.live, 2)
                key = (src.id, rng.choice(RELATIONS), dst.id)
                ppm = rng.randrange(101) * 10_000
                if ppm == state.edges.get(key):  # an unchanged edge would journal nothing
                    ppm = (ppm + 10_000) % 1_010_000
                b.add_edge(key[0], key[2], key[1], strength=ppm / 1_000_000, at=at)
                state.edges[key] = ppm
            elif kind == "unedge":
                key = rng.choice(list(state.edges))
                b.remove_edge(key[0], key[2], key[1], at=at)
                del state.edges[key]
            else:
                target = rng.choice(state.live)
                b.tombstone(target.id, reason=f"batch-{n} size-{k} op-{i}", at=at)
                state.remove(target)
    for tracked in written:
        state.add(tracked)
    state.next_batch = n + 1
    return n


def run_batches(cx: cg.Cortex, state: State, last: int) -> None:
    """Run batches until batch ``last`` has committed (used for the reference store)."""
    while state.next_batch <= last:
        run_batch(cx, state)


def pause_before_commit(state: State, pause_batch: int) -> None:
    """Make the store's commit of batch ``pause_batch`` print ``paused <n>`` and wait for a
    line on stdin first (the test's hook into the commit; see the module docstring)."""
    commit = store_env.WriteTxn.commit
    waited = False

    def paused_commit(txn: store_env.WriteTxn) -> None:
        # Once only: LMDB can run out of map inside the commit itself (saving its free
        # list), and the batch then grows the map and commits again; that second commit must
        # go on, as the test sends a single line and waits for the commit to happen.
        nonlocal waited
        if txn.entries and state.next_batch == pause_batch and not waited:
            waited = True
            print(f"paused {pause_batch}", flush=True)
            sys.stdin.readline()
        commit(txn)

    store_env.WriteTxn.commit = paused_commit  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    root, *pause = argv
    cx = cg.open(Path(root), ACTOR, sync=SYNC, map_size=MAP_SIZE)
    state = State()
    state.observe(cx.journal())
    if pause:
        pause_before_commit(state, int(pause[0]))
    print(f"ready {state.next_batch}", flush=True)
    size = cx._env.map_size()
    while True:
        print(f"begin {state.next_batch}", flush=True)
        n = run_batch(cx, state)
        print(f"commit {n}", flush=True)
        if cx._env.map_size() != size:
            size = cx._env.map_size()
            print(f"grew {size}", flush=True)
        if n % RECALL_EVERY == 0:
            cx.recall(f"batch {n} op 0", k=5, mode="vector")
            vectors = cx._vector_state()
            vectors.save()
            print(f"saved {vectors.index.watermark}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
