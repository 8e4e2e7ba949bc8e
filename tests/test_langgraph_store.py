"""CortexStore, the LangGraph ``BaseStore`` on cortexgraph: against ``InMemoryStore``
(a differential test over random op sequences), LangGraph's own store test cases ported
(list_namespaces, namespace validation), TTL on a manual clock, query search, and what a
``batch`` call commits."""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

import cortexgraph as cg
from cortexgraph.integrations.langgraph import CortexStore

T0 = 1_700_000_000_000
MINUTE = 60_000


@pytest.fixture
def clock() -> cg.ManualClock:
    return cg.ManualClock(T0)


@pytest.fixture
def store(tmp_path: Path, clock: cg.ManualClock) -> Iterator[CortexStore]:
    with CortexStore.open(tmp_path, clock=clock, sync=False) as opened:
        yield opened


def _at(ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


# -- the differential test against InMemoryStore --------------------------------------------

NAMESPACES = [("a",), ("a", "b"), ("a", "c"), ("b",), ("a", "b", "c")]
KEYS = ["k1", "k2", "k3"]
FILTERS: list[dict[str, Any] | None] = [
    None,
    {"s": "x"},
    {"n": 3},
    {"n": {"$gt": 2}},
    {"n": {"$lte": 1}},
    {"n": {"$ne": 2}},
    {"s": {"$eq": "y"}},
    {"m": {"z": 1}},
    {"n": {"$gte": 1, "$lt": 4}, "s": "x"},
]
PREFIXES = [(), ("a",), ("a", "b"), ("b",), ("c",)]
MATCHES = [(), ("a",), ("a", "*"), ("*", "b"), ("b",)]
SUFFIXES = [None, ("c",), ("*",), ("b",)]

values = st.builds(
    lambda n, s, m: {"n": n, "s": s, **({"m": {"z": m}} if m is not None else {})},
    st.integers(0, 5),
    st.sampled_from(["x", "y"]),
    st.none() | st.integers(0, 2),
)
puts = st.builds(
    lambda ns, key, value: PutOp(ns, key, value),
    st.sampled_from(NAMESPACES),
    st.sampled_from(KEYS),
    st.none() | values,
)
gets = st.builds(
    lambda ns, key: GetOp(ns, key), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)
)
searches = st.builds(
    lambda prefix, filter, limit, offset: SearchOp(prefix, filter, limit, offset),
    st.sampled_from(PREFIXES),
    st.sampled_from(FILTERS),
    st.integers(0, 6),
    st.integers(0, 4),
)
lists = st.builds(
    lambda prefix, suffix, depth, limit, offset: ListNamespacesOp(
        tuple(
            [MatchCondition("prefix", prefix)]
            + ([MatchCondition("suffix", suffix)] if suffix is not None else [])
        ),
        depth,
        limit,
        offset,
    ),
    st.sampled_from(MATCHES),
    st.sampled_from(SUFFIXES),
    st.none() | st.integers(1, 3),
    st.integers(0, 6),
    st.integers(0, 3),
)
one_op = st.one_of(puts, puts, gets, searches, lists)
steps = st.lists(st.lists(one_op, min_size=1, max_size=4), min_size=1, max_size=25)


class Oracle:
    """``InMemoryStore`` run with the same batch semantics, and the order CortexStore
    documents for searches without a query (most recently written first).

    InMemoryStore answers a batch's reads against the state before the batch and applies
    its puts at the end (the last put of a key wins), as CortexStore does. Two of its
    habits are not the contract and are factored out: it lists a namespace after its last
    item is deleted, or after a get of it (empty namespaces are dropped before each read
    here), and it orders search results by first insertion (all matches are fetched and
    sorted by the order of last change here, then paginated).
    """

    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.changed: dict[tuple[tuple[str, ...], str], int] = {}
        self.tick = 0

    def batch(self, ops: list[Op]) -> list[Any]:
        results = [self._read(op) if not isinstance(op, PutOp) else None for op in ops]
        last = {(op.namespace, op.key): op for op in ops if isinstance(op, PutOp)}
        for where, op in last.items():
            before = self.store.get(*where)
            if op.value is None:
                self.changed.pop(where, None)
            elif before is None or before.value != op.value:
                self.tick += 1
                self.changed[where] = self.tick
        self.store.batch(list(last.values()))
        return results

    def _read(self, op: Op) -> Any:
        for namespace in [n for n, items in self.store._data.items() if not items]:
            del self.store._data[namespace]
        if isinstance(op, SearchOp):
            every = self.store.batch([op._replace(limit=10**6, offset=0)])[0]
            every.sort(key=lambda item: -self.changed[(item.namespace, item.key)])
            return every[op.offset : op.offset + op.limit]
        return self.store.batch([op])[0]


