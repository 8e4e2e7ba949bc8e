"""Forms (short, medium, full) and the token estimator (``cortexgraph.core.forms``).

Golden files pin the exact format: ``fixtures/forms/<type>.<form>.txt`` holds the form of
the fixed record of ``tests/scripts/forms_script.py`` followed by one newline. After an
intended format change, regenerate them (that run fails, saying what it rewrote), review
every diff by eye and run again::

    CORTEXGRAPH_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/test_forms.py -k golden

The golden files come from the code they check, so they are not the only check: renderings
written out by hand from ``docs/forms.md`` (``test_hand_written_renderings``) and property
tests hold what the format promises independently of the golden bytes.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
import unicodedata
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cortexgraph.core.forms import (
    FORMS,
    MEDIUM_TEXT_MAX,
    SHORT_MAX,
    civil_date,
    estimate_tokens,
    format_ms,
    render,
    render_cost,
    render_full,
    render_medium,
    render_short,
)
from cortexgraph.core.postings import spoken_date
from cortexgraph.core.state import Record
from cortexgraph.core.taxonomy import (
    MAX_MS,
    MAX_TEXT_BYTES,
    MEMORY_TYPES,
    ArtifactRef,
    Attest,
    Event,
    Fact,
    Goal,
    Memory,
    Source,
)
from cortexgraph.core.uri import MemoryURI
from cortexgraph.errors import ValidationError
from golden import check_golden
from strategies import memories, memory_ids, names

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "fixtures" / "forms"
SCRIPT_PATH = Path(__file__).parent / "scripts" / "forms_script.py"
TYPE_NAMES = [t.type_name for t in MEMORY_TYPES]
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("forms_script", SCRIPT_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _load_script()
RECORDS: dict[str, Record] = SCRIPT.golden_records()


def record_of(memory: Memory, *, version: int = 1) -> Record:
    uri = MemoryURI("agent", "default", bytes(range(16)), version)
    return Record(uri, memory, version, 7, 1_700_000_000_000, version, version, "active", 0)


# ---------------------------------------------------------------------------
# Golden files


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("type_name", TYPE_NAMES)
def test_golden_file(type_name: str, form: str) -> None:
    """The form of each fixed record equals its golden file byte for byte (UTF-8, one
    trailing newline), so any change to the format shows up as a reviewed diff."""
    path = GOLDEN / f"{type_name}.{form}.txt"
    check_golden(path, (render(RECORDS[type_name], form) + "\n").encode("utf-8"))


def test_golden_set_is_complete() -> None:
    """There is a golden file for exactly every type and form (27), and the fixed records
    are one per memory type, so no type or form goes unpinned."""
    files = sorted(p.name for p in GOLDEN.glob("*.txt"))
    assert files == sorted(f"{t}.{f}.txt" for t in TYPE_NAMES for f in FORMS)
    assert sorted(RECORDS) == sorted(TYPE_NAMES)
    assert all(r.memory.type_name == name for name, r in RECORDS.items())


def test_golden_records_exercise_the_edge_cases() -> None:
    """The fixed records cover clipping with an ellipsis, elided tags (+N), a fence longer
    than a backtick run in the content, non-BMP text, and a tombstoned, non-head version."""
    assert RECORDS["pattern"].memory.text not in render_short(RECORDS["pattern"])
    assert "…" in render_short(RECORDS["pattern"])
    assert render_short(RECORDS["pattern"]).endswith(" +3")
    assert "\n````py\n" in render_full(RECORDS["artifact_ref"])
    assert "🚀" in render_short(RECORDS["event"])
    assert "status tombstoned" in render_full(RECORDS["preference"])
    assert "version 2 (head 3, latest 3)" in render_full(RECORDS["constraint"])


# ---------------------------------------------------------------------------
# Renderings written out by hand from docs/forms.md (not by running the code): a second
# check of the format that does not come from the code it checks. ``record_of`` gives
# every record URI cx://agent/default/000102...0f@1, seq 7, written at T0 and created at 0.

_URI = "cx://agent/default/000102030405060708090a0b0c0d0e0f"
_T0_ISO = "2023-11-14T22:13:20.000Z"
_CITED = tuple(f"cx://agent/default/{n:02x}{'00' * 15}@1" for n in range(7))

HAND_WRITTEN: list[tuple[Memory, str, str]] = [
    # a Goal's status after a colon; tags lowercased and sorted; due on the medium line
    (Goal(text="Ship v2.", tags=["Release", "q2"], status="active", due=1_704_067_200_000),
     "short", "[goal:active] Ship v2. #q2 #release"),
    (Goal(text="Ship v2.", tags=["Release", "q2"], status="active", due=1_704_067_200_000),
     "medium", "[goal:active] Ship v2.\ntags: #q2 #release\n"
     "confidence 1.00 · priority 5 · due 2024-01-01T00:00:00.000Z"),
    # the summary is the title; medium adds the text flattened; no tags line without tags
    (Fact(text="Line one.\nLine  two.", summary="Two lines", confidence=0.5, priority=3,
          valid_to=1_700_000_000_000),
     "short", "[fact] Two lines"),
    (Fact(text="Line one.\nLine  two.", summary="Two lines", confidence=0.5, priority=3,
          valid_to=1_700_000_000_000),
     "medium", f"[fact] Two lines\nLine one. Line two.\n"
     f"confidence 0.50 · priority 3 · valid until {_T0_ISO}"),
    (Fact(text="Line one.\nLine  two.", summary="Two lines", confidence=0.5, priority=3,
          valid_to=1_700_000_000_000),
     "full", f"[fact] {_URI}@1\n"
     "record: version 1 (head 1, latest 1) · status active · seq 7\n"
     "created_at: 1970-01-01T00:00:00.000Z\n"
     f"written_at: {_T0_ISO}\n"
     "summary: Two lines\ntags: (none)\nconfidence: 0.5\npriority: 3\npinned: no\n"
     f"source: (none)\nvalid_from: (none)\nvalid_to: {_T0_ISO}\n"
     "text:\n  Line one.\n  Line  two."),
    # 200 characters: the title clipped with an ellipsis to what header and tags leave
    (Fact(text="a" * 300, tags=["x"]), "short", "[fact] " + "a" * 189 + "… #x"),
    # tags: at most 60 characters of them, the rest counted
    (Fact(text="t", tags=["a" * 20, "b" * 20, "c" * 20]), "short",
     f"[fact] t #{'a' * 20} #{'b' * 20} +1"),
    # an Event: kind as state, channel as qualifier, speaker before the text
    (Event(text="done", speaker="bo", channel="ops", kind="message",
           occurred_at=1_700_000_000_000),
     "short", "[event:message ops] bo: done"),
    (Event(text="done", speaker="bo", channel="ops", kind="message",
           occurred_at=1_700_000_000_000),
     "medium", f"[event:message ops] bo: done\nconfidence 1.00 · priority 5 · at {_T0_ISO}"),
    # an Attest: outcome as state, the number of citations; medium lists five, then +N
    (Attest(text="Rolled back.", cited=_CITED, outcome="failure"),
     "short", "[attest:failure cites 7] Rolled back."),
    (Attest(text="Rolled back.", cited=_CITED, outcome="failure"),
     "medium", "[attest:failure cites 7] Rolled back.\ncited: " + ", ".join(_CITED[:5])
     + " +2\nconfidence 1.00 · priority 5"),
    # an ArtifactRef: the path as qualifier; medium counts the content, never shows it
    (ArtifactRef(text="Helper.", path="src/x.py", media_type="text/x-python",
                 content="print(1)\n"),
     "medium", "[artifact_ref src/x.py] Helper.\n"
     "confidence 1.00 · priority 5 · media text/x-python · content 9 chars"),
]


@pytest.mark.parametrize(("memory", "form", "expected"), HAND_WRITTEN)
def test_hand_written_renderings(memory: Memory, form: str, expected: str) -> None:
    """The forms of small records equal renderings written out by hand from the rules
    of docs/forms.md: header with state and qualifiers, title from the summary or the
    text, clipping to 200 characters, the 60-character tag allowance, the medium lines
    in their documented order, and the full form's fields in declaration order."""
    assert render(record_of(memory), form) == expected


