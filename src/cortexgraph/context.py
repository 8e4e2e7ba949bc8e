"""``Cortex.context``: choose and rank the candidates of a context bundle, then pack them.

The packing (which candidates fit, in which form, the exact text and its digest) is the
pure :func:`cortexgraph.core.packing.pack_context`; this module only decides *which*
memories are candidates, in which layer and in which order, reading the committed state
through the column index (``cortexgraph.index``) and LMDB. The rules, in full, are in
``docs/context.md``; in short, for a budget of up to 2,000 tokens (the caps scale with
the budget, see :func:`caps_for`):

floor (rank order)
    1. pinned memories, by salience (a Goal only while its ``status`` is "active");
    2. active Goals (``Goal.status == "active"``), by salience;
    3. Constraints, by salience;
    4. Preferences, by salience;
    5. the hottest Facts, by salience.
foreground
    with a ``query``: the hits of ``cx.recall(query, k=...)`` in recall order, each
    followed by the code attached to it (``source_of`` ArtifactRefs); then, if a
    ``channel`` is also given, that channel's most recent Events. Without a query: the
    channel's most recent Events (newest first, by ``occurred_at``, else the head
    version's ``at``). Neither: no foreground.
background
    one short line each for the most salient active memories not already chosen.

Only active memories of the seven agent-facing types are ever candidates: archived,
pruned, merged and tombstoned memories are excluded by the column index's status column
(the query planner's status default), and the execution-side types (Attest,
LearnWeights) are never selected, not even from recall hits.

Cost: every step reads the status, type and pinned columns with numpy and walks rows
lazily in exact salience or recency order (``ColumnIndex.ordered``); no step loops in
Python over the whole store, and the number of records read from LMDB is bounded by the
caps. Salience walks hand ``ordered`` only the rows that can be among the first few,
found from cheap per-row bounds (:meth:`_Reader.by_salience`), so that no power or
logarithm is computed over the whole store.
"""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

import attrs
import numpy as np
import numpy.typing as npt

from .core.forms import TokenEstimator, estimate_tokens
from .core.packing import ContextItem, pack_context
from .core.state import Record
from .core.taxonomy import MAX_SHORT_TEXT, MEMORY_TYPES, Event, Goal, check_utf8
from .core.uri import MemoryURI
from .errors import CortexError, ValidationError
from .handle import Handle
from .reading import row_record
from .recall import RecallResult, run_recall

if TYPE_CHECKING:
    from .index import ColumnIndex, Rows
    from .store.txn import ReadTxn

__all__ = ["AGENT_TYPES", "BASE_CAPS", "ContextBundle", "caps_for", "run_context"]

#: The memory types a context may show: everything but the execution-side Attest and
#: LearnWeights, which record outcomes and ranking weights, not knowledge.
AGENT_TYPES: Final = (
    "goal",
    "preference",
    "constraint",
    "fact",
    "pattern",
    "event",
    "artifact_ref",
)

_TYPE_CODE: Final = {t.type_name: t.type_code for t in MEMORY_TYPES}
_AGENT_CODES: Final = np.asarray([_TYPE_CODE[name] for name in AGENT_TYPES], dtype=np.uint8)

#: How many candidates each step may contribute at a budget of up to 2,000 tokens.
#: ``*_scan`` bound how many memories a step may read to find them (Goals whose status is
#: not "active", Events of other channels are read and passed over).
BASE_CAPS: Final = {
    "pinned": 8,
    "goals": 8,
    "goals_scan": 64,
    "constraints": 10,
    "preferences": 10,
    "facts": 4,
    "hits": 16,
    "events": 12,
    "events_with_query": 6,
    "events_scan": 384,
    "background": 24,
}
#: The budget the base caps are sized for; above it they grow in proportion.
BASE_BUDGET: Final = 2_000
_MAX_RECALL_K = 1_000
_MAX_BUDGET = 10_000_000
_MAX_AT = 2**63 - 1
_MAX_QUERY = 10_000  # characters
_STATE_RETRIES = 3


