"""``Cortex.find``: bounded typed queries over the column index, rendered in forms.

The steps: check the bounds and the order (``core.query`` guards), plan the predicate
against the posting-list sizes of the column index (``cortexgraph.index``), select the
matching rows, walk them in the requested order (exactly, ties by id), read each hit's
head version from LMDB, render it in the requested form, and stop at ``limit`` or when the
next rendered hit would not fit in ``budget_tokens``. With ``late_binding=True`` the
memories returned are journaled as accessed (one ``access`` entry per namespace), which
feeds the frequency factor of salience; the default read journals nothing.
"""

from __future__ import annotations

import attrs
import numpy as np

from .batch import record_access
from .core.forms import FORMS, TokenEstimator, estimate_tokens
from .core.predicates import Predicate, check_predicate
from .core.query import check_bounded, check_order
from .core.state import Record, slot_setters
from .core.uri import MemoryURI
from .errors import CortexError, ValidationError
from .handle import Handle
from .reading import row_memo
from .records import HitSequence

__all__ = ["FindResult", "Hit"]


@attrs.frozen
class Hit:
    """One result of :meth:`Cortex.find`.

    Attributes:
        uri: the memory's URI, pinned to its head version.
        record: the head version as :meth:`Cortex.resolve` returns it.
        text: the record rendered in the requested form.
        tokens: ``text``'s token estimate.
        score: the memory's salience score (0..1,000,000) at ``now``, whatever the order.
    """

    uri: MemoryURI
    record: Record
    text: str
    tokens: int
    score: int


@attrs.frozen
class FindResult(HitSequence[Hit]):
    """The hits of one :meth:`Cortex.find` call, in order, and how they were found.

    Attributes:
        hits: the results, best first.
        tokens: the tokens of all rendered hits together (within ``budget_tokens``).
        matched: how many memories matched the predicate (before ``limit`` and budget).
        plan: the query plan, one line per alternative (``Plan.explain``).
        seq: the journal seq the answer reflects.
    """

    hits: tuple[Hit, ...]
    tokens: int
    matched: int
    plan: str
    seq: int


_SET_URI, _SET_RECORD, _SET_TEXT, _SET_TOKENS, _SET_SCORE = slot_setters(Hit)


def _hit(uri: MemoryURI, record: Record, text: str, tokens: int, score: int) -> Hit:
    """``Hit(...)`` for values ``find`` has already checked, each slot set directly
    (attrs' frozen ``__init__`` costs about a microsecond a hit). A test holds the two
    equal."""
    hit: Hit = object.__new__(Hit)
    _SET_URI(hit, uri)
    _SET_RECORD(hit, record)
    _SET_TEXT(hit, text)
    _SET_TOKENS(hit, tokens)
    _SET_SCORE(hit, score)
    return hit


def check_find_arguments(
    where: object, limit: object, budget_tokens: object, order_by: object, form: object,
    estimator: object,
) -> tuple[Predicate, TokenEstimator]:
    """The checks every ``find`` makes of its arguments before it reads anything (a
    store's and a scope view's alike), in the order they are made.

    Returns:
        The predicate, and the token estimator to count with (``estimate_tokens`` when
        ``estimator`` is None).

    Raises:
        ValidationError: naming the field (``where``, ``limit``, ``budget_tokens``,
            ``order_by``, ``form`` or ``estimator``).
        UnboundedQueryError: neither ``limit`` nor ``budget_tokens`` is given.
    """
    predicate = check_predicate(where)
    check_bounded(limit, budget_tokens)
    check_order(order_by)
    if form not in FORMS:
        raise ValidationError(f"must be one of {', '.join(FORMS)}, not {form!r}", field="form")
    count = estimator if estimator is not None else estimate_tokens
    if not callable(count):
        raise ValidationError("must be a callable (text) -> int", field="estimator")
    return predicate, count


def check_tokens(tokens: object) -> int:
    """Return what a token estimator gave for a hit if it is a non-negative integer.

    Raises:
        ValidationError: naming the field ``estimator``.
    """
    if type(tokens) is not int or tokens < 0:
        raise ValidationError(
            f"the token estimator returned {tokens!r} for a hit", field="estimator"
        )
    return tokens


def run_find(
    h: Handle,
    where: object,
    *,
    limit: int | None,
    budget_tokens: int | None,
    order_by: str,
    form: str,
    late_binding: bool,
    now: int | None,
    estimator: TokenEstimator | None,
) -> FindResult:
    """Carry out :meth:`Cortex.find` (arguments as documented there)."""
    predicate, count = check_find_arguments(where, limit, budget_tokens, order_by, form,
                                            estimator)
    if type(late_binding) is not bool:
        raise ValidationError("must be True or False", field="late_binding")
    if h.active_batch() is not None:
        raise CortexError(
            "find reads committed state; call it outside the batch (or after it commits)"
        )
    now = h.at(now)
    found: list[tuple[int, Record, str, int]] = []
    used = 0
    with h.indexed_read() as (txn, index, seq):
        query_plan, explained = index.plan(predicate)
        scores: dict[int, int] = {}
        # The walk reads at most ``limit`` rows (it stops as soon as it has them), so the
        # first round of ordering need not rank more than that.
        first = 16 if limit is None else min(limit, 16)
        # many matches: read the memories in (bound) order rather than rank them all
        walk = index.walk(query_plan, order_by, now, first=first, scores=scores)
        if walk is None:
            rows = index.select(query_plan)
            matched = len(rows)
            walk = index.ordered(rows, order_by, now, first=first, scores=scores)
        else:
            matched = index.count(query_plan)
        default_count = count is estimate_tokens
        for row in walk:
            memo = row_memo(txn, h.actor, index, row, seq)
            record = memo.record
            text, tokens = memo.shown(form)
            if not default_count:
                tokens = check_tokens(count(text))
            if budget_tokens is not None and used + tokens > budget_tokens:
                break
            used += tokens
            found.append((row, record, text, tokens))
            if limit is not None and len(found) >= limit:
                break
        unscored = [] if order_by == "salience" else [item[0] for item in found]
        if unscored:  # ordered by something else than salience: score the hits at once
            exact = index.exact_scores(np.asarray(unscored, dtype=np.int64), now)
            scores.update(zip(unscored, exact.tolist(), strict=True))
    hits = [
        _hit(record.uri, record, text, tokens, scores[row]) for row, record, text, tokens in found
    ]
    if late_binding and hits:
        record_access(h, [hit.uri for hit in hits], at=now)
    return FindResult(tuple(hits), used, matched, explained, seq)

