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
import math
import re
import threading
import unicodedata
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from blake3 import blake3
from numpy.typing import NDArray

from ..errors import ValidationError
from .base import check_texts

__all__ = ["HashEmbedder"]

_TOKEN = re.compile(r"\w+")
_WORD, _BIGRAM, _TRIGRAM = 1.0, 0.5, 1.0
_MAX_DIM = 1 << 20
_CHUNK = 256  # texts embedded together: bounds the feature arrays (fastest in cache)


def tokenize(text: str) -> list[str]:
    """Lower-case Unicode word tokens of ``text``, as ``HashEmbedder`` sees them.

    >>> tokenize("Deploys go through CI/CD — Straße!")
    ['deploys', 'go', 'through', 'ci', 'cd', 'strasse']
    """
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


#: what :func:`chunk_tokens` puts between two texts' tokens: not a word character, and a
#: stable code point of Unicode normalisation (it composes and reorders with nothing), so
#: normalising texts joined by it is normalising each
_SEP = "\x00"
_TOKEN_OR_SEP = re.compile(r"\w+|\x00")
#: ASCII characters that are not word characters (``\w``), to spaces; ``_SEP`` stays
_ASCII_NON_WORD = {
    code: " " for code in range(128) if not _TOKEN.fullmatch(chr(code)) and chr(code) != _SEP
}


def chunk_tokens(texts: Sequence[str]) -> list[str]:
    r"""The tokens of ``texts`` (:func:`tokenize`), text after text, with ``_SEP`` between
    two texts' tokens: ``tokenize`` of each text, in one pass over the joined texts instead
    of one per text.

    For ASCII, Unicode normalisation changes nothing and ``casefold`` is ``lower``, and the
    tokens are the runs left when every non-word character is a space. A text holding
    ``_SEP`` itself is tokenised alone.

    >>> chunk_tokens(["Deploy the API", "", "CI/CD — Straße!"])
    ['deploy', 'the', 'api', '\x00', '\x00', 'ci', 'cd', 'strasse']
    """
    if not texts:
        return []
    if sum(text.count(_SEP) for text in texts):
        out = tokenize(texts[0])
        for text in texts[1:]:
            out.append(_SEP)
            out += tokenize(text)
        return out
    joined = _SEP.join(texts)
    if joined.isascii():  # spaces around the separators, which split() then keeps apart
        return f" {_SEP} ".join(texts).lower().translate(_ASCII_NON_WORD).split()
    return _TOKEN_OR_SEP.findall(unicodedata.normalize("NFKC", joined).casefold())


# Feature hashes are kept as their 8 big-endian bytes (dtype ``_HASH``) where they are made.
_HASH = np.dtype(">u8")
#: the hash tables of :class:`_Seen` are dropped once they hold this many tokens, or this
#: many bigrams (about 70 and 30 MB at most)
_MAX_TOKENS = 1 << 16
_MAX_BIGRAMS = 1 << 18
#: a text's number in a chunk sits above bit 40 of a feature's sort key (see
#: ``HashEmbedder._embed_chunk``), the feature's rank in the chunk above bit 1
_ROW_SHIFT = 40


@functools.lru_cache(maxsize=1 << 16)
def _token_hashes(token: str) -> bytes:
    """Hashes of one token's word feature and character-trigram features (all of weight
    1.0: ``_WORD == _TRIGRAM``), as ``_HASH`` bytes."""
    padded = f"#{token}#"
    grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
    return b"".join([_hash_feature("w " + token), *(_hash_feature("c " + g) for g in grams)])


def _hash_feature(feature: str) -> bytes:
    return blake3(feature.encode("utf-8")).digest(length=8)


def _ranges(starts: NDArray[np.int64], sizes: NDArray[np.int64]) -> NDArray[np.int64]:
    """``np.concatenate([np.arange(s, s + n) for s, n in zip(starts, sizes)])``, without a
    Python loop.

    >>> _ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist()
    [5, 6, 9, 10, 11]
    """
    ends = np.cumsum(sizes)
    shift = np.repeat(starts - (ends - sizes), sizes)
    return shift + np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64)


class _Numbers(dict[str, int]):
    """Token -> number, ``_SEP`` being 0; a token not seen is numbered when first looked
    up (so numbering a chunk's tokens is one C-level ``map``) and listed in ``new``."""

    def __init__(self) -> None:
        super().__init__({_SEP: 0})
        self.new: list[str] = []

    def __missing__(self, token: str) -> int:
        number = self[token] = len(self)
        self.new.append(token)
        return number


