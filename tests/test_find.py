"""``find`` against a brute-force filter over every record, plus its guards, budget and
late binding. The reference ranks with ``core.salience`` from signals the test tracks
itself (in-degrees from the edges it added, access counts from the accesses it made)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.forms import estimate_tokens, render
from cortexgraph.core.predicates import MemoryAttrs, Predicate, Q, matches
from cortexgraph.core.query import check_not_too_broad, to_dnf
from cortexgraph.core.salience import cold_score, salience_factors
from cortexgraph.errors import TooBroadQueryError

T0 = 1_700_000_000_000
DAY = 86_400_000
TYPES = [cg.Fact, cg.Event, cg.Preference, cg.Goal]
TAGS = ["a", "b", "c", "d"]

_atoms = st.one_of(
    st.sampled_from(TYPES).map(Q.type),
    st.sampled_from(TAGS).map(Q.tag),
    st.sampled_from(["one", "two"]).map(Q.ns),
    st.integers(0, 40).map(lambda d: Q.since(T0 + d * DAY)),
    st.integers(0, 40).map(lambda d: Q.until(T0 + d * DAY)),
    st.sampled_from([0.0, 0.3, 0.5, 0.9]).map(Q.min_confidence),
    st.integers(1, 10).map(Q.min_priority),
    st.sampled_from(["active", "tombstoned"]).map(Q.status),
    st.just(Q.pinned()),
)
_predicates = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: p[0] & p[1]),
        st.tuples(inner, inner).map(lambda p: p[0] | p[1]),
        inner.map(lambda p: ~p),
    ),
    max_leaves=5,
)
# a predicate that is never too broad: a type or tag ANDed onto a random one
_bounded_predicates = st.tuples(
    st.one_of(st.sampled_from(TYPES).map(Q.type), st.sampled_from(TAGS).map(Q.tag)),
    _predicates,
).map(lambda p: p[0] & p[1])

_memory = st.tuples(
    st.sampled_from(TYPES),
    st.sets(st.sampled_from(TAGS), max_size=3),
    st.sampled_from(["one", "two"]),
    st.integers(1, 10),
    st.sampled_from([0.0, 0.3, 0.5, 0.7, 0.9, 1.0]),
    st.booleans(),
    st.integers(0, 40),
)


class Store:
    """A store built from generated memories, edges, tombstones and accesses, and what the
    test itself knows about it (in-degrees and access counts)."""

    def __init__(self, root: Path, memories: list[Any], edges: list[Any], dead: list[int],
                 reads: list[int]) -> None:
        self.cx = cg.open(root, "agent", sync=False)
        self.uris = []
        for i, (kind, tags, ns, priority, confidence, pinned, day) in enumerate(memories):
            memory = kind(text=f"memory {i}", tags=sorted(tags), priority=priority,
                          confidence=confidence, pinned=pinned)
            self.uris.append(self.cx.write(memory, ns=ns, at=T0 + day * DAY))
        n = len(self.uris)
        self.in_degree = [0] * n
        self.access = [0] * n
        linked = set()
        for i, j in edges:
            i, j = i % n, j % n
            if i != j and (i, j) not in linked:
                linked.add((i, j))
                self.cx.add_edge(self.uris[i], self.uris[j], "relates_to", at=T0 + 50 * DAY)
                self.in_degree[j] += 1
        for i in reads:
            uri = self.uris[i % n]
            with self.cx.batch() as batch:
                batch.record_access([uri], at=T0 + 51 * DAY)
            self.access[i % n] += 1
        for i in sorted({d % n for d in dead}):
            self.cx.tombstone(self.uris[i], at=T0 + 52 * DAY)

    def reference(self, where: Predicate, order_by: str, now: int) -> list[cg.MemoryURI]:
        """Every matching memory, in the documented order, from a scan of every record."""
        weights = self.cx.weights()
        top_in, top_access = max(self.in_degree), max(self.access)
        keyed = []
        for i, uri in enumerate(self.uris):
            record = self.cx.resolve(uri.id.hex())
            m = record.memory
            attrs = MemoryAttrs(type_name=m.type_name, ns=uri.ns, tags=m.tags, at=record.at,
                                confidence=m.confidence, priority=m.priority,
                                status=record.status, pinned=m.pinned)
            if not matches(where, attrs):
                continue
            factors = salience_factors(
                type_name=m.type_name, confidence=m.confidence, priority=m.priority,
                pinned=m.pinned, in_degree=self.in_degree[i], max_in_degree=top_in,
                access_count=self.access[i], max_access=top_access, age_ms=now - record.at)
            key = {
                "salience": cold_score(factors, weights),
                "recent": record.at,
                "priority": m.priority,
                "confidence": m.confidence,
            }[order_by]
            keyed.append((-key, uri.id, record.uri))
        return [uri for _, _, uri in sorted(keyed)]


@settings(max_examples=40)
@given(
    memories=st.lists(_memory, min_size=1, max_size=25),
    edges=st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24)), max_size=12),
    dead=st.lists(st.integers(0, 24), max_size=4),
    reads=st.lists(st.integers(0, 24), max_size=8),
    queries=st.lists(
        st.tuples(_bounded_predicates, st.sampled_from(["salience", "recent", "priority",
                                                        "confidence"]), st.integers(1, 30),
                  st.integers(0, 120)),
        min_size=1, max_size=4),
)
def test_find_equals_a_brute_force_filter_in_the_documented_order(
    memories: list[Any], edges: list[Any], dead: list[int], reads: list[int],
    queries: list[Any],
) -> None:
    """For random stores and predicates, find returns exactly the first ``limit`` of
    what a scan of every record returns, ordered by the key then id, for every order."""
    root = Path(tempfile.mkdtemp())
    try:
        store = Store(root, memories, edges, dead, reads)
        with store.cx as cx:
            for where, order_by, limit, day in queries:
                now = T0 + day * DAY
                expected = store.reference(where, order_by, now)
                result = cx.find(where, limit=limit, order_by=order_by, now=now)
                assert result.uris == expected[:limit]
                assert result.matched == len(expected)
    finally:
        shutil.rmtree(root)


@settings(max_examples=30)
@given(memories=st.lists(_memory, min_size=1, max_size=25), budget=st.integers(1, 400),
       form=st.sampled_from(["short", "medium", "full"]))
def test_a_budget_is_never_exceeded_and_stops_at_the_first_misfit(
    memories: list[Any], budget: int, form: str
) -> None:
    """With budget_tokens, the hits are a prefix of the unbounded order whose rendered
    tokens fit the budget, and the next hit (if any) would not have fit."""
    root = Path(tempfile.mkdtemp())
    try:
        store = Store(root, memories, [], [], [])
        with store.cx as cx:
            where = Q.type(cg.Fact) | Q.type(cg.Event) | Q.type(cg.Goal) | Q.type(cg.Preference)
            now = T0 + 60 * DAY
            everything = cx.find(where, limit=1000, form=form, now=now)
            result = cx.find(where, budget_tokens=budget, form=form, now=now)
            assert result.tokens <= budget
            assert result.tokens == sum(hit.tokens for hit in result)
            assert result.uris == everything.uris[: len(result)]
            for hit in result:
                assert hit.text == render(hit.record, form)
                assert hit.tokens == estimate_tokens(hit.text)
            if len(result) < len(everything):
                assert result.tokens + everything[len(result)].tokens > budget
    finally:
        shutil.rmtree(root)


@pytest.mark.parametrize(
    ("where", "kwargs", "error"),
    [
        (Q.type(cg.Fact), {}, cg.UnboundedQueryError),
        (Q.ns("default"), {"limit": 5}, cg.TooBroadQueryError),
        (Q.min_priority(3), {"limit": 5}, cg.TooBroadQueryError),
        (Q.type(cg.Fact) | Q.pinned(), {"limit": 5}, cg.TooBroadQueryError),
        (~Q.tag("x"), {"limit": 5}, cg.TooBroadQueryError),
        (Q.type(cg.Fact), {"limit": 0}, cg.ValidationError),
        (Q.type(cg.Fact), {"budget_tokens": -1}, cg.ValidationError),
        (Q.type(cg.Fact), {"limit": 5, "order_by": "size"}, cg.ValidationError),
        (Q.type(cg.Fact), {"limit": 5, "form": "tiny"}, cg.ValidationError),
        ("fact", {"limit": 5}, cg.ValidationError),
    ],
)
def test_find_guards(cx: cg.Cortex, where: Any, kwargs: dict[str, Any],
                     error: type[Exception]) -> None:
    """Unbounded, too broad and malformed queries raise their typed error and journal
    nothing."""
    cx.write(cg.Fact(text="x", tags=["x"]))
    seq = cx.seq
    with pytest.raises(error):
        cx.find(where, **kwargs)
    assert cx.seq == seq


def test_plain_find_journals_nothing_and_late_binding_journals_access(
    cx: cg.Cortex, clock: cg.ManualClock
) -> None:
    """The default read journals nothing; late_binding=True journals one access entry per
    namespace for exactly the memories returned, which raises their frequency factor."""
    a = cx.write(cg.Fact(text="a", tags=["t"]), ns="one")
    b = cx.write(cg.Fact(text="b", tags=["t"]), ns="two")
    c = cx.write(cg.Fact(text="c", tags=["t"], priority=1), ns="two")
    seq = cx.seq
    plain = cx.find(Q.tag("t"), limit=2)
    assert cx.seq == seq
    assert {u.id for u in plain.uris} == {a.id, b.id}
    late = cx.find(Q.tag("t"), limit=2, late_binding=True)
    entries = list(cx.journal(since=seq))
    assert [(e.op, e.ns) for e in entries] == [("access", "one"), ("access", "two")]
    assert sorted(i for e in entries for i in e.fields["ids"]) == sorted(u.id for u in late.uris)
    again = {hit.uri.id: hit.score for hit in cx.find(Q.tag("t"), limit=3)}
    before = {hit.uri.id: hit.score for hit in plain}
    assert again[a.id] > before[a.id]
    assert c.id in again


def test_find_sees_later_writes_and_tombstones(cx: cg.Cortex) -> None:
    """The column index catches up with every commit made after it was built."""
    a = cx.write(cg.Fact(text="a", tags=["t"]))
    assert cx.find(Q.tag("t"), limit=5).uris == [a]
    b = cx.write(cg.Fact(text="b", tags=["t"], priority=9))
    assert cx.find(Q.tag("t"), limit=5, order_by="priority").uris == [b, a]
    cx.tombstone(b)
    assert cx.find(Q.tag("t"), limit=5).uris == [a]
    assert [u.id for u in cx.find(Q.tag("t") & Q.status("tombstoned"), limit=5).uris] == [b.id]
    a2 = cx.update(a, tags=["u"])
    assert cx.find(Q.tag("t"), limit=5).uris == []
    assert cx.find(Q.tag("u"), limit=5).uris == [a2]
    cx.rebuild()
    assert cx.find(Q.tag("u"), limit=5).uris == [a2]


def test_find_inside_a_batch_is_refused(cx: cg.Cortex) -> None:
    """find reads committed state, so inside an open batch it raises instead of
    silently missing the batch's own writes."""
    with cx.batch() as batch:
        batch.write(cg.Fact(text="a", tags=["t"]))
        with pytest.raises(cg.CortexError, match="outside the batch"):
            cx.find(Q.tag("t"), limit=5)