def _shape(result: Any) -> Any:
    """A result without its timestamps and scores."""
    if result is None:
        return None
    if isinstance(result, list):
        return [_shape(r) for r in result]
    if isinstance(result, tuple):
        return result
    return (result.namespace, result.key, result.value)


@settings(max_examples=40)
@given(steps)
def test_agrees_with_in_memory_store(batches: list[list[Op]]) -> None:
    """Random sequences of batches of put (deletes included), get, search (filters with
    every operator, prefixes, pagination) and list_namespaces (prefix, suffix, wildcards,
    max_depth, pagination) give CortexStore and InMemoryStore the same results, op by op,
    timestamps and scores aside."""
    oracle = Oracle()
    with tempfile.TemporaryDirectory() as root:
        clock = cg.ManualClock(T0)
        with CortexStore.open(root, clock=clock, sync=False) as store:
            for ops in batches:
                clock.advance(1)
                assert _shape(store.batch(ops)) == _shape(oracle.batch(ops)), ops


def test_search_order_is_most_recently_written_first(store: CortexStore) -> None:
    """Without a query, search returns the most recently written items first (ties in
    time broken by write order), and an unchanged re-put does not move an item."""
    for key in ("k1", "k2", "k3"):
        store.put(("docs",), key, {"v": key})
    store.put(("docs",), "k1", {"v": "again"})
    store.put(("docs",), "k2", {"v": "k2"})  # unchanged
    assert [item.key for item in store.search(("docs",))] == ["k1", "k3", "k2"]
    assert [item.key for item in store.search(("docs",), limit=1, offset=1)] == ["k3"]


# -- LangGraph's list_namespaces cases, ported -----------------------------------------------


def _fill(store: CortexStore, namespaces: list[tuple[str, ...]]) -> None:
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})


def test_list_namespaces_basic(store: CortexStore) -> None:
    """Prefix, suffix, both, max_depth, limit, offset and wildcards select namespaces as
    LangGraph's own test of InMemoryStore expects."""
    _fill(store, [
        ("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"),
        ("a", "c", "f"), ("b", "a", "f"), ("users", "123"), ("users", "456", "settings"),
        ("admin", "users", "789"),
    ])
    ab = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "b")) == ab
    ending_f = [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(suffix=("f",)) == ending_f
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == ending_f[:2]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")
    ]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == ab[:2]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == ab[2:]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(suffix=("*", "f")) == [
        ("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")
    ]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]


def test_list_namespaces_with_wildcards(store: CortexStore) -> None:
    """A "*" label matches any one label, in a prefix and in a suffix."""
    _fill(store, [
        ("users", "123"), ("users", "456"), ("users", "789", "settings"),
        ("admin", "users", "789"), ("guests", "123"), ("guests", "456", "preferences"),
    ])
    assert store.list_namespaces(prefix=("users", "*")) == [
        ("users", "123"), ("users", "456"), ("users", "789", "settings")
    ]
    assert store.list_namespaces(suffix=("*", "preferences")) == [
        ("guests", "456", "preferences")
    ]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    store.put(("admin", "users", "settings", "789"), "foo", {"data": "some_val"})
    assert store.list_namespaces(prefix=("*", "users"), suffix=("settings", "*")) == [
        ("admin", "users", "settings", "789")
    ]


