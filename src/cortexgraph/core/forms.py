"""Deterministic forms of a memory (short, medium, full) and the token estimator.

A *form* is the text a record is shown as, to a person or in a prompt. The same record
gives the same string on any machine: nothing here reads the locale, the time zone, the
hash seed or the clock. Times are formatted from integer milliseconds with integer
arithmetic, floats with fixed formats, collections in their stored (sorted) order.

``short`` -- one line, at most :data:`SHORT_MAX` characters::

    [type:state qualifiers] title #tag #tag +N

``medium`` -- a few lines: the header and title, the text (one line, at most
:data:`MEDIUM_TEXT_MAX` characters), the tags, then ``confidence · priority`` and the
type's key fields.

``full`` -- every field of the memory, one ``name: value`` line each, and the record's
URI, version, status, seq and times; the text last, indented, and an ArtifactRef's raw
``content`` in a fenced code block. Raw content appears in the full form only.

``docs/forms.md`` shows each type in each form. The token estimator,
:func:`estimate_tokens`, is documented there and in its docstring.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Protocol

import attrs

from ..errors import ValidationError
from .salience import FACTOR_NAMES
from .state import Record
from .taxonomy import ArtifactRef, Attest, Event, Goal, LearnWeights, Memory, Source

__all__ = [
    "FORMS",
    "MEDIUM_TEXT_MAX",
    "SHORT_MAX",
    "TokenEstimator",
    "civil_date",
    "estimate_tokens",
    "format_ms",
    "render",
    "render_cost",
    "render_full",
    "render_medium",
    "render_short",
]

#: The form names, from cheapest to most complete.
FORMS = ("short", "medium", "full")
#: The short form is one line of at most this many characters (code points).
SHORT_MAX = 200
#: The medium form shows at most this many characters of the text (and of the summary).
MEDIUM_TEXT_MAX = 500
ELLIPSIS = "…"

_QUALIFIER_MAX = 40  # each header qualifier (status, kind, channel, path) and the speaker
_SHORT_TAG_MAX = 32  # each tag in the short form
_SHORT_TAGS_MAX = 60  # all tags shown in the short form; the rest are counted as +N
_MEDIUM_CITED_MAX = 5  # cited URIs an Attest shows in the medium form
_BACKOFF_MAX = 16  # how far truncation backs off to keep a base with its marks
_NONE = "(none)"
_EMPTY = "(empty)"

# ---------------------------------------------------------------------------
# Text helpers


def _continues(char: str) -> bool:
    """Whether ``char`` belongs to the character before it (a mark, joiner or selector)."""
    return (
        unicodedata.category(char)[0] == "M"
        or char == "\u200d"
        or "\ufe00" <= char <= "\ufe0f"
        or "\U000e0100" <= char <= "\U000e01ef"
    )


def _clip(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else a prefix ending in ``…``.

    The cut is on a code point boundary (a Python ``str`` holds code points, so a non-BMP
    character is never split). It also backs off, at most ``_BACKOFF_MAX`` characters, so
    that a base character is not kept without the combining marks, joiners or variation
    selectors that follow it. Only ``text[:limit]`` is examined.
    """
    if len(text) <= limit:
        return text
    cut = max(limit - 1, 0)
    back = cut
    while back > 0 and cut - back < _BACKOFF_MAX and _continues(text[back]):
        back -= 1
    if not _continues(text[back]):
        cut = back
    if cut > 0 and text[cut - 1] == "\u200d":
        cut -= 1
    return text[:cut].rstrip() + ELLIPSIS


def _flat(text: str, limit: int) -> str:
    """``text`` on one line (every whitespace run, line breaks included, becomes one
    space; leading and trailing whitespace dropped), clipped to ``limit`` characters.

    Works on a growing prefix, so a 1 MiB text costs what its first few hundred
    characters cost: flattening a prefix gives a prefix of the flattened whole.
    """
    size = 2 * limit + 64
    while True:
        part = text[:size]
        flat = " ".join(part.split())
        if size >= len(text) or len(flat) > limit:
            return _clip(flat, limit)
        size *= 4


