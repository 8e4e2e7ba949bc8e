"""Hybrid recall, the pure parts: what is embedded, reciprocal-rank fusion, graph expansion.

- :func:`embed_text` is the text an embedder sees for a memory: ``"[type] [ns] "`` and the
  memory's text (with its summary and, for an Event, its speaker). Raw code
  (``ArtifactRef.content``) is never part of it, so it never reaches an embedder.
  :func:`embed_text_of_body` is the same text read from a stored body's fields.
- :func:`fuse_scores` (the default, ``fusion="score"``) scales each channel's scores to
  0..1 over its own top :data:`CHANNEL_DEPTH` (min to max) and adds them with equal weights
  (a memory outside a channel's list gets 0 there); :func:`fuse` (``fusion="rrf"``) is
  reciprocal-rank fusion, ``sum over channels of 1 / (RRF_K + rank)`` with ranks from 1.
- :func:`expand` lifts the 1-hop graph neighbours of the top hits to
  ``max(own score, EXPANSION_FACTOR * hit score)`` (from the scores before expansion; no
  cascade).

Why score fusion is the default: on the LoCoMo development split (docs/recall.md), with
everything else equal, it gave evidence recall@10 0.745 where RRF gave 0.696; choosing it on
three conversations and measuring the other two held up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .taxonomy import Event, Memory
from .text import Bm25Params

__all__ = [
    "CHANNELS",
    "CHANNEL_DEPTH",
    "EXPANDED_HITS",
    "EXPANSION_FACTOR",
    "FUSIONS",
    "MODES",
    "RECALL_BM25",
    "RRF_K",
    "embed_text",
    "embed_text_of_body",
    "expand",
    "fuse",
    "fuse_scores",
]

MODES = ("keyword", "vector", "hybrid")
FUSIONS = ("score", "rrf")
CHANNELS = ("keyword", "vector")
RRF_K = 60
CHANNEL_DEPTH = 100
EXPANSION_FACTOR = 0.7
EXPANDED_HITS = 10
#: BM25 parameters for recall: the Anserini defaults (k1 0.9, b 0.4)
RECALL_BM25 = Bm25Params(k1=0.9, b=0.4)


def embed_text(memory: Memory, ns: str) -> str:
    """The text embedded for a memory: ``"[type] [ns] "`` then its content."""
    speaker = memory.speaker if isinstance(memory, Event) else None
    return _compose(memory.type_name, ns, memory.text, memory.summary, speaker)


def embed_text_of_body(body: Mapping[str, Any], ns: str) -> str | None:
    """:func:`embed_text` of the memory whose stored body (the decoded CBOR map) is
    ``body``, read from its ``type``, ``text``, ``summary`` and ``speaker`` fields without
    building the memory; None when those fields do not have the types a valid body gives
    them (the caller then builds the memory, which names what is wrong).

    Only ``Event`` has a speaker, and an empty or absent optional field is left out of a
    body, so this equals :func:`embed_text` for every valid body (tested).
    """
    type_name, text = body.get("type"), body.get("text", "")  # an empty text is left out
    summary, speaker = body.get("summary"), body.get("speaker")
    if (
        type(type_name) is not str
        or type(text) is not str
        or (summary is not None and type(summary) is not str)
        or (speaker is not None and (type(speaker) is not str or type_name != "event"))
    ):
        return None
    return _compose(type_name, ns, text, summary, speaker)


def _compose(
    type_name: str, ns: str, text: str, summary: str | None, speaker: str | None
) -> str:
    parts = []
    if speaker:
        parts.append(f"{speaker}:")
    parts.append(text)
    if summary:
        parts.append(f"({summary})")
    return f"[{type_name}] [{ns}] " + " ".join(parts)


def fuse(
    rankings: Mapping[str, Sequence[int]], *, weights: Mapping[str, float] | None = None
) -> dict[int, float]:
    """Reciprocal-rank fusion of ranked lists of keys (best first), per channel."""
    fused: dict[int, float] = {}
    for channel, ranked in rankings.items():
        weight = 1.0 if weights is None else weights.get(channel, 1.0)
        for rank, key in enumerate(ranked, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (RRF_K + rank)
    return fused


def fuse_scores(channels: Mapping[str, Mapping[int, float]]) -> dict[int, float]:
    """Min-max scaled score fusion: each channel's scores mapped to 0..1 over its own list
    (all 1.0 when they are all equal), then summed with equal weights 1 / channels."""
    fused: dict[int, float] = {}
    weight = 1.0 / len(channels) if channels else 0.0
    for scores in channels.values():
        if not scores:
            continue
        low, high = min(scores.values()), max(scores.values())
        span = high - low
        for key, value in scores.items():
            scaled = (value - low) / span if span > 0 else 1.0
            fused[key] = fused.get(key, 0.0) + weight * scaled
    return fused


def expand(
    scores: Mapping[int, float],
    hits: Iterable[int],
    neighbours: Mapping[int, Sequence[int]],
    *,
    factor: float = EXPANSION_FACTOR,
) -> dict[int, tuple[float, int]]:
    """The neighbours of ``hits`` whose score the expansion raises: ``{key: (score, via)}``.

    A neighbour's score becomes ``max(own score, factor * score(hit))`` over the hits that
    reach it (its own score is 0 if it was not found); ``via`` is the first hit, in
    ``hits`` order, that gives that maximum. Scores are read before expansion, so a lifted
    neighbour does not lift its own neighbours.
    """
    raised: dict[int, tuple[float, int]] = {}
    for hit in hits:
        lifted = scores[hit] * factor
        for other in neighbours.get(hit, ()):
            if other == hit:
                continue
            best = raised[other][0] if other in raised else scores.get(other, 0.0)
            if lifted > best:
                raised[other] = (lifted, hit)
    return raised
