"""The query language: predicates, their normal form, the guards and the planner.

Predicates are built with :class:`Q` and combined with ``&`` (and), ``|`` (or) and ``~``
(not)::

    Q.type(Fact) & Q.tag("deploy") & ~Q.tag("obsolete")
    (Q.tag("ci") | Q.tag("deploy")) & Q.min_priority(7)

Every predicate is a frozen, hashable value with a deterministic ``repr`` that reads back
as the expression that builds it. Nothing here touches a store: the executor (which owns
the posting lists) asks :func:`plan` how to run a predicate and evaluates the residual
filters of the plan on :class:`MemoryAttrs`.

Semantics
---------

A predicate is read in disjunctive normal form (:func:`to_dnf`): an OR of *conjuncts*,
each an AND of literals ``(atom, positive)``. A memory matches when it satisfies some
conjunct. **Status default:** a conjunct with no status literal (neither ``Q.status(s)``
nor ``~Q.status(s)``) matches only memories whose status is ``"active"``; a conjunct that
mentions status in any way takes the statuses it names literally. So ``Q.tag("x")`` finds
active memories, ``Q.tag("x") & Q.status("archived")`` archived ones, and
``Q.tag("x") & ~Q.status("archived")`` every status but archived (tombstoned, pruned and
merged included). :func:`matches` applies the same rule without building the normal form.

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

import math
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ..errors import TooBroadQueryError, UnboundedQueryError, ValidationError
from .taxonomy import MAX_MS, MEMORY_TYPES, check_tags, normalise_tag, type_by_name
from .uri import check_name

__all__ = [
    "DNF",
    "MAX_CONJUNCTS",
    "ORDERS",
    "QUERY_STATUSES",
    "And",
    "Atom",
    "Conjunct",
    "ConjunctPlan",
    "MemoryAttrs",
    "Not",
    "Or",
    "Plan",
    "Predicate",
    "Q",
    "check_bounded",
    "check_not_too_broad",
    "check_order",
    "check_predicate",
    "matches",
    "plan",
    "to_dnf",
]

#: The statuses a memory can have, as ``Q.status`` accepts them.
QUERY_STATUSES = ("active", "tombstoned", "archived", "pruned", "merged")
#: The orders ``find`` accepts; all descending, ties broken by memory id ascending.
ORDERS = ("salience", "recent", "priority", "confidence")
#: The most conjuncts a predicate may have in disjunctive normal form.
MAX_CONJUNCTS = 64

# Atom kinds in their sort order: indexed kinds first, then the residual filters.
_KINDS = (
    "type",
    "tag",
    "status",
    "ns",
    "pinned",
    "since",
    "until",
    "min_confidence",
    "min_priority",
)
_RANK = {kind: rank for rank, kind in enumerate(_KINDS)}
#: kinds of which a memory has exactly one value: two different positive atoms contradict
_SINGLE_VALUED = frozenset({"type", "status", "ns"})


# ---------------------------------------------------------------------------
# Argument checks, one per atom kind: each returns the normalised value or raises
# ValidationError naming the field.


class _Field:
    """Stands in for an ``attrs.Attribute`` so that taxonomy's tag validator names ``tag``."""

    name = "tag"


def _check_type(value: object) -> str:
    if isinstance(value, type) and value in MEMORY_TYPES:
        return value.type_name
    if type(value) is str:
        return type_by_name(value).type_name
    raise ValidationError(
        f"must be a memory type such as cortexgraph.Fact or its name such as 'fact', not {value!r}",
        field="type",
    )


def _check_tag(value: object) -> str:
    if type(value) is not str:
        raise ValidationError(f"must be a string, not {type(value).__name__}", field="tag")
    try:
        normal = normalise_tag(value)
    except UnicodeError:  # pragma: no cover - normalize does not raise on str
        normal = value
    check_tags(None, _Field, (normal,))  # type: ignore[arg-type]
    return normal


def _check_ns(value: object) -> str:
    return check_name(value, "ns")


def _check_ms(field: str) -> Callable[[object], int]:
    def check(value: object) -> int:
        if type(value) is not int:
            raise ValidationError(
                f"must be integer milliseconds since the epoch, not {type(value).__name__}",
                field=field,
            )
        if not 0 <= value <= MAX_MS:
            raise ValidationError(f"must be between 0 and 2**63-1, not {value}", field=field)
        return value

    return check


