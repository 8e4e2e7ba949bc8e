"""Text for keyword recall: the tokenizer, BM25 scoring and Jaccard similarity.

Everything here is pure: no I/O, clock, randomness or environment. The same text gives
the same tokens in any process, whatever ``PYTHONHASHSEED`` is (no output is built by
iterating a set). The only state is two bounded memos (word -> stem, and word -> its
tokens in each mode); they save work and never change a result.

The tokenizer (:func:`tokenize`)
    1. Normalise: NFKC, casefold, NFKC again (casefolding can leave text that NFKC
       would change), then ``"i"`` + U+0307 COMBINING DOT ABOVE -> ``"i"``, so Turkish
       ``"İstanbul"`` matches ``"istanbul"``. Casefolding is the default, not the
       Turkic, mapping: ``"I"`` -> ``"i"``, and dotless i (U+0131) stays. No accent
       folding: ``"café"`` and ``"cafe"`` are different words.
    2. Split: a word is a run of letters, digits and combining marks of any script
       (marks keep Devanagari, Thai or Hebrew words whole). Everything else separates
       words, including ``_``, ``-``, ``.``, ``/`` and ``:`` (``"user_id"`` ->
       ``user id``; ``"3.14"`` -> ``3 14``). Han ideographs, kana, Thai, Lao, Khmer and
       Myanmar are written without spaces, so each of their characters (with its
       marks) is a token of its own: ``"東京タワー"`` -> ``東 京 タ ワ ー``.
    3. Apostrophes (U+0027, U+2019 or U+02BC) inside a word are English clitics or part of
       a name. The clitics ``'s 'm 're 've 'll 'd`` are dropped (``"caroline's"`` ->
       ``caroline``, ``"we'd"`` -> ``we``); ``n't`` becomes a separate ``not``
       (``"don't"`` -> ``do not``, with ``can't`` -> ``can not``, ``won't`` ->
       ``will not``, ``shan't`` -> ``shall not``, ``ain't`` -> ``is not``); any other
       apostrophe joins its parts (``"o'brien"`` -> ``obrien``). Apostrophes at the
       edge of a word are quotation marks and are ignored.
    4. Drop stopwords (``stopwords=True``): the fixed set :data:`STOPWORDS`.
    5. Stem (``stem=True``): :func:`stem_word`, a light English suffix stemmer.

    Tokens are never empty, contain no separator, and ``tokenize`` is idempotent on its
    own output: ``tokenize(" ".join(tokenize(t))) == tokenize(t)``.

BM25 (:func:`bm25_idf`, :func:`bm25_term`, :func:`bm25_scores`)
    The score of a document for a query is the sum over the query's distinct terms of::

        idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avg_len))
        idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))

    with Lucene's always-positive idf and ``k1 = 1.2``, ``b = 0.75``
    (:class:`Bm25Params`). A term met once in a document of average length scores
    exactly its idf. :func:`bm25_scores` is the small reference implementation over
    plain dicts that the store's own BM25 is tested against.

Jaccard (:func:`jaccard`, :func:`jaccard_ppm`, :func:`shingles`)
    ``len(A & B) / len(A | B)`` over token sets, 0 when both are empty. The library
    journals only integers, so :func:`jaccard_ppm` computes
    ``len(A & B) * 1_000_000 // len(A | B)`` exactly; :func:`shingles` is the token set
    that near-duplicate detection compares.

Determinism across machines
    The tokenizer depends on the Unicode database of the running Python
    (``unicodedata.unidata_version``) through NFKC, casefolding and what counts as a
    letter or a mark. Unicode's stability policies freeze the normalisation and case
    folding of assigned characters, so a newer Python can differ only on characters
    assigned after the older one's database, or (rarely) on a character whose general
    category changed. BM25 calls ``log`` from the C maths
    library, whose last bit may differ between platforms; rankings journaled by the
    library use integers, never these floats.

See ``docs/recall.md`` for the rules with examples.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Hashable, Iterable, Mapping
from typing import Final, TypeVar

import attrs

from ..errors import ValidationError

__all__ = [
    "DEFAULT_BM25",
    "PPM",
    "STOPWORDS",
    "Bm25Params",
    "bm25_idf",
    "bm25_scores",
    "bm25_term",
    "jaccard",
    "jaccard_ppm",
    "shingles",
    "stem_word",
    "term_counts",
    "tokenize",
]

PPM: Final = 1_000_000
"""One, in parts per million: the scale of :func:`jaccard_ppm`."""

# ---------------------------------------------------------------------------
# Stopwords

STOPWORDS: Final[frozenset[str]] = frozenset(
    {
        # Articles, determiners and quantifiers.
        "a", "an", "the", "this", "that", "these", "those", "each", "both", "all", "any", "some",
        "such", "no", "nor", "not", "only", "own", "same", "other", "few", "more", "most", "very",
        "too", "so", "than", "just",
        # Personal, possessive and reflexive pronouns ("us" is kept: it is also "US").
        "i", "me", "my", "mine", "myself", "we", "our", "ours", "ourselves", "you", "your",
        "yours", "yourself", "yourselves", "he", "him", "his", "himself", "she", "her", "hers",
        "herself", "it", "its", "itself", "they", "them", "their", "theirs", "themselves",
        # Question words: they name the kind of answer wanted, and the passage that holds
        # the answer rarely contains them ("when did we deploy?" / "we deployed on May 8").
        "what", "which", "who", "whom", "whose", "when", "where", "why", "how",
        # Auxiliaries and modals ("may" is kept: it is a month).
        "am", "is", "are", "was", "were", "be", "been", "being", "have", "has", "had", "having",
        "do", "does", "did", "doing", "will", "would", "shall", "should", "can", "could", "might",
        "must",
        # Prepositions, conjunctions and adverbs of place, time and degree.
        "of", "at", "by", "for", "with", "about", "against", "between", "into", "through",
        "during", "before", "after", "above", "below", "to", "from", "up", "down", "in", "out",
        "on", "off", "over", "under", "again", "further", "then", "once", "here", "there", "now",
        "and", "but", "if", "or", "because", "as", "until", "while", "also",
        # Contractions as typed without the apostrophe in chat.
        "arent", "cant", "couldnt", "didnt", "doesnt", "dont", "hadnt", "hasnt", "havent", "im",
        "isnt", "ive", "shouldnt", "thats", "theyre", "theyve", "wasnt", "werent", "whats",
        "wouldnt", "youre", "youve", "youll",
    }
)
"""English stopwords: 155 function words dropped by ``tokenize(stopwords=True)``.