# ---------------------------------------------------------------------------
# The API


def test_render_dispatches_and_defaults_to_short() -> None:
    """render(record, form) is the named renderer for each form, and short by default."""
    record = RECORDS["fact"]
    assert render(record) == render_short(record)
    assert render(record, "short") == render_short(record)
    assert render(record, "medium") == render_medium(record)
    assert render(record, "full") == render_full(record)
    assert len({render(record, f) for f in FORMS}) == 3


@pytest.mark.parametrize("form", ["", "SHORT", "long", " short", None, 1])
def test_unknown_form_is_a_validation_error(form: Any) -> None:
    """Any form name other than short, medium, full raises ValidationError naming 'form'."""
    with pytest.raises(ValidationError) as info:
        render(RECORDS["fact"], form)
    assert info.value.field == "form"
    with pytest.raises(ValidationError):
        render_cost(RECORDS["fact"], form)


def test_render_cost_counts_the_rendered_form() -> None:
    """render_cost is the estimator applied to the rendered string, with the default
    estimator or one plugged in."""
    record = RECORDS["constraint"]
    for form in FORMS:
        assert render_cost(record, form) == estimate_tokens(render(record, form))
        assert render_cost(record, form, estimator=len) == len(render(record, form))
    assert (
        render_cost(record, "short") < render_cost(record, "medium") < render_cost(record, "full")
    )


