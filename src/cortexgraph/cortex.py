"""The facade: :func:`open` and :class:`Cortex`.

Every verb follows one shape: validate the arguments, compute the journal entry with pure
code from ``core``, then append it and apply its derived changes in one LMDB write
transaction (a :class:`Batch`). Outside an explicit ``with cx.batch()`` each verb is its
own batch; inside one, verbs called on the batch *or* on the handle join it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import attrs

from .clock import Clock, SystemClock
from .compact import CompactReport, autolink, run_compact
from .context import ContextBundle, run_context
from .core.commitments import (
    MemoryProof,
    SnapshotManifest,
    build_memory_proof,
    manifest_for,
    mmr_mutations,
    roots,
    smt_mutations,
)
from .core.forms import TokenEstimator, estimate_tokens, render
from .core.graph import (
    EDGE_STATUSES,
    PPM,
    EdgeState,
    bfs,
    check_traversal,
    edge_out_key,
    normalise_relation,
    relation_name,
    strength_ppm,
)
from .core.journal import (
    MAX_ACCESS_IDS,
    Entry,
    Identity,
    apply,
    decode_entry,
    edge_keys,
    encode_entry,
    head_ids,
    memory_id,
    type_of,
)
from .core.keys import ID_SIZE, seq_from_key, seq_key, version_key
from .core.merkle import mmr_node_count
from .core.query import Predicate
from .core.salience import learn_weights
from .core.signals import max_in_degree, memory_factors, read_in_degree, read_weights
from .core.state import HeadState, Record, VersionState
from .core.taxonomy import (
    MAX_SHORT_TEXT,
    ORIGINS,
    OUTCOMES,
    Attest,
    LearnWeights,
    Memory,
    check_utf8,
    cited_uris,
    encode_body,
)
from .core.uri import MemoryURI, check_name
from .embed import Embedder, embedder_for
from .errors import (
    CorruptionError,
    CortexError,
    NotFoundError,
    StorageError,
    TombstonedError,
    URIError,
    ValidationError,
    VersionConflictError,
)
from .find import FindResult, run_find
from .recall import RecallResult, VectorState, backfill_embeddings, embed_written, run_recall
from .scope import export_scope
from .store.columns import ColumnIndex
from .store.env import (
    DEFAULT_MAP_SIZE,
    MAX_MAP_SIZE,
    TABLES,
    Environment,
    MapFull,
    ReadTxn,
    WriteTxn,
)

__all__ = ["Attestation", "Batch", "Cortex", "Edge", "Neighbor", "Stats", "Traversal", "open"]

DEFAULT_NS = "default"
_JOURNAL_CHUNK = 512
_MAX_AT = 2**63 - 1
_MAX_SEQ = 2**64 - 1  # journal keys are u64be

_LEARNED_ONLY = (
    "a LearnWeights cannot be written or updated directly: ranking weights are learned"
    " through cx.attest(cited, outcome=...), which journals the outcome (an Attest) and"
    " the weights learned from it together"
)

#: What the verbs accept as "which memory": a URI (pinned or not), its string form, or,
#: where a version is given separately, the 16-byte id or its 32 hex digits.
MemoryRef = MemoryURI | str | bytes


def open(
    root: str | os.PathLike[str],
    actor: str,
    *,
    clock: Clock | None = None,
    create: bool = True,
    readonly: bool = False,
    hash_name: str | None = None,
    map_size: int = DEFAULT_MAP_SIZE,
    sync: bool = True,
    embedder: Embedder | None = None,
    reembed: bool = False,
    autolink: bool = False,
    embed_on_write: bool = False,
) -> Cortex:
    """Open (or create) the memory of ``actor`` under ``root``.

    The LMDB environment lives at ``<root>/<actor>/``.

    Args:
        root: the directory that holds one environment per actor.
        actor: the actor's name (1-64 of ``a-z 0-9 . _ -``).
        clock: supplies ``at`` when a verb is called without one (default: system clock).
        create: create the environment if it does not exist.
        readonly: open read-only (the environment must exist); writes raise ``ReadOnlyError``.
        hash_name: ``"blake3"`` (default) or ``"sha256"``, fixed when the environment is
            created; opening with a different one is a ``ValidationError``.
        map_size: initial LMDB map size in bytes (it grows on demand).
        sync: fsync every commit (durable). ``False`` trades durability of the last
            commits on power loss for speed; a crash of the process loses nothing.
        embedder: what vector recall embeds with (an :class:`Embedder`). Its name and
            dimension are recorded when the store is created (default: a
            ``HashEmbedder``); later opens use the recorded one, and passing a different
            one is a ``ValidationError`` unless ``reembed=True``, which records the new
            one (its vector index is then built from scratch on the next recall).
        reembed: allow switching to a different embedder (see ``embedder``).
        autolink: after each write, link the new memory to its most similar neighbours
            from the keyword index (journaled ``relates_to`` edges; see ``compact``).
        embed_on_write: after each committed batch, embed the new and changed memories
            and cache their vectors (in a transaction of their own), so that vector
            recall, in this process or any other, embeds only its query. Read-write
            handles only; see ``docs/embedders.md``.

    Raises:
        ValidationError: a bad root, actor name, hash name or option (a root or actor
            directory that exists as a file included).
        NotFoundError: the environment does not exist and ``create`` is false.
        AlreadyOpenError: this process already has the environment open.
        CorruptionError: the environment's identity does not match ``actor``, or its
            tables are damaged.
        StorageError: the directory holds an LMDB environment that is not a cortexgraph
            store (nothing is written to it), or the disk refused to open it.
    """
    check_name(actor, "actor")
    path = _store_path(root, actor)
    if clock is not None and not isinstance(clock, Clock):
        raise ValidationError("must have a now_ms() method", field="clock")
    if hash_name is not None:
        from .core.hashing import hash_function

        hash_function(hash_name)
    if type(map_size) is not int or not 1 << 16 <= map_size <= MAX_MAP_SIZE:
        raise ValidationError(
            f"must be an integer from 65536 to {MAX_MAP_SIZE} bytes", field="map_size"
        )
    for name, value in (("create", create), ("readonly", readonly), ("sync", sync)):
        if type(value) is not bool:
            raise ValidationError("must be True or False", field=name)
    if type(embed_on_write) is not bool or (embed_on_write and readonly):
        raise ValidationError(
            "must be True or False, and False when read-only", field="embed_on_write"
        )
    env = Environment(
        path,
        actor,
        create=create and not readonly,
        readonly=readonly,
        map_size=map_size,
        sync=sync,
        hash_name=hash_name,
    )
    try:
        spec = _embedder_spec(env, embedder, reembed=reembed)
    except BaseException:
        env.close()
        raise
    if type(autolink) is not bool:
        env.close()
        raise ValidationError("must be True or False", field="autolink")
    cx = Cortex(env, actor, clock or SystemClock(), embedder=embedder, embedder_spec=spec)
    cx._autolink = autolink
    cx._embed_on_write = embed_on_write
    return cx


def _store_path(root: str | os.PathLike[str], actor: str) -> Path:
    """``<root>/<actor>``, after checking that ``root`` is a path and neither it nor the
    actor's directory is something other than a directory."""
    if isinstance(root, bytes) or not isinstance(root, (str, os.PathLike)):
        raise ValidationError(
            f"must be a path (str or os.PathLike), not {type(root).__name__}", field="root"
        )
    base = Path(root)
    if str(root) == "" or "\0" in str(root):
        raise ValidationError(f"must be a directory path, not {str(root)!r}", field="root")
    for field, where in (("root", base), ("actor", base / actor)):
        if where.exists() and not where.is_dir():
            raise ValidationError(f"{where} exists and is not a directory", field=field)
    return base / actor


_EMBEDDER_KEY = b"embedder"


