"""The write sequence, written once: journal append -> ``core.journal.apply`` -> MMR -> SMT.

A :class:`Batch <cortexgraph.batch.Batch>` and a replay (``replay.rebuild``,
``replay.verify``) both run every entry through :class:`EntryWriter`, so the derived state
a write leaves is the state a replay of its journal leaves (J4).
"""

from __future__ import annotations

from .core.commitments import mmr_mutations, smt_mutations
from .core.journal import Entry, Identity, apply, edge_keys, head_ids
from .store.memtxn import MemTxn
from .store.txn import WriteTxn

__all__ = ["EntryWriter"]


class EntryWriter:
    """Applies journal entries to a write transaction, and the SMT changes they imply.

    :meth:`write` appends the entry (optionally), applies its derived mutations and its MMR
    nodes, and notes the memories and edges whose SMT leaves changed; :meth:`flush` applies
    those SMT changes. SMT updates are deferred so that a batch (or a stretch of a replay)
    hashes each changed leaf once.

    Attributes:
        dirty: memory ids whose head changed since the last flush.
        dirty_edges: out-keys of the edges that changed since the last flush.
    """

    __slots__ = ("dirty", "dirty_edges", "hash_name", "identity")

    def __init__(self, identity: Identity) -> None:
        self.identity = identity
        self.hash_name = identity.hash_name
        self.dirty: dict[bytes, None] = {}
        self.dirty_edges: dict[bytes, None] = {}

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
        txn.apply_mutations(apply(self.identity, entry, txn, trusted=trusted))
        row = mmr_mutations(self.hash_name, txn.get, entry.seq - 1, data)
        txn.apply_mutations(row)
        self.dirty.update(dict.fromkeys(head_ids(entry.op, entry.fields)))
        self.dirty_edges.update(dict.fromkeys(edge_keys(entry.op, entry.fields)))
        leaf: bytes = row[0][2][:32]  # type: ignore[index]  # a put: the leaf comes first
        return leaf

    @property
    def pending(self) -> int:
        """How many SMT leaves wait for :meth:`flush`."""
        return len(self.dirty) + len(self.dirty_edges)

    def flush(self, txn: WriteTxn | MemTxn) -> None:
        """Apply the SMT changes of the entries written since the last flush."""
        if self.dirty or self.dirty_edges:
            changes = smt_mutations(self.hash_name, txn.get, self.dirty, self.dirty_edges)
            txn.apply_mutations(changes)
            self.dirty.clear()
            self.dirty_edges.clear()