@pytest.mark.parametrize("bad", [lambda text: -1, lambda text: 1.5, lambda text: True])
def test_render_cost_rejects_a_bad_estimator(bad: Any) -> None:
    """An estimator that returns a negative number, a float or a bool is reported as a
    ValidationError naming 'estimator', not passed on to budget arithmetic."""
    with pytest.raises(ValidationError) as info:
        render_cost(RECORDS["fact"], "short", estimator=bad)
    assert info.value.field == "estimator"


# ---------------------------------------------------------------------------
# What each form shows


def _expected_in_full(record: Record) -> list[str]:
    """Fragments the full form must contain: every set field's value, as documented."""
    memory = record.memory
    out = [str(record.uri), f"version {record.version}", f"status {record.status}"]
    out += [format_ms(record.created_at), format_ms(record.at), f"seq {record.seq}"]
    for field in attrs.fields(type(memory)):
        value = getattr(memory, field.name)
        if value is None or value == "" or value == ():
            continue
        if field.name == "text":
            out += ["  " + line for line in value.splitlines()]
        elif field.name == "tags":
            out += ["#" + tag for tag in value]
        elif field.name == "source":
            for sub in attrs.fields(Source):
                sub_value = getattr(value, sub.name)
                if sub_value is not None:
                    out.append(f"source.{sub.name}: {sub_value}")
        elif field.name in ("due", "occurred_at", "valid_from", "valid_to"):
            out.append(f"{field.name}: {format_ms(value)}")
        elif field.name == "confidence":
            out.append(f"confidence: {value!r}")
        elif field.name == "pinned":
            out.append("pinned: yes" if value else "pinned: no")
        elif field.name == "weights":
            out += [str(w) for w in value]
        elif field.name == "cited":
            out += ["  " + uri for uri in value]
        else:
            out.append(f"{field.name}: {value}" if field.name != "content" else value)
    return out


@pytest.mark.parametrize("type_name", TYPE_NAMES)
def test_full_contains_every_field(type_name: str) -> None:
    """The full form names every attrs field of the type and shows every set value, plus
    the URI, version, status, seq and both times."""
    record = RECORDS[type_name]
    full = render_full(record)
    for field in attrs.fields(type(record.memory)):
        assert any(f"\n{field.name}{sep}" in full for sep in (":", ".", " (")), field.name
    for fragment in _expected_in_full(record):
        assert fragment in full, fragment


