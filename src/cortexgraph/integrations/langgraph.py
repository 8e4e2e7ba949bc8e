"""A LangGraph store on cortexgraph: :class:`CortexStore`, a ``langgraph.store.base.BaseStore``.

Install the ``langgraph`` extra (``pip install 'cortexgraph[langgraph]'``). A graph
compiled with ``store=CortexStore.open(root)`` keeps its long-term memory in a cortexgraph
store: journaled, verifiable, surviving restarts, and readable with every cortexgraph tool.

How items map onto memories (``docs/integrations.md`` tells users the same):

- one item, ``(namespace, key)``, is one memory: an ``ArtifactRef`` in the store's
  cortexgraph namespace (``"langgraph"`` by default) whose ``content`` holds the item as
  canonical JSON ``{"key", "namespace", "ttl", "value"}`` (media type
  ``application/json``) and whose ``text`` is what search indexes: the texts at the index
  config's ``fields`` (the whole value as JSON without a config), or the key when the put
  asked for no indexing (``index=False``) or the value has no text there;
- its tags locate it through the store's posting lists, never by a scan: ``lgk-<hash>``
  of ``(namespace, key)`` and ``lgn-<hash>`` of each prefix of the namespace (hashes are
  128-bit BLAKE2b, and every hit is checked against the stored namespace and key);
- a put of a new key writes the memory, a put of an existing key writes a new version
  (the history stays resolvable), ``value=None`` tombstones it; a later put of the same
  key starts a new memory;
- ``created_at`` is when the memory's first version was journaled, ``updated_at`` when its
  current version was (timezone-aware UTC datetimes);
- TTL: an item put with ``ttl`` (minutes) expires ``ttl`` after its last write or its last
  refreshing read, the latter journaled as a late-binding ``access``; times come from the
  store's clock. Expired items are invisible to get, search and list_namespaces at once;
  :meth:`CortexStore.sweep_ttl` tombstones them (reason ``"expired"``).

One ``batch`` call validates every op first, answers the reads against the state before
the call, as ``InMemoryStore`` does, and then commits all its writes (the last put of
each key wins) and TTL refreshes in one cortexgraph batch: all or nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from langgraph.store.base import _validate_namespace as validate_put_namespace

import cortexgraph as cg
from cortexgraph.errors import CortexError, ValidationError

if TYPE_CHECKING:
    import os

    from numpy.typing import NDArray

    from cortexgraph import Record
    from cortexgraph.core.predicates import Predicate

__all__ = ["CortexStore", "IndexEmbedder"]

MEDIA_TYPE = "application/json"
MAX_DEPTH = 63  # one tag per namespace prefix, plus the key's, within a memory's 64 tags
_SCAN = 1_000_000  # find needs a bound; far above any store's item count
_MAX_RECALL = 1000  # recall's largest k
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_MINUTE_MS = 60_000
_MAX_TTL_MINUTES = 100 * 366 * 24 * 60  # a century; a longer-lived item needs no TTL


class IndexEmbedder:
    """A cortexgraph ``Embedder`` made from a LangGraph ``IndexConfig``'s ``embed``
    (LangChain ``Embeddings``, a function of a list of texts, or a provider string).

    Vectors are returned as float32 rows scaled to unit length (a zero row stays zero).
    The name (recorded by the store when it is created) is ``langgraph:<embed>:<dims>``,
    ``<embed>`` being the provider string or the class or function name.
    """

    def __init__(self, index: IndexConfig) -> None:
        dims = index.get("dims")
        if type(dims) is not int or dims < 1:
            raise ValidationError("index['dims'] must be a positive integer", field="index")
        embed = index.get("embed")
        if embed is None:
            raise ValidationError("index['embed'] is required", field="index")
        label = embed if isinstance(embed, str) else getattr(
            embed, "__qualname__", type(embed).__name__
        )
        self._embeddings = ensure_embeddings(embed)
        self._name = f"langgraph:{label}:{dims}"
        self._dim = dims

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise ValidationError("must be a sequence of str", field="texts")
        rows = np.asarray(self._embeddings.embed_documents(list(texts)), dtype=np.float32)
        if rows.shape != (len(texts), self._dim) or not np.isfinite(rows).all():
            raise ValidationError(
                f"the embed function returned shape {rows.shape}, not ({len(texts)},"
                f" {self._dim}) finite numbers",
                field="index",
            )
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        unit: NDArray[np.float32] = np.divide(
            rows, norms, out=np.zeros_like(rows), where=norms > 0
        )
        return unit


class CortexStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are cortexgraph memories (module docstring).

    Build it on an open :class:`cortexgraph.Cortex` (which the caller keeps and closes)
    or with :meth:`open`, which opens one and closes it in :meth:`close`.

    Args:
        cx: the open store to keep items in.
        index: a LangGraph ``IndexConfig`` (``dims``, ``embed``, ``fields``): which fields
            of a value are indexed for ``query`` searches; with one, queries use hybrid
            recall (keyword and vector), without one keyword recall (BM25) over the whole
            value as JSON.
        ttl: a LangGraph ``TTLConfig``: ``default_ttl`` (minutes) for puts that give no
            ``ttl``, ``refresh_on_read`` (default True).
        ns: the cortexgraph namespace items live in.
        mode: the recall mode of ``query`` searches (``"keyword"``, ``"vector"`` or
            ``"hybrid"``); by default hybrid with an index config, keyword without.

    Raises:
        ValidationError: a bad option (field ``index``, ``ttl``, ``ns`` or ``mode``).
    """

    supports_ttl = True

    def __init__(
        self,
        cx: cg.Cortex,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        ns: str = "langgraph",
        mode: str | None = None,
    ) -> None:
        if not isinstance(cx, cg.Cortex):
            raise ValidationError("must be an open cortexgraph.Cortex", field="cx")
        cg.Q.ns(ns)  # validates the name
        if mode is None:
            mode = "hybrid" if index is not None else "keyword"
        if mode not in ("keyword", "vector", "hybrid"):
            raise ValidationError(
                f"must be 'keyword', 'vector' or 'hybrid', not {mode!r}", field="mode"
            )
        self.cx = cx
        self.ns = ns
        self.mode = mode
        self.index_config = index
        self._fields = _index_fields(index)
        self.ttl_config = _check_ttl_config(ttl)
        self._owned = False
        self._sweeper: Future[None] | None = None
        self._lock = threading.Lock()
        self._stop_sweeping = threading.Event()

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str],
        actor: str = "langgraph",
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        ns: str = "langgraph",
        mode: str | None = None,
        clock: cg.Clock | None = None,
        embedder: cg.Embedder | None = None,
        sync: bool = True,
    ) -> CortexStore:
        """Open (or create) the store of ``actor`` under ``root`` as a ``CortexStore``.

        The store embeds with ``embedder`` if given, else with the index config's
        ``embed`` (see :class:`IndexEmbedder`), else with cortexgraph's default; with an
        ``embedder`` and no ``mode``, queries use hybrid recall. :meth:`close` closes it.
        Other arguments: as for ``__init__`` and :func:`cortexgraph.open`.
        """
        if embedder is None and index is not None:
            embedder = IndexEmbedder(index)
        elif embedder is not None and mode is None:
            mode = "hybrid"
        cx = cg.open(root, actor, clock=clock, embedder=embedder, sync=sync)
        try:
            store = cls(cx, index=index, ttl=ttl, ns=ns, mode=mode)
        except BaseException:
            cx.close()
            raise
        store._owned = True
        return store

    @property
    def path(self) -> Path:
        """The cortexgraph environment's directory."""
        return self.cx.path

    def close(self) -> None:
        """Stop the TTL sweeper, and close the cortexgraph store if :meth:`open` opened
        it (harmless twice)."""
        self.stop_ttl_sweeper()
        if self._owned:
            self.cx.close()

    def __enter__(self) -> CortexStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- batches ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` and return their results in op order (module docstring).

        Raises:
            InvalidNamespaceError: a namespace LangGraph would refuse (its messages).
            ValidationError: any other bad op (an unknown op or operator, a bad limit,
                offset, ttl, key or value); nothing is written then.
        """
        ops = list(ops)
        for op in ops:
            _check_op(op)
        with self._lock:  # a put's look-up and its write must not interleave with another's
            return self._run(ops)

    def _run(self, ops: list[Op]) -> list[Result]:
        now = self.cx.clock.now_ms()
        puts: dict[tuple[tuple[str, ...], str], tuple[PutOp, str, str]] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = (op, *self._encode(op, now))
        refresh: dict[bytes, cg.MemoryURI] = {}
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op, now, refresh))
            elif isinstance(op, SearchOp):
                results.append(self._search(op, now, refresh))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op, now))
            else:
                results.append(None)
        # find reads committed state, so every put's memory is looked up before the batch;
        # expected_version then refuses a concurrent change made in between
        found = {where: self._current(*where, now) for where in puts}
        if puts or refresh:
            with self.cx.batch() as b:
                for where, (op, text, content) in puts.items():
                    self._apply_put(b, where, op, text, content, found[where], now, refresh)
                if refresh:
                    b.record_access(list(refresh.values()), at=now)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch`, run in the calling thread (an LMDB transaction belongs to the
        thread that opened it, and each batch is short)."""
        return self.batch(ops)

    # -- TTL ----------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Tombstone every expired item (reason ``"expired"``), in one batch; returns
        how many. Expired items are already invisible; sweeping frees their keys' index
        entries and records the expiry in the journal."""
        with self._lock:
            now = self.cx.clock.now_ms()
            expired = [
                record.uri
                for record in self._records(cg.Q.type(cg.ArtifactRef))
                if self._expired(record, _decode(record), now)
            ]
            if expired:
                with self.cx.batch() as b:
                    for uri in expired:
                        b.tombstone(uri, reason="expired", at=now)
            return len(expired)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Future[None]:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default: the TTL
        config's, else 5) in a daemon thread until :meth:`stop_ttl_sweeper` or
        :meth:`close`; returns a future that completes when the thread ends (with the
        exception a sweep raised, if one did). Starting it twice returns the same future.

        Raises:
            ValidationError: the interval is not a positive number (field ``ttl``).
        """
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        minutes = sweep_interval_minutes
        if minutes is None:
            minutes = (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        interval = (_ttl_ms(minutes) or 0) / 1000
        stop = self._stop_sweeping = threading.Event()
        done: Future[None] = Future()

        def sweep_until_stopped() -> None:
            try:
                while not stop.wait(interval):
                    self.sweep_ttl()
            except BaseException as exc:  # handed to whoever holds the future
                done.set_exception(exc)
            else:
                done.set_result(None)

        threading.Thread(target=sweep_until_stopped, name="cortexstore-ttl", daemon=True).start()
        self._sweeper = done
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; returns whether it ended within ``timeout`` seconds
        (True when none was running)."""
        if self._sweeper is None:
            return True
        self._stop_sweeping.set()
        try:
            self._sweeper.exception(timeout=timeout)
        except TimeoutError:
            return False
        self._sweeper = None
        return True

    # -- reads ----------------------------------------------------------------------------

    def _records(self, where: Predicate) -> list[Record]:
        """The active item memories matching ``where``, most recently written first."""
        where = where & cg.Q.type(cg.ArtifactRef) & cg.Q.ns(self.ns)
        found = self.cx.find(where, limit=_SCAN, order_by="recent")
        return sorted((hit.record for hit in found.hits if _is_item(hit.record)), key=_newest)

    def _lookup(
        self, namespace: tuple[str, ...], key: str
    ) -> tuple[Record, dict[str, Any], list[cg.MemoryURI]] | None:
        """The live memory holding ``(namespace, key)``, its decoded content, and any
        older live memories of the same key (two processes that put a new key at once
        each write one; the newest is the item, and the next put retires the others)."""
        found = [
            (record, content)
            for record in self._records(cg.Q.tag(_key_tag(namespace, key)))
            if tuple((content := _decode(record))["namespace"]) == namespace
            and content["key"] == key
        ]
        if not found:
            return None
        (record, content), *stale = found
        return record, content, [older.uri for older, _ in stale]

    def _expired(self, record: Record, content: Mapping[str, Any], now: int) -> bool:
        ttl = content.get("ttl")
        if ttl is None:
            return False
        last = max(record.at, self.cx.salience(record.uri, now=now).last_access)
        return bool(now >= last + ttl)

    def _visible(
        self, record: Record, now: int
    ) -> dict[str, Any] | None:
        content = _decode(record)
        return None if self._expired(record, content, now) else content

    def _get(self, op: GetOp, now: int, refresh: dict[bytes, cg.MemoryURI]) -> Item | None:
        found = self._lookup(op.namespace, op.key)
        if found is None or self._expired(found[0], found[1], now):
            return None
        record, content, _ = found
        if op.refresh_ttl and content.get("ttl") is not None:
            refresh[record.uri.id] = record.uri
        item: Item = _item(Item, record, content)
        return item

    def _search(
        self, op: SearchOp, now: int, refresh: dict[bytes, cg.MemoryURI]
    ) -> list[SearchItem]:
        prefix = op.namespace_prefix
        where: Predicate = cg.Q.type(cg.ArtifactRef)
        if prefix:
            where = where & cg.Q.tag(_ns_tag(prefix))
        scored: Iterable[tuple[Record, float | None]]
        if op.query:
            k = _MAX_RECALL if op.filter else min(_MAX_RECALL, op.offset + op.limit)
            hits = self.cx.recall(
                op.query, k=max(k, 1), where=where & cg.Q.ns(self.ns), mode=self.mode,
                expand=False, now=now,
            )
            scored = ((h.record, float(h.score)) for h in hits.hits if _is_item(h.record))
        else:
            scored = ((record, None) for record in self._records(where))
        kept: list[SearchItem] = []
        seen = 0
        items: set[tuple[tuple[str, ...], str]] = set()
        for record, score in scored:
            if len(kept) == op.limit:
                break
            content = self._visible(record, now)
            if content is None or tuple(content["namespace"][: len(prefix)]) != prefix:
                continue
            item = (tuple(content["namespace"]), content["key"])
            if item in items:  # an older duplicate (see _lookup)
                continue
            items.add(item)
            if op.filter and not all(
                _matches(content["value"].get(field), wanted)
                for field, wanted in op.filter.items()
            ):
                continue
            seen += 1
            if seen <= op.offset:
                continue
            if op.refresh_ttl and content.get("ttl") is not None:
                refresh[record.uri.id] = record.uri
            kept.append(_item(SearchItem, record, content, score=score))
        return kept

    def _list_namespaces(self, op: ListNamespacesOp, now: int) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        # a prefix without wildcards narrows the scan to its posting list
        exact = [
            c.path for c in conditions
            if c.match_type == "prefix" and c.path and "*" not in c.path
        ]
        where = cg.Q.tag(_ns_tag(max(exact, key=len))) if exact else cg.Q.type(cg.ArtifactRef)
        names: set[tuple[str, ...]] = set()
        for record in self._records(where):
            content = self._visible(record, now)
            if content is None:
                continue
            namespace = tuple(content["namespace"])
            if all(_namespace_matches(c, namespace) for c in conditions):
                names.add(namespace if op.max_depth is None else namespace[: op.max_depth])
        return sorted(names)[op.offset : op.offset + op.limit]

    # -- writes -------------------------------------------------------------------------

    def _encode(self, op: PutOp, now: int) -> tuple[str, str]:
        """The memory ``text`` and ``content`` of a put (empty for a delete)."""
        if op.value is None:
            return "", ""
        ttl = _ttl_ms(op.ttl)
        try:
            content = json.dumps(
                {"key": op.key, "namespace": list(op.namespace), "ttl": ttl,
                 "value": dict(op.value)},
                sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
            )
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"must be a JSON object: {exc}", field="value") from exc
        fields = self._fields
        if op.index is False:
            fields = []
        elif op.index is not None:
            fields = [(path, tokenize_path(path)) for path in op.index]
        texts = [
            text for _, tokens in fields
            for text in get_text_at_path(json.loads(content)["value"], tokens)
        ]
        return "\n".join(texts).strip() or op.key, content

    def _current(
        self, namespace: tuple[str, ...], key: str, now: int
    ) -> tuple[Record, bool, bool, list[cg.MemoryURI]] | None:
        """The live memory of ``(namespace, key)``, whether it expired, whether it has a
        TTL, and the older duplicates to retire."""
        found = self._lookup(namespace, key)
        if found is None:
            return None
        record, content, stale = found
        expired = self._expired(record, content, now)
        return record, expired, content.get("ttl") is not None, stale

    def _apply_put(
        self,
        b: cg.Batch,
        where: tuple[tuple[str, ...], str],
        op: PutOp,
        text: str,
        content: str,
        found: tuple[Record, bool, bool, list[cg.MemoryURI]] | None,
        now: int,
        refresh: dict[bytes, cg.MemoryURI],
    ) -> None:
        if found is not None:
            record, expired, had_ttl, stale = found
            for uri in stale:
                b.tombstone(uri, reason="duplicate", at=now)
            refresh.pop(record.uri.id, None)  # a write restarts the timer itself
            if op.value is None:
                b.tombstone(record.uri, reason="deleted", at=now)
                return
            if not expired:
                uri = b.update(
                    record.uri, expected_version=record.version, text=text, content=content,
                    at=now,
                )
                if uri == record.uri and had_ttl:
                    b.record_access([uri], at=now)  # an unchanged value still restarts it
                return
            b.tombstone(record.uri, reason="expired", at=now)
        if op.value is None:
            return
        namespace, key = where
        tags = [_key_tag(namespace, key)]
        tags += [_ns_tag(namespace[:depth]) for depth in range(1, len(namespace) + 1)]
        memory = cg.ArtifactRef(text=text, content=content, media_type=MEDIA_TYPE, tags=tags)
        b.write(memory, ns=self.ns, at=now)


