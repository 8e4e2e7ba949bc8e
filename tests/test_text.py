"""Keyword-recall text (``core/text.py``): the tokenizer, the stemmer, BM25 and Jaccard.

Known answers are checked by hand (the expected tokens below were written from the rules
in the module docstring, not copied from output); properties are checked with Hypothesis;
determinism across ``PYTHONHASHSEED`` in subprocesses.
"""

from __future__ import annotations

import math
import os
import string
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cortexgraph.core import text
from cortexgraph.core.text import (
    DEFAULT_BM25,
    PPM,
    STOPWORDS,
    Bm25Params,
    bm25_idf,
    bm25_scores,
    bm25_term,
    jaccard,
    jaccard_ppm,
    shingles,
    stem_word,
    term_counts,
    tokenize,
)
from cortexgraph.errors import ValidationError

# ---------------------------------------------------------------------------
# Tokenizer: known answers

KNOWN_TOKENS = [
    # plurals, -ing, stopwords
    ("The cats are running", ["cat", "run"]),
    # possessives: 's is dropped; a trailing apostrophe is a quotation mark
    ("Caroline's dogs", ["carolin", "dog"]),
    ("the students' essays", ["student", "essay"]),
    # punctuation separates and disappears
    ("Hello, world! (again)...", ["hello", "world"]),
    ('"quoted" [brackets] {braces} <angle>', ["quot", "bracket", "brace", "angl"]),
    # numbers are digit runs: "." and "," split them
    ("Version 3.14 costs $1,000", ["version", "3", "14", "cost", "1", "000"]),
    # a LoCoMo session date
    ("1:56 pm on 8 May, 2023", ["1", "56", "pm", "8", "may", "2023"]),
    ("2023-05-08T13:56", ["2023", "05", "08t13", "56"]),
    # URLs and paths split on every separator, underscore included
    ("https://example.com/docs/index.html", ["http", "exampl", "com", "doc", "index", "html"]),
    ("src/cortexgraph/core/text.py", ["src", "cortexgraph", "core", "text", "py"]),
    ("user_id = 42", ["user", "id", "42"]),
    # hyphens separate
    ("state-of-the-art e-mail", ["state", "art", "e", "mail"]),
    ("covid-19", ["covid", "19"]),
    # contractions: n't -> not (a stopword), other clitics dropped
    ("don't won't can't", []),
    ("I'm sure we'll go", ["sure", "go"]),
    # other apostrophes join, typographic ones included
    ("O'Brien rock'n'roll", ["obrien", "rocknroll"]),
    ("don\u2019t stop", ["stop"]),
    # non-BMP: mathematical letters and digits fold to ASCII (NFKC); emoji are dropped
    ("\U0001d401\U0001d428\U0001d425\U0001d41d \U0001d7cf\U0001d7d0\U0001d7d1", ["bold", "123"]),
    ("emoji \U0001f389 party", ["emoji", "parti"]),
    # CJK: one token per character, kana too; a supplementary-plane ideograph
    ("東京タワー", ["東", "京", "タ", "ワ", "ー"]),
    ("我爱北京", ["我", "爱", "北", "京"]),
    ("abc\U00020000def", ["abc", "\U00020000", "def"]),
    # Turkish: U+0130 folds to plain i; dotless i (U+0131) stays; I folds to i
    ("\u0130stanbul", ["istanbul"]),
    ("ISTANBUL \u0131stanbul", ["istanbul", "\u0131stanbul"]),
    # casefolding (not just lowercasing) and compatibility forms
    ("Straße STRASSE", ["strasse", "strasse"]),
    ("\ufb01le \ufb02ow", ["file", "flow"]),
    ("\uff26\uff55\uff4c\uff4c \uff11\uff12\uff13", ["full", "123"]),  # full-width forms
    # no accent folding; precomposed and decomposed forms agree
    ("café CAFÉ cafe cafe\u0301", ["café", "café", "cafe", "café"]),
    # combining marks keep words of other scripts whole
    ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),
    ("\u041c\u043e\u0441\u043a\u0432\u0430 \u041c\u041e\u0421\u041a\u0412\u0410",
     ["\u043c\u043e\u0441\u043a\u0432\u0430"] * 2),  # Cyrillic, both cases
    # a decade loses its s
    ("the 1990s", ["1990"]),
    # question words are stopwords
    ("When did Melanie paint a sunrise?", ["melani", "paint", "sunrise"]),
    ("Where is the deploy log?", ["deploy", "log"]),
    # nothing in, nothing out
    ("", []),
    (" \t\n ", []),
    ("!!! --- ...", []),
]