def _check_confidence(value: object) -> float:
    if type(value) is not float and type(value) is not int:
        raise ValidationError(f"must be a number, not {type(value).__name__}", field="confidence")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ValidationError(f"must be between 0 and 1, not {value!r}", field="confidence")
    return number + 0.0  # folds -0.0, so equal atoms have equal reprs


def _check_priority(value: object) -> int:
    if type(value) is not int:
        raise ValidationError(f"must be an integer, not {type(value).__name__}", field="priority")
    if not 1 <= value <= 10:
        raise ValidationError(f"must be between 1 and 10, not {value}", field="priority")
    return value


def _check_status(value: object) -> str:
    if type(value) is not str or value not in QUERY_STATUSES:
        raise ValidationError(
            f"must be one of {', '.join(QUERY_STATUSES)}, not {value!r}", field="status"
        )
    return value


def _check_pinned(value: object) -> bool:
    if value is not True:
        raise ValidationError("Q.pinned() takes no argument; negate it with ~", field="pinned")
    return True


_CHECKS: dict[str, Callable[[object], Any]] = {
    "type": _check_type,
    "tag": _check_tag,
    "status": _check_status,
    "ns": _check_ns,
    "pinned": _check_pinned,
    "since": _check_ms("since"),
    "until": _check_ms("until"),
    "min_confidence": _check_confidence,
    "min_priority": _check_priority,
}


# ---------------------------------------------------------------------------
# Predicates


class Predicate:
    """A query predicate. Build one with :class:`Q`; combine with ``&``, ``|`` and ``~``.

    Predicates are frozen and hashable, compare by structure, and have a deterministic
    ``repr`` that reads back as the expression building them. ``and`` / ``or`` / ``not``
    cannot be overloaded, so using a predicate as a truth value raises ``TypeError``
    rather than silently dropping half of a query.

    Combining a predicate with anything else raises ``TypeError``, as Python operators do
    for unsupported operand types.
    """

    __slots__ = ()

    def __and__(self, other: object) -> Predicate:
        if not isinstance(other, Predicate):
            return NotImplemented
        return And(_flatten(And, (self, other)))

    def __or__(self, other: object) -> Predicate:
        if not isinstance(other, Predicate):
            return NotImplemented
        return Or(_flatten(Or, (self, other)))

    def __invert__(self) -> Predicate:
        return Not(self)

    def __bool__(self) -> bool:
        raise TypeError("a query predicate has no truth value; combine predicates with & | ~")


def _flatten(cls: type[And] | type[Or], parts: Iterable[object]) -> tuple[Predicate, ...]:
    out: list[Predicate] = []
    for part in parts:
        if not isinstance(part, Predicate):
            raise TypeError(
                f"can only combine query predicates (built with Q), not {type(part).__name__}"
            )
        if type(part) is cls:
            out.extend(part.parts)
        else:
            out.append(part)
    return tuple(out)


@attrs.frozen(repr=False)
class Atom(Predicate):
    """One test on one attribute of a memory, such as ``Q.tag("deploy")``.

    Build atoms with :class:`Q`. ``kind`` is one of ``type``, ``tag``, ``status``, ``ns``,
    ``pinned``, ``since``, ``until``, ``min_confidence``, ``min_priority``; ``value`` is the
    normalised argument (a type name for ``type``, ``True`` for ``pinned``). Constructing an
    ``Atom`` directly validates and normalises exactly as ``Q`` does.
    """

    kind: str
    value: Any

    def __attrs_post_init__(self) -> None:
        check = _CHECKS.get(self.kind) if type(self.kind) is str else None
        if check is None:
            raise ValidationError(
                f"unknown predicate kind {self.kind!r}; expected one of {', '.join(_KINDS)}",
                field="kind",
            )
        object.__setattr__(self, "value", check(self.value))

    @property
    def indexed(self) -> bool:
        """Whether the executor keeps a posting list for this atom: type and tag atoms, and
        status atoms other than ``"active"``."""
        return self.kind in ("type", "tag") or (self.kind == "status" and self.value != "active")

    @property
    def sort_key(self) -> tuple[int, Any]:
        """The deterministic order of atoms: by kind (indexed kinds first), then value."""
        return (_RANK[self.kind], self.value)

    def holds(self, attrs: MemoryAttrs) -> bool:
        """Whether a memory with these attributes satisfies the atom (no status default)."""
        kind, value = self.kind, self.value
        if kind == "type":
            return bool(attrs.type_name == value)
        if kind == "tag":
            return value in attrs.tags
        if kind == "status":
            return bool(attrs.status == value)
        if kind == "ns":
            return bool(attrs.ns == value)
        if kind == "pinned":
            return attrs.pinned
        if kind == "since":
            return bool(attrs.at >= value)
        if kind == "until":
            return bool(attrs.at < value)
        if kind == "min_confidence":
            return bool(attrs.confidence >= value)
        return bool(attrs.priority >= value)  # min_priority

    def __repr__(self) -> str:
        if self.kind == "pinned":
            return "Q.pinned()"
        return f"Q.{self.kind}({self.value!r})"


