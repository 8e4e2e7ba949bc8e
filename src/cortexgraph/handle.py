"""The narrow handle the batch and the verb modules work through.

A :class:`Handle` is what one open store offers the code that carries out its verbs: the
environment, the actor and its identity, the clock (:meth:`Handle.at`), reference parsing
(:meth:`Handle.parse_ref`), the batch open on this thread (:meth:`Handle.active_batch`),
read snapshots (:meth:`Handle.reading`, :meth:`Handle.indexed_read`), the column index and
the vector state. :class:`~cortexgraph.cortex.Cortex` owns one and delegates to the verb
modules with it, so no verb module depends on the facade.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .clock import Clock, SystemClock
from .core.journal import Identity
from .core.keys import ID_SIZE, seq_from_key, seq_key
from .core.uri import MemoryURI
from .embed import Embedder, HashEmbedder, embedder_for
from .errors import CorruptionError, NotFoundError, ReadOnlyError, URIError, ValidationError
from .index import ColumnIndex
from .index.snapshot import SNAPSHOT_EVERY, SNAPSHOT_FILE, SnapshotFile
from .reading import BareId, MemoryRef
from .store.env import DERIVED_LAYOUT, LAYOUT_KEY, Environment
from .store.txn import ReadTxn, WriteTxn
from .vector.state import VectorState
from .writing import KeywordSegments

__all__ = ["Handle", "IndexedRead", "OpenBatch", "Reading", "embedder_spec", "open_handle"]

_MAX_AT = 2**63 - 1
_MAX_SEQ = 2**64 - 1  # journal keys are u64be
_JOURNAL_CHUNK = 512
_EMBEDDER_KEY = b"embedder"


class OpenBatch(Protocol):
    """What a read needs of the batch open on its thread (a :class:`~cortexgraph.batch.Batch`)."""

    @property
    def txn(self) -> WriteTxn:
        """The batch's write transaction (reads through it see the batch's writes)."""
        ...


class Handle:
    """One open store, as the batch and the verb modules see it.

    Attributes:
        env: the LMDB environment.
        actor, hash_name, identity: whose store it is, and how its entries hash.
        clock: supplies ``at`` when a verb is called without one.
        local: per-thread state (``local.batch``: the batch open on this thread).
        check_invariants: run the expensive invariant checks (``CORTEXGRAPH_INVARIANTS=1``).
        autolink, embed_on_write: the options of :func:`cortexgraph.open`.
        embedder_spec: the recorded embedder (``{"name": ..., "dim": ...}``).
        stale_layout: the derived tables are of an earlier layout and must be rebuilt
            before use (``cortexgraph.open`` does it on a writable open).
        vectors: the vector state, once a vector read created it.
    """

    __slots__ = (
        "_columns",
        "_embedder",
        "_index_lock",
        "actor",
        "autolink",
        "check_invariants",
        "clock",
        "embed_on_write",
        "embedder_spec",
        "env",
        "hash_name",
        "identity",
        "keywords",
        "local",
        "stale_layout",
        "vectors",
    )

    def __init__(
        self,
        env: Environment,
        actor: str,
        clock: Clock,
        *,
        embedder: Embedder | None = None,
        embedder_spec: dict[str, Any] | None = None,
    ) -> None:
        self.env = env
        self.actor = actor
        self.clock = clock
        self.hash_name: str = env.identity_meta["hash_name"]
        self.identity = Identity(actor, self.hash_name)
        self.local = threading.local()
        self.check_invariants = os.environ.get("CORTEXGRAPH_INVARIANTS") == "1"
        self._columns: ColumnIndex | None = None
        self._index_lock = threading.RLock()  # see indexed_read
        self._embedder = embedder
        self.embedder_spec = embedder_spec or {}
        self.vectors: VectorState | None = None
        self.autolink = False
        self.embed_on_write = False
        self.stale_layout = False
        #: the keyword segments this handle's last batch left in memory, and the seq they
        #: reflect: the next batch resumes them if it starts right after that seq
        #: (``Batch``, under the writer lock)
        self.keywords: tuple[int, KeywordSegments] | None = None

    @property
    def path(self) -> Path:
        """The environment directory."""
        return self.env.path

    @property
    def readonly(self) -> bool:
        """Whether the store is open read-only."""
        return self.env.readonly

    def active_batch(self) -> OpenBatch | None:
        """The batch open on this thread, if any."""
        batch: OpenBatch | None = getattr(self.local, "batch", None)
        return batch

    def at(self, at: int | None) -> int:
        """``at`` checked as integer milliseconds since the epoch, or the clock's now.

        Raises:
            ValidationError: a bad ``at``, or a clock that returned one (field ``at``).
        """
        if at is None:
            at = self.clock.now_ms()
            if type(at) is not int or not 0 <= at <= _MAX_AT:
                raise ValidationError(f"the clock returned {at!r}", field="at")
            return at
        if type(at) is not int or not 0 <= at <= _MAX_AT:
            raise ValidationError(
                f"must be integer milliseconds since the epoch, not {at!r}", field="at"
            )
        return at

    def parse_ref(self, ref: MemoryRef, *, allow_id: bool) -> MemoryURI | BareId:
        """The memory ``ref`` names: a URI of this actor, or (``allow_id``) a bare id.

        Raises:
            URIError: a malformed URI string. ValidationError: not a reference at all.
            NotFoundError: a URI of another actor.
        """
        if isinstance(ref, MemoryURI):
            uri = ref
        elif type(ref) is str:
            if ref.startswith("cx://"):
                uri = MemoryURI.parse(ref)
            elif allow_id and len(ref) == 2 * ID_SIZE:
                try:
                    return BareId(bytes.fromhex(ref))
                except ValueError:
                    raise URIError("not a memory URI or a 32-digit hex id", uri=ref) from None
            else:
                raise URIError("expected cx://<actor>/<ns>/<id-hex>[@<version>]", uri=ref)
        elif type(ref) is bytes and allow_id and len(ref) == ID_SIZE:
            return BareId(ref)
        else:
            raise ValidationError(
                f"must be a MemoryURI, a URI string or a memory id, not {type(ref).__name__}",
                field="uri",
            )
        if uri.actor != self.actor:
            raise NotFoundError(f"{uri} belongs to actor {uri.actor!r}, not {self.actor!r}")
        return uri

    def reading(self) -> Reading:
        """Read through the batch open on this thread (read-your-writes), else a snapshot."""
        return Reading(self)

    def journal_chunks(self, since: int) -> Iterator[list[tuple[int, bytes]]]:
        """The journal after ``since`` as lists of ``(seq, bytes)``, each list read in a
        read transaction of its own that ends before the list is handed out."""
        if type(since) is not int or since < 0:
            raise ValidationError(
                f"must be a non-negative integer, not {since!r}", field="since"
            )
        next_seq = since + 1
        while next_seq <= _MAX_SEQ:  # seqs are u64 keys: nothing lies past the largest
            chunk: list[tuple[int, bytes]] = []
            with self.reading() as txn, txn.cursor("journal") as cur:
                if not cur.set_range(seq_key(next_seq)):
                    return
                for key, value in cur:
                    seq = seq_from_key(key)
                    if seq != next_seq:
                        raise CorruptionError(
                            f"journal key {seq} follows {next_seq - 1}; expected {next_seq}",
                            table="journal",
                            operation="read",
                        )
                    chunk.append((seq, bytes(value)))
                    next_seq += 1
                    if len(chunk) == _JOURNAL_CHUNK:
                        break
            yield chunk
            if len(chunk) < _JOURNAL_CHUNK:
                return

    def indexed_read(self) -> IndexedRead:
        """A snapshot of committed state, and the column index brought to it (its seq).

        The index (and the vector state synced to it) is shared by every thread using
        this handle, so reads through it take turns: the turn is taken *before* the
        snapshot, so no snapshot is older than the index (which would make it rebuild),
        and no other thread moves the index on while a read still walks it (to rows its
        own snapshot does not have). Re-entrant: ``context`` calls ``recall``.
        """
        return IndexedRead(self)

    def column_index(self) -> ColumnIndex:
        """The handle's column index (created empty on first use; reads refresh it, the
        first from the store's column snapshot when one matches)."""
        with self._index_lock:
            index = self._columns
            if index is None:
                index = self._columns = ColumnIndex(self.snapshot_file())
            return index

    def discard_column_index(self) -> None:
        """Forget the column index and delete the store's column snapshot: after a
        rebuild, derived state is rebuilt from the journal, and so must they be (a repair
        must not be undone by an index built from the damaged tables)."""
        with self._index_lock:
            self._columns = None
        with contextlib.suppress(FileNotFoundError):
            (self.path / SNAPSHOT_FILE).unlink()

    def snapshot_file(self) -> SnapshotFile:
        """The store's column snapshot file (``index.snapshot``)."""
        return SnapshotFile(self.path / SNAPSHOT_FILE, self.env.identity_meta)

    def save_column_snapshot(self) -> bool:
        """Write the column snapshot if this handle may write, its column index was
        built (a read used it), and the store moved at least
        :data:`~cortexgraph.index.snapshot.SNAPSHOT_EVERY` journal entries past the file
        on disk (or the file is missing, ahead of the store, or was found unusable); the
        close of a writable handle calls it. Returns whether it wrote.

        Costs a catch-up of the index to the store, the export (rows sorted by id) and a
        file of about 85 bytes a memory: about 10 ms at 10,000 memories. A handle that
        never read writes nothing (it would have to build an index first). A failure to
        write is ignored: the file is an optimisation only.
        """
        index = self._columns
        if self.readonly or self.env.closed or index is None or index.seq < 0:
            return False
        with self.reading() as txn:
            last = txn.last_seq()
        snapshot = index.snapshot
        unusable = isinstance(snapshot, SnapshotFile) and snapshot.status not in (
            "loaded",
            "unread",
            "missing",
        )
        on_disk = self.snapshot_file().seq_on_disk()
        behind = last - (on_disk or 0)
        if last < SNAPSHOT_EVERY or (not unusable and 0 <= behind < SNAPSHOT_EVERY):
            return False
        with self.indexed_read() as (txn, index, _):
            image = index.export()
            try:
                self.snapshot_file().save(image, txn)
            except OSError:
                return False
        return True

    @property
    def embedder(self) -> Embedder:
        """The embedder vector recall uses (created on first use from the recorded one)."""
        if self._embedder is None:
            self._embedder = embedder_for(self.embedder_spec)
        return self._embedder

    def vector_state(self) -> VectorState:
        """The handle's vector state (loaded on first use)."""
        state = self.vectors
        if state is None:
            state = self.vectors = VectorState(self.env, self.embedder)
        return state


