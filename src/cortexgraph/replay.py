"""Replay: drop derived state, rebuild it from the journal, and verify a store.

Everything but the journal, the snapshots and the identity in ``meta`` is derived (J4):
:func:`rebuild` drops it and walks the journal through ``core.journal.apply`` — the same
function writes use — plus the same Merkle maintenance, in one write transaction, so
readers see either the old derived state or the new one.

:func:`verify` never touches the store it checks. It copies the journal into a scratch
environment, rebuilds there, and compares with the original:

- every journal entry must decode canonically (J6), follow the state before it, and hash
  to the MMR leaf the original store recorded for its seq — the first entry that does not
  is the *first diverging seq*;
- every stored :class:`~cortexgraph.core.commitments.SnapshotManifest` must equal the
  manifest the rebuild computes at its seq (M10);
- every derived table must be byte-identical (J4), and the original's OverallRoot, as its
  own ``mmr`` and ``smt`` tables give it, must equal the rebuilt one.

Before LMDB reads a store, the page structure of its ``data.mdb`` is checked without LMDB
(:mod:`cortexgraph.store.pages`): LMDB does not check its pages, and a damaged page
header can make it read past the file and kill the process. A store whose pages are
damaged is reported, not opened.

Verification never stops at the first problem: each actor is verified on its own (a store
that cannot be opened is reported and the others are still checked), and within an actor a
table that cannot be read is reported and the other checks still run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice, zip_longest
from pathlib import Path
from typing import Any

import attrs

from .core.codec import encode
from .core.commitments import SnapshotManifest, build_smt_rows, manifest_for, mmr_key, roots
from .core.graph import OUT
from .core.journal import Identity, decode_entry
from .core.keys import seq_from_key, seq_key
from .core.uri import check_name
from .errors import (
    CorruptionError,
    CortexError,
    NotFoundError,
    ValidationError,
    VerificationError,
)
from .handle import Handle, open_handle
from .store.env import DEFAULT_MAP_SIZE, DERIVED_LAYOUT, DERIVED_TABLES, LAYOUT_KEY, Environment
from .store.guards import MapFull
from .store.memtxn import MemTxn
from .store.pages import check_pages
from .store.txn import ReadTxn, WriteTxn
from .writing import EntryWriter

__all__ = [
    "ActorReport",
    "ReplayError",
    "VerifyReport",
    "append_entries",
    "drop_derived",
    "rebuild",
    "verify",
    "verify_cortex",
]

#: Called with (entries done, entries in all) as replay goes.
Progress = Callable[[int, int], None]

_SMT_FLUSH = 1 << 17  # memories gathered before the SMT is brought up to date in one bulk call
_PROGRESS_EVERY = 2048


@attrs.frozen
class ActorReport:
    """The verification of one actor's store.

    ``ok`` only if nothing was found. ``problems`` lists everything found, one sentence
    each, naming the table or seq where known; ``tables`` maps each table that was
    compared or found damaged to whether it checked out. ``error`` is the kind of error
    (``"CorruptionError"``, ``"StorageError"``, ...) that kept the check from running to
    the end, None when it ran to the end.
    """

    actor: str
    ok: bool
    entries: int
    overall_root: str
    stored_root: str | None
    first_bad_seq: int | None
    tables: dict[str, bool]
    snapshots_checked: int
    problems: tuple[str, ...]
    seconds: float
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class VerifyReport:
    """What :func:`verify` found. ``ok`` only if every actor's store checks out."""

    ok: bool
    actors: tuple[ActorReport, ...]

    @property
    def first_bad_seq(self) -> int | None:
        """The first diverging seq of the first actor that has one."""
        for report in self.actors:
            if report.first_bad_seq is not None:
                return report.first_bad_seq
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "actors": [report.to_dict() for report in self.actors]}


# ---------------------------------------------------------------------------
# replaying


class ReplayError(CorruptionError):
    """An entry of the journal could not be replayed; ``seq`` names it."""

    def __init__(self, seq: int, message: str) -> None:
        self.seq = seq
        super().__init__(message)


