"""Hypothesis strategies for cortexgraph values: names, memories of all nine types, the
change sets ``Cortex.update`` accepts, storable CBOR values and journal entries.

Sizes are small by default so that property tests stay fast; tests that need large
values (1 MiB text) pin them with ``@example``.

Inputs come as a caller might pass them, not pre-normalised: NFD text, tags in mixed
case (including ``str.upper`` forms that add combining marks) with duplicates, ``""`` for
optional strings, ``-0.0`` and int confidences, lists where tuples are stored.
"""

from __future__ import annotations

import hashlib
import string
import unicodedata
from typing import Any

import blake3
from hypothesis import strategies as st

from cortexgraph.core.body import encode_body
from cortexgraph.core.graph import EDGE_STATUSES, RELATIONS
from cortexgraph.core.journal import OPS, Entry
from cortexgraph.core.keys import ID_SIZE
from cortexgraph.core.taxonomy import (
    GOAL_STATUSES,
    MAX_MS,
    MEMORY_TYPES,
    ORIGINS,
    OUTCOMES,
    WEIGHT_COUNT,
    WEIGHT_TOTAL,
    ArtifactRef,
    Attest,
    Event,
    Goal,
    LearnWeights,
    Memory,
    Source,
)

__all__ = [
    "NAME_PATTERN",
    "cbor_values",
    "cited_uris",
    "confidences",
    "content_hashes",
    "entries",
    "instants",
    "memories",
    "memory_changes",
    "memory_ids",
    "memory_kwargs",
    "names",
    "short_texts",
    "sources",
    "tag_lists",
    "texts",
    "weight_vectors",
]

NAME_PATTERN = r"[a-z0-9][a-z0-9._-]{0,63}"

#: Pieces that make text interesting for encoding: non-BMP characters (4 UTF-8 bytes),
#: NFC/NFD pairs, Hangul that composes, and characters whose case changes length.
FRAGMENTS = (
    # "Unicode" in Fraktur, then a rocket
    "\U0001d518\U0001d52b\U0001d526\U0001d520\U0001d52c\U0001d521\U0001d522 🚀",
    "🚀",
    "\U0010fffd",
    "café",
    "cafe\u0301",
    "\u00c5",
    "A\u030a",
    "\u1100\u1161",
    "한국어",
    "ß",
    "İ",
    "\u212b",
    "\ufb01",
    " ",
    "\t",
    "\x00",
)

_UTF8_CHARS = st.characters(codec="utf-8")
_LINE_CHARS = st.characters(codec="utf-8", exclude_characters="\n\r")


def names() -> st.SearchStrategy[str]:
    """Valid actor and namespace names: ``[a-z0-9][a-z0-9._-]{0,63}``."""
    return st.from_regex(NAME_PATTERN, fullmatch=True)


def _variants(text: str) -> st.SearchStrategy[str]:
    return st.sampled_from(
        (text, unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text))
    )


