"""Salience math (``core/salience.py``): factors, cold score and the integer weight learner.

Invariants: W1 (learned weights are each >= 20,000 ppm and sum to exactly 1,000,000) and
W2 (the learner is integer-only and gives the same bytes in any process).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cortexgraph.core.salience import (
    ALPHA,
    DAY_MS,
    DEFAULT_WEIGHTS,
    FACTOR_NAMES,
    HALF_LIFE_DAYS,
    PPM,
    WEIGHT_FLOOR,
    centrality,
    cold_score,
    effective_confidence_ppm,
    factor_ppm,
    frequency,
    half_life_ms,
    learn_weights,
    recency,
    salience_factors,
    trusted_cold_score,
    trusted_salience_factors,
)
from cortexgraph.core.taxonomy import MEMORY_TYPES, LearnWeights
from cortexgraph.errors import ValidationError

OUTCOMES = ("success", "failure")
DECAYING = {"preference": 180, "pattern": 60, "event": 7}
STABLE = ("goal", "constraint", "fact", "artifact_ref", "attest", "learn_weights")


# ---------------------------------------------------------------------------
# Strategies

ppm_values = st.one_of(st.integers(0, PPM), st.sampled_from([0, 1, 19_999, 20_000, PPM]))
profiles = st.tuples(*[ppm_values] * 5)
cited = st.lists(profiles, min_size=1, max_size=4)


@st.composite
def valid_weights(draw: st.DrawFn, floor: int = 0) -> tuple[int, ...]:
    """Five non-negative integers summing to 1,000,000, each >= ``floor``."""
    free = PPM - 5 * floor
    point = st.one_of(st.integers(0, free), st.sampled_from([0, 1, free - 1, free]))
    cuts = sorted(draw(st.lists(point, min_size=4, max_size=4)))
    bounds = [0, *cuts, free]
    return tuple(floor + bounds[i + 1] - bounds[i] for i in range(5))


def memory_factors(**changes: Any) -> tuple[int, ...]:
    """salience_factors of a plain fact, with ``changes`` applied."""
    args: dict[str, Any] = dict(
        type_name="fact",
        confidence=1.0,
        priority=5,
        pinned=False,
        in_degree=0,
        max_in_degree=0,
        access_count=0,
        max_access=0,
        age_ms=0,
    )
    args.update(changes)
    return salience_factors(**args)


def l1(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True))


def target_of(profiles: list[tuple[int, ...]]) -> tuple[int, ...]:
    """An independent reference for the learner's target: the normalised mean profile,
    by largest remainder with ties to the lower index (uniform when all zero)."""
    sums = [sum(column) for column in zip(*profiles, strict=True)]
    total = sum(sums)
    if total == 0:
        return (200_000,) * 5
    exact = [(s * PPM) / total for s in sums]  # floats are fine for a reference of this size
    parts = [s * PPM // total for s in sums]
    remainders = [s * PPM % total for s in sums]
    for i in sorted(range(5), key=lambda i: (-remainders[i], i))[: PPM - sum(parts)]:
        parts[i] += 1
    assert all(abs(p - e) < 1 for p, e in zip(parts, exact, strict=True))
    return tuple(parts)


# ---------------------------------------------------------------------------
# The learner: invariant W1


@settings(max_examples=150)
@given(
    start=st.one_of(st.just(DEFAULT_WEIGHTS), valid_weights()),
    steps=st.lists(st.tuples(cited, st.sampled_from(OUTCOMES)), max_size=200),
)
def test_weights_stay_above_the_floor_and_sum_to_a_million(
    start: tuple[int, ...], steps: list[tuple[list[tuple[int, ...]], str]]
) -> None:
    """W1: from the defaults or any valid weights (even ones below the floor), after every
    attest of a random sequence, each weight is an int >= 20,000 and they sum to exactly
    1,000,000; and the result is accepted by the LearnWeights record that journals it."""
    weights = start
    for profile_list, outcome in steps:
        weights = learn_weights(weights, profile_list, outcome)
        assert type(weights) is tuple and len(weights) == 5
        assert all(type(w) is int and w >= WEIGHT_FLOOR for w in weights), weights
        assert sum(weights) == PPM
    LearnWeights(weights=weights)


@given(weights=valid_weights(floor=WEIGHT_FLOOR), outcome=st.sampled_from(OUTCOMES))
def test_weights_on_target_are_a_fixed_point(weights: tuple[int, ...], outcome: str) -> None:
    """Citing one memory whose profile equals the weights (each >= the floor) changes
    nothing, on success and failure alike: renormalising valid weights is the identity."""
    assert learn_weights(weights, [weights], outcome) == weights
    assert learn_weights(weights, [weights, weights], outcome) == weights


# ---------------------------------------------------------------------------
# The learner: direction


@settings(max_examples=300)
@given(weights=valid_weights(floor=WEIGHT_FLOOR), profile_list=cited)
@example(weights=(20_000, 20_000, 20_000, 20_000, 920_000), profile_list=[(0, 0, 0, 5, PPM)])
def test_success_never_moves_away_from_the_cited_profile(
    weights: tuple[int, ...], profile_list: list[tuple[int, ...]]
) -> None:
    """For weights the learner can hold (each >= the floor), a success attest does not
    increase the L1 distance to the normalised mean profile of the cited memories."""
    target = target_of(profile_list)
    after = learn_weights(weights, profile_list, "success")
    assert l1(after, target) <= l1(weights, target)


def test_success_moves_toward_the_profile_by_hand() -> None:
    """A success attest citing a pure-confidence memory pulls the weights 1/5 of the way
    toward it, strictly closing the distance; numbers computed by hand.

    weights  (450000, 200000, 150000, 100000, 100000), target (1000000, 0, 0, 0, 0)
    t - w    (550000, -200000, -150000, -100000, -100000); /5 ->
    step     (110000, -40000, -30000, -20000, -20000)
    w + step (560000, 160000, 120000, 80000, 80000): sum 1,000,000, all >= 20,000.
    L1 to target: before 550000 + 200000 + 150000 + 100000 + 100000 = 1,100,000;
    after 440000 + 160000 + 120000 + 80000 + 80000 = 880,000.
    """
    target = (PPM, 0, 0, 0, 0)
    after = learn_weights(DEFAULT_WEIGHTS, [target], "success")
    assert after == (560_000, 160_000, 120_000, 80_000, 80_000)
    assert l1(DEFAULT_WEIGHTS, target) == 1_100_000
    assert l1(after, target) == 880_000


def test_failure_moves_away_from_the_profile_by_hand() -> None:
    """A failure attest pushes the weights 1/5 of their distance away from the cited
    profile, strictly growing the distance; numbers computed by hand.

    weights  (450000, 200000, 150000, 100000, 100000), target (1000000, 0, 0, 0, 0)
    w - step (340000, 240000, 180000, 120000, 120000): sum 1,000,000, no clamping.
    L1 to target: before 1,100,000; after 660000 + 240000 + 180000 + 120000 + 120000
    = 1,320,000.
    """
    target = (PPM, 0, 0, 0, 0)
    after = learn_weights(DEFAULT_WEIGHTS, [target], "failure")
    assert after == (340_000, 240_000, 180_000, 120_000, 120_000)
    assert l1(after, target) == 1_320_000


def test_failure_that_hits_the_floor_is_clamped_and_renormalised_by_hand() -> None:
    """A failure that would drive a weight negative leaves it at the floor, and the mass
    above the floor is rescaled to total exactly 1,000,000 by largest remainder (ties to
    the lower index). Numbers computed by hand:

    weights (20000, 20000, 20000, 20000, 920000), target (1000000, 0, 0, 0, 0)
    t - w   (980000, -20000, -20000, -20000, -920000); /5 ->
    step    (196000, -4000, -4000, -4000, -184000)
    w - step (-176000, 24000, 24000, 24000, 1104000)
    clamp   (20000, 24000, 24000, 24000, 1104000): sum 1,196,000
    above the floor (0, 4000, 4000, 4000, 1084000), E = 1,096,000; free = 900,000
      4000 * 900000 / 1096000    = 3284 rem 736,000     (1,096,000 * 3284 = 3,599,264,000)
      1084000 * 900000 / 1096000 = 890145 rem 1,080,000 (1,096,000 * 890145
                                                          = 975,598,920,000)
    floors sum to 3 * 3284 + 890145 = 899,997: 3 units left, to the largest remainders:
      index 4 (1,080,000), then indexes 1 and 2 (736,000, ties to the lower index).
    result  (20000, 23285, 23285, 23284, 910146): sum 1,000,000.
    """
    weights = (20_000, 20_000, 20_000, 20_000, 920_000)
    after = learn_weights(weights, [(PPM, 0, 0, 0, 0)], "failure")
    assert after == (20_000, 23_285, 23_285, 23_284, 910_146)


def test_target_is_the_normalised_mean_and_steps_truncate_toward_zero_by_hand() -> None:
    """Two cited profiles are averaged and normalised; the step of 26666.6 truncates to
    26666; the unit lost to truncation is handed back by largest remainder. By hand:

    profiles (600000, 0, ...) and (0, 300000, 0, ...): sums (600000, 300000, 0, 0, 0)
    target: 600000e6/900000 = 666666 rem .67, 300000e6/900000 = 333333 rem .33;
      1 unit left -> index 0: (666667, 333333, 0, 0, 0)
    from uniform (200000 x 5): t - w = (466667, 133333, -200000, -200000, -200000)
    step (93333, 26666, -40000, -40000, -40000) -> (293333, 226666, 160000, 160000, 160000)
    sum 999,999; above the floor (273333, 206666, 140000 x 3), E = 899,999
    each share * 900000 / 899999 = share rem share, so the floors sum to 899,999 and the
    one unit left goes to index 0 (remainder 273,333): (293334, 226666, 160000 x 3).
    """
    profile_list = [(600_000, 0, 0, 0, 0), (0, 300_000, 0, 0, 0)]
    assert target_of(profile_list) == (666_667, 333_333, 0, 0, 0)
    after = learn_weights((200_000,) * 5, profile_list, "success")
    assert after == (293_334, 226_666, 160_000, 160_000, 160_000)


def test_steps_truncate_toward_zero_in_both_directions_by_hand() -> None:
    """The EMA step is (t - w) / 5 truncated toward zero, so +6 and -6 give steps of +1
    and -1 that cancel exactly (floor division would give -2 and leave a unit for the
    renormalisation to hand to the largest weight). By hand, with a cited profile that
    already sums to 1,000,000 (so it is the target):

    weights (100006, 599994, 100000, 100000, 100000)
    target  (100000, 600000, 100000, 100000, 100000); t - w = (-6, 6, 0, 0, 0)
    step    (-1, 1, 0, 0, 0)
    success w + step = (100005, 599995, 100000, 100000, 100000), sum 1,000,000
    failure w - step = (100007, 599993, 100000, 100000, 100000), sum 1,000,000
    """
    weights = (100_006, 599_994, 100_000, 100_000, 100_000)
    target = (100_000, 600_000, 100_000, 100_000, 100_000)
    assert learn_weights(weights, [target], "success") == (
        100_005,
        599_995,
        100_000,
        100_000,
        100_000,
    )
    assert learn_weights(weights, [target], "failure") == (
        100_007,
        599_993,
        100_000,
        100_000,
        100_000,
    )


def test_all_zero_profiles_pull_toward_uniform_by_hand() -> None:
    """Citing memories whose factors are all zero targets the uniform profile. By hand:
    t - w = (-250000, 0, 50000, 100000, 100000), step (-50000, 0, 10000, 20000, 20000)."""
    after = learn_weights(DEFAULT_WEIGHTS, [(0,) * 5, (0,) * 5], "success")
    assert after == (400_000, 200_000, 160_000, 120_000, 120_000)


def test_alpha_is_one_fifth() -> None:
    """ALPHA is the integer ratio 0.2."""
    assert ALPHA == (1, 5)


@pytest.mark.parametrize(
    ("weights", "profile_list", "outcome", "field"),
    [
        pytest.param((PPM, 0, 0, 0), [(0,) * 5], "success", "weights", id="four-weights"),
        pytest.param((PPM, 0, 0, 0, 0, 0), [(0,) * 5], "success", "weights", id="six-weights"),
        pytest.param((PPM + 1, -1, 0, 0, 0), [(0,) * 5], "success", "weights", id="negative"),
        pytest.param((PPM, 0, 0, 0, 1), [(0,) * 5], "success", "weights", id="sum-too-big"),
        pytest.param((999_999, 0, 0, 0, 0), [(0,) * 5], "success", "weights", id="sum-small"),
        pytest.param((1e6, 0, 0, 0, 0), [(0,) * 5], "success", "weights", id="float-weight"),
        pytest.param((True, 999_999, 0, 0, 0), [(0,) * 5], "success", "weights", id="bool"),
        pytest.param("abcde", [(0,) * 5], "success", "weights", id="string"),
        pytest.param(DEFAULT_WEIGHTS, [], "success", "cited_profiles", id="empty-cited"),
        pytest.param(DEFAULT_WEIGHTS, [(0,) * 4], "success", "cited_profiles", id="short"),
        pytest.param(DEFAULT_WEIGHTS, [(-1, 0, 0, 0, 0)], "success", "cited_profiles", id="neg"),
        pytest.param(
            DEFAULT_WEIGHTS,
            [(PPM + 1, 0, 0, 0, 0)],
            "success",
            "cited_profiles",
            id="over-a-million",
        ),
        pytest.param(
            DEFAULT_WEIGHTS, [(0.5, 0, 0, 0, 0)], "success", "cited_profiles", id="float-factor"
        ),
        pytest.param(
            DEFAULT_WEIGHTS, (0, 0, 0, 0, 0), "success", "cited_profiles", id="profile-not-nested"
        ),
        pytest.param(DEFAULT_WEIGHTS, [(0,) * 5], "neutral", "outcome", id="unknown-outcome"),
        pytest.param(DEFAULT_WEIGHTS, [(0,) * 5], None, "outcome", id="no-outcome"),
    ],
)
def test_learner_rejects_bad_input_naming_the_field(
    weights: object, profile_list: object, outcome: object, field: str
) -> None:
    """Each kind of bad input raises ValidationError naming the offending argument."""
    with pytest.raises(ValidationError) as caught:
        learn_weights(weights, profile_list, outcome)  # type: ignore[arg-type]
    assert caught.value.field == field


# ---------------------------------------------------------------------------
# The learner: determinism (W2)

LEARNER_SCRIPT = textwrap.dedent(
    """
    from cortexgraph.core.salience import DEFAULT_WEIGHTS, learn_weights, salience_factors

    state = 12345
    def draw(n):
        global state
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        return (state >> 33) % n

    weights, history = DEFAULT_WEIGHTS, []
    for step in range(300):
        cited = [tuple(draw(1_000_001) for _ in range(5)) for _ in range(1 + draw(4))]
        weights = learn_weights(weights, cited, ("success", "failure")[draw(2)])
        history.append(weights)
    for i in range(50):
        history.append(salience_factors(
            type_name=("event", "pattern", "preference", "fact")[i % 4],
            confidence=draw(1001) / 1000, priority=1 + draw(10), pinned=i % 7 == 0,
            in_degree=i, max_in_degree=50, access_count=i, max_access=60,
            age_ms=draw(10**11)))
    print(repr(history))
    """
)


def test_learner_is_byte_identical_under_other_hash_seeds(tmp_path: Path) -> None:
    """W2: 300 learner steps (and 50 factor profiles) give the same output in this
    process and in two subprocesses with different PYTHONHASHSEEDs."""
    script = tmp_path / "learner.py"
    script.write_text(LEARNER_SCRIPT, encoding="utf-8")
    outputs = []
    for seed in ("0", "987654"):
        done = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    namespace: dict[str, object] = {}
    lines: list[str] = []
    namespace["print"] = lines.append
    exec(compile(LEARNER_SCRIPT, str(script), "exec"), namespace)
    in_process = (lines[0] + "\n").encode()
    assert outputs[0].startswith(b"[(")
    assert outputs[0] == outputs[1] == in_process


# ---------------------------------------------------------------------------
# Factors

factor_kwargs = st.fixed_dictionaries(
    {
        "type_name": st.sampled_from([t.type_name for t in MEMORY_TYPES]),
        "confidence": st.floats(0.0, 1.0),
        "priority": st.integers(1, 10),
        "pinned": st.booleans(),
        "in_degree": st.integers(0, 10_000),
        "extra_in": st.integers(0, 10_000),
        "access_count": st.integers(0, 10_000),
        "extra_access": st.integers(0, 10_000),
        "age_ms": st.integers(-(10**12), 10**13),
    }
)


@given(factor_kwargs)
def test_every_factor_is_an_int_in_ppm_range(kwargs: dict[str, object]) -> None:
    """salience_factors returns five ints in 0..1,000,000 for any valid memory, and
    confidence and priority come through exactly."""
    args = dict(kwargs)
    args["max_in_degree"] = args["in_degree"] + args.pop("extra_in")  # type: ignore[operator]
    args["max_access"] = args["access_count"] + args.pop("extra_access")  # type: ignore[operator]
    factors = salience_factors(**args)  # type: ignore[arg-type]
    assert len(factors) == len(FACTOR_NAMES) == 5
    assert all(type(f) is int and 0 <= f <= PPM for f in factors)
    exact = Decimal(args["confidence"]) * PPM  # type: ignore[arg-type]
    assert factors[0] == int(exact.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    assert factors[1] == args["priority"] * 100_000  # type: ignore[operator]


@given(half_life=st.integers(1, 10**12))
def test_recency_halves_at_one_half_life_and_is_one_at_age_zero(half_life: int) -> None:
    """For any half-life, recency is 1,000,000 ppm at age 0 (and at negative ages),
    500,000 at one half-life and 250,000 at two."""
    as_ppm = [
        factor_ppm((0, 0, 0, 0, recency(age, half_life)))[4]
        for age in (-half_life, 0, half_life, 2 * half_life)
    ]
    assert as_ppm == [PPM, PPM, 500_000, 250_000]


@pytest.mark.parametrize(("type_name", "days"), sorted(DECAYING.items()))
def test_decaying_types_halve_at_their_half_life(type_name: str, days: int) -> None:
    """Through salience_factors, a preference, pattern or event read rarely and linked
    to little is at 1,000,000 ppm recency when new, 500,000 after its half-life in days,
    and has already lost some a millisecond in."""

    def recency_at(age_ms: int) -> int:
        return memory_factors(type_name=type_name, in_degree=1, max_in_degree=4, age_ms=age_ms)[4]

    assert recency_at(0) == PPM
    assert recency_at(days * DAY_MS) == 500_000
    assert recency_at(2 * days * DAY_MS) == 250_000
    assert recency_at(DAY_MS) < PPM


def test_half_life_table() -> None:
    """The half-life table is docs/ranking.md's, covering every memory type."""
    assert dict(HALF_LIFE_DAYS) == {**DECAYING, **dict.fromkeys(STABLE)}
    assert set(HALF_LIFE_DAYS) == {t.type_name for t in MEMORY_TYPES}