@pytest.mark.parametrize("type_name", TYPE_NAMES)
def test_short_and_medium_show_the_essentials(type_name: str) -> None:
    """Short starts with the type tag and holds the type's essentials (Goal status, Event
    kind, channel and speaker, ArtifactRef path, Attest outcome); medium starts with the
    short header and shows tags, confidence and priority."""
    record = RECORDS[type_name]
    memory = record.memory
    short, medium = render_short(record), render_medium(record)
    assert short.startswith(f"[{type_name}")
    header = short.split("]", 1)[0] + "]"
    assert medium.startswith(header)
    essentials = {
        "goal": ["[goal:blocked]"],
        "event": ["[event:message #ops]", "alice: "],
        "artifact_ref": ["src/app/retry.py"],
        "attest": ["[attest:success cites 2]"],
        "learn_weights": ["confidence 0.46"],
    }.get(type_name, [])
    for fragment in essentials:
        assert fragment in short
    assert f"confidence {memory.confidence:.2f} · priority {memory.priority}" in medium
    for tag in memory.tags:
        assert f"#{tag}" in medium


def test_medium_shows_the_text_when_the_title_is_the_summary() -> None:
    """With a summary, short shows the summary and not the text; medium shows both, the
    text flattened onto one line."""
    record = RECORDS["fact"]
    assert "Deploys go through CI #ci" in render_short(record)
    assert "twelve minutes" not in render_short(record)
    lines = render_medium(record).splitlines()
    assert lines[0] == "[fact] Deploys go through CI"
    assert lines[1] == " ".join(record.memory.text.split())


def test_medium_clips_the_text() -> None:
    """Medium shows at most MEDIUM_TEXT_MAX characters of a long text, ending in '…'."""
    text = "word " * 1000
    medium = render_medium(record_of(Fact(text=text, summary="s")))
    line = medium.splitlines()[1]
    assert len(line) == MEDIUM_TEXT_MAX
    assert line.endswith("…")
    assert text.startswith(line[:-1])


SENTINEL = "SECRET-CONTENT-7f3a"


@given(st.text(max_size=40), st.booleans())
def test_artifact_content_only_in_full(noise: str, with_summary: bool) -> None:
    """Raw ArtifactRef content never appears in short or medium, and appears verbatim
    (fenced) in full."""
    content = f"{noise}{SENTINEL}\n{noise}"
    memory = ArtifactRef(
        text="helper",
        summary="the helper" if with_summary else None,
        path="a.py",
        content=content,
    )
    record = record_of(memory)
    assert SENTINEL not in render_short(record)
    assert SENTINEL not in render_medium(record)
    assert content in render_full(record)


# ---------------------------------------------------------------------------
# Clipping and odd text


def _assert_clean_cut(shown: str, original: str) -> None:
    """``shown`` + '…' is a clip of ``original``: a prefix, not cut before a mark."""
    assert shown.endswith("…")
    kept = shown[:-1]
    assert original.startswith(kept)
    following = original[len(kept) :].lstrip()
    if following and kept:
        assert unicodedata.category(original[len(kept)])[0] != "M"


@pytest.mark.parametrize(
    "unit",
    ["🚀", "\U0001d518", "x\u0301\u0302", "👩\u200d💻", "ab", "한", "\U0010fffd"],
    ids=["emoji", "fraktur", "marks", "zwj", "ascii", "hangul", "plane16"],
)
def test_truncation_keeps_whole_characters(unit: str) -> None:
    """Clipping a long text of non-BMP characters, base+marks or ZWJ sequences gives
    valid UTF-8 (no lone surrogate), a prefix of the text, and no base character torn
    from the marks that follow it."""
    text = unit * 300
    short = render_short(record_of(Fact(text=text)))
    assert len(short) <= SHORT_MAX
    short.encode("utf-8")  # raises on a lone surrogate
    body = short[len("[fact] ") :]
    _assert_clean_cut(body, unicodedata.normalize("NFC", text))
    assert not body[:-1].endswith("\u200d")