class IndexedRead:
    """The context manager of :meth:`Handle.indexed_read`: ``(txn, index, seq)``."""

    __slots__ = ("_ctx", "_h")

    def __init__(self, h: Handle) -> None:
        self._h = h
        self._ctx: Any = None

    def __enter__(self) -> tuple[ReadTxn, ColumnIndex, int]:
        h = self._h
        lock = h._index_lock
        lock.acquire()
        try:
            index = h.column_index()
            self._ctx = h.env.read()
            txn: ReadTxn = self._ctx.__enter__()
            try:
                return txn, index, index.refresh(txn)
            except BaseException:
                self._ctx.__exit__(None, None, None)
                raise
        except BaseException:
            lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self._ctx.__exit__(*exc)
        finally:
            self._h._index_lock.release()


class Reading:
    """The context manager of :meth:`Handle.reading`: the batch's transaction, or a snapshot."""

    __slots__ = ("_ctx", "_h")

    def __init__(self, h: Handle) -> None:
        self._h = h
        self._ctx: Any = None

    def __enter__(self) -> ReadTxn:
        active: OpenBatch | None = getattr(self._h.local, "batch", None)
        if active is not None:
            return active.txn
        self._ctx = self._h.env.read()
        txn: ReadTxn = self._ctx.__enter__()
        return txn

    def __exit__(self, *exc: object) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