@given(
    type_name=st.sampled_from(sorted(HALF_LIFE_DAYS)),
    pinned=st.booleans(),
    access=st.integers(0, 100),
    age_ms=st.integers(0, 10**14),
)
def test_stable_types_and_pinned_memories_never_decay(
    type_name: str, pinned: bool, access: int, age_ms: int
) -> None:
    """A stable type or a pinned memory has recency 1,000,000 ppm at any age; any other
    memory has less after 100 half-lives."""
    factors = memory_factors(
        type_name=type_name, pinned=pinned, access_count=access, max_access=100, age_ms=age_ms
    )
    if pinned or type_name in STABLE:
        assert factors[4] == PPM
        assert half_life_ms(type_name, pinned=pinned, access_count=access, centrality=0) is None
    else:
        old = memory_factors(
            type_name=type_name, access_count=access, max_access=100, age_ms=400 * 365 * DAY_MS
        )
        assert old[4] < PPM


@pytest.mark.parametrize(("type_name", "days"), sorted(DECAYING.items()))
def test_modifiers_double_the_half_life_once(type_name: str, days: int) -> None:
    """More than 10 reads, or centrality above 0.5, doubles the half-life; both together
    still double it (not quadruple); exactly 10 reads and exactly 0.5 do not."""
    base = days * DAY_MS

    def life(access: int, centrality: float) -> int | None:
        return half_life_ms(type_name, pinned=False, access_count=access, centrality=centrality)

    assert life(0, 0.0) == base
    assert life(10, 0.5) == base
    assert life(11, 0.0) == 2 * base
    assert life(0, 0.51) == 2 * base
    assert life(11, 1.0) == 2 * base


