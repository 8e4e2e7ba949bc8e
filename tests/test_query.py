"""The query language (core/predicates.py, core/query.py): predicates, the status default,
the normal form, the guards and the planner, held against brute force and a naive
executor."""

from __future__ import annotations

import functools
import math
import operator
from collections import defaultdict
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortexgraph.core.predicates import (
    QUERY_STATUSES,
    And,
    Atom,
    MemoryAttrs,
    Not,
    Or,
    Predicate,
    Q,
    check_predicate,
    matches,
)
from cortexgraph.core.query import (
    MAX_CONJUNCTS,
    ORDERS,
    Plan,
    check_bounded,
    check_not_too_broad,
    check_order,
    plan,
    to_dnf,
)
from cortexgraph.core.taxonomy import Fact, Goal, Memory
from cortexgraph.errors import TooBroadQueryError, UnboundedQueryError, ValidationError

TYPES = ("fact", "goal", "event")
TAGS = ("a", "b", "c")
NAMESPACES = ("x", "y")
CONFIDENCES = (0.0, 0.25, 0.5, 1.0)

type_atoms = st.sampled_from(TYPES).map(Q.type)
tag_atoms = st.sampled_from(TAGS).map(Q.tag)
atoms = st.one_of(
    type_atoms,
    tag_atoms,
    st.sampled_from(NAMESPACES).map(Q.ns),
    st.integers(0, 5).map(Q.since),
    st.integers(0, 5).map(Q.until),
    st.sampled_from(CONFIDENCES).map(Q.min_confidence),
    st.sampled_from((1, 5, 10)).map(Q.min_priority),
    st.sampled_from(QUERY_STATUSES).map(Q.status),
    st.just(Q.pinned()),
)


def _combine(children: st.SearchStrategy[Predicate]) -> st.SearchStrategy[Predicate]:
    return st.one_of(
        st.tuples(children, children).map(lambda t: t[0] & t[1]),
        st.tuples(children, children).map(lambda t: t[0] | t[1]),
        children.map(lambda p: ~p),
    )


predicates = st.recursive(atoms, _combine, max_leaves=8)
#: predicates every conjunct of which has a positive type or tag literal
bounded_predicates = st.builds(
    lambda p, anchors, first: Q.all_of(Q.any_of(*anchors), p) if first else p & Q.any_of(*anchors),
    predicates,
    st.lists(st.one_of(type_atoms, tag_atoms), min_size=1, max_size=3),
    st.booleans(),
)
rows = st.builds(
    MemoryAttrs,
    type_name=st.sampled_from((*TYPES, "pattern")),
    ns=st.sampled_from(NAMESPACES),
    tags=st.sets(st.sampled_from((*TAGS, "d"))).map(lambda s: tuple(sorted(s))),
    at=st.integers(0, 6),
    confidence=st.sampled_from(CONFIDENCES),
    priority=st.integers(1, 10),
    status=st.sampled_from(QUERY_STATUSES),
    pinned=st.booleans(),
)


def row(**changes: object) -> MemoryAttrs:
    """An active, unpinned fact in namespace x with tag a, unless changed."""
    fields: dict[str, object] = {
        "type_name": "fact",
        "ns": "x",
        "tags": ("a",),
        "at": 10,
        "confidence": 0.5,
        "priority": 5,
        "status": "active",
        "pinned": False,
    }
    fields.update(changes)
    return MemoryAttrs(**fields)  # type: ignore[arg-type]


def postings_of(memories: list[MemoryAttrs]) -> dict[Atom, set[int]]:
    """Posting lists as an index would keep them: type, tag, and non-active status."""
    postings: dict[Atom, set[int]] = defaultdict(set)
    for i, memory in enumerate(memories):
        postings[Q.type(memory.type_name)].add(i)
        for tag in memory.tags:
            postings[Q.tag(tag)].add(i)
        if memory.status != "active":
            postings[Q.status(memory.status)].add(i)
    return postings


