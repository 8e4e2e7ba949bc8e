"""Writes batches of memories forever, recalling now and then (so the vector index gets
saved at some watermark), until it is killed. Used by tests/test_recall.py."""

from __future__ import annotations

import sys

import cortexgraph as cg

WORDS = ["deploy", "pipeline", "window", "lunch", "python", "rust", "cache", "index", "merge",
         "review", "friday", "release", "database", "backup", "token"]

def main() -> None:
    with cg.open(sys.argv[1], "a", sync=False) as cx:
        print("running", flush=True)
        i = 0
        written: list[cg.MemoryURI] = []
        while True:
            with cx.batch() as batch:
                for _ in range(50):
                    text = " ".join(WORDS[(i * j) % 15] for j in range(1, 5)) + f" n{i}"
                    written.append(batch.write(cg.Fact(text=text), at=1_700_000_000_000 + i))
                    if i % 7 == 3 and i > 100:  # forget one written (and indexed) batches ago
                        batch.tombstone(written[i - 100], at=1_700_000_000_000 + i)
                    if i % 11 == 5 and i > 100:  # and change another one
                        batch.update(written[i - 90], text=f"rewritten {WORDS[i % 15]} {i}")
                    i += 1
            cx.recall("deploy cache", k=5, mode="vector")
            if i % 500 == 0:
                cx._vector_state().save()


if __name__ == "__main__":
    main()
