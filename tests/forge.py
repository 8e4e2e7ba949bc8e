"""A journal forger: stores whose journals are well formed and consistently hashed, but
mean something the library never writes.

An honest store is written through the public API (:func:`honest_journal`); its journal is
decoded into plain maps, which a test edits (a wrong id, an update after a tombstone, ...).
:func:`forge_store` then writes the edited journal, canonically encoded, into a fresh store
and derives every other table from it with the library's own pure functions, the way the
writer does: ``core.journal.apply`` for the derived tables, ``core.commitments`` for the
``mmr`` and ``smt`` tables and for the snapshot manifests. The only thing wrong with a
forged store is the meaning of its journal, so only replay can find it.

An entry that ``apply`` refuses (which is the point of most forgeries) leaves the derived
tables as they were, as if a forger had computed them by hand; its MMR leaf is still
appended. The tables are written through the storage shell's write transaction
(``store.env``), which stores what it is given and checks nothing about its meaning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

import cortexgraph as cg
from cortexgraph.core.codec import decode, encode
from cortexgraph.core.commitments import manifest_for, mmr_mutations, smt_mutations
from cortexgraph.core.journal import Identity, apply, decode_entry, edge_keys, head_ids
from cortexgraph.core.keys import seq_key
from cortexgraph.core.postings import KeywordChange
from cortexgraph.store.env import Environment
from cortexgraph.writing import KeywordSegments

ACTOR = "agent"
T0 = 1_700_000_000_000
HASH = "blake3"
#: the map size of a forged store: the honest journal is a few kilobytes
_MAP_SIZE = 1 << 24

#: A journal as a list of entry maps ({"v", "seq", "at", "op", "ns", ...op fields}).
Journal = list[dict[str, Any]]


@attrs.frozen
class Honest:
    """The honest history :func:`honest_journal` wrote, and the ids of its memories.

    ``a`` and ``b`` live in ``default``, ``c`` in ``other``; ``b`` is tombstoned last.
    """

    journal: Journal
    a: bytes
    b: bytes
    c: bytes
    root: bytes  # the honest store's OverallRoot

    def seq_of(self, op: str, memory: bytes) -> int:
        """The seq of the first entry of ``op`` about ``memory``."""
        for entry in self.journal:
            if entry["op"] == op and memory in (entry.get("id"), entry.get("src")):
                seq: int = entry["seq"]
                return seq
        raise LookupError(f"no {op} entry about {memory.hex()}")

    def entry(self, seq: int) -> dict[str, Any]:
        """A copy of the entry at ``seq``, to edit."""
        return dict(self.journal[seq - 1])


def honest_journal(root: Path) -> Honest:
    """Write a short history through the public API and return its decoded journal.

    The history (seq: op): 1 write a, 2 write b, 3 write c (ns ``other``), 4 update a
    (version 2), 5 head a -> 1, 6 edge a -> b, 7 edge a -> c, 8 unedge a -> c,
    9 tombstone b.
    """
    with cg.open(root, ACTOR, clock=cg.ManualClock(T0), sync=False, hash_name=HASH) as cx:
        at = iter(range(T0, T0 + 10**6, 1000))
        a = cx.write(cg.Fact(text="Deploys go through CI", tags=["deploy"]), at=next(at))
        b = cx.write(cg.Preference(text="Prefers small commits", confidence=0.5), at=next(at))
        c = cx.write(cg.Fact(text="The staging host is blue"), ns="other", at=next(at))
        cx.update(a, text="Deploys go through Argo CD", at=next(at))
        cx.update_head(a, version=1, at=next(at))
        cx.add_edge(a, b, "relates_to", at=next(at))
        cx.add_edge(a, c, "relates_to", at=next(at))
        cx.remove_edge(a, c, "relates_to", at=next(at))
        cx.tombstone(b, reason="superseded", at=next(at))
        journal = [decode(data, what="an honest entry") for _, data in cx.journal_bytes()]
        return Honest(journal, a.id, b.id, c.id, cx.overall_root())


def forge_store(
    root: Path,
    journal: Sequence[Mapping[str, Any]],
    *,
    keys: Sequence[int] | None = None,
    snapshots: Sequence[int] = (),
) -> Path:
    """Write ``journal`` as the journal of a fresh store of :data:`ACTOR` under ``root``,
    with every derived table, the ``mmr`` and ``smt`` tables and a snapshot after each
    count of entries in ``snapshots`` computed from it. Returns ``root``.

    ``keys`` are the journal keys (seqs) to store the entries under, 1, 2, ... by default;
    the entries' own ``seq`` fields are written as given.
    """
    cg.open(root, ACTOR, sync=False, hash_name=HASH).close()  # the identity and tables
    env = Environment(
        root / ACTOR,
        ACTOR,
        create=False,
        readonly=False,
        map_size=_MAP_SIZE,
        sync=False,
        hash_name=HASH,
    )
    identity = Identity(ACTOR, HASH)
    keys = list(range(1, len(journal) + 1)) if keys is None else list(keys)
    txn = env.begin_write(replay=True)
    keywords = KeywordSegments()
    try:
        for size, (key, value) in enumerate(zip(keys, journal, strict=True)):
            data = encode(dict(value))
            txn.append_entry(key, data)
            changed: tuple[bytes, ...] = ()
            edges: tuple[bytes, ...] = ()
            try:
                entry = decode_entry(data)
                changes: list[KeywordChange] = []
                txn.apply_mutations(apply(identity, entry, txn, trusted=True, keywords=changes))
                keywords.advance(txn, entry.seq, changes)
                changed, edges = head_ids(entry.op, entry.fields), edge_keys(entry.op, entry.fields)
            except Exception:  # refused: a hand-made forgery would leave the state as it was
                pass
            txn.apply_mutations(mmr_mutations(HASH, txn.get, size, data))
            txn.apply_mutations(smt_mutations(HASH, txn.get, changed, edges))
            if size + 1 in snapshots:
                manifest = manifest_for(ACTOR, HASH, txn.get, size + 1, T0)
                txn.put_snapshot(seq_key(size + 1), manifest.encode())
        keywords.flush(txn)
        txn.commit()
    except BaseException:
        txn.abort()
        raise
    finally:
        env.close()
    return root
