"""The column index's vectorised salience scores equal the row-by-row exact ones.

``ColumnIndex.exact_scores`` computes every factor in float64 with numpy and rounds with
``rint``; ``ColumnIndex.exact_score`` goes through ``core.salience`` (exact half-to-even
rounding from the float's ratio, ``math.log`` and ``**``). ``find``, ``recall`` and
``context`` rank by the first and report the second, so they must agree on every row,
including factors that land on a rounding tie.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import event, given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.salience import DEFAULT_WEIGHTS, PPM
from cortexgraph.core.taxonomy import MEMORY_TYPES
from cortexgraph.index import ColumnIndex
from signal_ops import SignalOps

TYPE_CODES = sorted(t.type_code for t in MEMORY_TYPES)
DAY = 86_400_000
T0 = 1_700_000_000_000

#: confidences on or next to a half-ppm tie (x.5e-6), where rint of the float product
#: and exact half-to-even rounding of the stored value can disagree
tie_confidences = st.builds(
    lambda k, nudge: min(1.0, max(0.0, (2 * k + 1) / 2e6 + nudge)),
    st.integers(0, PPM - 1),
    st.sampled_from([0.0, 1e-17, -1e-17, 1e-13, -1e-13]),
)
confidences = st.one_of(st.floats(0.0, 1.0), tie_confidences, st.sampled_from([0.0, 0.5, 1.0]))
weights = st.sampled_from(
    [DEFAULT_WEIGHTS, (20_000, 20_000, 20_000, 20_000, 920_000), (200_000,) * 5]
)


@st.composite
def column_rows(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(1, 40))
    max_indeg = draw(st.integers(0, 50))
    max_access = draw(st.integers(0, 60))

    def column(strategy: st.SearchStrategy[Any]) -> list[Any]:
        return draw(st.lists(strategy, min_size=count, max_size=count))

    return {
        "type": column(st.sampled_from(TYPE_CODES)),
        "confidence": column(confidences),
        "priority": column(st.integers(1, 10)),
        "pinned": column(st.booleans()),
        "indeg": column(st.integers(0, max_indeg)),
        "access": column(st.integers(0, max_access)),
        "at": column(st.integers(0, 10**13)),
        "max_indeg": max_indeg,
        "max_access": max_access,
        "now": draw(st.one_of(st.integers(0, 2 * 10**13), st.just(2**63 - 1))),
        "weights": draw(weights),
    }


def index_of(data: dict[str, Any]) -> ColumnIndex:
    index = ColumnIndex()
    count = len(data["type"])
    for name in ("type", "confidence", "priority", "pinned", "indeg", "access", "at"):
        index.cols[name] = np.asarray(data[name], dtype=index.cols[name].dtype)
    for name in ("conf_ppm", "prio_ppm"):
        index.cols[name] = np.zeros(count, dtype=np.int64)
    index.derive_factors(count)  # as a build derives them
    index.ids = [row.to_bytes(16, "big") for row in range(count)]
    index.max_indeg = data["max_indeg"]
    index.max_access = data["max_access"]
    index.weights = data["weights"]
    return index


@settings(max_examples=400, deadline=None)
@given(column_rows())
def test_vectorised_scores_equal_exact_ones(data: dict[str, Any]) -> None:
    index = index_of(data)
    rows = np.arange(len(data["type"]), dtype=np.int64)
    now = data["now"]
    exact = [index.exact_score(row, now) for row in rows.tolist()]
    fast = index.exact_scores(rows, now)
    assert fast.dtype == np.int64
    assert fast.tolist() == exact
    # both ways of scoring, whatever the number of rows picks
    assert index.scores.vectorised(rows, now).tolist() == exact
    assert index.scores.one_by_one(rows.tolist(), now) == exact


def test_a_tie_is_settled_the_exact_way() -> None:
    """The double nearest 0.0000125 lies a little above 12.5 ppm, so its factor is 13,
    though the float product ``value * 1e6`` is exactly 12.5 and ``rint`` halves it to 12;
    the double nearest 0.0000135 lies a little below 13.5 ppm (13, where ``rint`` gives
    14). The expected values come from exact rational arithmetic (``Fraction``). With
    all the weight on confidence the score is the confidence factor itself."""
    data = {
        "type": [TYPE_CODES[0]] * 4,
        "confidence": [0.0000125, 0.0000135, 0.0000005, 0.0000015],
        "priority": [5] * 4,
        "pinned": [False] * 4,
        "indeg": [0] * 4,
        "access": [0] * 4,
        "at": [0] * 4,
        "max_indeg": 0,
        "max_access": 0,
        "now": 0,
        "weights": (PPM, 0, 0, 0, 0),
    }
    index = index_of(data)
    rows = np.arange(4, dtype=np.int64)
    expected = [round(Fraction(value) * PPM) for value in data["confidence"]]
    assert expected[:2] == [13, 13]
    assert [int(np.rint(value * 1e6)) for value in data["confidence"][:2]] == [12, 14]
    assert index.exact_scores(rows, 0).tolist() == expected
    assert index.scores.vectorised(rows, 0).tolist() == expected
    assert [index.exact_score(row, 0) for row in range(4)] == expected


def _near_half_ages(life: int, count: int) -> list[int]:
    """Ages (ms) whose recency ``0.5 ** (age / life)`` lies within 1e-6 ppm of a half
    ppm: where a float rounding and the exact one could part."""
    found = []
    age = life  # recency 0.5: scaled values change by about 6e-4 ppm per ms here
    while len(found) < count:
        age += 1
        scaled = Fraction(0.5 ** (age / life)) * PPM
        if abs(scaled - int(scaled) - Fraction(1, 2)) <= Fraction(1, 10**6):
            found.append(age)
    return found


def test_recency_near_a_half_ppm_is_scored_the_exact_way(monkeypatch: Any) -> None:
    """Rows whose recency factor lies within the tie guard of a half ppm are scored by
    ``exact_score`` (core.salience's own arithmetic), the others by numpy; all equal it."""
    event = next(t.type_code for t in MEMORY_TYPES if t.type_name == "event")
    life = 7 * DAY
    near = _near_half_ages(life, 3)
    ages = [*near, life, 2 * life, life + 12_345, 0]
    count = len(ages)
    now = 400 * DAY
    data = {
        "type": [event] * count,
        "confidence": [1.0] * count,
        "priority": [5] * count,
        "pinned": [False] * count,
        "indeg": [0] * count,
        "access": [0] * count,
        "at": [now - age for age in ages],
        "max_indeg": 0,
        "max_access": 0,
        "now": now,
        "weights": (0, 0, 0, 0, PPM),
    }
    index = index_of(data)
    expected = [index.exact_score(row, now) for row in range(count)]
    called: list[int] = []
    exact_score = index.scores.exact_score

    def counted(row: int, at: int) -> int:
        called.append(row)
        return exact_score(row, at)

    monkeypatch.setattr(index.scores, "exact_score", counted)
    rows = np.arange(count, dtype=np.int64)
    assert index.scores.vectorised(rows, now).tolist() == expected
    assert called == [0, 1, 2]  # the three near a half, and only those


def test_a_factor_near_a_half_ppm_is_rounded_by_the_exact_function() -> None:
    """``_ppm`` rounds values near a half ppm with the caller's exact function (numpy's
    log1p may differ from math.log there), and the rest with rint."""
    from cortexgraph.index.ppm import ppm as _ppm

    values = np.asarray([0.25, 0.0000125, 0.5, 0.0000135])
    assert _ppm(values).tolist() == [250_000, 13, 500_000, 13]
    assert _ppm(values, lambda i: -i).tolist() == [250_000, -1, 500_000, -3]


def test_recency_decays_with_the_half_life() -> None:
    """An Event (half-life 7 days) one half-life old has recency 500,000 ppm; with all
    the weight on recency that is its score; pinned, it does not decay."""
    event = next(t.type_code for t in MEMORY_TYPES if t.type_name == "event")
    data = {
        "type": [event, event, event],
        "confidence": [1.0] * 3,
        "priority": [5] * 3,
        "pinned": [False, True, False],
        "indeg": [0] * 3,
        "access": [0] * 3,
        "at": [0, 0, 14 * DAY],
        "max_indeg": 0,
        "max_access": 0,
        "now": 7 * DAY,
        "weights": (0, 0, 0, 0, PPM),
    }
    index = index_of(data)
    scores = index.exact_scores(np.arange(3, dtype=np.int64), 7 * DAY)
    assert scores.tolist() == [500_000, PPM, PPM]


# ---------------------------------------------------------------------------
# a salience walk over many rows (exact scores, then pools of 4x growing size) gives the
# order of a sort by exact score, ties by id


@st.composite
def many_rows(draw: st.DrawFn) -> dict[str, Any]:
    """Enough rows for several rounds of a walk, with few distinct values of each
    column, so that equal and nearly equal scores abound."""
    count = draw(st.integers(65, 300))
    now = T0 + 400 * DAY
    ages = st.one_of(
        st.sampled_from([0, DAY // 7, DAY, 7 * DAY, 30 * DAY, 180 * DAY, -DAY]),
        st.integers(0, 400 * DAY),
    )

    def column(strategy: st.SearchStrategy[Any]) -> list[Any]:
        return draw(st.lists(strategy, min_size=count, max_size=count))

    return {
        "type": column(st.sampled_from(TYPE_CODES)),
        "confidence": column(st.one_of(st.sampled_from([0.5, 0.8, 1.0]), tie_confidences)),
        "priority": column(st.integers(4, 6)),
        "pinned": column(st.sampled_from([False] * 7 + [True])),
        "indeg": column(st.integers(0, 2)),
        "access": column(st.integers(0, 2)),
        "at": [now - age for age in column(ages)],
        "max_indeg": 2,
        "max_access": 2,
        "now": now,
        "weights": draw(weights),
        "seed": draw(st.integers(0, 2**32)),
    }


@settings(max_examples=150, deadline=None)
@given(many_rows(), st.integers(1, 20), st.integers(0, 300))
def test_salience_walk_is_a_sort_by_exact_score(
    data: dict[str, Any], first: int, read: int
) -> None:
    index = index_of(data)
    rng = np.random.default_rng(data["seed"])
    index.ids = [bytes(rng.integers(0, 256, 16, dtype=np.uint8)) for _ in data["type"]]
    index.cols["idkey"] = np.asarray(
        [int.from_bytes(memory_id[:8], "big") for memory_id in index.ids], dtype=np.uint64
    )
    rows = np.arange(len(data["type"]), dtype=np.int64)
    now = data["now"]
    exact = {row: index.exact_score(row, now) for row in rows.tolist()}
    expected = sorted(exact, key=lambda row: (-exact[row], index.ids[row]))
    scores: dict[int, int] = {}
    walk = index.ordered(rows, "salience", now, first=first, scores=scores)
    walked = [row for row, _ in zip(walk, range(read), strict=False)]
    assert walked == expected[:read]
    assert {row: scores[row] for row in walked} == {row: exact[row] for row in walked}


# ---------------------------------------------------------------------------
# the static parts kept by the catch-up equal a fresh build


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(["fact", "event", "preference"]),
                  st.floats(0.0, 1.0), st.integers(1, 10)),
        st.tuples(st.just("edge"), st.integers(0, 50), st.integers(0, 50)),
        st.tuples(st.just("access"), st.integers(0, 50), st.integers(1, 3)),
        st.tuples(st.just("pin"), st.integers(0, 50)),
        st.tuples(st.just("tombstone"), st.integers(0, 50)),
        st.tuples(st.just("attest"), st.integers(0, 50), st.sampled_from(["success", "failure"])),
    ),
    min_size=1,
    max_size=25,
)  # fmt: skip


