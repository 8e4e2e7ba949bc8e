"""``HashEmbedder``: deterministic feature hashing, no model, the library's default.

Scheme ``hash-v1`` (any change to it is a new name, so cached vectors are never mixed):

1. Normalise the text: Unicode NFKC, then ``str.casefold()``.
2. Tokens: maximal runs of Unicode word characters (``\\w+``: letters, digits, ``_``).
3. Features, each with a kind weight: every token (1.0), every pair of adjacent tokens
   (0.5) and every character trigram of ``#token#`` (1.0 — so ``deploys`` still shares
   most of its trigrams with ``deploy``, and a typo costs only a few features). The weights
   were picked on hand-made paraphrase and hard-negative pairs (``docs/embedders.md``).
4. A feature seen ``c`` times contributes ``weight * (1 + ln c)``; ``ln`` is computed with
   :mod:`decimal` and rounded once, so it is the same on every platform.
5. Each feature's UTF-8 bytes (prefixed by its kind) are hashed with BLAKE3; the first 8
   bytes, big-endian, give the index (``h mod dim``) and the sign (top bit).
6. The row is L2-normalised with exactly rounded arithmetic (:func:`math.fsum`) and stored as
   float32. A text without word characters gives a zero row.

Nothing here depends on ``PYTHONHASHSEED``, the CPU or the BLAS library: the same text gives
the same bytes everywhere.
"""

from __future__ import annotations

import decimal
import functools
import itertools
import re
import unicodedata
from collections.abc import Sequence

import numpy as np
from blake3 import blake3
from numpy.typing import NDArray

from ..errors import ValidationError
from .base import check_texts, unit_row

__all__ = ["HashEmbedder"]

_TOKEN = re.compile(r"\w+")
_WORD, _BIGRAM, _TRIGRAM = 1.0, 0.5, 1.0
_MAX_DIM = 1 << 20


def tokenize(text: str) -> list[str]:
    """Lower-case Unicode word tokens of ``text``, as ``HashEmbedder`` sees them.

    >>> tokenize("Deploys go through CI/CD — Straße!")
    ['deploys', 'go', 'through', 'ci', 'cd', 'strasse']
    """
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


@functools.lru_cache(maxsize=1 << 16)
def _token_features(token: str) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Hashes and weights of one token's word feature and character-trigram features."""
    padded = f"#{token}#"
    grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
    hashes = (_hash_feature("w " + token), *(_hash_feature("c " + g) for g in grams))
    return hashes, (_WORD, *([_TRIGRAM] * len(grams)))


@functools.lru_cache(maxsize=1 << 16)
def _bigram_hash(left: str, right: str) -> int:
    return _hash_feature(f"b {left} {right}")


def _hash_feature(feature: str) -> int:
    return int.from_bytes(blake3(feature.encode("utf-8")).digest(length=8), "big")


@functools.lru_cache(maxsize=256)
def _log_weight(count: int) -> float:
    """``1 + ln(count)``, correctly rounded (decimal's ``ln`` is, libm's need not be)."""
    ctx = decimal.Context(prec=40)
    return float(ctx.add(1, ctx.ln(count)))


class HashEmbedder:
    """Deterministic feature-hashing embedder: no model, no I/O, identical on every machine.

    Words, adjacent word pairs and character trigrams are hashed into ``dim`` signed buckets
    (scheme ``hash-v1``, described in the module docstring). It captures lexical overlap —
    shared words, word forms, typos — not meaning: "car" and "automobile" are unrelated to
    it. Use :class:`LocalEmbedder` when paraphrases must match.

    Args:
        dim: the number of components, 8 to 1,048,576. Larger means fewer hash collisions;
            384 matches all-MiniLM-L6-v2.

    Raises:
        ValidationError: ``dim`` is not an integer in range.

    >>> emb = HashEmbedder(dim=64)
    >>> emb.name, emb.dim
    ('hash-v1-64', 64)
    >>> v = emb.embed(["deploy the API", "deploying the API", ""])
    >>> v.shape, v.dtype
    ((3, 64), dtype('float32'))
    >>> round(float(v[0] @ v[1]), 2) > 0.5, float(v[2] @ v[2])
    (True, 0.0)
    """

    def __init__(self, dim: int = 384) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise ValidationError(f"expected an int, got {type(dim).__name__}", field="dim")
        if not 8 <= dim <= _MAX_DIM:
            raise ValidationError(f"must be between 8 and {_MAX_DIM}, got {dim}", field="dim")
        self._dim = dim

    @property
    def name(self) -> str:
        """``"hash-v1-<dim>"``: the scheme version and the dimension."""
        return f"hash-v1-{self._dim}"

    @property
    def dim(self) -> int:
        """The number of components of each vector."""
        return self._dim

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self._dim})"

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` into a ``(len(texts), dim)`` float32 array of unit (or zero) rows.

        Raises:
            ValidationError: ``texts`` is not a sequence of str (``field == "texts"``).
        """
        items = check_texts(texts)
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        for row, text in enumerate(items):
            out[row] = self._embed_one(text)
        return out

    def _embed_one(self, text: str) -> NDArray[np.float32]:
        tokens = tokenize(text)
        if not tokens:
            return np.zeros(self._dim, dtype=np.float32)
        hashes: list[int] = []
        weights: list[float] = []
        for token in tokens:
            h, w = _token_features(token)
            hashes.extend(h)
            weights.extend(w)
        for left, right in itertools.pairwise(tokens):
            hashes.append(_bigram_hash(left, right))
            weights.append(_BIGRAM)
        # One value per distinct feature (equal 64-bit hashes are the same feature), in
        # hash order; np.bincount then adds them into buckets sequentially in that order.
        features, first, counts = np.unique(
            np.array(hashes, dtype=np.uint64), return_index=True, return_counts=True
        )
        values = np.array(weights, dtype=np.float64)[first]
        for i in np.flatnonzero(counts > 1):
            values[i] *= _log_weight(int(counts[i]))
        values[(features >> np.uint64(63)).astype(bool)] *= -1.0
        buckets = (features % np.uint64(self._dim)).astype(np.intp)
        row = np.bincount(buckets, weights=values, minlength=self._dim)
        return unit_row(row.astype(np.float64, copy=False))  # float64 already with weights
