"""``Cortex.compact`` (forgetting and consolidation) and auto-linking on write.

The rules are pure (``core.lifecycle``); this module finds the memories they apply to
without scanning everything in Python, and journals what they decide:

- **Forgetting.** Candidates come from the column index: active memories that are not
  pinned and whose head version is at least 14 days old, and archived memories untouched
  for 30 days; ``next_status`` then decides exactly (effective confidence, hubs, last
  access). Each move is one ``status`` entry. ``half_lives`` (tag -> days) replaces the
  type's half-life of a candidate carrying one of those tags (``tag_half_life``); the
  column index holds each row's tags, so this reads nothing more.
- **Consolidation.** Candidates are the suggested ``relates_to`` edges of strength >= 0.5
  (auto-linking makes them; the ``salience`` table lists them under ``k``). For each pair
  of active memories of the same namespace and type: the similarity is the cosine of their
  cached embeddings when both exist, else the Jaccard similarity of their indexed terms;
  >= 0.7 merges the other into the survivor (a new version of the survivor with the union
  of tags and the larger confidence and priority, a ``derived_from`` edge from the survivor
  to the other, the other's status ``merged``, the candidate edge removed); 0.5-0.7 keeps
  the suggested edge; below 0.5 the edge keeps its new, weaker strength and stops being a
  candidate. Never ``supersedes``, never across namespaces or types. One memory takes
  part in at most one merge per compaction: a later pair that names it waits. The
  decisions are made by one function, which ``Cortex.consolidation_candidates`` also
  calls to list them without acting.
- **Auto-linking** (``open(..., autolink=True)``): after a write, the memories sharing its
  rarer indexed terms (terms tried longest first; posting lists of at most 64 memories; at
  most 64 candidates; same namespace, active) are compared by Jaccard similarity of their
  terms, and the best five are linked by ``link_decision``: 0.1-0.4 an active
  ``relates_to`` of that strength, >= 0.4 a suggested one (>= 0.5: a consolidation
  candidate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs
import numpy as np

from .batch import Batch, set_status
from .core.fusion import embed_text
from .core.graph import EdgeState, edge_out_key
from .core.keys import version_key
from .core.lifecycle import (
    ARCHIVE_IDLE_MS,
    PRUNE_AFTER_MS,
    LifecycleFacts,
    MergeCandidate,
    can_merge,
    check_half_lives,
    choose_survivor,
    consolidation_decision,
    jaccard_ppm,
    merged_changes,
    next_status,
    tag_half_life,
)
from .core.salience import HALF_LIFE_DAYS, check_int
from .core.signals import CANDIDATE, read_access
from .core.state import HeadState, VersionState
from .core.uri import MemoryURI
from .errors import CorruptionError, CortexError
from .handle import Handle
from .index import ColumnIndex
from .index.table import type_name
from .reading import memory_terms
from .vector.state import content_key

if TYPE_CHECKING:
    from .store.txn import ReadTxn

__all__ = ["CompactReport", "ConsolidationCandidate"]

_ACTIVE, _ARCHIVED = 1, 3
_PPM = 1_000_000


@attrs.frozen
class CompactReport:
    """What :meth:`Cortex.compact` journaled.

    Attributes:
        archived, pruned: the memories moved to those statuses.
        merged: ``(survivor, merged)`` pairs; the survivor got a new version.
        examined: how many memories and candidate pairs the rules were applied to.
        seq: the journal seq after the compaction.
    """

    archived: tuple[MemoryURI, ...]
    pruned: tuple[MemoryURI, ...]
    merged: tuple[tuple[MemoryURI, MemoryURI], ...]
    examined: int
    seq: int


def _head(txn: ReadTxn, memory_id: bytes) -> HeadState:
    raw = txn.get("heads", memory_id)
    if raw is None:
        raise CortexError(f"memory {memory_id.hex()} vanished from the store")
    return HeadState.decode(raw)


def _forgetting(
    columns: ColumnIndex, txn: ReadTxn, now: int, half_lives: Mapping[str, int | None]
) -> tuple[list[bytes], list[bytes], int]:
    n = len(columns.ids)
    cols = columns.cols
    status = cols["status"][:n]
    old = (now - cols["at"][:n]) >= ARCHIVE_IDLE_MS
    maybe_archive = (status == _ACTIVE) & ~cols["pinned"][:n] & old
    touched = np.maximum(cols["updated"][:n], cols["at"][:n])
    maybe_prune = (status == _ARCHIVED) & ((now - touched) >= PRUNE_AFTER_MS)
    rows = np.flatnonzero(maybe_archive | maybe_prune)
    archive: list[bytes] = []
    prune: list[bytes] = []
    for row in rows.tolist():
        memory_id = columns.ids[row]
        access_count, last_access = read_access(txn, memory_id)
        kind = type_name(int(cols["type"][row]))
        facts = LifecycleFacts(
            status="active" if status[row] == _ACTIVE else "archived",
            type_name=kind,
            confidence=float(cols["confidence"][row]),
            pinned=bool(cols["pinned"][row]),
            access_count=access_count,
            last_access=last_access,
            at=int(cols["at"][row]),
            status_since=int(cols["updated"][row]),
            in_degree=int(cols["indeg"][row]),
            max_in_degree=columns.max_indeg,
            max_access=columns.max_access,
            half_life_days=tag_half_life(columns.tags[row], half_lives, HALF_LIFE_DAYS[kind]),
        )
        move = next_status(facts, now)
        if move == "archived":
            archive.append(memory_id)
        elif move == "pruned":
            prune.append(memory_id)
    return archive, prune, len(rows)


def _similarity(h: Handle, txn: ReadTxn, a: bytes, b: bytes) -> int:
    """Cosine of the cached embeddings (ppm, floored at 0) when both exist, else Jaccard."""
    spec_name = h.embedder_spec.get("name")
    vectors = []
    if isinstance(spec_name, str):
        for memory_id in (a, b):
            head = _head(txn, memory_id)
            raw = txn.get("versions", version_key(memory_id, head.head))
            if raw is None:
                break
            text = embed_text(VersionState.decode(raw).memory(), head.ns)
            cached = txn.get("emb", content_key(spec_name, text))
            if cached is None:
                break
            vectors.append(np.frombuffer(cached, dtype="<f4"))
    if len(vectors) == 2:
        cosine = float(np.dot(vectors[0], vectors[1]))
        return max(0, min(_PPM, int(cosine * _PPM)))
    return jaccard_ppm(memory_terms(txn, a), memory_terms(txn, b))


def _candidate(txn: ReadTxn, memory_id: bytes) -> MergeCandidate:
    head = _head(txn, memory_id)
    raw = txn.get("versions", version_key(memory_id, head.head))
    if raw is None:
        raise CortexError(f"memory {memory_id.hex()} has no head version")
    memory = VersionState.decode(raw).memory()
    return MergeCandidate(
        id=memory_id,
        created_at=head.created_at,
        confidence=memory.confidence,
        priority=memory.priority,
        pinned=memory.pinned,
        access_count=read_access(txn, memory_id)[0],
    )


@attrs.frozen
class ConsolidationCandidate:
    """One suggested pair compaction examines, and what it would do with it.

    Attributes:
        src, dst: the head URIs of the two memories, the ends of the suggested
            ``relates_to`` edge (from ``src`` to ``dst``).
        strength: the edge's strength, 0..1 (>= 0.5: that is what makes it a candidate).
        similarity: the similarity compaction computes for the pair (cosine of the cached
            embeddings when both exist, else Jaccard of the indexed terms), 0..1; ``None``
            when compaction does not compare them (``decision == "skip"``).
        decision: ``"merge"`` (>= 0.7: the other memory is merged into ``survivor``),
            ``"keep"`` (the suggested edge stays a candidate: 0.5-0.7, or >= 0.7 while one
            of the two already merges with another memory in this compaction),
            ``"weaken"`` (< 0.5: the edge takes the similarity as its strength and stops
            being a candidate) or ``"skip"`` (not both active, or not mergeable: another
            namespace or type, or a type that never merges; the edge is left as it is).
        survivor: for ``"merge"``, the head URI of the memory that survives; else None.
    """

    src: MemoryURI
    dst: MemoryURI
    strength: float
    similarity: float | None
    decision: str
    survivor: MemoryURI | None = None


@attrs.frozen
class _Plan:
    """One candidate pair as ids, with compaction's decision (similarity in ppm)."""

    src: bytes
    dst: bytes
    strength: int
    similarity: int | None
    decision: str
    survivor: bytes | None = None