def execute(query_plan: Plan, memories: list[MemoryAttrs]) -> set[int]:
    """A naive executor: set operations over posting lists, then the residual filters."""
    postings = postings_of(memories)

    def posting(atom: Atom) -> set[int]:
        assert atom.indexed, f"the plan reads a posting list of unindexed {atom!r}"
        return postings.get(atom, set())

    found: set[int] = set()
    for step in query_plan.steps:
        ids = set(posting(step.driver))
        for atom in step.intersect:
            ids &= posting(atom)
        for atom in step.subtract:
            ids -= posting(atom)
        found |= {i for i in ids if all(a.holds(memories[i]) is pos for a, pos in step.residual)}
    return found


def truth(pred: Predicate, memory: MemoryAttrs) -> bool:
    """Plain boolean evaluation of the tree, without any status default."""
    if isinstance(pred, Atom):
        return pred.holds(memory)
    if isinstance(pred, Not):
        return not truth(pred.part, memory)
    if isinstance(pred, And):
        return all(truth(p, memory) for p in pred.parts)
    assert isinstance(pred, Or)
    return any(truth(p, memory) for p in pred.parts)


def dnf_holds(pred: Predicate, memory: MemoryAttrs) -> bool:
    """The documented meaning: some conjunct holds, with the status default per conjunct."""
    return any(
        all(atom.holds(memory) is positive for atom, positive in conjunct)
        and (memory.status == "active" or any(a.kind == "status" for a, _ in conjunct))
        for conjunct in to_dnf(pred)
    )


def mentions_status(pred: Predicate) -> bool:
    return "Q.status(" in repr(pred)


# ---------------------------------------------------------------------------
# Semantics


@given(bounded_predicates, st.lists(rows, max_size=12))
def test_plan_run_by_a_naive_executor_equals_brute_force(
    pred: Predicate, memories: list[MemoryAttrs]
) -> None:
    """Running the plan over posting lists built from the rows returns exactly the rows
    that matches() accepts: intersections, subtractions, residual filters and the status
    default together lose nothing and add nothing."""
    postings = postings_of(memories)
    query_plan = plan(pred, lambda atom: len(postings.get(atom, ())))
    expected = {i for i, memory in enumerate(memories) if matches(pred, memory)}
    assert execute(query_plan, memories) == expected


@given(predicates, rows)
def test_dnf_is_equivalent_to_the_predicate(pred: Predicate, memory: MemoryAttrs) -> None:
    """matches() (computed over the tree) agrees with the documented meaning computed over
    to_dnf() (some conjunct holds; status default per conjunct)."""
    assert matches(pred, memory) == dnf_holds(pred, memory)


@given(predicates, rows)
def test_matches_is_plain_logic_plus_the_status_default(
    pred: Predicate, memory: MemoryAttrs
) -> None:
    """For an active memory matches() is plain boolean logic; for a predicate that never
    mentions status it is plain logic restricted to active memories."""
    if memory.status == "active":
        assert matches(pred, memory) == truth(pred, memory)
    if not mentions_status(pred):
        assert matches(pred, memory) == (truth(pred, memory) and memory.status == "active")


@pytest.mark.parametrize(
    ("pred", "memory", "expected"),
    [
        (Q.tag("a"), row(), True),
        (Q.tag("a"), row(status="archived"), False),
        (Q.tag("a") & Q.status("archived"), row(status="archived"), True),
        (Q.tag("a") & Q.status("archived"), row(), False),
        (Q.tag("a") & ~Q.status("archived"), row(status="tombstoned"), True),
        (Q.tag("a") & ~Q.status("archived"), row(status="archived"), False),
        ((Q.tag("a") & Q.status("archived")) | Q.tag("b"), row(status="archived"), True),
        ((Q.tag("b") & Q.status("archived")) | Q.tag("a"), row(status="archived"), False),
        (Q.tag("a") & Q.status("active"), row(status="pruned"), False),
        (~Q.tag("b") & Q.type(Fact), row(status="merged"), False),
    ],
    ids=repr,
)
def test_status_default_examples(pred: Predicate, memory: MemoryAttrs, expected: bool) -> None:
    """A conjunct that says nothing about status sees only active memories; one that
    mentions status (positively or negatively) takes it literally."""
    assert matches(pred, memory) is expected