def test_too_broad_predicates_are_refused_before_any_read() -> None:
    """The predicates the strategy above builds are never too broad (sanity check of the
    test itself): a type or tag is ANDed onto every alternative."""
    where = Q.tag("a") & (Q.ns("one") | ~Q.pinned())
    check_not_too_broad(to_dnf(where))
    with pytest.raises(TooBroadQueryError):
        check_not_too_broad(to_dnf(Q.ns("one") | Q.tag("a")))


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One store of 400 memories with edges and accesses, shared by the queries below (big
    enough that find ranks pools of candidates rather than every match)."""
    import random

    rng = random.Random(7)
    memories = [
        (rng.choice(TYPES), set(rng.sample(TAGS, rng.randint(0, 3))), rng.choice(["one", "two"]),
         rng.randint(1, 10), rng.choice([0.0, 0.3, 0.5, 0.7, 0.9, 1.0]), rng.random() < 0.1,
         rng.randint(0, 40))
        for _ in range(400)
    ]
    edges = [(rng.randrange(400), rng.randrange(400)) for _ in range(300)]
    reads = [rng.randrange(60) for _ in range(40)]
    dead = [rng.randrange(400) for _ in range(20)]
    store = Store(tmp_path_factory.mktemp("big"), memories, edges, dead, reads)
    yield store
    store.cx.close()


@settings(max_examples=60)
@given(
    where=_bounded_predicates,
    order_by=st.sampled_from(["salience", "recent", "priority", "confidence"]),
    limit=st.sampled_from([1, 5, 17, 70, 300]),
    day=st.integers(0, 400),
)
def test_find_on_a_larger_store_equals_brute_force(
    big_store: Store, where: Predicate, order_by: str, limit: int, day: int
) -> None:
    """On 400 memories (pools of candidates, many ties in priority, confidence and time),
    find still returns exactly the brute-force prefix."""
    now = T0 + day * DAY
    expected = big_store.reference(where, order_by, now)
    result = big_store.cx.find(where, limit=limit, order_by=order_by, now=now, form="short")
    assert result.uris == expected[:limit]


def test_find_hits_equal_hits_built_through_attrs(cx: cg.Cortex) -> None:
    """find builds its hits by setting slots directly; each equals the Hit attrs' own
    __init__ makes from the same fields."""
    import attrs

    from cortexgraph.find import Hit

    for i in range(5):
        cx.write(cg.Fact(text=f"fact {i}", tags=["a"], priority=i + 1), at=T0 + i)
    result = cx.find(Q.tag("a"), limit=5, now=T0 + DAY)
    assert len(result) == 5
    for hit in result:
        again = Hit(**attrs.asdict(hit, recurse=False))
        assert hit == again
        assert attrs.asdict(hit, recurse=False) == attrs.asdict(again, recurse=False)
