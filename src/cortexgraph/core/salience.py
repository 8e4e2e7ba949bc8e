"""Salience: the five ranking factors, the cold score, and the weight learner.

Everything here is pure arithmetic: no I/O, clock, randomness or environment. Callers
pass ``now``-derived ages in, and get integers out.

Factors
    Five numbers in 0..1, in the order of :data:`FACTOR_NAMES`:

    ============  ===============================================================
    confidence    the memory's ``confidence``
    priority      ``priority / 10``
    centrality    ``in_degree / max_in_degree`` (0 when ``max_in_degree`` is 0)
    frequency     ``log(1 + access) / log(1 + max_access)`` (0 when ``max_access`` is 0)
    recency       ``0.5 ** (age_ms / half_life_ms)``; 1 for stable types and pinned
                  memories; ``age_ms`` below 0 counts as 0
    ============  ===============================================================

Integers, so that ranking is exactly reproducible
    Everything ranked on is an integer in parts per million (ppm). :func:`factor_ppm`
    turns each factor into ppm by rounding the factor's exact binary value times
    1,000,000 half to even (no intermediate float multiplication);
    :func:`cold_score` is ``sum(w_i * f_i) // 1_000_000`` over ppm weights and ppm factors.
    The learner (:func:`learn_weights`) uses integer arithmetic only.

    Confidence, priority and centrality use only correctly rounded IEEE-754 operations,
    so they are identical on every machine. Frequency and recency call ``log`` and
    ``pow`` from the platform's C maths library, which may differ between platforms in
    the last bit; since the result is rounded to ppm, a difference can only show up for
    a value within one ulp of a rounding boundary (``x.5`` ppm), and then by 1 ppm.

Invariants
    W1 :func:`learn_weights` returns five integers, each >= :data:`WEIGHT_FLOOR`, summing
    to exactly :data:`WEIGHT_TOTAL`, whatever valid weights and profiles it is given.
    W2 :func:`learn_weights` is a function of its arguments only, computed without
    floats: the same inputs give the same weights on any machine and in any process.

See ``docs/ranking.md`` for the formulas with worked examples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from ..errors import ValidationError
from .taxonomy import WEIGHT_COUNT, WEIGHT_TOTAL

__all__ = [
    "ALPHA",
    "check_int",
    "DAY_MS",
    "DEFAULT_WEIGHTS",
    "FACTOR_NAMES",
    "HALF_LIFE_DAYS",
    "HUB_ACCESS_COUNT",
    "HUB_CENTRALITY",
    "PPM",
    "WEIGHT_COUNT",
    "WEIGHT_FLOOR",
    "WEIGHT_TOTAL",
    "centrality",
    "cold_score",
    "effective_confidence_ppm",
    "factor_ppm",
    "frequency",
    "half_life_ms",
    "scaled_half_life_ms",
    "learn_weights",
    "recency",
    "round_ppm",
    "salience_factors",
    "trusted_cold_score",
    "trusted_salience_factors",
]

PPM: Final = 1_000_000
"""One, in parts per million: the scale of factors, weights and scores."""

FACTOR_NAMES: Final = ("confidence", "priority", "centrality", "frequency", "recency")
"""The five salience factors, in the order used by every tuple in this module."""

DEFAULT_WEIGHTS: Final = (450_000, 200_000, 150_000, 100_000, 100_000)
"""The weights (ppm, summing to 1,000,000) before any outcome has been attested."""

WEIGHT_FLOOR: Final = 20_000
"""The least weight (ppm) the learner leaves on any factor, so that none is ever ignored."""

ALPHA: Final = (1, 5)
"""The learner's EMA rate 0.2 as the integer ratio ``(numerator, denominator)``."""

DAY_MS: Final = 86_400_000
"""One day in milliseconds."""

HALF_LIFE_DAYS: Final[Mapping[str, int | None]] = {
    "goal": None,
    "preference": 180,
    "constraint": None,
    "fact": None,
    "pattern": 60,
    "event": 7,
    "artifact_ref": None,
    "attest": None,
    "learn_weights": None,
}
"""Base half-life in days of each memory type; ``None`` means stable (no decay)."""

HUB_ACCESS_COUNT: Final = 10
"""A memory read more often than this decays at half the speed (its half-life doubles)."""

HUB_CENTRALITY: Final = 0.5
"""A memory with centrality above this decays at half the speed (its half-life doubles)."""

_SCALE_FACTOR = 2  # the half-life multiplier for hubs, applied at most once


# ---------------------------------------------------------------------------
# Validation helpers: every failure is a ValidationError naming the field.