def test_one_mebibyte_text() -> None:
    """A 1 MiB text renders: short and medium stay bounded, full holds it all, and the
    token estimate is positive."""
    text = ("lorem ipsum dolor sit amet " * 40_000)[: MAX_TEXT_BYTES - 1] + "Z"
    assert len(text.encode("utf-8")) == MAX_TEXT_BYTES
    record = record_of(Fact(text=text))
    assert len(render_short(record)) <= SHORT_MAX
    assert len(render_medium(record)) < 2 * MEDIUM_TEXT_MAX
    assert render_full(record).endswith("  " + text)
    assert estimate_tokens(text) > len(text) // 10


def test_line_breaks_never_reach_the_short_form() -> None:
    """Every Unicode line break (\\n, \\r, \\v, \\f, FS/GS/RS, NEL, LS, PS) in the text,
    summary or qualifiers becomes a space in the short form and the medium title."""
    text = "a" + "b".join(LINE_BREAKS) + "c"
    memory = Fact(text=text, summary=None)
    short = render_short(record_of(memory))
    assert short == "[fact] a\nb\rb\x0bb\x0cb\x1cb\x1db\x1eb\x85b\u2028b\u2029c".translate(
        {ord(c): " " for c in LINE_BREAKS}
    )
    assert len(short.splitlines()) == 1
    assert len(render_medium(record_of(memory)).splitlines()) == 2


# ---------------------------------------------------------------------------
# Times