def _replay(
    txn: WriteTxn | MemTxn,
    identity: Identity,
    entries: Iterable[tuple[int, bytes]],
    *,
    append: bool,
    total: int,
    progress: Progress | None,
    after: int = 0,
    on_entry: Callable[[int, bytes, bytes], None] | None = None,
    checkpoints: Iterable[int] = (),
    on_checkpoint: Callable[[int], None] | None = None,
    bulk: bool = False,
) -> int:
    """Apply ``entries`` (seq, bytes) in order onto the derived state in ``txn``.

    ``after`` is the seq the derived state in ``txn`` already reflects (0: none), so the
    entries must start at ``after + 1``. Returns the seq of the last entry applied. Raises
    ``CorruptionError`` naming the seq of the first entry that cannot be decoded or
    applied. ``on_entry(seq, bytes, mmr leaf hash)`` is called after each entry.

    ``bulk`` (a whole journal into empty in-memory tables): the keyword segments are built
    in bulk from the keyword changes (:class:`~cortexgraph.writing.GatheredKeywords`)
    instead of written and merged as the entries go, and, unless a
    checkpoint needs the SMT on the way, the SMT is built once at the end, bottom-up from
    every memory and edge (:func:`~cortexgraph.core.commitments.build_smt_rows`), instead
    of updated in stretches. The rows are the same either way (J4, S2).
    """
    stops = sorted(set(checkpoints))
    # a whole journal into empty in-memory tables: the keyword and SMT tables are built in bulk
    in_bulk = txn if bulk and isinstance(txn, MemTxn) and after == 0 else None
    writer = EntryWriter(identity, gather_keywords=in_bulk is not None)
    smt_in_bulk = in_bulk is not None and not stops
    stop_at = 0
    size = after
    for seq, data in entries:
        if seq != size + 1:
            raise ReplayError(size + 1, f"journal entry {size + 1} is missing (next is {seq})")
        try:
            entry = decode_entry(data)
            if entry.seq != seq:
                raise CorruptionError(f"the entry stored at seq {seq} says seq {entry.seq}")
            leaf = writer.write(txn, entry, data, append=append, trusted=False)
        except CorruptionError as exc:
            said = str(exc)  # apply's messages name the entry already; say it once
            if not said.startswith(f"journal entry {seq} "):
                said = f"journal entry {seq}: {said}"
            raise ReplayError(seq, said) from None
        size = seq
        if on_entry is not None:
            on_entry(seq, data, leaf)
        at_stop = stop_at < len(stops) and stops[stop_at] == seq
        if at_stop or (not smt_in_bulk and writer.pending >= _SMT_FLUSH):
            writer.flush(txn)
        if at_stop:
            stop_at += 1
            if on_checkpoint is not None:
                on_checkpoint(seq)
        if progress is not None and seq % _PROGRESS_EVERY == 0:
            progress(seq, total)
    if in_bulk is not None:
        _finish_in_bulk(in_bulk, writer, size, smt=smt_in_bulk)
    writer.flush(txn)
    if progress is not None:
        progress(size, total)
    return size


def _finish_in_bulk(tables: MemTxn, writer: EntryWriter, size: int, *, smt: bool) -> None:
    """The tables a whole-journal replay builds at its end: the keyword segments from the
    gathered changes and, with ``smt``, the SMT bottom-up from every memory and edge (what
    the writer would otherwise apply from its dirty sets, which are dropped)."""
    if writer.gathered is not None:
        tables.apply_mutations([("postings", k, v) for k, v in writer.gathered.finish(size)])
    if smt:
        memories = list(tables.tables["heads"])
        edges = [key for key in tables.tables["edges"] if key[:1] == OUT]
        rows = build_smt_rows(writer.hash_name, tables.get, memories, edges)
        tables.apply_mutations([("smt", key, row) for key, row in rows])
        writer.dirty.clear()
        writer.dirty_edges.clear()


def _journal(txn: ReadTxn) -> Iterator[tuple[int, bytes]]:
    with txn.cursor("journal") as cur:
        for key, value in cur:
            yield seq_from_key(key, table="journal"), bytes(value)


def drop_derived(h: Handle) -> None:
    """Empty every derived table (the journal, snapshots and identity stay).

    The store reads as empty until :func:`rebuild`; prefer ``rebuild``, which drops and
    replays in one transaction.
    """
    h.keywords = None  # what a batch left in memory no longer matches the tables
    txn = h.env.begin_write(replay=True)
    try:
        for table in DERIVED_TABLES:
            txn.drop(table)
        txn.commit()
    except BaseException:
        txn.abort()
        raise


