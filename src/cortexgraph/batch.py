"""``Batch``: one atomic group of mutations, one LMDB write transaction (J3).

Every mutation verb lives here, once: :class:`~cortexgraph.cortex.Cortex` runs each in the
batch open on the calling thread, or in a batch of its own. A verb validates its
arguments, computes the journal entry with pure code from ``core``, and hands it to the
write sequence (:class:`~cortexgraph.writing.EntryWriter`); the SMT is brought up to date
once, at commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any

import attrs

from .core.body import encode_body
from .core.graph import EDGE_STATUSES, EdgeState, edge_out_key, normalise_relation, strength_ppm
from .core.journal import (
    MAX_ACCESS_IDS,
    Entry,
    decode_entry,
    encode_entry,
    type_of,
    write_entry,
)
from .core.keys import seq_key, version_key
from .core.salience import learn_weights
from .core.signals import memory_factors, read_weights
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
)
from .core.uri import MemoryURI, check_name
from .embedding import embed_written
from .errors import (
    CorruptionError,
    CortexError,
    NotFoundError,
    TombstonedError,
    ValidationError,
    VersionConflictError,
)
from .handle import Handle
from .reading import (
    BareId,
    HeadCache,
    MemoryRef,
    describe,
    edge_record,
    link_targets,
    read_head,
    resolve_in,
)
from .records import Attestation, Edge
from .store.guards import MapFull
from .store.txn import WriteTxn
from .writing import EntryWriter

__all__ = ["DEFAULT_NS", "Batch", "record_access"]

DEFAULT_NS = "default"

_LEARNED_ONLY = (
    "a LearnWeights cannot be written or updated directly: ranking weights are learned"
    " through cx.attest(cited, outcome=...), which journals the outcome (an Attest) and"
    " the weights learned from it together"
)


class Batch:
    """One atomic group of mutations: one LMDB write transaction (J3).

    Use it as a context manager; it offers the same mutation verbs as :class:`Cortex`
    (``write``, ``update``, ``update_head``, ``tombstone``) and ``resolve``, which sees
    the batch's own writes. Batches do not nest.

    A verb that fails validation touches nothing, so the batch stays usable if the
    caller catches the error. A failure after the store was touched (corruption, I/O)
    poisons the batch: it will roll back at the end of the ``with`` block.
    """

    def __init__(self, h: Handle) -> None:
        self._h = h
        self._txn: WriteTxn = None  # type: ignore[assignment]
        self._entries: list[tuple[Entry, bytes]] = []
        self._first_seq = 0
        self._next_seq = 0
        self._failed: BaseException | None = None
        self._done = False
        self._writer = EntryWriter(h.identity)  # its dirty sets: the SMT to update

    @property
    def txn(self) -> WriteTxn:
        """The batch's write transaction: reads through it see the batch's writes."""
        return self._txn

    # -- context ----------------------------------------------------------------------------

    def __enter__(self) -> Batch:
        h = self._h
        if h.active_batch() is not None:
            raise CortexError("batches do not nest; use the batch that is already open")
        if self._done or self._txn is not None:
            raise CortexError("a batch can be used once")
        h.env.hold_writer()  # kept until the batch ends, across any regrowth (E4)
        try:
            self._txn = h.env.begin_write()
            try:
                self._first_seq = self._next_seq = self._txn.last_seq() + 1
                self._resume_keywords()
            except BaseException:
                self._txn.abort()
                raise
        except BaseException:
            h.env.release_writer()
            raise
        h.local.batch = self
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        h = self._h
        h.local.batch = None
        self._done = True
        written = list(self._writer.dirty)
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
            h.env.release_writer()
        if h.embed_on_write and written:
            # committed; embedding outside the writer lock keeps other writers going
            embed_written(h, written)

    def _resume_keywords(self) -> None:
        """Take over the keyword segments this handle's last batch left in memory, if no
        entry was committed since (what they hold need not be read back from the table:
        the completed segments that the next merges take, and the open one); taken, so
        that a batch that fails leaves none behind. Under the writer lock."""
        carried, self._h.keywords = self._h.keywords, None
        if carried is None or carried[0] != self._first_seq - 1:
            return
        if carried[1].resumed(self._txn):
            self._writer.keywords = carried[1]

    def _commit(self) -> None:
        try:
            # the journal log's record goes to the disk while the SMT and the keyword
            # segment are brought up to date; the commit then flushes it (L5)
            self._txn.stage_log()
            self._writer.flush(self._txn)
            self._txn.commit()
        except MapFull:
            self._regrow()
            self._commit()
            return
        self._h.keywords = (self._next_seq - 1, self._writer.keywords)
        if self._h.check_invariants:
            _check_after_commit(self._h, self._first_seq, self._entries)

    def _check_open(self) -> None:
        if self._done or self._txn is None:
            raise CortexError("the batch is not open; use it inside a `with` block")

    # -- appending ----------------------------------------------------------------------------

    def _apply(self, entry: Entry, data: bytes) -> None:
        self._writer.write(self._txn, entry, data, append=True, trusted=True)

    def keyword_txn(self) -> WriteTxn:
        """The batch's transaction with its keyword segments written out, for reads of
        the ``postings`` table that must see the batch's own writes (the segments of its
        entries are otherwise kept in memory until the batch commits). A full map grows,
        as it does for the batch's other writes."""
        while True:
            try:
                self._writer.keywords.flush(self._txn)
                return self._txn
            except MapFull:
                self._regrow()  # doubles the map and applies the batch's entries again

    def _append(self, entry: Entry, data: bytes | None = None) -> None:
        """Journal ``entry`` (whose bytes are ``data``, if the caller has them) and apply
        its derived changes, growing the map if needed."""
        if data is None:
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
            self._h.env.grow()
            self._txn = self._h.env.begin_write()
            # what the writer holds in memory belonged to the aborted transaction
            self._writer = EntryWriter(self._h.identity)
            try:
                for entry, data in self._entries:
                    self._apply(entry, data)
                return
            except MapFull:
                self._txn.abort()

    # -- verbs -----------------------------------------------------------------------------

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
        at = self._h.at(at)
        entry, data = write_entry(self._h.identity, ns, self._next_seq, at, memory)
        self._append(entry, data)
        mid: bytes = entry.fields["id"]
        if self._h.autolink:
            self._autolink(mid, ns, at)
        return MemoryURI.trusted(self._h.actor, ns, mid, 1)

    def _mutable_head(self, ref: MemoryRef) -> tuple[MemoryURI | BareId, HeadState]:
        self._check_open()
        uri = self._h.parse_ref(ref, allow_id=True)
        head = read_head(self._txn, uri)
        if head.status == "tombstoned":
            raise TombstonedError(f"{describe(uri)} is tombstoned and cannot change")
        return uri, head

    def update(
        self,
        /,
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
        uri, head = self._mutable_head(ref)
        if head.type_name == LearnWeights.type_name:
            raise ValidationError(_LEARNED_ONLY, field="memory")
        if expected_version is not None:
            if type(expected_version) is not int or expected_version < 1:
                raise ValidationError("must be a positive integer", field="expected_version")
            if expected_version != head.head:
                raise VersionConflictError(
                    f"{describe(uri)} is at version {head.head}, not {expected_version}",
                    expected=expected_version,
                    actual=head.head,
                )
        if not changes:
            raise ValidationError("update needs at least one field to change", field="changes")
        at = self._h.at(at)
        raw = self._txn.get("versions", version_key(uri.id, head.head))
        if raw is None:
            raise CorruptionError(f"{describe(uri)} has no stored head version")
        current = VersionState.decode(raw)
        fields = dict(attrs.asdict(current.memory(), recurse=False))
        fields.update(changes)
        memory = type_of(head)(**fields)
        body, body_bytes = encode_body(memory)
        here = MemoryURI.trusted(self._h.actor, head.ns, uri.id, head.head)
        if body_bytes == current.body:
            return here
        if isinstance(memory, Attest):
            self._check_cited(memory)
        version = head.latest + 1
        fields = {"id": uri.id, "version": version, "body": body}
        self._append(Entry(self._next_seq, at, "update", head.ns, fields, memory, body_bytes))
        return here.at_version(version)

    def update_head(self, ref: MemoryRef, *, version: int, at: int | None = None) -> MemoryURI:
        """Move a memory's head to an existing ``version``; returns the head's URI."""
        uri, head = self._mutable_head(ref)
        if type(version) is not int or version < 1:
            raise ValidationError(f"must be a positive integer, not {version!r}", field="version")
        if version > head.latest:
            raise NotFoundError(
                f"no version {version} of {describe(uri)} (latest is {head.latest})"
            )
        at = self._h.at(at)
        here = MemoryURI.trusted(self._h.actor, head.ns, uri.id, version)
        if version != head.head:
            self._append(
                Entry(self._next_seq, at, "head", head.ns, {"id": uri.id, "version": version})
            )
        return here

    def tombstone(self, ref: MemoryRef, *, reason: str = "", at: int | None = None) -> MemoryURI:
        """Tombstone a memory: it can no longer change, but every version stays resolvable."""
        uri, head = self._mutable_head(ref)
        _check_reason(reason)
        at = self._h.at(at)
        fields: dict[str, Any] = {"id": uri.id}
        if reason:
            fields["reason"] = reason
        self._append(Entry(self._next_seq, at, "tombstone", head.ns, fields))
        return MemoryURI.trusted(self._h.actor, head.ns, uri.id, head.head)

    def archive(self, ref: MemoryRef, *, reason: str = "", at: int | None = None) -> MemoryURI:
        """Archive an active memory by hand, as compaction archives one that decayed.

        The same ``status`` entry compaction journals (with ``reason`` when one is
        given): the memory leaves ``find``, ``recall`` and ``context``, stays resolvable,
        and a late-binding read restores it; left unread for 30 days, ``compact`` prunes
        it. Pinned memories and hubs may be archived by hand (compaction never
        archives them on its own, and never prunes them).

        Archiving an archived memory is a no-op: nothing is journaled and its URI comes
        back, so repeating a ``/forget`` is harmless.

        Returns:
            The URI pinned to the memory's head version.

        Raises:
            ValidationError: a bad ``reason`` (field ``reason``); the memory was pruned or
                merged, which only compaction decides (field ``ref``).
            NotFoundError, TombstonedError.
        """
        uri, head = self._mutable_head(ref)
        _check_reason(reason)
        if head.status not in ("active", "archived"):
            raise ValidationError(
                f"{describe(uri)} is {head.status} and cannot be archived", field="ref"
            )
        at = self._h.at(at)
        here = MemoryURI.trusted(self._h.actor, head.ns, uri.id, head.head)
        if head.status == "active":
            fields: dict[str, Any] = {"id": uri.id, "status": "archived"}
            if reason:
                fields["reason"] = reason
            self._append(Entry(self._next_seq, at, "status", head.ns, fields))
        return here

    def _edge_ends(
        self, src: MemoryRef, dst: MemoryRef, relation: str
    ) -> tuple[HeadState, bytes, bytes, str]:
        self._check_open()
        rel = normalise_relation(relation)
        src_uri = self._h.parse_ref(src, allow_id=True)
        dst_uri = self._h.parse_ref(dst, allow_id=True)
        if src_uri.id == dst_uri.id:
            raise ValidationError("a memory cannot be linked to itself", field="dst")
        src_head = read_head(self._txn, src_uri)
        dst_head = read_head(self._txn, dst_uri)
        for uri, head in ((src_uri, src_head), (dst_uri, dst_head)):
            if head.status == "tombstoned":
                raise TombstonedError(f"{describe(uri)} is tombstoned and cannot be linked")
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
        at = self._h.at(at)
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
        heads = HeadCache(self._txn)
        return edge_record(self._h.actor, heads, src_id, rel, dst_id, state)

    def remove_edge(
        self, src: MemoryRef, dst: MemoryRef, relation: str, *, at: int | None = None
    ) -> None:
        """Remove the edge ``src --relation--> dst``.

        Raises:
            NotFoundError: there is no such edge (or memory).
        """
        src_head, src_id, dst_id, rel = self._edge_ends(src, dst, relation)
        if self._txn.get("edges", edge_out_key(src_id, rel, dst_id)) is None:
            raise NotFoundError(f"no {rel} edge from {src_id.hex()} to {dst_id.hex()}")
        at = self._h.at(at)
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
        at = self._h.at(at)
        txn = self._txn
        pinned: dict[bytes, MemoryURI] = {}
        for ref in refs:
            uri = self._h.parse_ref(ref, allow_id=True)
            head = read_head(txn, uri)
            if uri.id not in pinned:
                version = head.head if uri.version is None else uri.version
                if version > head.latest:
                    raise NotFoundError(
                        f"no version {version} of {describe(uri)} (latest is {head.latest})"
                    )
                pinned[uri.id] = MemoryURI.trusted(self._h.actor, head.ns, uri.id, version)
        profiles = [memory_factors(txn, memory_id, at) for memory_id in pinned]
        before = read_weights(txn)
        after = learn_weights(before, profiles, outcome)
        attest = Attest(text=text, cited=[str(u) for u in pinned.values()], outcome=outcome)
        attest_uri = self._write(attest, ns=ns, at=at)  # cited: pinned above, all present
        learn = LearnWeights(weights=after, attest=str(attest_uri))
        learn_uri = self._write(learn, ns=ns, at=at)
        return Attestation(attest_uri, learn_uri, before, after)

    def _autolink(self, memory_id: bytes, ns: str, at: int) -> None:
        """Link a just-written memory to its most similar neighbours (auto-linking; the
        choice is :func:`~cortexgraph.reading.link_targets`)."""
        for strength, other, status in link_targets(self.keyword_txn(), memory_id, ns):
            self.add_edge(memory_id, other, "relates_to", strength=strength, status=status, at=at)

    def _check_cited(self, attest: Attest) -> None:
        """Every citation of ``attest`` names an existing version of a memory of this
        store (see :func:`~cortexgraph.core.taxonomy.cited_uris` for the form)."""
        for uri in cited_uris(attest, self._h.actor):
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
        return resolve_in(self._txn, self._h.actor, self._h.parse_ref(ref, allow_id=True))


def _check_reason(reason: object) -> None:
    """Check a tombstone's or an archive's ``reason``: a string of at most
    ``MAX_SHORT_TEXT`` characters, valid UTF-8.

    Raises:
        ValidationError: otherwise (field ``reason``).
    """
    if type(reason) is not str:
        raise ValidationError(f"must be a string, not {type(reason).__name__}", field="reason")
    if len(reason) > MAX_SHORT_TEXT:
        raise ValidationError(f"longer than {MAX_SHORT_TEXT} characters", field="reason")
    check_utf8(reason, "reason")


def set_status(batch: Batch, memory_id: bytes, status: str, *, at: int) -> MemoryURI:
    """Journal a lifecycle move of a memory in ``batch`` (what ``compact`` decides)."""
    batch._check_open()
    head = read_head(batch._txn, BareId(memory_id))
    entry = Entry(batch._next_seq, at, "status", head.ns, {"id": memory_id, "status": status})
    batch._append(entry)
    return MemoryURI.trusted(batch._h.actor, head.ns, memory_id, head.head)


def record_access(h: Handle, uris: list[MemoryURI], *, at: int) -> None:
    """Journal a late-binding read of ``uris``, in the batch open on this thread or in a
    batch of its own (see :meth:`Batch.record_access`)."""
    active = h.active_batch()
    if isinstance(active, Batch):
        active.record_access(uris, at=at)
        return
    with Batch(h) as batch:
        batch.record_access(uris, at=at)


def _check_after_commit(h: Handle, first_seq: int, entries: list[tuple[Entry, bytes]]) -> None:
    """Expensive invariant checks, run when CORTEXGRAPH_INVARIANTS=1 (J1, J6, M9).

    J1/J6: the batch's entries are stored at consecutive seqs and round-trip. M9: the
    ``mmr`` table holds exactly one row per journal entry. (The full
    walk of the ``smt`` table, ``smt_store_check``, costs O(rows) and is left to
    ``replay.verify`` and the tests; run per commit it tripled the suite's time.)
    """
    with h.reading() as txn:
        last = txn.last_seq()
        rows = h.env.table_entries(txn, "mmr")
        if rows != last:
            raise CorruptionError(f"M9: {rows} MMR rows for {last} entries")
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