@pytest.mark.parametrize(("source", "expected"), KNOWN_TOKENS)
def test_tokenize_known_answers(source: str, expected: list[str]) -> None:
    """The default tokenizer (stemming, stopwords) gives the hand-checked tokens."""
    assert tokenize(source) == expected


KNOWN_RAW_TOKENS = [
    ("The cats are running", ["the", "cats", "are", "running"]),
    ("don't won't can't shan't ain't", ["do", "not", "will", "not", "can", "not", "shall",
                                        "not", "is", "not"]),
    ("shouldn't've", ["should", "not"]),
    ("I'm sure we'll go, they'd said", ["i", "sure", "we", "go", "they", "said"]),
    ("it's Caroline's", ["it", "caroline"]),
    ("'hello' ''quoted''", ["hello", "quoted"]),
    ("When did Melanie paint a sunrise?", ["when", "did", "melanie", "paint", "a", "sunrise"]),
]


@pytest.mark.parametrize(("source", "expected"), KNOWN_RAW_TOKENS)
def test_tokenize_raw_known_answers(source: str, expected: list[str]) -> None:
    """With stemming and stopwords off, only normalisation, splitting and clitics apply."""
    assert tokenize(source, stem=False, stopwords=False) == expected


def test_stopwords_without_stemming_and_stemming_without_stopwords() -> None:
    """The two options are independent: each one turns off only its own step."""
    assert tokenize("The cats are running", stem=False) == ["cats", "running"]
    assert tokenize("The cats are running", stopwords=False) == ["the", "cat", "are", "run"]


def test_ascii_and_unicode_paths_agree() -> None:
    """ASCII text takes a fast path; the same words with one non-ASCII character added
    tokenize the same way (curly apostrophe included)."""
    ascii_text = "Don't stop: the user_id of O'Brien's 3 dogs (v1.2) -- rock'n'roll!"
    unicode_text = ascii_text.replace("'", "\u2019") + " \u00e9"
    assert tokenize(unicode_text) == [*tokenize(ascii_text), "\u00e9"]
    assert tokenize(unicode_text, stem=False, stopwords=False) == [
        *tokenize(ascii_text, stem=False, stopwords=False),
        "\u00e9",
    ]


def test_tokenize_rejects_non_strings() -> None:
    """A non-string is a ValidationError naming the field ``text``."""
    for bad in (None, b"bytes", 3, ["a"]):
        with pytest.raises(ValidationError) as caught:
            tokenize(bad)  # type: ignore[arg-type]
        assert caught.value.field == "text"


# ---------------------------------------------------------------------------
# Stemmer: known answers