def rebuild(h: Handle, *, progress: Progress | None = None) -> int:
    """Drop the derived tables and replay the whole journal into them, atomically.

    The replay runs in memory (:class:`~cortexgraph.store.memtxn.MemTxn`: the same
    ``EntryWriter`` a write uses, over dicts), then each table is loaded in key order into
    the emptied table, in the one write transaction that also read the journal. The
    tables of earlier layouts are deleted and the current layout is recorded in the same
    transaction (this is how a store made by an earlier release is upgraded). Returns
    the number of entries replayed.

    Raises:
        CorruptionError: an entry cannot be decoded or applied (naming its seq); the store
            is left as it was.
    """
    if h.active_batch() is not None:
        raise CortexError("cannot rebuild inside a batch")
    h.env.hold_writer()  # no other writer appends between the replay and the load (E4)
    # A repair must not be undone by keyword segments a batch read from damaged tables.
    h.keywords = None
    try:
        with h.env.read() as reading:
            total = reading.last_seq()
            tables = replay_in_memory(h.identity, _journal(reading), total=total, progress=progress)
        while True:
            txn = h.env.begin_write(replay=True)
            try:
                for table in DERIVED_TABLES:
                    txn.drop(table)
                    txn.put_sorted(table, tables.sorted_items(table))
                h.env.drop_legacy_tables(txn)
                txn.put("meta", LAYOUT_KEY, encode(DERIVED_LAYOUT))
                txn.commit()
                break
            except MapFull:  # the old and the new tables did not fit the map together (E2)
                txn.abort()
                h.env.grow()
            except BaseException:
                txn.abort()
                raise
    finally:
        h.env.release_writer()
    h.discard_column_index()
    return total


def build_past_store(h: Handle, seq: int, path: Path) -> None:
    """Create at ``path`` a store of ``h``'s actor holding the first ``seq`` entries of its
    journal and the derived tables they give (replayed in memory, loaded in key order), as
    a store that had only ever written those entries would hold them (J4). The embedder
    record is copied, so the past store opens with the same embedder.

    Raises:
        ValidationError: not ``0 <= seq <= h``'s seq.
    """
    with h.reading() as txn:
        total = txn.last_seq()
        embedder = txn.get("meta", b"embedder")
    if type(seq) is not int or not 0 <= seq <= total:
        raise ValidationError(f"must be an integer from 0 to {total}, not {seq!r}", field="seq")
    entries = list(islice((item for chunk in h.journal_chunks(0) for item in chunk), seq))
    tables = replay_in_memory(h.identity, entries, total=seq)
    env = Environment(
        path, h.actor, create=True, readonly=False, map_size=DEFAULT_MAP_SIZE, sync=False,
        hash_name=h.hash_name,
    )  # fmt: skip
    try:

        def load(txn: WriteTxn) -> None:
            txn.put_sorted("journal", [(seq_key(s), data) for s, data in entries])
            for table in DERIVED_TABLES:
                txn.put_sorted(table, tables.sorted_items(table))
            if embedder is not None:
                txn.put("meta", b"embedder", bytes(embedder))

        env.write_small(load)
    finally:
        env.close()


def replay_in_memory(
    identity: Identity,
    entries: Iterable[tuple[int, bytes]],
    *,
    total: int,
    progress: Progress | None = None,
    on_entry: Callable[[int, bytes, bytes], None] | None = None,
    checkpoints: Iterable[int] = (),
    on_checkpoint: Callable[[MemTxn, int], None] | None = None,
) -> MemTxn:
    """The derived tables a replay of ``entries`` (a whole journal, from seq 1) leaves,
    held in memory. The arguments are :func:`_replay`'s; ``on_checkpoint`` is also given
    the tables as they stand at the checkpoint."""
    tables = MemTxn(DERIVED_TABLES)
    _replay(
        tables,
        identity,
        entries,
        append=False,
        total=total,
        progress=progress,
        on_entry=on_entry,
        checkpoints=checkpoints,
        on_checkpoint=None if on_checkpoint is None else lambda seq: on_checkpoint(tables, seq),
        bulk=True,
    )
    return tables


