"""Keyword recall, find and hybrid recall answer as they did before the storage changed.

``tests/fixtures/answers/answers.json`` holds the answers the code gave when keyword
postings were one LMDB row per term and memory and the vector channel searched an HNSW
graph (``benches/answers.py`` wrote it and says how the workload is made). A change of
layout (segments, pages, rows per entry) must give the same keyword and find hits in the
same order with the same scores, and the same journal and root.

Hybrid answers are held to less, on purpose: the vector channel now searches exactly
below its full-scan threshold (``docs/vector-index.md``) where the graph was approximate,
so a hybrid list moves wherever the graph had missed a nearer neighbour (and fused scores,
normalised over the candidates, move with it). On this workload 29 of the 40 lists are
identical and 35 hold the same memories; the test requires at least 9 of every 10 recorded
hits on average and 7 in every list, which a broken channel or fusion would not keep.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import cortexgraph as cg

ROOT = Path(__file__).resolve().parent.parent
RECORDED = Path(__file__).parent / "fixtures" / "answers" / "answers.json"


def _answers_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_answers", ROOT / "benches" / "answers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _same_hits(expected: list[Any], actual: list[Any]) -> bool:
    if len(expected) != len(actual):
        return False
    for (eid, ever, escore), (aid, aver, ascore) in zip(expected, actual, strict=True):
        if eid != aid or ever != aver:
            return False
        if (escore is None) != (ascore is None):
            return False
        # scores are sums of the same float terms; allow only a change of summation order
        if escore is not None and not math.isclose(escore, ascore, rel_tol=1e-12, abs_tol=0.0):
            return False
    return True


def test_the_recorded_answers_still_hold(tmp_path: Path) -> None:
    """Every recorded query gives the recorded hits (ids, versions, order, scores), and the
    store has the recorded seq and OverallRoot."""
    bench = _answers_module()
    recorded = json.loads(RECORDED.read_text())
    with cg.open(tmp_path, "bench") as cx:
        bench.build_store(cx)
        assert cx.seq == recorded["seq"]
        assert cx.overall_root().hex() == recorded["root"]
        now = bench.answers(cx)
    assert [(a["kind"], a["query"]) for a in now] == [
        (a["kind"], a["query"]) for a in recorded["answers"]
    ]
    differing = [
        f"{a['kind']} {a['query']!r}"
        for a, b in zip(recorded["answers"], now, strict=True)
        if a["kind"] != "hybrid" and not _same_hits(a["hits"], b["hits"])
    ]
    assert not differing, f"{len(differing)} answers changed: {differing[:5]}"
    overlaps = [
        len({h[0] for h in a["hits"]} & {h[0] for h in b["hits"]}) / len(a["hits"])
        for a, b in zip(recorded["answers"], now, strict=True)
        if a["kind"] == "hybrid" and a["hits"]
    ]
    assert len(overlaps) == 40
    assert sum(overlaps) / len(overlaps) >= 0.9 and min(overlaps) >= 0.7, overlaps
