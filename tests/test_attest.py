"""``attest``: the Attest + LearnWeights pair, the learned weights, and their replay."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.salience import DEFAULT_WEIGHTS, learn_weights, salience_factors

T0 = 1_700_000_000_000


def test_attest_journals_both_memories_and_learns_from_the_cited_profiles(
    cx: cg.Cortex,
) -> None:
    """attest writes an Attest citing pinned URIs and a LearnWeights holding exactly the
    learner's output for the cited memories' factor profiles (computed here from their
    known fields), and the new weights become current."""
    a = cx.write(cg.Fact(text="deploy via CI", confidence=0.9, priority=8), at=T0)
    b = cx.write(cg.Pattern(text="retry flaky tests", confidence=0.4, priority=3), at=T0)
    cx.add_edge(b, a, "relates_to", at=T0)
    now = T0 + 30 * 86_400_000
    result = cx.attest([a, b.head], outcome="success", at=now)
    profile_a = salience_factors(type_name="fact", confidence=0.9, priority=8, pinned=False,
                                 in_degree=1, max_in_degree=1, access_count=0, max_access=0,
                                 age_ms=now - T0)
    profile_b = salience_factors(type_name="pattern", confidence=0.4, priority=3,
                                 pinned=False, in_degree=0, max_in_degree=1, access_count=0,
                                 max_access=0, age_ms=now - T0)
    expected = learn_weights(DEFAULT_WEIGHTS, [profile_a, profile_b], "success")
    assert result.before == DEFAULT_WEIGHTS
    assert result.after == expected
    assert cx.weights() == expected
    attest = cx.resolve(result.attest).memory
    assert isinstance(attest, cg.Attest)
    assert attest.cited == (str(a), str(b.at_version(1)))
    assert attest.outcome == "success"
    learn = cx.resolve(result.learn).memory
    assert isinstance(learn, cg.LearnWeights)
    assert learn.weights == expected and learn.attest == str(result.attest)
    ops = [(e.op, e.fields["body"]["type"]) for e in cx.journal(since=cx.seq - 2)]
    assert ops == [("write", "attest"), ("write", "learn_weights")]


def test_success_moves_toward_the_profile_and_failure_away(cx: cg.Cortex) -> None:
    """Citing a memory whose strongest factor is confidence raises the confidence weight on
    success and lowers it on failure (a constructed case)."""
    fact = cx.write(cg.Fact(text="x", confidence=1.0, priority=1), at=T0)
    up = cx.attest([fact], outcome="success", at=T0)
    assert up.after[0] > up.before[0]
    down = cx.attest([fact], outcome="failure", at=T0)
    assert down.after[0] < down.before[0]


@pytest.mark.parametrize(
    ("cited", "kwargs", "error", "field"),
    [
        ([], {"outcome": "success"}, cg.ValidationError, "cited"),
        ("not-a-list", {"outcome": "success"}, cg.ValidationError, "cited"),
        (None, {"outcome": "maybe"}, cg.ValidationError, "outcome"),
        (["0" * 32], {"outcome": "success"}, cg.NotFoundError, None),
        (None, {"outcome": "success", "ns": "Bad NS"}, cg.ValidationError, "ns"),
    ],
)
def test_bad_attests_change_nothing(
    cx: cg.Cortex, cited: object, kwargs: dict[str, str], error: type[Exception],
    field: str | None,
) -> None:
    """A bad attest raises its typed error and leaves every table byte-identical."""
    a = cx.write(cg.Fact(text="a"))
    before = cx.table_digests()
    with pytest.raises(error) as info:
        cx.attest([a] if cited is None else cited, **kwargs)  # type: ignore[arg-type]
    if field is not None:
        assert info.value.field == field  # type: ignore[attr-defined]
    assert cx.table_digests() == before


@settings(max_examples=25)
@given(steps=st.lists(st.tuples(st.lists(st.integers(0, 4), min_size=1, max_size=3),
                                st.sampled_from(["success", "failure"]),
                                st.integers(0, 400)), min_size=1, max_size=12))
def test_weights_stay_valid_and_replay_byte_for_byte(
    steps: list[tuple[list[int], str, int]]
) -> None:
    """Over random attest sequences every weight stays >= 20,000 ppm and they sum to
    exactly 1,000,000; rebuilding from the journal reproduces the weights and every
    table byte for byte."""
    root = Path(tempfile.mkdtemp())
    try:
        with cg.open(root, "agent", sync=False) as cx:
            kinds = [cg.Fact, cg.Event, cg.Preference, cg.Pattern, cg.Goal]
            uris = [cx.write(kind(text=f"m{i}", confidence=i / 4, priority=2 * i + 1), at=T0)
                    for i, kind in enumerate(kinds)]
            for cited, outcome, days in steps:
                cx.attest([uris[i] for i in cited], outcome=outcome, at=T0 + days * 86_400_000)
                weights = cx.weights()
                assert sum(weights) == 1_000_000
                assert min(weights) >= 20_000
            digests, weights = cx.table_digests(), cx.weights()
            cx.rebuild()
            assert cx.weights() == weights
            assert cx.table_digests() == digests
    finally:
        shutil.rmtree(root)