def civil_date(days: int) -> tuple[int, int, int]:
    """``(year, month, day)`` of the UTC date ``days`` days after 1970-01-01, in the
    proleptic Gregorian calendar (H. Hinnant's civil_from_days: integer arithmetic only).

    >>> civil_date(0), civil_date(19_675)
    ((1970, 1, 1), (2023, 11, 14))
    """
    z = days + 719_468
    era, doe = divmod(z, 146_097)
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (1 if month <= 2 else 0), month, day


def format_ms(ms: int) -> str:
    """Milliseconds since the epoch as UTC ISO 8601: ``2023-11-14T22:13:20.000Z``.

    Integer arithmetic only (no time zone, no locale, no platform ``gmtime``), so it covers
    the whole range memories accept, 0 to 2**63-1; years after 9999 get a ``+`` (ISO 8601
    expanded form).

    >>> format_ms(1_700_000_000_000)
    '2023-11-14T22:13:20.000Z'
    """
    days, rem = divmod(ms, 86_400_000)
    hour, rem = divmod(rem, 3_600_000)
    minute, rem = divmod(rem, 60_000)
    second, milli = divmod(rem, 1000)
    year, month, day = civil_date(days)
    year_text = f"{year:04d}" if year <= 9999 else f"+{year}"
    return f"{year_text}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{milli:03d}Z"


def _ratio(value: float) -> str:
    return f"{value:.2f}"


def _ppm(value: int) -> str:
    return f"{value / 1_000_000:.2f}"


# ---------------------------------------------------------------------------
# The parts each type contributes


def _state(memory: Memory) -> str | None:
    """The word after ``type:`` in the header: a Goal's status, an Event's kind, an
    Attest's outcome."""
    if isinstance(memory, Goal):
        return memory.status
    if isinstance(memory, Event):
        return memory.kind
    if isinstance(memory, Attest):
        return memory.outcome
    return None


def _qualifiers(memory: Memory) -> list[str]:
    """Further header words: an Event's channel, an ArtifactRef's path, an Attest's
    citation count."""
    if isinstance(memory, Event):
        return [memory.channel] if memory.channel else []
    if isinstance(memory, ArtifactRef):
        return [memory.path] if memory.path else []
    if isinstance(memory, Attest):
        n = len(memory.cited)
        return [f"cites {n}"]
    return []


def _header(memory: Memory) -> str:
    head = memory.type_name
    state = _state(memory)
    if state:
        head += ":" + _flat(state, _QUALIFIER_MAX)
    words = [head, *(_flat(q, _QUALIFIER_MAX) for q in _qualifiers(memory))]
    return "[" + " ".join(words) + "]"


def _weights_line(weights: tuple[int, ...]) -> str:
    return " · ".join(f"{name} {_ppm(w)}" for name, w in zip(FACTOR_NAMES, weights, strict=False))


def _title_and_rest(memory: Memory) -> tuple[str, str, list[str]]:
    """``(prefix, title, rest)``: the short line shows ``prefix + title``; the medium form
    adds each of ``rest`` on a line of its own.

    The title is the summary when there is one (the text then goes to ``rest``), else the
    text. An Event's speaker is the prefix (``alice: ``); a LearnWeights' title is its
    weights, with its summary and text in ``rest``.
    """
    prefix = ""
    if isinstance(memory, Event) and memory.speaker:
        prefix = _flat(memory.speaker, _QUALIFIER_MAX) + ": "
    if isinstance(memory, LearnWeights):
        rest = [s for s in (memory.summary, memory.text) if s and s.strip()]
        return prefix, _weights_line(memory.weights), rest
    if memory.summary:
        rest = [memory.text] if memory.text.strip() else []
        return prefix, memory.summary, rest
    return prefix, memory.text, []


def _short_tags(tags: tuple[str, ...]) -> str:
    shown: list[str] = []
    used = 0
    for tag in tags:
        item = "#" + _clip(tag, _SHORT_TAG_MAX)
        cost = len(item) + (1 if shown else 0)
        if used + cost > _SHORT_TAGS_MAX:
            break
        shown.append(item)
        used += cost
    omitted = len(tags) - len(shown)
    if omitted:
        shown.append(f"+{omitted}")
    return " ".join(shown)


