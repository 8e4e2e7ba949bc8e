"""Reads over one LMDB transaction, shared by the facade, the batch and the verb modules.

Naming a memory (:class:`BareId`, a :class:`~cortexgraph.core.uri.MemoryURI`), reading its
head and versions (:func:`read_head`, :func:`read_record`), what the column index keeps of a
row (:class:`RowMemo`, :func:`row_memo`), and the edge records (:class:`HeadCache`,
:func:`edge_record`, :func:`edges_of`). Nothing here opens a transaction: each function
reads through the one it is given.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from .core.forms import estimate_tokens, render
from .core.graph import PPM, EdgeState, bfs, relation_name
from .core.keys import version_key
from .core.lifecycle import jaccard_ppm, link_decision
from .core.postings import head_terms
from .core.segments import span
from .core.signals import attrs_key, index_seq_of
from .core.state import HeadState, Record, VersionState
from .core.uri import MemoryURI
from .errors import CorruptionError, CortexError, NotFoundError
from .index import ColumnIndex
from .index.keyword import segment_list, term_segments
from .records import Edge, Neighbor, Traversal
from .store.txn import ReadTxn

__all__ = [
    "BareId",
    "HeadCache",
    "MemoryRef",
    "RowMemo",
    "MAX_LINKS",
    "MAX_LINK_CANDIDATES",
    "RARE_TERM_LIMIT",
    "describe",
    "edge_record",
    "edges_of",
    "link_targets",
    "memory_terms",
    "read_head",
    "read_record",
    "resolve_in",
    "row_memo",
    "row_record",
    "similar_memories",
    "traverse_from",
]

#: What the verbs accept as "which memory": a URI (pinned or not), its string form, or,
#: where a version is given separately, the 16-byte id or its 32 hex digits.
MemoryRef = MemoryURI | str | bytes

#: auto-linking skips terms shared by more memories than this (they say little)
RARE_TERM_LIMIT = 64
MAX_LINK_CANDIDATES = 64
MAX_LINKS = 5


@attrs.frozen
class BareId:
    """A memory named by id alone (no actor or namespace to check)."""

    id: bytes
    version: int | None = None




def read_head(txn: ReadTxn, uri: MemoryURI | BareId) -> HeadState:
    raw = txn.get("heads", uri.id)
    if raw is None:
        raise NotFoundError(f"no memory {describe(uri)}")
    head = HeadState.decode(raw)
    if isinstance(uri, MemoryURI) and head.ns != uri.ns:
        raise NotFoundError(f"no memory {uri} (its id lives in namespace {head.ns!r})")
    return head


def read_record(
    txn: ReadTxn, actor: str, uri: MemoryURI | BareId, head: HeadState, version: int
) -> Record:
    raw = txn.get("versions", version_key(uri.id, version)) if version <= head.latest else None
    if raw is None:
        raise NotFoundError(f"no version {version} of {describe(uri)} (latest is {head.latest})")
    state = VersionState.decode(raw)
    memory = state.memory()
    if memory.type_name != head.type_name:
        raise CorruptionError(f"{describe(uri)} version {version} has the wrong type")
    return Record.of(actor, uri.id, head, version, state, memory)


def resolve_in(txn: ReadTxn, actor: str, uri: MemoryURI | BareId) -> Record:
    """The version ``uri`` names: its pinned version, or the head without one.

    Raises:
        NotFoundError: no such memory or version.
    """
    head = read_head(txn, uri)
    version = head.head if uri.version is None else uri.version
    return read_record(txn, actor, uri, head, version)


class RowMemo:
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


def row_memo(txn: ReadTxn, actor: str, index: ColumnIndex, row: int, seq: int) -> RowMemo:
    """The memo of the memory in column-index row ``row``, as ``txn`` (at journal seq
    ``seq``, the value ``index.refresh(txn)`` returned) sees it: read and decoded the first
    time, kept by the index until the memory changes."""
    memo: RowMemo | None = index.memo(row, seq)
    if memo is None:
        memory_id = index.ids[row]
        raw = txn.get("heads", memory_id)
        if raw is None:
            raise CortexError(f"memory {memory_id.hex()} vanished from the store")
        head = HeadState.decode(raw)
        uri = MemoryURI.trusted(actor, head.ns, memory_id, head.head)
        memo = RowMemo(read_record(txn, actor, uri, head, head.head))
        index.remember(row, memo, seq)
    return memo


def row_record(txn: ReadTxn, actor: str, index: ColumnIndex, row: int, seq: int) -> Record:
    """The head version of the memory in column-index row ``row`` (see :func:`row_memo`)."""
    return row_memo(txn, actor, index, row, seq).record


def describe(uri: MemoryURI | BareId) -> str:
    """How error messages name a memory: its head URI, or its id in hex."""
    return str(uri.head) if isinstance(uri, MemoryURI) else uri.id.hex()



def memory_terms(txn: ReadTxn, memory_id: bytes) -> frozenset[str]:
    """The indexed terms of a memory's head version (none if it is not indexed: not
    active), recomputed from the version with the indexing tokenizer."""
    terms = head_terms(txn, memory_id)
    return frozenset() if terms is None else frozenset(terms)


def _live(txn: ReadTxn, memory_id: bytes, level: int, first: int) -> bool:
    """Whether a posting of ``memory_id`` in the level-``level`` segment at ``first`` is
    live: the memory's index seq lies in the segment's range."""
    raw = txn.get("salience", attrs_key(memory_id))
    if raw is None:
        raise CorruptionError(
            f"a keyword posting names memory {memory_id.hex()}, which has no attributes row"
        )
    return first <= index_seq_of(raw) < first + span(level)


def similar_memories(
    txn: ReadTxn, terms: frozenset[str], ns: str, *, exclude: bytes | None = None
) -> list[tuple[int, bytes]]:
    """The active memories of ``ns`` most like a set of indexed terms: ``(ppm, id)``, by
    Jaccard similarity of their terms, best first (ties by id); never an O(n) scan.

    Candidates are the memories sharing its rarer terms (terms tried longest first;
    posting lists of at most :data:`RARE_TERM_LIMIT` memories; at most
    :data:`MAX_LINK_CANDIDATES` candidates). Only those above 0 are returned.
    """
    if not terms:
        return []
    candidates: dict[bytes, None] = {}
    segments = segment_list(txn)
    # longer terms first: they are the likelier to be rare (and the order is deterministic)
    for term in sorted(terms, key=lambda t: (-len(t), t)):
        found = []
        for level, first, ids, _ in term_segments(txn, term, segments):
            for memory_id in (bytes(row) for row in ids):
                if _live(txn, memory_id, level, first):
                    found.append(memory_id)
                if len(found) > RARE_TERM_LIMIT:
                    break
            if len(found) > RARE_TERM_LIMIT:
                break
        if len(found) > RARE_TERM_LIMIT:
            continue
        candidates.update(dict.fromkeys(found))
        if len(candidates) >= MAX_LINK_CANDIDATES:
            break
    scored = []
    for other in candidates:
        if other == exclude:
            continue
        raw = txn.get("heads", other)
        if raw is None:
            raise CortexError(f"memory {other.hex()} vanished from the store")
        head = HeadState.decode(raw)
        if head.ns != ns or head.status != "active":
            continue
        similarity = jaccard_ppm(terms, memory_terms(txn, other))
        if similarity > 0:
            scored.append((-similarity, other))
    return [(-negative, other) for negative, other in sorted(scored)]


def link_targets(txn: ReadTxn, memory_id: bytes, ns: str) -> list[tuple[float, bytes, str]]:
    """What auto-linking links a just-written memory to: ``(strength, other, status)``.

    The memories :func:`similar_memories` finds for its terms are linked, the best
    :data:`MAX_LINKS`, by ``link_decision``: an active ``relates_to`` or a suggested one.
    """
    scored = []
    for similarity, other in similar_memories(
        txn, memory_terms(txn, memory_id), ns, exclude=memory_id
    ):
        action = link_decision(similarity).action
        if action != "none":
            scored.append((similarity, other, action))
    return [
        (similarity / PPM, other, "active" if action == "relates_to" else "suggested")
        for similarity, other, action in scored[:MAX_LINKS]
    ]


class HeadCache:
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


def edge_record(
    actor: str, heads: HeadCache, src: bytes, rel: str, dst: bytes, state: EdgeState
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


def edges_of(
    txn: ReadTxn, actor: str, heads: HeadCache, memory_id: bytes, ns: str, way: str
) -> list[Edge]:
    found = []
    for key, value in txn.iter_items("edges", (b"o" if way == "out" else b"i") + memory_id):
        rel = relation_name(key[17])
        other = bytes(key[18:])
        src, dst = (memory_id, other) if way == "out" else (other, memory_id)
        found.append(edge_record(actor, heads, src, rel, dst, EdgeState.decode(value)))
    return found


def traverse_from(
    txn: ReadTxn,
    actor: str,
    uri: MemoryURI | BareId,
    depth: int,
    wanted: frozenset[str] | None,
    direction: str,
    threshold: int,
) -> Traversal:
    """Breadth-first search from ``uri`` along active edges (arguments checked by
    ``core.graph.check_traversal``; see :meth:`Cortex.traverse <cortexgraph.Cortex.traverse>`)."""
    start = read_head(txn, uri)
    heads = HeadCache(txn)

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