@pytest.mark.parametrize(
    ("atom", "yes", "no"),
    [
        (Q.type(Fact), row(), row(type_name="goal")),
        (Q.type("goal"), row(type_name="goal"), row()),
        (Q.tag("A"), row(tags=("a", "b")), row(tags=("b",))),
        (Q.ns("x"), row(), row(ns="y")),
        (Q.since(10), row(at=10), row(at=9)),
        (Q.until(10), row(at=9), row(at=10)),
        (Q.min_confidence(0.5), row(confidence=0.5), row(confidence=0.49)),
        (Q.min_priority(5), row(priority=5), row(priority=4)),
        (Q.status("merged"), row(status="merged"), row()),
        (Q.pinned(), row(pinned=True), row()),
    ],
    ids=repr,
)
def test_each_atom_tests_its_attribute(atom: Atom, yes: MemoryAttrs, no: MemoryAttrs) -> None:
    """Each atom holds exactly at its documented boundary (>= for since and the minimums,
    < for until) and fails just across it."""
    assert atom.holds(yes) is True
    assert atom.holds(no) is False


# ---------------------------------------------------------------------------
# Normal form


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        (Q.type(Fact) & Q.type(Goal), ()),
        (Q.tag("a") & ~Q.tag("a"), ()),
        (Q.ns("x") & Q.ns("y") & Q.tag("a"), ()),
        (Q.status("archived") & Q.status("merged") & Q.tag("a"), ()),
        (Q.type(Fact) & ~Q.type(Goal), (((Q.type("fact"), True),),)),
        (Q.tag("a") | Q.tag("a"), (((Q.tag("a"), True),),)),
        (
            ~(Q.tag("b") | ~Q.type(Fact)),
            (((Q.type("fact"), True), (Q.tag("b"), False)),),
        ),
        (
            (Q.tag("b") | Q.tag("a")) & Q.type(Fact),
            (
                ((Q.type("fact"), True), (Q.tag("a"), True)),
                ((Q.type("fact"), True), (Q.tag("b"), True)),
            ),
        ),
    ],
    ids=repr,
)
def test_dnf_examples(pred: Predicate, expected: tuple[object, ...]) -> None:
    """Contradictory conjuncts are dropped, implied negations removed, negation pushed to
    atoms, and conjuncts and literals come out sorted."""
    assert to_dnf(pred) == expected


def _fold(op: Callable[[Predicate, Predicate], Predicate], parts: list[Predicate]) -> Predicate:
    return functools.reduce(op, parts)


def _fold_right(
    op: Callable[[Predicate, Predicate], Predicate], parts: list[Predicate]
) -> Predicate:
    return functools.reduce(lambda acc, p: op(p, acc), reversed(parts))


@given(st.lists(bounded_predicates, min_size=2, max_size=3), st.data())
def test_dnf_and_explain_do_not_depend_on_operand_order(
    parts: list[Predicate], data: st.DataObject
) -> None:
    """The same operands combined with & (or |) in any order and grouping give the same
    normal form and the same explain() text, or all are refused as too broad (an AND of
    ORs can pass the conjunct cap whatever the order)."""
    shuffled = data.draw(st.permutations(parts))

    def size(atom: Atom) -> int:
        return len(repr(atom)) % 4

    def normal_form(pred: Predicate) -> object:
        try:
            return to_dnf(pred), plan(pred, size).explain()
        except TooBroadQueryError:
            return "too broad"

    for op, combine in ((operator.and_, Q.all_of), (operator.or_, Q.any_of)):
        built = [_fold(op, parts), _fold_right(op, shuffled), combine(*shuffled)]
        assert len({normal_form(p) for p in built}) == 1


def test_the_cap_does_not_depend_on_operand_order() -> None:
    """Regression (found by the property above): three ANDs of ORs whose normal form is
    small, but whose product passed the conjunct cap midway in one operand order and not
    in another, so one order was refused as too broad. The operands are now multiplied
    out in a canonical order."""
    a = ~(Q.type("fact") & Q.tag("a")) & (Q.type("fact") | Q.type("event") | Q.tag("b"))
    b = ~(Q.ns("x") & ~Q.tag("b")) & (Q.type("fact") | Q.tag("a") | Q.tag("c"))
    c = ~(Q.type("goal") & Q.since(0) & Q.ns("y") & Q.since(1)) & Q.type("fact")
    forms = {to_dnf(_fold(operator.and_, order)) for order in ([a, b, c], [a, c, b], [c, b, a])}
    forms.add(to_dnf(Q.all_of(a, c, b)))
    assert len(forms) == 1


