"""The ``Extractor`` protocol and what extractors return."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from ..core.extraction import Candidate, ExtractionInput
from ..errors import ValidationError

__all__ = ["Candidates", "Extractor", "check_input", "check_timeout"]


@runtime_checkable
class Extractor(Protocol):
    """Anything that turns a transcript (chunk) into candidate memories.

    ``extract`` may return a plain list; returning :class:`Candidates` also reports the
    malformed candidates it skipped. It raises
    :class:`~cortexgraph.errors.ExtractionError` when it cannot answer at all.
    """

    def extract(self, source: ExtractionInput) -> list[Candidate]:
        """The candidate memories in ``source``."""
        ...


class Candidates(list[Candidate]):
    """A list of candidates that also says what was skipped: ``(locator, reason)`` pairs."""

    def __init__(
        self, candidates: Iterable[Candidate] = (), *, skipped: Iterable[tuple[str, str]] = ()
    ) -> None:
        super().__init__(candidates)
        self.skipped: tuple[tuple[str, str], ...] = tuple(skipped)


def check_input(source: object) -> ExtractionInput:
    """``source`` if it is an :class:`ExtractionInput`, else a ``ValidationError``."""
    if not isinstance(source, ExtractionInput):
        raise ValidationError(
            f"must be an ExtractionInput, not {type(source).__name__}", field="source"
        )
    return source


def check_timeout(timeout: object) -> float:
    """``timeout`` as a float if it is a number of seconds in (0, 86400]."""
    if (
        type(timeout) not in (int, float)
        or not math.isfinite(timeout)  # type: ignore[arg-type]
        or not 0 < timeout <= 86_400  # type: ignore[operator]
    ):
        raise ValidationError(
            f"must be a number of seconds above 0 and at most 86400, not {timeout!r}",
            field="timeout",
        )
    return float(timeout)  # type: ignore[arg-type]