@pytest.mark.parametrize(
    ("ms", "expected"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (1_700_000_000_000, "2023-11-14T22:13:20.000Z"),
        (1_709_208_000_001, "2024-02-29T12:00:00.001Z"),
        (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
        (253_402_300_800_000, "+10000-01-01T00:00:00.000Z"),
        (MAX_MS, "+292278994-08-17T07:12:55.807Z"),
    ],
)
def test_format_ms_known_answers(ms: int, expected: str) -> None:
    """Known instants, a leap day, the last 4-digit year and the largest accepted ms."""
    assert format_ms(ms) == expected


@given(st.integers(0, 253_402_300_799_999))
def test_format_ms_agrees_with_datetime(ms: int) -> None:
    """The integer calendar arithmetic agrees with datetime in UTC for years 1970-9999."""
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    assert format_ms(ms) == moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@given(st.integers(0, 253_402_300_799_999))
def test_the_spoken_date_of_the_keyword_index_agrees_with_datetime(ms: int) -> None:
    """``spoken_date`` (an Event's date as keyword recall indexes it: ``8 May 2023``)
    names the UTC day datetime names, for years 1970-9999."""
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    assert spoken_date(ms) == f"{moment.day} {_MONTH_NAMES[moment.month - 1]} {moment.year}"
    assert civil_date(ms // 86_400_000) == (moment.year, moment.month, moment.day)


@pytest.mark.parametrize("ms", [253_402_300_800_000, MAX_MS])
def test_the_spoken_date_past_year_9999_is_the_date_format_ms_writes(ms: int) -> None:
    """Past datetime's range, the spoken date names the date of ``format_ms``."""
    year, month, day = (int(part) for part in format_ms(ms).lstrip("+")[:-14].split("-"))
    assert spoken_date(ms) == f"{day} {_MONTH_NAMES[month - 1]} {year}"


# ---------------------------------------------------------------------------
# Random memories


@st.composite
def records(draw: st.DrawFn) -> Record:
    memory = draw(memories(text_size=300))
    version = draw(st.integers(1, 2**32 - 1))
    latest = draw(st.integers(version, 2**32 - 1))
    uri = MemoryURI(draw(names()), draw(names()), draw(memory_ids()), version)
    return Record(
        uri,
        memory,
        version,
        draw(st.integers(1, 2**64 - 1)),
        draw(st.integers(0, MAX_MS)),
        draw(st.integers(1, latest)),
        latest,
        draw(st.sampled_from(["active", "tombstoned"])),
        draw(st.integers(0, MAX_MS)),
    )


@given(records())
def test_any_record_renders_within_the_promises(record: Record) -> None:
    """For random memories of every type: no form raises; short is one line (no line
    break of any kind) of at most SHORT_MAX characters starting with the type tag;
    medium starts with the same header; full shows every set field value."""
    short, medium, full = (render(record, form) for form in FORMS)
    name = record.memory.type_name
    assert len(short) <= SHORT_MAX
    assert not any(c in short for c in LINE_BREAKS)
    assert short.startswith(f"[{name}") and short == short.strip()
    assert medium.startswith(short.split("]", 1)[0] + "]")
    assert len(medium.splitlines()) <= 6
    assert full.startswith(f"[{name}] {record.uri}\n")
    for fragment in _expected_in_full(record):
        assert fragment in full, fragment
    for form in FORMS:
        assert render_cost(record, form) >= 1


# ---------------------------------------------------------------------------
# The token estimator


def _reference_estimate(text: str) -> int:
    """The documented formula, character class by character class (slow and plain)."""

    def kind(c: str) -> str:
        if c in LINE_BREAKS:
            return "break"
        if c.isspace():
            return "space"
        if (
            ("A" <= c <= "Z" or "a" <= c <= "z")
            or ("\u00c0" <= c <= "\u024f" and c not in "\u00d7\u00f7")
            or "\u1e00" <= c <= "\u1eff"
        ):
            return "latin"
        if "0" <= c <= "9":
            return "digit"
        if "\u0400" <= c <= "\u04ff":
            return "cyrillic"
        if c.isascii() and not c.isalnum() and c.isprintable():
            return "punct"
        return "other"

    chunk = {"latin": 6, "digit": 3, "cyrillic": 3, "punct": 2}
    total = 0
    pending_break = False
    for k, group in itertools.groupby(text, kind):
        run = list(group)
        if k in ("break", "space"):
            pending_break = pending_break or k == "break"
            continue
        if pending_break:
            total += 1
            pending_break = False
        if k in chunk:
            total += math.ceil(len(run) / chunk[k])
        else:
            total += sum(2 if ord(c) > 0xFFFF else 1 for c in run)
    return total + (1 if pending_break else 0)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("   \t ", 0),
        ("\n", 1),
        (" \n\n  \r\n ", 1),
        ("a", 1),
        ("deploy", 1),
        ("pipeline", 2),
        ("The quick brown fox jumps over the lazy dog.", 10),
        ("1700000000000", 5),
        ("render_short()", 4),
        ("x == 1 -> y", 5),
        ("部署完了", 4),
        ("Привет", 2),
        ("🚀", 2),
        ("café", 1),
    ],
)
def test_estimate_known_answers(text: str, tokens: int) -> None:
    """Pinned examples of the documented formula (whitespace, words, numbers, code,
    CJK, Cyrillic, emoji, accented Latin)."""
    assert estimate_tokens(text) == tokens


_ANY_TEXT = st.text(
    st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from([*LINE_BREAKS, " ", "\t", "a", "1", "_", "-", "é", "я", "部"]),
    ),
    max_size=60,
)


@given(_ANY_TEXT)
@example("")
@example("\u2028")
@example("x\x1fy")
def test_estimate_follows_the_documented_formula(text: str) -> None:
    """The fast regex estimator equals a plain per-character reading of the formula, and
    is 0 exactly for strings of whitespace without a line break."""
    tokens = estimate_tokens(text)
    assert tokens == _reference_estimate(text)
    assert tokens >= 0
    no_break = "".join(text.splitlines()) == text
    assert (tokens == 0) == (not text.strip() and no_break)


@given(_ANY_TEXT, _ANY_TEXT)
def test_estimate_is_monotone_and_subadditive(a: str, b: str) -> None:
    """Appending never lowers the estimate; concatenating costs at most the sum and at
    least the sum minus one (one run can merge at the seam); a space between costs no
    more than the parts."""
    ea, eb, eab = estimate_tokens(a), estimate_tokens(b), estimate_tokens(a + b)
    assert max(ea, eb) <= eab <= ea + eb
    assert eab >= ea + eb - 1
    assert estimate_tokens(a + " " + b) <= ea + eb