def test_dnf_cap() -> None:
    """A normal form of exactly MAX_CONJUNCTS conjuncts is accepted; one more OR under the
    AND doubles it past the cap and raises TooBroadQueryError saying why; matches() still
    evaluates the oversized predicate."""
    pairs = [Q.tag(f"a{i}") | Q.tag(f"b{i}") for i in range(7)]
    assert MAX_CONJUNCTS == 2**6
    assert len(to_dnf(Q.all_of(*pairs[:6]))) == MAX_CONJUNCTS
    big = Q.all_of(*pairs)
    with pytest.raises(TooBroadQueryError, match="more than 64 alternatives"):
        to_dnf(big)
    with pytest.raises(TooBroadQueryError):
        plan(big, lambda atom: 1)
    tags = tuple(sorted(f"a{i}" for i in range(7)))
    assert matches(big, row(tags=tags))
    assert not matches(big, row(tags=tags[1:]))


# ---------------------------------------------------------------------------
# Guards

TOO_BROAD = [
    (Q.ns("x"), "Q.ns('x')"),
    (Q.pinned(), "Q.pinned()"),
    (~Q.tag("a"), "~Q.tag('a')"),
    (Q.status("archived"), "Q.status('archived')"),
    (Q.min_priority(5) & Q.since(10), "Q.since(10) & Q.min_priority(5)"),
    (Q.tag("a") | Q.ns("x"), "Q.ns('x')"),
    (Q.type(Fact) | ~Q.type(Fact), "~Q.type('fact')"),
    (~(Q.tag("a") & Q.tag("b")), "~Q.tag('a')"),
    (~Q.type(Fact) & Q.ns("x"), "~Q.type('fact') & Q.ns('x')"),
]
NOT_TOO_BROAD = [
    Q.type(Fact),
    Q.tag("a") & Q.ns("x"),
    (Q.tag("a") | Q.type("goal")) & ~Q.pinned(),
    Q.type(Fact) & Q.type(Goal),  # unsatisfiable: nothing to scan
    Q.tag("a") & ~Q.tag("a") & Q.ns("x"),
    ~(~Q.tag("a") | Q.pinned()),
    Q.status("archived") & Q.tag("a"),
    Q.any_of(*(Q.tag(t) for t in TAGS)) & ~Q.status("active"),
]


@pytest.mark.parametrize(("pred", "named"), TOO_BROAD, ids=repr)
def test_too_broad_queries_are_refused_naming_the_conjunct(pred: Predicate, named: str) -> None:
    """A conjunct without a positive type or tag literal is refused by the guard and by
    the planner, and the message names that conjunct."""
    with pytest.raises(TooBroadQueryError, match="names neither a type nor a tag") as info:
        check_not_too_broad(to_dnf(pred))
    assert f"alternative {named} names" in str(info.value)
    with pytest.raises(TooBroadQueryError):
        plan(pred, lambda atom: 1)


@pytest.mark.parametrize("pred", NOT_TOO_BROAD, ids=repr)
def test_anchored_queries_pass_the_guard(pred: Predicate) -> None:
    """Every conjunct has a positive type or tag (or there are no conjuncts): the guard
    passes and the plan has one step per conjunct."""
    dnf = to_dnf(pred)
    check_not_too_broad(dnf)
    assert len(plan(pred, lambda atom: 1).steps) == len(dnf)


@pytest.mark.parametrize(("limit", "budget"), [(10, None), (None, 500), (1, 1), (10**9, None)])
def test_bounded_queries_pass(limit: int | None, budget: int | None) -> None:
    """A positive limit, a positive token budget, or both, make a query bounded."""
    check_bounded(limit, budget)