def _memory(kind: str, confidence: float, priority: int) -> cg.Memory:
    if kind == "fact":
        return cg.Fact(text="a fact", confidence=confidence, priority=priority)
    if kind == "event":
        return cg.Event(text="an event", confidence=confidence, priority=priority)
    return cg.Preference(text="a preference", confidence=confidence, priority=priority)


@settings(max_examples=40, deadline=None)
@given(OPS)
def test_incremental_static_parts_equal_a_fresh_build(tmp_path_factory: Any, ops: Any) -> None:
    """After every operation, on one handle that keeps its column index (and its cached
    static salience terms) current by catch-up: scores equal those of a column index
    built afresh from the same transaction, and the row-by-row exact scores."""
    root = tmp_path_factory.mktemp("columns")
    at = T0
    with cg.open(root, "agent", sync=False) as cx:
        model = SignalOps([cx.write(cg.Fact(text="seed", confidence=0.5), at=at)])
        for op in ops:
            at += DAY // 3

            def write(op: Any, at: int = at) -> cg.MemoryURI:
                return cx.write(_memory(op[1], op[2], op[3]), at=at)

            if not model.carry_out(cx, op, at, write):
                event(f"refused: {op[0]}")
                continue  # a self-edge, a tombstoned target: nothing changed
            now = at + DAY
            index = cx._column_index()
            with cx._env.read() as txn:
                index.refresh(txn)
                index.exact_scores(index.all_rows()[:1], now)  # the static parts exist
                fresh = ColumnIndex()
                fresh.refresh(txn)
            rows = index.all_rows()
            kept = index.exact_scores(rows, now).tolist()
            assert kept == [index.exact_score(row, now) for row in rows.tolist()]
            # a build numbers rows in id order, the catch-up in write order
            scores = fresh.exact_scores(fresh.all_rows(), now).tolist()
            built = dict(zip(fresh.ids, scores, strict=True))
            assert dict(zip(index.ids, kept, strict=True)) == built