def _meta(memory: Memory) -> str:
    """The medium form's last line: confidence, priority, pinned, key type fields, validity."""
    items = [f"confidence {_ratio(memory.confidence)}", f"priority {memory.priority}"]
    if memory.pinned:
        items.append("pinned")
    if isinstance(memory, Goal) and memory.due is not None:
        items.append(f"due {format_ms(memory.due)}")
    elif isinstance(memory, Event):
        if memory.occurred_at is not None:
            items.append(f"at {format_ms(memory.occurred_at)}")
        if memory.agent_id:
            items.append(f"agent {_flat(memory.agent_id, _QUALIFIER_MAX)}")
        if memory.call_id:
            items.append(f"call {_flat(memory.call_id, _QUALIFIER_MAX)}")
    elif isinstance(memory, ArtifactRef):
        if memory.media_type:
            items.append(f"media {_flat(memory.media_type, _QUALIFIER_MAX)}")
        if memory.content is not None:
            items.append(f"content {len(memory.content)} chars")
    elif isinstance(memory, LearnWeights) and memory.attest:
        items.append(f"attest {_flat(memory.attest, 2 * _QUALIFIER_MAX)}")
    lo, hi = memory.valid_from, memory.valid_to
    if lo is not None and hi is not None:
        items.append(f"valid {format_ms(lo)} to {format_ms(hi)}")
    elif lo is not None:
        items.append(f"valid from {format_ms(lo)}")
    elif hi is not None:
        items.append(f"valid until {format_ms(hi)}")
    return " · ".join(items)


# ---------------------------------------------------------------------------
# The forms


def render_short(record: Record) -> str:
    """One line of at most :data:`SHORT_MAX` characters: ``[type:state qualifiers] title
    #tags``.

    The header names the type, then a Goal's status, an Event's kind (``event:kind``) and
    channel, an ArtifactRef's path, an Attest's outcome and citation count. The title is
    the summary, else the text (an Event's prefixed with ``speaker: ``; a LearnWeights'
    is its weights), flattened to one line and clipped with ``…`` to what the header and
    tags leave. Tags follow as ``#tag`` (each clipped to 32 characters, 60 in all; the
    rest counted as ``+N``). Never includes raw ``content``.
    """
    memory = record.memory
    head = _header(memory)
    tags = _short_tags(memory.tags)
    prefix, title, _ = _title_and_rest(memory)
    room = SHORT_MAX - len(head) - 1 - (len(tags) + 1 if tags else 0)
    body = _flat(prefix + title, room) if title.strip() or prefix else ""
    line = " ".join(part for part in (head, body, tags) if part)
    return _clip(line, SHORT_MAX)  # a no-op by construction; a guard for the bound


def render_medium(record: Record) -> str:
    """A few lines: the header and title, the text, the tags, and the key fields.

    Lines, in order (empty ones are left out):

    1. the short form's header and title, the title flattened and clipped to
       :data:`MEDIUM_TEXT_MAX` characters;
    2. the text, when the title was the summary (and a LearnWeights' summary and text),
       flattened and clipped the same way;
    3. an Attest's cited URIs (the first five, then ``+N``);
    4. ``tags: #a #b`` with every tag;
    5. ``confidence 0.80 · priority 7`` then ``pinned``, a Goal's due time, an Event's
       time, agent and call id, an ArtifactRef's media type and content length, a
       LearnWeights' attest URI, and the validity interval, when set.

    Never includes raw ``content``.
    """
    memory = record.memory
    prefix, title, rest = _title_and_rest(memory)
    first = _header(memory)
    if title.strip() or prefix:
        first += " " + _flat(prefix + title, MEDIUM_TEXT_MAX)
    lines = [first]
    lines.extend(_flat(text, MEDIUM_TEXT_MAX) for text in rest)
    if isinstance(memory, Attest):
        cited = [_flat(uri, 2 * _QUALIFIER_MAX) for uri in memory.cited[:_MEDIUM_CITED_MAX]]
        more = len(memory.cited) - len(cited)
        lines.append("cited: " + ", ".join(cited) + (f" +{more}" if more else ""))
    if memory.tags:
        lines.append("tags: " + " ".join("#" + tag for tag in memory.tags))
    lines.append(_meta(memory))
    return "\n".join(lines)


