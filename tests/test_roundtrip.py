"""Round trips that must give identical bytes, and the J6 checks that reject everything else.

Covers: memory bodies of all nine types (``core.taxonomy``), the canonical CBOR codec
(``core.codec``), journal entries (``core.journal``) and the fixed-width derived records
(``core.state``). The oracle for canonical bytes is ``cbor2.dumps(..., canonical=True)``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import cbor2
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cortexgraph.core import codec
from cortexgraph.core.body import encode_body, memory_from_body, memory_to_body
from cortexgraph.core.journal import ENTRY_VERSION, decode_entry, encode_entry
from cortexgraph.core.state import STATUSES, HeadState, VersionState, memory_from_stored
from cortexgraph.core.taxonomy import (
    MAX_TEXT_BYTES,
    MEMORY_TYPES,
    ArtifactRef,
    Attest,
    Fact,
    LearnWeights,
    Memory,
    Source,
)
from cortexgraph.errors import CorruptionError, ValidationError
from strategies import cbor_values, entries, memories, names

MIB = MAX_TEXT_BYTES
assert MIB == 1_048_576
ROCKET = "🚀"  # 4 bytes of UTF-8
#: "Unicode" in Fraktur and a rocket: non-BMP characters, 4 bytes each in UTF-8
NON_BMP = "\U0001d518\U0001d52b\U0001d526\U0001d520\U0001d52c\U0001d521\U0001d522 🚀"
URI = "cx://agent/default/" + "ab" * 16 + "@1"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _plain(value: Any) -> Any:
    """``value`` as it decodes: tuples become lists."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _assert_round_trip(memory: Memory) -> None:
    body, raw = encode_body(memory)
    assert raw == cbor2.dumps(body, canonical=True)
    assert raw == codec.encode(memory_to_body(memory))
    for decoded in (codec.decode(raw), cbor2.loads(raw)):
        assert decoded == body
        again = memory_from_body(decoded)
        assert again == memory
        assert encode_body(again)[1] == raw
    assert memory_from_stored(raw, "a test body") == memory


# ---------------------------------------------------------------------------
# Memory bodies


@pytest.mark.parametrize("cls", MEMORY_TYPES, ids=lambda cls: cls.type_name)
@given(data=st.data())
def test_every_type_round_trips_to_identical_bytes(cls: type[Memory], data: st.DataObject) -> None:
    """For each of the nine types: encode_body -> decode (codec and plain cbor2) ->
    memory_from_body -> encode_body gives the same bytes and an equal memory, and the
    stored-body path (memory_from_stored) accepts the bytes."""
    _assert_round_trip(data.draw(memories(cls)))