def _plan_consolidation(h: Handle, txn: ReadTxn, limit: int | None) -> list[_Plan]:
    """Compaction's decision for each candidate pair, in the ``salience`` table's key
    order (source id, then target id); the first ``limit`` pairs, or all of them."""
    plans: list[_Plan] = []
    merging: set[bytes] = set()
    for key, _ in txn.iter_items("salience", CANDIDATE):
        if limit is not None and len(plans) >= limit:
            break
        src, dst = bytes(key[1:17]), bytes(key[17:33])
        raw_edge = txn.get("edges", edge_out_key(src, "relates_to", dst))
        if raw_edge is None:
            raise CorruptionError(
                f"consolidation candidate {src.hex()} -> {dst.hex()} has no edge",
                table="salience",
                operation="compact",
            )
        strength = EdgeState.decode(raw_edge).strength
        a, b = _head(txn, src), _head(txn, dst)
        if (a.status, b.status) != ("active", "active") or not can_merge(
            a.type_name, a.ns, b.type_name, b.ns
        ):
            plans.append(_Plan(src, dst, strength, None, "skip"))
            continue
        similarity = _similarity(h, txn, src, dst)
        decision = consolidation_decision(similarity)
        if decision is None:
            plans.append(_Plan(src, dst, strength, similarity, "weaken"))
        elif decision == "suggest" or src in merging or dst in merging:
            plans.append(_Plan(src, dst, strength, similarity, "keep"))
        else:  # one merge per memory per compaction: the later pairs wait
            survivor = (src, dst)[choose_survivor(_candidate(txn, src), _candidate(txn, dst))]
            merging.update((src, dst))
            plans.append(_Plan(src, dst, strength, similarity, "merge", survivor))
    return plans


