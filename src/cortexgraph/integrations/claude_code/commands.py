"""What the plugin's slash commands do: ``/recall``, ``/remember``, ``/forget``,
``/consolidate`` and ``/inspect`` over the project store and the global store.

Each command file of the plugin runs one ``cortexgraph claude-code <name>`` subcommand,
which calls one function here and prints its report (:mod:`cortexgraph.cli.claude_code`).

- :func:`recall` searches the project store, then the global one (each only if it
  exists: reading never creates a store), archived memories included (the keyword index
  holds active memories only, so archived ones are matched by the query's words and
  placed before the first hit holding fewer of them), and returns the project's hits
  first. Each hit carries the code attached to it by ``source_of`` edges
  and the memories two edges around it. The hits' reads are journaled (late binding),
  which restores an archived memory: /recall is how a forgotten memory comes back.
- :func:`remember` writes what a person said, with confidence 1.0 and origin
  ``"human"``, as its category's type and tag, into the project store (created when
  needed) or the global one, linked to its most similar memories (auto-linking). The
  exact same text, already active there, is not written again.
- :func:`forget` archives the memory a URI or an id (a unique prefix of at least 8 hex
  digits) names; anything else is a query whose candidates are listed, never archived:
  a fuzzy query does not guess.
- :func:`consolidate` runs compaction on the project store (merges at similarity >= 0.7,
  the plugin's per-category half-lives), then lists the pairs left for review (0.5-0.7)
  and every suggested edge; :func:`change_edge` promotes or drops one.
- :func:`inspect` reports, per store, its counts, the recent extractions, the end of
  the project's ``cortex.log`` and a replay verification.

Recall is hybrid (keyword and vector) when the plugin's settings name an embedder
(:func:`~.config.load_config`), keyword recall otherwise. Memories in the extraction
cursors' namespace and raw code (``artifact_ref``) are never hits: code comes attached
to its description.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

import cortexgraph as cg

from ...core.graph import RELATIONS
from ...core.predicates import Predicate
from ...core.text import term_counts
from ...errors import NotFoundError, ValidationError
from ...extract import CURSOR_NS
from .categories import CATEGORIES, HALF_LIVES, category_of, memory_class
from .config import load_config
from .hooks import LOG_NAME, git_context
from .stores import StoreLocation, global_store, project_store, same_text

if TYPE_CHECKING:
    pass

__all__ = [
    "Candidate",
    "Code",
    "ConsolidateReport",
    "Extraction",
    "ForgetReport",
    "InspectReport",
    "Pair",
    "RecallHit",
    "RecallReport",
    "Related",
    "RememberReport",
    "StoreReport",
    "change_edge",
    "consolidate",
    "forget",
    "inspect",
    "recall",
    "remember",
]

#: the tag of an extraction cursor (which lives in ``CURSOR_NS``, is never a hit, and is
#: never forgotten)
CURSOR_TAG = "extraction-cursor"
#: what ``remember`` writes into (and ``ingest`` extracts into by default)
MEMORY_NS = "default"
#: the memory types a person or an extractor writes (not Attest or LearnWeights)
AGENT_TYPES = ("goal", "preference", "constraint", "fact", "pattern", "event", "artifact_ref")
#: the relations followed to a hit's related memories (``source_of`` attaches code instead)
RELATED = tuple(relation for relation in RELATIONS if relation != "source_of")
#: an id prefix must be at least this many hex digits to name a memory
MIN_PREFIX = 8
#: the most candidates a fuzzy ``forget`` lists
FORGET_CANDIDATES = 5
#: the lines of ``cortex.log`` ``inspect`` shows
LOG_LINES = 10
#: the most hits a recall may ask for
MAX_LIMIT = 100


def _stores(
    project: str | os.PathLike[str], environ: Mapping[str, str] | None
) -> list[tuple[str, StoreLocation]]:
    """The project store and the global store, by name, after checking ``project``.

    Raises:
        ValidationError: ``project`` is not an existing directory (a mistyped
            ``--project`` must not create a store somewhere unexpected).
    """
    if not Path(project).is_dir():
        raise ValidationError(f"{project} is not a directory", field="project")
    return [("project", project_store(project)), ("global", global_store(environ))]


def _all_types() -> Predicate:
    where: Predicate = cg.Q.type(AGENT_TYPES[0])
    for name in AGENT_TYPES[1:]:
        where = where | cg.Q.type(name)
    return where


def _category(record: cg.Record) -> str | None:
    return category_of(record.memory.tags, record.memory.type_name)


def _one_line(text: str, width: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _now(cx: cg.Cortex, now: int | None) -> int:
    return cx.clock.now_ms() if now is None else now


# -- /recall --------------------------------------------------------------------------------


@attrs.frozen
class Related:
    """A memory within two edges of a hit: the edge it was reached by, and its text."""

    uri: str
    depth: int
    relation: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class Code:
    """Code attached to a hit by a ``source_of`` edge (an ``ArtifactRef``)."""

    uri: str
    path: str | None
    text: str
    content: str | None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class RecallHit:
    """One memory :func:`recall` found.

    Attributes:
        store: ``"project"`` or ``"global"``.
        uri: the memory (its head version).
        category: the plugin category (see :mod:`.categories`), or None.
        text: the memory's text.
        status: its status when it was found; ``"archived"`` means this recall restored it.
        branch: the git branch it was written on, if known.
        score: the recall score (keyword: BM25; hybrid: the fused score; an archived
            memory, which the keyword index does not hold: the share of the query's
            terms its text holds).
        code: the code attached by ``source_of`` edges.
        related: the memories one and two edges away (not through ``source_of``).
    """

    store: str
    uri: str
    category: str | None
    text: str
    status: str
    branch: str | None
    score: float
    code: tuple[Code, ...] = ()
    related: tuple[Related, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = attrs.asdict(self, recurse=False)
        data["code"] = [c.to_json() for c in self.code]
        data["related"] = [r.to_json() for r in self.related]
        return data


@attrs.frozen
class RecallReport:
    """What :func:`recall` found: the hits (project first), the mode and the stores read."""

    query: str
    mode: str
    branch: str | None
    stores: tuple[str, ...]
    hits: tuple[RecallHit, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "mode": self.mode,
            "branch": self.branch,
            "stores": list(self.stores),
            "hits": [hit.to_json() for hit in self.hits],
        }


def _check_limit(limit: object) -> int:
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"must be an integer from 1 to {MAX_LIMIT}, not {limit!r}",
                              field="limit")
    return limit


def _check_text(text: object, field: str) -> str:
    if type(text) is not str or not text.strip():
        raise ValidationError("must be a non-empty string", field=field)
    return text


def recall(
    project: str | os.PathLike[str],
    query: str,
    *,
    branch: str | None = None,
    keyword: bool = False,
    limit: int = 10,
    environ: Mapping[str, str] | None = None,
    now: int | None = None,
) -> RecallReport:
    """Recall ``query`` in the project store, then the global one (see the module doc).

    Args:
        project: the project directory.
        query: what to look for.
        branch: keep only memories written on this git branch.
        keyword: keyword recall even when an embedder is configured.
        limit: the most hits in all (1..100); the project's come first.
        environ: the environment (default ``os.environ``; ``CORTEXGRAPH_HOME``).
        now: the instant the reads are journaled at (ms; default: each store's clock).

    Raises:
        ValidationError: an empty query, a bad limit or branch, or bad plugin settings.
    """
    _check_text(query, "query")
    limit = _check_limit(limit)
    if branch is not None:
        _check_text(branch, "branch")
    embedder = None if keyword else load_config(project, environ).make_embedder()
    mode = "keyword" if embedder is None else "hybrid"
    # the branch is not indexed: ask for more and keep those of the branch
    depth = limit if branch is None else min(1000, max(100, 10 * limit))
    terms = set(term_counts(query))
    hits: list[RecallHit] = []
    read: list[str] = []
    seen: set[str] = set()  # a global memory is often the project's own, copied
    for name, where_store in _stores(project, environ):
        if not where_store.exists() or len(hits) >= limit:
            continue
        read.append(name)
        with where_store.open(embedder) as cx:
            found = cx.recall(query, k=depth, where=_RECALLED, mode=mode)
            ranked = _with_archived(
                [(_share(terms, hit.record), hit.record, hit.score) for hit in found],
                _archived_matches(cx, terms),
            )
            kept = [
                (record, score)
                for record, score in ranked
                if (branch is None or _branch_of(record) == branch)
                and record.memory.text not in seen
            ][: limit - len(hits)]
            if not kept:
                continue
            at = _now(cx, now)
            with cx.batch() as batch:  # late binding: what was returned was read
                batch.record_access([record.uri for record, _ in kept], at=at)
            for record, score in kept:
                seen.add(record.memory.text)
                hits.append(_recall_hit(cx, name, record, score))
    return RecallReport(query, mode, branch, tuple(read), tuple(hits))


#: what recall returns: memories, not extraction cursors or raw code
_RECALLED = ~cg.Q.ns(CURSOR_NS) & ~cg.Q.type("artifact_ref")


def _share(terms: set[str], record: cg.Record) -> float:
    """The share of the query's terms that ``record``'s text holds."""
    if not terms:
        return 0.0
    return len(terms & set(term_counts(record.memory.text))) / len(terms)


def _archived_matches(cx: cg.Cortex, terms: set[str]) -> list[tuple[float, cg.Record, float]]:
    """The archived memories holding any of the query's terms, most terms first (then
    most recent), each as ``(share, record, share)``.

    The keyword index holds active memories only, so archived ones are matched here, by
    their terms: there are few of them (compaction prunes them after 30 idle days).
    """
    where = _all_types() & cg.Q.status("archived") & _RECALLED
    count = cx.find(where, limit=1).matched
    if not count or not terms:
        return []
    found = cx.find(where, limit=count, order_by="recent")
    matches = [(_share(terms, hit.record), hit.record) for hit in found]
    ordered = sorted(
        ((share, record) for share, record in matches if share > 0), key=lambda m: -m[0]
    )
    return [(share, record, share) for share, record in ordered]


def _with_archived(
    active: list[tuple[float, cg.Record, float]],
    archived: list[tuple[float, cg.Record, float]],
) -> list[tuple[cg.Record, float]]:
    """Recall's hits in their order, with each archived match placed before the first
    hit that holds a smaller share of the query's terms than it does. Each item is
    ``(share, record, score)``; the result is ``(record, score)``."""
    merged: list[tuple[cg.Record, float]] = []
    waiting = iter(archived)
    pending = next(waiting, None)
    for share, record, score in active:
        while pending is not None and pending[0] > share:
            merged.append((pending[1], pending[2]))
            pending = next(waiting, None)
        merged.append((record, score))
    while pending is not None:
        merged.append((pending[1], pending[2]))
        pending = next(waiting, None)
    return merged


def _branch_of(record: cg.Record) -> str | None:
    source = record.memory.source
    return None if source is None else source.branch


def _code_of(cx: cg.Cortex, uri: cg.MemoryURI) -> tuple[Code, ...]:
    """The active code memories linked to ``uri`` by ``source_of`` edges."""
    code = []
    for edge in cx.edges(uri, direction="in"):
        if edge.relation != "source_of" or edge.status != "active":
            continue
        attached = cx.resolve(edge.src)
        if attached.status != "active":
            continue
        memory = attached.memory
        code.append(Code(str(attached.uri), getattr(memory, "path", None), memory.text,
                         getattr(memory, "content", None)))
    return tuple(code)


def _recall_hit(cx: cg.Cortex, store: str, record: cg.Record, score: float) -> RecallHit:
    related = []
    for near in cx.traverse(record.uri, depth=2, relations=RELATED, direction="both"):
        other = cx.resolve(near.uri)
        if other.memory.type_name == "artifact_ref":
            continue
        related.append(Related(str(near.uri), near.depth, near.relation,
                               _one_line(other.memory.text)))
    return RecallHit(
        store,
        str(record.uri),
        _category(record),
        record.memory.text,
        record.status,
        _branch_of(record),
        score,
        _code_of(cx, record.uri),
        tuple(related),
    )


# -- /remember --------------------------------------------------------------------------------


@attrs.frozen
class RememberReport:
    """What :func:`remember` did: ``written`` is False when the exact text was already
    an active memory of the store (``uri`` and ``category`` are then that memory's)."""

    store: str
    uri: str
    category: str
    written: bool

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def remember(
    project: str | os.PathLike[str],
    text: str,
    *,
    category: str = "context",
    priority: int | None = None,
    to_global: bool = False,
    pin: bool = False,
    tags: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    at: int | None = None,
) -> RememberReport:
    """Write what a person asked to remember (see the module doc).

    Args:
        project: the project directory (its git branch goes into the memory's source).
        text: the memory.
        category: one of the plugin's categories (default ``context``); the memory is
            written as its type and tagged with it.
        priority: 1..10 (default: the type's default).
        to_global: write to the global store instead of the project's.
        pin: exempt the memory from decay.
        tags: more tags.
        environ: the environment (default ``os.environ``).
        at: the instant of the write (ms; default: the store's clock).

    Raises:
        ValidationError: an unknown category (field ``type``), an empty text, a bad
            priority or tag (the field named), or bad plugin settings.
    """
    _check_text(text, "text")
    type_name = memory_class(category)
    name = "global" if to_global else "project"
    where = dict(_stores(project, environ))[name]
    context = git_context(Path(project).absolute())
    fields: dict[str, Any] = {
        "type": type_name,
        "text": text,
        "tags": [category, *tags],
        "confidence": 1.0,
        "pinned": pin,
        "source": {"origin": "human", "branch": context.branch, "cwd": context.cwd},
    }
    if priority is not None:
        fields["priority"] = priority
    memory = cg.Memory.from_dict(fields)  # validates every field before a store opens
    embedder = load_config(project, environ).make_embedder()
    # linked to its most similar memories as it is written, as extraction links what it
    # writes: recall then shows it among their related memories, and a near-duplicate
    # becomes a pair for /consolidate
    with where.open(embedder, create=True, autolink=True) as cx:
        same = same_text(cx, memory.text)
        if same is not None:
            return RememberReport(name, str(same.uri), _category(same) or category, False)
        uri = cx.write(memory, ns=MEMORY_NS, at=at)
    return RememberReport(name, str(uri), category, True)


# -- /forget ------------------------------------------------------------------------------------


@attrs.frozen
class Candidate:
    """A memory a fuzzy :func:`forget` lists (and does not archive)."""

    store: str
    uri: str
    id: str
    category: str | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class ForgetReport:
    """What :func:`forget` did: ``archived`` names the memory it archived (None when the
    argument was a query), ``candidates`` what a query matched (nothing was archived)."""

    archived: Candidate | None
    candidates: tuple[Candidate, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "archived": None if self.archived is None else self.archived.to_json(),
            "candidates": [c.to_json() for c in self.candidates],
        }


def _candidate(store: str, record: cg.Record) -> Candidate:
    return Candidate(
        store, str(record.uri), record.uri.id.hex(), _category(record),
        _one_line(record.memory.text),
    )


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def _by_prefix(cx: cg.Cortex, prefix: str) -> list[cg.Record]:
    """The memories (not cursors) whose id starts with the hex digits ``prefix``."""
    if len(prefix) == 32:
        try:
            records = [cx.resolve(prefix)]
        except NotFoundError:
            records = []
    else:
        ids = {
            entry.memory_id
            for entry in cx.journal()
            if entry.op == "write" and entry.memory_id.hex().startswith(prefix)
        }
        records = [cx.resolve(memory_id.hex()) for memory_id in sorted(ids)]
    return [r for r in records if r.uri.ns != CURSOR_NS]


def forget(
    project: str | os.PathLike[str],
    ref_or_query: str,
    *,
    environ: Mapping[str, str] | None = None,
    reason: str = "forgotten by hand",
    at: int | None = None,
) -> ForgetReport:
    """Archive the memory ``ref_or_query`` names, or list the candidates of a query.

    A ``cx://`` URI names a memory of the store its actor names (``project`` or
    ``global``); a hex id or unique prefix of at least 8 digits is looked up in the
    project store, then the global one. Anything else is a keyword query: its best
    matches (at most 5, project first, active only) are listed and nothing is archived.

    Raises:
        ValidationError: an empty argument; a prefix that names several memories (field
            ``ref``).
        NotFoundError: a URI or full id of no memory; a URI of another actor.
        URIError: a malformed URI.
        TombstonedError: the memory is tombstoned.
    """
    _check_text(ref_or_query, "ref")
    arg = ref_or_query.strip()
    stores = [(name, where) for name, where in _stores(project, environ) if where.exists()]
    if arg.startswith("cx://"):
        uri = cg.MemoryURI.parse(arg)
        chosen = [(name, where) for name, where in stores if where.actor == uri.actor]
        if not chosen:
            raise NotFoundError(f"no {uri.actor!r} store holds {arg}")
        name, where = chosen[0]
        with where.open() as cx:
            return ForgetReport(_archive(cx, name, cx.resolve(uri), reason, at))
    lowered = arg.lower()
    if len(lowered) >= MIN_PREFIX and _is_hex(lowered) and len(lowered) <= 32:
        for name, where in stores:
            with where.open() as cx:
                records = _by_prefix(cx, lowered)
                if len(records) > 1:
                    listed = ", ".join(r.uri.id.hex() for r in records[:FORGET_CANDIDATES])
                    raise ValidationError(
                        f"{arg} is the start of {len(records)} memory ids ({listed}); give"
                        " more digits", field="ref",
                    )
                if records:
                    return ForgetReport(_archive(cx, name, records[0], reason, at))
        if len(lowered) == 32:
            raise NotFoundError(f"no memory has the id {arg}")
    candidates: list[Candidate] = []
    for name, where in stores:
        if len(candidates) >= FORGET_CANDIDATES:
            break
        with where.open(readonly=True) as cx:
            try:
                found = cx.recall(arg, k=FORGET_CANDIDATES, mode="keyword",
                                  where=~cg.Q.ns(CURSOR_NS))
            except ValidationError:
                continue
            candidates.extend(_candidate(name, hit.record) for hit in found)
    return ForgetReport(None, tuple(candidates[:FORGET_CANDIDATES]))


def _archive(
    cx: cg.Cortex, store: str, record: cg.Record, reason: str, at: int | None
) -> Candidate:
    if record.uri.ns == CURSOR_NS:
        raise ValidationError(f"{record.uri} is an extraction cursor, not a memory", field="ref")
    cx.archive(record.uri, reason=reason, at=at)
    return _candidate(store, record)


# -- /consolidate -----------------------------------------------------------------------------


@attrs.frozen
class Pair:
    """A pair of memories or an edge between them: a candidate pair for review (with its
    similarity) or a suggested edge (with its relation)."""

    src: str
    dst: str
    src_text: str
    dst_text: str
    strength: float
    similarity: float | None = None
    relation: str = "relates_to"

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class ConsolidateReport:
    """What :func:`consolidate` (or :func:`change_edge`) did and what is left to review.

    Attributes:
        ran: whether compaction ran (False for a dry run or an edge change).
        merged: ``(survivor, merged)`` URI pairs; archived, pruned: URIs.
        to_merge: for a dry run, the pairs compaction would merge.
        review: candidate pairs of similarity 0.5-0.7, left for a person.
        suggested: every suggested edge, strongest first.
        changed: the edge changes made (``promoted``/``dropped`` with both ends).
    """

    ran: bool
    merged: tuple[tuple[str, str], ...] = ()
    archived: tuple[str, ...] = ()
    pruned: tuple[str, ...] = ()
    to_merge: tuple[Pair, ...] = ()
    review: tuple[Pair, ...] = ()
    suggested: tuple[Pair, ...] = ()
    changed: tuple[tuple[str, str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "ran": self.ran,
            "merged": [list(p) for p in self.merged],
            "archived": list(self.archived),
            "pruned": list(self.pruned),
            "to_merge": [p.to_json() for p in self.to_merge],
            "review": [p.to_json() for p in self.review],
            "suggested": [p.to_json() for p in self.suggested],
            "changed": [list(c) for c in self.changed],
        }


def _existing_project(project: str | os.PathLike[str]) -> StoreLocation:
    where = _stores(project, None)[0][1]
    if not where.exists():
        raise NotFoundError(f"{project} has no memory store yet ({where.root})")
    return where


def consolidate(
    project: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    now: int | None = None,
) -> ConsolidateReport:
    """Compact the project store and list what is left for a person to decide.

    Compaction (unless ``dry_run``) merges candidate pairs of similarity >= 0.7 and runs
    the lifecycle with the plugin's per-category half-lives. Then the candidate pairs of
    similarity 0.5-0.7 are listed for review, and every suggested edge with its
    strength, for :func:`change_edge` to promote or drop.

    Raises:
        NotFoundError: the project has no store.
    """
    where = _existing_project(project)
    with where.open() as cx:
        texts = _TextCache(cx)
        if dry_run:
            planned = cx.consolidation_candidates(limit=10_000)
            to_merge = tuple(
                _pair(texts, c.src, c.dst, c.strength, c.similarity)
                for c in planned
                if c.decision == "merge"
            )
            return ConsolidateReport(
                False, to_merge=to_merge, review=_review(cx, texts),
                suggested=_suggested(cx, texts),
            )
        report = cx.compact(now=now, half_lives=HALF_LIVES)
        return ConsolidateReport(
            True,
            merged=tuple((str(a), str(b)) for a, b in report.merged),
            archived=tuple(str(u) for u in report.archived),
            pruned=tuple(str(u) for u in report.pruned),
            review=_review(cx, texts),
            suggested=_suggested(cx, texts),
        )


class _TextCache:
    """Memory texts by URI, each read once."""

    def __init__(self, cx: cg.Cortex) -> None:
        self.cx = cx
        self.texts: dict[str, str] = {}

    def __call__(self, uri: cg.MemoryURI) -> str:
        key = str(uri)
        if key not in self.texts:
            self.texts[key] = _one_line(self.cx.resolve(uri).memory.text, 120)
        return self.texts[key]


def _pair(
    texts: _TextCache,
    src: cg.MemoryURI,
    dst: cg.MemoryURI,
    strength: float,
    similarity: float | None = None,
    relation: str = "relates_to",
) -> Pair:
    return Pair(str(src), str(dst), texts(src), texts(dst), strength, similarity, relation)


def _review(cx: cg.Cortex, texts: _TextCache) -> tuple[Pair, ...]:
    """The candidate pairs of similarity 0.5-0.7 compaction keeps for a person."""
    return tuple(
        _pair(texts, c.src, c.dst, c.strength, c.similarity)
        for c in cx.consolidation_candidates(limit=10_000)
        if c.decision == "keep" and c.similarity is not None and 0.5 <= c.similarity < 0.7
    )


def _suggested(cx: cg.Cortex, texts: _TextCache) -> tuple[Pair, ...]:
    """Every suggested edge between active memories, strongest first (ties: by URIs)."""
    memories = cx.stats().memories
    found = cx.find(_all_types() & ~cg.Q.ns(CURSOR_NS), limit=max(1, memories),
                    order_by="recent")
    edges = []
    for hit in found:
        for edge in cx.edges(hit.uri, direction="out"):
            if edge.status == "suggested" and cx.resolve(edge.dst).status == "active":
                edges.append(edge)
    edges.sort(key=lambda e: (-e.strength, str(e.src), str(e.dst)))
    return tuple(_pair(texts, e.src, e.dst, e.strength, None, e.relation) for e in edges)


def change_edge(
    project: str | os.PathLike[str],
    a: str,
    b: str,
    *,
    promote: bool,
    at: int | None = None,
) -> ConsolidateReport:
    """Promote the suggested edge between ``a`` and ``b`` (it becomes active) or drop it
    (it is removed), in the project store. ``a`` and ``b`` are URIs, ids or id prefixes
    of at least 8 hex digits; the edge may run either way.

    Raises:
        NotFoundError: no project store, or no such memory.
        ValidationError: no suggested edge joins the two, or an ambiguous prefix.
    """
    where = _existing_project(project)
    with where.open() as cx:
        first, second = _one_memory(cx, a), _one_memory(cx, b)
        edges = [
            e
            for e in cx.edges(first.uri, direction="both")
            if e.status == "suggested" and {e.src.id, e.dst.id} == {first.uri.id, second.uri.id}
        ]
        if not edges:
            raise ValidationError(
                f"no suggested edge joins {first.uri} and {second.uri}", field="edge"
            )
        changed = []
        with cx.batch() as batch:
            for edge in edges:
                if promote:
                    batch.add_edge(edge.src, edge.dst, edge.relation, strength=edge.strength,
                                   status="active", origin="human", at=at)
                else:
                    batch.remove_edge(edge.src, edge.dst, edge.relation, at=at)
                changed.append(
                    ("promoted" if promote else "dropped", str(edge.src), str(edge.dst))
                )
        texts = _TextCache(cx)
        return ConsolidateReport(
            False, review=_review(cx, texts), suggested=_suggested(cx, texts),
            changed=tuple(changed),
        )


def _one_memory(cx: cg.Cortex, ref: str) -> cg.Record:
    """The memory ``ref`` (a URI, an id or a prefix of at least 8 hex digits) names."""
    arg = ref.strip().lower()
    if ref.strip().startswith("cx://"):
        return cx.resolve(ref.strip())
    if len(arg) < MIN_PREFIX or len(arg) > 32 or not _is_hex(arg):
        raise ValidationError(
            f"{ref!r} is not a memory URI or an id (at least {MIN_PREFIX} hex digits)",
            field="ref",
        )
    records = _by_prefix(cx, arg)
    if not records:
        raise NotFoundError(f"no memory id starts with {arg}")
    if len(records) > 1:
        raise ValidationError(f"{arg} is the start of {len(records)} memory ids", field="ref")
    return records[0]


# -- /inspect ---------------------------------------------------------------------------------


@attrs.frozen
class Extraction:
    """One session's extraction cursor and the last memories that session wrote."""

    session: str | None
    turns: int | None
    at: int
    memories: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class StoreReport:
    """One store, as :func:`inspect` saw it.

    Attributes:
        store: ``"project"`` or ``"global"``; path: its environment directory.
        ok: whether replay verification found it sound.
        problems: what verification found (empty when ``ok``).
        memories: counts by category, then status (cursors excluded); None when the store
            could not be read.
        statuses: counts by status (every memory).
        edges, entries: how many edges and journal entries; root: the OverallRoot (hex).
        extractions: the most recent sessions' extractions, newest first.
    """

    store: str
    path: str
    ok: bool
    problems: tuple[str, ...]
    memories: dict[str, dict[str, int]] | None = None
    statuses: dict[str, int] | None = None
    edges: int | None = None
    entries: int | None = None
    root: str | None = None
    extractions: tuple[Extraction, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = attrs.asdict(self, recurse=False)
        data["problems"] = list(self.problems)
        data["extractions"] = [e.to_json() for e in self.extractions]
        return data


@attrs.frozen
class InspectReport:
    """What :func:`inspect` found: each existing store, and the end of ``cortex.log``."""

    stores: tuple[StoreReport, ...]
    log: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return all(store.ok for store in self.stores)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "stores": [s.to_json() for s in self.stores],
            "log": list(self.log),
        }


def inspect(
    project: str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    extractions: int = 5,
) -> InspectReport:
    """Stats, recent extractions and health of the project and global stores, and the
    last lines of the project's ``cortex.log``. Nothing is written.

    A store that fails verification is reported (``ok`` False, its problems listed) and
    not read further when its pages are damaged; the other store is still inspected.
    """
    reports = []
    for name, where in _stores(project, environ):
        if where.exists():
            reports.append(_inspect_store(name, where, extractions))
    return InspectReport(tuple(reports), _log_tail(project_store(project).root / LOG_NAME))


def _inspect_store(name: str, where: StoreLocation, extractions: int) -> StoreReport:
    path = str(where.root / where.actor)
    health = cg.verify(where.root, where.actor).actors[0]
    problems = health.problems or ((health.error,) if health.error else ())
    if health.error is not None:  # damaged pages or unreadable: do not let LMDB walk it
        return StoreReport(name, path, False, tuple(problems))
    try:
        with where.open(readonly=True) as cx:
            stats = cx.stats()
            return StoreReport(
                name,
                path,
                health.ok,
                tuple(problems),
                memories=_by_category(cx, stats.by_status),
                statuses=dict(stats.by_status),
                edges=stats.edges,
                entries=stats.seq,
                root=None if stats.overall_root is None else stats.overall_root.hex(),
                extractions=_extractions(cx, extractions),
            )
    except cg.CortexError as error:
        return StoreReport(name, path, False, (*problems, f"{type(error).__name__}: {error}"))


def _by_category(cx: cg.Cortex, statuses: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Memories per category and status (cursors excluded), counted by the index: a
    memory's category is its first category tag, else its type's (see ``category_of``)."""
    names = list(CATEGORIES)
    counts: dict[str, dict[str, int]] = {}
    no_category: Predicate = ~cg.Q.ns(CURSOR_NS)
    for name in names:
        no_category = no_category & ~cg.Q.tag(name)
    for index, name in enumerate(names):
        tagged: Predicate = cg.Q.tag(name) & ~cg.Q.ns(CURSOR_NS)
        for earlier in names[:index]:
            tagged = tagged & ~cg.Q.tag(earlier)
        alternatives = [tagged] + [
            cg.Q.type(type_name) & no_category
            for type_name in AGENT_TYPES
            if category_of((), type_name) == name
        ]
        for status in statuses:
            total = sum(
                cx.find(where & cg.Q.status(status), limit=1).matched for where in alternatives
            )
            if total:
                counts.setdefault(name, {})[status] = total
    return counts


def _extractions(cx: cg.Cortex, most: int) -> tuple[Extraction, ...]:
    cursors = cx.find(cg.Q.tag(CURSOR_TAG) & cg.Q.ns(CURSOR_NS), limit=most, order_by="recent")
    if not cursors:
        return ()
    recent = cx.find(_all_types() & ~cg.Q.ns(CURSOR_NS), limit=200, order_by="recent")
    found = []
    for hit in cursors:
        record = hit.record
        session = record.memory.source.session if record.memory.source else None
        try:
            turns: int | None = int(json.loads(record.memory.text)["turns"])
        except (ValueError, LookupError, TypeError):
            turns = None
        wrote = tuple(
            _one_line(h.record.memory.text, 120)
            for h in recent
            if h.record.memory.source is not None and h.record.memory.source.session == session
        )[:3]
        found.append(Extraction(session, turns, record.at, wrote))
    return tuple(found)


def _log_tail(path: Path) -> tuple[str, ...]:
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - 64 * 1024))
            tail = log.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ()
    return tuple(tail.splitlines()[-LOG_LINES:])