def test_a_hub_event_is_at_one_over_root_two_after_seven_days() -> None:
    """Through salience_factors: an event read 11 times decays with a 14-day half-life,
    so after 7 days its recency is 0.5 ** 0.5 = 0.70710678... -> 707,107 ppm (by hand);
    an event with 3 of 4 possible in-edges (centrality 0.75) likewise."""
    read = memory_factors(type_name="event", access_count=11, max_access=11, age_ms=7 * DAY_MS)
    linked = memory_factors(type_name="event", in_degree=3, max_in_degree=4, age_ms=7 * DAY_MS)
    assert read[4] == linked[4] == 707_107


@given(a=st.integers(0, 10**6), b=st.integers(0, 10**6), top=st.integers(0, 10**6))
def test_frequency_and_centrality_are_monotone_and_one_at_the_max(a: int, b: int, top: int) -> None:
    """For counts a <= b <= max, the factor of a is at most that of b, the max itself
    scores 1,000,000 ppm (when the max is positive) and a zero count scores 0."""
    low, high = sorted((a, b))
    top = max(top, high)
    for factor in (frequency, centrality):
        low_ppm, high_ppm, top_ppm, zero_ppm = (
            factor_ppm((0, 0, 0, 0, factor(n, top)))[4] for n in (low, high, top, 0)
        )
        assert low_ppm <= high_ppm <= top_ppm
        assert top_ppm == (PPM if top > 0 else 0)
        assert zero_ppm == 0


