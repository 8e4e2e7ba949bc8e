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
import math
import re
import unicodedata
from collections.abc import Sequence

import numpy as np
from blake3 import blake3
from numpy.typing import NDArray

from ..errors import ValidationError
from .base import check_texts

__all__ = ["HashEmbedder"]

_TOKEN = re.compile(r"\w+")
_WORD, _BIGRAM, _TRIGRAM = 1.0, 0.5, 1.0
_MAX_DIM = 1 << 20
_CHUNK = 512  # texts embedded together: bounds the feature arrays' memory


def tokenize(text: str) -> list[str]:
    """Lower-case Unicode word tokens of ``text``, as ``HashEmbedder`` sees them.

    >>> tokenize("Deploys go through CI/CD — Straße!")
    ['deploys', 'go', 'through', 'ci', 'cd', 'strasse']
    """
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


# Feature hashes are kept as their 8 big-endian bytes: a text's features are joined into
# one bytes object and read by numpy in one go (dtype ``_HASH``), no Python int per feature.
_HASH = np.dtype(">u8")


@functools.lru_cache(maxsize=1 << 16)
def _token_hashes(token: str) -> bytes:
    """Hashes of one token's word feature and character-trigram features (all of weight
    1.0: ``_WORD == _TRIGRAM``), as ``_HASH`` bytes."""
    padded = f"#{token}#"
    grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
    return b"".join([_hash_feature("w " + token), *(_hash_feature("c " + g) for g in grams)])


@functools.lru_cache(maxsize=1 << 16)
def _bigram_hash(left: str, right: str) -> bytes:
    return _hash_feature(f"b {left} {right}")


def _hash_feature(feature: str) -> bytes:
    return blake3(feature.encode("utf-8")).digest(length=8)


def _text_then_hash_order(
    rows: NDArray[np.int64], features: NDArray[np.uint64]
) -> NDArray[np.intp]:
    """The stable order of the features by (text, hash): ``np.lexsort((features, rows))``.

    Sorted first by one key, the text's number above the hash's top bits (one stable sort
    instead of lexsort's two); when two features of a text share those bits the order is
    checked and, if wrong, redone with lexsort, so the answer is always lexsort's.
    """
    shift = max(int(rows[-1]), 1).bit_length()
    key = (rows.astype(np.uint64) << np.uint64(64 - shift)) | (features >> np.uint64(shift))
    order = np.argsort(key, kind="stable")
    sorted_rows, sorted_features = rows[order], features[order]
    same_text = sorted_rows[1:] == sorted_rows[:-1]
    if (same_text & (sorted_features[1:] < sorted_features[:-1])).any():
        order = np.lexsort((features, rows))
    return order


def _unit_rows(matrix: NDArray[np.float64]) -> NDArray[np.float32]:
    """:func:`~cortexgraph.embed.base.unit_row` of each row of ``matrix``: the norm of a row
    is the correctly rounded :func:`math.fsum` of its squares (so the order they are added
    in does not matter), and each element is divided by it (correctly rounded, vectorised
    or not). Zero rows stay zero."""
    squares = matrix * matrix
    nonzero = squares != 0.0
    flat = iter(squares[nonzero].tolist())  # row by row
    norms = np.array(
        [math.sqrt(math.fsum(itertools.islice(flat, n))) for n in nonzero.sum(axis=1).tolist()]
    )
    zero = norms == 0.0
    norms[zero] = 1.0  # 0.0 / 1.0 is 0.0: a zero row stays zero
    out: NDArray[np.float32] = (matrix / norms[:, np.newaxis]).astype(np.float32)
    return out


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
        for start in range(0, len(items), _CHUNK):
            out[start : start + _CHUNK] = self._embed_chunk(items[start : start + _CHUNK])
        return out

    def _embed_chunk(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """The rows of ``texts``, computed for all of them at once with the arithmetic of
        one text at a time: the same float64 operations on the same values in the same
        order (so the same bytes), only not one Python loop per text."""
        parts: list[bytes] = []
        for text in texts:  # per text: the features of its tokens, then of its bigrams
            tokens = tokenize(text)
            parts.append(b"".join(map(_token_hashes, tokens)))
            parts.append(b"".join(map(_bigram_hash, tokens, itertools.islice(tokens, 1, None))))
        dim, count = self._dim, len(texts)
        sizes = [len(part) // _HASH.itemsize for part in parts]
        if not any(sizes):
            return np.zeros((count, dim), dtype=np.float32)
        features = np.frombuffer(b"".join(parts), dtype=_HASH).astype(np.uint64)
        rows = np.repeat(np.repeat(np.arange(count, dtype=np.int64), 2), sizes)
        weights = np.repeat(np.tile(np.array([_WORD, _BIGRAM]), count), sizes)
        # One value per distinct feature of a text (equal 64-bit hashes are the same
        # feature), in hash order; a stable sort keeps each feature's first occurrence
        # first, whose kind gives its weight (token features come before bigrams).
        order = _text_then_hash_order(rows, features)
        features, rows, weights = features[order], rows[order], weights[order]
        new = np.ones(len(features), dtype=bool)
        new[1:] = (features[1:] != features[:-1]) | (rows[1:] != rows[:-1])
        starts = np.flatnonzero(new)
        counts = np.diff(np.append(starts, len(features)))
        features, rows, values = features[starts], rows[starts], weights[starts]
        repeated = np.flatnonzero(counts > 1)
        if repeated.size:
            seen = np.unique(counts[repeated])
            table = np.array([_log_weight(int(c)) for c in seen.tolist()])
            values[repeated] *= table[np.searchsorted(seen, counts[repeated])]
        values[(features >> np.uint64(63)).astype(bool)] *= -1.0
        # np.bincount adds sequentially in input order: within a text, in hash order
        cells = rows * dim + (features % np.uint64(dim)).astype(np.int64)
        matrix = np.bincount(cells, weights=values, minlength=count * dim)  # float64
        return _unit_rows(matrix.astype(np.float64, copy=False).reshape(count, dim))