def check_int(value: object, field: str, *, lo: int = 0, hi: int | None = None) -> int:
    """``value`` if it is an int (not a bool) in ``lo..hi``, else a ValidationError naming
    ``field``."""
    if type(value) is not int:
        raise ValidationError(f"must be an integer, not {type(value).__name__}", field=field)
    if value < lo or (hi is not None and value > hi):
        bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise ValidationError(f"must be {bound}, not {value}", field=field)
    return value


def _unit(value: object, field: str) -> float:
    """A number in 0..1 (int or float, not bool) as a float."""
    if type(value) is int:
        value = float(value)
    if type(value) is not float:
        raise ValidationError(f"must be a number, not {type(value).__name__}", field=field)
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise ValidationError(f"must be between 0 and 1, not {value}", field=field)
    return value


def _ppm_tuple(value: object, field: str) -> tuple[int, ...]:
    """Five integers in 0..1,000,000."""
    if not isinstance(value, (tuple, list)) or len(value) != WEIGHT_COUNT:
        raise ValidationError(f"must be a sequence of {WEIGHT_COUNT} integers", field=field)
    for item in value:
        if type(item) is not int:
            raise ValidationError(
                f"must hold integers in parts per million, not {type(item).__name__}",
                field=field,
            )
        if not 0 <= item <= PPM:
            raise ValidationError(f"values must be between 0 and {PPM}, not {item}", field=field)
    return tuple(value)


def _weights(value: object, field: str = "weights") -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or len(value) != WEIGHT_COUNT:
        raise ValidationError(f"must be a sequence of {WEIGHT_COUNT} integers", field=field)
    for item in value:
        if type(item) is not int:
            raise ValidationError(
                f"must hold integers in parts per million, not {type(item).__name__}",
                field=field,
            )
        if item < 0:
            raise ValidationError(f"must not be negative, not {item}", field=field)
    if sum(value) != WEIGHT_TOTAL:
        raise ValidationError(f"must sum to {WEIGHT_TOTAL}, not {sum(value)}", field=field)
    return tuple(value)


# ---------------------------------------------------------------------------
# Factors


def centrality(in_degree: int, max_in_degree: int) -> float:
    """In-degree centrality in 0..1: ``in_degree / max_in_degree``, 0 when the max is 0.

    >>> centrality(3, 4)
    0.75
    >>> centrality(0, 0)
    0.0

    Raises:
        ValidationError: a negative count, or ``in_degree`` above ``max_in_degree``.
    """
    check_int(in_degree, "in_degree")
    check_int(max_in_degree, "max_in_degree")
    if in_degree > max_in_degree:
        raise ValidationError(
            f"must not exceed max_in_degree ({max_in_degree}), not {in_degree}", field="in_degree"
        )
    return in_degree / max_in_degree if max_in_degree else 0.0


def frequency(access_count: int, max_access: int) -> float:
    """Access frequency in 0..1: ``log(1 + access_count) / log(1 + max_access)``.

    Logarithmic, so the tenth read counts for less than the first. 0 when
    ``max_access`` is 0, exactly 1 when ``access_count == max_access``.

    >>> frequency(0, 9)
    0.0
    >>> frequency(9, 9)
    1.0

    Raises:
        ValidationError: a negative count, or ``access_count`` above ``max_access``.
    """
    check_int(access_count, "access_count")
    check_int(max_access, "max_access")
    if access_count > max_access:
        raise ValidationError(
            f"must not exceed max_access ({max_access}), not {access_count}", field="access_count"
        )
    if max_access == 0:
        return 0.0
    if access_count == max_access:
        return 1.0
    return math.log(1 + access_count) / math.log(1 + max_access)