def consolidation_candidates(h: Handle, *, limit: int) -> tuple[ConsolidationCandidate, ...]:
    """Carry out :meth:`Cortex.consolidation_candidates`."""
    check_int(limit, "limit", lo=1)
    actor = h.actor

    def uri(txn: ReadTxn, memory_id: bytes) -> MemoryURI:
        head = _head(txn, memory_id)
        return MemoryURI.trusted(actor, head.ns, memory_id, head.head)

    with h.reading() as txn:
        return tuple(
            ConsolidationCandidate(
                src=uri(txn, plan.src),
                dst=uri(txn, plan.dst),
                strength=plan.strength / _PPM,
                similarity=None if plan.similarity is None else plan.similarity / _PPM,
                decision=plan.decision,
                survivor=None if plan.survivor is None else uri(txn, plan.survivor),
            )
            for plan in _plan_consolidation(h, txn, limit)
        )


def run_compact(
    h: Handle, *, now: int | None, half_lives: Mapping[str, int | None] | None = None
) -> CompactReport:
    """Carry out :meth:`Cortex.compact`."""
    lives = {} if half_lives is None else check_half_lives(half_lives)
    if h.active_batch() is not None:
        raise CortexError("compact runs its own batch; call it outside one")
    now = h.at(now)
    with h.indexed_read() as (txn, columns, _seq):
        archive, prune, examined = _forgetting(columns, txn, now, lives)
        plans = _plan_consolidation(h, txn, None)
    archived: list[MemoryURI] = []
    pruned: list[MemoryURI] = []
    merged: list[tuple[MemoryURI, MemoryURI]] = []
    with Batch(h) as batch:
        for memory_id in archive:
            archived.append(set_status(batch, memory_id, "archived", at=now))
        for memory_id in prune:
            pruned.append(set_status(batch, memory_id, "pruned", at=now))
        for plan in plans:
            # (weaken has a similarity and merge a survivor: the checks only tell mypy)
            if plan.decision == "weaken" and plan.similarity is not None:
                batch.add_edge(plan.src, plan.dst, "relates_to", strength=plan.similarity / _PPM,
                               status="suggested", at=now)
            elif plan.decision == "merge" and plan.survivor is not None:
                merged.append(_merge(batch, plan.src, plan.dst, plan.survivor, now))
    with h.reading() as txn:
        seq = txn.last_seq()
    return CompactReport(tuple(archived), tuple(pruned), tuple(merged), examined + len(plans),
                         seq)


def _merge(
    batch: Batch, src: bytes, dst: bytes, survivor: bytes, now: int
) -> tuple[MemoryURI, MemoryURI]:
    """Journal the merge of the pair ``src``, ``dst`` into ``survivor`` (one of them): its
    new version, its ``derived_from`` edge to the other memory, the other's status
    ``merged``, the candidate edge removed."""
    other = dst if survivor == src else src
    survivor_record = batch.resolve(survivor)
    other_record = batch.resolve(other)
    changes = merged_changes(survivor_record.memory, other_record.memory)
    if changes:
        batch.update(survivor, at=now, **changes)  # type: ignore[arg-type]
    batch.add_edge(survivor, other, "derived_from", origin="system", at=now)
    merged_uri = set_status(batch, other, "merged", at=now)
    batch.remove_edge(src, dst, "relates_to", at=now)
    return batch.resolve(survivor).uri, merged_uri
