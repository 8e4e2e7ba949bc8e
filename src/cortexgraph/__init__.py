"""cortexgraph: an embeddable, deterministic, verifiable memory graph for AI agents.

>>> import tempfile, cortexgraph as cg
>>> root = tempfile.mkdtemp()
>>> with cg.open(root, "agent", clock=cg.ManualClock(1_700_000_000_000)) as cx:
...     uri = cx.write(cg.Fact(text="Deploys go through the CI pipeline", tags=["deploy"]))
...     cx.resolve(uri).memory.text
'Deploys go through the CI pipeline'
"""

from __future__ import annotations

from .clock import Clock, ManualClock, SystemClock
from .compact import CompactReport
from .context import ContextBundle
from .core.commitments import MemoryProof, SnapshotManifest
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
from .cortex import Attestation, Batch, Cortex, Edge, Neighbor, Stats, Traversal, open
from .embed import (
    Embedder,
    HashEmbedder,
    HttpEmbedder,
    LocalEmbedder,
    StaticEmbedder,
    TorchEmbedder,
)
from .errors import (
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
from .find import FindResult, Hit
from .recall import RecallHit, RecallResult
from .replay import ActorReport, VerifyReport, verify
from .scope import ScopeView, verify_scope

__version__ = "0.1.0"

__all__ = [
    "ActorReport",
    "AlreadyOpenError",
    "ArtifactRef",
    "Attest",
    "Attestation",
    "Batch",
    "BatchNoJournalError",
    "Clock",
    "CompactReport",
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
    "ScopeView",
    "SnapshotManifest",
    "Source",
    "StaticEmbedder",
    "Stats",
    "StorageError",
    "StorageFullError",
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
    "VerifyReport",
    "VersionConflictError",
    "__version__",
    "estimate_tokens",
    "open",
    "render",
    "verify",
    "verify_scope",
]