def _embedder_spec(env: Environment, embedder: Embedder | None, *, reembed: bool) -> dict[str, Any]:
    """The embedder recorded for the store (recording it on first use)."""
    if embedder is not None:
        name, dim = getattr(embedder, "name", None), getattr(embedder, "dim", None)
        if type(name) is not str or not name or type(dim) is not int or dim < 1:
            raise ValidationError(
                "must have a non-empty str name, a positive int dim and embed()",
                field="embedder",
            )
        if not callable(getattr(embedder, "embed", None)):
            raise ValidationError("must have an embed(texts) method", field="embedder")
    recorded = env.meta_value(_EMBEDDER_KEY)
    if recorded is not None:
        if type(recorded) is not dict or not {"name", "dim"} <= recorded.keys():
            raise CorruptionError(f"{env.path} has a malformed embedder record")
        if embedder is None or (embedder.name, embedder.dim) == (recorded["name"], recorded["dim"]):
            return dict(recorded)
        if not reembed:
            raise ValidationError(
                f"this store was created with embedder {recorded['name']!r}"
                f" (dim {recorded['dim']}); open it with that one, or pass reembed=True to"
                f" switch to {embedder.name!r} and re-embed every memory",
                field="embedder",
            )
    if embedder is None:
        from .embed import HashEmbedder

        embedder = HashEmbedder()
    spec = {"name": embedder.name, "dim": embedder.dim}
    if not env.readonly:
        env.set_meta_value(_EMBEDDER_KEY, spec)
    return spec