def append_entries(
    h: Handle,
    entries: Sequence[tuple[int, bytes]],
    *,
    expect_root: tuple[int, bytes] | None = None,
    progress: Progress | None = None,
) -> int:
    """Append journal entries another store wrote (``(seq, canonical bytes)``, in seq
    order) to this store's journal, all or nothing, in one write transaction.

    An entry whose seq the store already holds must be byte-identical to the stored one,
    and is skipped; the others must continue the journal (dense seqs, J1) and are applied
    as a replay applies them: decoded (J6) and checked against the state before them
    (ids, versions, tombstones), through the same ``EntryWriter`` as every write.

    Args:
        entries: the entries, consecutive seqs.
        expect_root: ``(seq, root)``: when the journal ends at ``seq`` afterwards, its
            OverallRoot must be ``root``; a journal that ends before ``seq`` is refused.
        progress: called as ``progress(done, total)`` over the given entries.

    Returns:
        How many entries were appended (the rest were already there).

    Raises:
        ReplayError: an entry differs from the stored one at its seq, leaves a gap, or
            cannot be decoded or applied; ``seq`` names it. The store is unchanged.
        VerificationError: the OverallRoot is not ``expect_root``'s. The store is
            unchanged.
        CortexError: called inside a batch. ReadOnlyError: a read-only store.
    """
    if h.active_batch() is not None:
        raise CortexError("cannot append entries inside a batch")
    total = len(entries)

    def append(txn: WriteTxn) -> int:
        last = txn.last_seq()
        skipped = 0
        for seq, data in entries:
            if seq > last:
                break
            if txn.get("journal", seq_key(seq)) != data:
                raise ReplayError(
                    seq,
                    f"entry {seq} differs from the store's entry {seq}: the entries do not"
                    " extend this store's journal",
                )
            skipped += 1
        fresh = entries[skipped:]
        if fresh and fresh[0][0] != last + 1:
            first = fresh[0][0]
            missing = (
                f"entry {last + 1} is missing"
                if first == last + 2
                else f"entries {last + 1} to {first - 1} are missing"
            )
            raise ReplayError(
                first,
                f"the entries continue at seq {first}, but the store ends at seq {last}:"
                f" {missing}",
            )

        def step(seq: int, _: int) -> None:
            if progress is not None:
                progress(skipped + seq - last, total)

        end = _replay(txn, h.identity, fresh, append=True, total=total, progress=step, after=last)
        if expect_root is not None:
            seq, root = expect_root
            if end < seq:
                raise ReplayError(
                    end + 1,
                    f"the store ends at seq {end}, before seq {seq} that the root is given for",
                )
            found = roots(h.hash_name, txn.get, end)[2]
            if end == seq and found != root:
                raise VerificationError(
                    f"the store's OverallRoot at seq {end} would be {found.hex()}, not"
                    f" {root.hex()}"
                )
        return len(fresh)

    return h.env.write_small(append, replay=False)


# ---------------------------------------------------------------------------
# verifying


def verify(
    root: str | Path,
    actor: str | None = None,
    *,
    progress: Callable[[str, int, int], None] | None = None,
) -> VerifyReport:
    """Verify the store of ``actor`` under ``root`` (every actor when ``actor`` is None).

    Opens each store read-only; nothing is written to it. ``progress(actor, done, total)``
    is called as entries are replayed. Each actor is checked on its own: a store that is
    damaged, or that cannot be opened (not a cortexgraph store, an unreadable identity),
    gives an :class:`ActorReport` with ``ok=False`` and the problem, and the other actors
    are still verified.

    Raises:
        NotFoundError: ``root`` holds no store (or not ``actor``'s).
    """
    root = Path(root)
    if actor is not None:
        actors = [check_name(actor, "actor")]
        if not (root / actor / "data.mdb").exists():
            raise NotFoundError(f"no cortexgraph store for actor {actor!r} under {root}")
    else:
        actors = (
            sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "data.mdb").exists())
            if root.is_dir()
            else []
        )
        if not actors:
            raise NotFoundError(f"no cortexgraph store under {root}")
    reports = []
    for name in actors:
        step = None if progress is None else _bind(progress, name)
        reports.append(_verify_actor(root, name, step))
    return VerifyReport(all(r.ok for r in reports), tuple(reports))


def _verify_actor(root: Path, actor: str, progress: Progress | None) -> ActorReport:
    """Check the pages of ``actor``'s store, then open it and verify it; a store that is
    damaged or cannot be opened gives a failed report instead of an error."""
    started = time.perf_counter()
    damaged = _damaged_pages(actor, root / actor / "data.mdb", started)
    if damaged is not None:
        return damaged
    try:
        h = open_handle(
            root / actor,
            actor,
            create=False,
            readonly=True,
            map_size=DEFAULT_MAP_SIZE,
            sync=True,
            hash_name=None,
            embedder=None,
            reembed=False,
        )
        try:
            return _verify_open(h, progress)
        finally:
            h.env.close()
    except CortexError as exc:
        return _stopped(actor, started, exc)