def half_life_ms(
    type_name: str, *, pinned: bool, access_count: int, centrality: float
) -> int | None:
    """The half-life of a memory in milliseconds, or ``None`` if it does not decay.

    The base comes from :data:`HALF_LIFE_DAYS`. Pinned memories and stable types never
    decay. A memory read more than :data:`HUB_ACCESS_COUNT` times, or with centrality
    above :data:`HUB_CENTRALITY`, keeps its memory twice as long: the half-life is
    doubled once, also when both conditions hold (they are two signs of the same thing,
    a memory that is in use, so they do not compound).

    >>> half_life_ms("event", pinned=False, access_count=0, centrality=0.0) // DAY_MS
    7
    >>> half_life_ms("event", pinned=False, access_count=11, centrality=0.9) // DAY_MS
    14
    >>> half_life_ms("fact", pinned=False, access_count=0, centrality=0.0) is None
    True

    Args:
        type_name: one of the nine type names (``"fact"``, ``"artifact_ref"``, ...).
        pinned: whether the memory is pinned.
        access_count: how often the memory has been read (late-binding reads).
        centrality: the memory's centrality in 0..1 (see :func:`centrality`).

    Raises:
        ValidationError: an unknown type or a bad argument, naming it.
    """
    if type(type_name) is not str or type_name not in HALF_LIFE_DAYS:
        raise ValidationError(
            f"must be one of {', '.join(HALF_LIFE_DAYS)}, not {type_name!r}", field="type_name"
        )
    if type(pinned) is not bool:
        raise ValidationError(f"must be True or False, not {pinned!r}", field="pinned")
    check_int(access_count, "access_count")
    unit_centrality = _unit(centrality, "centrality")
    return scaled_half_life_ms(
        HALF_LIFE_DAYS[type_name],
        pinned=pinned,
        access_count=access_count,
        centrality=unit_centrality,
    )


def scaled_half_life_ms(
    days: int | None, *, pinned: bool, access_count: int, centrality: float
) -> int | None:
    """:func:`half_life_ms` from a base half-life in ``days`` (``None``: stable) instead
    of the type's, for arguments the caller has checked: ``None`` when pinned or stable,
    else ``days`` in ms, doubled once for more than :data:`HUB_ACCESS_COUNT` reads or
    centrality above :data:`HUB_CENTRALITY`.

    >>> scaled_half_life_ms(30, pinned=False, access_count=11, centrality=0.0) // DAY_MS
    60
    >>> scaled_half_life_ms(30, pinned=True, access_count=0, centrality=0.0) is None
    True
    """
    if pinned or days is None:
        return None
    base = days * DAY_MS
    if access_count > HUB_ACCESS_COUNT or centrality > HUB_CENTRALITY:
        return base * _SCALE_FACTOR
    return base


def recency(age_ms: int, half_life_ms: int | None) -> float:
    """Recency in 0..1: ``0.5 ** (age_ms / half_life_ms)``; 1 when ``half_life_ms`` is None.

    A negative age (a record from the caller's future, e.g. clock skew) counts as 0.

    >>> recency(7 * DAY_MS, 7 * DAY_MS)
    0.5
    >>> recency(-5, 1000), recency(10**9, None)
    (1.0, 1.0)

    Raises:
        ValidationError: a non-integer age, or a half-life that is not a positive integer.
    """
    if type(age_ms) is not int:
        raise ValidationError(f"must be an integer, not {type(age_ms).__name__}", field="age_ms")
    if half_life_ms is None:
        return 1.0
    check_int(half_life_ms, "half_life_ms", lo=1)
    if age_ms <= 0:
        return 1.0
    result: float = 0.5 ** (age_ms / half_life_ms)
    return result


def round_ppm(value: float) -> int:
    """``value * 1e6`` rounded half to even, computed exactly from the float's ratio.

    >>> round_ppm(0.25), round_ppm(0.0000125), round_ppm(0.0000135)
    (250000, 13, 13)

    (The doubles nearest 0.0000125 and 0.0000135 lie just above 12.5 and just below 13.5
    ppm, though ``0.0000125 * 1e6`` evaluates to exactly 12.5.)
    """
    numerator, denominator = value.as_integer_ratio()
    quotient, remainder = divmod(numerator * PPM, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2 == 1):
        quotient += 1
    return quotient


def factor_ppm(factors: Sequence[float]) -> tuple[int, ...]:
    """Five factors in 0..1 (in :data:`FACTOR_NAMES` order) as integers in 0..1,000,000.

    Each is the factor's exact binary value times 1,000,000, rounded half to even. No
    float multiplication is involved, so there is a single rounding.

    >>> factor_ppm([0.8, 0.7, 0.0, 1.0, 0.5])
    (800000, 700000, 0, 1000000, 500000)
    >>> factor_ppm([1 / 128, 3 / 128, 0, 0, 0])[:2]  # 7812.5 and 23437.5: ties go to even
    (7812, 23438)

    Raises:
        ValidationError: not five numbers, or one outside 0..1 (field ``factors``).
    """
    if not isinstance(factors, (tuple, list)) or len(factors) != WEIGHT_COUNT:
        raise ValidationError(f"must be a sequence of {WEIGHT_COUNT} numbers", field="factors")
    return tuple(round_ppm(_unit(value, "factors")) for value in factors)