def test_unbounded_query_is_refused() -> None:
    """Neither limit nor budget_tokens: UnboundedQueryError, naming both remedies."""
    with pytest.raises(UnboundedQueryError, match=r"limit= or budget_tokens="):
        check_bounded(None, None)


@pytest.mark.parametrize(
    ("limit", "budget", "field"),
    [
        (0, None, "limit"),
        (-1, None, "limit"),
        (True, None, "limit"),
        ("10", None, "limit"),
        (10.0, None, "limit"),
        (None, 0, "budget_tokens"),
        (None, 1.5, "budget_tokens"),
        (5, -5, "budget_tokens"),
    ],
)
def test_bad_bounds_name_their_field(limit: object, budget: object, field: str) -> None:
    """A bound that is not a positive integer is a ValidationError naming it."""
    with pytest.raises(ValidationError) as info:
        check_bounded(limit, budget)
    assert info.value.field == field


def test_orders() -> None:
    """check_order accepts exactly the documented orders and names order_by otherwise."""
    assert ORDERS == ("salience", "recent", "priority", "confidence")
    for order in ORDERS:
        assert check_order(order) == order
    for bad in ("newest", "Salience", None, 1):
        with pytest.raises(ValidationError) as info:
            check_order(bad)
        assert info.value.field == "order_by"


# ---------------------------------------------------------------------------
# Planner


@given(bounded_predicates, st.data())
def test_plan_drives_from_the_smallest_posting_list(pred: Predicate, data: st.DataObject) -> None:
    """Each step starts from the conjunct's smallest positive indexed atom (ties broken by
    atom order), intersects the others in increasing size, subtracts exactly the negative
    indexed atoms and filters on exactly the rest plus the status default; size() is asked
    only about indexed atoms, once each."""
    table = data.draw(st.dictionaries(st.one_of(atoms), st.integers(0, 5)))
    asked: list[Atom] = []

    def size(atom: Atom) -> int:
        assert atom.indexed
        asked.append(atom)
        return table.get(atom, 3)

    query_plan = plan(pred, size)
    assert len(asked) == len(set(asked))
    assert query_plan.dnf == to_dnf(pred)
    assert len(query_plan.steps) == len(query_plan.dnf)
    for conjunct, step in zip(query_plan.dnf, query_plan.steps, strict=True):
        lists = [a for a, positive in conjunct if positive and a.indexed]
        ranked = sorted(lists, key=lambda a: (table.get(a, 3), a.sort_key))
        assert [step.driver, *step.intersect] == ranked
        assert step.sizes == tuple(table.get(a, 3) for a in ranked)
        assert step.sizes[0] == min(table.get(a, 3) for a in lists)
        assert list(step.subtract) == [a for a, positive in conjunct if not positive and a.indexed]
        rest = [lit for lit in conjunct if not lit[0].indexed]
        status_default = not any(a.kind == "status" for a, _ in conjunct)
        assert step.status_default is status_default
        extra = [(Q.status("active"), True)] if status_default else []
        assert sorted(step.residual, key=repr) == sorted(rest + extra, key=repr)


def test_explain_example() -> None:
    """explain() shows, per conjunct, the driving list and its size, the intersections in
    increasing size, subtractions and filters, marking the status default."""
    sizes = {Q.type(Fact): 1000, Q.tag("deploy"): 3, Q.tag("ci"): 40, Q.tag("old"): 7}
    pred = Q.type(Fact) & (Q.tag("deploy") | Q.tag("ci") & Q.status("archived")) & ~Q.tag("old")
    pred = pred & Q.ns("ops")
    query_plan = plan(pred, lambda atom: sizes.get(atom, 0))
    assert query_plan.explain() == (
        "1. scan Q.status('archived') (0); intersect Q.tag('ci') (40), Q.type('fact') (1000);"
        " subtract Q.tag('old'); filter Q.ns('ops')\n"
        "2. scan Q.tag('deploy') (3); intersect Q.type('fact') (1000); subtract Q.tag('old');"
        " filter Q.status('active') [default], Q.ns('ops')"
    )
    assert plan(Q.type(Fact) & Q.type(Goal), lambda atom: 0).explain() == (
        "nothing to do: the query can never match"
    )


# ---------------------------------------------------------------------------
# Values and arguments


