"""``ScopeView.find`` (a brute-force scan of a verified slice) against ``Cortex.find``
(the column index) over the same memories, its guards, and the differences that are by
design.

The oracle is the other path: a scope of *every* memory of a store, with its edges, holds
the same records and in-degrees the store ranks with. While nothing was read with
``late_binding`` and no outcome was attested (so frequency is 0 and the weights are the
defaults, as a bundle assumes), the view must answer every query exactly as the store
does: the same hits in the same order with the same rendering, tokens and scores, the same
match count and seq, and the same typed error for the same bad query. Only the ``plan``
text differs. The differences that remain by design are tested one by one below.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph import Q
from cortexgraph.core.salience import DEFAULT_WEIGHTS
from cortexgraph.scope import ScopeView

T0 = 1_700_000_000_000
DAY = 86_400_000
TYPES = [cg.Fact, cg.Event, cg.Preference, cg.Goal, cg.Constraint, cg.Pattern]
TAGS = ["a", "b", "c"]
NAMESPACES = ["one", "two"]
FORMS = ["short", "medium", "full"]
ORDERS = ["salience", "recent", "priority", "confidence"]

_atoms = st.one_of(
    st.sampled_from(TYPES).map(Q.type),
    st.sampled_from(TAGS).map(Q.tag),
    st.sampled_from(NAMESPACES).map(Q.ns),
    st.integers(0, 40).map(lambda d: Q.since(T0 + d * DAY)),
    st.integers(0, 40).map(lambda d: Q.until(T0 + d * DAY)),
    st.sampled_from([0.0, 0.3, 0.5, 0.9]).map(Q.min_confidence),
    st.integers(1, 10).map(Q.min_priority),
    st.sampled_from(["active", "tombstoned", "archived"]).map(Q.status),
    st.just(Q.pinned()),
)
# Any predicate, too broad ones included (both paths must refuse those alike); most get
# a type or tag ANDed on so that most queries do run.
_any_predicates = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: p[0] & p[1]),
        st.tuples(inner, inner).map(lambda p: p[0] | p[1]),
        inner.map(lambda p: ~p),
    ),
    max_leaves=5,
)
_indexed = st.one_of(st.sampled_from(TYPES).map(Q.type), st.sampled_from(TAGS).map(Q.tag))
_predicates = st.one_of(
    _any_predicates,
    _indexed,
    st.tuples(_indexed, _indexed).map(lambda p: p[0] | p[1]),
    st.tuples(_indexed, _any_predicates).map(lambda p: p[0] & p[1]),
    st.tuples(_indexed, _any_predicates).map(lambda p: p[0] & p[1]),
)


def _words(text: str) -> int:
    """A token estimator other than the default (one token a space-separated word)."""
    return len(text.split())


# A budget is a number of tokens, or (hits, slack): the tokens the first ``hits`` hits of
# the unbounded answer take, plus ``slack`` (-1, 0 or 1), so that the budget often falls
# exactly on, just before or just after the end of a hit.
_budgets = st.one_of(
    st.integers(1, 300),
    st.tuples(st.integers(1, 20), st.sampled_from([-1, 0, 1])),
)


def _budget_tokens(cx: cg.Cortex, where: Any, budget: Any, kwargs: dict[str, Any]) -> Any:
    """The ``budget_tokens`` a generated budget stands for (see ``_budgets``)."""
    if not isinstance(budget, tuple):
        return budget
    hits, slack = budget
    try:
        everything = cx.find(where, **{**kwargs, "limit": 10_000, "budget_tokens": None})
    except cg.CortexError:
        return 50  # the query is refused anyway; any budget does
    return max(1, sum(hit.tokens for hit in everything[:hits]) + slack)


_queries = st.tuples(
    _predicates,
    st.sampled_from(ORDERS),
    st.one_of(  # (limit, budget): either, both, or (rarely) neither
        st.tuples(st.integers(1, 30), st.none()),
        st.tuples(st.none(), _budgets),
        st.tuples(st.integers(1, 30), _budgets),
        st.just((None, None)),
    ),
    st.sampled_from(FORMS),
    st.integers(0, 120),  # now, in days after T0
    st.sampled_from([None, _words]),
)

_memory = st.tuples(
    st.sampled_from(TYPES),
    st.sets(st.sampled_from(TAGS), max_size=3),
    st.sampled_from(NAMESPACES),
    st.integers(1, 10),
    st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]),
    st.booleans(),
    st.integers(0, 40),  # day written
    st.integers(0, 30),  # extra words, so that budgets bite at different places
)


class Store:
    """A store built from generated memories, updates, active and suggested edges (some
    removed again), tombstones and a lifecycle pass (which archives, and merges memories
    joined by strong suggested edges), and the URIs of all its memories."""

    def __init__(self, root: Path, memories: list[Any], updates: list[Any],
                 edges: list[Any], unlinked: list[int], dead: list[int], compact: bool) -> None:
        self.cx = cg.open(root, "agent", sync=False)
        self.uris: list[cg.MemoryURI] = []
        for i, (kind, tags, ns, priority, confidence, pinned, day, extra) in enumerate(memories):
            memory = kind(text=f"memory {i}" + " word" * extra, tags=sorted(tags),
                          priority=priority, confidence=confidence, pinned=pinned)
            self.uris.append(self.cx.write(memory, ns=ns, at=T0 + day * DAY))
        n = len(self.uris)
        for i, priority, day in updates:
            self.cx.update(self.uris[i % n].id.hex(), priority=priority,
                           at=T0 + (41 + day) * DAY)
        linked: list[tuple[int, int]] = []
        for i, j, status, strength in edges:
            i, j = i % n, j % n
            if i != j and (i, j) not in linked:
                linked.append((i, j))
                self.cx.add_edge(self.uris[i], self.uris[j], "relates_to", status=status,
                                 strength=strength, at=T0 + 50 * DAY)
        for k in sorted({u % len(linked) for u in unlinked} if linked else ()):
            i, j = linked[k]
            self.cx.remove_edge(self.uris[i], self.uris[j], "relates_to", at=T0 + 51 * DAY)
        for i in sorted({d % n for d in dead}):
            self.cx.tombstone(self.uris[i].id.hex(), at=T0 + 52 * DAY)
        if compact:
            self.cx.compact(now=T0 + 120 * DAY)

    def whole_scope(self) -> ScopeView:
        """A verified scope of every memory of the store, with all their edges."""
        blob = self.cx.scope([u.id.hex() for u in self.uris], limit=len(self.uris),
                             include_edges=True)
        return cg.verify_scope(blob, trusted_root=self.cx.overall_root())


def _outcome(call: Any) -> Any:
    """What a find call gave, in comparable form: its hits and counts, or the type, field
    and message of the typed error it raised (anything else propagates)."""
    try:
        result = call()
    except cg.CortexError as error:
        return ("refused", type(error).__name__, getattr(error, "field", None))
    hits = [(h.uri, h.record, h.text, h.tokens, h.score) for h in result]
    return ("found", hits, result.tokens, result.matched, result.seq)


@settings(max_examples=150)
@given(
    memories=st.lists(_memory, min_size=2, max_size=20),
    updates=st.lists(st.tuples(st.integers(0, 19), st.integers(1, 10), st.integers(0, 5)),
                     max_size=4),
    edges=st.lists(st.tuples(st.integers(0, 19), st.integers(0, 19),
                             st.sampled_from(["active", "suggested"]),
                             st.sampled_from([0.3, 0.9])), max_size=12),
    unlinked=st.lists(st.integers(0, 11), max_size=3),
    dead=st.lists(st.integers(0, 19), max_size=4),
    compact=st.booleans(),
    queries=st.lists(_queries, min_size=1, max_size=8),
)
def test_a_scope_of_the_whole_store_finds_what_the_store_finds(
    memories: list[Any], updates: list[Any], edges: list[Any], unlinked: list[int],
    dead: list[int], compact: bool, queries: list[Any],
) -> None:
    """For random stores (types, tags, namespaces, priorities, confidences, pins, write
    times, updates, edges added and removed, tombstones, archiving) and random queries
    (any predicate, too broad ones included; every order, form, limit and budget, both
    missing; the default and another token estimator; ``now`` from before the first write
    to long after the last), a scope of every memory answers each query exactly as
    ``Cortex.find`` does: the same hits in order with the same record, text, tokens and
    score, the same total tokens, match count and seq, or the same typed error."""
    root = Path(tempfile.mkdtemp())
    try:
        store = Store(root, memories, updates, edges, unlinked, dead, compact)
        with store.cx as cx:
            view = store.whole_scope()
            assert len(view) == len(store.uris)
            for where, order_by, (limit, budget), form, day, estimator in queries:
                kwargs = {"limit": limit, "order_by": order_by, "form": form,
                          "now": T0 + day * DAY, "estimator": estimator}
                kwargs["budget_tokens"] = _budget_tokens(cx, where, budget, kwargs)
                expected = _outcome(lambda: cx.find(where, **kwargs))  # noqa: B023
                actual = _outcome(lambda: view.find(where, **kwargs))  # noqa: B023
                assert actual == expected, (where, kwargs)
                event("refused" if expected[0] == "refused" else
                      "found some" if expected[1] else "found none")
    finally:
        shutil.rmtree(root)


@pytest.fixture
def small(tmp_path: Path) -> tuple[cg.Cortex, list[cg.MemoryURI], ScopeView]:
    """A store of four tagged memories (a fact pointed at by three events) and a scope of
    all of them; the store stays open for comparisons."""
    cx = cg.open(tmp_path / "store", "agent", sync=False)
    hub = cx.write(cg.Fact(text="the hub", tags=["t"], confidence=0.5), at=T0)
    rest = [cx.write(cg.Event(text=f"event {i}", tags=["t"], priority=i + 3), at=T0 + i * DAY)
            for i in range(3)]
    for uri in rest:
        cx.add_edge(uri, hub, "relates_to", at=T0 + 4 * DAY)
    uris = [hub, *rest]
    view = cg.verify_scope(cx.scope([u.id.hex() for u in uris]), cx.overall_root())
    yield cx, uris, view
    cx.close()


@pytest.mark.parametrize(
    ("where", "kwargs", "error", "field"),
    [
        (Q.tag("t"), {}, cg.UnboundedQueryError, None),
        (Q.tag("t"), {"order_by": "recent"}, cg.UnboundedQueryError, None),
        (Q.ns("default"), {"limit": 5}, cg.TooBroadQueryError, None),
        (Q.min_priority(3), {"budget_tokens": 50}, cg.TooBroadQueryError, None),
        (Q.tag("t") | Q.pinned(), {"limit": 5}, cg.TooBroadQueryError, None),
        (~Q.tag("t"), {"limit": 5}, cg.TooBroadQueryError, None),
        (Q.tag("t"), {"limit": 0}, cg.ValidationError, "limit"),
        (Q.tag("t"), {"limit": True}, cg.ValidationError, "limit"),
        (Q.tag("t"), {"limit": 2.0}, cg.ValidationError, "limit"),
        (Q.tag("t"), {"budget_tokens": -1}, cg.ValidationError, "budget_tokens"),
        (Q.tag("t"), {"limit": 5, "budget_tokens": "9"}, cg.ValidationError, "budget_tokens"),
        (Q.tag("t"), {"limit": 5, "order_by": "size"}, cg.ValidationError, "order_by"),
        (Q.tag("t"), {"limit": 5, "form": "tiny"}, cg.ValidationError, "form"),
        (Q.tag("t"), {"limit": 5, "estimator": "words"}, cg.ValidationError, "estimator"),
        (Q.tag("t"), {"limit": 5, "estimator": lambda text: -1}, cg.ValidationError,
         "estimator"),
        (Q.tag("t"), {"limit": 5, "estimator": lambda text: 1.5}, cg.ValidationError,
         "estimator"),
        ("t", {"limit": 5}, cg.ValidationError, "where"),
        (None, {"limit": 5}, cg.ValidationError, "where"),
    ],
)
def test_scope_find_guards_refuse_what_store_find_refuses(
    small: tuple[cg.Cortex, list[cg.MemoryURI], ScopeView], where: Any,
    kwargs: dict[str, Any], error: type[cg.CortexError], field: str | None,
) -> None:
    """Each guard of ``ScopeView.find`` is there: an unbounded query, a too broad
    alternative (no type or tag), a bound that is not a positive integer, an unknown order
    or form, an estimator that is not a callable returning a non-negative integer, and a
    ``where`` that is not a predicate each raise their typed error naming the field, the
    same error ``Cortex.find`` raises for the same call."""
    cx, _, view = small
    for find in (view.find, cx.find):
        with pytest.raises(error) as info:
            find(where, **kwargs)
        assert type(info.value) is error
        assert getattr(info.value, "field", None) == field


def test_the_too_broad_message_names_the_alternative(
    small: tuple[cg.Cortex, list[cg.MemoryURI], ScopeView],
) -> None:
    """The refusal of a too broad query says which alternative scans everything and how
    to narrow it, before any record is looked at."""
    _, _, view = small
    with pytest.raises(cg.TooBroadQueryError, match=r"Q\.pinned\(\) names neither") as info:
        view.find(Q.tag("t") | Q.pinned(), limit=5)
    assert "add Q.type(...) or Q.tag(...)" in str(info.value)


def test_a_scope_ranks_without_access_history_or_learned_weights(
    small: tuple[cg.Cortex, list[cg.MemoryURI], ScopeView],
) -> None:
    """By design, a bundle carries no access history and no learned weights: after reads
    with late binding and an attested outcome change the store's scores, the view still
    scores as the store did before them (frequency 0, default weights)."""
    cx, uris, view = small
    now = T0 + 10 * DAY
    before = cx.find(Q.tag("t"), limit=10, now=now)
    assert [h.score for h in view.find(Q.tag("t"), limit=10, now=now)] == [
        h.score for h in before]
    cx.find(Q.tag("t"), limit=1, late_binding=True, now=now)
    cx.attest([uris[1]], outcome="success", at=now)
    after = cx.find(Q.tag("t"), limit=10, now=now)
    assert cx.weights() != DEFAULT_WEIGHTS
    assert [h.score for h in after] != [h.score for h in before]
    seen = view.find(Q.tag("t"), limit=10, now=now)
    assert [(h.uri, h.score) for h in seen] == [(h.uri, h.score) for h in before]


def test_a_partial_scope_counts_only_its_own_edges(
    small: tuple[cg.Cortex, list[cg.MemoryURI], ScopeView],
) -> None:
    """By design, centrality inside a scope comes from the edges among its memories: the
    hub, pointed at by three memories left out of the scope, ranks in it as in a store
    where nothing points at it."""
    cx, (hub, *rest), _ = small
    now = T0 + 10 * DAY
    alone = cg.verify_scope(cx.scope([hub]), cx.overall_root())
    assert alone.edges == ()
    in_store = cx.find(Q.type(cg.Fact), limit=1, now=now)[0]
    assert in_store.uri.id == hub.id
    for other in rest:
        cx.remove_edge(other, hub, "relates_to", at=T0 + 5 * DAY)
    unlinked = cx.find(Q.type(cg.Fact), limit=1, now=now)[0]
    assert unlinked.score < in_store.score
    assert alone.find(Q.type(cg.Fact), limit=1, now=now)[0].score == unlinked.score


def test_a_scope_ranks_at_its_latest_write_by_default(
    small: tuple[cg.Cortex, list[cg.MemoryURI], ScopeView],
) -> None:
    """By design, a view has no clock: ``now`` defaults to the latest write time in the
    slice, so a view ranks the same wherever and whenever it is read; a ``now`` that is
    not integer milliseconds is refused naming ``now``. The plan says it was a scan."""
    _, _, view = small
    latest = max(r.at for r in view)
    assert latest == T0 + 2 * DAY
    default = view.find(Q.tag("t"), limit=10)
    assert default == view.find(Q.tag("t"), limit=10, now=latest)
    assert default != view.find(Q.tag("t"), limit=10, now=latest + 400 * DAY)
    assert default.plan == "scan of the scope"
    for bad in (-1, 1.5, "now", True):
        with pytest.raises(cg.ValidationError) as info:
            view.find(Q.tag("t"), limit=10, now=bad)
        assert info.value.field == "now"