def _damaged_pages(actor: str, path: Path, started: float) -> ActorReport | None:
    """A failed report if the pages of ``path`` are damaged or unreadable, else None."""
    try:
        damaged = check_pages(path)
    except OSError as exc:
        return _failed(actor, started, "StorageError", [f"cannot read {path}: {exc}"], {})
    if not damaged:
        return None
    problems = [f"damaged LMDB page structure in {p.table!r}: {p}" for p in damaged]
    return _failed(actor, started, "CorruptionError", problems, {p.table: False for p in damaged})


def _stopped(actor: str, started: float, exc: CortexError) -> ActorReport:
    """A failed report for an error that kept the check from running to the end."""
    table = getattr(exc, "table", None)
    problems = [f"cannot verify the store: {exc}"]
    return _failed(
        actor, started, type(exc).__name__, problems, {} if table is None else {table: False}
    )


def _failed(
    actor: str,
    started: float,
    error: str,
    problems: list[str],
    tables: dict[str, bool],
) -> ActorReport:
    return ActorReport(
        actor=actor,
        ok=False,
        entries=0,
        overall_root="",
        stored_root=None,
        first_bad_seq=None,
        tables=tables,
        snapshots_checked=0,
        problems=tuple(problems),
        seconds=round(time.perf_counter() - started, 3),
        error=error,
    )


def _bind(progress: Callable[[str, int, int], None], actor: str) -> Progress:
    return lambda done, total: progress(actor, done, total)


def verify_cortex(h: Handle, *, progress: Progress | None = None) -> ActorReport:
    """Verify an open store against a rebuild of its own journal (see the module doc).

    The page structure is checked first; a store with damaged pages is reported without
    letting LMDB walk it. Problems are reported, never raised.
    """
    damaged = _damaged_pages(h.actor, h.env.path / "data.mdb", time.perf_counter())
    return damaged if damaged is not None else _verify_open(h, progress)


def _verify_open(h: Handle, progress: Progress | None) -> ActorReport:
    """Verify a store whose pages were checked (see the module doc)."""
    started = time.perf_counter()
    try:
        with h.env.read() as original:
            return _Verifier(h, original, progress).run()
    except CortexError as exc:
        return _stopped(h.actor, started, exc)