def test_list_namespaces_pagination(store: CortexStore) -> None:
    """limit and offset page through the sorted namespaces."""
    store.batch([
        PutOp(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": i}) for i in range(20)
    ])
    for offset in (0, 5, 15):
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=offset) == [
            ("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)
        ]


def test_list_namespaces_max_depth_and_no_conditions(store: CortexStore) -> None:
    """max_depth truncates and de-duplicates; without conditions every namespace holding
    an item is listed, and an empty store lists nothing."""
    assert store.list_namespaces() == []
    _fill(store, [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"),
                  ("h", "i", "j", "k")])
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "g"), ("h", "i")]
    assert len(store.list_namespaces()) == 5


# -- namespace validation (LangGraph's cases) -----------------------------------------------


@pytest.mark.parametrize("namespace", [("foo.bar",), ("foo", ""), (123,)])
@pytest.mark.parametrize("method", ["get", "delete", "search", "prefix", "suffix"])
def test_invalid_labels_are_refused(store: CortexStore, namespace: Any, method: str) -> None:
    """A label with a period, an empty label or a non-string label is refused with
    LangGraph's InvalidNamespaceError by every method, and nothing is journaled."""
    seq = store.cx.seq
    with pytest.raises(InvalidNamespaceError):
        if method in ("prefix", "suffix"):
            store.list_namespaces(**{method: namespace})
        elif method == "search":
            store.search(namespace)
        else:
            getattr(store, method)(namespace, "key")
    assert store.cx.seq == seq


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ((), "Namespace cannot be empty."),
        (("the", "thing.about"), "cannot contain periods"),
        (("some", "fun", ""), "cannot be empty strings"),
        (("langgraph", "foo"), 'cannot be "langgraph"'),
    ],
)
def test_put_namespace_errors(store: CortexStore, namespace: Any, message: str) -> None:
    """put refuses an empty namespace, bad labels and the reserved root "langgraph", through
    put, aput and a raw PutOp in batch alike, with LangGraph's messages."""
    for attempt in (
        lambda: store.put(namespace, "foo", {"foo": "bar"}),
        lambda: asyncio.run(store.aput(namespace, "foo", {"foo": "bar"})),
        lambda: store.batch([PutOp(namespace, "foo", {"foo": "bar"})]),
    ):
        with pytest.raises(InvalidNamespaceError, match=message.replace(".", r"\.")):
            attempt()
    assert store.cx.seq == 0


def test_langgraph_label_allowed_below_the_root(store: CortexStore) -> None:
    """"langgraph" is reserved only as the first label: below it, items round-trip."""
    doc = {"foo": "bar"}
    namespace = ("foo", "langgraph", "foo")
    store.put(namespace, "bar", doc)
    assert store.get(namespace, "bar").value == doc  # type: ignore[union-attr]
    assert store.search(namespace)[0].value == doc
    store.delete(namespace, "bar")
    assert store.get(namespace, "bar") is None
    assert asyncio.run(store.aget(namespace, "bar")) is None


# -- items, history, times ------------------------------------------------------------------


def test_items_carry_journal_times_and_keep_history(
    store: CortexStore, clock: cg.ManualClock
) -> None:
    """created_at is the first write's time and updated_at the current version's, as
    aware UTC datetimes; each change is a new version of one memory, a delete a tombstone,
    and a put after a delete starts a new memory."""
    store.put(("users", "1"), "prefs", {"theme": "dark"})
    clock.advance(5_000)
    store.put(("users", "1"), "prefs", {"theme": "light"})
    item = store.get(("users", "1"), "prefs")
    assert item is not None
    assert (item.created_at, item.updated_at) == (_at(T0), _at(T0 + 5_000))
    assert item.created_at.tzinfo is UTC
    (hit,) = store.cx.find(cg.Q.type(cg.ArtifactRef), limit=10).hits
    assert [r.memory.content for r in store.cx.history(hit.uri)] == [
        '{"key":"prefs","namespace":["users","1"],"ttl":null,"value":{"theme":"dark"}}',
        '{"key":"prefs","namespace":["users","1"],"ttl":null,"value":{"theme":"light"}}',
    ]
    store.delete(("users", "1"), "prefs")
    assert store.cx.resolve(hit.uri).status == "tombstoned"
    clock.advance(1_000)
    store.put(("users", "1"), "prefs", {"theme": "blue"})
    again = store.get(("users", "1"), "prefs")
    assert again is not None and again.created_at == _at(T0 + 6_000)
    assert store.cx.stats().memories == 2