class _Seen:
    """The feature hashes of the tokens and bigrams embedded so far, as numpy tables that a
    chunk of texts gathers from instead of hashing (or looking up) token by token.

    A token gets a number, in the order tokens are first seen (``_SEP`` is 0, with no
    features); ``hashes`` holds each token's word and trigram hashes
    (:func:`_token_hashes`), token after token, from ``starts`` for ``sizes``. A bigram
    is known by ``left << 32 | right`` (its tokens' numbers): ``bigram_keys`` is sorted
    and ``bigram_hashes`` holds their hashes. The numbers never reach a vector (only
    hashes do), so the tables change nothing but speed; they are dropped when they grow
    past ``_MAX_TOKENS`` or ``_MAX_BIGRAMS``. One lock guards them: embedders share them
    across threads, and a chunk keeps the arrays it read (they are replaced, never
    changed in place).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        self.numbers = _Numbers()
        self.tokens: list[str] = [_SEP]
        self.hashes: NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)
        self.starts: NDArray[np.int64] = np.zeros(1, dtype=np.int64)
        self.sizes: NDArray[np.int64] = np.zeros(1, dtype=np.int64)
        self.bigram_keys: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.bigram_hashes: NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)

    def number(self, tokens: list[str]) -> NDArray[np.int64]:
        """The number of each of ``tokens``, hashing the tokens not seen before."""
        if len(self.tokens) > _MAX_TOKENS:
            self.clear()
        numbers = self.numbers
        found = np.fromiter(map(numbers.__getitem__, tokens), dtype=np.int64, count=len(tokens))
        new, numbers.new = numbers.new, []
        if new:
            parts = [_token_hashes(token) for token in new]
            sizes = np.array([len(part) // _HASH.itemsize for part in parts], dtype=np.int64)
            starts = len(self.hashes) + np.cumsum(sizes) - sizes
            hashes = np.frombuffer(b"".join(parts), dtype=_HASH).astype(np.uint64)
            self.hashes = np.concatenate((self.hashes, hashes))
            self.starts = np.concatenate((self.starts, starts))
            self.sizes = np.concatenate((self.sizes, sizes))
            self.tokens += new
        return found

    def bigrams(self, keys: NDArray[np.int64]) -> NDArray[np.uint64]:
        """The hash of each bigram of ``keys`` (sorted, distinct), hashing those not seen."""
        if len(self.bigram_keys) > _MAX_BIGRAMS:
            self.bigram_keys = np.zeros(0, dtype=np.int64)
            self.bigram_hashes = np.zeros(0, dtype=np.uint64)
        known, hashes = self.bigram_keys, self.bigram_hashes
        at = np.searchsorted(known, keys)
        found = at < len(known)
        found[found] = known[at[found]] == keys[found]
        out = np.zeros(len(keys), dtype=np.uint64)
        out[found] = hashes[at[found]]
        missing = np.flatnonzero(~found)
        if len(missing):
            tokens = self.tokens
            fresh = np.frombuffer(
                b"".join(
                    _hash_feature(f"b {tokens[key >> 32]} {tokens[key & 0xFFFFFFFF]}")
                    for key in keys[missing].tolist()
                ),
                dtype=_HASH,
            ).astype(np.uint64)
            out[missing] = fresh
            self.bigram_keys = np.insert(known, at[missing], keys[missing])
            self.bigram_hashes = np.insert(hashes, at[missing], fresh)
        return out


_SEEN = _Seen()


#: a float type wider than float64 (x87's 80 bits where numpy's longdouble is that, as on
#: x86-64 Linux), or None: then every row's norm is summed by math.fsum
_WIDE = np.longdouble if np.finfo(np.longdouble).nmant >= 63 else None


def _sum_rows(squares: NDArray[np.float64], terms: NDArray[np.int64]) -> NDArray[np.float64]:
    """``math.fsum`` of each row of ``squares`` (non-negative; ``terms`` of them not zero
    in each row), correctly rounded, mostly without a Python call per row.

    Each row is summed in the wider type: with ``k`` non-zero terms, all non-negative,
    any order of additions is off the exact sum by at most ``(k - 1) * u`` of the
    computed one, to first order (``u``: its unit roundoff, half its eps); ``(k + 1) * u``
    also covers the second order and the rounding of the comparisons below. A row whose
    computed sum lies further than that from the midpoints around its float64 rounding
    rounds the exact sum the same way: that rounding is fsum's answer. The other rows
    (about one in ten at 200 terms) and every row without a wider type go through
    ``math.fsum``.
    """
    out = np.zeros(len(squares), dtype=np.float64)
    if _WIDE is None:
        unsure = np.arange(len(squares))
    else:
        wide = squares.sum(axis=1, dtype=_WIDE)
        out = wide.astype(np.float64)  # rounded to nearest
        slack = wide * ((terms + 1) * (np.finfo(_WIDE).eps / 2))
        here = out.astype(_WIDE)
        # the midpoints between the rounding and its neighbours: exact in 64 bits
        low = (here + np.nextafter(out, -np.inf).astype(_WIDE)) / 2
        high = (here + np.nextafter(out, np.inf).astype(_WIDE)) / 2
        unsure = np.flatnonzero(~((wide - slack > low) & (wide + slack < high)))
    for row in unsure.tolist():
        out[row] = math.fsum(squares[row].tolist())
    return out


def _unit_rows(matrix: NDArray[np.float64]) -> NDArray[np.float32]:
    """:func:`~cortexgraph.embed.base.unit_row` of each row of ``matrix``: the norm of a row
    is the square root of the correctly rounded :func:`math.fsum` of its squares (so the
    order they are added in does not matter; see :func:`_sum_rows`), and each element is
    divided by it (correctly rounded, vectorised or not). Zero rows stay zero."""
    squares = matrix * matrix
    norms = np.sqrt(_sum_rows(squares, np.count_nonzero(squares, axis=1)))
    norms[norms == 0.0] = 1.0  # 0.0 / 1.0 is 0.0: a zero row stays zero
    out: NDArray[np.float32] = (matrix / norms[:, np.newaxis]).astype(np.float32)
    return out


@functools.lru_cache(maxsize=32)
def _log_weights_below(size: int) -> NDArray[np.float64]:
    table = np.ones(size, dtype=np.float64)
    table[2:] = [_log_weight(count) for count in range(2, size)]
    return table


def _log_weights(most: int) -> NDArray[np.float64]:
    """:func:`_log_weight` of each count up to ``most``, at its index (0 and 1 unused)."""
    return _log_weights_below(1 << most.bit_length())


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

    #: each vector is a pure function of its text (module docstring), and the embedder
    #: pickles to its dimension: a large catch-up may embed part of its texts in a
    #: helper process (``Embedder``)
    worker_safe: ClassVar[bool] = True

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
        order (so the same bytes), only not one Python loop per text or token.

        Each text's features are found by number, not hashed one by one: its tokens'
        word and trigram hashes and its bigrams' hashes are gathered from the tables of
        :class:`_Seen`. Each distinct feature of the chunk gets its rank in hash order,
        and each feature occurrence one int64 sort key: the text's number, the rank, and
        one bit for its kind (0 for a token's features, which come first in a text, 1 for
        a bigram). One sort of the keys then lists each text's distinct features in hash
        order with their counts, the first occurrence's kind giving the weight: what a
        stable sort by (text, hash) of the features in text order gives.
        """
        count, dim = len(texts), self._dim
        tokens = chunk_tokens(texts)
        with _SEEN.lock:  # the tables' arrays are replaced, never changed: keep these
            numbers = _SEEN.number(tokens)
            between = numbers == 0  # _SEP: the next text's tokens follow
            text_of = np.cumsum(between)[~between]
            numbers = numbers[~between]
            pair = text_of[1:] == text_of[:-1]  # adjacent tokens of one text: a bigram
            bigram_keys, bigram_of = np.unique(
                (numbers[:-1][pair] << 32) | numbers[1:][pair], return_inverse=True
            )
            bigram_hashes = _SEEN.bigrams(bigram_keys)
            table, starts, sizes = _SEEN.hashes, _SEEN.starts, _SEEN.sizes
        if not len(numbers):
            return np.zeros((count, dim), dtype=np.float32)
        # the chunk's distinct tokens (``used``) and each occurrence's place among them
        present = np.zeros(len(sizes), dtype=bool)
        present[numbers] = True
        used = np.flatnonzero(present)
        local = np.zeros(len(present), dtype=np.int64)
        local[used] = np.arange(len(used))
        used_sizes = sizes[used]
        used_hashes = table[_ranges(starts[used], used_sizes)]
        distinct, rank = np.unique(
            np.concatenate((used_hashes, bigram_hashes)), return_inverse=True
        )
        token_rank, bigram_rank = rank[: len(used_hashes)], rank[len(used_hashes) :]
        occurrence = local[numbers]
        sizes = used_sizes[occurrence]
        token_keys = np.repeat(text_of << _ROW_SHIFT, sizes) | (
            token_rank[_ranges((np.cumsum(used_sizes) - used_sizes)[occurrence], sizes)] << 1
        )
        bigram_keys = (text_of[1:][pair] << _ROW_SHIFT) | (bigram_rank[bigram_of] << 1) | 1
        keys = np.concatenate((token_keys, bigram_keys))
        keys.sort()
        # One value per distinct feature of a text, in hash order; the first occurrence's
        # kind gives its weight.
        new = np.ones(len(keys), dtype=bool)
        new[1:] = (keys[1:] >> 1) != (keys[:-1] >> 1)
        starts = np.flatnonzero(new)
        counts = np.diff(np.append(starts, len(keys)))
        first = keys[starts]
        rows = first >> _ROW_SHIFT
        ranks = (first & ((1 << _ROW_SHIFT) - 1)) >> 1
        values = np.where(first & 1, _BIGRAM, _WORD)
        repeated = np.flatnonzero(counts > 1)
        if repeated.size:
            values[repeated] *= _log_weights(int(counts.max()))[counts[repeated]]
        # a distinct feature's sign and bucket, worked out once per feature of the chunk
        values[(distinct >> np.uint64(63)).astype(bool)[ranks]] *= -1.0
        buckets = (distinct % np.uint64(dim)).astype(np.int64)
        # np.bincount adds sequentially in input order: within a text, in hash order
        cells = rows * dim + buckets[ranks]
        matrix = np.bincount(cells, weights=values, minlength=count * dim)  # float64
        return _unit_rows(matrix.astype(np.float64, copy=False).reshape(count, dim))