KNOWN_STEMS = [
    # 1. plurals
    ("cats", "cat"), ("classes", "class"), ("boxes", "box"), ("matches", "match"),
    ("wishes", "wish"), ("buzzes", "buzz"), ("ties", "tie"), ("tries", "try"),
    ("cities", "citi"), ("days", "day"), ("ideas", "idea"), ("caches", "cach"),
    ("cache", "cach"),
    # short words and -ss/-us/-is survive
    ("bus", "bus"), ("gas", "gas"), ("this", "this"), ("class", "class"),
    ("status", "status"), ("analysis", "analysis"),
    # 2. -ed/-ing with undoubling and e restoration
    ("running", "run"), ("stopped", "stop"), ("hopping", "hop"), ("hoping", "hope"),
    ("hoped", "hope"), ("falling", "fall"), ("missed", "miss"), ("added", "add"),
    ("making", "make"), ("used", "use"), ("using", "use"), ("raised", "raise"),
    ("housing", "house"), ("meetings", "meet"), ("painted", "paint"), ("agreed", "agree"),
    ("need", "need"), ("speed", "speed"), ("bed", "bed"), ("shed", "shed"),
    ("sing", "sing"), ("king", "king"), ("string", "string"), ("dying", "die"),
    ("died", "die"), ("tried", "try"), ("trying", "try"), ("studied", "studi"),
    ("studying", "studi"),
    # 3. adverbs
    ("quickly", "quick"), ("really", "real"), ("carefully", "careful"),
    ("happily", "happi"), ("probably", "probabl"), ("only", "onli"), ("early", "earli"),
    ("apply", "appli"), ("butterfly", "butterfli"), ("anomaly", "anomali"),
    # 4. final y after a consonant
    ("study", "studi"), ("happy", "happi"), ("day", "day"), ("play", "play"),
    # 5. final e
    ("create", "creat"), ("created", "creat"), ("creates", "creat"), ("creating", "creat"),
    ("make", "make"), ("hope", "hope"), ("free", "free"), ("house", "house"),
    ("movie", "movi"), ("movies", "movi"),
    # exceptions
    ("news", "news"), ("always", "always"), ("focused", "focus"), ("family", "famili"),
    ("families", "famili"), ("goes", "go"),
    # a result that would be a stopword is not used
    ("others", "others"),
    # not English letters: unchanged; decades lose their s
    ("1990s", "1990"), ("mp3s", "mp3s"), ("cafés", "cafés"), ("abc", "abc"),
]


@pytest.mark.parametrize(("word", "expected"), KNOWN_STEMS)
def test_stem_known_answers(word: str, expected: str) -> None:
    """Each suffix rule, its guards and its exceptions give the documented stem."""
    assert stem_word(word) == expected


@given(st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=14))
@example("superseded")
@example("embeddings")
@example("syringes")
def test_stem_is_idempotent_and_never_empty(word: str) -> None:
    """For any ASCII word the stem is non-empty, a fixed point, never a new stopword, and
    no longer than the word plus one letter (the restored e of hoping -> hope)."""
    stem = stem_word(word)
    assert stem
    assert stem_word(stem) == stem
    assert stem in STOPWORDS or stem == word or stem not in STOPWORDS
    if word not in STOPWORDS:
        assert stem not in STOPWORDS
    assert len(stem) <= len(word) + 1
    assert set(stem) <= set(string.ascii_lowercase)


# ---------------------------------------------------------------------------
# Stopwords


def test_stopword_list_policy() -> None:
    """The stopword list has the documented size and shape, drops question words and
    keeps the words that carry meaning (months, "us", "won", "id")."""
    assert 120 <= len(STOPWORDS) <= 180
    for word in sorted(STOPWORDS):
        assert tokenize(word, stem=False, stopwords=False) == [word]
    assert {"when", "where", "who", "why", "how", "what", "the", "not"} <= STOPWORDS
    assert not {"may", "march", "us", "won", "id", "ill", "well", "ai", "new"} & STOPWORDS


# ---------------------------------------------------------------------------
# Tokenizer: properties

texts = st.text(max_size=80) | st.text(alphabet=string.printable, max_size=120)


@given(texts, st.booleans(), st.booleans())
@example("Caroline's dogs don't run", True, True)
@example("ǰ İ ß ﬁ ς \u0345", True, False)
@example("a\u0301 \u0301b \u0e01\u0e31\u0e01", False, False)
@example("'' ' a'' ''b", False, False)
def test_tokenize_properties(source: str, stem: bool, stopwords: bool) -> None:
    """Tokens are non-empty, have no whitespace, apostrophe or separator, are casefolded,
    contain no stopword when stopwords are on, and tokenizing the joined tokens gives them
    back (idempotence)."""
    tokens = tokenize(source, stem=stem, stopwords=stopwords)
    for token in tokens:
        assert token
        assert not any(ch.isspace() for ch in token)
        assert "'" not in token and "_" not in token
        assert token == token.casefold() or tokenize(token.casefold()) == tokenize(token)
    if stopwords:
        assert not set(tokens) & STOPWORDS
    assert tokenize(" ".join(tokens), stem=stem, stopwords=stopwords) == tokens


