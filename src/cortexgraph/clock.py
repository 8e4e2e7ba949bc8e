"""Clocks: the one place cortexgraph reads the time.

Every verb takes ``at=`` (or ``now=``) in integer milliseconds since the epoch; when it is
omitted the handle's clock supplies it. Pure code never reads time, so a journal written
with explicit ``at=`` values (or a :class:`ManualClock`) is byte-for-byte reproducible.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from .errors import ValidationError

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Anything that tells the time in integer milliseconds since the epoch."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The system's wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told to: for tests, replays and simulations.

    >>> clock = ManualClock(1_700_000_000_000)
    >>> clock.advance(1_500)
    >>> clock.now_ms()
    1700000001500
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now = _check_ms(start_ms)

    def now_ms(self) -> int:
        return self._now

    def set(self, ms: int) -> None:
        """Jump to ``ms``."""
        self._now = _check_ms(ms)

    def advance(self, ms: int) -> None:
        """Move forward by ``ms`` (which must not be negative)."""
        if type(ms) is not int or ms < 0:
            raise ValidationError("must be a non-negative integer", field="ms")
        self._now = _check_ms(self._now + ms)

    def __repr__(self) -> str:
        return f"ManualClock({self._now})"


def _check_ms(value: object) -> int:
    if type(value) is not int or not 0 <= value < 2**63:
        raise ValidationError(
            f"must be integer milliseconds since the epoch, not {value!r}", field="at"
        )
    return value