def salience_factors(
    *,
    type_name: str,
    confidence: float,
    priority: int,
    pinned: bool,
    in_degree: int,
    max_in_degree: int,
    access_count: int,
    max_access: int,
    age_ms: int,
) -> tuple[int, ...]:
    """The five salience factors of one memory, in ppm: the function callers use.

    ``age_ms`` is ``now - at`` of the memory's head version (its last write); the
    maxima are store-wide (every memory of the actor, as ``Cortex`` keeps them). The
    half-life modifiers use this memory's access count and unrounded centrality.

    >>> salience_factors(type_name="event", confidence=0.9, priority=6, pinned=False,
    ...                  in_degree=1, max_in_degree=4, access_count=3, max_access=15,
    ...                  age_ms=7 * DAY_MS)
    (900000, 600000, 250000, 500000, 500000)

    Raises:
        ValidationError: an unknown type or an argument out of range, naming it.
    """
    unit_confidence = _unit(confidence, "confidence")
    check_int(priority, "priority", lo=1, hi=10)
    unit_centrality = centrality(in_degree, max_in_degree)
    life = half_life_ms(
        type_name, pinned=pinned, access_count=access_count, centrality=unit_centrality
    )
    return factor_ppm(
        (
            unit_confidence,
            priority / 10,
            unit_centrality,
            frequency(access_count, max_access),
            recency(age_ms, life),
        )
    )


def trusted_salience_factors(
    type_name: str,
    confidence: float,
    priority: int,
    pinned: bool,
    in_degree: int,
    max_in_degree: int,
    access_count: int,
    max_access: int,
    age_ms: int,
) -> tuple[int, ...]:
    """:func:`salience_factors` for arguments already known to be valid (stored ones).

    The same arithmetic, without the checks: the query layer scores stored memories with
    it. A test holds it equal to :func:`salience_factors` on random valid arguments.
    """
    unit_centrality = in_degree / max_in_degree if max_in_degree else 0.0
    if max_access == 0:
        unit_frequency = 0.0
    elif access_count == max_access:
        unit_frequency = 1.0
    else:
        unit_frequency = math.log(1 + access_count) / math.log(1 + max_access)
    days = HALF_LIFE_DAYS[type_name]
    if pinned or days is None or age_ms <= 0:
        unit_recency = 1.0
    else:
        life = days * DAY_MS
        if access_count > HUB_ACCESS_COUNT or unit_centrality > HUB_CENTRALITY:
            life *= _SCALE_FACTOR
        unit_recency = 0.5 ** (age_ms / life)
    return (
        round_ppm(float(confidence)),
        round_ppm(priority / 10),
        round_ppm(unit_centrality),
        round_ppm(unit_frequency),
        round_ppm(unit_recency),
    )


def trusted_cold_score(factors_ppm: Sequence[int], weights: Sequence[int]) -> int:
    """:func:`cold_score` without the checks (both arguments known to be valid)."""
    return sum(w * f for w, f in zip(weights, factors_ppm, strict=True)) // PPM


def cold_score(factors_ppm: Sequence[int], weights: Sequence[int]) -> int:
    """The weighted sum of the factors, an integer in 0..1,000,000.

    ``sum(w_i * f_i) // 1_000_000`` with ``weights`` in ppm summing to 1,000,000 and
    ``factors_ppm`` from :func:`salience_factors`. Higher is more salient.

    >>> cold_score((900000, 600000, 250000, 500000, 500000), DEFAULT_WEIGHTS)
    662500

    Raises:
        ValidationError: bad factors (field ``factors_ppm``) or weights (``weights``).
    """
    factors = _ppm_tuple(factors_ppm, "factors_ppm")
    checked = _weights(weights)
    return sum(w * f for w, f in zip(checked, factors, strict=True)) // PPM


def effective_confidence_ppm(confidence: float, recency_ppm: int) -> int:
    """Confidence discounted by recency, in ppm: ``confidence_ppm * recency_ppm // 1e6``.

    The lifecycle rules archive a memory whose effective confidence falls below 0.3
    (300,000 ppm). ``confidence`` is rounded to ppm as in :func:`factor_ppm`.

    >>> effective_confidence_ppm(0.8, 500000)
    400000

    Raises:
        ValidationError: ``confidence`` outside 0..1 or ``recency_ppm`` outside 0..1e6.
    """
    confidence_ppm = round_ppm(_unit(confidence, "confidence"))
    check_int(recency_ppm, "recency_ppm", hi=PPM)
    return confidence_ppm * recency_ppm // PPM


