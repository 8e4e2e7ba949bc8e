"""The write sequence, written once: journal append -> ``core.journal.apply`` -> MMR ->
keyword segments -> SMT.

A :class:`Batch <cortexgraph.batch.Batch>` and a replay (``replay.rebuild``,
``replay.verify``) both run every entry through :class:`EntryWriter`, so the derived state
a write leaves is the state a replay of its journal leaves (J4).
"""

from __future__ import annotations

import threading
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
    OpenBlock,
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
#: merge (at most 15 of each level: about 4,000 memories' postings; level 0 as docs)
_KEPT_LEVELS = 2
#: open-segment blocks this process wrote, kept encoded term by term: the next batch's
#: writer finds the block it must extend already decoded, and a single write re-encodes
#: only its memory's terms. Keyed by the row's key and length (hashing the block's bytes
#: would cost more than comparing them), each entry holds the bytes it encodes, and is
#: used only when they equal the stored row's, so it can never be stale; a writer changes
#: a copy.
_DECODED: dict[tuple[bytes, int], tuple[bytes, OpenBlock]] = {}
_DECODED_SIZE = 8
_DECODED_LOCK = threading.Lock()
#: a memory id as one NumPy item, for membership tests on a segment's id rows
_ID_VOID = np.dtype((np.void, 16))
#: the tables whose rows the SMT's leaves are hashed from (``commitments.smt_mutations``)
_LEAF_TABLES = frozenset({"heads", "versions", "edges"})
#: a writer keeps the open segment's block encoded (:class:`OpenBlock`) through this many
#: keyword changes, and then drops it: a batch encodes the block once, at its flush
_BLOCK_EDITS = 4


