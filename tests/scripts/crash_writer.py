"""A writer that loops forever writing batches, for ``tests/test_crash.py`` to SIGKILL.

Usage::

    python tests/scripts/crash_writer.py ROOT

It opens actor ``crash`` under ROOT, works out from the journal which batches are already
committed and what state they left, prints ``ready <next batch>`` and then, forever::

    begin <n>            (before ``with cx.batch()``)
    commit <n>           (after the batch committed)

Batch ``n`` is a pure function of ``n`` and the state the batches before it left:
``batch_size(n)`` operations (1..25) chosen by ``random.Random(n)`` - writes of Facts and
Events, updates, head moves and tombstones of memories written by *earlier* batches. Every
operation carries its batch: its ``at`` is ``T0 + n * 1000 + i`` for the ``i``-th operation,
written and updated bodies are tagged ``batch-<n>`` and ``size-<k>`` and their text says
``batch <n> op <i>``, and tombstone reasons start with ``batch-<n> size-<k>``. So a run
that is killed and restarted any number of times leaves exactly the journal of a run that
was never killed, cut at a batch boundary - which is what the test checks.

The test imports this file for :func:`batch_size`, :func:`batch_of` and :func:`run_batches`.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable
from pathlib import Path

import cortexgraph as cg

ACTOR = "crash"
T0 = 1_700_000_000_000
BATCH_SPAN_MS = 1000  # at = T0 + n * BATCH_SPAN_MS + i, so at names the batch and the op
MAX_BATCH = 25
NAMESPACES = ("default", "ops")
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


class State:
    """What the committed batches left, as the next batch chooses from it.

    ``live`` holds the memories that are not tombstoned, in order of creation, and
    ``multi`` those of them with more than one version, in the order they got a second
    one. A writer that ran every batch itself and one that rebuilt the state from the
    journal with :meth:`observe` hold the same lists in the same order, so they choose
    the same operations.
    """

    def __init__(self) -> None:
        self.live: list[Tracked] = []
        self.multi: list[Tracked] = []
        self.by_id: dict[bytes, Tracked] = {}
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

    def observe(self, entries: Iterable[cg.Entry]) -> None:
        """Follow committed journal entries (how a restarted writer recovers its state)."""
        for entry in entries:
            mid = entry.fields["id"]
            if entry.op == "write":
                self.add(Tracked(mid))
            elif entry.op == "update":
                self.new_version(self.by_id[mid], entry.fields["version"])
            elif entry.op == "head":
                self.by_id[mid].head = entry.fields["version"]
            elif entry.op == "tombstone":
                self.remove(self.by_id[mid])
            self.next_batch = batch_of(entry.at)[0] + 1


def run_batch(cx: cg.Cortex, state: State) -> int:
    """Run batch ``state.next_batch`` in one ``cx.batch()`` and follow it in ``state``.

    If the batch fails the writer dies with it, so ``state`` is changed as the batch goes;
    memories written by this batch join ``state.live`` only after the commit, so that
    every update, head move and tombstone targets a memory of an earlier batch.
    """
    n = state.next_batch
    k = batch_size(n)
    rng = random.Random(n)
    tags = [f"batch-{n}", f"size-{k}"]
    written: list[Tracked] = []
    with cx.batch() as b:
        for i in range(k):
            at = T0 + n * BATCH_SPAN_MS + i
            roll = rng.random()
            if roll < 0.45 or not state.live:
                cls = cg.Fact if rng.random() < 0.5 else cg.Event
                memory = cls(
                    text=f"batch {n} op {i}: {rng.randrange(10**9)}",
                    tags=[*tags, f"op-{i}"],
                    confidence=rng.randrange(101) / 100,
                    priority=rng.randint(1, 10),
                )
                written.append(Tracked(b.write(memory, ns=rng.choice(NAMESPACES), at=at).id))
            elif roll < 0.75:
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
            elif roll < 0.88 and state.multi:
                target = rng.choice(state.multi)
                version = rng.choice([v for v in range(1, target.latest + 1) if v != target.head])
                b.update_head(target.id, version=version, at=at)
                target.head = version
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


def main(argv: list[str]) -> int:
    (root,) = argv
    cx = cg.open(Path(root), ACTOR, sync=SYNC)
    state = State()
    state.observe(cx.journal())
    print(f"ready {state.next_batch}", flush=True)
    while True:
        print(f"begin {state.next_batch}", flush=True)
        n = run_batch(cx, state)
        print(f"commit {n}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