# ---------------------------------------------------------------------------
# The learner. Integers only (W2): every division below is floor division of
# non-negative integers, except the EMA step, which truncates toward zero.


def _apportion(shares: Sequence[int], total: int) -> list[int]:
    """Split ``total`` in proportion to non-negative ``shares`` (not all zero), exactly.

    Each part is ``floor(share * total / sum)``; the few units left over go one each
    to the largest remainders, ties to the lower index (Hamilton's method).
    """
    whole = sum(shares)
    parts: list[int] = []
    remainders: list[int] = []
    for share in shares:
        part, remainder = divmod(share * total, whole)
        parts.append(part)
        remainders.append(remainder)
    left = total - sum(parts)  # 0 <= left < len(shares)
    for index in sorted(range(len(parts)), key=lambda i: (-remainders[i], i))[:left]:
        parts[index] += 1
    return parts


def _target_profile(cited_profiles: object) -> tuple[int, ...]:
    if not isinstance(cited_profiles, (tuple, list)):
        raise ValidationError(
            f"must be a sequence of factor tuples, not {type(cited_profiles).__name__}",
            field="cited_profiles",
        )
    if not cited_profiles:
        raise ValidationError("must cite at least one memory", field="cited_profiles")
    totals = [0] * WEIGHT_COUNT
    for profile in cited_profiles:
        for index, value in enumerate(_ppm_tuple(profile, "cited_profiles")):
            totals[index] += value
    # The mean's 1/n cancels when normalising, so the sums are normalised directly.
    if sum(totals) == 0:
        return tuple(_apportion([1] * WEIGHT_COUNT, WEIGHT_TOTAL))
    return tuple(_apportion(totals, WEIGHT_TOTAL))


def _step(delta: int) -> int:
    """``delta * ALPHA`` truncated toward zero, so that steps are symmetric in sign."""
    numerator, denominator = ALPHA
    magnitude = abs(delta) * numerator // denominator
    return magnitude if delta >= 0 else -magnitude


def _clamp_and_renormalise(values: Sequence[int]) -> tuple[int, ...]:
    """Raise each value to the floor, then scale the mass above the floor so the total
    is exactly ``WEIGHT_TOTAL``. Weights at the floor stay there; W1 holds."""
    above = [max(value, WEIGHT_FLOOR) - WEIGHT_FLOOR for value in values]
    free = WEIGHT_TOTAL - WEIGHT_COUNT * WEIGHT_FLOOR
    if sum(above) == 0:
        above = [1] * WEIGHT_COUNT  # everything at the floor: share the rest equally
    return tuple(WEIGHT_FLOOR + part for part in _apportion(above, free))


def learn_weights(
    weights: Sequence[int], cited_profiles: Sequence[Sequence[int]], outcome: str
) -> tuple[int, ...]:
    """The salience weights after one attested outcome.

    The target is the mean factor profile of the cited memories, normalised to sum to
    1,000,000 (uniform if every cited factor is 0). Each weight then takes an EMA step
    of 1/5 (:data:`ALPHA`) of its distance to the target, truncated toward zero:
    toward the target on ``"success"``, away from it on ``"failure"``. Finally every
    weight is raised to at least :data:`WEIGHT_FLOOR` and the mass above the floor is
    rescaled so the weights sum to exactly 1,000,000 (floor division, then the units
    left over to the largest remainders, ties to the lower factor index).

    >>> learn_weights(DEFAULT_WEIGHTS, [(1000000, 0, 0, 0, 0)], "success")
    (560000, 160000, 120000, 80000, 80000)
    >>> learn_weights(DEFAULT_WEIGHTS, [(1000000, 0, 0, 0, 0)], "failure")
    (340000, 240000, 180000, 120000, 120000)

    Args:
        weights: the current weights: five non-negative ppm integers summing to 1,000,000.
        cited_profiles: one ppm factor tuple (from :func:`salience_factors`) per cited
            memory; at least one.
        outcome: ``"success"`` or ``"failure"``.

    Returns:
        Five integers, each >= 20,000, summing to exactly 1,000,000 (invariant W1).

    Raises:
        ValidationError: naming ``weights``, ``cited_profiles`` or ``outcome``.
    """
    current = _weights(weights)
    target = _target_profile(cited_profiles)
    if outcome == "success":
        sign = 1
    elif outcome == "failure":
        sign = -1
    else:
        raise ValidationError(f"must be success or failure, not {outcome!r}", field="outcome")
    moved = [w + sign * _step(t - w) for w, t in zip(current, target, strict=True)]
    return _clamp_and_renormalise(moved)