def test_batch_is_all_or_nothing(store: CortexStore) -> None:
    """A batch with one bad op writes nothing, even the puts before it; a good batch's
    reads see the state before it, its puts commit in one journal batch, last put wins."""
    with pytest.raises(cg.ValidationError) as bad:
        store.batch([
            PutOp(("a",), "k", {"n": 1}),
            SearchOp(("a",), {"n": {"$near": 1}}),
        ])
    assert bad.value.field == "filter" and "$near" in str(bad.value)
    with pytest.raises(cg.ValidationError) as bad:
        store.batch([PutOp(("a",), "k", {"n": 1}), PutOp(("a",), "j", {"when": object()})])
    assert bad.value.field == "value"
    assert store.cx.seq == 0
    results = store.batch([
        PutOp(("a",), "k", {"n": 1}),
        GetOp(("a",), "k"),
        PutOp(("a",), "k", {"n": 2}),
        PutOp(("a",), "j", {"n": 3}),
    ])
    assert results == [None, None, None, None]
    assert store.get(("a",), "k").value == {"n": 2}  # type: ignore[union-attr]
    assert [e.op for e in store.cx.journal()] == ["write", "write"]


@pytest.mark.parametrize(
    ("op", "field"),
    [
        (SearchOp(("a",), limit=-1), "limit"),
        (SearchOp(("a",), offset=-2), "offset"),
        (SearchOp(("a",), query=3), "query"),  # type: ignore[arg-type]
        (ListNamespacesOp(max_depth=0), "max_depth"),
        (PutOp(("a",), "k", {"n": 1}, ttl=-5), "ttl"),
        (PutOp(("a",), "k", {"n": 1}, ttl=3e303), "ttl"),
        (PutOp(("a",), "k", {"n": float("nan")}), "value"),
        (PutOp(("a",), 7, {"n": 1}), "key"),  # type: ignore[arg-type]
        (PutOp(("a",), "k", ["not", "a", "mapping"]), "value"),  # type: ignore[arg-type]
        (PutOp(("a",) * 64, "k", {"n": 1}), "namespace"),
        ("get", "ops"),
    ],
)
def test_bad_ops_are_typed_errors(store: CortexStore, op: Any, field: str) -> None:
    """Each bad op is a ValidationError naming its field, and the store is unchanged."""
    with pytest.raises(cg.ValidationError) as caught:
        store.batch([PutOp(("a",), "x", {"n": 0}), op])
    assert caught.value.field == field
    assert store.cx.seq == 0


# -- query search -----------------------------------------------------------------------------


def test_query_uses_keyword_recall_without_an_index(store: CortexStore) -> None:
    """Without an index config a query is answered by keyword recall over the value:
    matching items only, scored, best first, within the namespace prefix and filter."""
    store.put(("docs",), "py", {"text": "a python tutorial", "level": 1})
    store.put(("docs",), "ts", {"text": "a typescript guide", "level": 2})
    store.put(("other",), "py2", {"text": "python again", "level": 1})
    hits = store.search(("docs",), query="python")
    assert [(h.key, h.score is not None and h.score > 0) for h in hits] == [("py", True)]
    assert store.search(("docs",), query="python", filter={"level": 2}) == []
    assert {h.key for h in store.search((), query="python")} == {"py", "py2"}