def _block(name: str, text: str) -> list[str]:
    if not text:
        return [f"{name}: {_EMPTY}"]
    return [f"{name}:", *("  " + line for line in text.splitlines())]


def _fence(content: str, path: str | None) -> list[str]:
    longest = max((len(run) for run in re.findall(r"`+", content)), default=0)
    fence = "`" * max(3, longest + 1)
    info = ""
    if path:
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        if "." in name.lstrip("."):
            ext = name.rsplit(".", 1)[1]
            if re.fullmatch(r"[A-Za-z0-9+#_-]{1,16}", ext):
                info = ext.lower()
    body = content if content.endswith("\n") else content + "\n"
    return [f"content: ({len(content)} chars)", fence + info + "\n" + body + fence]


def _value(name: str, value: object) -> str:
    if value is None:
        return _NONE
    if value is True or value is False:
        return "yes" if value else "no"
    if name in ("due", "occurred_at", "valid_from", "valid_to") and type(value) is int:
        return format_ms(value)
    if type(value) is float:
        return repr(value)  # exact and platform-independent (shortest round-trip)
    if type(value) is str:
        return value if value else _EMPTY
    return str(value)


def render_full(record: Record) -> str:
    """Every field of the memory and of the record, one ``name: value`` line each.

    The first line is ``[type] URI``; then ``record: version V (head H, latest L) ·
    status S · seq N``, ``created_at`` and ``written_at`` (the record's ``at``), then every field of
    the memory in declaration order (``source`` as ``source.origin`` and so on), the text
    last as an indented block and an ArtifactRef's ``content`` verbatim in a fenced code
    block (the fence is longer than any backtick run inside). Absent values show as
    ``(none)``, empty strings as ``(empty)``, booleans as ``yes``/``no``, times as UTC ISO
    8601, confidence as Python's exact shortest ``repr``, weights in ppm.
    """
    memory = record.memory
    lines = [
        f"[{memory.type_name}] {record.uri}",
        f"record: version {record.version} (head {record.head}, latest {record.latest})"
        f" · status {record.status} · seq {record.seq}",
        f"created_at: {format_ms(record.created_at)}",
        f"written_at: {format_ms(record.at)}",
    ]
    tail: list[str] = []
    for field in attrs.fields(type(memory)):
        name = field.name
        value = getattr(memory, name)
        if name == "text":
            tail[:0] = _block("text", value)
        elif name == "content":
            if value is not None:
                tail.extend(_fence(value, getattr(memory, "path", None)))
            else:
                lines.append(f"content: {_NONE}")
        elif name == "source":
            if value is None:
                lines.append(f"source: {_NONE}")
            else:
                for sub in attrs.fields(Source):
                    sub_value = _value(sub.name, getattr(value, sub.name))
                    lines.append(f"source.{sub.name}: {sub_value}")
        elif name == "tags":
            lines.append("tags: " + (" ".join("#" + t for t in value) if value else _NONE))
        elif name == "weights":
            parts = (f"{f} {w}" for f, w in zip(FACTOR_NAMES, value, strict=False))
            lines.append("weights (ppm): " + " · ".join(parts))
        elif name == "cited":
            lines.append(f"cited: {len(value)}")
            lines.extend("  " + uri for uri in value)
        else:
            lines.append(f"{name}: {_value(name, value)}")
    return "\n".join(lines + tail)


_RENDERERS: dict[str, Callable[[Record], str]] = {
    "short": render_short,
    "medium": render_medium,
    "full": render_full,
}


def render(record: Record, form: str = "short") -> str:
    """Render ``record`` in one of :data:`FORMS`: ``"short"``, ``"medium"`` or ``"full"``.

    The same record gives the same string on any machine, under any locale, time zone or
    hash seed. See :func:`render_short`, :func:`render_medium`, :func:`render_full`.

    Raises:
        ValidationError: ``form`` is not one of :data:`FORMS` (``field="form"``).
    """
    renderer = _RENDERERS.get(form) if type(form) is str else None
    if renderer is None:
        raise ValidationError(
            f"unknown form {form!r}; expected one of {', '.join(FORMS)}", field="form"
        )
    return renderer(record)