@given(texts)
def test_stopwords_only_remove_tokens(source: str) -> None:
    """Turning stopwords on removes tokens and changes none: the result is the tokens of
    the stopword-free run with the stopwords filtered out."""
    everything = tokenize(source, stem=False, stopwords=False)
    assert tokenize(source, stem=False) == [t for t in everything if t not in STOPWORDS]


@given(texts)
def test_term_counts_agree_with_tokenize(source: str) -> None:
    """term_counts counts each token of tokenize, keyed in order of first occurrence."""
    tokens = tokenize(source)
    counts = term_counts(source)
    assert list(counts) == list(dict.fromkeys(tokens))
    assert all(counts[t] == tokens.count(t) for t in counts)
    assert sum(counts.values()) == len(tokens)


def test_term_counts_known_answer() -> None:
    """Inflected forms of a word count as one term."""
    assert term_counts("The deploy failed; deploys fail on Fridays.") == {
        "deploy": 2,
        "fail": 2,
        "friday": 1,
    }
    assert term_counts("a A the", stopwords=False) == {"a": 2, "the": 1}


@pytest.mark.pure_python
def test_memo_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-mode memo is cleared when full; the tokens are the same before, during
    and after clearing as from a cold start."""
    sentence = "Caroline's friends went hiking and painted sunsets in the mountains"
    expected = tokenize(sentence)
    monkeypatch.setattr(text, "_MEMO_LIMIT", 3)
    for index in range(20):
        assert tokenize(f"{sentence} word{index}") == [*expected, f"word{index}"]
    for memo in text._MEMOS.values():
        memo.clear()
    assert tokenize(sentence) == expected


# ---------------------------------------------------------------------------
# BM25: known answers


def test_bm25_idf_known_answers() -> None:
    """idf = ln(1 + (N - df + 0.5) / (df + 0.5)), by hand for N = 3."""
    assert bm25_idf(3, 1) == pytest.approx(math.log(8 / 3))  # ln(1 + 2.5/1.5) = 0.98083
    assert bm25_idf(3, 2) == pytest.approx(math.log(1.6))  # ln(1 + 1.5/2.5) = 0.47000
    assert bm25_idf(3, 3) == pytest.approx(math.log(1 + 0.5 / 3.5))  # 0.13353, still > 0
    assert bm25_idf(0, 0) == pytest.approx(math.log(2))


def test_bm25_term_known_answers() -> None:
    """tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avg)) times idf, by hand."""
    # tf 1 in a document of average length: exactly the idf.
    assert bm25_term(1, 4, 4.0, 0.5) == 0.5
    # tf 2, dl = avg: 2 * 2.2 / (2 + 1.2) = 1.375.
    assert bm25_term(2, 4, 4.0, 1.0) == pytest.approx(1.375)
    # tf 1, dl = avg / 2: 1 - 0.75 + 0.75 * 0.5 = 0.625; 2.2 / (1 + 1.2 * 0.625) = 2.2 / 1.75.
    assert bm25_term(1, 2, 4.0, 1.0) == pytest.approx(2.2 / 1.75)
    # b = 0: length is ignored; k1 = 0: every match counts once.
    assert bm25_term(1, 400, 4.0, 1.0, Bm25Params(b=0.0)) == pytest.approx(1.0)
    assert bm25_term(7, 4, 4.0, 1.0, Bm25Params(k1=0.0)) == pytest.approx(1.0)
    assert bm25_term(0, 4, 4.0, 1.0) == 0.0


def test_bm25_scores_known_answer() -> None:
    """Three documents, hand-computed:

    postings: deploy -> {1: tf 2, 2: tf 1}; friday -> {2: tf 1}; ci -> {3: tf 3}
    lengths 4, 2, 6 (avg 4); query "deploy friday deploy nothing".

    idf(deploy, df 2) = ln 1.6;  idf(friday, df 1) = ln(8/3)
    doc 1: ln 1.6 * 2 * 2.2 / (2 + 1.2)                     = ln 1.6 * 1.375   = 0.64626
    doc 2: (ln 1.6 + ln(8/3)) * 2.2 / (1 + 1.2 * 0.625)     = 1.45083 * 1.2571 = 1.82390
    doc 3: no query term, so absent. The repeated "deploy" counts once.
    """
    postings = {"deploy": {1: 2, 2: 1}, "friday": {2: 1}, "ci": {3: 3}}
    scores = bm25_scores(
        ["deploy", "friday", "deploy", "nothing"], postings, {1: 4, 2: 2, 3: 6}, 3, 4.0
    )
    assert list(scores) == [2, 1]
    assert scores[1] == pytest.approx(math.log(1.6) * 1.375)
    assert scores[2] == pytest.approx((math.log(1.6) + math.log(8 / 3)) * 2.2 / 1.75)
    assert scores[2] == pytest.approx(1.823905, abs=1e-6)


def test_bm25_scores_ties_and_empty_queries() -> None:
    """Equal scores are ordered by document ascending; no matching term gives {}."""
    postings = {"x": {"b": 1, "c": 1, "a": 1}}
    scores = bm25_scores(["x"], postings, {"a": 3, "b": 3, "c": 3}, 5, 3.0)
    assert list(scores) == ["a", "b", "c"]
    assert bm25_scores([], postings, {"a": 3}, 5, 3.0) == {}
    assert bm25_scores(["y"], postings, {"a": 3}, 5, 3.0) == {}


# ---------------------------------------------------------------------------
# BM25: properties

params_st = st.builds(
    Bm25Params,
    k1=st.just(0.0) | st.just(1.2) | st.floats(0.01, 3.0),
    b=st.just(0.0) | st.just(0.75) | st.floats(0.01, 1.0),
)


@given(st.integers(1, 1000), st.integers(1, 10_000), st.floats(0.5, 1000.0), params_st)
def test_bm25_term_increases_with_tf(
    tf: int, doc_len: int, avg: float, params: Bm25Params
) -> None:
    """More occurrences never lower the score, and raise it unless k1 is 0."""
    low = bm25_term(tf, doc_len, avg, 1.0, params)
    high = bm25_term(tf + 1, doc_len, avg, 1.0, params)
    assert low > 0
    if params.k1 > 0:
        assert high > low
    else:
        assert high == pytest.approx(low)


@given(st.integers(1, 1000), st.integers(0, 10_000), st.floats(0.5, 1000.0), params_st)
def test_bm25_term_decreases_with_length(
    tf: int, doc_len: int, avg: float, params: Bm25Params
) -> None:
    """At the same tf, a longer document never scores higher, and scores lower when both
    k1 and b are positive."""
    short = bm25_term(tf, doc_len, avg, 1.0, params)
    long = bm25_term(tf, doc_len + 1, avg, 1.0, params)
    assert long <= short
    if params.k1 > 0 and params.b > 0:
        assert long < short


@given(st.integers(1, 10**9), st.data())
def test_bm25_idf_positive_and_decreasing(n_docs: int, data: st.DataObject) -> None:
    """idf is > 0 for every df in 0..N and strictly decreasing in df."""
    df = data.draw(st.integers(0, n_docs - 1))
    assert bm25_idf(n_docs, df) > bm25_idf(n_docs, df + 1) > 0


docs_st = st.lists(
    st.lists(st.sampled_from(["deploy", "ci", "friday", "cache", "lmdb"]), max_size=8),
    min_size=1,
    max_size=8,
)


@given(docs_st, st.lists(st.sampled_from(["deploy", "ci", "friday", "zzz"]), max_size=5))
def test_bm25_scores_match_brute_force(docs: list[list[str]], query: list[str]) -> None:
    """bm25_scores over postings built from documents equals the formula applied to each
    document directly: df counted by scanning, distinct query terms, positive scores."""
    postings: dict[str, dict[int, int]] = {}
    for doc, terms in enumerate(docs):
        for term in terms:
            postings.setdefault(term, {})[doc] = postings.get(term, {}).get(doc, 0) + 1
    lens = {doc: len(terms) for doc, terms in enumerate(docs)}
    avg = max(sum(lens.values()) / len(docs), 1.0)
    scores = bm25_scores(query, postings, lens, len(docs), avg)
    expected: dict[int, float] = {}
    for doc, terms in enumerate(docs):
        total = 0.0
        for term in dict.fromkeys(query):
            if term in terms:
                df = sum(1 for other in docs if term in other)
                idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
                tf = terms.count(term)
                total += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(terms) / avg))
        if total:
            expected[doc] = total
    assert set(scores) == set(expected)
    for doc, score in scores.items():
        assert score > 0
        assert score == pytest.approx(expected[doc])
    assert list(scores.values()) == sorted(scores.values(), reverse=True)


# ---------------------------------------------------------------------------
# BM25: validation


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: bm25_idf(-1, 0), "n_docs"),
        (lambda: bm25_idf(3, 4), "doc_freq"),
        (lambda: bm25_idf(3, -1), "doc_freq"),
        (lambda: bm25_idf(3.0, 1), "n_docs"),
        (lambda: bm25_idf(True, 0), "n_docs"),
        (lambda: bm25_term(-1, 4, 4.0, 1.0), "tf"),
        (lambda: bm25_term(1, -4, 4.0, 1.0), "doc_len"),
        (lambda: bm25_term(1, 4, 0.0, 1.0), "avg_len"),
        (lambda: bm25_term(1, 4, math.nan, 1.0), "avg_len"),
        (lambda: bm25_term(1, 4, 4.0, -1.0), "idf"),
        (lambda: bm25_term(1, 4, 4.0, math.inf), "idf"),
        (lambda: bm25_term(1, 4, 4.0, 1.0, (1.2, 0.75)), "params"),
        (lambda: Bm25Params(k1=-0.1), "k1"),
        (lambda: Bm25Params(k1=math.inf), "k1"),
        (lambda: Bm25Params(b=1.5), "b"),
        (lambda: Bm25Params(b="0.5"), "b"),
        (lambda: bm25_scores("deploy", {}, {}, 1, 1.0), "query_terms"),
        (lambda: bm25_scores([1], {}, {}, 1, 1.0), "query_terms"),
        (lambda: bm25_scores(["x"], {"x": {"a": 1, "b": 1}}, {"a": 1, "b": 1}, 1, 1.0),
         "postings"),
        (lambda: bm25_scores(["x"], {"x": {"a": 0}}, {"a": 1}, 1, 1.0), "postings"),
        (lambda: bm25_scores(["x"], {"x": {"a": 1}}, {}, 1, 1.0), "doc_lens"),
        (lambda: bm25_scores(["x"], {"x": {"a": 1}}, {"a": -1}, 1, 1.0), "doc_lens"),
        (lambda: bm25_scores(["x"], {"x": {"a": 1}}, {"a": 1}, 1, -1.0), "avg_len"),
        (lambda: bm25_scores(["x"], {}, {}, -1, 1.0), "n_docs"),
    ],
)
def test_bm25_validation_names_the_field(call: object, field: str) -> None:
    """Bad arguments raise ValidationError naming the offending field."""
    with pytest.raises(ValidationError) as caught:
        call()  # type: ignore[operator]
    assert caught.value.field == field


def test_default_params() -> None:
    """The defaults are k1 = 1.2 and b = 0.75, and the record is frozen."""
    assert DEFAULT_BM25 == Bm25Params() == Bm25Params(k1=1.2, b=0.75)
    with pytest.raises(AttributeError):
        DEFAULT_BM25.k1 = 2.0  # type: ignore[misc]


# ---------------------------------------------------------------------------
# Jaccard

token_sets = st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "g"]), max_size=10)


@given(token_sets, token_sets)
def test_jaccard_properties(a: list[str], b: list[str]) -> None:
    """Jaccard is symmetric, in 0..1, and the ppm form is the exact floor of the ratio
    times one million (and within 1 of the float's)."""
    sa, sb = set(a), set(b)
    assert jaccard(a, b) == jaccard(b, a)
    assert jaccard_ppm(a, b) == jaccard_ppm(b, a)
    assert 0.0 <= jaccard(a, b) <= 1.0
    union = len(sa | sb)
    exact = math.floor(Fraction(len(sa & sb), union) * PPM) if union else 0
    assert jaccard_ppm(a, b) == exact
    assert abs(jaccard_ppm(a, b) - math.floor(jaccard(a, b) * PPM)) <= 1


@given(token_sets.filter(bool), token_sets)
def test_jaccard_equal_and_disjoint_sets(a: list[str], b: list[str]) -> None:
    """Equal non-empty sets score 1 (1,000,000 ppm) whatever the order and repeats;
    disjoint sets score 0."""
    assert jaccard(a, list(reversed(a)) + a) == 1.0
    assert jaccard_ppm(a, sorted(a)) == PPM
    disjoint = [t.upper() for t in b]
    assert jaccard(a, disjoint) == 0.0
    assert jaccard_ppm(a, disjoint) == 0


def test_jaccard_known_answers_and_validation() -> None:
    """Two of three shared: 2/3; both empty: 0; a bare string is rejected, not split into
    characters."""
    assert jaccard(["deploy", "friday", "ci"], ["deploy", "friday"]) == pytest.approx(2 / 3)
    assert jaccard_ppm(["deploy", "friday", "ci"], ["deploy", "friday"]) == 666_666
    assert jaccard([], []) == 0.0
    assert jaccard_ppm((), ()) == 0
    with pytest.raises(ValidationError) as caught:
        jaccard("abc", ["a"])
    assert caught.value.field == "a"
    with pytest.raises(ValidationError) as caught:
        jaccard_ppm(["a"], "abc")
    assert caught.value.field == "b"


def test_shingles() -> None:
    """Shingles are the set of default tokens, so inflection, case and stopwords do not
    keep near-duplicates apart."""
    first = shingles("The deploy runs on Fridays at 5pm")
    second = shingles("deploys run on friday at 5pm")
    assert first == frozenset(tokenize("The deploy runs on Fridays at 5pm"))
    assert first == second == frozenset({"deploy", "run", "friday", "5pm"})
    assert jaccard_ppm(first, shingles("deploy on monday")) == 200_000  # 1 of 5


# ---------------------------------------------------------------------------
# Determinism across processes

DETERMINISM_SCRIPT = textwrap.dedent(
    """
    from cortexgraph.core.text import (
        bm25_scores, jaccard_ppm, shingles, term_counts, tokenize,
    )
    docs = [
        "Caroline's friends went hiking; they painted sunsets in the mountains.",
        "Melanie paints sunrises and runs a pottery class on Fridays.",
        "東京タワー and İstanbul, 8 May 2023: don't forget the deploy logs!",
    ]
    postings = {}
    for doc, source in enumerate(docs):
        for term, tf in term_counts(source).items():
            postings.setdefault(term, {})[doc] = tf
    lens = {doc: len(tokenize(source)) for doc, source in enumerate(docs)}
    out = [tokenize(d) for d in docs]
    out.append(list(postings.items()))
    out.append(list(bm25_scores(tokenize("paint sunsets on friday"), postings, lens, 3, 6.0)
                    .items()))
    out.append([jaccard_ppm(shingles(a), shingles(b)) for a in docs for b in docs])
    out.append(sorted(shingles(docs[0])))
    print(repr(out))
    """
)


@pytest.mark.slow
def test_results_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """Tokens, postings, BM25 scores and Jaccard values are identical in two
    subprocesses with different PYTHONHASHSEEDs and in this process."""
    script = tmp_path / "text_determinism.py"
    script.write_text(DETERMINISM_SCRIPT, encoding="utf-8")
    outputs = []
    for seed in ("0", "4242"):
        done = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    lines: list[str] = []
    namespace: dict[str, object] = {"print": lines.append}
    exec(compile(DETERMINISM_SCRIPT, str(script), "exec"), namespace)
    assert outputs[0].startswith(b"[['carolin'")
    assert outputs[0] == outputs[1] == (lines[0] + "\n").encode()
