"""Merkle commitments: the journal's Merkle Mountain Range, the heads' sparse Merkle
tree, the OverallRoot, and proof verifiers.

Everything here is pure and needs no database, so a sub-agent can check proofs on its own.
Byte layouts, node numbering and invariants (M1-M8) are documented in
:mod:`cortexgraph.core.roots`, :mod:`cortexgraph.core.mmr` and
:mod:`cortexgraph.core.smt`.

>>> from cortexgraph.merkle import MMR, SmtVerifier, SparseMerkleTree, smt_key, verify_inclusion
>>> from cortexgraph.merkle import verify_smt
>>> log = MMR("sha256")
>>> for entry in (b"first", b"second", b"third"):
...     index = log.append(entry)
>>> proof = log.inclusion_proof(1)
>>> verify_inclusion("sha256", 1, log.size, log.leaf_hash(b"second"), proof, log.root())
True
>>> verify_inclusion("sha256", 1, log.size, log.leaf_hash(b"forged"), proof, log.root())
False
>>> heads = SparseMerkleTree("sha256")
>>> key = smt_key("sha256", "default", bytes(16))
>>> heads.update(key, b"\\x07" * 32)
>>> verify_smt("sha256", heads.root(), key, b"\\x07" * 32, heads.prove(key))
True
>>> verify_smt("sha256", heads.root(), key, None, heads.prove(key))  # it is present
False
>>> verify_smt("sha256", heads.root(), key, None, b"garbage")  # verifiers never raise
False
>>> many = SmtVerifier("sha256", heads.root())  # many proofs against one root
>>> many.verify(key, b"\\x07" * 32, heads.prove(key))
True
"""

from __future__ import annotations

from .core.commitments import MemoryProof, head_commitment, verify_memory_proof
from .core.mmr import (
    MMR,
    MmrGetNode,
    mmr_append,
    mmr_consistency_proof,
    mmr_inclusion_proof,
    mmr_leaf_hash,
    mmr_leaf_position,
    mmr_node_count,
    mmr_root,
    verify_consistency,
    verify_inclusion,
)
from .core.roots import overall_root
from .core.smt import (
    EMPTY_SMT_ROOT,
    SMT_KEY_SIZE,
    SmtGetNode,
    SmtUpdate,
    SmtVerifier,
    SparseMerkleTree,
    smt_get,
    smt_key,
    smt_prove,
    smt_update,
    verify_smt,
)

__all__ = [
    "EMPTY_SMT_ROOT",
    "MMR",
    "MemoryProof",
    "MmrGetNode",
    "SMT_KEY_SIZE",
    "SmtGetNode",
    "SmtUpdate",
    "SmtVerifier",
    "SparseMerkleTree",
    "head_commitment",
    "mmr_append",
    "mmr_consistency_proof",
    "mmr_inclusion_proof",
    "mmr_leaf_hash",
    "mmr_leaf_position",
    "mmr_node_count",
    "mmr_root",
    "overall_root",
    "smt_get",
    "smt_key",
    "smt_prove",
    "smt_update",
    "verify_consistency",
    "verify_inclusion",
    "verify_memory_proof",
    "verify_smt",
]