# ---------------------------------------------------------------------------
# Tokens


class TokenEstimator(Protocol):
    """Anything that counts the tokens of a string: ``estimator(text) -> int``.

    It must be deterministic and return an integer >= 0. :func:`estimate_tokens` is the
    default; a real tokenizer plugs in as ``lambda text: len(encoding.encode(text))``.
    """

    def __call__(self, text: str) -> int: ...


# One match per estimated token, tried in this order at each position (the classes are
# disjoint, so each maximal run of a class is cut into chunks independently):
#   up to 6 Latin letters        words: ceil(len / 6); common words are one token
#   up to 3 ASCII digits         numbers: ceil(len / 3), as GPT-4-class vocabularies cut them
#   up to 3 Cyrillic characters  ceil(len / 3)
#   up to 2 ASCII punctuation    ")", "):", "->", "==" are single tokens in BPE vocabularies
#   a line break and the whitespace after it: 1 per whitespace run that holds a line break
#   any other non-whitespace character: 1 (CJK, kana, Hangul, Greek, Arabic, symbols, ...)
# and a character outside the Basic Multilingual Plane (most emoji) costs 1 more. Other
# whitespace is free: BPE vocabularies attach a space to the word after it.
_LATIN = "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff"
_PUNCT = r"!-/:-@\[-`{-~"
_TOKEN = re.compile(
    rf"[{_LATIN}]{{1,6}}|[0-9]{{1,3}}|[\u0400-\u04ff]{{1,3}}|[{_PUNCT}]{{1,2}}"
    r"|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]\s*|\S"
)
_ASCII_TOKEN = re.compile(
    rf"[A-Za-z]{{1,6}}|[0-9]{{1,3}}|[{_PUNCT}]{{1,2}}|[\n\r\x0b\x0c\x1c-\x1e]\s*|\S"
)
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def estimate_tokens(text: str) -> int:
    """Estimate how many tokens ``text`` costs a BPE tokenizer (GPT-4-class vocabularies).

    Deterministic, cheap (one regular-expression pass, a few microseconds for a short
    line) and calibrated to err a little high, so that a budget filled by estimate is
    rarely overrun. Counted over the string:

    - a run of Latin letters (ASCII and accented): ``ceil(len / 6)``;
    - a run of ASCII digits: ``ceil(len / 3)``;
    - a run of Cyrillic: ``ceil(len / 3)``;
    - a run of ASCII punctuation and symbols: ``ceil(len / 2)``;
    - any other non-whitespace character (CJK, kana, Hangul, Greek, Arabic, other
      symbols): 1, and 2 outside the Basic Multilingual Plane (most emoji);
    - a run of whitespace: 1 if it holds a line break, else nothing.

    What holds exactly: ``estimate_tokens("") == 0``; the result is 0 only for strings of
    whitespace without a line break; appending never lowers it; and
    ``estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)``. How close it
    comes to real tokenizers is in ``docs/forms.md``.

    >>> estimate_tokens("The quick brown fox jumps over the lazy dog.")
    10
    >>> estimate_tokens("")
    0
    """
    if text.isascii():
        return len(_ASCII_TOKEN.findall(text))
    return len(_TOKEN.findall(text)) + len(_ASTRAL.findall(text))


def render_cost(
    record: Record, form: str = "short", *, estimator: TokenEstimator = estimate_tokens
) -> int:
    """The tokens ``render(record, form)`` costs, as ``estimator`` counts them.

    Raises:
        ValidationError: ``form`` is unknown, or ``estimator`` returned something other
            than an integer >= 0 (``field="estimator"``).
    """
    tokens = estimator(render(record, form))
    if type(tokens) is not int or tokens < 0:
        raise ValidationError(
            f"a token estimator must return an integer >= 0, not {tokens!r}", field="estimator"
        )
    return tokens
