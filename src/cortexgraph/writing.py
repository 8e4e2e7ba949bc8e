"""The write sequence, written once: journal append -> ``core.journal.apply`` -> MMR ->
keyword segments -> SMT.

A :class:`Batch <cortexgraph.batch.Batch>` and a replay (``replay.rebuild``,
``replay.verify``) both run every entry through :class:`EntryWriter`, so the derived state
a write leaves is the state a replay of its journal leaves (J4).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from .core.commitments import mmr_mutations, smt_mutations
from .core.journal import Entry, Identity, apply, edge_keys, head_ids
from .core.postings import KeywordChange
from .core.segments import (
    FANOUT,
    MAX_LEVEL,
    PREFIX_SIZE,
    SEGMENT,
    STATS,
    Postings,
    build_postings,
    decode_block,
    decode_stats,
    docs_blocks,
    encode_stats,
    merge_level,
    range_first,
    segment_blocks,
    segment_of_key,
    segment_prefix,
    span,
)
from .core.signals import attrs_key, index_seq_of
from .errors import CorruptionError
from .store.memtxn import MemTxn
from .store.txn import WriteTxn

__all__ = ["EntryWriter", "GatheredKeywords", "KeywordSegments"]

#: a writer keeps the segments it completed at levels below this in memory for the next
#: merge (at most 15 of each level: about 4,000 memories' postings; level 1 as docs)
_KEPT_LEVELS = 3
#: a memory id as one NumPy item, for membership tests on a segment's id rows
_ID_VOID = np.dtype((np.void, 16))
#: the tables whose rows the SMT's leaves are hashed from (``commitments.smt_mutations``)
_LEAF_TABLES = frozenset({"heads", "versions", "edges"})


class EntryWriter:
    """Applies journal entries to a write transaction, and the SMT changes they imply.

    :meth:`write` appends the entry (optionally), applies its derived mutations and its MMR
    nodes, hands its keyword changes to :attr:`keywords`, and notes the memories and edges
    whose SMT leaves changed; :meth:`flush` writes the keyword segments no merge took and
    applies those SMT changes. Both are deferred so that a batch (or a stretch of a
    replay) writes its entries' postings merged and hashes each changed leaf once.

    Attributes:
        dirty: memory ids whose head changed since the last flush.
        dirty_edges: out-keys of the edges that changed since the last flush.
        keywords: the keyword segments being written.
        gathered: with ``gather_keywords`` (a whole-journal replay), the keyword changes
            are gathered (:class:`GatheredKeywords`) and the ``postings`` table built from
            them in bulk, instead of segments written and merged as the entries go.
    """

    __slots__ = (
        "dirty",
        "dirty_edges",
        "gathered",
        "hash_name",
        "identity",
        "keywords",
        "peaks",
        "written",
    )

    def __init__(self, identity: Identity, *, gather_keywords: bool = False) -> None:
        self.identity = identity
        self.hash_name = identity.hash_name
        self.dirty: dict[bytes, None] = {}
        self.dirty_edges: dict[bytes, None] = {}
        #: the ``heads``, ``versions`` and ``edges`` rows written to an LMDB transaction
        #: since the last flush, which the SMT's leaves are hashed from: the flush takes
        #: them from here instead of looking each up again in LMDB's B-trees
        self.written: dict[tuple[str, bytes], bytes | None] = {}
        self.keywords = KeywordSegments()
        self.gathered = GatheredKeywords() if gather_keywords else None
        #: the MMR peaks this writer appended (``mmr_mutations``): a batch reads no row
        #: back that it wrote
        self.peaks: dict[int, bytes] = {}

    def write(
        self,
        txn: WriteTxn | MemTxn,
        entry: Entry,
        data: bytes,
        *,
        append: bool,
        trusted: bool,
    ) -> bytes:
        """Apply ``entry`` (encoded as ``data``) to ``txn``; returns its MMR leaf hash.

        Args:
            append: also store the entry in the journal (a replay of a store's own
                journal already has it).
            trusted: the entry was built by this process's checked code (see
                ``core.journal.apply``).
        """
        if append:
            txn.append_entry(entry.seq, data)
        changes: list[KeywordChange] = []
        mutations = apply(self.identity, entry, txn, trusted=trusted, keywords=changes)
        if not isinstance(txn, MemTxn):  # an in-memory table is as quick to read back
            written = self.written
            for table, key, value in mutations:
                if table in _LEAF_TABLES:
                    written[table, key] = value
        # The MMR reads only its own rows (and this writer's peaks), which ``apply`` does
        # not write: its row joins the entry's mutations in one call.
        row = mmr_mutations(self.hash_name, txn.get, entry.seq - 1, data, peaks=self.peaks)
        mutations.extend(row)
        txn.apply_mutations(mutations)
        if self.gathered is None:
            self.keywords.advance(txn, entry.seq, changes)
        else:
            self.gathered.add(entry.seq, changes)
        self.dirty.update(dict.fromkeys(head_ids(entry.op, entry.fields)))
        self.dirty_edges.update(dict.fromkeys(edge_keys(entry.op, entry.fields)))
        leaf: bytes = row[0][2][:32]  # type: ignore[index]  # a put: the leaf comes first
        return leaf

    @property
    def pending(self) -> int:
        """How many SMT leaves wait for :meth:`flush`."""
        return len(self.dirty) + len(self.dirty_edges)

    def flush(self, txn: WriteTxn | MemTxn) -> None:
        """Write the keyword segments held and the statistics, and apply the SMT changes
        of the entries written since the last flush."""
        self.keywords.flush(txn)
        if self.dirty or self.dirty_edges:
            written = self.written
            get = txn.get

            def read(table: str, key: bytes) -> bytes | None:
                found = (table, key)
                return written[found] if found in written else get(table, key)

            changes = smt_mutations(self.hash_name, read, self.dirty, self.dirty_edges)
            txn.apply_mutations(changes)
            self.dirty.clear()
            self.dirty_edges.clear()
        self.written.clear()


class GatheredKeywords:
    """The ``postings`` rows of a whole-journal replay, built in bulk
    (``core.segments.build_postings``: the rows writes leave) instead of merge by merge.

    A segment of the highest level never changes once the replay has passed its range's
    end (it is never merged and its content is fixed as of that seq), so its rows are built
    then and its changes dropped: a replay holds at most one top range's changes (65,536
    entries' terms), not the whole journal's. The statistics are running totals.
    """

    __slots__ = ("changes", "count", "rows", "total")

    def __init__(self) -> None:
        self.changes: list[tuple[int, bytes, dict[str, int] | None]] = []
        self.rows: list[tuple[bytes, bytes]] = []
        self.count = 0
        self.total = 0

    def add(self, seq: int, changes: list[KeywordChange]) -> None:
        """Gather the keyword changes of the entry at ``seq``."""
        for change in changes:
            self.changes.append((seq, change.memory_id, change.terms))
            docs, length = change.stats_delta()
            self.count += docs
            self.total += length
        if seq % span(MAX_LEVEL) == 0:
            self._build(seq)

    def _build(self, last: int) -> None:
        self.rows.extend(row for row in build_postings(self.changes, last) if row[0] != STATS)
        self.changes = []

    def finish(self, last: int) -> list[tuple[bytes, bytes]]:
        """Every row of the ``postings`` table at seq ``last`` (unordered)."""
        self._build(last)
        if self.count < 0 or self.total < 0:
            raise CorruptionError("the keyword statistics would drop below zero")
        stats = encode_stats(self.count, self.total)
        return self.rows if stats is None else [*self.rows, (STATS, stats)]


class KeywordSegments:
    """The keyword segments (``core.segments``) that a stretch of entries writes.

    Every entry that indexes a memory makes a level-0 segment of its own; the segments of
    a level-1 range (16 entries) merge when its last entry is applied, and those of each
    higher range at its end. What this writer applied is kept in memory, loaded from the
    transaction only where another writer left it: :meth:`advance` applies an entry's
    keyword changes and merges at a range's end; :meth:`flush` writes the segments still
    held and the statistics. A level-0 segment is written only if no merge takes it
    first, so a batch writes its entries' postings once, merged, and a single write adds
    one small row. The rows after a flush depend only on the entries applied, never on
    where flushes fell.
    """

    __slots__ = (
        "docs",
        "done",
        "done_killed",
        "first",
        "fresh",
        "held_from",
        "killed",
        "level1",
        "stats",
        "stats_dirty",
        "unwritten",
    )

    def __init__(self) -> None:
        #: the first seq of the level-1 range of the entries being applied (0: none)
        self.first = 0
        #: the seq from which :attr:`docs` holds every level-0 segment of that range (the
        #: earlier ones, written by another writer, are read from the table at its end)
        self.held_from = 0
        #: the live docs of those level-0 segments: memory id -> its terms
        self.docs: dict[bytes, dict[str, int]] = {}
        #: the level-0 segments applied and not written yet: ``(seq, memory id -> terms)``
        self.fresh: list[tuple[int, dict[bytes, dict[str, int]]]] = []
        #: ``[memories indexed, sum of their lengths]``, once loaded
        self.stats: list[int] | None = None
        self.stats_dirty = False
        #: the completed level-1 segments this writer made, by first seq, as their live
        #: docs were when the range ended (a segment's content is fixed then)
        self.level1: dict[int, dict[bytes, dict[str, int]]] = {}
        #: per segment of :attr:`level1`, the memories indexed there that a later entry
        #: re-indexed or stopped indexing: its live docs are the others, so the next merge
        #: needs no index seq read and no postings arrays for it
        self.killed: dict[int, set[bytes]] = {}
        #: the completed level-2 segments this writer made, by (level, first seq): what
        #: the next merge reads without decoding blocks
        self.done: dict[tuple[int, int], Postings] = {}
        #: per segment of :attr:`done`, the memories it holds that a later entry re-indexed
        #: or stopped indexing (as :attr:`killed` for level 1)
        self.done_killed: dict[tuple[int, int], set[bytes]] = {}
        #: the (level, first seq) of those of :attr:`level1` and :attr:`done` not written
        #: yet (the next flush writes them)
        self.unwritten: set[tuple[int, int]] = set()

    def resumed(self, txn: WriteTxn | MemTxn) -> bool:
        """Prepare segments a committed batch left, for the next batch (which starts right
        after the seq they reflect, so they are the table's segments then): whether the
        table agrees, as far as a read of its statistics tells."""
        if self.fresh or self.unwritten or self.stats_dirty:
            return False  # never flushed: not what the table holds
        return self.stats is None or list(decode_stats(txn.get("postings", STATS))) == self.stats

    def advance(self, txn: WriteTxn | MemTxn, seq: int, changes: list[KeywordChange]) -> None:
        """Apply the keyword changes of the entry at ``seq`` (its level-0 segment), then
        merge the segments of the ranges that ``seq`` ends.

        Raises:
            CorruptionError: the statistics would drop below zero, or a stored segment
                is malformed.
        """
        first = range_first(1, seq)
        if self.first != first:
            self.first, self.held_from, self.docs = first, seq, {}
        if changes:
            stats = self.stats
            if stats is None:
                stats = self.stats = list(decode_stats(txn.get("postings", STATS)))
            docs = self.docs
            entry: dict[bytes, dict[str, int]] = {}
            for change in changes:
                docs_delta, length_delta = change.stats_delta()
                stats[0] += docs_delta
                stats[1] += length_delta
                memory_id = change.memory_id
                before = change.before
                if 0 < before < first and (self.level1 or self.done):
                    killed = self.killed.get(range_first(1, before))
                    if killed is None:  # or in the held level-2 segment of its range
                        killed = self.done_killed.get((2, range_first(2, before)))
                    if killed is not None:  # its posting there is no longer live
                        killed.add(memory_id)
                docs.pop(memory_id, None)
                entry.pop(memory_id, None)
                if change.terms is not None:
                    docs[memory_id] = change.terms
                    entry[memory_id] = change.terms
            if entry:
                self.fresh.append((seq, entry))
            self.stats_dirty = True
        if seq % FANOUT == 0:
            level = merge_level(seq)
            if level > 1:
                self._merge(txn, level, seq)
            else:
                # completed: written at the next flush, unless a merge takes it first
                live = self._range_docs(txn)
                if live:
                    self.level1[first] = live
                    self.killed[first] = set()
                    self.unwritten.add((1, first))
                _replace(txn, [key for key, _ in _segment_rows(txn, 0, first, seq)], [])
            self.first, self.held_from, self.docs, self.fresh = 0, 0, {}, []

    def flush(self, txn: WriteTxn | MemTxn) -> None:
        """Write the segments still held in memory (completed ones, and the level-0
        segments of the entries since the last range end) and the statistics row."""
        rows: list[tuple[bytes, bytes]] = []
        for level, first in sorted(self.unwritten):
            if level == 1:
                rows.extend(docs_blocks(1, first, self.level1[first]))
            else:
                rows.extend(segment_blocks(level, first, self.done[level, first]))
        self.unwritten.clear()
        for seq, docs in self.fresh:
            rows.extend(docs_blocks(0, seq, docs))
        self.fresh = []
        if rows:
            txn.apply_mutations([("postings", key, value) for key, value in rows])
        if self.stats_dirty and self.stats is not None:
            stats = encode_stats(*self.stats)
            if stats is None:
                txn.apply_mutations([("postings", STATS, None)])
            else:
                txn.put("postings", STATS, stats)
            self.stats_dirty = False

    def _range_docs(self, txn: WriteTxn | MemTxn) -> dict[bytes, dict[str, int]]:
        """The live docs of every level-0 segment of the current level-1 range: those
        this writer holds, and those another writer left in the table (a posting there is
        live while its memory's index seq is still that segment's seq)."""
        if self.held_from == self.first:
            return self.docs
        rows = _segment_rows(txn, 0, self.first, self.held_from - 1)
        if not rows:
            return self.docs
        parts = [
            (segment_of_key(key)[1], decode_block(value, key[PREFIX_SIZE:])) for key, value in rows
        ]
        index_seqs = _index_seqs(txn, np.concatenate([postings.ids for _, postings in parts]))
        found: dict[bytes, dict[str, int]] = {}
        at = 0
        for seq, postings in parts:
            mine = index_seqs[at : at + len(postings)]
            at += len(postings)
            ids = postings.ids[mine == seq].tobytes()
            live = {ids[i : i + 16] for i in range(0, len(ids), 16)}
            for memory_id, terms in postings.docs().items():
                if memory_id in live:
                    found.setdefault(memory_id, {}).update(terms)
        found.update(self.docs)
        return found

    def _merge(self, txn: WriteTxn | MemTxn, level: int, seq: int) -> None:
        """Merge every segment inside the level-``level`` range (``level >= 2``) that
        ``seq`` ends into one level-``level`` segment, dropping the postings no longer live
        (liveness: the memory's index seq, as the attributes rows hold it, lies in the
        posting's segment's range).

        The docs this writer holds (the last level-1 range's level-0 segments, and its
        completed level-1 segments less the memories indexed again or no longer since,
        which :meth:`advance` notes) are exactly the live ones of their segments: they go
        in as one part, without a read. Only the other children need their memories'
        index seqs."""
        first = seq - span(level) + 1
        old: list[bytes] = []
        children: list[tuple[int, int, Postings]] = []
        for lower in range(level):
            for key, value in _segment_rows(txn, lower, first, seq):
                old.append(key)
                child = segment_of_key(key)
                if child[0] == 0 or (child[0] == 1 and child[1] in self.level1):
                    continue  # held, or the last range's (which _range_docs reads)
                if child not in self.done:
                    children.append((*child, decode_block(value, key[PREFIX_SIZE:])))
        live_docs: dict[bytes, dict[str, int]] = {}
        for child_first, docs in sorted(self.level1.items()):
            if first <= child_first <= seq:
                killed = self.killed[child_first]
                live_docs.update(item for item in docs.items() if item[0] not in killed)
        live_docs.update(self._range_docs(txn))
        parts: list[tuple[Postings, np.typing.NDArray[np.bool_]]] = []
        if live_docs:
            held = Postings.from_docs(live_docs)
            parts.append((held, np.ones(len(held), dtype=np.bool_)))
        # one part wholly live is already merged (Postings.merge would sort it again)
        merged_already = len(parts) == 1
        if children:  # read from the table: live where the memory's index seq says so
            index_seqs = _index_seqs(txn, np.concatenate([p.ids for _, _, p in children]))
            at = 0
            for child_level, child_first, postings in children:
                mine = index_seqs[at : at + len(postings)]
                at += len(postings)
                live = (mine >= child_first) & (mine < child_first + span(child_level))
                parts.append((postings, live))
        # the completed segments held in memory (the unwritten ones are not in the table):
        # live but for the memories noted since
        for child, postings in sorted(self.done.items()):
            if child[0] < level and first <= child[1] <= seq:
                parts.append((postings, _live_unless(postings, self.done_killed[child])))
        merged = parts[0][0] if merged_already and len(parts) == 1 else Postings.merge(parts)
        self.done = {child: kept for child, kept in self.done.items() if child[1] < first}
        self.done_killed = {
            child: ids for child, ids in self.done_killed.items() if child[1] < first
        }
        self.level1 = {start: docs for start, docs in self.level1.items() if start < first}
        self.killed = {start: ids for start, ids in self.killed.items() if start < first}
        self.unwritten = {child for child in self.unwritten if child[1] < first}
        if level < _KEPT_LEVELS:
            _replace(txn, old, [])
            self.done[level, first] = merged
            self.done_killed[level, first] = set()
            self.unwritten.add((level, first))
        else:
            _replace(txn, old, segment_blocks(level, first, merged))


def _live_unless(postings: Postings, killed: set[bytes]) -> np.typing.NDArray[np.bool_]:
    """Which of ``postings`` belong to none of the memories ``killed``."""
    if not killed:
        return np.ones(len(postings), dtype=np.bool_)
    ids = np.ascontiguousarray(postings.ids).view(_ID_VOID).ravel()
    gone = np.frombuffer(b"".join(killed), dtype=_ID_VOID)
    live: np.typing.NDArray[np.bool_] = ~np.isin(ids, gone)
    return live


def _index_seqs(
    txn: WriteTxn | MemTxn, ids: np.typing.NDArray[np.uint8]
) -> np.typing.NDArray[np.int64]:
    """The current index seq of each memory id (one 16-byte row of ``ids`` each), one
    attributes row read per distinct id."""
    halves = np.ascontiguousarray(ids).view(">u8").reshape(-1, 2)
    # Sorted by their first 8 bytes (numpy's unstable sort of 64-bit integers is several
    # times faster than a stable one): a run of equal ids is one read. Distinct ids that
    # share those bytes may interleave, and an id split so is only read more than once.
    order = np.argsort(halves[:, 0].astype(np.uint64))
    ordered = halves[order]
    starts = np.ones(len(order), dtype=np.bool_)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    group = np.cumsum(starts) - 1
    blob = np.ascontiguousarray(ids[order[starts]]).tobytes()
    keys = [attrs_key(blob[at : at + 16]) for at in range(0, len(blob), 16)]
    get = txn.get
    rows = [get("salience", key) for key in keys]
    if None in rows:
        memory_id = keys[rows.index(None)][-16:]
        raise CorruptionError(
            f"a keyword segment names memory {memory_id.hex()}, which has no attributes row",
            table="postings",
        )
    present = cast("list[bytes]", rows)  # none is None
    found = np.fromiter(map(index_seq_of, present), dtype=np.int64, count=len(present))
    result = np.empty(len(order), dtype=np.int64)
    result[order] = found[group]
    return result


def _segment_rows(
    txn: WriteTxn | MemTxn, level: int, first: int, last: int
) -> list[tuple[bytes, bytes]]:
    """The blocks of the level-``level`` segments whose first seq lies in ``[first, last]``."""
    head = SEGMENT + bytes((level,))
    found = []
    for key, value in txn.iter_items("postings", head, segment_prefix(level, first)):
        if int.from_bytes(key[2:PREFIX_SIZE], "big") > last:
            break
        found.append((bytes(key), bytes(value)))
    return found


def _replace(txn: WriteTxn | MemTxn, old: list[bytes], rows: list[tuple[bytes, bytes]]) -> None:
    """Delete the rows ``old`` that ``rows`` does not rewrite, and put ``rows``."""
    kept = {key for key, _ in rows}
    changes: list[tuple[str, bytes, bytes | None]] = [
        ("postings", key, None) for key in old if key not in kept
    ]
    changes.extend(("postings", key, value) for key, value in rows)
    txn.apply_mutations(changes)