def test_frequency_is_logarithmic_by_hand() -> None:
    """3 reads out of a maximum of 15: log 4 / log 16 = 0.5 exactly in real numbers."""
    assert factor_ppm((0, 0, 0, frequency(3, 15), 0))[3] == 500_000


# ---------------------------------------------------------------------------
# The cold score

weights_strategy = st.one_of(st.just(DEFAULT_WEIGHTS), valid_weights())


@given(
    weights=weights_strategy,
    factors=profiles,
    index=st.integers(0, 4),
    bump=st.integers(1, PPM),
)
def test_cold_score_is_bounded_and_monotone_in_each_factor(
    weights: tuple[int, ...], factors: tuple[int, ...], index: int, bump: int
) -> None:
    """The cold score is an int in 0..1,000,000; raising any one factor never lowers it,
    and raises it when that factor's weight times the rise is at least 1,000,000."""
    score = cold_score(factors, weights)
    raised = list(factors)
    raised[index] = min(PPM, raised[index] + bump)
    higher = cold_score(raised, weights)
    assert type(score) is int and 0 <= score <= higher <= PPM
    if weights[index] * (raised[index] - factors[index]) >= PPM:
        assert higher > score
    assert cold_score((PPM,) * 5, weights) == PPM
    assert cold_score((0,) * 5, weights) == 0


