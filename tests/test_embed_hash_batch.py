"""HashEmbedder embeds a batch of texts at once with the arithmetic of one text at a time:
its vectors are the bytes of the per-text reference implementation below (scheme hash-v1, as
it was first written), on varied texts, dimensions and batch sizes."""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt
from hypothesis import given
from hypothesis import strategies as st
from pytest import MonkeyPatch

from cortexgraph.embed import HashEmbedder, feature_hashing
from cortexgraph.embed.feature_hashing import (
    _BIGRAM,
    _SEP,
    _TRIGRAM,
    _WORD,
    _hash_feature,
    _log_weight,
    chunk_tokens,
    tokenize,
)


def reference_row(text: str, dim: int) -> npt.NDArray[np.float32]:
    """One text's hash-v1 row, computed one feature list per text (the scheme's first
    implementation, kept here as the reference)."""
    tokens = tokenize(text)
    if not tokens:
        return np.zeros(dim, dtype=np.float32)
    hashes: list[int] = []
    weights: list[float] = []
    for token in tokens:
        padded = f"#{token}#"
        grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
        hashes += [int.from_bytes(_hash_feature("w " + token), "big")]
        hashes += [int.from_bytes(_hash_feature("c " + g), "big") for g in grams]
        weights += [_WORD, *([_TRIGRAM] * len(grams))]
    for left, right in itertools.pairwise(tokens):
        hashes.append(int.from_bytes(_hash_feature(f"b {left} {right}"), "big"))
        weights.append(_BIGRAM)
    features, first, counts = np.unique(
        np.array(hashes, dtype=np.uint64), return_index=True, return_counts=True
    )
    values = np.array(weights, dtype=np.float64)[first]
    for i in np.flatnonzero(counts > 1):
        values[i] *= _log_weight(int(counts[i]))
    values[(features >> np.uint64(63)).astype(bool)] *= -1.0
    buckets = (features % np.uint64(dim)).astype(np.intp)
    row = np.bincount(buckets, weights=values, minlength=dim)
    nonzero = row[row != 0.0]
    norm = math.sqrt(math.fsum((nonzero * nonzero).tolist()))
    if norm == 0.0:
        return np.zeros(dim, dtype=np.float32)
    return (row / norm).astype(np.float32)


def reference(texts: Sequence[str], dim: int) -> npt.NDArray[np.float32]:
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        out[i] = reference_row(text, dim)
    return out


def varied_texts(count: int, seed: int) -> list[str]:
    """Texts with repeated words (log weights), shared words across texts, empty and
    wordless texts, non-ASCII letters and long texts."""
    rng = random.Random(seed)
    words = ["deploy", "api", "Straße", "café", "東京", "x_y", "9", "a", "the", "deploys", "ci"]
    texts = ["", "  !! -- ", "a a a a a a a", "w " * 300]
    for _ in range(count - len(texts)):
        size = rng.choice([0, 1, 2, 5, 20, 80])
        texts.append(" ".join(rng.choice(words) for _ in range(size)))
    return texts


# SHA-256 of the reference's rows for varied_texts(700, seed=5), computed with the per-text
# implementation before the batched one replaced it.
VARIED_KNOWN = {
    384: "11ba0cc4441a78393d090bb939bb171de16b667feb5d5369f7f2b2e3de0a076b",
    8: "b12e7cc1d3890ed37a647e40ede56a7298ee301859a3eef3e5e53d4e38f33d0a",
}


def test_batched_rows_are_the_reference_bytes_on_varied_texts() -> None:
    """On 700 varied texts (more than one internal chunk), at dimensions with few and with
    many bucket collisions, the batch gives the reference's bytes, which match the digest
    recorded from the per-text implementation."""
    texts = varied_texts(700, seed=5)
    for dim in (8, 64, 384, 1000):
        batched = HashEmbedder(dim).embed(texts)
        assert batched.tobytes() == reference(texts, dim).tobytes(), dim
        if dim in VARIED_KNOWN:
            assert hashlib.sha256(batched.tobytes()).hexdigest() == VARIED_KNOWN[dim]


def test_a_text_gives_the_same_row_alone_and_in_any_batch() -> None:
    """A row does not depend on the other texts of its batch nor on its place in it."""
    texts = varied_texts(40, seed=9)
    whole = HashEmbedder(64).embed(texts)
    for i, text in enumerate(texts):
        assert HashEmbedder(64).embed([text])[0].tobytes() == whole[i].tobytes()
    backwards = HashEmbedder(64).embed(texts[::-1])[::-1]
    assert np.ascontiguousarray(backwards).tobytes() == whole.tobytes()


