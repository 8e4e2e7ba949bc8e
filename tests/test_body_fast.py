"""The fast paths of ``core.body`` agree with the reference paths.

``memory_from_body`` first tries a builder generated per class at import; anything it is
not sure of goes to the reference path (the attrs constructors behind ``_guarded``). So a
valid body must give an object equal to the reference path's, and an invalid one the
same ``ValidationError`` (field and message). ``encode_body`` likewise runs a generated
encoder that must give exactly the map (keys in the same order) and bytes of the
record's ``canonical_map`` under the generic canonical encoder.
"""

from __future__ import annotations

import math
import types
from typing import Any

import attrs
import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortexgraph.core import body as body_module
from cortexgraph.core.body import encode_body, memory_from_body, memory_to_body
from cortexgraph.core.codec import decode_unchecked
from cortexgraph.core.taxonomy import (
    MAX_SHORT_TEXT,
    MAX_TEXT_BYTES,
    MEMORY_TYPES,
    Fact,
    Memory,
    Source,
    memory_fields,
    memory_from_map,
)
from cortexgraph.errors import ValidationError
from strategies import memories, memory_kwargs


def outcome(build: Any, body: Any) -> tuple[Any, ...]:
    try:
        memory = build(body)
    except ValidationError as exc:
        return ("error", type(exc), exc.field, str(exc))
    return ("ok", type(memory), memory)


def assert_same(body: Any) -> tuple[Any, ...]:
    fast = outcome(memory_from_body, body)
    reference = outcome(memory_from_map, body)
    assert fast == reference
    if fast[0] == "ok":  # equal, and equal down to the canonical bytes (-0.0, NFC, ...)
        assert encode_body(fast[2]) == encode_body(reference[2])
    return fast