def test_cold_score_known_answers_by_hand() -> None:
    """Default weights (0.45, 0.2, 0.15, 0.1, 0.1), by hand:

    (900000, 600000, 250000, 500000, 500000):
        405000 + 120000 + 37500 + 50000 + 50000 = 662,500
    (333333, 100000, 0, 0, 777777):
        450000*333333 = 149,999,850,000; 200000*100000 = 20,000,000,000;
        100000*777777 = 77,777,700,000; total 247,777,550,000 -> // 1e6 = 247,777
    """
    assert cold_score((900_000, 600_000, 250_000, 500_000, 500_000), DEFAULT_WEIGHTS) == 662_500
    assert cold_score((333_333, 100_000, 0, 0, 777_777), DEFAULT_WEIGHTS) == 247_777


def test_salience_known_answers_by_hand() -> None:
    """Two memories, by hand, with the default weights:

    a pattern, confidence 0.75, priority 3, 2 of at most 8 in-edges, never read, 120
    days old: half-life 60 days (2 reads <= 10, centrality 0.25 <= 0.5), recency
    0.5 ** 2 = 0.25 -> (750000, 300000, 250000, 0, 250000);
    score 337500 + 60000 + 37500 + 0 + 25000 = 460,000.

    the same pattern read 11 times (the most of any): frequency 1, half-life doubled to
    120 days, recency 0.5 -> (750000, 300000, 250000, 1000000, 500000);
    score 337500 + 60000 + 37500 + 100000 + 50000 = 585,000.
    """
    common: dict[str, Any] = dict(
        type_name="pattern",
        confidence=0.75,
        priority=3,
        in_degree=2,
        max_in_degree=8,
        age_ms=120 * DAY_MS,
    )
    quiet = memory_factors(**common, access_count=0, max_access=0)
    read = memory_factors(**common, access_count=11, max_access=11)
    assert quiet == (750_000, 300_000, 250_000, 0, 250_000)
    assert cold_score(quiet, DEFAULT_WEIGHTS) == 460_000
    assert read == (750_000, 300_000, 250_000, PPM, 500_000)
    assert cold_score(read, DEFAULT_WEIGHTS) == 585_000


