"""A writer or a reader of the concurrency soak (``tests/test_soak.py``).

    python soak_worker.py write ROOT WRITER BATCHES
    python soak_worker.py read ROOT STOPFILE

Every handle opens with a 64 KiB map, so each writer grows the map many times and every
handle adopts what the others grew. A writer writes ``BATCHES`` batches. Batch ``i`` of
writer ``w`` writes ``PER_BATCH`` memories tagged ``b<w>x<i>`` (several KiB each, so that
the map grows often), updates the writer's counter memory to ``i`` and, every fifth batch,
tombstones one memory of an earlier batch. Every batch is one LMDB transaction, so a
reader must see each batch whole or not at all.

A reader loops until ``STOPFILE`` exists. Each round it reads the journal's end, resolves each
writer's counter (``i``: batches ``0..i`` of that writer are committed) and checks that every
committed batch it picks is whole (``find`` by its tag returns ``PER_BATCH`` memories, active
or tombstoned), that a batch past the counter is absent or whole, that keyword recall finds
memories of committed batches, and that nothing it saw goes backwards. It prints one JSON
line: rounds done, problems (inconsistent reads) and errors (any exception, typed or not).
"""

from __future__ import annotations

import json
import random
import sys
import traceback
from pathlib import Path

import cortexgraph as cg

ACTOR = "soak"
PER_BATCH = 6
COUNTER_TAG = "counter"
T0 = 1_700_000_000_000
#: every handle opens with a 64 KiB map: each must grow it, or adopt what another one grew
MAP = 1 << 16


def filler(rng: random.Random, words: int) -> str:
    return " ".join(f"w{rng.randrange(5000)}" for _ in range(words))


def write(root: str, writer: int, batches: int) -> None:
    rng = random.Random(writer)
    at = T0 + writer
    with cg.open(root, ACTOR, map_size=MAP, sync=False, clock=cg.ManualClock(T0)) as cx:
        with cx.batch() as b:
            counter = b.write(
                cg.Fact(text=f"writer {writer} committed batch -1", tags=[COUNTER_TAG]),
                ns=f"w{writer}",
                at=at,
            )
        for i in range(batches):
            at += 1000
            old = cx.find(cg.Q.tag(f"b{writer}x{i - 4}"), limit=1) if i % 5 == 4 else None
            with cx.batch() as b:
                for j in range(PER_BATCH):
                    text = f"batch {writer}/{i} item {j} marker{writer}x{i} " + filler(rng, 300)
                    b.write(cg.Fact(text=text, tags=[f"b{writer}x{i}"]), ns=f"w{writer}", at=at)
                b.update(counter, text=f"writer {writer} committed batch {i}", at=at)
                if old is not None:
                    b.tombstone(old[0].uri, reason="soak", at=at)
    print(json.dumps({"writer": writer, "batches": batches}))


def committed(cx: cg.Cortex, writer: int) -> int:
    hits = cx.find(cg.Q.tag(COUNTER_TAG) & cg.Q.ns(f"w{writer}"), limit=1)
    if not len(hits):
        return -2
    text = hits[0].record.memory.text
    return int(text.rsplit(" ", 1)[1])


def batch_size(cx: cg.Cortex, writer: int, i: int) -> int:
    where = cg.Q.tag(f"b{writer}x{i}") & (cg.Q.status("active") | cg.Q.status("tombstoned"))
    return len(cx.find(where, limit=2 * PER_BATCH))


def read_round(
    cx: cg.Cortex, rng: random.Random, seen: dict[int, int], last_seq: list[int]
) -> list[str]:
    problems = []
    seq = cx.seq
    if seq < last_seq[0]:
        problems.append(f"seq went back from {last_seq[0]} to {seq}")
    last_seq[0] = seq
    for writer in (0, 1):
        top = committed(cx, writer)
        if top < seen.get(writer, -2):
            problems.append(f"writer {writer}: counter went back to {top}")
        seen[writer] = top
        picks = {top, top + 1, rng.randrange(max(top, 0) + 1)}
        for i in sorted(p for p in picks if p >= 0):
            size = batch_size(cx, writer, i)
            if i <= top and size != PER_BATCH:
                problems.append(f"batch {writer}/{i} committed but {size} memories seen")
            if i > top and size not in (0, PER_BATCH):
                problems.append(f"batch {writer}/{i} partly visible: {size}")
        if top >= 0:
            hits = cx.recall(f"marker{writer}x{top}", k=3, mode="keyword")
            if not len(hits) or f"marker{writer}x{top}" not in hits[0].record.memory.text:
                problems.append(f"keyword recall missed batch {writer}/{top}")
    entries = list(cx.journal(since=max(0, seq - 3)))
    if [e.seq for e in entries][:1] not in ([], [max(0, seq - 3) + 1]):
        problems.append("journal tail is not dense")
    return problems


def read(root: str, stopfile: str) -> None:
    rng = random.Random(7)
    rounds, problems, errors = 0, [], []
    seen: dict[int, int] = {}
    last_seq = [0]
    with cg.open(root, ACTOR, readonly=True, map_size=MAP) as cx:
        while not Path(stopfile).exists() or rounds == 0:
            try:
                problems.extend(read_round(cx, rng, seen, last_seq))
            except Exception as exc:  # every error is reported to the test
                errors.append(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")
                if not isinstance(exc, cg.CortexError):
                    errors.append(traceback.format_exc())
            rounds += 1
    print(json.dumps({"rounds": rounds, "problems": problems[:20], "errors": errors[:20]}))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        read(sys.argv[2], sys.argv[3])
