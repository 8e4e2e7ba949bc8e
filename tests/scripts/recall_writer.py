"""Writes batches of memories forever, recalling now and then (so the vector index gets
saved at some watermark), until it is killed. Used by tests/test_recall.py.

Usage::

    python tests/scripts/recall_writer.py ROOT

It prints its progress, one line each, so that the test can aim its SIGKILL::

    running                 the store is open
    batch <n> seq <seq>     batch n (1, 2, ...) committed; the journal ends at seq
    saving <seq>            about to save the vector index as reflecting seq
    saved <seq>             the index on disk now reflects seq

Every tenth batch it saves the index itself, and a recall may save it too (every
``SAVE_EVERY`` journal entries); only the saves it makes itself are announced.
"""

from __future__ import annotations

import sys

import cortexgraph as cg

WORDS = ["deploy", "pipeline", "window", "lunch", "python", "rust", "cache", "index", "merge",
         "review", "friday", "release", "database", "backup", "token"]
PER_BATCH = 50
SAVE_EVERY_BATCHES = 10


def main() -> None:
    with cg.open(sys.argv[1], "a", sync=False) as cx:
        print("running", flush=True)
        i = 0
        n = 0
        written: list[cg.MemoryURI] = []
        while True:
            with cx.batch() as batch:
                for _ in range(PER_BATCH):
                    text = " ".join(WORDS[(i * j) % 15] for j in range(1, 5)) + f" n{i}"
                    written.append(batch.write(cg.Fact(text=text), at=1_700_000_000_000 + i))
                    if i % 7 == 3 and i > 100:  # forget one written (and indexed) batches ago
                        batch.tombstone(written[i - 100], at=1_700_000_000_000 + i)
                    if i % 11 == 5 and i > 100:  # and change another one
                        batch.update(written[i - 90], text=f"rewritten {WORDS[i % 15]} {i}")
                    i += 1
            n += 1
            print(f"batch {n} seq {cx.seq}", flush=True)
            cx.recall("deploy cache", k=5, mode="vector")
            if n % SAVE_EVERY_BATCHES == 0:
                state = cx._vector_state()
                print(f"saving {state.index.watermark}", flush=True)
                state.save()
                print(f"saved {state.index.watermark}", flush=True)


if __name__ == "__main__":
    main()
