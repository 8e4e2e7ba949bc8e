"""The facade: :func:`open` and :class:`Cortex`.

Every verb follows one shape: validate the arguments, compute the journal entry with pure
code from ``core``, then append it and apply its derived changes in one LMDB write
transaction (a :class:`~cortexgraph.batch.Batch`). Outside an explicit ``with cx.batch()``
each verb is its own batch; inside one, verbs called on the batch *or* on the handle join
it. ``Cortex`` holds a :class:`~cortexgraph.handle.Handle` and delegates each verb to the
module that carries it out.
"""

from __future__ import annotations

import functools
import os
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from .batch import Batch, record_access
from .clock import Clock
from .core.commitments import MemoryProof, SnapshotManifest, build_memory_proof, manifest_for, roots
from .core.forms import TokenEstimator
from .core.graph import check_traversal
from .core.hashing import hash_function
from .core.journal import Entry, decode_entry
from .core.predicates import Predicate
from .core.salience import FACTOR_NAMES, PPM, cold_score
from .core.signals import max_in_degree, memory_factors, read_access, read_in_degree, read_weights
from .core.state import HeadState, Record
from .core.uri import MemoryURI, check_name
from .embed import Embedder
from .embedding import backfill_embeddings
from .embedding import sync_vectors as _sync_vectors
from .errors import CorruptionError, CortexError, NotFoundError, StorageError, ValidationError
from .find import FindResult, run_find
from .handle import Handle, open_handle
from .index import ColumnIndex
from .reading import (
    HeadCache,
    MemoryRef,
    describe,
    edges_of,
    read_head,
    read_record,
    resolve_in,
    traverse_from,
)
from .recall import RecallResult, run_recall
from .records import Attestation, Edge, Neighbor, Salience, Stats, Traversal
from .store.env import DEFAULT_MAP_SIZE, MAX_MAP_SIZE, TABLES
from .vector.state import VectorState

if TYPE_CHECKING:
    from .compact import CompactReport, ConsolidationCandidate
    from .context import ContextBundle
    from .core.checkpoint import Checkpoint
    from .core.consistency import ConsistencyProof
    from .signing import SigningKey, VerifierKey

# The verbs a short-lived process rarely runs (compact, context, scope, rebuild and append)
# import their modules when called: every command and hook starts a fresh interpreter, and
# those modules (with the replay checks and the context packer) would cost each of them.

__all__ = [
    "Attestation",
    "Batch",
    "Cortex",
    "Edge",
    "Neighbor",
    "Salience",
    "Stats",
    "Traversal",
    "open",
]


_P = ParamSpec("_P")
_T = TypeVar("_T")


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
        sync: make every commit durable before it returns. On Linux a commit then
            appends its entries to the store's journal log and flushes that file once,
            and a system stop is recovered from the log at the next open
            (``docs/reliability.md``); elsewhere LMDB flushes each commit. ``False``
            trades durability of the last commits on power loss for speed; a crash of
            the process loses nothing.
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
    handle = open_handle(
        path,
        actor,
        create=create,
        readonly=readonly,
        map_size=map_size,
        sync=sync,
        hash_name=hash_name,
        embedder=embedder,
        reembed=reembed,
        clock=clock,
    )
    if type(autolink) is not bool:
        handle.env.close()
        raise ValidationError("must be True or False", field="autolink")
    if handle.stale_layout:  # a store of an earlier release: rebuilt from its journal
        from .replay import rebuild

        try:
            rebuild(handle)
        except BaseException:
            handle.env.close()
            raise
        handle.stale_layout = False
    handle.autolink = autolink
    handle.embed_on_write = embed_on_write
    return Cortex(handle)


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


