"""Keyword recall, find and hybrid recall answer as they did before the storage changed.

``tests/fixtures/answers/answers.json`` holds the answers the code gave when keyword
postings were one LMDB row per term and memory (``benches/answers.py`` wrote it and says
how the workload is made). A change of layout (segments, pages, rows per entry) must give
the same hits in the same order with the same scores, and the same journal and root.
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
        if not _same_hits(a["hits"], b["hits"])
    ]
    assert not differing, f"{len(differing)} answers changed: {differing[:5]}"
