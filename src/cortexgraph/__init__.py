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
from .core.commitments import MemoryProof, SnapshotManifest
from .core.journal import Entry
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
from .cortex import Batch, Cortex, Stats, open
from .errors import (
    AlreadyOpenError,
    BatchNoJournalError,
    CorruptionError,
    CortexError,
    NotFoundError,
    ReadOnlyError,
    TombstonedError,
    TooBroadQueryError,
    UnboundedQueryError,
    URIError,
    ValidationError,
    VerificationError,
    VersionConflictError,
)
from .replay import ActorReport, VerifyReport, verify

__version__ = "0.1.0"

__all__ = [
    "ActorReport",
    "AlreadyOpenError",
    "ArtifactRef",
    "Attest",
    "Batch",
    "BatchNoJournalError",
    "Clock",
    "Constraint",
    "CorruptionError",
    "Cortex",
    "CortexError",
    "Entry",
    "Event",
    "Fact",
    "Goal",
    "LearnWeights",
    "ManualClock",
    "Memory",
    "MemoryProof",
    "MemoryURI",
    "NotFoundError",
    "Pattern",
    "Preference",
    "ReadOnlyError",
    "Record",
    "SnapshotManifest",
    "Source",
    "Stats",
    "SystemClock",
    "TombstonedError",
    "TooBroadQueryError",
    "URIError",
    "UnboundedQueryError",
    "ValidationError",
    "VerificationError",
    "VerifyReport",
    "VersionConflictError",
    "__version__",
    "open",
    "verify",
]