class Cortex:
    """An open actor memory. Create it with :func:`cortexgraph.open`."""

    def __init__(
        self,
        env: Environment,
        actor: str,
        clock: Clock,
        *,
        embedder: Embedder | None = None,
        embedder_spec: dict[str, Any] | None = None,
    ) -> None:
        self._env = env
        self.actor = actor
        self.clock = clock
        self.hash_name: str = env.identity_meta["hash_name"]
        self._identity = Identity(actor, self.hash_name)
        self._local = threading.local()
        self._check_invariants = os.environ.get("CORTEXGRAPH_INVARIANTS") == "1"
        self._columns: ColumnIndex | None = None
        self._index_lock = threading.RLock()  # see _indexed_read
        self._embedder = embedder
        self._embedder_spec = embedder_spec or {}
        self._vectors: VectorState | None = None
        self._autolink = False
        self._embed_on_write = False

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The environment directory."""
        return self._env.path

    @property
    def readonly(self) -> bool:
        return self._env.readonly

    @property
    def closed(self) -> bool:
        return self._env.closed

    def close(self) -> None:
        """Close the environment. Closing twice is harmless; using a closed handle raises.

        The handle is closed even when saving the vector index fails (a full disk, say):
        that raises ``StorageError`` after closing, and the index, which is derived, is
        caught up again by the next recall.
        """
        if getattr(self._local, "batch", None) is not None:
            raise CortexError("cannot close a handle inside one of its batches")
        vectors, self._vectors = self._vectors, None
        failed: OSError | None = None
        try:
            if vectors is not None and not self._env.closed:
                vectors.save()
        except OSError as exc:  # the index is derived: the next open rebuilds what is lost
            failed = exc
        finally:
            self._env.close()
        if failed is not None:
            raise StorageError(
                f"{self.path}: the store is closed, but its vector index could not be saved"
                f" ({failed}); the next recall rebuilds it from the embedding cache",
                operation="close",
            ) from failed

    def __enter__(self) -> Cortex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("read-only" if self.readonly else "open")
        return f"<Cortex actor={self.actor!r} path={str(self.path)!r} {state}>"

    # -- batches ------------------------------------------------------------------------

    def batch(self) -> Batch:
        """A batch of mutations committed as one LMDB write transaction (J3)::

            with cx.batch() as b:
                a = b.write(Fact(text="deploys go through CI"))
                b.write(Constraint(text="never push to main"))

        If the ``with`` block raises, nothing of the batch is visible or journaled.
        """
        return Batch(self)

    def _active_batch(self) -> Batch | None:
        batch: Batch | None = getattr(self._local, "batch", None)
        return batch

    def _run(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run one verb in the active batch of this thread, or in a batch of its own."""
        active = self._active_batch()
        if active is not None:
            return getattr(active, method)(*args, **kwargs)
        with Batch(self) as batch:
            return getattr(batch, method)(*args, **kwargs)

    # -- mutations ------------------------------------------------------------------------

    def write(self, memory: Memory, *, ns: str = DEFAULT_NS, at: int | None = None) -> MemoryURI:
        """Store a new memory; returns its URI pinned to version 1.

        An ``Attest`` must cite memories of this store by URIs pinned to existing versions
        (``cx://<actor>/<ns>/<id-hex>@<version>``). A ``LearnWeights`` cannot be written
        here: weights are learned through :meth:`attest`, which journals both.

        Raises:
            ValidationError: a bad memory or namespace; an Attest citing anything but an
                existing version of a memory of this store (field ``cited``); a
                LearnWeights (field ``memory``).
        """
        result: MemoryURI = self._run("write", memory, ns=ns, at=at)
        return result

    def update(
        self,
        ref: MemoryRef,
        *,
        expected_version: int | None = None,
        at: int | None = None,
        **changes: Any,
    ) -> MemoryURI:
        """Write a new version of a memory with ``changes`` applied to its head version.

        Args:
            ref: the memory (a pinned URI's version is ignored; the head is the base).
            expected_version: if given, the head version the caller based the change on;
                a different head raises ``VersionConflictError`` (optimistic concurrency).
            changes: fields to change (``text=...``, ``tags=[...]``, ...).

        Returns:
            The URI pinned to the new version, or to the current head if ``changes``
            leave the memory exactly as it is (nothing is journaled then).

        Raises:
            ValidationError: no changes, an unknown field or a bad value (an Attest's
                ``cited`` is checked as by :meth:`write`); the memory is a LearnWeights,
                which only :meth:`attest` writes.
            NotFoundError, TombstonedError, VersionConflictError.
        """
        result: MemoryURI = self._run(
            "update", ref, expected_version=expected_version, at=at, **changes
        )
        return result

    def update_head(self, ref: MemoryRef, *, version: int, at: int | None = None) -> MemoryURI:
        """Move a memory's head to an existing ``version``; returns the head's URI."""
        result: MemoryURI = self._run("update_head", ref, version=version, at=at)
        return result

    def tombstone(self, ref: MemoryRef, *, reason: str = "", at: int | None = None) -> MemoryURI:
        """Tombstone a memory: it can no longer change, but every version stays resolvable."""
        result: MemoryURI = self._run("tombstone", ref, reason=reason, at=at)
        return result

    def add_edge(
        self,
        src: MemoryRef,
        dst: MemoryRef,
        relation: str,
        *,
        strength: float = 1.0,
        status: str = "active",
        origin: str = "system",
        at: int | None = None,
    ) -> Edge:
        """Link two memories: ``src --relation--> dst``; returns the stored edge.

        Adding an edge that exists changes its strength, status and origin (an identical
        one journals nothing). Relations accept their aliases (``"related"``, ``"source"``,
        ...). ``supersedes`` is only accepted from a human (``origin="human"``): an
        agent's judgement that one memory replaces another must be confirmed by a person.

        Raises:
            ValidationError: an unknown relation or status, a strength outside 0..1, a
                self-edge, or ``supersedes`` from an origin other than ``"human"``.
            NotFoundError, TombstonedError: either end does not exist or is tombstoned.
        """
        result: Edge = self._run(
            "add_edge",
            src,
            dst,
            relation,
            strength=strength,
            status=status,
            origin=origin,
            at=at,
        )
        return result

    def remove_edge(
        self, src: MemoryRef, dst: MemoryRef, relation: str, *, at: int | None = None
    ) -> None:
        """Remove the edge ``src --relation--> dst``.

        Raises:
            NotFoundError: there is no such edge (or memory).
        """
        self._run("remove_edge", src, dst, relation, at=at)

    def attest(
        self,
        cited: Iterable[MemoryRef],
        *,
        outcome: str,
        text: str = "",
        ns: str = DEFAULT_NS,
        at: int | None = None,
    ) -> Attestation:
        """Record an outcome and learn from it: journals an ``Attest`` and a ``LearnWeights``.

        The salience weights move toward the mean factor profile of the cited memories on
        ``"success"`` and away from it on ``"failure"`` (an integer EMA with alpha 0.2,
        each weight kept >= 20,000 ppm, the sum exactly 1,000,000; see
        ``docs/ranking.md``). Both memories are written in one batch, in namespace ``ns``;
        the Attest cites each memory by its URI pinned to the version current at ``at``
        (or to the version a pinned URI names). This is the only way to change the
        weights: a ``LearnWeights`` written or updated directly is refused.

        Raises:
            ValidationError: no cited memory, an unknown outcome, or a bad text.
            NotFoundError: a cited memory (or the version a pinned URI names) does not
                exist.
        """
        result: Attestation = self._run(
            "attest", cited, outcome=outcome, text=text, ns=ns, at=at
        )
        return result

    def compact(self, *, now: int | None = None) -> CompactReport:
        """Forget what stopped mattering and consolidate near-duplicates, all journaled.

        Active memories whose effective confidence (confidence x recency) fell below 0.3
        and that were not read for 14 days are archived (pinned memories and hubs are
        exempt); archived ones untouched for 30 more days are pruned. Suggested
        ``relates_to`` edges of strength >= 0.5 (from auto-linking) are examined: a pair
        of the same namespace and type with similarity >= 0.7 is merged into the survivor
        (a new version; the other is ``merged`` and linked by ``derived_from``). Archived,
        pruned and merged memories leave find, recall and context but stay resolvable;
        reading an archived one (late binding) restores it. See ``docs/lifecycle.md``.
        """
        return run_compact(self, now=now)

    def scope(
        self,
        where_or_uris: Predicate | Iterable[MemoryRef],
        *,
        limit: int = 100,
        include_edges: bool = True,
    ) -> bytes:
        """A proof-checked slice of this store for a sub-agent, as bytes.

        ``where_or_uris`` is a ``Q`` predicate (the ``limit`` best by salience, as
        :meth:`find` ranks them) or a list of memory URIs (at most ``limit``). The bundle
        holds the manifest (actor, seq, roots), each memory's head record and head version
        with its SMT proof, the edges among them with theirs, and the journal's first entry
        with its MMR proof (it binds the actor's name). Check it with
        :func:`cortexgraph.verify_scope`, which needs no database. Bundles are capped at
        64 MiB. Format: ``docs/scopes.md``.
        """
        return export_scope(self, where_or_uris, limit=limit, include_edges=include_edges)

    def weights(self) -> tuple[int, ...]:
        """The current salience weights in ppm, in ``FACTOR_NAMES`` order (sum 1,000,000)."""
        with self._reading() as txn:
            return read_weights(txn)

    # -- reads ----------------------------------------------------------------------------

    def find(
        self,
        where: Predicate,
        *,
        limit: int | None = None,
        budget_tokens: int | None = None,
        order_by: str = "salience",
        form: str = "short",
        late_binding: bool = False,
        now: int | None = None,
        estimator: TokenEstimator | None = None,
    ) -> FindResult:
        """The memories matching ``where``, best first, bounded by ``limit`` and/or tokens.

        Args:
            where: a predicate built with :class:`Q`, e.g.
                ``Q.type(Fact) & Q.tag("deploy")``. Every alternative (``|``) must name a
                type or a tag (``TooBroadQueryError`` otherwise). Without a ``Q.status``
                only active memories match.
            limit: the most hits to return.
            budget_tokens: the most tokens the rendered hits may take together; the
                walk stops at the first hit that would not fit. ``limit`` or
                ``budget_tokens`` is required (``UnboundedQueryError``).
            order_by: ``"salience"`` (default), ``"recent"``, ``"priority"`` or
                ``"confidence"``, all descending; ties by memory id.
            form: how each hit is rendered: ``"short"``, ``"medium"`` or ``"full"``.
            late_binding: journal an ``access`` of the returned memories (it feeds the
                frequency factor). The default read journals nothing.
            now: the instant salience is computed at (ms; default: the clock).
            estimator: the token estimator (default ``estimate_tokens``).

        Returns:
            A :class:`FindResult`: the hits, their total tokens, how many memories
            matched, and the plan.
        """
        return run_find(
            self,
            where,
            limit=limit,
            budget_tokens=budget_tokens,
            order_by=order_by,
            form=form,
            late_binding=late_binding,
            now=now,
            estimator=estimator,
        )

    def recall(
        self,
        text: str,
        *,
        k: int = 10,
        where: Predicate | None = None,
        mode: str = "hybrid",
        fusion: str = "score",
        late_binding: bool = False,
        now: int | None = None,
        expand: bool = True,
    ) -> RecallResult:
        """What the store knows that is relevant to ``text``, best first.

        Args:
            text: the question or topic.
            k: how many hits (1..1000).
            where: an optional filter built with :class:`Q` (the same language as
                :meth:`find`, status default included; no type or tag is required here,
                the text bounds the search).
            mode: ``"keyword"`` (BM25), ``"vector"`` (embeddings, HNSW) or ``"hybrid"``
                (both fused, then graph expansion).
            fusion: how hybrid mode fuses the channels: ``"score"`` (default: each
                channel's scores scaled to 0..1 over its top 100, then averaged) or
                ``"rrf"`` (reciprocal-rank fusion, k = 60). See ``docs/recall.md``.
            late_binding: journal an ``access`` of the returned memories.
            now: the instant salience (the tie-break) is computed at.
            expand: in hybrid mode, add 1-hop graph neighbours of the hits at a reduced
                score.

        Returns:
            A :class:`RecallResult` of :class:`RecallHit`, each with its per-channel
            ranks and scores, and any code attached by ``source_of`` edges.
        """
        return run_recall(
            self,
            text,
            k=k,
            where=where,
            mode=mode,
            fusion=fusion,
            late_binding=late_binding,
            now=now,
            expand_graph=expand,
        )

    def context(
        self,
        *,
        query: str | None = None,
        budget_tokens: int,
        channel: str | None = None,
        now: int | None = None,
        estimator: TokenEstimator | None = None,
    ) -> ContextBundle:
        """A token-budgeted context bundle for a prompt: floor, foreground, background.

        The floor holds pinned memories, active Goals, Constraints, Preferences and the
        hottest Facts; the foreground the ``recall(query)`` hits, and/or the channel's
        most recent Events; the background one short line each for the most salient of
        the rest. Only active memories appear, never Attest or LearnWeights. The rules
        are in ``docs/context.md``.

        Args:
            query: what the prompt is about (its recall hits fill the foreground).
            budget_tokens: the most tokens the text may cost (required).
            channel: a channel whose most recent Events join the foreground.
            now: the instant salience is computed at (ms; default: the clock).
            estimator: counts tokens (default ``estimate_tokens``).

        Returns:
            A :class:`ContextBundle` ``(text, items, tokens, digest)``: the same state and
            arguments give the same bytes.
        """
        return run_context(
            self,
            query=query,
            budget_tokens=budget_tokens,
            channel=channel,
            now=now,
            estimator=estimator,
        )

    @property
    def embedder(self) -> Embedder:
        """The embedder vector recall uses (created on first use from the recorded one)."""
        if self._embedder is None:
            self._embedder = embedder_for(self._embedder_spec)
        return self._embedder

    def backfill_embeddings(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed every active memory whose vector is not cached yet, then bring the vector
        index up to date and save it, so that vector recall on any handle, read-only ones
        included, embeds only its query.

        Resumable: memories are embedded in chunks, each committed to the cache on its
        own, so an interrupted back-fill (even by SIGKILL) loses at most one chunk and a
        second run embeds only what is still missing. No journal entry is written: the
        cache is not memory state.

        Args:
            progress: called as ``progress(done, total)``: ``total`` memories lacked a
                vector, ``done`` of them are handled so far.

        Returns:
            How many texts were embedded now (memories with the same text share one).

        Raises:
            ReadOnlyError: the handle is read-only.
            EmbedderError: the embedder failed or returned bad vectors (the chunks done
                before stay cached).
        """
        return backfill_embeddings(self, progress=progress)

    def _vector_state(self) -> VectorState:
        state = self._vectors
        if state is None:
            state = self._vectors = VectorState(self, self.embedder)
        return state

    def _column_index(self) -> ColumnIndex:
        with self._index_lock:
            index = self._columns
            if index is None:
                index = self._columns = ColumnIndex()
            return index

    def _indexed_read(self) -> _IndexedRead:
        """A snapshot of committed state, and the column index brought to it (its seq).

        The index (and the vector state synced to it) is shared by every thread using
        this handle, so reads through it take turns: the turn is taken *before* the
        snapshot, so no snapshot is older than the index (which would make it rebuild),
        and no other thread moves the index on while a read still walks it (to rows its
        own snapshot does not have). Re-entrant: ``context`` calls ``recall``.
        """
        return _IndexedRead(self)

    def _record_access(self, uris: list[MemoryURI], *, at: int) -> None:
        self._run("record_access", uris, at=at)

    def edges(self, ref: MemoryRef, *, direction: str = "out") -> list[Edge]:
        """The edges of a memory, ``"out"`` (it is the source), ``"in"`` or ``"both"``.

        Ordered by direction (out first), then relation, then the other memory's id.
        """
        _, _, direction, _ = check_traversal(0, None, direction, 0.0)
        uri = self._parse_ref(ref, allow_id=True)
        with self._reading() as txn:
            head = _read_head(txn, uri)
            heads = _HeadCache(txn)
            found = []
            for way in ("out", "in"):
                if direction in (way, "both"):
                    found.extend(_edges_of(txn, self.actor, heads, uri.id, head.ns, way))
            return found

    def traverse(
        self,
        ref: MemoryRef,
        *,
        depth: int = 2,
        relations: Sequence[str] | None = None,
        direction: str = "out",
        min_strength: float = 0.0,
    ) -> Traversal:
        """Breadth-first search from a memory along active edges, up to ``depth`` (<= 5).

        Args:
            ref: the start memory.
            depth: how many edges to follow (0..5).
            relations: only follow these relations (aliases accepted); ``None``: all.
            direction: ``"out"`` (follow edges from source to target), ``"in"`` (against
                them) or ``"both"``.
            min_strength: only follow edges at least this strong (0..1).

        Returns:
            A :class:`Traversal`: ``levels[d]`` lists the memories first reached at depth
            ``d + 1``, sorted by id; each memory appears once. Suggested edges are not
            followed, nor are tombstoned memories (nor what lies beyond them).
        """
        depth, wanted, direction, threshold = check_traversal(
            depth, relations, direction, min_strength
        )
        uri = self._parse_ref(ref, allow_id=True)
        with self._reading() as txn:
            start = _read_head(txn, uri)
            heads = _HeadCache(txn)

            def walk(prefix: bytes) -> Callable[[bytes], list[tuple[str, bytes, int]]]:
                def neighbours(node: bytes) -> list[tuple[str, bytes, int]]:
                    found = []
                    for key, value in txn.iter_items("edges", prefix + node):
                        edge = EdgeState.decode(value)
                        relation = relation_name(key[17])
                        if not edge.active or edge.strength < threshold:
                            continue
                        if wanted is None or relation in wanted:
                            found.append((relation, bytes(key[18:]), edge.strength))
                    return found

                return neighbours

            levels = bfs(
                uri.id,
                depth,
                walk(b"o") if direction in ("out", "both") else None,
                walk(b"i") if direction in ("in", "both") else None,
                admit=lambda node: heads.get(node).status != "tombstoned",
            )
            actor = self.actor
            return Traversal(
                start=MemoryURI.trusted(actor, start.ns, uri.id, None),
                levels=tuple(
                    tuple(
                        Neighbor(
                            uri=MemoryURI.trusted(actor, heads.get(step.id).ns, step.id, None),
                            depth=step.depth,
                            via=MemoryURI.trusted(actor, heads.get(step.via).ns, step.via, None),
                            relation=step.relation,
                            direction=step.direction,
                            strength=step.strength / PPM,
                        )
                        for step in level
                    )
                    for level in levels
                ),
            )

    def centrality(self, ref: MemoryRef) -> float:
        """In-degree centrality in 0..1: active in-edges over the highest in-degree."""
        uri = self._parse_ref(ref, allow_id=True)
        with self._reading() as txn:
            _read_head(txn, uri)
            highest = max_in_degree(txn)
            return read_in_degree(txn, uri.id) / highest if highest else 0.0

    def _reading(self) -> _Reading:
        return _Reading(self)

    def resolve(self, ref: MemoryRef) -> Record:
        """The version a URI names: its pinned version, or the head without ``@version``.

        A tombstoned memory still resolves (``record.status == "tombstoned"``).

        Raises:
            URIError: a malformed URI. NotFoundError: no such memory or version.
        """
        uri = self._parse_ref(ref, allow_id=True)
        with self._reading() as txn:
            head = _read_head(txn, uri)
            version = head.head if uri.version is None else uri.version
            return _read_record(txn, self.actor, uri, head, version)

    def exists(self, ref: MemoryRef) -> bool:
        """Whether the memory (and the pinned version, if any) exists."""
        try:
            self.resolve(ref)
        except NotFoundError:
            return False
        return True

    def history(self, ref: MemoryRef) -> list[Record]:
        """Every version of a memory, oldest first."""
        uri = self._parse_ref(ref, allow_id=True)
        with self._reading() as txn:
            head = _read_head(txn, uri)
            return [_read_record(txn, self.actor, uri, head, v) for v in range(1, head.latest + 1)]

    @property
    def seq(self) -> int:
        """The seq of the last journal entry (0 for an empty journal)."""
        with self._reading() as txn:
            return txn.last_seq()

    def journal(self, since: int = 0) -> Iterator[Entry]:
        """The change feed: every entry with ``seq > since``, in order.

        Entries are read in chunks, each in a short read transaction of its own, so a
        long-lived iteration holds no read (a held read would pin old pages and keep the
        map from growing); entries appended meanwhile are included.

        Args:
            since: any non-negative integer. A ``since`` at or past the end of the
                journal yields nothing (a caught-up feed), however large it is.

        Raises:
            ValidationError: ``since`` is not a non-negative integer.
            CorruptionError: the journal's keys are not dense (J1) or an entry does not
                decode (J6).
        """
        for chunk in self._journal_chunks(since):
            for seq, data in chunk:
                entry = decode_entry(data)
                if entry.seq != seq:
                    raise CorruptionError(
                        f"journal key {seq} holds entry {entry.seq}",
                        table="journal",
                        operation="read",
                    )
                yield entry

    def journal_bytes(self, since: int = 0) -> Iterator[tuple[int, bytes]]:
        """The raw canonical bytes of every entry with ``seq > since``, as ``(seq, bytes)``.

        Read like :meth:`journal`: in chunks of short read transactions, so no read is
        held between yields.

        Args:
            since: any non-negative integer; at or past the end of the journal nothing
                is yielded.

        Raises:
            ValidationError: ``since`` is not a non-negative integer.
            CorruptionError: the journal's keys are not dense (J1).
        """
        for chunk in self._journal_chunks(since):
            yield from chunk

    def _journal_chunks(self, since: int) -> Iterator[list[tuple[int, bytes]]]:
        """The journal after ``since`` as lists of ``(seq, bytes)``, each list read in a
        read transaction of its own that ends before the list is handed out."""
        if type(since) is not int or since < 0:
            raise ValidationError(
                f"must be a non-negative integer, not {since!r}", field="since"
            )
        next_seq = since + 1
        while next_seq <= _MAX_SEQ:  # seqs are u64 keys: nothing lies past the largest
            chunk: list[tuple[int, bytes]] = []
            with self._reading() as txn, txn.cursor("journal") as cur:
                if not cur.set_range(seq_key(next_seq)):
                    return
                for key, value in cur:
                    seq = seq_from_key(key)
                    if seq != next_seq:
                        raise CorruptionError(
                            f"journal key {seq} follows {next_seq - 1}; expected {next_seq}",
                            table="journal",
                            operation="read",
                        )
                    chunk.append((seq, bytes(value)))
                    next_seq += 1
                    if len(chunk) == _JOURNAL_CHUNK:
                        break
            yield chunk
            if len(chunk) < _JOURNAL_CHUNK:
                return

    def stats(self) -> Stats:
        """Counts taken in one read: journal length, memories, and entries per table."""
        with self._reading() as txn:
            tables = {name: self._env.table_entries(txn, name) for name in TABLES}
            return Stats(
                seq=txn.last_seq(),
                memories=tables["heads"],
                tables=tables,
                map_size=self._env.map_size(),
                hash_name=self.hash_name,
            )

    def table_digests(self) -> dict[str, str]:
        """A BLAKE3 hex digest of every table's keys and values, taken in one read.

        Two stores with equal digests hold byte-identical tables.
        """
        with self._reading() as txn:
            return {name: self._env.table_digest(txn, name).hex() for name in TABLES}

    # -- commitments ------------------------------------------------------------------------

    def overall_root(self) -> bytes:
        """The 32-byte OverallRoot committing to the journal and every memory's head."""
        with self._reading() as txn:
            return roots(self.hash_name, txn.get, txn.last_seq())[2]

    def roots(self) -> SnapshotManifest:
        """The current roots as an (unstored) manifest, ``at`` set to 0."""
        with self._reading() as txn:
            return manifest_for(self.actor, self.hash_name, txn.get, txn.last_seq(), 0)

    def snapshot(self, *, at: int | None = None) -> SnapshotManifest:
        """Store a :class:`SnapshotManifest` of the current state and return it.

        Snapshots are not derived: ``replay.verify`` recomputes the roots at each stored
        snapshot's seq and reports any difference. Taking a snapshot twice at the same seq
        returns the stored one.
        """
        at = self._at(at)
        if self._active_batch() is not None:
            raise CortexError("take a snapshot outside a batch (it records committed state)")

        def take(txn: WriteTxn) -> SnapshotManifest:
            seq = txn.last_seq()
            stored = txn.get("snapshots", seq_key(seq))
            if stored is not None:
                txn.abort()
                return SnapshotManifest.decode(stored)
            manifest = manifest_for(self.actor, self.hash_name, txn.get, seq, at)
            txn.put_snapshot(seq_key(seq), manifest.encode())
            return manifest

        return self._env.write_small(take)

    def snapshots(self) -> list[SnapshotManifest]:
        """Every stored snapshot manifest, oldest first."""
        with self._reading() as txn, txn.cursor("snapshots") as cur:
            return [SnapshotManifest.decode(bytes(value)) for _, value in cur]

    def rebuild(self, *, progress: Any = None) -> int:
        """Drop every derived table and replay the journal into it, in one transaction.

        Returns the number of entries replayed; ``progress(done, total)`` is called as it
        goes. The result is byte-identical to the incremental state (J4).
        """
        from .replay import rebuild

        return rebuild(self, progress=progress)

    def prove(self, ref: MemoryRef) -> MemoryProof:
        """A proof that a memory version is committed by :meth:`overall_root`.

        It holds the memory's SMT membership proof (head record and head version) and the
        MMR inclusion proof of the journal entry that wrote the resolved version. Check it
        with :func:`cortexgraph.merkle.verify_memory_proof` — no database needed.
        """
        uri = self._parse_ref(ref, allow_id=True)
        with self._reading() as txn:
            head = _read_head(txn, uri)
            version = head.head if uri.version is None else uri.version
            if version > head.latest:
                raise NotFoundError(f"no version {version} of {_describe(uri)}")
            target = MemoryURI.trusted(self.actor, head.ns, uri.id, version)
            return build_memory_proof(self.hash_name, txn.get, target, txn.last_seq(), version)

    # -- shared helpers --------------------------------------------------------------------

    def _at(self, at: int | None) -> int:
        if at is None:
            at = self.clock.now_ms()
            if type(at) is not int or not 0 <= at <= _MAX_AT:
                raise ValidationError(f"the clock returned {at!r}", field="at")
            return at
        if type(at) is not int or not 0 <= at <= _MAX_AT:
            raise ValidationError(
                f"must be integer milliseconds since the epoch, not {at!r}", field="at"
            )
        return at

    def _parse_ref(self, ref: MemoryRef, *, allow_id: bool) -> MemoryURI | _BareId:
        if isinstance(ref, MemoryURI):
            uri = ref
        elif type(ref) is str:
            if ref.startswith("cx://"):
                uri = MemoryURI.parse(ref)
            elif allow_id and len(ref) == 2 * ID_SIZE:
                try:
                    return _BareId(bytes.fromhex(ref))
                except ValueError:
                    raise URIError("not a memory URI or a 32-digit hex id", uri=ref) from None
            else:
                raise URIError("expected cx://<actor>/<ns>/<id-hex>[@<version>]", uri=ref)
        elif type(ref) is bytes and allow_id and len(ref) == ID_SIZE:
            return _BareId(ref)
        else:
            raise ValidationError(
                f"must be a MemoryURI, a URI string or a memory id, not {type(ref).__name__}",
                field="uri",
            )
        if uri.actor != self.actor:
            raise NotFoundError(f"{uri} belongs to actor {uri.actor!r}, not {self.actor!r}")
        return uri

    def _check_after_commit(self, first_seq: int, entries: list[tuple[Entry, bytes]]) -> None:
        """Expensive invariant checks, run when CORTEXGRAPH_INVARIANTS=1 (J1, J6, M9).

        J1/J6: the batch's entries are stored at consecutive seqs and round-trip. M9: the
        ``mmr`` table holds exactly the nodes of an MMR of the journal's size. (The full
        walk of the ``smt`` table, ``smt_store_check``, costs O(rows) and is left to
        ``replay.verify`` and the tests; run per commit it tripled the suite's time.)
        """
        with self._reading() as txn:
            last = txn.last_seq()
            nodes = self._env.table_entries(txn, "mmr")
            if nodes != mmr_node_count(last):
                raise CorruptionError(f"M9: {nodes} MMR nodes for {last} entries")
            # another process may have committed after this batch: the journal ends at or
            # after the batch's last entry, never before it
            if entries and last < entries[-1][0].seq:
                raise CorruptionError(f"J1: journal ends at {last}, before {entries[-1][0].seq}")
            for expected_seq, (entry, data) in enumerate(entries, start=first_seq):
                stored = txn.get("journal", seq_key(expected_seq))
                if stored != data or entry.seq != expected_seq:
                    raise CorruptionError(f"J1: journal seq {expected_seq} is not what was written")
                if decode_entry(stored) != entry:
                    raise CorruptionError(f"J6: journal seq {expected_seq} does not round-trip")


@attrs.frozen
class Stats:
    """What :meth:`Cortex.stats` reports."""

    seq: int
    memories: int
    tables: dict[str, int]
    map_size: int
    hash_name: str


@attrs.frozen
class _BareId:
    """A memory named by id alone (no actor or namespace to check)."""

    id: bytes
    version: int | None = None


class _IndexedRead:
    """The context manager of :meth:`Cortex._indexed_read`: ``(txn, index, seq)``."""

    __slots__ = ("_ctx", "_cx")

    def __init__(self, cx: Cortex) -> None:
        self._cx = cx
        self._ctx: Any = None

    def __enter__(self) -> tuple[ReadTxn, ColumnIndex, int]:
        cx = self._cx
        cx._index_lock.acquire()
        try:
            index = cx._column_index()
            self._ctx = cx._env.read()
            txn: ReadTxn = self._ctx.__enter__()
            try:
                return txn, index, index.refresh(txn)
            except BaseException:
                self._ctx.__exit__(None, None, None)
                raise
        except BaseException:
            cx._index_lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self._ctx.__exit__(*exc)
        finally:
            self._cx._index_lock.release()


class _Reading:
    """Read through the active batch of this thread (read-your-writes), else a snapshot."""

    __slots__ = ("_ctx", "_cx")

    def __init__(self, cx: Cortex) -> None:
        self._cx = cx
        self._ctx: Any = None

    def __enter__(self) -> ReadTxn:
        active = self._cx._active_batch()
        if active is not None:
            return active._txn
        self._ctx = self._cx._env.read()
        txn: ReadTxn = self._ctx.__enter__()
        return txn

    def __exit__(self, *exc: object) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


def _read_head(txn: ReadTxn, uri: MemoryURI | _BareId) -> HeadState:
    raw = txn.get("heads", uri.id)
    if raw is None:
        raise NotFoundError(f"no memory {_describe(uri)}")
    head = HeadState.decode(raw)
    if isinstance(uri, MemoryURI) and head.ns != uri.ns:
        raise NotFoundError(f"no memory {uri} (its id lives in namespace {head.ns!r})")
    return head


def _read_record(
    txn: ReadTxn, actor: str, uri: MemoryURI | _BareId, head: HeadState, version: int
) -> Record:
    raw = txn.get("versions", version_key(uri.id, version)) if version <= head.latest else None
    if raw is None:
        raise NotFoundError(f"no version {version} of {_describe(uri)} (latest is {head.latest})")
    state = VersionState.decode(raw)
    memory = state.memory()
    if memory.type_name != head.type_name:
        raise CorruptionError(f"{_describe(uri)} version {version} has the wrong type")
    return Record.of(actor, uri.id, head, version, state, memory)


class _Memo:
    """What a handle keeps of a column-index row while its memory is unchanged (the index's
    per-row memos): the head version's record, and the forms rendered from it with their
    token counts by the default estimator."""

    __slots__ = ("forms", "record")

    def __init__(self, record: Record) -> None:
        self.record = record
        self.forms: dict[str, tuple[str, int]] = {}

    def shown(self, form: str) -> tuple[str, int]:
        """``render(record, form)`` and its ``estimate_tokens``."""
        shown = self.forms.get(form)
        if shown is None:
            text = render(self.record, form)
            shown = self.forms[form] = (text, estimate_tokens(text))
        return shown


def _row_memo(txn: ReadTxn, actor: str, index: ColumnIndex, row: int, seq: int) -> _Memo:
    """The memo of the memory in column-index row ``row``, as ``txn`` (at journal seq
    ``seq``, the value ``index.refresh(txn)`` returned) sees it: read and decoded the first
    time, kept by the index until the memory changes."""
    memo: _Memo | None = index.memo(row, seq)
    if memo is None:
        memory_id = index.ids[row]
        raw = txn.get("heads", memory_id)
        if raw is None:
            raise CortexError(f"memory {memory_id.hex()} vanished from the store")
        head = HeadState.decode(raw)
        uri = MemoryURI.trusted(actor, head.ns, memory_id, head.head)
        memo = _Memo(_read_record(txn, actor, uri, head, head.head))
        index.remember(row, memo, seq)
    return memo


def _row_record(txn: ReadTxn, actor: str, index: ColumnIndex, row: int, seq: int) -> Record:
    """The head version of the memory in column-index row ``row`` (see :func:`_row_memo`)."""
    return _row_memo(txn, actor, index, row, seq).record


def _describe(uri: MemoryURI | _BareId) -> str:
    return str(uri.head) if isinstance(uri, MemoryURI) else uri.id.hex()


class Batch:
    """One atomic group of mutations: one LMDB write transaction (J3).

    Use it as a context manager; it offers the same mutation verbs as :class:`Cortex`
    (``write``, ``update``, ``update_head``, ``tombstone``) and ``resolve``, which sees
    the batch's own writes. Batches do not nest.

    A verb that fails validation touches nothing, so the batch stays usable if the
    caller catches the error. A failure after the store was touched (corruption, I/O)
    poisons the batch: it will roll back at the end of the ``with`` block.
    """

    def __init__(self, cx: Cortex) -> None:
        self._cx = cx
        self._txn: WriteTxn = None  # type: ignore[assignment]
        self._entries: list[tuple[Entry, bytes]] = []
        self._first_seq = 0
        self._next_seq = 0
        self._failed: BaseException | None = None
        self._done = False
        self._dirty: dict[bytes, None] = {}  # memories whose head changed: the SMT to update
        self._dirty_edges: dict[bytes, None] = {}  # out-keys of edges that changed

    # -- context ----------------------------------------------------------------------------

    def __enter__(self) -> Batch:
        cx = self._cx
        if cx._active_batch() is not None:
            raise CortexError("batches do not nest; use the batch that is already open")
        if self._done or self._txn is not None:
            raise CortexError("a batch can be used once")
        cx._env.hold_writer()  # kept until the batch ends, across any regrowth (E4)
        try:
            self._txn = cx._env.begin_write()
            try:
                self._first_seq = self._next_seq = self._txn.last_seq() + 1
            except BaseException:
                self._txn.abort()
                raise
        except BaseException:
            cx._env.release_writer()
            raise
        cx._local.batch = self
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._cx._local.batch = None
        self._done = True
        try:
            if exc_type is not None or self._failed is not None:
                self._txn.abort()
                if exc_type is None and self._failed is not None:
                    raise CortexError(
                        "the batch was rolled back because an operation in it failed after"
                        f" touching the store: {self._failed!r}"
                    ) from self._failed
                return
            self._commit()
        finally:
            self._txn.abort()  # a no-op once committed; ends a transaction a failure left
            self._cx._env.release_writer()
        if self._cx._embed_on_write and self._dirty:
            # committed; embedding outside the writer lock keeps other writers going
            embed_written(self._cx, list(self._dirty))

    def _commit(self) -> None:
        try:
            if self._dirty or self._dirty_edges:
                txn = self._txn
                txn.apply_mutations(
                    smt_mutations(self._cx.hash_name, txn.get, self._dirty, self._dirty_edges)
                )
            self._txn.commit()
        except MapFull:
            self._regrow()
            self._commit()
            return
        if self._cx._check_invariants:
            self._cx._check_after_commit(self._first_seq, self._entries)

    def _check_open(self) -> None:
        if self._done or self._txn is None:
            raise CortexError("the batch is not open; use it inside a `with` block")

    # -- appending ----------------------------------------------------------------------------

    def _apply(self, entry: Entry, data: bytes) -> None:
        txn = self._txn
        txn.append_entry(entry.seq, data)
        txn.apply_mutations(apply(self._cx._identity, entry, txn, trusted=True))
        txn.apply_mutations(mmr_mutations(self._cx.hash_name, txn.get, entry.seq - 1, data))
        self._dirty.update(dict.fromkeys(head_ids(entry.op, entry.fields)))
        self._dirty_edges.update(dict.fromkeys(edge_keys(entry.op, entry.fields)))

    def _append(self, entry: Entry) -> None:
        """Journal ``entry`` and apply its derived changes, growing the map if needed."""
        data = encode_entry(entry)
        try:
            while True:
                try:
                    self._apply(entry, data)
                    break
                except MapFull:
                    self._regrow()  # doubles the map; loops until this entry fits too
        except BaseException as exc:
            self._failed = exc
            raise
        self._entries.append((entry, data))
        self._next_seq += 1

    def _regrow(self) -> None:
        """Abort, double the map, and re-apply this batch's entries in a new transaction."""
        self._txn.abort()
        while True:
            self._cx._env.grow()
            self._txn = self._cx._env.begin_write()
            try:
                for entry, data in self._entries:
                    self._apply(entry, data)
                return
            except MapFull:
                self._txn.abort()

    # -- verbs -----------------------------------------------------------------------------

    def write(self, memory: Memory, *, ns: str = DEFAULT_NS, at: int | None = None) -> MemoryURI:
        """Store a new memory (see :meth:`Cortex.write`)."""
        self._check_open()
        if not isinstance(memory, Memory):
            raise ValidationError(
                f"must be one of the nine memory types, not {type(memory).__name__}",
                field="memory",
            )
        if isinstance(memory, LearnWeights):
            raise ValidationError(_LEARNED_ONLY, field="memory")
        if isinstance(memory, Attest):
            self._check_cited(memory)
        return self._write(memory, ns=ns, at=at)

    def _write(self, memory: Memory, *, ns: str, at: int | None) -> MemoryURI:
        """Journal the write of a memory the caller has checked (``attest`` writes its
        Attest and LearnWeights through here)."""
        check_name(ns, "ns")
        at = self._cx._at(at)
        body, body_bytes = encode_body(memory)
        seq = self._next_seq
        mid = memory_id(self._cx._identity, ns, seq, body_bytes)
        self._append(Entry(seq, at, "write", ns, {"id": mid, "body": body}, memory, body_bytes))
        if self._cx._autolink:
            autolink(self, mid, ns, at)
        return MemoryURI.trusted(self._cx.actor, ns, mid, 1)

    def _set_status(self, memory_id: bytes, status: str, *, at: int) -> MemoryURI:
        """Journal a lifecycle move of a memory (used by ``compact``)."""
        self._check_open()
        head = _read_head(self._txn, _BareId(memory_id))
        entry = Entry(self._next_seq, at, "status", head.ns, {"id": memory_id, "status": status})
        self._append(entry)
        return MemoryURI.trusted(self._cx.actor, head.ns, memory_id, head.head)

    def _mutable_head(self, ref: MemoryRef) -> tuple[MemoryURI | _BareId, HeadState]:
        self._check_open()
        uri = self._cx._parse_ref(ref, allow_id=True)
        head = _read_head(self._txn, uri)
        if head.status == "tombstoned":
            raise TombstonedError(f"{_describe(uri)} is tombstoned and cannot change")
        return uri, head

    def update(
        self,
        ref: MemoryRef,
        *,
        expected_version: int | None = None,
        at: int | None = None,
        **changes: Any,
    ) -> MemoryURI:
        """Write a new version (see :meth:`Cortex.update`)."""
        uri, head = self._mutable_head(ref)
        if head.type_name == LearnWeights.type_name:
            raise ValidationError(_LEARNED_ONLY, field="memory")
        if expected_version is not None:
            if type(expected_version) is not int or expected_version < 1:
                raise ValidationError("must be a positive integer", field="expected_version")
            if expected_version != head.head:
                raise VersionConflictError(
                    f"{_describe(uri)} is at version {head.head}, not {expected_version}",
                    expected=expected_version,
                    actual=head.head,
                )
        if not changes:
            raise ValidationError("update needs at least one field to change", field="changes")
        at = self._cx._at(at)
        raw = self._txn.get("versions", version_key(uri.id, head.head))
        if raw is None:
            raise CorruptionError(f"{_describe(uri)} has no stored head version")
        current = VersionState.decode(raw)
        fields = dict(attrs.asdict(current.memory(), recurse=False))
        fields.update(changes)
        memory = type_of(head)(**fields)
        body, body_bytes = encode_body(memory)
        here = MemoryURI.trusted(self._cx.actor, head.ns, uri.id, head.head)
        if body_bytes == current.body:
            return here
        if isinstance(memory, Attest):
            self._check_cited(memory)
        version = head.latest + 1
        fields = {"id": uri.id, "version": version, "body": body}
        self._append(Entry(self._next_seq, at, "update", head.ns, fields, memory, body_bytes))
        return here.at_version(version)

    def update_head(self, ref: MemoryRef, *, version: int, at: int | None = None) -> MemoryURI:
        """Move the head to an existing version (see :meth:`Cortex.update_head`)."""
        uri, head = self._mutable_head(ref)
        if type(version) is not int or version < 1:
            raise ValidationError(f"must be a positive integer, not {version!r}", field="version")
        if version > head.latest:
            raise NotFoundError(
                f"no version {version} of {_describe(uri)} (latest is {head.latest})"
            )
        at = self._cx._at(at)
        here = MemoryURI.trusted(self._cx.actor, head.ns, uri.id, version)
        if version != head.head:
            self._append(
                Entry(self._next_seq, at, "head", head.ns, {"id": uri.id, "version": version})
            )
        return here

    def tombstone(self, ref: MemoryRef, *, reason: str = "", at: int | None = None) -> MemoryURI:
        """Tombstone a memory (see :meth:`Cortex.tombstone`)."""
        uri, head = self._mutable_head(ref)
        if type(reason) is not str:
            raise ValidationError(f"must be a string, not {type(reason).__name__}", field="reason")
        if len(reason) > MAX_SHORT_TEXT:
            raise ValidationError(f"longer than {MAX_SHORT_TEXT} characters", field="reason")
        check_utf8(reason, "reason")
        at = self._cx._at(at)
        fields: dict[str, Any] = {"id": uri.id}
        if reason:
            fields["reason"] = reason
        self._append(Entry(self._next_seq, at, "tombstone", head.ns, fields))
        return MemoryURI.trusted(self._cx.actor, head.ns, uri.id, head.head)

    def _edge_ends(
        self, src: MemoryRef, dst: MemoryRef, relation: str
    ) -> tuple[HeadState, bytes, bytes, str]:
        self._check_open()
        rel = normalise_relation(relation)
        src_uri = self._cx._parse_ref(src, allow_id=True)
        dst_uri = self._cx._parse_ref(dst, allow_id=True)
        if src_uri.id == dst_uri.id:
            raise ValidationError("a memory cannot be linked to itself", field="dst")
        src_head = _read_head(self._txn, src_uri)
        dst_head = _read_head(self._txn, dst_uri)
        for uri, head in ((src_uri, src_head), (dst_uri, dst_head)):
            if head.status == "tombstoned":
                raise TombstonedError(f"{_describe(uri)} is tombstoned and cannot be linked")
        return src_head, src_uri.id, dst_uri.id, rel

    def add_edge(
        self,
        src: MemoryRef,
        dst: MemoryRef,
        relation: str,
        *,
        strength: float = 1.0,
        status: str = "active",
        origin: str = "system",
        at: int | None = None,
    ) -> Edge:
        """Link two memories (see :meth:`Cortex.add_edge`)."""
        src_head, src_id, dst_id, rel = self._edge_ends(src, dst, relation)
        ppm = strength_ppm(strength)
        if status not in EDGE_STATUSES:
            raise ValidationError(
                f"must be one of {', '.join(EDGE_STATUSES)}, not {status!r}", field="status"
            )
        if origin not in ORIGINS:
            raise ValidationError(
                f"must be one of {', '.join(ORIGINS)}, not {origin!r}", field="origin"
            )
        if rel == "supersedes" and origin != "human":
            raise ValidationError(
                f"a supersedes edge needs origin 'human', not {origin!r}: replacing a memory"
                " is a human decision (add it as 'relates_to' or status='suggested' instead)",
                field="origin",
            )
        at = self._cx._at(at)
        raw = self._txn.get("edges", edge_out_key(src_id, rel, dst_id))
        state = None if raw is None else EdgeState.decode(raw)
        if state is None or (state.status, state.strength, state.origin) != (status, ppm, origin):
            state = EdgeState(status, ppm, origin, at, self._next_seq)
            fields = {
                "src": src_id,
                "dst": dst_id,
                "rel": rel,
                "strength": ppm,
                "status": status,
                "origin": origin,
            }
            self._append(Entry(self._next_seq, at, "edge", src_head.ns, fields))
        heads = _HeadCache(self._txn)
        return _edge_record(self._cx.actor, heads, src_id, rel, dst_id, state)

    def remove_edge(
        self, src: MemoryRef, dst: MemoryRef, relation: str, *, at: int | None = None
    ) -> None:
        """Remove an edge (see :meth:`Cortex.remove_edge`)."""
        src_head, src_id, dst_id, rel = self._edge_ends(src, dst, relation)
        if self._txn.get("edges", edge_out_key(src_id, rel, dst_id)) is None:
            raise NotFoundError(f"no {rel} edge from {src_id.hex()} to {dst_id.hex()}")
        at = self._cx._at(at)
        fields = {"src": src_id, "dst": dst_id, "rel": rel}
        self._append(Entry(self._next_seq, at, "unedge", src_head.ns, fields))

    def attest(
        self,
        cited: Iterable[MemoryRef],
        *,
        outcome: str,
        text: str = "",
        ns: str = DEFAULT_NS,
        at: int | None = None,
    ) -> Attestation:
        """Record an outcome and learn from it (see :meth:`Cortex.attest`)."""
        self._check_open()
        if isinstance(cited, (str, bytes, MemoryURI)) or not isinstance(cited, Iterable):
            raise ValidationError("must be a list of memory URIs", field="cited")
        refs = list(cited)
        if not refs:
            raise ValidationError("must cite at least one memory", field="cited")
        if outcome not in OUTCOMES:
            raise ValidationError(
                f"must be one of {', '.join(OUTCOMES)}, not {outcome!r}", field="outcome"
            )
        check_name(ns, "ns")
        at = self._cx._at(at)
        txn = self._txn
        pinned: dict[bytes, MemoryURI] = {}
        for ref in refs:
            uri = self._cx._parse_ref(ref, allow_id=True)
            head = _read_head(txn, uri)
            if uri.id not in pinned:
                version = head.head if uri.version is None else uri.version
                if version > head.latest:
                    raise NotFoundError(
                        f"no version {version} of {_describe(uri)} (latest is {head.latest})"
                    )
                pinned[uri.id] = MemoryURI.trusted(self._cx.actor, head.ns, uri.id, version)
        profiles = [memory_factors(txn, memory_id, at) for memory_id in pinned]
        before = read_weights(txn)
        after = learn_weights(before, profiles, outcome)
        attest = Attest(text=text, cited=[str(u) for u in pinned.values()], outcome=outcome)
        attest_uri = self._write(attest, ns=ns, at=at)  # cited: pinned above, all present
        learn = LearnWeights(weights=after, attest=str(attest_uri))
        learn_uri = self._write(learn, ns=ns, at=at)
        return Attestation(attest_uri, learn_uri, before, after)

    def _check_cited(self, attest: Attest) -> None:
        """Every citation of ``attest`` names an existing version of a memory of this
        store (see :func:`~cortexgraph.core.taxonomy.cited_uris` for the form)."""
        for uri in cited_uris(attest, self._cx.actor):
            raw = self._txn.get("heads", uri.id)
            head = None if raw is None else HeadState.decode(raw)
            if head is None or head.ns != uri.ns:
                raise ValidationError(f"{uri} names no memory of this store", field="cited")
            if uri.version is not None and uri.version > head.latest:
                raise ValidationError(
                    f"{uri} names version {uri.version}, but the latest is {head.latest}",
                    field="cited",
                )

    def record_access(self, uris: list[MemoryURI], *, at: int) -> None:
        """Journal one late-binding read of each memory (one ``access`` entry per ns)."""
        self._check_open()
        by_ns: dict[str, set[bytes]] = {}
        for uri in uris:
            by_ns.setdefault(uri.ns, set()).add(uri.id)
        for ns in sorted(by_ns):
            ids = sorted(by_ns[ns])
            for start in range(0, len(ids), MAX_ACCESS_IDS):
                fields = {"ids": ids[start : start + MAX_ACCESS_IDS]}
                self._append(Entry(self._next_seq, at, "access", ns, fields))

    def resolve(self, ref: MemoryRef) -> Record:
        """Resolve a memory, seeing this batch's own writes."""
        self._check_open()
        return self._cx.resolve(ref)


@attrs.frozen
class Attestation:
    """What :meth:`Cortex.attest` journaled.

    Attributes:
        attest: the ``Attest`` memory (the outcome and the pinned URIs it cited).
        learn: the ``LearnWeights`` memory holding the new weights.
        before, after: the salience weights (ppm) before and after learning.
    """

    attest: MemoryURI
    learn: MemoryURI
    before: tuple[int, ...]
    after: tuple[int, ...]


@attrs.frozen
class Edge:
    """An edge as stored: ``src --relation--> dst``.

    Attributes:
        src, dst: the two memories (head URIs).
        relation: the canonical relation name.
        strength: 0..1 (stored as integer parts per million).
        status: ``"active"`` or ``"suggested"`` (suggested edges are not traversed).
        origin: who asserted it: ``"human"``, ``"llm"`` or ``"system"``.
        at: when it was last added or changed (ms); seq: the journal entry that did.
    """

    src: MemoryURI
    dst: MemoryURI
    relation: str
    strength: float
    status: str
    origin: str
    at: int
    seq: int


@attrs.frozen
class Neighbor:
    """A memory reached by :meth:`Cortex.traverse`, and the edge it was first reached by.

    ``direction`` is ``"out"`` when the edge is ``via --relation--> uri`` and ``"in"``
    when it is ``uri --relation--> via``.
    """

    uri: MemoryURI
    depth: int
    via: MemoryURI
    relation: str
    direction: str
    strength: float


@attrs.frozen
class Traversal:
    """What :meth:`Cortex.traverse` found: ``levels[d]`` holds the memories at depth d + 1."""

    start: MemoryURI
    levels: tuple[tuple[Neighbor, ...], ...]

    def __iter__(self) -> Iterator[Neighbor]:
        """Every memory found, nearest first."""
        for level in self.levels:
            yield from level

    def __len__(self) -> int:
        return sum(len(level) for level in self.levels)


class _HeadCache:
    """Heads read once per call (traversals revisit the same memories)."""

    __slots__ = ("_heads", "_txn")

    def __init__(self, txn: ReadTxn) -> None:
        self._txn = txn
        self._heads: dict[bytes, HeadState] = {}

    def get(self, memory_id: bytes) -> HeadState:
        head = self._heads.get(memory_id)
        if head is None:
            raw = self._txn.get("heads", memory_id)
            if raw is None:
                raise CorruptionError(f"an edge names memory {memory_id.hex()}, which has no head")
            head = self._heads[memory_id] = HeadState.decode(raw)
        return head


def _edge_record(
    actor: str, heads: _HeadCache, src: bytes, rel: str, dst: bytes, state: EdgeState
) -> Edge:
    return Edge(
        src=MemoryURI.trusted(actor, heads.get(src).ns, src, None),
        dst=MemoryURI.trusted(actor, heads.get(dst).ns, dst, None),
        relation=rel,
        strength=state.strength / PPM,
        status=state.status,
        origin=state.origin,
        at=state.at,
        seq=state.seq,
    )


def _edges_of(
    txn: ReadTxn, actor: str, heads: _HeadCache, memory_id: bytes, ns: str, way: str
) -> list[Edge]:
    found = []
    for key, value in txn.iter_items("edges", (b"o" if way == "out" else b"i") + memory_id):
        rel = relation_name(key[17])
        other = bytes(key[18:])
        src, dst = (memory_id, other) if way == "out" else (other, memory_id)
        found.append(_edge_record(actor, heads, src, rel, dst, EdgeState.decode(value)))
    return found