def test_effective_confidence_by_hand() -> None:
    """Confidence 0.8 at recency 0.5 is 400,000 ppm; 0.55 at 0.5 is 275,000 (below the
    0.3 archive line); the product floors: 0.333333 * 0.333333 = 111110.888... -> 111,110."""
    assert effective_confidence_ppm(0.8, 500_000) == 400_000
    assert effective_confidence_ppm(0.55, 500_000) == 275_000
    assert effective_confidence_ppm(0.333333, 333_333) == 111_110


def test_factor_ppm_rounds_the_exact_value_half_to_even() -> None:
    """1/128 = 7812.5 ppm and 3/128 = 23437.5 ppm exactly in binary: ties go to even.
    The double nearest 2.5e-06 is 2.50000000000000020...e-06 and the one nearest 3.5e-06
    is 3.49999999999999994...e-06, so they round to 3 and 3 ppm (multiplying by 1e6 in
    floating point first would give exactly 2.5 and 3.5, and then 2 and 4)."""
    assert factor_ppm((1 / 128, 3 / 128, 5 / 128, 0, 1)) == (7_812, 23_438, 39_062, 0, PPM)
    assert factor_ppm((2.5e-06, 3.5e-06, 0, 0, 0))[:2] == (3, 3)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        pytest.param(lambda: factor_ppm((0, 0, 0, 0)), "factors", id="four-factors"),
        pytest.param(lambda: factor_ppm((0, 0, 0, 0, 1.5)), "factors", id="above-one"),
        pytest.param(lambda: factor_ppm((0, 0, 0, 0, float("nan"))), "factors", id="nan"),
        pytest.param(
            lambda: cold_score((0, 0, 0, 0, PPM + 1), DEFAULT_WEIGHTS),
            "factors_ppm",
            id="score-factor",
        ),
        pytest.param(lambda: cold_score((0,) * 5, (0,) * 5), "weights", id="score-weights"),
        pytest.param(lambda: centrality(3, 2), "in_degree", id="in-over-max"),
        pytest.param(lambda: centrality(-1, 2), "in_degree", id="in-negative"),
        pytest.param(lambda: frequency(3, 2), "access_count", id="access-over-max"),
        pytest.param(lambda: frequency(0, -2), "max_access", id="max-negative"),
        pytest.param(lambda: recency(1.5, 10), "age_ms", id="float-age"),  # type: ignore[arg-type]
        pytest.param(lambda: recency(1, 0), "half_life_ms", id="zero-half-life"),
        pytest.param(
            lambda: half_life_ms("note", pinned=False, access_count=0, centrality=0),
            "type_name",
            id="unknown-type",
        ),
        pytest.param(
            lambda: half_life_ms("event", pinned=1, access_count=0, centrality=0),
            "pinned",
            id="pinned-int",
        ),  # type: ignore[arg-type]
        pytest.param(
            lambda: half_life_ms("event", pinned=False, access_count=0, centrality=2),
            "centrality",
            id="centrality-two",
        ),
        pytest.param(
            lambda: effective_confidence_ppm(0.5, PPM + 1), "recency_ppm", id="recency-too-big"
        ),
        pytest.param(
            lambda: effective_confidence_ppm(-0.1, 0), "confidence", id="negative-confidence"
        ),
    ],
)
def test_factor_functions_reject_bad_input_naming_the_field(call: object, field: str) -> None:
    """Each bad argument raises ValidationError naming it."""
    with pytest.raises(ValidationError) as caught:
        call()  # type: ignore[operator]
    assert caught.value.field == field