@given(memories())
@example(Fact(text="x", confidence=-0.0))
@example(Fact(text="x", tags=[]))
@example(Fact(text="x", tags=(), summary="", source=Source()))
@example(Fact(text="a" * MIB))
@example(Fact(text=ROCKET * (MIB // 4)))
@example(ArtifactRef(text="x", content="b" * MIB, content_hash=f"sha256:{_sha256('b' * MIB)}"))
@example(Fact(text=NON_BMP, tags=[ROCKET, "\U0001d518", "\U0001d518"], summary=NON_BMP))
@example(Attest(cited=[URI], outcome="success", confidence=0))
@example(LearnWeights(weights=[1_000_000, 0, 0, 0, 0], confidence=1))
def test_pinned_memories_round_trip(memory: Memory) -> None:
    """The byte round trip holds for pinned corner cases: -0.0 and int confidences,
    empty tags and empty optionals, text of exactly 1 MiB of UTF-8 (ASCII and 4-byte
    characters), 1 MiB of artifact content, and non-BMP characters."""
    _assert_round_trip(memory)


@pytest.mark.parametrize("cls", MEMORY_TYPES, ids=lambda cls: cls.type_name)
@pytest.mark.parametrize("unit", ["a", ROCKET], ids=["ascii", "non-bmp"])
def test_text_limit_is_exactly_one_mib_of_utf8(cls: type[Memory], unit: str) -> None:
    """``text`` may hold exactly 1 MiB of UTF-8 (counted in bytes, not characters);
    one byte more is a ValidationError naming ``text``."""
    extra: dict[str, Any] = {}
    if cls is Attest:
        extra = {"cited": [URI], "outcome": "failure"}
    elif cls is LearnWeights:
        extra = {"weights": [200_000] * 5}
    fits = unit * (MIB // len(unit.encode("utf-8")))
    assert len(fits.encode("utf-8")) == MIB
    assert cls(text=fits, **extra).text == fits
    with pytest.raises(ValidationError) as info:
        cls(text=fits + "a", **extra)
    assert info.value.field == "text"


def test_artifact_content_limit_is_one_mib() -> None:
    """``ArtifactRef.content`` has the same 1 MiB limit as ``text``."""
    assert len(ArtifactRef(text="x", content=ROCKET * (MIB // 4)).content or "") == MIB // 4
    with pytest.raises(ValidationError) as info:
        ArtifactRef(text="x", content=ROCKET * (MIB // 4) + "a")
    assert info.value.field == "content"


@pytest.mark.parametrize(
    ("given_kwargs", "normal_kwargs"),
    [
        ({"text": "cafe\u0301"}, {"text": "café"}),
        ({"text": "\u1100\u1161"}, {"text": "가"}),
        ({"text": "x", "tags": ["B", "a", "b", "A"]}, {"text": "x", "tags": ["a", "b"]}),
        ({"text": "x", "tags": ["Cafe\u0301"]}, {"text": "x", "tags": ["café"]}),
        ({"text": "x", "confidence": -0.0}, {"text": "x", "confidence": 0.0}),
        ({"text": "x", "confidence": 1}, {"text": "x", "confidence": 1.0}),
        ({"text": "x", "confidence": 0}, {"text": "x", "confidence": 0.0}),
        ({"text": "x", "summary": ""}, {"text": "x"}),
        ({"text": "x", "source": Source(session="")}, {"text": "x", "source": Source()}),
    ],
)
def test_normalisation_gives_one_encoding(
    given_kwargs: dict[str, Any], normal_kwargs: dict[str, Any]
) -> None:
    """Inputs that differ only in normal form (NFD vs NFC, tag case and order and
    duplicates, -0.0 and int confidences, empty vs absent) give equal memories and
    identical body bytes."""
    assert Fact(**given_kwargs) == Fact(**normal_kwargs)
    assert encode_body(Fact(**given_kwargs))[1] == encode_body(Fact(**normal_kwargs))[1]


# ---------------------------------------------------------------------------
# The codec


@given(cbor_values())
@example(-0.0)
@example(5e-324)
@example(5.960464477539063e-08)
@example(1e300)
@example(2**64 - 1)
@example(-(2**64))
@example({"aa": 1, "b": 2, "": None})
@example([])
@example({})
@example("")
def test_encode_trusted_equals_cbor2_canonical(value: Any) -> None:
    """``encode_trusted`` and ``encode`` produce exactly ``cbor2.dumps(v, canonical=True)``
    over the whole storable domain, and ``decode`` accepts those bytes and gives the
    value back."""
    expected = cbor2.dumps(value, canonical=True)
    assert codec.encode_trusted(value) == expected
    assert codec.encode(value) == expected
    assert codec.decode(expected) == _plain(value)


@pytest.mark.parametrize(
    "hex_bytes",
    [
        pytest.param("a2616201616102", id="map keys unsorted"),
        pytest.param("a262616101616202", id="map keys bytewise, not length-first"),
        pytest.param("1805", id="int 5 with a 1-byte head"),
        pytest.param("190005", id="int 5 with a 2-byte head"),
        pytest.param("1a00000005", id="int 5 with a 4-byte head"),
        pytest.param("1b0000000000000005", id="int 5 with an 8-byte head"),
        pytest.param("1900ff", id="int 255 with a 2-byte head"),
        pytest.param("3800", id="int -1 with a 1-byte head"),
        pytest.param("780161", id="text length with a 1-byte head"),
        pytest.param("580100", id="bytes length with a 1-byte head"),
        pytest.param("980101", id="array length with a 1-byte head"),
        pytest.param("b801616101", id="map length with a 1-byte head"),
        pytest.param("fb3ff0000000000000", id="float 1.0 as f64"),
        pytest.param("fa3f800000", id="float 1.0 as f32"),
        pytest.param("fb3fe0000000000000", id="float 0.5 as f64"),
        pytest.param("9f01ff", id="indefinite array"),
        pytest.param("9fff", id="empty indefinite array"),
        pytest.param("bf616101ff", id="indefinite map"),
        pytest.param("7f616161ff", id="indefinite text"),
        pytest.param("5f4100ff", id="indefinite bytes"),
        pytest.param("a2616101616101", id="duplicate map keys"),
        pytest.param("a2616101616102", id="duplicate map keys, different values"),
        pytest.param("c11a00000001", id="tag 1 (epoch datetime)"),
        pytest.param("c074323031332d30332d32315432303a30343a30305a", id="tag 0 (datetime)"),
        pytest.param("c24101", id="tag 2 (bignum 1)"),
        pytest.param("c249010000000000000000", id="tag 2 (bignum 2**64)"),
        pytest.param("d9d9f701", id="tag 55799 (self-described)"),
        pytest.param("0100", id="trailing byte"),
        pytest.param("a0a0", id="two items"),
        pytest.param("62c328", id="invalid UTF-8"),
        pytest.param("61ff", id="invalid UTF-8 byte ff"),
        pytest.param("63eda080", id="UTF-8 encoded surrogate"),
        pytest.param("a10102", id="int map key"),
        pytest.param("a1410101", id="bytes map key"),
        pytest.param("a1f601", id="null map key"),
        pytest.param("a1810101", id="array map key"),
        pytest.param("f97e00", id="NaN f16"),
        pytest.param("fa7fc00000", id="NaN f32"),
        pytest.param("fb7ff8000000000000", id="NaN f64"),
        pytest.param("f97c00", id="infinity"),
        pytest.param("f9fc00", id="-infinity"),
        pytest.param("f7", id="undefined"),
        pytest.param("f0", id="simple value 16"),
        pytest.param("", id="empty input"),
        pytest.param("6261", id="truncated text"),
        pytest.param("a16161", id="truncated map"),
    ],
)
def test_decode_rejects_non_canonical_bytes(hex_bytes: str) -> None:
    """J6: ``codec.decode`` raises CorruptionError for anything that is not the one
    canonical encoding of a storable value (non-shortest heads and floats, indefinite
    lengths, unsorted or duplicate keys, tags, trailing bytes, invalid UTF-8, non-text
    keys, NaN and infinities, other simple values, truncation)."""
    with pytest.raises(CorruptionError):
        codec.decode(bytes.fromhex(hex_bytes))


@given(st.dictionaries(st.text(max_size=4), cbor_values(), min_size=2, max_size=5))
def test_decode_rejects_any_other_key_order(value: dict[str, Any]) -> None:
    """J6: a map whose entries are in any order but the canonical one is rejected."""
    ordered = codec.canonical_keys(value)
    wrong = ordered[1:] + ordered[:1]  # a rotation: never the canonical order
    data = codec.encode_head(5, len(value)) + b"".join(
        kb + codec.encode_trusted(value[key]) for key, kb in wrong
    )
    with pytest.raises(CorruptionError):
        codec.decode(data)


@given(st.integers(0, 2**32 - 1), st.sampled_from([0, 1]))
def test_decode_rejects_every_longer_integer_head(n: int, major: int) -> None:
    """J6: an integer written with a longer head than it needs is rejected, for every
    wider head size."""
    shortest = codec.encode_head(major, n)
    codec.decode(shortest)
    for info, width in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if width + 1 <= len(shortest) or n >= 1 << (8 * width):
            continue
        longer = bytes([major << 5 | info]) + n.to_bytes(width, "big")
        with pytest.raises(CorruptionError):
            codec.decode(longer)


# ---------------------------------------------------------------------------
# Journal entries


def _entry_value(entry: Any) -> dict[str, Any]:
    return {
        "v": ENTRY_VERSION,
        "seq": entry.seq,
        "at": entry.at,
        "op": entry.op,
        "ns": entry.ns,
        **entry.fields,
    }


@given(entries())
def test_encode_entry_equals_cbor2_canonical(entry: Any) -> None:
    """``encode_entry`` equals ``cbor2.dumps({"v":1, "seq", "at", "op", "ns", **fields},
    canonical=True)``, whether or not the writer spliced in the body's bytes."""
    assert encode_entry(entry) == cbor2.dumps(_entry_value(entry), canonical=True)


@given(entries(body_bytes=True))
def test_spliced_body_bytes_change_nothing(entry: Any) -> None:
    """An entry that carries its body's canonical bytes encodes exactly like the same
    entry without them."""
    bare = type(entry)(entry.seq, entry.at, entry.op, entry.ns, entry.fields)
    assert encode_entry(entry) == encode_entry(bare)


@given(entries())
def test_decode_entry_inverts_encode_entry(entry: Any) -> None:
    """``decode_entry(encode_entry(e)) == e`` and re-encoding gives the same bytes."""
    data = encode_entry(entry)
    decoded = decode_entry(data)
    assert decoded == entry
    assert encode_entry(decoded) == data


# ---------------------------------------------------------------------------
# Derived records


@st.composite
def head_states(draw: st.DrawFn, *, reason: st.SearchStrategy[str] | None = None) -> HeadState:
    latest = draw(st.integers(1, 2**32 - 1))
    return HeadState(
        ns=draw(names()),
        type_name=draw(st.sampled_from([t.type_name for t in MEMORY_TYPES])),
        head=draw(st.integers(1, latest)),
        latest=latest,
        status=draw(st.sampled_from(STATUSES)),
        created_at=draw(st.integers(0, 2**64 - 1)),
        updated_at=draw(st.integers(0, 2**64 - 1)),
        reason=draw(st.text(max_size=12) if reason is None else reason),
    )


@given(head_states())
@example(HeadState("a", "fact", 1, 1, "active", 0, 0, ""))
@example(
    HeadState("z" * 64, "learn_weights", 2**32 - 1, 2**32 - 1, "tombstoned", 2**64 - 1, 0, NON_BMP)
)
def test_head_state_round_trips(head: HeadState) -> None:
    """``HeadState.decode(h.encode()) == h`` and the bytes are stable."""
    data = head.encode()
    assert HeadState.decode(data) == head
    assert HeadState.decode(data).encode() == data


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), memories(text_size=8))
def test_version_state_round_trips(seq: int, at: int, memory: Memory) -> None:
    """``VersionState.decode(v.encode()) == v`` and its body decodes to the memory."""
    version = VersionState(seq, at, encode_body(memory)[1])
    data = version.encode()
    assert VersionState.decode(data) == version
    assert VersionState.decode(data).memory() == memory


@given(head_states())
def test_head_state_rejects_every_truncation(head: HeadState) -> None:
    """Every strict prefix of a head record is a CorruptionError, whatever its reason
    holds: the reason is length-prefixed, so a cut anywhere is detected."""
    data = head.encode()
    for end in range(len(data)):
        with pytest.raises(CorruptionError):
            HeadState.decode(data[:end])


@given(head_states(), st.binary(min_size=1, max_size=4))
def test_head_state_rejects_trailing_bytes(head: HeadState, extra: bytes) -> None:
    """Bytes after the reason are a CorruptionError (one representation per value)."""
    with pytest.raises(CorruptionError):
        HeadState.decode(head.encode() + extra)


_GOOD_HEAD = HeadState("default", "fact", 1, 2, "active", 5, 6, "why").encode()


def _patched(offset: int, new: bytes) -> bytes:
    return _GOOD_HEAD[:offset] + new + _GOOD_HEAD[offset + len(new) :]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(_patched(0, b"\x00"), id="layout 0"),
        pytest.param(_patched(0, b"\x02"), id="layout 2"),
        pytest.param(_patched(1, b"\x00"), id="type 0"),
        pytest.param(_patched(1, b"\x0a"), id="type 10"),
        pytest.param(_patched(1, b"\xff"), id="type 255"),
        pytest.param(_patched(2, b"\x00"), id="status 0"),
        pytest.param(_patched(2, b"\x06"), id="status 6"),
        pytest.param(_patched(2, b"\xff"), id="status 255"),
        pytest.param(_patched(3, (0).to_bytes(4, "big")), id="head 0"),
        pytest.param(_patched(3, (3).to_bytes(4, "big")), id="head above latest"),
        pytest.param(_patched(27, b"\xff"), id="ns length past the end"),
        pytest.param(_patched(27, b"\x00"), id="ns empty"),
        pytest.param(_patched(28, b"D"), id="ns uppercase"),
        pytest.param(_patched(28, b"\xff"), id="ns invalid UTF-8"),
        pytest.param(_GOOD_HEAD[:-1] + b"\xff", id="reason invalid UTF-8"),
        pytest.param(_GOOD_HEAD + b"\xff", id="a byte after the reason"),
        pytest.param(_GOOD_HEAD[:-2] + b"\x00\x01" + b"w", id="reason length too short"),
    ],
)
def test_head_state_rejects_bad_bytes(data: bytes) -> None:
    """Bad layout, type or status bytes, inconsistent versions, a bad namespace and an
    invalid reason are CorruptionError, never another exception."""
    assert HeadState.decode(_GOOD_HEAD).reason == "why"
    with pytest.raises(CorruptionError):
        HeadState.decode(data)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x01", b"\x01" + bytes(16), b"\x02" + bytes(16) + b"\xa0"],
    ids=["empty", "layout only", "no body", "layout 2"],
)
def test_version_state_rejects_bad_bytes(data: bytes) -> None:
    """A version record that is too short or has an unknown layout is a CorruptionError."""
    with pytest.raises(CorruptionError):
        VersionState.decode(data)


# ---------------------------------------------------------------------------
# Stored bodies


_DROP = object()


def _fact_body(**changes: Any) -> dict[str, Any]:
    """A valid Fact body with ``changes`` applied (``_DROP`` removes a key)."""
    body = memory_to_body(Fact(text="x", tags=["a", "b"]))
    body.update(changes)
    return {k: v for k, v in body.items() if v is not _DROP}


def _unsorted_map(value: dict[str, Any]) -> bytes:
    ordered = codec.canonical_keys(value)
    return codec.encode_head(5, len(value)) + b"".join(
        kb + codec.encode_trusted(value[key]) for key, kb in reversed(ordered)
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(cbor2.dumps(_fact_body(pinned=False), canonical=True), id="pinned false"),
        pytest.param(cbor2.dumps(_fact_body(tags=["b", "a"]), canonical=True), id="unsorted tags"),
        pytest.param(cbor2.dumps(_fact_body(tags=["a", "a"]), canonical=True), id="duplicate tags"),
        pytest.param(cbor2.dumps(_fact_body(tags=["A"]), canonical=True), id="uppercase tag"),
        pytest.param(cbor2.dumps(_fact_body(tags=[]), canonical=True), id="empty tags"),
        pytest.param(cbor2.dumps(_fact_body(color="red"), canonical=True), id="unknown field"),
        pytest.param(cbor2.dumps(_fact_body(priority=0), canonical=True), id="priority 0"),
        pytest.param(cbor2.dumps(_fact_body(priority=11), canonical=True), id="priority 11"),
        pytest.param(cbor2.dumps(_fact_body(confidence=1), canonical=True), id="int confidence"),
        pytest.param(cbor2.dumps(_fact_body(confidence=-0.0), canonical=True), id="-0.0"),
        pytest.param(cbor2.dumps(_fact_body(confidence=1.5), canonical=True), id="confidence 1.5"),
        pytest.param(cbor2.dumps(_fact_body(confidence=float("nan")), canonical=True), id="NaN"),
        pytest.param(cbor2.dumps(_fact_body(summary=""), canonical=True), id="empty summary"),
        pytest.param(cbor2.dumps(_fact_body(text="cafe\u0301"), canonical=True), id="NFD text"),
        pytest.param(cbor2.dumps(_fact_body(source={}), canonical=True), id="empty source"),
        pytest.param(cbor2.dumps(_fact_body(priority=_DROP), canonical=True), id="no priority"),
        pytest.param(cbor2.dumps(_fact_body(type=_DROP), canonical=True), id="no type"),
        pytest.param(cbor2.dumps(_fact_body(type="fish"), canonical=True), id="unknown type"),
        pytest.param(cbor2.dumps(_fact_body(type="attest"), canonical=True), id="attest, no cited"),
        pytest.param(cbor2.dumps(["fact", "x"], canonical=True), id="not a map"),
        pytest.param(_unsorted_map(_fact_body()), id="unsorted keys"),
        pytest.param(cbor2.dumps(_fact_body(), canonical=True) + b"\x00", id="trailing byte"),
        pytest.param(b"", id="empty"),
    ],
)
def test_memory_from_stored_rejects_non_canonical_bodies(body: bytes) -> None:
    """J6 for stored bodies: anything but exactly the canonical body of a valid memory
    (explicit defaults, unsorted or unnormalised tags, unknown fields, out-of-range or
    non-canonical numbers, unnormalised text, bad types, wrong key order, trailing
    bytes) is a CorruptionError."""
    assert memory_from_stored(cbor2.dumps(_fact_body(), canonical=True), "ok") == Fact(
        text="x", tags=["a", "b"]
    )
    with pytest.raises(CorruptionError):
        memory_from_stored(body, "a test body")


@given(memories(text_size=8))
def test_memory_from_stored_rejects_every_truncation(memory: Memory) -> None:
    """Every strict prefix of a valid stored body is a CorruptionError."""
    raw = encode_body(memory)[1]
    for end in range(len(raw)):
        with pytest.raises(CorruptionError):
            memory_from_stored(raw[:end], "a test body")


# ---------------------------------------------------------------------------
# Regressions


@pytest.mark.parametrize(
    "tag", ["H\u0331", "J\u030c", "\u01f0".upper() + "x", "T\u0308", "W\u030a"]
)
def test_tags_with_combining_marks_round_trip(tag: str) -> None:
    """A tag whose lowercase form is not NFC ("H\\u0331" -> "h\\u0331", NFC "\\u1e96")
    normalises to a fixed point, so the body the library writes passes its own J6 check."""
    _assert_round_trip(Fact(text="x", tags=[tag]))


@pytest.mark.parametrize(
    ("memory", "field"),
    [
        pytest.param(ArtifactRef(text="x", content=""), "content", id="ArtifactRef.content"),
        pytest.param(
            LearnWeights(weights=[200_000] * 5, attest=""), "attest", id="LearnWeights.attest"
        ),
    ],
)
def test_empty_optional_strings_round_trip(memory: Memory, field: str) -> None:
    """An empty optional string is stored as absent and reads back as ``None``, so the
    memory read is equal to the one written."""
    assert getattr(memory, field) is None
    _assert_round_trip(memory)