def embedder_spec(env: Environment, embedder: Embedder | None, *, reembed: bool) -> dict[str, Any]:
    """The embedder recorded for the store (recording it on first use).

    Raises:
        ValidationError: a malformed embedder, or one other than the recorded one without
            ``reembed``. CorruptionError: a malformed record.
    """
    if embedder is not None:
        name, dim = getattr(embedder, "name", None), getattr(embedder, "dim", None)
        if type(name) is not str or not name or type(dim) is not int or dim < 1:
            raise ValidationError(
                "must have a non-empty str name, a positive int dim and embed()",
                field="embedder",
            )
        if not callable(getattr(embedder, "embed", None)):
            raise ValidationError("must have an embed(texts) method", field="embedder")
    recorded = env.meta_value(_EMBEDDER_KEY)
    if recorded is not None:
        if type(recorded) is not dict or not {"name", "dim"} <= recorded.keys():
            raise CorruptionError(f"{env.path} has a malformed embedder record")
        if embedder is None or (embedder.name, embedder.dim) == (recorded["name"], recorded["dim"]):
            return dict(recorded)
        if not reembed:
            raise ValidationError(
                f"this store was created with embedder {recorded['name']!r}"
                f" (dim {recorded['dim']}); open it with that one, or pass reembed=True to"
                f" switch to {embedder.name!r} and re-embed every memory",
                field="embedder",
            )
    if embedder is None:
        embedder = HashEmbedder()
    spec = {"name": embedder.name, "dim": embedder.dim}
    if not env.readonly:
        env.set_meta_value(_EMBEDDER_KEY, spec)
    return spec