class EntryWriter:
    """Applies journal entries to a write transaction, and the SMT changes they imply.

    :meth:`write` appends the entry (optionally), applies its derived mutations and its MMR
    nodes, hands its keyword changes to :attr:`keywords`, and notes the memories and edges
    whose SMT leaves changed; :meth:`flush` writes the open keyword segment and applies
    those SMT changes. Both are deferred so that a batch (or a stretch of a replay)
    writes the open segment once and hashes each changed leaf once.

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
        """Write the open keyword segment and the statistics, and apply the SMT changes
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

    The open level-0 segment and the statistics are kept in memory, loaded from the
    transaction on first need: :meth:`advance` changes them entry by entry, writes a
    level-0 segment when its range completes and merges at the end of a higher level's
    range; :meth:`flush` writes the open segment and the statistics as they stand. The
    rows after a flush depend only on the entries applied, never on where flushes fell.
    """

    __slots__ = (
        "block",
        "dirty",
        "docs",
        "done",
        "done_killed",
        "edits",
        "first",
        "killed",
        "level0",
        "level0_blocks",
        "open_keys",
        "stats",
        "stats_dirty",
        "unwritten",
    )

    def __init__(self) -> None:
        #: the first seq of the open range whose segment :attr:`docs` holds (0: none)
        self.first = 0
        #: the open segment: memory id -> its terms
        self.docs: dict[bytes, dict[str, int]] = {}
        #: the keys of the open segment's rows in the table (read when it was loaded)
        self.open_keys: list[bytes] = []
        #: the open segment changed since it was loaded or written
        self.dirty = False
        #: the open segment's block, kept encoded while :attr:`edits` is below
        #: :data:`_BLOCK_EDITS` (its ``docs`` is :attr:`docs`); None once dropped
        self.block: OpenBlock | None = None
        #: the keyword changes this writer applied to an open segment
        self.edits = 0
        #: ``[memories indexed, sum of their lengths]``, once loaded
        self.stats: list[int] | None = None
        self.stats_dirty = False
        #: the completed level-1 segments this writer wrote, by (level, first seq): what
        #: the next merge reads without decoding blocks
        self.done: dict[tuple[int, int], Postings] = {}
        #: per segment of :attr:`done`, the memories it holds that a later entry re-indexed
        #: or stopped indexing (as :attr:`killed` for level 0): the next merge reads no
        #: index seq for its postings
        self.done_killed: dict[tuple[int, int], set[bytes]] = {}
        #: the completed level-0 segments this writer wrote, by first seq, as the open
        #: segment's docs were when its range ended (a segment's content is fixed then)
        self.level0: dict[int, dict[bytes, dict[str, int]]] = {}
        #: per segment of :attr:`level0`, the memories indexed there that a later entry
        #: re-indexed or stopped indexing: its live docs are the others, so the next merge
        #: needs no index seq read and no postings arrays for it
        self.killed: dict[int, set[bytes]] = {}
        #: the encoded blocks of those of :attr:`level0` that were kept encoded to the end
        #: (:attr:`block`): their flush joins them instead of encoding them again
        self.level0_blocks: dict[int, OpenBlock] = {}
        #: the (level, first seq) of those of :attr:`done` and :attr:`level0` not written
        #: yet (the next flush writes them)
        self.unwritten: set[tuple[int, int]] = set()

    def resumed(self, txn: WriteTxn | MemTxn) -> bool:
        """Prepare segments a committed batch left, for the next batch (which starts right
        after the seq they reflect, so they are the table's segments then): whether the
        table agrees, as far as a read of its statistics tells."""
        if self.dirty or self.unwritten or self.stats_dirty:
            return False  # never flushed: not what the table holds
        if self.stats is not None and list(decode_stats(txn.get("postings", STATS))) != self.stats:
            return False
        self.edits = 0  # as a new writer: a single write keeps the open block encoded
        return True

    def advance(self, txn: WriteTxn | MemTxn, seq: int, changes: list[KeywordChange]) -> None:
        """Apply the keyword changes of the entry at ``seq``, then complete the level-0
        range if ``seq`` ends it (writing its segment, or merging at a higher range's end).

        Raises:
            CorruptionError: the statistics would drop below zero, or a stored segment
                is malformed.
        """
        if changes:
            stats = self.stats
            if stats is None:
                stats = self.stats = list(decode_stats(txn.get("postings", STATS)))
            first = range_first(0, seq)
            for change in changes:
                docs_delta, length_delta = change.stats_delta()
                stats[0] += docs_delta
                stats[1] += length_delta
                before = change.before
                if 0 < before < first and (self.level0 or self.done):
                    killed = self.killed.get(range_first(0, before))
                    if killed is None:  # or in the held level-1 segment of its range
                        killed = self.done_killed.get((1, range_first(1, before)))
                    if killed is not None:  # its posting there is no longer live
                        killed.add(change.memory_id)
                if before >= first or change.terms is not None:
                    docs = self._open(txn, first)
                    self.edits += 1
                    block = self.block
                    if block is not None and self.edits > _BLOCK_EDITS:
                        block = self.block = None  # a batch: encoded once, at the flush
                    if block is not None:  # keeps ``docs`` (its own) up to date too
                        block.remove(change.memory_id)
                        if change.terms is not None:
                            block.add(change.memory_id, change.terms)
                    else:
                        docs.pop(change.memory_id, None)
                        if change.terms is not None:
                            docs[change.memory_id] = change.terms
                    self.dirty = True
            self.stats_dirty = True
        if seq % FANOUT == 0:
            level = merge_level(seq)
            if level:
                self._merge(txn, level, seq)
            elif self.dirty:
                # completed: written at the next flush, unless a merge takes it first
                self.level0[self.first] = self.docs
                self.killed[self.first] = set()
                if self.block is not None:
                    self.level0_blocks[self.first] = self.block
                self.unwritten.add((0, self.first))
            self.first, self.docs, self.dirty, self.block = 0, {}, False, None
            self.open_keys = []

    def flush(self, txn: WriteTxn | MemTxn) -> None:
        """Write the completed segments still held in memory, the open segment and the
        statistics row as they stand."""
        for level, first in sorted(self.unwritten):
            old = [key for key, _ in _segment_rows(txn, level, first, first)]
            if level == 0:
                block = self.level0_blocks.pop(first, None)
                if block is None:
                    rows = docs_blocks(0, first, self.level0[first])
                else:
                    rows = block.rows(0, first)
            else:
                rows = segment_blocks(level, first, self.done[level, first])
            _replace(txn, old, rows)
        self.unwritten.clear()
        if self.dirty:
            block = self.block
            if block is None:
                block = OpenBlock.from_docs(self.docs)
            rows = block.rows(0, self.first)
            _replace(txn, self.open_keys, rows)
            self.open_keys = [key for key, _ in rows]
            if len(rows) == 1:
                (key, value), *_ = rows
                with _DECODED_LOCK:  # writers of other stores may run on other threads
                    if len(_DECODED) >= _DECODED_SIZE:
                        del _DECODED[next(iter(_DECODED))]
                    _DECODED[key, len(value)] = value, block
                # the cached block must not change: this writer goes on with a copy
                if self.edits < _BLOCK_EDITS:
                    self.block = block.copy()
                    self.docs = self.block.docs
                else:
                    self.block, self.docs = None, dict(block.docs)
            self.dirty = False
        if self.stats_dirty and self.stats is not None:
            stats = encode_stats(*self.stats)
            if stats is None:
                txn.apply_mutations([("postings", STATS, None)])
            else:
                txn.put("postings", STATS, stats)
            self.stats_dirty = False

    def _open(self, txn: WriteTxn | MemTxn, first: int) -> dict[bytes, dict[str, int]]:
        """The open segment of the range starting at ``first``, loaded on first use."""
        if self.first != first:
            rows = _segment_rows(txn, 0, first, first)
            known = None
            if len(rows) == 1:
                (key, value), *_ = rows
                cached = _DECODED.get((key, len(value)))
                if cached is not None and cached[0] == value:
                    known = cached[1]
            if known is not None:
                self.block = known.copy()
            elif not rows:
                self.block = OpenBlock()
            else:
                self.block = None
                docs: dict[bytes, dict[str, int]] = {}
                for key, value in rows:
                    for memory_id, terms in decode_block(value, key[PREFIX_SIZE:]).docs().items():
                        docs.setdefault(memory_id, {}).update(terms)
                self.docs = docs
            if self.block is not None:
                self.docs = self.block.docs
            self.first, self.open_keys = first, [key for key, _ in rows]
        return self.docs

    def _merge(self, txn: WriteTxn | MemTxn, level: int, seq: int) -> None:
        """Merge every segment inside the level-``level`` range that ``seq`` ends into one
        level-``level`` segment, dropping the postings no longer live (liveness: the
        memory's index seq, as the attributes rows hold it, lies in the posting's segment's
        range).

        The docs this writer holds (the open segment, and its completed level-0 segments
        less the memories indexed again or no longer since, which :meth:`advance` notes)
        are exactly the live ones of their segments: they go in as one part, without a
        read. Only the other children need their memories' index seqs."""
        first = seq - span(level) + 1
        old: list[bytes] = []
        children: list[tuple[int, int, Postings]] = []
        for lower in range(level):
            for key, value in _segment_rows(txn, lower, first, seq):
                old.append(key)
                child = segment_of_key(key)
                if child[0] == 0 and (child[1] == self.first or child[1] in self.level0):
                    continue  # held in memory: the open segment or a completed one
                if child not in self.done:
                    children.append((*child, decode_block(value, key[PREFIX_SIZE:])))
        live_docs: dict[bytes, dict[str, int]] = {}
        for child_first, docs in sorted(self.level0.items()):
            if first <= child_first <= seq:
                killed = self.killed[child_first]
                live_docs.update(item for item in docs.items() if item[0] not in killed)
        if self.first:
            live_docs.update(self.docs)
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
        self.level0 = {start: docs for start, docs in self.level0.items() if start < first}
        self.killed = {start: ids for start, ids in self.killed.items() if start < first}
        self.level0_blocks = {
            start: block for start, block in self.level0_blocks.items() if start < first
        }
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
