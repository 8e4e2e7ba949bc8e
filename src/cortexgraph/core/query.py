"""The query language's normal form, its guards and the planner.

The predicates themselves, and what they mean, are in :mod:`cortexgraph.core.predicates`.
Nothing here touches a store: the executor (which owns the posting lists) asks
:func:`plan` how to run a predicate and evaluates the residual filters of the plan on
:class:`~cortexgraph.core.predicates.MemoryAttrs`.

Guards
------

- :func:`check_bounded`: a query must give ``limit`` or ``budget_tokens``
  (:class:`~cortexgraph.errors.UnboundedQueryError`);
- :func:`check_not_too_broad`: every conjunct must contain a positive ``Q.type`` or
  ``Q.tag`` literal, so that it starts from a posting list rather than a scan of every
  memory (:class:`~cortexgraph.errors.TooBroadQueryError`, naming the conjunct);
- :func:`to_dnf` refuses a predicate whose normal form has more than
  :data:`MAX_CONJUNCTS` conjuncts (also ``TooBroadQueryError``).

An unsatisfiable predicate (``Q.type(Fact) & Q.type(Goal)``) has an empty normal form,
passes the guards and matches nothing.

Planner
-------

Type and tag atoms, and status atoms other than ``"active"``, are *indexed*: the executor
holds a posting list (a set of memory ids) for each. :func:`plan` turns each conjunct into a
:class:`ConjunctPlan`: start from the smallest posting list, intersect the other positive
indexed atoms in increasing size, subtract the negative indexed atoms, then keep the
memories that pass the residual filters (namespace, time, confidence, priority, pinned,
``"active"``, and the status default). The executor unions the conjuncts' results and
de-duplicates them (a memory may satisfy several conjuncts).

Order
-----

:data:`ORDERS` are the result orders ``find`` accepts, all descending: ``"salience"`` (cold
salience score), ``"recent"`` (``at`` of the head version), ``"priority"``,
``"confidence"``. Ties are broken by memory id, ascending as bytes, so an order is total.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ..errors import TooBroadQueryError, UnboundedQueryError, ValidationError
from .predicates import And, Atom, Not, Predicate

__all__ = [
    "DNF",
    "MAX_CONJUNCTS",
    "ORDERS",
    "Conjunct",
    "ConjunctPlan",
    "Plan",
    "check_bounded",
    "check_not_too_broad",
    "check_order",
    "plan",
    "to_dnf",
]

#: The orders ``find`` accepts; all descending, ties broken by memory id ascending.
ORDERS = ("salience", "recent", "priority", "confidence")
#: The most conjuncts a predicate may have in disjunctive normal form.
MAX_CONJUNCTS = 64
#: kinds of which a memory has exactly one value: two different positive atoms contradict
_SINGLE_VALUED = frozenset({"type", "status", "ns"})


# ---------------------------------------------------------------------------
# Disjunctive normal form

#: one conjunct: literals ``(atom, positive)`` sorted by ``(atom.sort_key, not positive)``
Conjunct = tuple[tuple[Atom, bool], ...]
#: a predicate in disjunctive normal form: conjuncts in sorted order, no duplicates
DNF = tuple[Conjunct, ...]

_RawConjunct = frozenset[tuple[Atom, bool]]


def to_dnf(pred: Predicate) -> DNF:
    """The disjunctive normal form of ``pred``: a tuple of conjuncts, each a sorted tuple of
    literals ``(atom, positive)``.

    Negations are pushed down to atoms (De Morgan), ANDs distributed over ORs. Conjuncts
    that cannot hold are dropped (``x & ~x``, two different types, statuses or
    namespaces); within a conjunct, duplicate literals and negative type / status / ns
    literals implied by a positive one are dropped; duplicate conjuncts are dropped. The
    result depends only on the predicate's meaning as built, not on operand order:
    ``a & b`` and ``b & a`` give the same normal form.

    Raises:
        TypeError: ``pred`` is not a predicate.
        TooBroadQueryError: the normal form would have more than :data:`MAX_CONJUNCTS`
            conjuncts (typically many ORs under an AND).
    """
    if not isinstance(pred, Predicate):
        raise TypeError(f"not a query predicate: {type(pred).__name__}")
    raw = _dnf(pred, True)
    return tuple(sorted((_sorted_conjunct(c) for c in raw), key=_conjunct_key))


def _literal_key(literal: tuple[Atom, bool]) -> tuple[tuple[int, Any], bool]:
    return (literal[0].sort_key, not literal[1])


def _conjunct_key(conjunct: Conjunct) -> tuple[tuple[tuple[int, Any], bool], ...]:
    return tuple(map(_literal_key, conjunct))


def _sorted_conjunct(conjunct: _RawConjunct) -> Conjunct:
    return tuple(sorted(conjunct, key=_literal_key))


def _dnf(node: Predicate, positive: bool) -> set[_RawConjunct]:
    if isinstance(node, Atom):
        return {frozenset({(node, positive)})}
    if isinstance(node, Not):
        return _dnf(node.part, not positive)
    parts = node.parts  # type: ignore[attr-defined]
    if isinstance(node, And) is positive:
        acc: set[_RawConjunct] = {frozenset()}
        # multiplied out in a canonical order (not the operands' order), so that whether
        # an intermediate product passes the cap cannot depend on how the query was written
        for right in sorted((_dnf(part, positive) for part in parts), key=_dnf_key):
            if len(acc) * len(right) > MAX_CONJUNCTS * MAX_CONJUNCTS:
                _too_many(node, positive)
            acc = {c for a in acc for b in right if (c := _simplify(a | b)) is not None}
            if len(acc) > MAX_CONJUNCTS:
                _too_many(node, positive)
        return acc
    out: set[_RawConjunct] = set()
    for part in parts:
        out |= _dnf(part, positive)
        if len(out) > MAX_CONJUNCTS:
            _too_many(node, positive)
    return out


def _dnf_key(conjuncts: set[_RawConjunct]) -> tuple[int, tuple[Any, ...]]:
    """An order for an AND's operands in normal form: the fewest conjuncts first, then
    by their literals."""
    return len(conjuncts), tuple(sorted(_conjunct_key(_sorted_conjunct(c)) for c in conjuncts))


def _too_many(node: Predicate, positive: bool) -> None:
    shown = repr(node) if positive else f"~{node!r}"
    if len(shown) > 200:
        shown = shown[:200] + "..."
    raise TooBroadQueryError(
        f"the query expands to more than {MAX_CONJUNCTS} alternatives (conjuncts of its"
        f" disjunctive normal form) at {shown}; each OR under an AND multiplies them."
        " Split it into several queries or use fewer alternatives"
    )


def _simplify(conjunct: _RawConjunct) -> _RawConjunct | None:
    """The conjunct without redundant literals, or None if it cannot hold."""
    positive: dict[str, Any] = {}
    for atom, is_positive in conjunct:
        if is_positive:
            if (atom, False) in conjunct:
                return None
            if (
                atom.kind in _SINGLE_VALUED
                and positive.setdefault(atom.kind, atom.value) != atom.value
            ):
                return None
    # a positive atom of a single-valued kind implies the negation of every other value
    # (the negation of its own value was refused above)
    redundant = [
        (atom, False) for atom, is_positive in conjunct if not is_positive and atom.kind in positive
    ]
    return conjunct.difference(redundant) if redundant else conjunct


def _mentions_status(conjunct: Conjunct) -> bool:
    return any(atom.kind == "status" for atom, _ in conjunct)


def _render_conjunct(conjunct: Conjunct) -> str:
    return " & ".join(repr(a) if positive else f"~{a!r}" for a, positive in conjunct)


# ---------------------------------------------------------------------------
# Guards


def check_bounded(limit: object, budget_tokens: object) -> None:
    """Refuse a query without a bound, and check the bounds given.

    Args:
        limit: the most results to return, a positive integer, or None.
        budget_tokens: the most tokens the rendered results may take, a positive
            integer, or None.

    Raises:
        UnboundedQueryError: both are None.
        ValidationError: a bound is not a positive integer (field ``limit`` or
            ``budget_tokens``).
    """
    if limit is None and budget_tokens is None:
        raise UnboundedQueryError(
            "a query needs limit= or budget_tokens= (or both), so that it cannot return"
            " the whole store"
        )
    for value, field in ((limit, "limit"), (budget_tokens, "budget_tokens")):
        if value is None:
            continue
        if type(value) is not int:
            raise ValidationError(
                f"must be a positive integer or None, not {type(value).__name__}", field=field
            )
        if value < 1:
            raise ValidationError(f"must be a positive integer, not {value}", field=field)


def check_not_too_broad(dnf: DNF) -> None:
    """Refuse a normal form with a conjunct that has neither a positive type nor a positive
    tag literal: that conjunct would have to scan every memory.

    An empty normal form (an unsatisfiable predicate) passes.

    Raises:
        TooBroadQueryError: naming the first such conjunct.
    """
    for conjunct in dnf:
        if not any(positive and atom.kind in ("type", "tag") for atom, positive in conjunct):
            raise TooBroadQueryError(
                f"the alternative {_render_conjunct(conjunct)} names neither a type nor a tag,"
                " so it would scan every memory; add Q.type(...) or Q.tag(...) to it"
            )


def check_order(order_by: object) -> str:
    """Return ``order_by`` if it is one of :data:`ORDERS`.

    Raises:
        ValidationError: naming the field ``order_by``.
    """
    if type(order_by) is not str or order_by not in ORDERS:
        raise ValidationError(
            f"must be one of {', '.join(ORDERS)}, not {order_by!r}", field="order_by"
        )
    return order_by


# ---------------------------------------------------------------------------
# Planner

_ACTIVE = Atom("status", "active")


@attrs.frozen(kw_only=True)
class ConjunctPlan:
    """How to evaluate one conjunct.

    Start from the posting list of ``driver`` (the smallest), intersect the lists of
    ``intersect`` in order, subtract the lists of ``subtract``, then keep the memories for
    which every literal ``(atom, positive)`` of ``residual`` has
    ``atom.holds(attrs) is positive``.
    """

    #: the positive indexed atom with the smallest posting list
    driver: Atom
    #: the other positive indexed atoms, in increasing posting-list size
    intersect: tuple[Atom, ...]
    #: the negative indexed atoms, in atom order
    subtract: tuple[Atom, ...]
    #: literals on unindexed attributes, in atom order; includes ``(Q.status("active"),
    #: True)`` when ``status_default`` is set
    residual: Conjunct
    #: posting-list sizes of ``driver`` then each of ``intersect``, as ``size`` gave them
    sizes: tuple[int, ...]
    #: whether the status default (active only) applies to this conjunct
    status_default: bool

    def explain(self) -> str:
        """One line describing this step."""
        lists = (self.driver, *self.intersect)
        read = [f"{a!r} ({n})" for a, n in zip(lists, self.sizes, strict=True)]
        line = f"scan {read[0]}"
        if len(read) > 1:
            line += "; intersect " + ", ".join(read[1:])
        if self.subtract:
            line += "; subtract " + ", ".join(map(repr, self.subtract))
        if self.residual:
            shown = [repr(a) if positive else f"~{a!r}" for a, positive in self.residual]
            if self.status_default:
                shown[shown.index(repr(_ACTIVE))] += " [default]"
            line += "; filter " + ", ".join(shown)
        return line


@attrs.frozen(kw_only=True)
class Plan:
    """How to run a predicate: one :class:`ConjunctPlan` per conjunct of its normal form.

    The executor runs every step and returns the union of their results, each memory once.
    """

    dnf: DNF
    steps: tuple[ConjunctPlan, ...]

    def explain(self) -> str:
        """One line per conjunct, deterministic for a given predicate and sizes."""
        if not self.steps:
            return "nothing to do: the query can never match"
        return "\n".join(f"{i}. {step.explain()}" for i, step in enumerate(self.steps, 1))


def plan(pred: Predicate, size: Callable[[Atom], int]) -> Plan:
    """Plan ``pred`` against posting lists whose sizes ``size`` reports.

    ``size`` is called once per distinct indexed atom (see :attr:`Atom.indexed`) and never
    with any other atom. Steps follow the order of :func:`to_dnf`.

    Raises:
        TooBroadQueryError: from :func:`to_dnf` or :func:`check_not_too_broad`.
    """
    dnf = to_dnf(pred)
    check_not_too_broad(dnf)
    sizes: dict[Atom, int] = {}

    def measure(atom: Atom) -> int:
        if atom not in sizes:
            sizes[atom] = size(atom)
        return sizes[atom]

    steps = []
    for conjunct in dnf:
        lists = sorted(
            (atom for atom, positive in conjunct if positive and atom.indexed),
            key=lambda atom: (measure(atom), atom.sort_key),
        )
        subtract = tuple(atom for atom, positive in conjunct if not positive and atom.indexed)
        residual = tuple(lit for lit in conjunct if not lit[0].indexed)
        default = not _mentions_status(conjunct)
        if default:
            residual = tuple(sorted((*residual, (_ACTIVE, True)), key=_literal_key))
        steps.append(
            ConjunctPlan(
                driver=lists[0],
                intersect=tuple(lists[1:]),
                subtract=subtract,
                residual=residual,
                sizes=tuple(sizes[atom] for atom in lists),
                status_default=default,
            )
        )
    return Plan(dnf=dnf, steps=tuple(steps))
