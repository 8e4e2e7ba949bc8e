"""Memories from transcripts: pluggable extractors, chunking, a journaled cursor, dedup.

>>> import cortexgraph as cg, tempfile
>>> from cortexgraph.extract import ExtractionInput, Turn, ingest
>>> with cg.open(tempfile.mkdtemp(), "agent") as cx:
...     report = ingest(cx, ExtractionInput([Turn("user", "Never push to main.")]),
...                     source_id="session-1", at=1_700_000_000_000)
...     [cx.resolve(uri).memory.type_name for uri in report.written]
['constraint']

The records and the rule extractor are pure and live in
:mod:`cortexgraph.core.extraction`; this package re-exports them next to the extractors
that do I/O (:class:`CommandExtractor`, :class:`HttpExtractor`) and :func:`ingest`, which
writes. The guide is ``docs/extraction.md``.
"""

from __future__ import annotations

from ..core.extraction import (
    CANDIDATE_TYPES,
    CATEGORIES,
    Candidate,
    ExtractionContext,
    ExtractionInput,
    ParseResult,
    ProposedEdge,
    RuleExtractor,
    Turn,
    build_prompt,
    extraction_relation,
    parse_candidates,
)
from ..errors import ExtractionError
from .chunking import CHUNK_BYTES, ChunkGroup, chunk_turns, read_transcript
from .command import CommandExtractor
from .http import HttpExtractor
from .ingest import CURSOR_NS, DUPLICATE_FROM, Cursor, ExtractionReport, cursor_of, ingest
from .protocol import Candidates, Extractor

__all__ = [
    "CANDIDATE_TYPES",
    "CATEGORIES",
    "CHUNK_BYTES",
    "CURSOR_NS",
    "Candidate",
    "Candidates",
    "ChunkGroup",
    "CommandExtractor",
    "Cursor",
    "DUPLICATE_FROM",
    "ExtractionContext",
    "ExtractionError",
    "ExtractionInput",
    "ExtractionReport",
    "Extractor",
    "HttpExtractor",
    "ParseResult",
    "ProposedEdge",
    "RuleExtractor",
    "Turn",
    "build_prompt",
    "chunk_turns",
    "cursor_of",
    "extraction_relation",
    "ingest",
    "parse_candidates",
    "read_transcript",
]