def _flatten_and(parts: Iterable[object]) -> tuple[Predicate, ...]:
    return _flatten(And, parts)


def _flatten_or(parts: Iterable[object]) -> tuple[Predicate, ...]:
    return _flatten(Or, parts)


@attrs.frozen(repr=False)
class And(Predicate):
    """Every part holds. Built by ``a & b`` or :meth:`Q.all_of` (nested ANDs are flattened)."""

    parts: tuple[Predicate, ...] = attrs.field(converter=_flatten_and)

    def __attrs_post_init__(self) -> None:
        if len(self.parts) < 2:
            raise TypeError("And needs at least two predicates; use Q.all_of")

    def __repr__(self) -> str:
        return "(" + " & ".join(map(repr, self.parts)) + ")"


@attrs.frozen(repr=False)
class Or(Predicate):
    """Some part holds. Built by ``a | b`` or :meth:`Q.any_of` (nested ORs are flattened)."""

    parts: tuple[Predicate, ...] = attrs.field(converter=_flatten_or)

    def __attrs_post_init__(self) -> None:
        if len(self.parts) < 2:
            raise TypeError("Or needs at least two predicates; use Q.any_of")

    def __repr__(self) -> str:
        return "(" + " | ".join(map(repr, self.parts)) + ")"


@attrs.frozen(repr=False)
class Not(Predicate):
    """The part does not hold. Built by ``~p``; ``~~p`` is ``p`` itself."""

    part: Predicate = attrs.field()

    @part.validator
    def _check_part(self, _: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, Predicate):
            raise TypeError(f"can only negate a query predicate, not {type(value).__name__}")

    def __invert__(self) -> Predicate:
        return self.part

    def __repr__(self) -> str:
        return f"~{self.part!r}"


class Q:
    """Constructors of query predicates.

    >>> Q.type("fact") & Q.tag("Deploy") & ~Q.pinned()
    (Q.type('fact') & Q.tag('deploy') & ~Q.pinned())

    Every constructor validates its argument and raises
    :class:`~cortexgraph.errors.ValidationError` naming the field (``type``, ``tag``,
    ``ns``, ``since``, ``until``, ``confidence``, ``priority``, ``status``).
    """

    __slots__ = ()

    @staticmethod
    def type(memory_type: object) -> Atom:
        """Memories of one type: a class such as ``cortexgraph.Fact`` or a name such as
        ``"fact"``."""
        return Atom("type", memory_type)

    @staticmethod
    def tag(tag: object) -> Atom:
        """Memories carrying ``tag``, normalised as memory tags are (lowercase, NFC; 1 to
        64 characters, no whitespace or control characters)."""
        return Atom("tag", tag)

    @staticmethod
    def ns(ns: object) -> Atom:
        """Memories in namespace ``ns``."""
        return Atom("ns", ns)

    @staticmethod
    def since(ms: object) -> Atom:
        """Memories whose head version was written at ``ms`` or later (integer ms)."""
        return Atom("since", ms)

    @staticmethod
    def until(ms: object) -> Atom:
        """Memories whose head version was written before ``ms`` (integer ms)."""
        return Atom("until", ms)

    @staticmethod
    def min_confidence(confidence: object) -> Atom:
        """Memories with ``confidence >= confidence`` (a number in 0..1)."""
        return Atom("min_confidence", confidence)

    @staticmethod
    def min_priority(priority: object) -> Atom:
        """Memories with ``priority >= priority`` (an integer in 1..10)."""
        return Atom("min_priority", priority)

    @staticmethod
    def status(status: object) -> Atom:
        """Memories with this status, one of :data:`QUERY_STATUSES`. Mentioning status in
        a conjunct turns off the default of active memories only (see the module)."""
        return Atom("status", status)

    @staticmethod
    def pinned() -> Atom:
        """Pinned memories; ``~Q.pinned()`` for the others."""
        return Atom("pinned", True)

    @staticmethod
    def all_of(*predicates: Predicate) -> Predicate:
        """``p1 & p2 & ...``; a single predicate is returned as is.

        Raises:
            TypeError: no predicates, or something that is not a predicate.
        """
        return _combine(And, predicates, "all_of")

    @staticmethod
    def any_of(*predicates: Predicate) -> Predicate:
        """``p1 | p2 | ...``; a single predicate is returned as is.

        Raises:
            TypeError: no predicates, or something that is not a predicate.
        """
        return _combine(Or, predicates, "any_of")