def _in_batch(verb: Callable[Concatenate[Batch, _P], _T]) -> Callable[Concatenate[Cortex, _P], _T]:
    """``Cortex``'s form of a :class:`Batch` verb: run it in the batch open on this thread,
    or in a batch of its own. The signature and docstring are the batch verb's."""

    @functools.wraps(verb)
    def run(cx: Cortex, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        h = cx._handle
        active = h.active_batch()
        if isinstance(active, Batch):
            return verb(active, *args, **kwargs)
        with Batch(h) as batch:
            return verb(batch, *args, **kwargs)

    return run


class Cortex:
    """An open actor memory. Create it with :func:`cortexgraph.open`."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._env = handle.env  # for tests and benches that look at the environment
        self.actor = handle.actor
        self.clock = handle.clock
        self.hash_name = handle.hash_name

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The environment directory."""
        return self._handle.path

    @property
    def readonly(self) -> bool:
        return self._handle.readonly

    @property
    def closed(self) -> bool:
        return self._handle.env.closed

    def close(self) -> None:
        """Close the environment. Closing twice is harmless; using a closed handle raises.

        The handle is closed even when saving the vector index fails (a full disk, say):
        that raises ``StorageError`` after closing, and the index, which is derived, is
        caught up again by the next recall.
        """
        h = self._handle
        if h.active_batch() is not None:
            raise CortexError("cannot close a handle inside one of its batches")
        vectors, h.vectors = h.vectors, None
        failed: OSError | None = None
        try:
            if vectors is not None and not self._handle.env.closed:
                vectors.save()
            h.save_column_snapshot()  # derived, written only every SNAPSHOT_EVERY entries
        except OSError as exc:  # the index is derived: the next open rebuilds what is lost
            failed = exc
        finally:
            self._handle.env.close()
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
        return Batch(self._handle)

    write = _in_batch(Batch.write)
    update = _in_batch(Batch.update)
    update_head = _in_batch(Batch.update_head)
    tombstone = _in_batch(Batch.tombstone)
    archive = _in_batch(Batch.archive)
    add_edge = _in_batch(Batch.add_edge)
    remove_edge = _in_batch(Batch.remove_edge)
    attest = _in_batch(Batch.attest)

    def compact(
        self, *, now: int | None = None, half_lives: Mapping[str, int | None] | None = None
    ) -> CompactReport:
        """Forget what stopped mattering and consolidate near-duplicates, all journaled.

        Active memories whose effective confidence (confidence x recency) fell below 0.3
        and that were not read for 14 days are archived (pinned memories and hubs are
        exempt); archived ones untouched for 30 more days are pruned. Suggested
        ``relates_to`` edges of strength >= 0.5 (from auto-linking) are examined: a pair
        of the same namespace and type with similarity >= 0.7 is merged into the survivor
        (a new version; the other is ``merged`` and linked by ``derived_from``). Archived,
        pruned and merged memories leave find, recall and context but stay resolvable;
        reading an archived one (late binding) restores it. See ``docs/lifecycle.md``.

        Args:
            now: the time the rules are applied at (ms); the clock's by default.
            half_lives: tag -> half-life in days (an integer >= 1) or None (stable). A
                memory carrying one of these tags decays by it instead of by its type's
                half-life; when several of its tags are listed, the shortest finite one
                wins, and it is stable only if all of them are None. Pinned memories and
                the doubling (more than 10 reads, or centrality above 0.5) work as before.

        Raises:
            ValidationError: a bad ``now`` or ``half_lives`` (field ``half_lives``, the
                message naming the key).
        """
        from .compact import run_compact

        return run_compact(self._handle, now=now, half_lives=half_lives)

    def consolidation_candidates(self, *, limit: int = 100) -> tuple[ConsolidationCandidate, ...]:
        """The suggested pairs :meth:`compact` would examine, and what it would do with each.

        Read-only. Each suggested ``relates_to`` edge of strength >= 0.5 (auto-linking makes
        them) is one :class:`~cortexgraph.compact.ConsolidationCandidate`: both head URIs,
        the edge's strength, the similarity compaction computes and its decision
        (``"merge"``, ``"keep"``, ``"weaken"`` or ``"skip"``), computed by the code
        ``compact`` runs, so a ``compact`` right after does exactly this. The order is the
        candidate table's (source id, then target id), the same for the same store.

        Args:
            limit: at most this many pairs (an integer >= 1), the first in that order.

        Raises:
            ValidationError: a bad ``limit`` (field ``limit``).
        """
        from .compact import consolidation_candidates

        return consolidation_candidates(self._handle, limit=limit)

    def scope(
        self,
        where_or_uris: Predicate | Iterable[MemoryRef],
        *,
        limit: int = 100,
        include_edges: bool = True,
        sign_with: SigningKey | None = None,
        prove_from: int | None = None,
    ) -> bytes:
        """A proof-checked slice of this store for a sub-agent, as bytes.

        ``where_or_uris`` is a ``Q`` predicate (the ``limit`` best by salience, as
        :meth:`find` ranks them) or a list of memory URIs (at most ``limit``). The bundle
        holds the manifest (actor, seq, roots), each memory's head record and head version
        with its SMT proof, the edges among them with theirs, and the journal's first entry
        with its MMR proof (it binds the actor's name). Check it with
        :func:`cortexgraph.verify_scope`, which needs no database. Bundles are capped at
        64 MiB. Format: ``docs/scopes.md``.

        ``sign_with`` (a :class:`~cortexgraph.SigningKey`, the ``sign`` extra) adds a
        checkpoint of the bundle's root signed with it, so a sub-agent needs only the
        verifier key; ``prove_from=seq`` adds a consistency proof from the state after
        ``seq`` entries, so a sub-agent that trusts that older root accepts this one (see
        :meth:`prove_consistency` for its cost).
        """
        from .scope import export_scope

        return export_scope(
            self._handle, where_or_uris, limit=limit, include_edges=include_edges,
            sign_with=sign_with, prove_from=prove_from,
        )

    def weights(self) -> tuple[int, ...]:
        """The current salience weights in ppm, in ``FACTOR_NAMES`` order (sum 1,000,000)."""
        with self._handle.reading() as txn:
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
            self._handle,
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
            self._handle,
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
        from .context import run_context

        return run_context(
            self._handle,
            query=query,
            budget_tokens=budget_tokens,
            channel=channel,
            now=now,
            estimator=estimator,
        )

    @property
    def embedder(self) -> Embedder:
        """The embedder vector recall uses (created on first use from the recorded one)."""
        return self._handle.embedder

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
        return backfill_embeddings(self._handle, progress=progress)

    def _vector_state(self) -> VectorState:  # for tests and benches
        return self._handle.vector_state()

    def _column_index(self) -> ColumnIndex:  # for tests and benches
        return self._handle.column_index()

    def _record_access(self, uris: list[MemoryURI], *, at: int) -> None:  # for tests
        record_access(self._handle, uris, at=at)

    def edges(self, ref: MemoryRef, *, direction: str = "out") -> list[Edge]:
        """The edges of a memory, ``"out"`` (it is the source), ``"in"`` or ``"both"``.

        Ordered by direction (out first), then relation, then the other memory's id.
        """
        _, _, direction, _ = check_traversal(0, None, direction, 0.0)
        uri = self._handle.parse_ref(ref, allow_id=True)
        with self._handle.reading() as txn:
            head = read_head(txn, uri)
            heads = HeadCache(txn)
            found = []
            for way in ("out", "in"):
                if direction in (way, "both"):
                    found.extend(edges_of(txn, self.actor, heads, uri.id, head.ns, way))
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
        uri = self._handle.parse_ref(ref, allow_id=True)
        with self._handle.reading() as txn:
            return traverse_from(txn, self.actor, uri, depth, wanted, direction, threshold)

    def centrality(self, ref: MemoryRef) -> float:
        """In-degree centrality in 0..1: active in-edges over the highest in-degree."""
        uri = self._handle.parse_ref(ref, allow_id=True)
        with self._handle.reading() as txn:
            read_head(txn, uri)
            highest = max_in_degree(txn)
            return read_in_degree(txn, uri.id) / highest if highest else 0.0

    def salience(self, ref: MemoryRef, *, now: int | None = None) -> Salience:
        """Why a memory ranks where it does: its five salience factors at ``now``, its
        score with the store's weights, and the access and graph signals behind them.

        Ranking profiles of one's own (an integration's formula) start from these
        numbers instead of re-deriving them.

        Args:
            ref: the memory (URI or id); its head version is scored.
            now: the instant (ms; default: the clock). Only recency depends on it.

        Raises:
            URIError: a malformed reference. NotFoundError: no such memory.
        """
        h = self._handle
        uri = h.parse_ref(ref, allow_id=True)
        at = h.at(now)
        with h.reading() as txn:
            head = read_head(txn, uri)
            factors = memory_factors(txn, uri.id, at)
            count, last = read_access(txn, uri.id)
            return Salience(
                uri=MemoryURI.trusted(h.actor, head.ns, uri.id, head.head),
                factors={name: f / PPM for name, f in zip(FACTOR_NAMES, factors, strict=True)},
                score=cold_score(factors, read_weights(txn)),
                access_count=count,
                last_access=last,
                in_degree=read_in_degree(txn, uri.id),
            )

    def resolve(self, ref: MemoryRef) -> Record:
        """The version a URI names: its pinned version, or the head without ``@version``.

        A tombstoned memory still resolves (``record.status == "tombstoned"``).

        Raises:
            URIError: a malformed URI. NotFoundError: no such memory or version.
        """
        h = self._handle
        uri = h.parse_ref(ref, allow_id=True)
        with h.reading() as txn:
            return resolve_in(txn, h.actor, uri)

    def exists(self, ref: MemoryRef) -> bool:
        """Whether the memory (and the pinned version, if any) exists."""
        try:
            self.resolve(ref)
        except NotFoundError:
            return False
        return True

    def history(self, ref: MemoryRef) -> list[Record]:
        """Every version of a memory, oldest first."""
        uri = self._handle.parse_ref(ref, allow_id=True)
        with self._handle.reading() as txn:
            head = read_head(txn, uri)
            return [read_record(txn, self.actor, uri, head, v) for v in range(1, head.latest + 1)]

    @property
    def seq(self) -> int:
        """The seq of the last journal entry (0 for an empty journal)."""
        with self._handle.reading() as txn:
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
        for chunk in self._handle.journal_chunks(since):
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
        for chunk in self._handle.journal_chunks(since):
            yield from chunk

    def stats(self) -> Stats:
        """Counts taken in one read: journal length, memories by type and status, edges,
        entries per table, sizes and the OverallRoot (see :class:`Stats`)."""
        by_type: Counter[str] = Counter()
        by_status: Counter[str] = Counter()
        with self._handle.reading() as txn:
            tables = {name: self._handle.env.table_entries(txn, name) for name in TABLES}
            with txn.cursor("heads") as cur:
                for _, value in cur:
                    head = HeadState.decode(bytes(value))
                    by_type[head.type_name] += 1
                    by_status[head.status] += 1
            seq = txn.last_seq()
            # no root while the derived tables are dropped (until a rebuild fills them)
            built = tables["mmr"] == seq  # one row per entry
            root = roots(self.hash_name, txn.get, seq)[2] if built else None
        return Stats(
            seq=seq,
            memories=tables["heads"],
            tables=tables,
            map_size=self._handle.env.map_size(),
            hash_name=self.hash_name,
            by_type=dict(sorted(by_type.items())),
            by_status=dict(sorted(by_status.items())),
            edges=tables["edges"] // 2,  # each edge is stored under its out and its in key
            overall_root=root,
            file_bytes=(self.path / "data.mdb").stat().st_size,
        )

    def table_digests(self) -> dict[str, str]:
        """A BLAKE3 hex digest of every table's keys and values, taken in one read.

        Two stores with equal digests hold byte-identical tables (``meta``'s record of
        where the journal log ends aside).
        """
        with self._handle.reading() as txn:
            return {name: self._handle.env.table_digest(txn, name).hex() for name in TABLES}

    # -- commitments ------------------------------------------------------------------------

    def overall_root(self) -> bytes:
        """The 32-byte OverallRoot committing to the journal and every memory's head."""
        with self._handle.reading() as txn:
            return roots(self.hash_name, txn.get, txn.last_seq())[2]

    def as_of(self, seq: int) -> PastView:
        """A read-only view of the memory as it was after journal entry ``seq``.

        The view is a :class:`Cortex` (read-only) over a temporary store that holds the
        journal's first ``seq`` entries and the derived tables they give, built by the same
        in-memory replay a rebuild runs (linear in ``seq``: ``docs/verification.md`` has
        the costs). So ``resolve``, ``find``, ``recall``, ``traverse``, ``context`` and
        ``prove`` answer exactly what this store answered when it held those entries, and
        its ``overall_root()`` is :meth:`root_at`. Vector recall embeds the view's memories
        with this store's embedder on its first use (nothing is cached). Close the view
        (or use it in a ``with`` block) to delete the temporary store.

        Raises:
            ValidationError: not ``0 <= seq <= self.seq``.
        """
        import tempfile

        from .replay import build_past_store

        directory = Path(tempfile.mkdtemp(prefix="cortexgraph-as-of-"))
        try:
            build_past_store(self._handle, seq, directory / self.actor)
            handle = open_handle(
                directory / self.actor, self.actor, create=False, readonly=True,
                map_size=DEFAULT_MAP_SIZE, sync=False, hash_name=self.hash_name,
                embedder=self._handle.embedder, reembed=False, clock=self.clock,
            )  # fmt: skip
        except BaseException:
            _remove_tree(directory)
            raise
        return PastView(handle, directory, seq)

    def root_at(self, seq: int) -> bytes:
        """The OverallRoot of the state after journal entry ``seq``: from the snapshot
        stored at ``seq`` when there is one, else from an in-memory replay of the first
        ``seq`` entries (linear in ``seq``). ``root_at(self.seq) == overall_root()``.

        Raises:
            ValidationError: not ``0 <= seq <= self.seq``.
        """
        from .trust import root_at

        return root_at(self._handle, seq)

    def roots(self) -> SnapshotManifest:
        """The current roots as an (unstored) manifest, ``at`` set to 0."""
        with self._handle.reading() as txn:
            return manifest_for(self.actor, self.hash_name, txn.get, txn.last_seq(), 0)

    def snapshot(
        self, *, at: int | None = None, sign_with: SigningKey | None = None
    ) -> SnapshotManifest:
        """Store a :class:`SnapshotManifest` of the current state and return it.

        Snapshots are not derived: ``replay.verify`` recomputes the roots at each stored
        snapshot's seq and reports any difference. Taking a snapshot twice at the same seq
        returns the stored one.

        Args:
            at: when (default: the clock's now).
            sign_with: a :class:`~cortexgraph.SigningKey` (the ``sign`` extra): also store
                a checkpoint of this state signed with it, in the C2SP tlog-checkpoint
                form (origin: the key's name; size: the journal size; root: the
                OverallRoot); a second key adds its signature to the same checkpoint.
                Read them back with :meth:`checkpoints`. The key is the caller's: the
                store never holds it.

        Raises:
            CortexError: inside a batch. ValidationError: ``sign_with`` is not a key.
            MissingExtraError: ``sign_with`` without the ``sign`` extra.
        """
        from .trust import take_snapshot

        return take_snapshot(self._handle, self._handle.at(at), sign_with)

    def checkpoints(self, *, key: VerifierKey | None = None) -> list[Checkpoint]:
        """The stored signed checkpoints, oldest first.

        With ``key``, only the checkpoints that carry ``key``'s signature, each checked
        with it and against the snapshot manifest stored at its seq.

        Raises:
            VerificationError: a checkpoint does not parse, a signature of ``key`` does
                not verify, a checkpoint does not match the snapshot at its seq, or
                (with ``key``) none carries ``key``'s signature.
        """
        from .trust import read_checkpoints

        return read_checkpoints(self._handle, key)

    def prove_consistency(self, old_seq: int, new_seq: int | None = None) -> ConsistencyProof:
        """A proof that the state after ``new_seq`` entries (default: now) extends the
        state after ``old_seq`` entries: its journal is the older journal with entries
        appended. Check it with :func:`cortexgraph.verify_consistency` before accepting a
        newer root than the one you trust.

        The SMT root of a past state comes from the snapshot stored at that seq when
        there is one (take a snapshot whenever you hand a root out), else from replaying
        the first ``old_seq`` entries in memory (linear in ``old_seq``).

        Raises:
            ValidationError: not ``0 <= old_seq <= new_seq <= seq``.
        """
        from .trust import prove_consistency

        return prove_consistency(self._handle, old_seq, new_seq)

    def snapshots(self) -> list[SnapshotManifest]:
        """Every stored snapshot manifest, oldest first."""
        with self._handle.reading() as txn, txn.cursor("snapshots") as cur:
            return [SnapshotManifest.decode(bytes(value)) for _, value in cur]

    def rebuild(self, *, progress: Any = None) -> int:
        """Drop every derived table and replay the journal into it, in one transaction.

        Returns the number of entries replayed; ``progress(done, total)`` is called as it
        goes. The result is byte-identical to the incremental state (J4).
        """
        from .replay import rebuild

        return rebuild(self._handle, progress=progress)

    def append_entries(
        self,
        entries: Sequence[tuple[int, bytes]],
        *,
        expect_root: tuple[int, bytes] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Append journal entries another store of this actor wrote, as ``(seq, bytes)``
        pairs such as :meth:`journal_bytes` yields, all or nothing.

        Entries the store already holds must be byte-identical and are skipped, so the
        same entries can be appended twice; the rest must continue the journal, and are
        checked and applied exactly as :meth:`rebuild` replays. ``expect_root=(seq,
        root)`` requires that OverallRoot when the journal ends at ``seq``. Returns how
        many entries were appended. Export and import files: :mod:`cortexgraph.io`.

        Raises:
            ReplayError: (a ``CorruptionError``) an entry that differs from the stored
                one, leaves a gap, or does not apply; ``seq`` names it.
            VerificationError: the root differs from ``expect_root``'s.
            ReadOnlyError: a read-only handle. CortexError: inside a batch.
        """
        from .replay import append_entries

        return append_entries(
            self._handle, entries, expect_root=expect_root, progress=progress
        )

    def prove(self, ref: MemoryRef) -> MemoryProof:
        """A proof that a memory version is committed by :meth:`overall_root`.

        It holds the memory's SMT membership proof (head record and head version) and the
        MMR inclusion proof of the journal entry that wrote the resolved version. Check it
        with :func:`cortexgraph.merkle.verify_memory_proof` — no database needed.
        """
        uri = self._handle.parse_ref(ref, allow_id=True)
        with self._handle.reading() as txn:
            head = read_head(txn, uri)
            version = head.head if uri.version is None else uri.version
            if version > head.latest:
                raise NotFoundError(f"no version {version} of {describe(uri)}")
            target = MemoryURI.trusted(self.actor, head.ns, uri.id, version)
            return build_memory_proof(self.hash_name, txn.get, target, txn.last_seq(), version)


def sync_vectors(
    cx: Cortex,
    *,
    progress: Callable[[int, int], None] | None = None,
    indexing: Callable[[int, int], None] | None = None,
) -> int:
    """Bring the vector index of ``cx`` up to the journal's end now; returns how many
    texts were embedded (see :func:`cortexgraph.embedding.sync_vectors`). ``progress``
    follows the embedding, ``indexing`` the inserts into the graph."""
    return _sync_vectors(cx._handle, progress=progress, indexing=indexing)


def _remove_tree(directory: Path) -> None:
    import shutil

    shutil.rmtree(directory, ignore_errors=True)


class PastView(Cortex):
    """A read-only :class:`Cortex` over the state after an earlier journal entry (made by
    :meth:`Cortex.as_of`). Closing it deletes its temporary store; so does the end of the
    process if it is never closed.

    Attributes:
        as_of_seq: the seq of the last journal entry the view holds.
    """

    def __init__(self, handle: Handle, directory: Path, seq: int) -> None:
        super().__init__(handle)
        self.as_of_seq = seq
        self._directory = directory
        self._cleanup = weakref.finalize(self, _remove_tree, directory)

    def close(self) -> None:
        """Close the view and delete its temporary store."""
        try:
            super().close()
        finally:
            self._cleanup()

    def __enter__(self) -> PastView:
        return self