def open_handle(
    path: Path,
    actor: str,
    *,
    create: bool,
    readonly: bool,
    map_size: int,
    sync: bool,
    hash_name: str | None,
    embedder: Embedder | None,
    reembed: bool,
    clock: Clock | None = None,
) -> Handle:
    """Open the environment at ``path`` and a handle on it (arguments checked by the
    caller; see :func:`cortexgraph.open`). The environment is closed again if the
    embedder check fails."""
    env = Environment(
        path,
        actor,
        create=create and not readonly,
        readonly=readonly,
        map_size=map_size,
        sync=sync,
        hash_name=hash_name,
    )
    try:
        spec = embedder_spec(env, embedder, reembed=reembed)
        handle = Handle(env, actor, clock or SystemClock(), embedder=embedder, embedder_spec=spec)
        handle.stale_layout = _layout_is_stale(handle)
    except BaseException:
        env.close()
        raise
    return handle


def _layout_is_stale(h: Handle) -> bool:
    """Whether the derived tables of ``h``'s store are of an earlier layout and must be
    rebuilt from the journal (the facade does it: ``cortexgraph.open``) before use.

    A store with no entries and no record gets the current record (when writable); a
    read-only handle on a stale store, or any handle on a newer layout, is refused.
    """
    layout = h.env.stored_layout()
    if layout is None:  # no entries: nothing to rebuild
        if not h.env.readonly:
            h.env.set_meta_value(LAYOUT_KEY, DERIVED_LAYOUT)
        return False
    if layout == DERIVED_LAYOUT:
        return False
    if layout > DERIVED_LAYOUT:
        raise CorruptionError(
            f"{h.env.path} has derived tables of layout {layout}, written by a newer"
            f" cortexgraph (this one writes layout {DERIVED_LAYOUT}); upgrade cortexgraph",
            table="meta",
            operation="open",
        )
    if h.env.readonly:
        raise ReadOnlyError(
            f"{h.env.path} has derived tables of layout {layout}, from an earlier cortexgraph;"
            f" this one reads layout {DERIVED_LAYOUT}. Open it writable once (or run"
            " `cortexgraph rebuild`) to rebuild them from the journal"
        )
    return True
