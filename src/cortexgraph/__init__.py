"""cortexgraph: an embeddable, deterministic, verifiable memory graph for AI agents.

>>> import tempfile, cortexgraph as cg
>>> root = tempfile.mkdtemp()
>>> with cg.open(root, "agent", clock=cg.ManualClock(1_700_000_000_000)) as cx:
...     uri = cx.write(cg.Fact(text="Deploys go through the CI pipeline", tags=["deploy"]))
...     cx.resolve(uri).memory.text
'Deploys go through the CI pipeline'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import compiled

compiled.install()  # before any compiled module is imported

from .clock import Clock, ManualClock, SystemClock  # noqa: E402
from .errors import (  # noqa: E402
    AlreadyOpenError,
    BatchNoJournalError,
    CorruptionError,
    CortexError,
    EmbedderError,
    ExtractionError,
    JournalFileError,
    MissingExtraError,
    NotFoundError,
    ReadOnlyError,
    StorageError,
    StorageFullError,
    TombstonedError,
    TooBroadQueryError,
    UnboundedQueryError,
    URIError,
    ValidationError,
    VerificationError,
    VersionConflictError,
)

if TYPE_CHECKING:
    from .compact import CompactReport, ConsolidationCandidate
    from .context import ContextBundle
    from .core.checkpoint import Checkpoint
    from .core.commitments import MemoryProof, SnapshotManifest
    from .core.consistency import ConsistencyProof, verify_consistency
    from .core.forms import FORMS, TokenEstimator, estimate_tokens, render
    from .core.graph import RELATIONS
    from .core.journal import Entry
    from .core.predicates import Q
    from .core.salience import DEFAULT_WEIGHTS, FACTOR_NAMES
    from .core.state import Record
    from .core.taxonomy import (
        ArtifactRef,
        Attest,
        Constraint,
        Event,
        Fact,
        Goal,
        LearnWeights,
        Memory,
        Pattern,
        Preference,
        Source,
    )
    from .core.uri import MemoryURI
    from .cortex import (
        Attestation,
        Batch,
        Cortex,
        Edge,
        Neighbor,
        Salience,
        Stats,
        Traversal,
        open,
    )
    from .embed import (
        Embedder,
        HashEmbedder,
        HttpEmbedder,
        LocalEmbedder,
        StaticEmbedder,
        TorchEmbedder,
    )
    from .find import FindResult, Hit
    from .recall import RecallHit, RecallResult
    from .replay import ActorReport, VerifyReport, verify
    from .replication import SyncReport, sync
    from .scope import ScopeView, verify_scope
    from .scope_env import scope_from_env
    from .signing import SigningKey, VerifierKey, verify_checkpoint
    from .store.stamp import store_generation

__version__ = "0.1.0"

#: Public name -> the module (relative to this package) that defines it, imported on first
#: access (PEP 562). ``import cortexgraph`` stays cheap: numpy, LMDB, attrs classes and the
#: compiled tables of the verbs load only when a program first touches a name that needs them.
#: The errors and the clocks are imported eagerly above: they are small and every entry
#: point needs them.
_LAZY: dict[str, str] = {
    "CompactReport": ".compact",
    "ConsolidationCandidate": ".compact",
    "ContextBundle": ".context",
    "Checkpoint": ".core.checkpoint",
    "MemoryProof": ".core.commitments",
    "SnapshotManifest": ".core.commitments",
    "ConsistencyProof": ".core.consistency",
    "verify_consistency": ".core.consistency",
    "FORMS": ".core.forms",
    "TokenEstimator": ".core.forms",
    "estimate_tokens": ".core.forms",
    "render": ".core.forms",
    "RELATIONS": ".core.graph",
    "Entry": ".core.journal",
    "Q": ".core.predicates",
    "DEFAULT_WEIGHTS": ".core.salience",
    "FACTOR_NAMES": ".core.salience",
    "Record": ".core.state",
    "ArtifactRef": ".core.taxonomy",
    "Attest": ".core.taxonomy",
    "Constraint": ".core.taxonomy",
    "Event": ".core.taxonomy",
    "Fact": ".core.taxonomy",
    "Goal": ".core.taxonomy",
    "LearnWeights": ".core.taxonomy",
    "Memory": ".core.taxonomy",
    "Pattern": ".core.taxonomy",
    "Preference": ".core.taxonomy",
    "Source": ".core.taxonomy",
    "MemoryURI": ".core.uri",
    "Attestation": ".cortex",
    "Batch": ".cortex",
    "Cortex": ".cortex",
    "Edge": ".cortex",
    "Neighbor": ".cortex",
    "Salience": ".cortex",
    "Stats": ".cortex",
    "Traversal": ".cortex",
    "open": ".cortex",
    "Embedder": ".embed",
    "HashEmbedder": ".embed",
    "HttpEmbedder": ".embed",
    "LocalEmbedder": ".embed",
    "StaticEmbedder": ".embed",
    "TorchEmbedder": ".embed",
    "FindResult": ".find",
    "Hit": ".find",
    "RecallHit": ".recall",
    "RecallResult": ".recall",
    "ActorReport": ".replay",
    "VerifyReport": ".replay",
    "verify": ".replay",
    "SigningKey": ".signing",
    "VerifierKey": ".signing",
    "SyncReport": ".replication",
    "sync": ".replication",
    "verify_checkpoint": ".signing",
    "ScopeView": ".scope",
    "verify_scope": ".scope",
    "scope_from_env": ".scope_env",
    "store_generation": ".store.stamp",
}


def __getattr__(name: str) -> Any:
    """Import the module that defines a public ``name`` on first access and cache it here.

    Raises:
        AttributeError: ``name`` is not a public name of the package.
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
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