def plain(value: Any) -> Any:
    """A deep copy of a body, so mutating it leaves the original alone."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


# -- valid bodies -----------------------------------------------------------------------


@given(memories())
def test_valid_bodies_build_equal_objects(memory: Memory) -> None:
    body, raw = encode_body(memory)
    for candidate in (body, decode_unchecked(raw)):
        result = assert_same(candidate)
        assert result == ("ok", type(memory), memory)
        # the generated builder itself accepts it (no silent fallback on valid bodies)
        built = body_module._BUILDERS[memory.type_name](candidate)
        assert built == memory and type(built) is type(memory)


@given(st.sampled_from(MEMORY_TYPES).flatmap(memory_kwargs), st.data())
def test_caller_style_bodies_agree(kwargs: dict[str, Any], data: st.DataObject) -> None:
    """Non-canonical but valid input: NFD text, mixed-case tags, int confidence, tuples."""
    cls = data.draw(
        st.sampled_from([c for c in MEMORY_TYPES if set(kwargs) <= set(memory_fields(c))])
    )
    body: dict[str, Any] = {"type": cls.type_name, **kwargs}
    source = body.get("source")
    if isinstance(source, Source) and data.draw(st.booleans()):
        body["source"] = attrs.asdict(source)
    assert_same(body)


@given(memories())
def test_encoders_agree(memory: Memory) -> None:
    fast_body, fast_bytes = encode_body(memory)
    ref_body, ref_bytes = body_module._encode_body_reference(memory)
    assert fast_bytes == ref_bytes == cbor2.dumps(ref_body, canonical=True)
    assert list(fast_body.items()) == list(ref_body.items())


def test_encoders_agree_without_validation() -> None:
    """Memories built with validators off hold odd values; both encoders still agree."""
    odd: list[dict[str, Any]] = [
        {"text": "", "priority": 0, "pinned": True, "confidence": -0.0},
        {"text": "x", "tags": (), "summary": "", "valid_from": 0, "confidence": math.nan},
        {"text": "x", "tags": ("b", "a"), "priority": -3, "source": Source()},
        {"text": "x", "summary": b"raw", "valid_to": 2**64 - 1, "confidence": 1},
    ]
    with attrs.validators.disabled():
        for kwargs in odd:
            memory = Fact(**kwargs)
            assert encode_body(memory) == body_module._encode_body_reference(memory)
            fast = encode_body(memory)
            reference = body_module._encode_body_reference(memory)
            assert list(fast[0].items()) == list(reference[0].items())
        for source in ("a string", 7, ("a",)):
            memory = Fact(text="x", source=source)
            with pytest.raises(AttributeError):
                body_module._encode_body_reference(memory)
            with pytest.raises(AttributeError):
                encode_body(memory)


# -- invalid bodies ---------------------------------------------------------------------

_LONG_ASCII = "x" * (MAX_TEXT_BYTES + 1)
_LONG_UTF8 = "é" * (MAX_TEXT_BYTES // 2 + 1)

BAD_LIST: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    11,
    2**63,
    2**64,
    -0.0,
    0.0,
    0.5,
    1.5,
    -0.5,
    math.nan,
    math.inf,
    -math.inf,
    "",
    " ",
    "\t\n",
    "a\nb",
    "a\rb",
    "\ud800",
    "bad\udfffvalue",
    "x" * (MAX_SHORT_TEXT + 1),
    _LONG_ASCII,
    _LONG_UTF8,
    "active",
    "success",
    "human",
    "sha256:" + "0" * 64,
    "SHA256:" + "0" * 64,
    b"bytes",
    [],
    ["A"],
    ["a b"],
    ["tab\there"],
    ["\x7f"],
    ["\ud800"],
    [1],
    ["x" * 65],
    [""],
    [f"t{i}" for i in range(65)],
    ["t"] * 65,
    ["cx://a/b/" + "0" * 32],
    [1_000_000, 0, 0, 0, 0],
    [1_000_000, 0, 0, 0],
    [999_999, 1, 0, 0, -0],
    [500_000.0, 500_000, 0, 0, 0],
    (),
    ("a",),
    {},
    {"origin": "llm"},
    {"origin": "robot"},
    {"bogus": "x"},
    {1: "x"},
    {"session": "\ud800"},
    {"cwd": "a\nb"},
    {"branch": ""},
    cbor2.CBORTag(1, 0),
    Source(),
]
BAD_VALUES = st.sampled_from(BAD_LIST)


@st.composite
def mutated_bodies(draw: st.DrawFn) -> dict[Any, Any]:
    memory = draw(memories())
    body = plain(
        draw(st.sampled_from([encode_body(memory)[0], decode_unchecked(encode_body(memory)[1])]))
    )
    names = [*memory_fields(type(memory)), "type"]
    how = draw(
        st.sampled_from(["set", "delete", "unknown", "type", "source", "source_key", "key", "tag"])
    )
    if how == "set":
        body[draw(st.sampled_from(names))] = draw(BAD_VALUES)
    elif how == "delete":
        body.pop(draw(st.sampled_from(names)), None)
    elif how == "unknown":
        body[draw(st.sampled_from(["bogus", "Text", "id", "status", "cited", "origin"]))] = 1
    elif how == "type":
        body["type"] = draw(st.sampled_from(["nope", "Fact", 4, None, ["fact"], "memory"]))
    elif how == "source":
        source = body.setdefault("source", {})
        if isinstance(source, dict):
            source[draw(st.sampled_from(["origin", "session", "branch", "cwd"]))] = draw(BAD_VALUES)
    elif how == "source_key":
        body["source"] = {
            **(body.get("source") or {}),
            draw(st.sampled_from(["bogus", 1, b"k"])): "x",
        }
    elif how == "key":
        body[draw(st.sampled_from([1, b"text", None, ("a",)]))] = "x"
    else:
        tags = list(body.get("tags") or ["ok"])
        tags[draw(st.integers(0, len(tags) - 1))] = draw(BAD_VALUES)
        body["tags"] = tags
    return body


@settings(max_examples=400)
@given(mutated_bodies())
def test_invalid_bodies_raise_the_same_error(body: dict[Any, Any]) -> None:
    assert_same(body)


_RICH: dict[str, dict[str, Any]] = {
    name: {
        "type": name,
        "text": "Some Text",
        "summary": "sum",
        "tags": ["b", "a"],
        "confidence": 0.5,
        "priority": 3,
        "pinned": True,
        "valid_from": 5,
        "valid_to": 9,
        "source": {"origin": "llm", "session": "s", "branch": "main", "cwd": "/w"},
    }
    for name in ("goal", "preference", "constraint", "fact", "pattern", "event", "artifact_ref")
}
_RICH["goal"].update(status="blocked", due=7)
_RICH["event"].update(channel="c", occurred_at=1, agent_id="a", speaker="s", kind="k", call_id="i")
_RICH["artifact_ref"].update(
    path="p",
    media_type="m",
    content="abc",
    content_hash="sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
)
_RICH["attest"] = {
    **_RICH["fact"],
    "type": "attest",
    "text": "",
    "cited": ["cx://a/b/c"],
    "outcome": "failure",
}
_RICH["learn_weights"] = {
    **_RICH["fact"],
    "type": "learn_weights",
    "text": "t",
    "weights": [1_000_000, 0, 0, 0, 0],
    "attest": "cx://a/b/c",
}


@pytest.mark.parametrize("name", sorted(_RICH))
def test_every_field_with_every_bad_value(name: str) -> None:
    """Deterministic and exhaustive: each field (and source field, and tag) of a body that
    sets every field, replaced or removed, one at a time."""
    base = _RICH[name]
    assert assert_same(base)[0] == "ok"
    for field in [*base, "bogus"]:
        body = plain(base)
        body.pop(field, None)
        assert_same(body)
        for value in BAD_LIST:
            body = plain(base)
            body[field] = value
            assert_same(body)
            if field == "source":
                for key in ("origin", "session", "branch", "cwd", "bogus"):
                    body = plain(base)
                    body["source"][key] = value
                    assert_same(body)
            if field == "tags":
                body = plain(base)
                body["tags"].append(value)
                assert_same(body)
                body["tags"] = [value]
                assert_same(body)


@pytest.mark.parametrize(
    "tags", [["B", "a"], ["A", "a", "b"], ["Mixed-Case", "mixed-case"], ["z", "Y", "x"], []]
)
def test_ascii_tags_are_normalised(tags: list[str]) -> None:
    result = assert_same({"type": "fact", "text": "x", "tags": tags})
    assert result[2].tags == tuple(sorted({t.lower() for t in tags}))


class _Str(str):
    __slots__ = ()


@pytest.mark.parametrize(
    "body",
    [
        {"type": "fact", _Str("text"): "x"},
        {"type": "fact", "text": _Str("x")},
        {"type": "fact", "text": "x", "tags": [_Str("a")]},
        {"type": "fact", "text": "x", "source": {_Str("origin"): "llm"}},
        {"type": "fact", "text": "x", "source": {"origin": _Str("llm")}},
        {"type": _Str("fact"), "text": "x"},
        {"type": "fact", "text": "x", "priority": True},
        {"type": "fact", "text": "x", "confidence": 1},
        {"type": "fact", "text": "x", "confidence": True},
        {"type": "fact", "text": "x", "valid_from": 5, "valid_to": 4},
        {"type": "fact", "text": "x", "valid_from": 5, "valid_to": 5},
        {"type": "fact", "text": "x", "valid_to": 4},
        {"type": "fact", "text": "x", "valid_from": "5", "valid_to": 4},
        {"type": "fact", "text": "x", "valid_from": 6, "valid_to": 2**63},
        {
            "type": "artifact_ref",
            "text": "x",
            "content": "abc",
            "content_hash": "sha256:" + "0" * 64,
        },
        {"type": "artifact_ref", "text": "x", "content_hash": "sha256:" + "0" * 64},
        {"type": "attest", "cited": ("cx://a/b/c",), "outcome": "success"},
        {"type": "attest", "cited": [], "outcome": "success"},
        {"type": "attest", "outcome": "success"},
        {"type": "learn_weights", "weights": (200_000,) * 5},
        {"type": "learn_weights", "weights": [200_000] * 5, "text": ""},
        {"type": "fact", "text": "Cafe\u0301", "tags": ["ÉTÉ", "été", "ß"], "summary": "e\u0301"},
        {"type": "fact", "text": "x", "tags": ("B", "a", "b")},
        {"type": "fact", "text": "x", "tags": {"b", "a"}},
        {"type": "fact", "text": "x", "source": None, "summary": None, "pinned": False},
        {"type": "fact", "text": "x", "source": Source(origin="llm")},
        {"type": "fact", "text": "x", "source": types.MappingProxyType({"origin": "llm"})},
        {"type": "fact", "text": "x", "source": ["origin"]},
    ],
)
def test_edge_bodies_agree(body: dict[Any, Any]) -> None:
    assert_same(body)


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        "fact",
        types.MappingProxyType({"type": "fact", "text": "x"}),
        {},
        {"text": "x"},
    ],
)
def test_non_dict_bodies_agree(body: Any) -> None:
    assert_same(body)


def test_public_constructors_unchanged() -> None:
    """The attrs classes keep their guarded constructors."""
    with pytest.raises(ValidationError) as info:
        Fact(text="x", bogus=1)  # type: ignore[call-arg]
    assert info.value.field == "bogus"
    with pytest.raises(ValidationError) as info:
        Fact()  # type: ignore[call-arg]
    assert info.value.field == "text"
    fact = Fact(text="x", tags=["B", "a"])
    assert memory_from_body(encode_body(fact)[0]) == fact


def test_cached_sources_check_exact_types() -> None:
    """A source map equal to a cached one but holding str subclasses is not a cache hit."""
    assert_same({"type": "fact", "text": "x", "source": {"origin": "llm", "session": "s-9"}})
    assert_same({"type": "fact", "text": "x", "source": {"origin": _Str("llm"), "session": "s-9"}})
    assert_same({"type": "fact", "text": "x", "source": {_Str("origin"): "llm", "session": "s-9"}})
    assert_same({"type": "fact", "text": "x", "source": {"origin": "llm", "session": _Str("s-9")}})
    assert_same({"type": "fact", "text": "x", "source": {"origin": "llm", "session": ["s-9"]}})


def test_source_caches_stay_bounded_and_correct() -> None:
    for i in range(body_module._CACHE_LIMIT + 10):
        body = {"type": "fact", "text": "x", "source": {"origin": "human", "session": f"s{i}"}}
        memory = memory_from_body(body)
        assert memory.source == Source(origin="human", session=f"s{i}")
        assert encode_body(memory) == body_module._encode_body_reference(memory)
    assert len(body_module._SOURCES) <= body_module._CACHE_LIMIT
    assert len(body_module._SOURCE_ENCODINGS) <= body_module._CACHE_LIMIT


def test_bodies_do_not_share_source_maps() -> None:
    """Changing a returned body leaves the next one (and the memoised encoding) alone."""
    body = {"type": "fact", "text": "x", "source": {"origin": "llm", "cwd": "/w"}}
    memory = memory_from_body(body)
    first = memory_to_body(memory)
    first["source"]["origin"] = "changed"
    assert memory_to_body(memory)["source"] == {"origin": "llm", "cwd": "/w"}
    assert encode_body(memory) == body_module._encode_body_reference(memory)
