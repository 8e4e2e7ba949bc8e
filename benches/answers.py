"""Recorded answers: what keyword recall, find and hybrid recall return on a benches workload.

``tests/fixtures/answers/answers.json`` was written by this script from the code that stored
keyword postings as one LMDB row per term and memory, before they became immutable
segments, and searched vectors in an HNSW graph at every size. ``tests/test_recorded_answers.py``
rebuilds the same store with the current code and requires the same keyword and find hits,
in the same order, with the same scores: a change of storage layout must not change a
single one of those answers. Hybrid answers moved when the vector channel began to search
exactly below its full-scan threshold; the test says how much they are held to. Record
again only for a change that is meant to change answers, and say so in its commit::

    PYTHONPATH=src .venv/bin/python benches/answers.py tests/fixtures/answers/answers.json

The workload: ``make_memories`` (the benches' generator) written in batches, then updates,
head moves, tombstones, archives and edges chosen by a seeded generator, so that the
keyword index holds re-indexed, de-indexed and re-activated memories.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import cortexgraph as cg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _workload import _TAGS, _WORDS, BASE_AT, NS, STEP_MS, make_memories

__all__ = ["MEMORIES", "NOW", "answers", "build_store"]

MEMORIES = 4_000
BATCH = 250
NOW = BASE_AT + 30 * 86_400_000
_TYPES = ("fact", "event", "preference")


def build_store(cx: cg.Cortex, *, seed: int = 21) -> None:
    """Write the workload into an empty store (deterministic: same seed, same journal)."""
    rng = random.Random(seed)
    memories = make_memories(MEMORIES, seed=seed)
    uris: list[cg.MemoryURI] = []
    at = BASE_AT
    for start in range(0, MEMORIES, BATCH):
        with cx.batch() as b:
            for memory in memories[start : start + BATCH]:
                uris.append(b.write(memory, ns=NS, at=at))
                at += STEP_MS
    picked = rng.sample(range(MEMORIES), 900)
    updated, moved, gone, archived, linked = (
        picked[:300], picked[:100], picked[300:450], picked[450:550], picked[550:900]
    )
    with cx.batch() as b:
        for i in updated:
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 30)))
            b.update(uris[i], text=f"{words}.", tags=rng.sample(_TAGS, 2), at=at)
            at += STEP_MS
        for i in moved:
            b.update_head(uris[i], version=1, at=at)
            at += STEP_MS
        for i in gone:
            b.tombstone(uris[i], reason="bench", at=at)
            at += STEP_MS
        for i in archived:
            b.archive(uris[i], at=at)
            at += STEP_MS
        for a, c in zip(linked[::2], linked[1::2], strict=True):
            b.add_edge(uris[a], uris[c], "relates_to", at=at)
            at += STEP_MS


def _hit(hit: Any) -> list[Any]:
    return [hit.uri.id.hex(), hit.uri.version, hit.score]


def answers(cx: cg.Cortex, *, seed: int = 5) -> list[dict[str, Any]]:
    """The recorded queries and their hits: ``[id hex, version, score]`` best first."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for _ in range(80):
        words = rng.sample(_WORDS[27:] + _TAGS, rng.randint(1, 4))
        query = " ".join(words)
        result = cx.recall(query, k=10, mode="keyword", now=NOW)
        out.append({"kind": "keyword", "query": query, "hits": [_hit(h) for h in result.hits]})
    for _ in range(30):
        kind, tag = rng.choice(_TYPES), rng.choice(_TAGS)
        result = cx.find(cg.Q.type(kind) & cg.Q.tag(tag), limit=10, now=NOW)
        hits = [[h.uri.id.hex(), h.uri.version, None] for h in result.hits]
        out.append({"kind": "find", "query": f"{kind} {tag}", "hits": hits})
    for _ in range(40):
        query = " ".join(rng.sample(_WORDS[27:], rng.randint(2, 5)))
        result = cx.recall(query, k=10, mode="hybrid", now=NOW)
        out.append({"kind": "hybrid", "query": query, "hits": [_hit(h) for h in result.hits]})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path, help="the answer file to write")
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, cg.open(tmp, "bench") as cx:
        build_store(cx)
        recorded = {"seq": cx.seq, "root": cx.overall_root().hex(), "answers": answers(cx)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(recorded, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