The base is the classic NLTK English list without the fragments it needs for
apostrophe splitting (``don``, ``t``, ``ll``, ``ve``, ...; this tokenizer treats clitics
itself) and without ``won`` (the past of *win*, not only ``won't``) and ``ma``; plus
``mine`` and ``also``, the modals ``would``, ``could``, ``might``, ``must``, ``shall``,
and the apostrophe-less contractions of chat (``dont``, ``im``, ``thats``, ...). Kept on
purpose: ``may`` and ``march`` (months), ``us`` (also the country), ``id``, ``ill``,
``well``, and every noun, verb and adjective: BM25's idf already weighs down
common content words, and dropping them would make some queries unanswerable.
"""

# ---------------------------------------------------------------------------
# Splitting

_VOWELS = "aeiouy"

# Scripts written without spaces between words: every character is its own token.
_NOSPACE_RANGES = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3005-\u3007\u3021-\u3029\u3038-\u303c"  # ideographic iteration marks and numbers
    "\u3040-\u30ff\u31f0-\u31ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs (BMP)
    "\U00020000-\U0003ffff"  # CJK ideographs (supplementary ideographic planes)
)

# The blocks of the BMP that hold combining marks (general category M*). Marks of
# historic scripts outside the BMP are not included: they split words.
_MARK_BLOCKS = (
    (0x0300, 0x1DFF),
    (0x20D0, 0x20FF),
    (0x2CEF, 0x2DFF),
    (0x302A, 0x309A),
    (0xA66F, 0xABFF),
    (0xFB1E, 0xFE2F),
)


def _mark_class() -> str:
    """The combining marks of :data:`_MARK_BLOCKS` as regex class ranges."""
    ranges: list[str] = []
    for low, high in _MARK_BLOCKS:
        start: int | None = None
        for code in range(low, high + 2):
            is_mark = code <= high and unicodedata.category(chr(code)).startswith("M")
            if is_mark and start is None:
                start = code
            elif not is_mark and start is not None:
                ranges.append(f"\\U{start:08x}-\\U{code - 1:08x}")
                start = None
    return "".join(ranges)


@functools.cache
def _word_pattern() -> re.Pattern[str]:
    """One token: a character of a script without spaces with its marks, or a run of letters
    and digits (other than those), combining marks and apostrophes. "_" is not a letter.

    Built on first use, not at import: scanning the mark blocks and compiling the Unicode
    classes costs milliseconds that ASCII-only text (the fast path) never needs.
    """
    marks = _mark_class()
    return re.compile(rf"[{_NOSPACE_RANGES}][{marks}]*|(?:[^\W_{_NOSPACE_RANGES}]+|[{marks}']+)+")


# ASCII text takes a fast path: one bytes.translate lowercases it and turns every byte
# that is not a letter, digit or apostrophe into a space, then str.split() cuts words.
_ASCII_TABLE = bytes(
    ord(chr(code).lower()) if chr(code).isalnum() or chr(code) == "'" else ord(" ")
    for code in range(128)
) + bytes(range(128, 256))

# Clitics dropped from the end of a word, and the irregular bases before "n't".
_CLITICS: Final = frozenset({"s", "m", "re", "ve", "ll", "d"})
_NOT_BASES: Final = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}


def _split_clitics(word: str) -> list[str]:
    """The words an apostrophe-bearing word stands for (rule 3 of the module docstring).

    Empty parts (apostrophes at an edge or doubled) are ignored.
    """
    parts = [part for part in word.split("'") if part]
    while len(parts) > 1 and parts[-1] in _CLITICS:
        parts.pop()
    if len(parts) > 1 and parts[-1] == "t" and parts[-2].endswith("n") and len(parts[-2]) > 1:
        base = parts[-2][:-1]
        parts[-2] = _NOT_BASES.get(base, base) if len(parts) == 2 else base
        return ["".join(parts[:-1]), "not"]
    return ["".join(parts)] if parts else []


def _words(text: str) -> list[str]:
    """Normalised words, apostrophes included, before clitics, stopwords and stemming."""
    if not text.isascii():
        text = text.replace("\u2019", "'")  # chat text is often ASCII but for this
    if text.isascii():  # ASCII is NFKC-stable, and lowercasing is casefolding on ASCII
        return text.encode("ascii").translate(_ASCII_TABLE).decode("ascii").split()
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    folded = folded.replace("i\u0307", "i").replace("\u2019", "'").replace("\u02bc", "'")
    return _word_pattern().findall(folded)


# ---------------------------------------------------------------------------
# Stemming

_STEM_EXCEPTIONS: Final[Mapping[str, str]] = {
    # Words the suffix rules would damage, or irregular families they would miss.
    "always": "always",
    "news": "news",
    "family": "famili",
    "goes": "go",
    "focus": "focus",
    "focused": "focus",
    "focuses": "focus",
    "focusing": "focus",
    "bias": "bias",
    "biased": "bias",
    "buses": "bus",
    "bonuses": "bonus",
    "campuses": "campus",
    "statuses": "status",
    "viruses": "virus",
    "indeed": "indeed",
}
_SHORT = re.compile(r"[^aeiouy]*[aeiouy][^aeiouwxy]")


def _has_vowel(stem: str) -> bool:
    return any(letter in _VOWELS for letter in stem)


def _ie_y(stem: str) -> str:
    """The base of a word in -ies or -ied: ties -> tie, tries -> try, studies -> studi."""
    if len(stem) == 1:
        return stem + "ie"
    if len(stem) == 2:
        return stem + "y"
    return stem + "i"


def _restore(stem: str) -> str:
    """The base of a word after -ed or -ing is cut off."""
    last = stem[-1]
    if len(stem) >= 4 and last == stem[-2] and last not in "aeiouylsz":
        return stem[:-1]  # stopped -> stop, running -> run (but falling -> fall)
    if last == "s" and stem[-2] != "s":
        return stem + "e"  # raised -> raise, housing -> house (but missed -> miss)
    if _SHORT.fullmatch(stem):
        return stem + "e"  # hoping -> hope, making -> make, used -> use
    return stem


def _stem_once(word: str) -> str:
    """One pass of the suffix rules; :func:`stem_word` repeats it to a fixed point."""
    w = word
    # 1. Plurals and the third person: -sses, -ies, -xes/-ches/-shes/-zzes, -s.
    if w.endswith("s"):
        if w.endswith("sses"):
            w = w[:-2]
        elif w.endswith("ies"):
            w = _ie_y(w[:-3])
        elif w.endswith(("xes", "ches", "shes", "zzes")):
            w = w[:-2]
        elif w[-2] not in "sui":
            w = w[:-1]
    # 2. Past tense and participles: -eed, -ied, -ying, -ed, -ing.
    if w.endswith("eed"):
        if _has_vowel(w[:-3]):
            w = w[:-1]  # agreed -> agree (but need, speed stay)
    elif w.endswith("ied"):
        w = _ie_y(w[:-3])
    elif w.endswith("ying") and len(w) == 5:
        w = w[0] + "ie"  # dying -> die, lying -> lie
    elif w.endswith("ed"):
        if len(w) >= 4 and _has_vowel(w[:-2]):
            w = _restore(w[:-2])
    elif w.endswith("ing") and len(w) >= 5 and _has_vowel(w[:-3]):
        w = _restore(w[:-3])
    # 3. Adverbs: -fully, -ily, -bly, -ly (not -ply, -fly, or after a vowel).
    if w.endswith("ly") and len(w) >= 6:
        if w.endswith(("fully", "ily")):
            w = w[:-2] if w.endswith("fully") else w[:-3] + "i"
        elif w.endswith("bly"):
            w = w[:-1] + "e"  # probably -> probable
        elif not w.endswith(("ply", "fly")) and w[-3] not in "aiou":
            w = w[:-2]
    # 4. A final y after a consonant: happy -> happi, so happy/happily/happier agree.
    if len(w) >= 4 and w[-1] == "y" and w[-2] not in _VOWELS:
        w = w[:-1] + "i"
    # 5. A final e (not -ee, -se, or after a short stem): create -> creat, like created.
    if w.endswith("e") and len(w) >= 4 and w[-2] not in "es" and not _SHORT.fullmatch(w[:-1]):
        w = w[:-1]
    return w


_DECADE = re.compile(r"[0-9]+s")


@functools.lru_cache(maxsize=1 << 16)
def stem_word(word: str) -> str:
    """The stem of one lowercase word: a light, conservative English suffix stemmer.

    Only words of four or more ASCII letters are stemmed; anything else (numbers, mixed
    letters and digits, other scripts) is returned unchanged, except that a decade
    loses its ``s`` (``"1990s"`` -> ``"1990"``). The rules, each guarded so that short
    words survive (``bus``, ``this``, ``bed``, ``sing``, ``only``):

    ====  ======================================  =======================================
    1     plurals: -sses -ies -xes -ches -s       classes -> class, boxes -> box
    2     -eed -ied -ed -ing, then undouble or    stopped -> stop, hoping -> hope
          restore the e of a short stem
    3     adverbs: -fully -ily -bly -ly           carefully -> careful, quickly -> quick
    4     final y after a consonant -> i          studies, studied, study -> studi
    5     final e, unless -ee, -se, short stem    created, creates, create -> creat
    ====  ======================================  =======================================

    The rules repeat until nothing changes, so ``stem_word`` is idempotent. A result
    that would be a stopword (``others`` -> ``other``) is not used: the word is returned
    unchanged. A handful of exceptions (``news``, ``always``, ``focus``...) are listed
    in the source. The result is never empty.

    >>> [stem_word(w) for w in ["meetings", "hoping", "hopping", "studies", "quickly"]]
    ['meet', 'hope', 'hop', 'studi', 'quick']
    """
    if len(word) < 4 or not word.isascii():
        return word
    if not word.isalpha():
        return word[:-1] if _DECADE.fullmatch(word) else word
    stem = _STEM_EXCEPTIONS.get(word)
    if stem is not None:
        return stem
    stem = word
    for _ in range(8):  # every rule shortens the word or ends a chain; 8 is ample
        if len(stem) < 4:
            break
        nxt = _stem_once(stem)
        if nxt == stem:
            break
        stem = nxt
    return word if stem in STOPWORDS else stem


# ---------------------------------------------------------------------------
# Tokenizer


# Memo of analysed words, one per (stem, stopwords) mode: word -> its tokens. Cleared
# when full; it only ever saves work, never changes a result.
_MEMO_LIMIT = 1 << 16
_MEMOS: Final[dict[tuple[bool, bool], dict[str, tuple[str, ...]]]] = {
    (stem, stop): {} for stem in (False, True) for stop in (False, True)
}


def _analyse(word: str, stem: bool, stopwords: bool) -> tuple[str, ...]:
    """The tokens of one normalised word: clitics, then stopwords, then stemming."""
    parts = _split_clitics(word) if "'" in word else [word]
    return tuple(
        stem_word(part) if stem else part
        for part in parts
        if not (stopwords and part in STOPWORDS)
    )


def tokenize(text: object, *, stem: bool = True, stopwords: bool = True) -> list[str]:
    """The keyword-recall tokens of ``text``, in order, with repetitions.

    See the module docstring (or ``docs/recall.md``) for the rules.

    >>> tokenize("Melanie's 3 dogs don't like the new café!")
    ['melani', '3', 'dog', 'like', 'new', 'café']
    >>> tokenize("Melanie's 3 dogs don't like the new café!", stem=False, stopwords=False)
    ['melanie', '3', 'dogs', 'do', 'not', 'like', 'the', 'new', 'café']

    Args:
        text: any string.
        stem: apply :func:`stem_word` to each token.
        stopwords: drop the words of :data:`STOPWORDS`.

    Raises:
        ValidationError: ``text`` is not a string (field ``text``).
    """
    tokens: list[str] = []
    for found in _word_tokens(text, stem, stopwords):
        tokens.extend(found)
    return tokens


def _word_tokens(text: object, stem: object, stopwords: object) -> list[tuple[str, ...]]:
    """The tokens of each normalised word of ``text``, word by word, from the memo of the
    options (only a cache: emptied when it grows past :data:`_MEMO_LIMIT`)."""
    if not isinstance(text, str):
        raise ValidationError(f"must be a string, not {type(text).__name__}", field="text")
    stem, stopwords = bool(stem), bool(stopwords)
    memo = _MEMOS[(stem, stopwords)]
    out: list[tuple[str, ...]] = []
    for word in _words(text):
        found = memo.get(word)
        if found is None:
            if len(memo) > _MEMO_LIMIT:
                memo.clear()
            found = memo[word] = _analyse(word, stem, stopwords)
        out.append(found)
    return out


def term_counts(text: object, *, stem: bool = True, stopwords: bool = True) -> dict[str, int]:
    """Term frequencies of ``text``: ``{token: count}`` in order of first occurrence.

    >>> term_counts("The deploy failed; deploys fail on Fridays.")
    {'deploy': 2, 'fail': 2, 'friday': 1}

    Raises:
        ValidationError: ``text`` is not a string (field ``text``).
    """
    counts: dict[str, int] = {}
    for found in _word_tokens(text, stem, stopwords):
        for token in found:
            counts[token] = counts.get(token, 0) + 1
    return counts


# ---------------------------------------------------------------------------
# BM25


def _finite(value: object, field: str, *, lo: float, hi: float | None = None) -> float:
    """A real number (int or float, not bool) in ``lo..hi`` as a float."""
    if type(value) is int:
        value = float(value)
    if type(value) is not float:
        raise ValidationError(f"must be a number, not {type(value).__name__}", field=field)
    if not math.isfinite(value) or value < lo or (hi is not None and value > hi):
        bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise ValidationError(f"must be a finite number {bound}, not {value}", field=field)
    return value


def _count(value: object, field: str, *, lo: int = 0) -> int:
    if type(value) is not int:
        raise ValidationError(f"must be an integer, not {type(value).__name__}", field=field)
    if value < lo:
        raise ValidationError(f"must be at least {lo}, not {value}", field=field)
    return value


@attrs.frozen
class Bm25Params:
    """The two BM25 parameters.

    Attributes:
        k1: term-frequency saturation, >= 0 (0 ignores tf: every match counts once).
        b: length normalisation, 0..1 (0 ignores document length).

    Raises:
        ValidationError: a parameter out of range (field ``k1`` or ``b``).
    """

    # Plain defaults and a check after ``__init__`` rather than ``attrs.field(validator=)``:
    # compiled by mypyc (see ``cortexgraph.compiled``), a field's default and every read of
    # it are checked against its annotation, so the values are read untyped, checked, and
    # stored as floats (which also makes ``k1=1`` equal ``k1=1.0``).
    k1: float = 1.2
    b: float = 0.75

    def __attrs_post_init__(self) -> None:
        for name, hi in (("k1", None), ("b", 1.0)):
            object.__setattr__(self, name, _finite(getattr(self, name), name, lo=0.0, hi=hi))


DEFAULT_BM25: Final = Bm25Params()
"""``Bm25Params(k1=1.2, b=0.75)``, the usual defaults (Lucene's, Elasticsearch's)."""


def bm25_idf(n_docs: object, doc_freq: object) -> float:
    """Lucene's inverse document frequency: ``ln(1 + (N - df + 0.5) / (df + 0.5))``.

    Always > 0, and strictly decreasing in ``doc_freq``.

    >>> round(bm25_idf(3, 1), 6)  # ln(1 + 2.5 / 1.5) = ln(8/3)
    0.980829

    Raises:
        ValidationError: ``n_docs`` below 0, or ``doc_freq`` outside 0..n_docs.
    """
    n = _count(n_docs, "n_docs")
    df = _count(doc_freq, "doc_freq")
    if df > n:
        raise ValidationError(f"must not exceed n_docs ({n}), not {df}", field="doc_freq")
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def bm25_term(
    tf: object, doc_len: object, avg_len: object, idf: object, params: object = DEFAULT_BM25
) -> float:
    """One term's contribution to a document's score.

    ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avg_len))``; 0 when
    ``tf`` is 0, exactly ``idf`` when ``tf`` is 1 and ``doc_len == avg_len``.

    >>> bm25_term(1, 10, 10.0, 2.0)
    2.0

    Raises:
        ValidationError: ``tf`` or ``doc_len`` not an integer >= 0, ``avg_len`` not a
            finite number > 0, ``idf`` not a finite number >= 0, ``params`` not a
            :class:`Bm25Params`.
    """
    tf = _count(tf, "tf")
    doc_len = _count(doc_len, "doc_len")
    avg = _finite(avg_len, "avg_len", lo=0.0)
    if avg == 0.0:
        raise ValidationError("must be greater than 0", field="avg_len")
    weight = _finite(idf, "idf", lo=0.0)
    if not isinstance(params, Bm25Params):
        raise ValidationError(
            f"must be a Bm25Params, not {type(params).__name__}", field="params"
        )
    if tf == 0:
        return 0.0
    k1, b = params.k1, params.b
    return weight * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * doc_len / avg))


DocT = TypeVar("DocT", bound=Hashable)


def bm25_scores(
    query_terms: Iterable[object],
    postings: Mapping[str, Mapping[DocT, int]],
    doc_lens: Mapping[DocT, int],
    n_docs: object,
    avg_len: object,
    params: object = DEFAULT_BM25,
) -> dict[DocT, float]:
    """BM25 scores of every document matching at least one query term (a reference).

    The query's distinct terms count once each, in order of first occurrence; a term
    absent from ``postings`` matches nothing. ``df`` is ``len(postings[term])``. Each
    document's score is summed in query-term order, so the floats are reproducible.

    >>> postings = {"deploy": {"a": 2, "b": 1}, "friday": {"b": 1}}
    >>> scores = bm25_scores(["deploy", "friday"], postings, {"a": 4, "b": 4}, 3, 4.0)
    >>> {doc: round(score, 4) for doc, score in scores.items()}
    {'b': 1.4508, 'a': 0.6463}

    Args:
        query_terms: tokens of the query (see :func:`tokenize`).
        postings: ``{term: {doc: tf}}`` with every ``tf`` >= 1.
        doc_lens: ``{doc: length in tokens}`` for at least every document in ``postings``.
        n_docs: the number of documents in the collection (>= every ``df``).
        avg_len: the mean document length, > 0.
        params: :class:`Bm25Params`.

    Returns:
        ``{doc: score}`` ordered by score descending, ties by document ascending
        (documents must be mutually comparable).

    Raises:
        ValidationError: naming ``query_terms``, ``postings``, ``doc_lens``, ``n_docs``,
            ``avg_len`` or ``params``.
    """
    if isinstance(query_terms, str):
        raise ValidationError("must be an iterable of terms, not a string", field="query_terms")
    n = _count(n_docs, "n_docs")
    terms: dict[str, None] = {}
    for term in query_terms:
        if not isinstance(term, str):
            raise ValidationError(
                f"must hold strings, not {type(term).__name__}", field="query_terms"
            )
        terms[term] = None
    scores: dict[DocT, float] = {}
    for term in terms:
        docs = postings.get(term)
        if not docs:
            continue
        if len(docs) > n:
            raise ValidationError(
                f"{term!r} is in {len(docs)} documents, more than n_docs ({n})", field="postings"
            )
        idf = bm25_idf(n, len(docs))
        for doc, tf in docs.items():
            if type(tf) is not int or tf < 1:
                raise ValidationError(f"{term!r} has tf {tf!r} (must be >= 1)", field="postings")
            if doc not in doc_lens:
                raise ValidationError(f"has no length for document {doc!r}", field="doc_lens")
            try:
                term_score = bm25_term(tf, doc_lens[doc], avg_len, idf, params)
            except ValidationError as error:
                if error.field == "doc_len":
                    raise ValidationError(str(error), field="doc_lens") from error
                raise
            scores[doc] = scores.get(doc, 0.0) + term_score
    ranked = sorted(scores.items(), key=lambda item: item[0])  # type: ignore[arg-type,return-value]
    ranked.sort(key=lambda item: -item[1])
    return dict(ranked)


# ---------------------------------------------------------------------------
# Jaccard


def _token_set(tokens: Iterable[str], field: str) -> set[str]:
    if isinstance(tokens, str):
        raise ValidationError("must be an iterable of tokens, not a string", field=field)
    return set(tokens)


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """``len(A & B) / len(A | B)`` over the sets of tokens; 0.0 when both are empty.

    >>> jaccard(["deploy", "friday", "ci"], ["deploy", "friday"])
    0.6666666666666666

    Raises:
        ValidationError: ``a`` or ``b`` is a string rather than an iterable of tokens.
    """
    sa, sb = _token_set(a, "a"), _token_set(b, "b")
    union = len(sa | sb)
    return len(sa & sb) / union if union else 0.0


def jaccard_ppm(a: Iterable[str], b: Iterable[str]) -> int:
    """Jaccard similarity in ppm, exactly: ``len(A & B) * 1_000_000 // len(A | B)``.

    Integers only, so the journaled number is the same on every machine; 0 when both
    sets are empty.

    >>> jaccard_ppm(["deploy", "friday", "ci"], ["deploy", "friday"])
    666666

    Raises:
        ValidationError: ``a`` or ``b`` is a string rather than an iterable of tokens.
    """
    sa, sb = _token_set(a, "a"), _token_set(b, "b")
    union = len(sa | sb)
    return len(sa & sb) * PPM // union if union else 0


def shingles(text: str) -> frozenset[str]:
    """The token set compared for near-duplicates: ``frozenset(tokenize(text))``.

    Stemmed, stopwords removed, so "The deploy runs on Fridays" and "deploys run on
    friday" are the same set. A frozenset has no stable iteration order across
    processes: compare it (:func:`jaccard_ppm`) or sort it, never iterate it into output.

    >>> sorted(shingles("The deploy runs on Fridays")) == sorted(shingles("deploys run on friday"))
    True

    Raises:
        ValidationError: ``text`` is not a string (field ``text``).
    """
    return frozenset(tokenize(text))
