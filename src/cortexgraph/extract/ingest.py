"""Ingest: run an extractor over a transcript and write what it finds, deduplicated.

Per source (a transcript, named by the caller's ``source_id``) a **cursor** records how
many turns are extracted: an :class:`~cortexgraph.Event` in the reserved namespace
:data:`CURSOR_NS`, tagged ``src-<16 hex>`` (the start of the SHA-256 of the source id),
whose text is a JSON object ``{"source", "turns", "bytes", "sha256"}``: the turns and
UTF-8 bytes consumed, and the SHA-256 of those turns. It is a memory like any other, so the
journal records it, replay rebuilds it and the OverallRoot commits it.

Each group of chunks (see :mod:`.chunking`) is extracted first, then written in **one
batch** together with the cursor's new version: every committed batch is whole. An
extractor that fails raises before its batch opens, so that group writes nothing, and
groups committed before it stay (the cursor says where to resume). Running again over
the same transcript writes nothing; over a longer one, only its new turns are extracted.
A transcript whose extracted turns changed is refused, unless ``restart=True``.

**Dedup.** Each candidate becomes a memory (``Candidate.to_memory``) and is compared with
the active memories of its namespace through the keyword index
(:func:`~cortexgraph.reading.similar_memories`: the Jaccard similarity of indexed terms,
never a scan). With ``cosine=True``, a best match in the uncertain 0.1-0.6 band is judged
by the cosine of the handle's embedder instead. The best match's similarity ``s`` decides:

==========  =====================================================================
s < 0.1     a new memory
0.1 - 0.4   a new memory and an active ``relates_to`` to the match, strength ``s``
0.4 - 0.6   a new memory and a *suggested* ``relates_to``, strength ``s`` (from 0.5
            on the edge is a consolidation candidate that ``compact`` examines)
s >= 0.6    no new memory: the candidate is the match (a duplicate); edges the
            extractor proposed for it attach to the match
==========  =====================================================================

Candidates are compared with what the same batch wrote before them, so an extractor that
repeats itself writes one memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from ..batch import Batch
from ..core.extraction import (
    Candidate,
    ExtractionContext,
    ExtractionInput,
    RuleExtractor,
    Turn,
)
from ..core.fusion import embed_text
from ..core.lifecycle import link_decision
from ..core.postings import index_text
from ..core.predicates import Q
from ..core.taxonomy import Event, Memory, Source
from ..core.text import term_counts
from ..core.uri import MemoryURI, check_name
from ..cortex import Cortex
from ..embed.base import embed_checked
from ..errors import CorruptionError, ExtractionError, ReadOnlyError, ValidationError
from ..reading import similar_memories
from .chunking import CHUNK_BYTES, chunk_turns
from .protocol import Extractor

__all__ = ["CURSOR_NS", "DUPLICATE_FROM", "Cursor", "ExtractionReport", "cursor_of", "ingest"]

CURSOR_NS = "extraction"
"""The namespace of the per-source cursors (reserved: ``ingest`` refuses it as ``ns``)."""
DUPLICATE_FROM = 0.6
"""The similarity from which a candidate is the memory it matches, not a new one."""
GLOBAL_CONFIDENCE = 0.8
"""A ``global`` candidate goes to the global namespace only above this confidence."""
_PPM = 1_000_000
_MAX_SOURCE = 1024


@attrs.frozen
class Cursor:
    """Where extraction of one source stands: turns consumed, their bytes and hash."""

    uri: MemoryURI | None
    turns: int
    bytes: int
    sha256: str


@attrs.frozen
class ExtractionReport:
    """What one :func:`ingest` call did.

    Attributes:
        source: the source id.
        turns: turns extracted by this call; ``cursor``: turns extracted in all.
        chunks: chunks sent to the extractor.
        written: the new memories.
        duplicates: ``(candidate text, existing memory)`` for candidates that were
            already known (similarity >= 0.6): nothing was written for them.
        edges: edges added (dedup links and edges the extractor proposed).
        skipped: ``(locator, reason)`` for malformed candidates and dropped edges.
    """

    source: str
    turns: int
    cursor: int
    chunks: int
    written: tuple[MemoryURI, ...]
    duplicates: tuple[tuple[str, MemoryURI], ...]
    edges: int
    skipped: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return {
            "source": self.source,
            "turns": self.turns,
            "cursor": self.cursor,
            "chunks": self.chunks,
            "written": [str(uri) for uri in self.written],
            "duplicates": [{"text": t, "of": str(uri)} for t, uri in self.duplicates],
            "edges": self.edges,
            "skipped": [{"where": w, "reason": r} for w, r in self.skipped],
        }


def _source_tag(source_id: str) -> str:
    return "src-" + hashlib.sha256(source_id.encode("utf-8")).hexdigest()[:16]


def _turns_digest(turns: Sequence[Turn]) -> tuple[int, str]:
    """The UTF-8 size and SHA-256 of ``turns``, each as length-prefixed role and text."""
    digest = hashlib.sha256()
    size = 0
    for turn in turns:
        for part in (turn.role, turn.text):
            data = part.encode("utf-8")
            digest.update(len(data).to_bytes(8, "big") + data)
        size += len(turn.text.encode("utf-8"))
    return size, digest.hexdigest()


def cursor_of(cx: Cortex, source_id: str) -> Cursor:
    """The cursor of ``source_id`` (0 turns when it was never extracted).

    Raises:
        CorruptionError: the cursor memory's text is not the JSON ingest writes.
    """
    found = cx.find(Q.type(Event) & Q.tag(_source_tag(source_id)) & Q.ns(CURSOR_NS), limit=2)
    if not found.hits:
        return Cursor(None, 0, 0, _turns_digest([])[1])
    hit = found.hits[0]
    try:
        data = json.loads(hit.record.memory.text)
        cursor = Cursor(hit.uri, int(data["turns"]), int(data["bytes"]), str(data["sha256"]))
        if data["source"] != source_id or cursor.turns < 0:
            raise ValueError(data["source"])
    except (ValueError, LookupError, TypeError) as error:
        raise CorruptionError(
            f"the extraction cursor {hit.uri} is not what ingest writes: {error}",
            table="versions",
            operation="extract",
        ) from None
    return cursor


def _cursor_text(source_id: str, turns: int, size: int, sha: str) -> str:
    return json.dumps(
        {"source": source_id, "turns": turns, "bytes": size, "sha256": sha}, sort_keys=True
    )


def _check(
    extractor: object, source: object, source_id: object, ns: object, global_ns: object
) -> None:
    if not callable(getattr(extractor, "extract", None)):
        raise ValidationError("must have an extract(ExtractionInput) method", field="extractor")
    if not isinstance(source, ExtractionInput):
        raise ValidationError(
            f"must be an ExtractionInput, not {type(source).__name__}", field="source"
        )
    if type(source_id) is not str or not source_id.strip() or len(source_id) > _MAX_SOURCE:
        raise ValidationError(
            f"must be a non-empty string of at most {_MAX_SOURCE} characters", field="source_id"
        )
    for field, name in (("ns", ns), ("global_ns", global_ns)):
        check_name(name, field)
        if name == CURSOR_NS:
            raise ValidationError(f"{CURSOR_NS!r} is reserved for extraction cursors", field=field)


class _Ingest:
    """The writes of one group, inside its batch."""

    def __init__(self, cx: Cortex, batch: Batch, *, cosine: bool, at: int | None) -> None:
        self.cx = cx
        self.batch = batch
        self.cosine = cosine
        self.at = at
        self.written: list[MemoryURI] = []
        self.duplicates: list[tuple[str, MemoryURI]] = []
        self.edges = 0

    def _cosine(self, memory: Memory, ns: str, other: bytes) -> int:
        record = self.batch.resolve(MemoryURI(self.cx.actor, ns, other, None))
        texts = [embed_text(memory, ns), embed_text(record.memory, ns)]
        vectors = embed_checked(self.cx.embedder, texts).astype(np.float64)
        norms = float(np.linalg.norm(vectors[0]) * np.linalg.norm(vectors[1]))
        cosine = float(np.dot(vectors[0], vectors[1])) / norms if norms else 0.0
        return max(0, min(_PPM, int(cosine * _PPM)))

    def place(self, memory: Memory, ns: str) -> MemoryURI:
        """Write ``memory`` unless it duplicates one; link it to its best match."""
        terms = frozenset(term_counts(index_text(memory)))
        matches = similar_memories(self.batch.keyword_txn(), terms, ns)
        best, other = matches[0] if matches else (0, b"")
        if self.cosine and matches and link_decision(best).action != "none" and best < 600_000:
            best = self._cosine(memory, ns, other)
        if matches and best >= DUPLICATE_FROM * _PPM:
            uri = MemoryURI(self.cx.actor, ns, other, None)
            self.duplicates.append((memory.text, uri))
            return uri
        uri = self.batch.write(memory, ns=ns, at=self.at)
        self.written.append(uri)
        action = link_decision(best).action if matches else "none"
        if action != "none":
            status = "active" if action == "relates_to" else "suggested"
            self.batch.add_edge(
                uri, other, "relates_to", strength=best / _PPM, status=status, at=self.at
            )
            self.edges += 1
        return uri


def ingest(
    cx: Cortex,
    source: ExtractionInput,
    *,
    source_id: str,
    extractor: Extractor | None = None,
    ns: str = "default",
    global_ns: str = "global",
    cosine: bool = False,
    restart: bool = False,
    max_chunk_bytes: int = CHUNK_BYTES,
    at: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ExtractionReport:
    """Extract memories from a transcript into ``cx``, resumably and without duplicates.

    Args:
        cx: a writable handle.
        source: the transcript's turns and context.
        source_id: names the transcript (a session id or a path); its cursor is keyed by it.
        extractor: what finds candidates (default :class:`RuleExtractor`).
        ns: where ``project`` candidates go.
        global_ns: where ``global`` candidates with confidence above 0.8 go (others stay
            in ``ns``).
        cosine: judge the uncertain band by the handle's embedder (see the module doc).
        restart: extract from the first turn even if the cursor says otherwise, and even
            if the transcript changed (dedup keeps what is known from being written again).
        max_chunk_bytes: the most transcript bytes per extractor call (default 100 KB).
        at: the time of the writes (ms; default the clock).
        progress: called as ``progress(groups done, groups in all)``.

    Returns:
        An :class:`ExtractionReport`.

    Raises:
        ValidationError: a bad argument (``field`` names it); an extractor that returns
            something other than candidates (field ``candidates``).
        ExtractionError: the extractor failed, or the transcript no longer starts with
            the turns the cursor recorded (and ``restart`` is false).
        ReadOnlyError: the handle is read-only.
    """
    if cx.readonly:
        raise ReadOnlyError("ingest writes memories; open the store read-write")
    extractor = RuleExtractor() if extractor is None else extractor
    _check(extractor, source, source_id, ns, global_ns)
    for name, flag in (("cosine", cosine), ("restart", restart)):
        if type(flag) is not bool:
            raise ValidationError("must be True or False", field=name)
    if type(max_chunk_bytes) is not int or not 64 <= max_chunk_bytes <= 10_000_000:
        raise ValidationError("must be an int from 64 to 10,000,000", field="max_chunk_bytes")
    origin = "system" if isinstance(extractor, RuleExtractor) else "llm"
    turns = source.turns
    cursor = cursor_of(cx, source_id)
    start = 0
    if cursor.turns and not restart:
        size, sha = _turns_digest(turns[: cursor.turns])
        if cursor.turns > len(turns) or sha != cursor.sha256:
            raise ExtractionError(
                f"the transcript of {source_id!r} no longer starts with the {cursor.turns}"
                " turns already extracted from it (pass restart=True to extract it again)"
            )
        start = cursor.turns
    groups = chunk_turns(turns, start=start, context=source.context, max_bytes=max_chunk_bytes)
    context = source.context
    written: list[MemoryURI] = []
    duplicates: list[tuple[str, MemoryURI]] = []
    skipped: list[tuple[str, str]] = []
    edges = chunks = 0
    cursor_uri = cursor.uri
    for done, group in enumerate(groups, start=1):
        found = []
        for chunk in group.chunks:
            candidates = extractor.extract(chunk)
            chunks += 1
            if not isinstance(candidates, list) or not all(
                isinstance(c, Candidate) for c in candidates
            ):
                raise ValidationError(
                    "the extractor must return a list of Candidate records", field="candidates"
                )
            found.append(candidates)
            skipped.extend(getattr(candidates, "skipped", ()))
        size, sha = _turns_digest(turns[: group.end])
        with cx.batch() as batch:
            step = _Ingest(cx, batch, cosine=cosine, at=at)
            for candidates in found:
                step.edges += _write_candidates(
                    step,
                    candidates,
                    context,
                    source_id,
                    origin,
                    ns=ns,
                    global_ns=global_ns,
                    skipped=skipped,
                )
            text = _cursor_text(source_id, group.end, size, sha)
            if cursor_uri is None:
                cursor_uri = batch.write(
                    Event(
                        text=text,
                        tags=("extraction-cursor", _source_tag(source_id)),
                        kind="cursor",
                        channel="extraction",
                        confidence=0.0,
                        priority=1,
                        source=Source(origin="system", session=source_id),
                    ),
                    ns=CURSOR_NS,
                    at=at,
                )
            else:
                cursor_uri = batch.update(cursor_uri, text=text, at=at)
        written.extend(step.written)
        duplicates.extend(step.duplicates)
        edges += step.edges
        if progress is not None:
            progress(done, len(groups))
    return ExtractionReport(
        source=source_id,
        turns=len(turns) - start,
        cursor=len(turns),
        chunks=chunks,
        written=tuple(written),
        duplicates=tuple(duplicates),
        edges=edges,
        skipped=tuple(skipped),
    )


def _target_ns(candidate: Candidate, ns: str, global_ns: str) -> str:
    if candidate.scope == "global" and candidate.confidence > GLOBAL_CONFIDENCE:
        return global_ns
    return ns


def _write_candidates(
    step: _Ingest,
    candidates: Sequence[Candidate],
    context: ExtractionContext,
    source_id: str,
    origin: str,
    *,
    ns: str,
    global_ns: str,
    skipped: list[tuple[str, str]],
) -> int:
    """Place each candidate, then add the edges they propose; returns the edges added."""
    source = Source(origin=origin, session=source_id, branch=context.branch, cwd=context.cwd)
    placed: list[MemoryURI | None] = []
    for n, candidate in enumerate(candidates):
        try:
            memory = candidate.to_memory(source)
        except ValidationError as error:
            skipped.append((f"candidate {n}", str(error)))
            placed.append(None)
            continue
        placed.append(step.place(memory, _target_ns(candidate, ns, global_ns)))
    added = 0
    for n, candidate in enumerate(candidates):
        for edge in candidate.edges:
            src = placed[n]
            dst = placed[edge.target] if edge.target < len(placed) else None
            if src is None or dst is None or src.id == dst.id:
                skipped.append((f"candidate {n}", f"edge to {edge.target}: no distinct target"))
                continue
            step.batch.add_edge(
                src, dst, edge.relation, strength=edge.strength, origin=origin, at=step.at
            )
            added += 1
    return added