def test_memoised_records_follow_every_change(tmp_path: Any) -> None:
    """find keeps decoded records per row; an update, a pin, a tombstone and a rebuild
    of the index are each seen by the next find on the same handle."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        uri = cx.write(cg.Fact(text="first text", tags=("t",)), at=T0)
        other = cx.write(cg.Fact(text="other", tags=("t",)), at=T0 + 1)

        def texts() -> list[str]:
            found = cx.find(cg.Q.tag("t"), limit=10, now=T0 + DAY)
            return sorted(hit.record.memory.text for hit in found)

        assert texts() == ["first text", "other"]
        assert texts() == ["first text", "other"]  # now from the memos
        cx.update(uri, text="second text", at=T0 + 2)
        assert texts() == ["other", "second text"]
        cx.update(other, pinned=True, at=T0 + 3)
        pinned = [
            hit.record.memory.pinned for hit in cx.find(cg.Q.tag("t") & cg.Q.pinned(), limit=5)
        ]
        assert pinned == [True]
        cx.tombstone(uri, at=T0 + 4)
        assert texts() == ["other"]
        index = cx._column_index()
        index.seq = -1  # force a full build at the next refresh
        assert texts() == ["other"]
        versions = [hit.record.version for hit in cx.find(cg.Q.tag("t"), limit=5)]
        assert versions == [2]


def test_memos_are_bounded_and_keep_the_newer_half(tmp_path: Any, monkeypatch: Any) -> None:
    """At the limit the older half of the memos goes; the newest stay valid."""
    from cortexgraph.index import memo

    monkeypatch.setattr(memo, "_MEMO_LIMIT", 8)
    with cg.open(tmp_path, "agent", sync=False) as cx:
        for i in range(12):
            cx.write(cg.Fact(text=f"fact {i}", tags=("t",)), at=T0 + i)
        index = cx._column_index()
        with cx._env.read() as txn:
            seq = index.refresh(txn)
        for row in range(12):
            index.remember(row, f"memo {row}", seq)
        assert len(index.memos) <= 8
        assert index.memo(11, seq) == "memo 11"  # the newest survive
        assert index.memo(0, seq) is None  # the oldest went
