"""The query language's predicates: the syntax tree, :class:`Q` that builds it, and
:func:`matches` that evaluates it on one memory.

Predicates are built with :class:`Q` and combined with ``&`` (and), ``|`` (or) and ``~``
(not)::

    Q.type(Fact) & Q.tag("deploy") & ~Q.tag("obsolete")
    (Q.tag("ci") | Q.tag("deploy")) & Q.min_priority(7)

Every predicate is a frozen, hashable value with a deterministic ``repr`` that reads back
as the expression that builds it. Nothing here touches a store; the normal form, the
guards and the planner that the executor asks how to run a predicate are in
:mod:`cortexgraph.core.query`.

Semantics
---------

A predicate is read in disjunctive normal form (:func:`cortexgraph.core.query.to_dnf`): an
OR of *conjuncts*, each an AND of literals ``(atom, positive)``. A memory matches when it
satisfies some conjunct. **Status default:** a conjunct with no status literal (neither
``Q.status(s)`` nor ``~Q.status(s)``) matches only memories whose status is ``"active"``;
a conjunct that mentions status in any way takes the statuses it names literally. So
``Q.tag("x")`` finds active memories, ``Q.tag("x") & Q.status("archived")`` archived ones,
and ``Q.tag("x") & ~Q.status("archived")`` every status but archived (tombstoned, pruned
and merged included). :func:`matches` applies the same rule without building the normal
form.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from ..errors import ValidationError
from .taxonomy import MAX_MS, MEMORY_TYPES, check_tags, normalise_tag, type_by_name
from .uri import check_name

__all__ = [
    "QUERY_STATUSES",
    "And",
    "Atom",
    "MemoryAttrs",
    "Not",
    "Or",
    "Predicate",
    "Q",
    "check_predicate",
    "matches",
]

#: The statuses a memory can have, as ``Q.status`` accepts them.
QUERY_STATUSES = ("active", "tombstoned", "archived", "pruned", "merged")

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

    @staticmethod
    def fields(
        *,
        types: Sequence[object] | None = None,
        tags: Sequence[object] | None = None,
        ns: object = None,
        status: object = None,
        min_priority: object = None,
        min_confidence: object = None,
        since: object = None,
        until: object = None,
    ) -> Predicate | None:
        """The AND of the filters given (a type among ``types``, every tag of ``tags``,
        the namespace, status, bounds and times), as a form or a tool gathers them;
        ``None`` when none is given.

        >>> Q.fields(types=["fact", "event"], tags=["deploy"], min_priority=5)
        ((Q.type('fact') | Q.type('event')) & Q.tag('deploy') & Q.min_priority(5))

        Raises:
            ValidationError: a bad value (the field names it).
        """
        parts: list[Predicate] = []
        if types is not None:
            parts.append(Q.any_of(*(Q.type(t) for t in types)))
        if tags is not None:
            parts.append(Q.all_of(*(Q.tag(t) for t in tags)))
        for value, make in (
            (ns, Q.ns),
            (status, Q.status),
            (min_priority, Q.min_priority),
            (min_confidence, Q.min_confidence),
            (since, Q.since),
            (until, Q.until),
        ):
            if value is not None:
                parts.append(make(value))
        return Q.all_of(*parts) if parts else None


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