def _raw_text(chars: st.SearchStrategy[str], max_size: int) -> st.SearchStrategy[str]:
    piece = st.one_of(st.text(chars, max_size=max(1, max_size // 3)), st.sampled_from(FRAGMENTS))
    return st.lists(piece, max_size=4).map("".join).map(lambda s: s[:max_size]).flatmap(_variants)


def texts(*, max_size: int = 24, required: bool = True) -> st.SearchStrategy[str]:
    """Memory text in NFC, NFD or mixed form, with non-BMP characters.

    ``required`` texts are non-blank after NFC (what ``Memory.text`` demands).
    """
    raw = _raw_text(_UTF8_CHARS, max_size)
    if required:
        return raw.map(_non_blank)
    return raw


def _non_blank(text: str) -> str:
    return text if unicodedata.normalize("NFC", text).strip() else "x" + text


def short_texts() -> st.SearchStrategy[str | None]:
    """Optional single-line strings (``summary``, ``path``, ``Source.session``, ...).

    Includes ``""``, which these fields normalise to ``None``.
    """
    line = _raw_text(_LINE_CHARS, 16).filter(lambda s: "\n" not in s and "\r" not in s)
    return st.one_of(st.none(), st.just(""), line)


# Letters, marks, digits, punctuation and symbols: never whitespace or control characters.
# Marks matter: "H\u0331" lowercases to "h\u0331", which is not NFC ("\u1e96").
_TAG_CHARS = st.one_of(
    st.sampled_from(string.ascii_letters + string.digits + "-_.:/#+"),
    st.sampled_from("\u0300\u0301\u0308\u030a\u030c\u0331\u0307\u0130\u01f0\u1e9eHJTWY"),
    st.characters(codec="utf-8", categories=("L", "M", "N", "P", "S")),
)


def _case_variant(tag: str) -> st.SearchStrategy[str]:
    # str.upper() can add combining marks ("\u01f0" -> "J\u030c"): all must fold back.
    return st.sampled_from((tag, tag.upper(), tag.capitalize(), tag.swapcase()))


def tag_lists(*, max_tags: int = 6) -> st.SearchStrategy[list[str]]:
    """Tag lists in any order, with mixed case and duplicates (in several spellings)."""
    tag = st.text(_TAG_CHARS, min_size=1, max_size=12)
    return st.lists(tag, max_size=max_tags).flatmap(
        lambda tags: st.lists(
            st.sampled_from(tags).flatmap(_case_variant) if tags else st.nothing(),
            max_size=3 if tags else 0,
        ).flatmap(lambda extra: st.permutations(tags + extra))
    )


def confidences() -> st.SearchStrategy[float | int]:
    """Valid confidences: floats in [0, 1] (subnormals included), -0.0, and the ints 0 and 1."""
    return st.one_of(
        st.floats(min_value=0.0, max_value=1.0),
        st.sampled_from([-0.0, 0.0, 1.0, 0, 1, 5e-324, 0.5]),
    )


def instants() -> st.SearchStrategy[int]:
    """Milliseconds since the epoch, 0 to 2**63-1."""
    return st.one_of(st.integers(0, MAX_MS), st.sampled_from([0, 1, 1_700_000_000_000, MAX_MS]))


def _optional_instant() -> st.SearchStrategy[int | None]:
    return st.one_of(st.none(), instants())


def _intervals() -> st.SearchStrategy[tuple[int | None, int | None]]:
    """``(valid_from, valid_to)`` with ``valid_from <= valid_to`` when both are set."""

    def order(pair: tuple[int | None, int | None]) -> tuple[int | None, int | None]:
        a, b = pair
        if a is not None and b is not None and a > b:
            return b, a
        return a, b

    return st.tuples(_optional_instant(), _optional_instant()).map(order)


def sources() -> st.SearchStrategy[Source]:
    """A :class:`Source` with any subset of its fields set."""
    return st.fixed_dictionaries(
        {},
        optional={
            "origin": st.sampled_from(ORIGINS),
            "session": short_texts(),
            "branch": short_texts(),
            "cwd": short_texts(),
        },
    ).map(lambda kwargs: Source(**kwargs))


def content_hashes(content: str | None = None) -> st.SearchStrategy[str]:
    """``sha256:<64 lowercase hex>`` (now and then ``blake3:``): of ``content`` when
    given (``ArtifactRef`` checks that they match), else any digest."""
    if content is not None:
        data = content.encode("utf-8")
        return st.sampled_from(
            [
                f"sha256:{hashlib.sha256(data).hexdigest()}",
                f"blake3:{blake3.blake3(data).hexdigest()}",
            ]
        )
    digest = st.binary(min_size=32, max_size=32).map(bytes.hex)
    return st.one_of(
        digest.map(lambda h: f"sha256:{h}"),
        digest.map(lambda h: f"blake3:{h}"),
    )


def memory_ids() -> st.SearchStrategy[bytes]:
    """16-byte memory ids."""
    return st.binary(min_size=ID_SIZE, max_size=ID_SIZE)


def cited_uris() -> st.SearchStrategy[str]:
    """Memory URI strings, pinned or not, as ``Attest.cited`` holds them."""
    return st.builds(
        lambda actor, ns, mid, version: (
            f"cx://{actor}/{ns}/{mid.hex()}" + ("" if version is None else f"@{version}")
        ),
        names(),
        names(),
        memory_ids(),
        st.one_of(st.none(), st.integers(1, 2**32 - 1)),
    )


def weight_vectors() -> st.SearchStrategy[tuple[int, ...]]:
    """Five non-negative integers (ppm) summing to 1_000_000."""
    cuts = st.lists(
        st.integers(0, WEIGHT_TOTAL), min_size=WEIGHT_COUNT - 1, max_size=WEIGHT_COUNT - 1
    ).map(sorted)
    return st.one_of(
        cuts.map(lambda c: tuple(b - a for a, b in zip([0, *c], [*c, WEIGHT_TOTAL], strict=True))),
        st.sampled_from([(WEIGHT_TOTAL, 0, 0, 0, 0), (200_000,) * WEIGHT_COUNT]),
    )


def _specific(cls: type[Memory]) -> dict[str, st.SearchStrategy[Any]]:
    """Optional type-specific fields."""
    if cls is Goal:
        return {"status": st.sampled_from(GOAL_STATUSES), "due": _optional_instant()}
    if cls is Event:
        return {
            "channel": short_texts(),
            "occurred_at": _optional_instant(),
            "agent_id": short_texts(),
            "speaker": short_texts(),
            "kind": short_texts(),
            "call_id": short_texts(),
        }
    if cls is ArtifactRef:
        return {"path": short_texts(), "media_type": short_texts()}
    if cls is LearnWeights:
        return {
            "attest": st.one_of(st.none(), cited_uris()),
            "text": texts(required=False),
        }
    if cls is Attest:
        return {"text": texts(required=False)}
    return {}


def _required(cls: type[Memory], text_size: int) -> dict[str, st.SearchStrategy[Any]]:
    if cls is Attest:
        return {
            "cited": st.lists(cited_uris(), min_size=1, max_size=3),
            "outcome": st.sampled_from(OUTCOMES),
        }
    if cls is LearnWeights:
        return {"weights": st.one_of(weight_vectors(), weight_vectors().map(list))}
    return {"text": texts(max_size=text_size)}


@st.composite
def memory_kwargs(draw: st.DrawFn, cls: type[Memory], *, text_size: int = 24) -> dict[str, Any]:
    """Keyword arguments for ``cls(**kwargs)``: every required field and any subset of
    the optional ones, as a caller might pass them (lists, mixed-case tags, NFD text)."""
    optional: dict[str, st.SearchStrategy[Any]] = {
        "summary": short_texts(),
        "tags": tag_lists(),
        "confidence": confidences(),
        "priority": st.integers(1, 10),
        "pinned": st.booleans(),
        "source": st.one_of(st.none(), sources()),
        **_specific(cls),
    }
    kwargs = draw(st.fixed_dictionaries(_required(cls, text_size), optional=optional))
    if cls is ArtifactRef:
        # raw content is stored byte-exact (no NFC); "" means none
        content = draw(st.one_of(st.none(), st.just(""), texts(max_size=40, required=False)))
        if content is not None:
            kwargs["content"] = content
        if draw(st.booleans()):
            kwargs["content_hash"] = draw(content_hashes(content or None))
    valid_from, valid_to = draw(_intervals())
    if valid_from is not None:
        kwargs["valid_from"] = valid_from
    if valid_to is not None:
        kwargs["valid_to"] = valid_to
    return kwargs


def memories(*types: type[Memory], text_size: int = 24) -> st.SearchStrategy[Memory]:
    """Valid memories of the given types (all nine by default)."""
    chosen = types or MEMORY_TYPES
    return st.one_of(
        *(
            memory_kwargs(cls, text_size=text_size).map(lambda kw, cls=cls: cls(**kw))
            for cls in chosen
        )
    )


def memory_changes() -> st.SearchStrategy[dict[str, Any]]:
    """One to three changes to common fields that are valid for every memory type."""
    fields: dict[str, st.SearchStrategy[Any]] = {
        "text": texts(max_size=12),
        "summary": short_texts(),
        "tags": tag_lists(max_tags=3),
        "confidence": confidences(),
        "priority": st.integers(1, 10),
        "pinned": st.booleans(),
    }
    return st.sets(st.sampled_from(sorted(fields)), min_size=1, max_size=3).flatmap(
        lambda keys: st.fixed_dictionaries({key: fields[key] for key in sorted(keys)})
    )


def cbor_values() -> st.SearchStrategy[Any]:
    """Values in the domain ``core.codec.encode`` accepts, nested."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**64), 2**64 - 1),
        st.sampled_from([0, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, -1, -24, -25]),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from([-0.0, 5e-324, 6e-8, 5.960464477539063e-08, 65504.0, 65520.0, 1e300]),
        st.text(_UTF8_CHARS),
        st.binary(),
    )
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.lists(children, max_size=4).map(tuple),
            st.dictionaries(st.text(_UTF8_CHARS, max_size=6), children, max_size=4),
        ),
        max_leaves=12,
    )


@st.composite
def entries(draw: st.DrawFn, *, body_bytes: bool | None = None) -> Entry:
    """Journal entries of every op that ``decode_entry`` accepts.

    ``body_bytes``: ``True`` gives write/update entries that carry their memory and
    canonical body bytes (the writer's fast path), ``False`` ones that do not, ``None``
    either.
    """
    op = draw(st.sampled_from(OPS))
    fields: dict[str, Any] = {}
    if op in ("edge", "unedge"):
        fields["src"] = draw(memory_ids())
        fields["dst"] = draw(memory_ids())
        fields["rel"] = draw(st.sampled_from(RELATIONS))
        if op == "edge":
            fields["strength"] = draw(st.integers(0, 1_000_000))
            fields["status"] = draw(st.sampled_from(EDGE_STATUSES))
            fields["origin"] = draw(st.sampled_from(ORIGINS))
    elif op == "access":
        fields["ids"] = sorted(draw(st.sets(memory_ids(), min_size=1, max_size=5)))
    else:
        fields["id"] = draw(memory_ids())
        if op == "status":
            fields["status"] = draw(st.sampled_from(["active", "archived", "pruned", "merged"]))
    memory = raw = None
    if op in ("update", "head"):
        fields["version"] = draw(st.integers(1, 2**32 - 1))
    if op in ("write", "update"):
        memory = draw(memories(text_size=8))
        fields["body"], raw = encode_body(memory)
        if body_bytes is False or (body_bytes is None and draw(st.booleans())):
            memory = raw = None
    if op == "tombstone":
        reason = draw(st.one_of(st.none(), short_texts().filter(bool)))
        if reason:
            fields["reason"] = reason
    return Entry(
        draw(st.integers(1, 2**64 - 1)),
        draw(st.integers(0, 2**64 - 1)),
        op,
        draw(names()),
        fields,
        memory,
        raw,
    )