# -- pure helpers --------------------------------------------------------------------------


def _check_op(op: object) -> None:
    """Refuse a bad op before anything runs, as LangGraph would (or with a
    ``ValidationError`` naming the field where LangGraph sets no rule)."""
    if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
        raise ValidationError(f"unknown operation type {type(op).__name__}", field="ops")
    validate_op_namespace(op)
    if isinstance(op, (GetOp, PutOp)):
        if type(op.key) is not str:
            raise ValidationError(f"must be a str, not {type(op.key).__name__}", field="key")
        if len(op.namespace) > MAX_DEPTH:
            raise ValidationError(f"deeper than {MAX_DEPTH} labels", field="namespace")
    if isinstance(op, PutOp):
        validate_put_namespace(op.namespace)
        if op.value is not None and not isinstance(op.value, Mapping):
            raise ValidationError("must be a mapping or None", field="value")
        if op.index is not None and op.index is not False and (
            isinstance(op.index, str) or not all(isinstance(p, str) for p in op.index)
        ):
            raise ValidationError("must be False, None or a list of field paths", field="index")
        _ttl_ms(op.ttl)
    if isinstance(op, (SearchOp, ListNamespacesOp)):
        for name in ("limit", "offset"):
            value = getattr(op, name)
            if type(value) is not int or value < 0:
                raise ValidationError(f"must be a non-negative integer, not {value!r}", field=name)
    if isinstance(op, SearchOp):
        if op.query is not None and type(op.query) is not str:
            raise ValidationError("must be a str or None", field="query")
        if op.filter is not None:
            if not isinstance(op.filter, Mapping):
                raise ValidationError("must be a mapping or None", field="filter")
            _check_filter(op.filter)
    if isinstance(op, ListNamespacesOp):
        if op.max_depth is not None and (type(op.max_depth) is not int or op.max_depth < 1):
            raise ValidationError("must be a positive integer or None", field="max_depth")
        for condition in op.match_conditions or ():
            if condition.match_type not in ("prefix", "suffix"):
                raise ValidationError(
                    f"unsupported match type {condition.match_type!r}", field="match_conditions"
                )