def _combine(cls: type[And] | type[Or], predicates: tuple[object, ...], name: str) -> Predicate:
    parts = _flatten(cls, predicates)
    if not parts:
        raise TypeError(f"Q.{name}() needs at least one predicate")
    return parts[0] if len(parts) == 1 else cls(parts)


def check_predicate(where: object) -> Predicate:
    """Return ``where`` if it is a query predicate.

    Raises:
        ValidationError: naming the field ``where``.
    """
    if not isinstance(where, Predicate):
        raise ValidationError(
            f"must be a query predicate built with cortexgraph.Q, not {type(where).__name__}",
            field="where",
        )
    return where


# ---------------------------------------------------------------------------
# Evaluation


@attrs.frozen(kw_only=True)
class MemoryAttrs:
    """What predicates look at in a memory (its head version).

    The executor builds these from trusted, stored data, so nothing is validated here:
    ``tags`` must be a sorted tuple of normalised tags, ``at`` the integer ms at which the
    head version was written, ``status`` one of :data:`QUERY_STATUSES`.
    """

    type_name: str
    ns: str
    tags: tuple[str, ...]
    at: int
    confidence: float
    priority: int
    status: str
    pinned: bool


def matches(pred: Predicate, attrs: MemoryAttrs) -> bool:
    """Whether a memory with ``attrs`` matches ``pred`` (the brute-force reference).

    Equal to: some conjunct of ``to_dnf(pred)`` has all its literals true, where a conjunct
    with no status literal also requires ``attrs.status == "active"`` (the status
    default). It is computed over the predicate tree directly, without building the normal
    form, so it works for any predicate, however large its normal form.
    """
    any_match, status_match = _evaluate(pred, True, attrs)
    return any_match if attrs.status == "active" else status_match


def _evaluate(node: Predicate, positive: bool, attrs: MemoryAttrs) -> tuple[bool, bool]:
    """Over the conjuncts of the normal form of ``node`` (negated unless ``positive``):
    (does some conjunct hold, does some conjunct that mentions status hold)."""
    if isinstance(node, Atom):
        hit = node.holds(attrs) is positive
        return hit, hit and node.kind == "status"
    if isinstance(node, Not):
        return _evaluate(node.part, not positive, attrs)
    parts = node.parts  # type: ignore[attr-defined]
    if isinstance(node, And) is positive:  # a conjunction (And, or a negated Or)
        # a combined conjunct mentions status when one of its pieces does
        any_match, status_match = True, False
        for part in parts:
            part_any, part_status = _evaluate(part, positive, attrs)
            status_match = (status_match and part_any) or (any_match and part_status)
            any_match = any_match and part_any
        return any_match, status_match
    any_match = status_match = False
    for part in parts:
        part_any, part_status = _evaluate(part, positive, attrs)
        any_match = any_match or part_any
        status_match = status_match or part_status
    return any_match, status_match


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
        for part in parts:
            right = _dnf(part, positive)
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