# ---------------------------------------------------------------------------
# Determinism across processes


def _installed_locales() -> list[str]:
    try:
        out = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False)
    except OSError:
        return []
    return out.stdout.split()


def _exotic_locale() -> str | None:
    """A locale whose conventions differ from C (decimal comma, Turkish casing), if any."""
    installed = {name.lower().replace("utf-8", "utf8"): name for name in _installed_locales()}
    for wanted in ("de_DE.UTF-8", "tr_TR.UTF-8", "fr_FR.UTF-8", "ru_RU.UTF-8"):
        found = installed.get(wanted.lower().replace("utf-8", "utf8"))
        if found:
            return found
    return None


def _run_script(env_changes: dict[str, str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_") and k != "LANG"}
    env.update(env_changes)
    done = subprocess.run(
        [sys.executable, str(SCRIPT_PATH)],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


ENVIRONMENTS = {
    "c-utc": {"LC_ALL": "C", "PYTHONHASHSEED": "0", "TZ": "UTC0"},
    "cutf8-ist": {"LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "4242", "TZ": "IST-5:30"},
}


@pytest.mark.slow
def test_same_forms_in_other_processes_locales_zones_and_hash_seeds() -> None:
    """Two subprocesses with different PYTHONHASHSEED, LC_ALL (applied with setlocale)
    and TZ (applied with tzset; UTC and UTC+05:30) render every fixed record in every
    form, and estimate its tokens, exactly as this process does."""
    here = {
        "forms": SCRIPT.render_all(),
        "tokens": {
            n: {f: estimate_tokens(t) for f, t in by.items()}
            for n, by in SCRIPT.render_all().items()
        },
    }
    results = {name: _run_script(env) for name, env in ENVIRONMENTS.items()}
    assert results["c-utc"]["environment"] == {"locale": "C", "utc_offset": "+0000"}
    assert results["cutf8-ist"]["environment"]["utc_offset"] == "+0530"
    assert results["cutf8-ist"]["environment"]["locale"] in ("C.UTF-8", "C.utf8")
    for result in results.values():
        assert result["forms"] == here["forms"]
        assert result["tokens"] == here["tokens"]


@pytest.mark.slow
def test_same_forms_under_a_locale_with_other_conventions() -> None:
    """Under a locale with a decimal comma or Turkish case rules (when one is installed),
    every form is the same as in this process."""
    chosen = _exotic_locale()
    if chosen is None:
        pytest.skip(
            "no de_DE, tr_TR, fr_FR or ru_RU locale is installed (locale -a); "
            "the C and C.UTF-8 runs still cover hash seeds and time zones"
        )
    result = _run_script({"LC_ALL": chosen, "PYTHONHASHSEED": "7", "TZ": "EST5EDT"})
    assert result["environment"]["locale"] == chosen
    assert result["forms"] == SCRIPT.render_all()


def test_a_regenerating_run_rewrites_and_never_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With CORTEXGRAPH_REGEN_GOLDEN=1 a golden check writes the new bytes and fails with
    "regenerated ...; review the diff and rerun" (it never compares with what it just
    wrote); without it, a differing or missing file fails and an equal one passes."""
    path = tmp_path / "golden" / "x.txt"
    monkeypatch.setenv("CORTEXGRAPH_REGEN_GOLDEN", "1")
    with pytest.raises(pytest.fail.Exception, match=r"regenerated golden/x\.txt; review the"
                       r" diff and rerun"):
        check_golden(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    monkeypatch.delenv("CORTEXGRAPH_REGEN_GOLDEN")
    check_golden(path, b"new\n")
    with pytest.raises(AssertionError, match="differs"):
        check_golden(path, b"other\n")
    with pytest.raises(AssertionError, match="no golden file"):
        check_golden(tmp_path / "missing.txt", b"new\n")
