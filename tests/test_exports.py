"""The public surface changes only on purpose."""

from __future__ import annotations

import cortexgraph as cg
import cortexgraph.merkle

# The documented public API (README and docs/). Changing it is a release note.
PUBLIC = [
    "ActorReport",
    "AlreadyOpenError",
    "ArtifactRef",
    "Attest",
    "Attestation",
    "Batch",
    "BatchNoJournalError",
    "Checkpoint",
    "Clock",
    "CompactReport",
    "ConsistencyProof",
    "ConsolidationCandidate",
    "Constraint",
    "ContextBundle",
    "CorruptionError",
    "Cortex",
    "CortexError",
    "DEFAULT_WEIGHTS",
    "Edge",
    "Embedder",
    "EmbedderError",
    "Entry",
    "Event",
    "ExtractionError",
    "FACTOR_NAMES",
    "FORMS",
    "Fact",
    "FindResult",
    "Goal",
    "HashEmbedder",
    "Hit",
    "HttpEmbedder",
    "JournalFileError",
    "LearnWeights",
    "LocalEmbedder",
    "ManualClock",
    "Memory",
    "MemoryProof",
    "MemoryURI",
    "MissingExtraError",
    "Neighbor",
    "NotFoundError",
    "Pattern",
    "Preference",
    "Q",
    "RELATIONS",
    "ReadOnlyError",
    "RecallHit",
    "RecallResult",
    "Record",
    "Salience",
    "ScopeView",
    "SigningKey",
    "SnapshotManifest",
    "Source",
    "StaticEmbedder",
    "Stats",
    "StorageError",
    "StorageFullError",
    "SyncReport",
    "SystemClock",
    "TokenEstimator",
    "TombstonedError",
    "TooBroadQueryError",
    "TorchEmbedder",
    "Traversal",
    "URIError",
    "UnboundedQueryError",
    "ValidationError",
    "VerificationError",
    "VerifierKey",
    "VerifyReport",
    "VersionConflictError",
    "__version__",
    "estimate_tokens",
    "open",
    "render",
    "scope_from_env",
    "store_generation",
    "sync",
    "verify",
    "verify_checkpoint",
    "verify_consistency",
    "verify_scope",
]


def test_public_names_are_exactly_the_documented_ones() -> None:
    """__all__ lists exactly the documented names, sorted, and each one exists."""
    assert cg.__all__ == PUBLIC
    assert cg.__all__ == sorted(cg.__all__)
    for name in cg.__all__:
        assert hasattr(cg, name), name


# The public Merkle module: proofs a sub-agent checks without a store. Changing it is a
# release note too.
MERKLE_PUBLIC = [
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


def test_merkle_public_names_are_exactly_the_documented_ones() -> None:
    """cortexgraph.merkle's __all__ lists exactly these names, sorted, and each one exists."""
    assert cg.merkle.__all__ == MERKLE_PUBLIC
    assert cg.merkle.__all__ == sorted(cg.merkle.__all__)
    for name in cg.merkle.__all__:
        assert hasattr(cg.merkle, name), name


def test_error_tree() -> None:
    """Every error is a CortexError, with the documented built-in bases."""
    errors = [getattr(cg, n) for n in PUBLIC if n.endswith("Error")]
    assert all(issubclass(e, cg.CortexError) for e in errors)
    assert issubclass(cg.ValidationError, ValueError)
    assert issubclass(cg.URIError, cg.ValidationError)
    assert issubclass(cg.NotFoundError, LookupError)


def test_nine_memory_types() -> None:
    """The taxonomy is the closed set of nine types, all subclasses of Memory."""
    types = [cg.Goal, cg.Preference, cg.Constraint, cg.Fact, cg.Pattern, cg.Event]
    types += [cg.ArtifactRef, cg.Attest, cg.LearnWeights]
    assert all(issubclass(t, cg.Memory) for t in types)
    assert len({t.type_name for t in types}) == len({t.type_code for t in types}) == 9