def _check_filter(wanted: Mapping[str, Any]) -> None:
    for value in wanted.values():
        if isinstance(value, Mapping):
            if any(isinstance(k, str) and k.startswith("$") for k in value):
                unknown = sorted(set(value) - _OPERATORS)
                if unknown:
                    raise ValidationError(
                        f"unsupported operator {unknown[0]!r} (use one of"
                        f" {', '.join(sorted(_OPERATORS))})",
                        field="filter",
                    )
            else:
                _check_filter(value)


def _matches(value: Any, wanted: Any) -> bool:
    """Whether a value's field matches a filter's value: equality (nested mappings field
    by field, lists element by element), or every ``$`` operator of a mapping holding."""
    if isinstance(wanted, Mapping):
        if any(k.startswith("$") for k in wanted):
            return all(_compare(value, name, arg) for name, arg in wanted.items())
        return isinstance(value, Mapping) and all(
            _matches(value.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, list)
            and len(value) == len(wanted)
            and all(_matches(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _compare(value: Any, operator: str, arg: Any) -> bool:
    """One ``$`` operator. Order operators compare numbers as numbers and strings as
    strings; anything else (a missing field included) does not match."""
    if operator == "$eq":
        return bool(value == arg)
    if operator == "$ne":
        return bool(value != arg)
    if isinstance(value, (int, float)) and isinstance(arg, (int, float)):
        a, b = float(value), float(arg)
    elif isinstance(value, str) and isinstance(arg, str):
        a, b = value, arg  # type: ignore[assignment]
    else:
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[operator]


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` starts (prefix) or ends (suffix) with the condition's path,
    ``"*"`` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path):]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True)) if path else True


def _index_fields(index: IndexConfig | None) -> list[tuple[str, list[str] | str]]:
    """The (path, tokens) pairs a value's indexed text comes from (``$``: all of it)."""
    if index is not None and not isinstance(index, Mapping):
        raise ValidationError("must be a LangGraph IndexConfig mapping", field="index")
    paths = (index or {}).get("fields") or ["$"]
    if isinstance(paths, str) or not all(isinstance(p, str) for p in paths):
        raise ValidationError("index['fields'] must be a list of field paths", field="index")
    return [(p, p if p == "$" else tokenize_path(p)) for p in paths]


def _check_ttl_config(ttl: TTLConfig | None) -> TTLConfig | None:
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise ValidationError("must be a LangGraph TTLConfig mapping", field="ttl")
    _ttl_ms(ttl.get("default_ttl"))
    if type(ttl.get("refresh_on_read", True)) is not bool:
        raise ValidationError("refresh_on_read must be True or False", field="ttl")
    return ttl


def _ttl_ms(minutes: object) -> int | None:
    """A TTL in minutes as whole milliseconds (at least 1)."""
    if minutes is None:
        return None
    if (
        isinstance(minutes, bool)
        or not isinstance(minutes, (int, float))
        or not math.isfinite(minutes)
        or not 0 < minutes <= _MAX_TTL_MINUTES
    ):
        raise ValidationError(
            f"must be a positive number of minutes up to {_MAX_TTL_MINUTES} or None,"
            f" not {minutes!r}",
            field="ttl",
        )
    return max(1, round(minutes * _MINUTE_MS))


def _hash(parts: object) -> str:
    data = json.dumps(parts, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _key_tag(namespace: tuple[str, ...], key: str) -> str:
    return "lgk-" + _hash([list(namespace), key])


def _ns_tag(prefix: tuple[str, ...]) -> str:
    return "lgn-" + _hash(list(prefix))


def _is_item(record: Record) -> bool:
    """Whether a memory is a LangGraph item (another memory may share the namespace)."""
    memory = record.memory
    return getattr(memory, "media_type", None) == MEDIA_TYPE and any(
        tag.startswith("lgk-") for tag in memory.tags
    )


def _newest(record: Record) -> int:
    return -record.seq


def _decode(record: Record) -> dict[str, Any]:
    content = getattr(record.memory, "content", None)
    if not isinstance(content, str):
        raise CortexError(f"{record.uri} is not a LangGraph item (it has no JSON content)")
    decoded: dict[str, Any] = json.loads(content)
    return decoded


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _time(ms: int) -> datetime:
    """A journal time (ms) as an aware UTC datetime, exact to the millisecond."""
    return _EPOCH + timedelta(milliseconds=ms)


def _item(
    cls: type[Any], record: Record, content: Mapping[str, Any], **extra: Any
) -> Any:
    return cls(
        value=content["value"],
        key=content["key"],
        namespace=tuple(content["namespace"]),
        created_at=_time(record.created_at),
        updated_at=_time(record.at),
        **extra,
    )
