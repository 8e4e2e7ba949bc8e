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

from .core import mmr, smt
from .core.commitments import MemoryProof as MemoryProof
from .core.commitments import head_commitment as head_commitment
from .core.commitments import verify_memory_proof as verify_memory_proof
from .core.mmr import *  # noqa: F403 - the names of core.mmr.__all__
from .core.roots import overall_root as overall_root
from .core.smt import *  # noqa: F403 - the names of core.smt.__all__

#: the MMR's and the SMT's public names, the proofs of memories and the OverallRoot
#: (``tests/test_exports.py`` pins the list)
__all__ = sorted(
    [
        *mmr.__all__,
        *smt.__all__,
        "MemoryProof",
        "head_commitment",
        "overall_root",
        "verify_memory_proof",
    ]
)