def test_salience_factors_rejects_bad_memory_fields() -> None:
    """salience_factors validates the fields it reads: priority 0, confidence above 1."""
    with pytest.raises(ValidationError) as caught:
        memory_factors(priority=0)
    assert caught.value.field == "priority"
    with pytest.raises(ValidationError) as caught:
        memory_factors(confidence=1.01)
    assert caught.value.field == "confidence"


@given(
    type_name=st.sampled_from(sorted(HALF_LIFE_DAYS)),
    confidence=st.floats(0.0, 1.0),
    priority=st.integers(1, 10),
    pinned=st.booleans(),
    degrees=st.tuples(st.integers(0, 50), st.integers(0, 50)).map(sorted),
    accesses=st.tuples(st.integers(0, 50), st.integers(0, 50)).map(sorted),
    age_ms=st.integers(-(10**9), 10**12),
    weights=st.sampled_from([DEFAULT_WEIGHTS, (20_000, 20_000, 20_000, 20_000, 920_000)]),
)
def test_trusted_path_equals_the_checked_one(
    type_name: str, confidence: float, priority: int, pinned: bool, degrees: list[int],
    accesses: list[int], age_ms: int, weights: tuple[int, ...],
) -> None:
    """The unchecked fast path the query layer uses gives exactly the factors and score of
    the checked functions, for every valid input."""
    checked = salience_factors(
        type_name=type_name, confidence=confidence, priority=priority, pinned=pinned,
        in_degree=degrees[0], max_in_degree=degrees[1], access_count=accesses[0],
        max_access=accesses[1], age_ms=age_ms,
    )
    fast = trusted_salience_factors(type_name, confidence, priority, pinned, degrees[0],
                                    degrees[1], accesses[0], accesses[1], age_ms)
    assert fast == checked
    assert trusted_cold_score(fast, weights) == cold_score(checked, weights)