@given(predicates)
def test_repr_reads_back_and_predicates_hash(pred: Predicate) -> None:
    """repr() is an expression that rebuilds an equal predicate with an equal hash."""
    rebuilt = eval(repr(pred), {"Q": Q})
    assert rebuilt == pred
    assert hash(rebuilt) == hash(pred)
    assert repr(rebuilt) == repr(pred)
    assert {pred: 1}[rebuilt] == 1


@given(st.text(max_size=8))
def test_tags_normalise_and_validate_like_memory_tags(text: str) -> None:
    """Q.tag accepts exactly the tags a memory accepts and normalises them the same way."""
    try:
        expected = Fact(text="x", tags=[text]).tags[0]
    except ValidationError:
        with pytest.raises(ValidationError) as info:
            Q.tag(text)
        assert info.value.field == "tag"
    else:
        assert Q.tag(text).value == expected


def test_constructors_normalise() -> None:
    """Type classes and names give the same atom; tags fold case; confidences are floats
    with -0.0 folded; ~~p is p."""
    assert Q.type(Fact) == Q.type("fact")
    assert Q.tag("Deploy") == Q.tag("deploy")
    assert repr(Q.min_confidence(1)) == "Q.min_confidence(1.0)"
    assert repr(Q.min_confidence(-0.0)) == "Q.min_confidence(0.0)"
    assert ~~Q.pinned() == Q.pinned()
    assert Q.all_of(Q.tag("a")) == Q.tag("a")
    assert Atom("tag", "A") == Q.tag("a")


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Q.type("nope"), "type"),
        (lambda: Q.type(Memory), "type"),
        (lambda: Q.type(Fact(text="x")), "type"),
        (lambda: Q.type(4), "type"),
        (lambda: Q.tag(""), "tag"),
        (lambda: Q.tag("a b"), "tag"),
        (lambda: Q.tag("x" * 65), "tag"),
        (lambda: Q.tag("\x00"), "tag"),
        (lambda: Q.tag(["a"]), "tag"),
        (lambda: Q.ns("Bad NS"), "ns"),
        (lambda: Q.ns(""), "ns"),
        (lambda: Q.since(-1), "since"),
        (lambda: Q.since(1.5), "since"),
        (lambda: Q.since(True), "since"),
        (lambda: Q.until("2024"), "until"),
        (lambda: Q.until(2**63), "until"),
        (lambda: Q.min_confidence(1.5), "confidence"),
        (lambda: Q.min_confidence(math.nan), "confidence"),
        (lambda: Q.min_confidence(True), "confidence"),
        (lambda: Q.min_confidence("0.5"), "confidence"),
        (lambda: Q.min_priority(0), "priority"),
        (lambda: Q.min_priority(11), "priority"),
        (lambda: Q.min_priority(5.0), "priority"),
        (lambda: Q.status("deleted"), "status"),
        (lambda: Q.status("ACTIVE"), "status"),
        (lambda: Atom("colour", "red"), "kind"),
        (lambda: check_predicate("type=fact"), "where"),
    ],
)
def test_bad_arguments_name_their_field(build: Callable[[], object], field: str) -> None:
    """Each bad argument raises ValidationError whose field is the documented name."""
    with pytest.raises(ValidationError) as info:
        build()
    assert info.value.field == field


@pytest.mark.parametrize(
    "build",
    [
        lambda: Q.tag("a") & "b",
        lambda: "b" | Q.tag("a"),  # type: ignore[operator]
        lambda: Q.tag("a") | None,
        lambda: Q.all_of(),
        lambda: Q.any_of(Q.tag("a"), 3),  # type: ignore[arg-type]
        lambda: bool(Q.tag("a")),
        lambda: Q.tag("a") and Q.tag("b"),
        lambda: to_dnf("a"),  # type: ignore[arg-type]
    ],
)
def test_combining_with_non_predicates_is_a_type_error(build: Callable[[], object]) -> None:
    """Operators and combinators refuse non-predicates with TypeError, and a predicate has
    no truth value (so `and` / `or` cannot silently drop half a query)."""
    with pytest.raises(TypeError):
        build()