class _Verifier:
    """One verification: the original's read transaction and a replay in memory."""

    def __init__(self, h: Handle, original: ReadTxn, progress: Progress | None) -> None:
        self.h = h
        self.original = original
        self.progress = progress
        self.started = time.perf_counter()
        self.problems: list[str] = []
        self.first_bad: int | None = None
        self.tables: dict[str, bool] = {}
        self.checked = 0
        self.total = original.last_seq()
        self.stored_root: str | None = None
        self.rebuilt_root = ""
        self.snapshots: dict[int, SnapshotManifest] = {}

    def bad(self, seq: int | None, problem: str) -> None:
        self.problems.append(problem)
        if seq is not None and (self.first_bad is None or seq < self.first_bad):
            self.first_bad = seq

    def run(self) -> ActorReport:
        h = self.h
        try:
            self.stored_root = roots(h.hash_name, self.original.get, self.total)[2].hex()
        except CorruptionError as exc:
            self.bad(None, f"the store's own Merkle tables are unreadable: {exc}")
        self.snapshots = _stored_snapshots(self.original, self.problems)
        for problem in h.env.check_log(self.original):  # the journal log's copy
            self.bad(None, problem)
        self.check_tail()
        for seq in self.snapshots:
            if seq > self.total:
                self.bad(None, f"snapshot at seq {seq} is beyond the journal ({self.total})")
        rebuilt = self.rebuild()
        if rebuilt is not None:
            self.compare_tables(rebuilt)
        if self.rebuilt_root and self.stored_root not in (None, self.rebuilt_root):
            self.bad(None, "the store's OverallRoot differs from the rebuilt one")
        return ActorReport(
            actor=h.actor,
            ok=not self.problems,
            entries=self.h.env.table_entries(self.original, "journal"),
            overall_root=self.rebuilt_root,
            stored_root=self.stored_root,
            first_bad_seq=self.first_bad,
            tables=self.tables,
            snapshots_checked=self.checked,
            problems=tuple(self.problems),
            seconds=round(time.perf_counter() - self.started, 3),
        )

    def rebuild(self) -> MemTxn | None:
        """Replay the original's journal in memory; None if it could not finish."""
        try:
            rebuilt = replay_in_memory(
                self.h.identity,
                _journal(self.original),
                total=self.total,
                progress=self.progress,
                on_entry=self.check_leaf,
                checkpoints=[s for s in self.snapshots if s <= self.total],
                on_checkpoint=self.check_snapshot,
            )
        except CorruptionError as exc:  # a ReplayError names its seq; a damaged row may not
            self.bad(getattr(exc, "seq", None), str(exc))
            return None
        self.rebuilt_root = roots(self.h.hash_name, rebuilt.get, self.total)[2].hex()
        return rebuilt

    def check_tail(self) -> None:
        """The store must not have committed entries beyond the journal's last seq."""
        beyond = self.original.get("mmr", mmr_key(self.total))  # the row of seq total + 1
        if beyond is not None:
            self.bad(
                self.total + 1,
                f"journal entry {self.total + 1} is missing: the store committed entries"
                f" beyond seq {self.total}",
            )

    def check_leaf(self, seq: int, data: bytes, leaf: bytes) -> None:
        """The entry must hash to the MMR leaf the original committed for its seq
        (``leaf``, which the replay just computed)."""
        stored = self.original.get("mmr", mmr_key(seq - 1))  # the leaf, then its parents
        if (stored is None or stored[:32] != leaf) and self.first_bad is None:
            self.bad(
                seq,
                f"journal entry {seq} differs from what the store committed"
                " (its MMR leaf does not match)",
            )

    def check_snapshot(self, tables: MemTxn, seq: int) -> None:
        """The stored manifest at ``seq`` must equal the rebuilt one (M10)."""
        stored = self.snapshots[seq]
        built = manifest_for(self.h.actor, self.h.hash_name, tables.get, seq, stored.at)
        self.checked += 1
        if not built.same_roots(stored) or built.hash_name != stored.hash_name:
            self.bad(seq, f"snapshot at seq {seq} does not match the journal")

    def compare_tables(self, rebuilt: MemTxn) -> None:
        """Every derived table must be byte-identical to the rebuild's (J4)."""
        for table in DERIVED_TABLES:
            try:
                key = _first_difference(self.original, table, rebuilt.sorted_items(table))
            except CorruptionError as exc:
                self.tables[table] = False
                self.bad(None, f"derived table {table!r} cannot be read: {exc}")
                continue
            self.tables[table] = key is None
            if key is not None:
                self.bad(
                    None, f"derived table {table!r} differs from a rebuild (first at key {key})"
                )


def _stored_snapshots(txn: ReadTxn, problems: list[str]) -> dict[int, SnapshotManifest]:
    """The readable snapshot manifests by seq; each unreadable one adds a problem."""
    out: dict[int, SnapshotManifest] = {}
    try:
        with txn.cursor("snapshots") as cur:
            for key, value in cur:
                try:
                    seq = seq_from_key(key, table="snapshots")
                    manifest = SnapshotManifest.decode(bytes(value))
                except CorruptionError as exc:
                    problems.append(f"snapshot at key {bytes(key).hex()} is unreadable: {exc}")
                    continue
                if manifest.seq != seq:
                    problems.append(f"snapshot stored at seq {seq} says seq {manifest.seq}")
                    continue
                out[seq] = manifest
    except CorruptionError as exc:
        problems.append(f"the snapshots table cannot be read: {exc}")
    return out


def _first_difference(
    original: ReadTxn, table: str, rebuilt: list[tuple[bytes, bytes]]
) -> str | None:
    """The hex key of the first row where ``table`` in ``original`` differs from
    ``rebuilt`` (its rows in key order): the first key present in only one of them, or
    holding different values; None if identical.

    The original is read with ``buffers=False``, so rows are ``bytes`` and compare in C.
    """
    with original.cursor(table) as cur:
        for x, y in zip_longest(cur, rebuilt):
            if x != y:
                key = (x or y)[0]
                return bytes(key).hex()
    return None

