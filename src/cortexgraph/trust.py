"""Trust across time: consistency proofs between a store's roots, and signed checkpoints.

:meth:`Cortex.prove_consistency` needs the SMT root of both states. The MMR keeps the
nodes of every past size, so its roots and the proof come from the ``mmr`` table in one
read; the SMT keeps only the current tree. The SMT root at a past seq is taken, in order of
cost, from the current state (the seq is the journal's end), from the snapshot manifest
stored at that seq (O(1): take a snapshot whenever you hand a root out), or by replaying the
first ``seq`` entries into a scratch store (O(seq), as ``cortexgraph verify`` does).

Signed checkpoints (:meth:`Cortex.snapshot` with ``sign_with``) are stored in ``meta``
under ``checkpoint`` + the u64be seq, one signed note per seq (a second key's signature is
added to the same note), next to the snapshot manifest taken at that seq. Like snapshots
they are statements about the journal, not memory state: no journal entry records them and
a rebuild keeps them.
"""

from __future__ import annotations

from itertools import islice

from .core.checkpoint import Checkpoint, parse_checkpoint_text, split_note
from .core.commitments import SnapshotManifest, manifest_for, mmr_getter, roots
from .core.consistency import ConsistencyProof, build_consistency_proof, check_sizes
from .core.keys import seq_from_key, seq_key
from .core.mmr import mmr_root as mmr_root_at
from .core.roots import overall_root
from .errors import CortexError, ValidationError, VerificationError
from .handle import Handle
from .replay import replay_in_memory
from .signing import SigningKey, VerifierKey, sign_checkpoint, verify_checkpoint
from .store.txn import ReadTxn, WriteTxn

__all__ = ["prove_consistency", "read_checkpoints", "root_at", "take_snapshot"]

_CHECKPOINT = b"checkpoint"


def _checkpoint_key(seq: int) -> bytes:
    return _CHECKPOINT + seq_key(seq)


def prove_consistency(h: Handle, old_seq: int, new_seq: int | None) -> ConsistencyProof:
    """Carry out :meth:`Cortex.prove_consistency` (see the module doc for the cost)."""
    with h.reading() as txn:
        size = txn.last_seq()
        old, new = check_sizes(old_seq, size if new_seq is None else new_seq, size)
        known = {size: roots(h.hash_name, txn.get, size)[1]}
        for seq in (old, new):
            stored = txn.get("snapshots", seq_key(seq))
            if seq not in known and stored is not None:
                known[seq] = SnapshotManifest.decode(bytes(stored)).smt_root
        missing = [seq for seq in (old, new) if seq not in known]
        get_node = mmr_getter(txn.get)
        if not missing:
            return build_consistency_proof(h.hash_name, get_node, old, known[old], new, known[new])
    for seq in missing:
        known[seq] = _replayed_smt_root(h, seq)
    with h.reading() as txn:
        get_node = mmr_getter(txn.get)
        return build_consistency_proof(h.hash_name, get_node, old, known[old], new, known[new])


def root_at(h: Handle, seq: int) -> bytes:
    """Carry out :meth:`Cortex.root_at`: the stored snapshot's OverallRoot at ``seq``, else
    the MMR root read from the store and the SMT root of an in-memory replay."""
    with h.reading() as txn:
        size = txn.last_seq()
        if type(seq) is not int or not 0 <= seq <= size:
            raise ValidationError(f"must be an integer from 0 to {size}, not {seq!r}", field="seq")
        if seq == size:
            return roots(h.hash_name, txn.get, size)[2]
        stored = txn.get("snapshots", seq_key(seq))
        if stored is not None:
            return SnapshotManifest.decode(bytes(stored)).overall_root
        mmr_root = mmr_root_at(h.hash_name, mmr_getter(txn.get), seq)
    return overall_root(h.hash_name, seq, mmr_root, _replayed_smt_root(h, seq))


def _replayed_smt_root(h: Handle, seq: int) -> bytes:
    """The SMT root after the first ``seq`` entries, by replaying them in memory (the same
    replay a rebuild runs)."""
    entries = islice((item for chunk in h.journal_chunks(0) for item in chunk), seq)
    tables = replay_in_memory(h.identity, entries, total=seq)
    return roots(h.hash_name, tables.get, seq)[1]


def take_snapshot(h: Handle, at: int, sign_with: SigningKey | None) -> SnapshotManifest:
    """Carry out :meth:`Cortex.snapshot`: store the manifest (and, with ``sign_with``, a
    checkpoint signed with it) of the committed state, in one write."""
    if h.active_batch() is not None:
        raise CortexError("take a snapshot outside a batch (it records committed state)")
    if sign_with is not None and type(sign_with) is not SigningKey:
        raise ValidationError("must be a cortexgraph.SigningKey", field="sign_with")

    def take(txn: WriteTxn) -> SnapshotManifest:
        seq = txn.last_seq()
        stored = txn.get("snapshots", seq_key(seq))
        wrote = False
        if stored is not None:
            manifest = SnapshotManifest.decode(bytes(stored))
        else:
            manifest = manifest_for(h.actor, h.hash_name, txn.get, seq, at)
            txn.put_snapshot(seq_key(seq), manifest.encode())
            wrote = True
        if sign_with is not None:
            old = txn.get("meta", _checkpoint_key(seq))
            note = None if old is None else _note_text(old, seq)
            signed = sign_checkpoint(sign_with, seq, manifest.overall_root, note=note)
            if signed != note:
                txn.put("meta", _checkpoint_key(seq), signed.encode())
                wrote = True
        if not wrote:
            txn.abort()
        return manifest

    return h.env.write_small(take)


def read_checkpoints(h: Handle, key: VerifierKey | None) -> list[Checkpoint]:
    """Carry out :meth:`Cortex.checkpoints`."""
    with h.reading() as txn:
        found = _checkpoints(txn, key)
    if key is not None and not found:
        raise VerificationError(f"the store holds no checkpoint signed by key {key.to_text()}")
    return found


def _note_text(raw: bytes, seq: int) -> str:
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationError(f"the checkpoint stored at seq {seq} is not UTF-8") from None


def _checkpoints(txn: ReadTxn, key: VerifierKey | None) -> list[Checkpoint]:
    out = []
    for raw_key, value in txn.iter_items("meta", _CHECKPOINT):
        seq = seq_from_key(bytes(raw_key)[len(_CHECKPOINT) :], table="meta")
        note = _note_text(value, seq)
        try:
            text, signatures = split_note(note)
            if key is None:
                checkpoint = Checkpoint(*parse_checkpoint_text(text), note)
            elif any(s.name == key.name and s.key_id == key.key_id for s in signatures):
                checkpoint = verify_checkpoint(note, key)
            else:
                continue  # another key's checkpoint (signed-note: ignore unknown keys)
        except VerificationError as exc:
            raise VerificationError(f"the checkpoint at seq {seq}: {exc}") from None
        stored = txn.get("snapshots", seq_key(seq))
        manifest = None if stored is None else SnapshotManifest.decode(bytes(stored))
        if (
            checkpoint.size != seq
            or manifest is None
            or manifest.overall_root != checkpoint.root
        ):
            raise VerificationError(
                f"the checkpoint at seq {seq} does not match the snapshot manifest stored"
                " there"
            )
        out.append(checkpoint)
    return out