@attrs.frozen
class ContextBundle:
    """A packed context: the prompt text and what went into it.

    Attributes:
        text: the prompt text (format in ``docs/context.md``); ``""`` when nothing fits.
        items: ``(uri, layer, form)`` for every memory in the text, in text order; each
            URI is pinned to the head version that was rendered.
        tokens: the text's token count as the estimator counts it; never above the budget.
        digest: hex BLAKE3-256 of ``text`` in UTF-8. The same state and arguments give
            the same text, hence the same digest, in any process.
    """

    text: str
    items: tuple[tuple[MemoryURI, str, str], ...]
    tokens: int
    digest: str


def caps_for(budget_tokens: int) -> dict[str, int]:
    """The candidate caps for a budget: :data:`BASE_CAPS` up to :data:`BASE_BUDGET`
    tokens, multiplied by ``ceil(budget / BASE_BUDGET)`` above it (recall's ``k`` at most
    1,000).

    >>> caps_for(600)["background"], caps_for(5_000)["background"], caps_for(5_000)["hits"]
    (24, 72, 48)
    """
    scale = max(1, -(-budget_tokens // BASE_BUDGET))
    caps = {name: cap * scale for name, cap in BASE_CAPS.items()}
    caps["hits"] = min(caps["hits"], _MAX_RECALL_K)
    return caps


# ---------------------------------------------------------------------------
# arguments


def _check_args(
    query: object, budget_tokens: object, channel: object, now: object, estimator: object
) -> tuple[str | None, int, str | None, TokenEstimator]:
    if type(budget_tokens) is not int or not 0 <= budget_tokens <= _MAX_BUDGET:
        raise ValidationError(
            f"must be an integer in 0..{_MAX_BUDGET:,}, not {budget_tokens!r}",
            field="budget_tokens",
        )
    if query is not None:
        if type(query) is not str or not query.strip():
            raise ValidationError("must be None or a non-empty string", field="query")
        if len(query) > _MAX_QUERY:
            raise ValidationError(f"longer than {_MAX_QUERY:,} characters", field="query")
        check_utf8(query, "query")
    if channel is not None:
        if type(channel) is not str or not channel:
            raise ValidationError("must be None or a non-empty string", field="channel")
        if len(channel) > MAX_SHORT_TEXT:
            raise ValidationError(f"longer than {MAX_SHORT_TEXT} characters", field="channel")
        check_utf8(channel, "channel")
        channel = unicodedata.normalize("NFC", channel)  # as Event.channel is stored
    if now is not None and (type(now) is not int or not 0 <= now <= _MAX_AT):
        raise ValidationError(
            f"must be None or integer milliseconds since the epoch, not {now!r}", field="now"
        )
    if estimator is None:
        estimator = estimate_tokens
    elif not callable(estimator):
        raise ValidationError("must be a callable (text) -> int", field="estimator")
    return query, budget_tokens, channel, estimator


# ---------------------------------------------------------------------------
# reading


class _Reader:
    """Rows to records within one read transaction, each memory read once; and the
    salience walks the selection needs."""

    def __init__(
        self, h: Handle, txn: ReadTxn, index: ColumnIndex, seq: int, now: int
    ) -> None:
        self.h = h
        self.txn = txn
        self.index = index
        self.seq = seq
        self.now = now
        active = index.active(index.all_rows())
        types = index.cols["type"][active]
        keep = np.isin(types, _AGENT_CODES)
        #: the active agent-facing memories (sorted rows) and their type codes
        self.agent: Rows = active[keep]
        self.types: npt.NDArray[np.uint8] = types[keep]
        self._bounds: tuple[npt.NDArray[np.int64], ...] | None = None
        self._by_type: tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None = None

    def record(self, row: int) -> Record:
        """The row's head version (kept by the index's per-row memos)."""
        return row_record(self.txn, self.h.actor, self.index, row, self.seq)

    def of_type(self, type_name: str) -> npt.NDArray[np.intp]:
        """The positions in :attr:`agent` of this type's memories, ascending.

        The agent rows are grouped by type once (a stable sort of the type codes), so
        each step of the selection reads only its own type's rows and bounds rather than
        masking every agent row: at 100,000 memories that was about 1 ms a step.
        """
        if self._by_type is None:
            order = np.argsort(self.types, kind="stable")
            starts = np.searchsorted(self.types[order], np.arange(257))
            self._by_type = (order, starts)
        order, starts = self._by_type
        code = _TYPE_CODE[type_name]
        positions: npt.NDArray[np.intp] = order[starts[code] : starts[code + 1]]
        return positions

    def rows(self, positions: npt.NDArray[np.intp]) -> Rows:
        """The agent rows at ``positions``."""
        rows: Rows = self.agent[positions]
        return rows

    def _salience_bounds(self) -> tuple[npt.NDArray[np.int64], ...]:
        """Lower and upper bounds of every agent row's salience score
        (``ColumnIndex.salience_bounds``: exact for memories that do not decay)."""
        if self._bounds is None:
            self._bounds = self.index.salience_bounds(self.agent)
        return self._bounds

    def by_salience(self, positions: npt.NDArray[np.intp], most: int) -> Iterator[int]:
        """The first ``most`` rows of ``index.ordered(self.rows(positions), "salience",
        now)``, exactly, without scoring every row.

        With bounds ``L <= score <= U`` per row: if ``l`` is the ``most``-th largest
        lower bound, every row among the exact first ``most`` has ``U >= l``; so
        ``ordered`` is handed only those rows (usually a few hundred), and its first
        ``most`` are the same. Reading more than ``most`` rows from the result would be
        wrong, so it stops there.
        """
        rows = self.rows(positions)
        if most <= 0:
            return iter(())
        if len(rows) > most:
            lower, upper = (bound[positions] for bound in self._salience_bounds())
            kth = np.partition(lower, len(rows) - most)[len(rows) - most]
            rows = rows[upper >= kth]
        return itertools.islice(self.index.ordered(rows, "salience", self.now), most)


def _take(rows: Iterator[int], want: int, keep: Callable[[int], bool], scan: int) -> list[int]:
    """The first ``want`` rows ``keep`` accepts, looking at no more than ``scan`` rows."""
    taken: list[int] = []
    if want <= 0:
        return taken
    for seen, row in enumerate(rows, start=1):
        if keep(row):
            taken.append(row)
            if len(taken) == want:
                break
        if seen >= scan:
            break
    return taken


def _floor(reader: _Reader, caps: dict[str, int], relevant: set[int]) -> list[int]:
    """The floor's rows in rank order; the hottest Facts leave out ``relevant`` (the
    recall hits, which the foreground shows)."""
    chosen: list[int] = []
    taken: set[int] = set()  # membership only; never iterated

    def fresh(row: int) -> bool:
        return row not in taken

    def add(rows: list[int]) -> None:
        chosen.extend(rows)
        taken.update(rows)

    def active_goal(row: int) -> bool:
        memory = reader.record(row).memory
        return not isinstance(memory, Goal) or memory.status == "active"

    pinned = np.flatnonzero(reader.index.cols["pinned"][reader.agent])
    scan = caps["pinned"] + caps["goals_scan"]
    pinned_rows = _take(reader.by_salience(pinned, scan), caps["pinned"], active_goal, scan)
    add(pinned_rows)
    scan = caps["goals_scan"]
    goals = _take(
        reader.by_salience(reader.of_type("goal"), scan),
        caps["goals"],
        lambda row: fresh(row) and active_goal(row),
        scan,
    )
    add(goals)
    for step, type_name in (("constraints", "constraint"), ("preferences", "preference")):
        scan = caps[step] + len(pinned_rows)
        rows = reader.by_salience(reader.of_type(type_name), scan)
        add(_take(rows, caps[step], fresh, scan))
    scan = caps["facts"] + len(pinned_rows) + len(relevant)
    facts = reader.by_salience(reader.of_type("fact"), scan)
    add(_take(facts, caps["facts"], lambda row: fresh(row) and row not in relevant, scan))
    return chosen


def _channel_events(reader: _Reader, channel: str, want: int, scan: int) -> list[int]:
    """The ``want`` newest Events of ``channel``: walking the Events from the latest head
    version back (by ``at``, looking at no more than ``scan``), the first ``want`` on the
    channel, then ordered newest ``occurred_at`` (else ``at``) first, ties by id."""
    index = reader.index

    def on_channel(row: int) -> bool:
        memory = reader.record(row).memory
        return isinstance(memory, Event) and memory.channel == channel

    events = reader.rows(reader.of_type("event"))
    found = _take(index.ordered(events, "recent", 0), want, on_channel, scan)

    def when(row: int) -> int:
        record = reader.record(row)
        occurred = record.memory.occurred_at if isinstance(record.memory, Event) else None
        return record.at if occurred is None else occurred

    found.sort(key=lambda row: (-when(row), index.ids[row]))
    return found[:want]


# ---------------------------------------------------------------------------
# the verb


def run_context(
    h: Handle,
    *,
    query: str | None,
    budget_tokens: int,
    channel: str | None,
    now: int | None,
    estimator: TokenEstimator | None,
) -> ContextBundle:
    """Carry out :meth:`Cortex.context`: choose candidates, pack them, report the bundle.

    Args:
        h: the open handle.
        query: what the prompt is about; its ``recall`` hits fill the foreground.
        budget_tokens: the most tokens the text may cost (0..10,000,000).
        channel: a channel whose most recent Events fill the foreground (after the
            recall hits, when there is a query).
        now: the instant salience is computed at (ms; default: the handle's clock).
        estimator: counts tokens (default ``estimate_tokens``).

    Returns:
        A :class:`ContextBundle`; never more than ``budget_tokens`` tokens.

    Raises:
        ValidationError: a bad argument, naming it.
        CortexError: called inside an open batch of this thread.
    """
    query, budget_tokens, channel, count = _check_args(
        query, budget_tokens, channel, now, estimator
    )
    if h.active_batch() is not None:
        raise CortexError(
            "context reads committed state; call it outside the batch (or after it commits)"
        )
    now = h.at(now)
    caps = caps_for(budget_tokens)
    for attempt in range(_STATE_RETRIES):
        hits = None
        if query is not None and budget_tokens > 0:
            hits = run_recall(
                h,
                query,
                k=caps["hits"],
                where=None,
                mode="hybrid",
                fusion="score",
                late_binding=False,
                now=now,
                expand_graph=True,
            )
        with h.indexed_read() as (txn, index, seq):
            if hits is not None and hits.seq != seq and attempt + 1 < _STATE_RETRIES:
                continue  # a writer committed between recall and this read: once more
            items = _candidates(h, txn, index, seq, hits, channel, caps, now, budget_tokens)
            break
    packed = pack_context(items, budget_tokens, estimator=count)
    uris = {item.uri: item.record.uri for item in items}
    return ContextBundle(
        text=packed.text,
        items=tuple((uris[uri], layer, form) for uri, layer, form in packed.items),
        tokens=packed.tokens,
        digest=packed.digest,
    )


def _candidates(
    h: Handle,
    txn: ReadTxn,
    index: ColumnIndex,
    seq: int,
    hits: RecallResult | None,
    channel: str | None,
    caps: dict[str, int],
    now: int,
    budget_tokens: int,
) -> list[ContextItem]:
    if budget_tokens == 0:
        return []
    reader = _Reader(h, txn, index, seq, now)
    items: list[ContextItem] = []
    ranks = {"floor": 0, "foreground": 0, "background": 0}
    seen: set[str] = set()  # membership only; never iterated

    def add(record: Record, layer: str) -> None:
        uri = str(record.uri)
        if uri in seen or record.status != "active":
            return
        if record.memory.type_name not in AGENT_TYPES:
            return
        seen.add(uri)
        items.append(
            ContextItem(
                uri=uri,
                type_name=record.memory.type_name,
                layer=layer,
                rank=ranks[layer],
                record=record,
            )
        )
        ranks[layer] += 1

    recalled: list[Record] = []
    if hits is not None:
        for hit in hits:
            if hit.record.memory.type_name in AGENT_TYPES:
                recalled.extend((hit.record, *hit.attached))
    relevant = [index.row_of[record.uri.id] for record in recalled]
    chosen = _floor(reader, caps, set(relevant))
    for row in chosen:
        add(reader.record(row), "floor")
    for record in recalled:
        add(record, "foreground")
    chosen.extend(relevant)
    if channel is not None:
        want = caps["events"] if hits is None else caps["events_with_query"]
        events = _channel_events(reader, channel, want, caps["events_scan"])
        for row in events:
            add(reader.record(row), "foreground")
        chosen.extend(events)
    rest = np.ones(len(reader.agent), dtype=np.bool_)
    taken = np.asarray(sorted(set(chosen)), dtype=np.int64)
    rest[np.searchsorted(reader.agent, taken)] = False  # every chosen row is an agent row
    for row in reader.by_salience(np.flatnonzero(rest), caps["background"]):
        add(reader.record(row), "background")
    return items
