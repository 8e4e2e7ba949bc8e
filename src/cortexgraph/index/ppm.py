"""Rounding to parts per million, fast and still exact.

``core.salience`` rounds every factor with ``round_ppm`` (exact half-to-even rounding of
``value * 1,000,000``). The index rounds whole columns at once, and single values in
tight loops, by float arithmetic, which agrees with ``round_ppm`` except within a hair of
a half: the float error of ``value * 1e6`` is below 1e-9 ppm. Invariant: every function
here returns exactly what ``round_ppm`` returns, because values within :data:`TIE_GUARD`
of a half are handed to an exact function.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ..core.salience import round_ppm

__all__ = ["PRIORITY_PPM", "TIE_GUARD", "ppm", "ppm_one"]

#: a factor is rounded exactly when ``factor * 1e6`` is this close to a rounding tie
TIE_GUARD = 1e-6
#: the priority factor of each priority
PRIORITY_PPM = np.asarray([round_ppm(p / 10) for p in range(11)], dtype=np.int64)


def ppm_one(value: float) -> int:
    """``core.salience.round_ppm(value)`` for a value in 0..1, by float arithmetic unless
    ``value * 1e6`` lies within :data:`TIE_GUARD` of a half (its float error is below
    1e-9 ppm, so only near a half can the two roundings disagree).

    >>> [ppm_one(v) == round_ppm(v) for v in (0.25, 0.0000125, 0.0000135, 0.3333333)]
    [True, True, True, True]
    """
    scaled = value * 1e6
    whole = int(scaled)
    fraction = scaled - whole
    if abs(fraction - 0.5) > TIE_GUARD:
        return whole + 1 if fraction > 0.5 else whole
    return round_ppm(value)


def ppm(
    values: npt.NDArray[np.float64], exactly: Callable[[int], int] | None = None
) -> npt.NDArray[np.int64]:
    """``core.salience.round_ppm`` of each value, vectorised.

    ``rint(value * 1e6)`` can only disagree with the exact half-to-even rounding when
    ``value * 1e6`` lies within a hair of a half: the product's float error is below
    1e-9 ppm. Values within :data:`TIE_GUARD` of a half are rounded one by one: by
    ``exactly(i)`` when the values are numpy's approximation of a factor ``core.salience``
    computes otherwise (``log1p`` for ``math.log``: a few units in the last place apart,
    which near a half can round differently), else by ``round_ppm`` of the value itself.
    """
    scaled = values * 1e6
    rounded = np.rint(scaled).astype(np.int64)
    close = np.flatnonzero(np.abs(scaled - np.floor(scaled) - 0.5) <= TIE_GUARD)
    for i in close.tolist():
        rounded[i] = round_ppm(float(values[i])) if exactly is None else exactly(i)
    return rounded