def _letters(texts: list[str]) -> list[list[float]]:
    """A deterministic embedding: letter counts."""
    return [[float(t.lower().count(c)) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts]


def test_query_uses_hybrid_recall_with_an_index(tmp_path: Path, clock: cg.ManualClock) -> None:
    """With an index config (dims, embed, fields) queries use hybrid recall with the
    config's embed function, and only the configured fields are indexed: the memory text
    is the "text" field, or the key for a put with index=False."""
    index = {"dims": 26, "embed": _letters, "fields": ["text"]}
    with CortexStore.open(tmp_path, index=index, clock=clock, sync=False) as store:  # type: ignore[arg-type]
        assert store.mode == "hybrid"
        assert store.cx.embedder.name == "langgraph:_letters:26"
        store.put(("docs",), "py", {"text": "python tutorial", "tag": "zebra"})
        store.put(("docs",), "ts", {"text": "typescript guide", "tag": "python"})
        store.put(("docs",), "hidden", {"text": "python python"}, index=False)
        hits = store.search(("docs",), query="python tutorial")
        assert hits[0].key == "py" and all(isinstance(h.score, float) for h in hits)
        texts = {
            h.record.memory.text for h in store.cx.find(cg.Q.type(cg.ArtifactRef), limit=9).hits
        }
        assert texts == {"python tutorial", "typescript guide", "hidden"}


# -- TTL ----------------------------------------------------------------------------------------


def test_ttl_expires_and_refreshes_on_read(store: CortexStore, clock: cg.ManualClock) -> None:
    """An item put with ttl (minutes) disappears ttl after its last write or refreshing
    read, by the store's clock; a read with refresh_ttl=False does not extend it."""
    assert store.supports_ttl
    store.put(("t",), "k", {"a": 1}, ttl=1)
    clock.advance(50_000)
    assert store.get(("t",), "k") is not None  # refreshes: now expires at 110 s
    clock.advance(50_000)
    assert store.search(("t",), refresh_ttl=False)[0].key == "k"  # no refresh
    clock.advance(10_000)
    assert store.get(("t",), "k") is None
    assert store.search(("t",)) == [] and store.list_namespaces() == []
    assert [e.op for e in store.cx.journal()] == ["write", "access"]


def test_ttl_config_default_and_no_refresh(tmp_path: Path, clock: cg.ManualClock) -> None:
    """ttl_config's default_ttl applies to puts without ttl, refresh_on_read=False makes
    reads leave the timer alone, a put restarts it, and ttl=None keeps an item forever."""
    config = {"default_ttl": 2, "refresh_on_read": False}
    with CortexStore.open(tmp_path, ttl=config, clock=clock, sync=False) as store:  # type: ignore[arg-type]
        store.put(("t",), "k", {"a": 1})
        store.put(("t",), "forever", {"a": 1}, ttl=None)
        clock.advance(MINUTE)
        assert store.get(("t",), "k") is not None
        store.put(("t",), "k", {"a": 1})  # unchanged value, timer restarted
        clock.advance(90_000)
        assert store.get(("t",), "k") is not None
        clock.advance(MINUTE)
        assert store.get(("t",), "k") is None
        assert store.get(("t",), "forever") is not None


def test_sweep_and_put_after_expiry(store: CortexStore, clock: cg.ManualClock) -> None:
    """sweep_ttl tombstones expired items (journaled, reason "expired"); a put over an
    expired, unswept item starts a new item with a new created_at."""
    store.put(("t",), "a", {"n": 1}, ttl=1)
    store.put(("t",), "b", {"n": 2}, ttl=1)
    store.put(("t",), "c", {"n": 3})
    clock.advance(2 * MINUTE)
    store.put(("t",), "a", {"n": 4})
    fresh = store.get(("t",), "a")
    assert fresh is not None and fresh.created_at == _at(T0 + 2 * MINUTE)
    assert store.sweep_ttl() == 1  # b; a was replaced, c has no ttl
    assert store.sweep_ttl() == 0
    tombstones = [e for e in store.cx.journal() if e.op == "tombstone"]
    assert [e.fields["reason"] for e in tombstones] == ["expired", "expired"]
    assert [i.key for i in store.search(("t",))] == ["a", "c"]


def test_sweeper_thread_sweeps_until_stopped(store: CortexStore) -> None:
    """start_ttl_sweeper runs sweep_ttl in a thread at the interval until
    stop_ttl_sweeper; starting twice returns the same future; a bad interval is refused."""
    swept = threading.Event()
    store.sweep_ttl = swept.set  # type: ignore[assignment,method-assign]
    future = store.start_ttl_sweeper(sweep_interval_minutes=0.0001)
    assert store.start_ttl_sweeper() is future
    assert swept.wait(timeout=10)
    assert store.stop_ttl_sweeper(timeout=10)
    assert future.done() and future.exception() is None
    with pytest.raises(cg.ValidationError) as bad:
        store.start_ttl_sweeper(sweep_interval_minutes=0)
    assert bad.value.field == "ttl"


def test_other_memories_in_the_namespace_are_ignored(store: CortexStore) -> None:
    """Memories written by other code into the store's namespace are not items: search,
    list_namespaces and sweep_ttl skip them."""
    store.cx.write(cg.ArtifactRef(text="notes", content="not json"), ns="langgraph")
    store.cx.write(cg.Fact(text="a python fact"), ns="langgraph")
    store.put(("a",), "k", {"text": "python"})
    assert [i.key for i in store.search(())] == ["k"]
    assert [i.key for i in store.search((), query="python")] == ["k"]
    assert store.list_namespaces() == [("a",)]
    assert store.sweep_ttl() == 0


def test_threads_putting_one_new_key_make_one_item(store: CortexStore) -> None:
    """Graph nodes run in parallel threads: eight threads putting the same new key at once
    leave one live memory for it (a put's look-up and write are not interleaved)."""
    start = threading.Barrier(8)

    def put(i: int) -> None:
        start.wait()
        store.put(("shared",), "k", {"by": i})

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    live = store.cx.find(cg.Q.type(cg.ArtifactRef), limit=20).hits
    assert len(live) == 1 and len(store.search(("shared",))) == 1


def test_a_duplicate_from_another_process_is_shadowed_then_retired(store: CortexStore) -> None:
    """Two processes that put one new key at the same moment each write a memory for it:
    the newest is the item (get, search and listing show it once), and the next put of
    the key tombstones the older one (reason "duplicate")."""
    store.put(("a",), "k", {"n": 1})
    (first,) = store.cx.find(cg.Q.type(cg.ArtifactRef), limit=5).hits
    old = first.record.memory
    content = old.content.replace('"n":1', '"n":2')  # type: ignore[union-attr]
    store.cx.write(cg.ArtifactRef(text=old.text, content=content, media_type=old.media_type,  # type: ignore[attr-defined]
                                  tags=old.tags), ns="langgraph")
    assert store.get(("a",), "k").value == {"n": 2}  # type: ignore[union-attr]
    assert [i.value for i in store.search(("a",))] == [{"n": 2}]
    store.put(("a",), "k", {"n": 3})
    tombstones = [e for e in store.cx.journal() if e.op == "tombstone"]
    assert [(e.fields["id"], e.fields["reason"]) for e in tombstones] == [
        (first.uri.id, "duplicate")
    ]
    assert [i.value for i in store.search(("a",))] == [{"n": 3}]


def test_abatch_matches_batch(store: CortexStore) -> None:
    """abatch runs the same ops with the same results (through aput, aget, asearch)."""
    asyncio.run(store.aput(("a",), "k", {"n": 1}))
    assert asyncio.run(store.aget(("a",), "k")).value == {"n": 1}  # type: ignore[union-attr]
    assert [i.key for i in asyncio.run(store.asearch(("a",)))] == ["k"]
    assert asyncio.run(store.alist_namespaces()) == [("a",)]


def test_store_survives_reopen(tmp_path: Path, clock: cg.ManualClock) -> None:
    """Items written before close are there after reopening, with their times."""
    with CortexStore.open(tmp_path, clock=clock, sync=False) as store:
        store.put(("users", "1"), "prefs", {"theme": "dark"})
    clock.advance(1_000)
    with CortexStore.open(tmp_path, clock=clock, sync=False) as store:
        item = store.get(("users", "1"), "prefs")
        assert item is not None and item.value == {"theme": "dark"}
        assert item.updated_at == _at(T0)