@given(
    st.lists(st.text(alphabet=st.sampled_from("ab cé東_1 DÉ-\u0301"), max_size=40), max_size=12),
    st.sampled_from([8, 16, 384]),
)
def test_batched_rows_match_the_reference_on_random_texts(texts: list[str], dim: int) -> None:
    """Random short texts over a small alphabet (many repeated features, combining marks)
    give the reference's bytes."""
    assert HashEmbedder(dim).embed(texts).tobytes() == reference(texts, dim).tobytes()


@given(
    st.lists(
        st.text(alphabet=st.sampled_from("aZ_9 -.\x00\x1c\u0301\u00df\ufb01\u1100\u1161é東 \t"))
    )
)
def test_chunk_tokens_are_each_texts_tokens_between_separators(texts: list[str]) -> None:
    """Tokenising texts joined (ASCII, non-ASCII with combining marks, ligatures and Hangul
    jamo that normalisation composes, texts holding the separator itself) gives each text's
    own tokens, in order, with one separator between two texts."""
    expected: list[str] = []
    for i, text in enumerate(texts):
        expected += ([_SEP] if i else []) + tokenize(text)
    assert chunk_tokens(texts) == expected


def test_rows_do_not_depend_on_the_hash_tables_filling_up(monkeypatch: MonkeyPatch) -> None:
    """With tables so small that they are dropped while a batch is embedded, and dropped
    between calls, the rows are still the reference's bytes (the tables only save work)."""
    monkeypatch.setattr(feature_hashing, "_MAX_TOKENS", 3)
    monkeypatch.setattr(feature_hashing, "_MAX_BIGRAMS", 2)
    texts = varied_texts(300, seed=7)
    for dim in (8, 384):
        assert HashEmbedder(dim).embed(texts).tobytes() == reference(texts, dim).tobytes()
        backwards = texts[::-1]
        assert HashEmbedder(dim).embed(backwards).tobytes() == reference(backwards, dim).tobytes()


def test_threads_sharing_the_tables_get_the_reference_bytes() -> None:
    """Embedders in several threads at once (sharing the hash tables) each get the
    reference's bytes."""
    texts = [varied_texts(200, seed=seed) for seed in range(4)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        rows = list(pool.map(lambda batch: HashEmbedder(64).embed(batch), texts))
    for batch, got in zip(texts, rows, strict=True):
        assert got.tobytes() == reference(batch, 64).tobytes()


@given(
    st.lists(
        st.lists(
            st.one_of(
                st.just(0.0),
                st.floats(min_value=0.0, max_value=1e150, allow_subnormal=True),
                st.sampled_from([1.0, 0.25, 1.0 + 2**-52, 2**-60, 3.0, 1e-300]),
            ),
            min_size=1,
            max_size=40,
        ),
        min_size=1,
        max_size=8,
    ),
    st.booleans(),
)
def test_row_sums_are_fsum(rows: list[list[float]], wide: bool) -> None:
    """_sum_rows gives math.fsum of each row, bit for bit, on rows of non-negative values
    with wide ranges of exponents and terms that round at every step, with the wider
    float type and without it (then every row goes through fsum)."""
    width = max(map(len, rows))
    squares = np.array([row + [0.0] * (width - len(row)) for row in rows], dtype=np.float64)
    saved = feature_hashing._WIDE
    feature_hashing._WIDE = saved if wide else None
    try:
        got = feature_hashing._sum_rows(squares, np.count_nonzero(squares, axis=1))
    finally:
        feature_hashing._WIDE = saved
    assert got.tolist() == [math.fsum(row) for row in rows]


def test_row_sums_near_a_midpoint_go_through_fsum() -> None:
    """A row whose wide sum lies within its error bound of a float64 midpoint is left to
    fsum: here the wide sum drops five terms of 3 * 2**-66 one by one and stays below the
    midpoint 1 + 2**-53, while the exact sum is above it, so fsum rounds up, to
    1 + 2**-52, where the wide sum would round down, to 1."""
    row = [1.0, 2**-53 - 2**-63, *[3 * 2**-66] * 5]
    assert math.fsum(row) == 1.0 + 2**-52
    got = feature_hashing._sum_rows(np.array([row]), np.array([len(row)]))
    assert got.tolist() == [1.0 + 2**-52]
