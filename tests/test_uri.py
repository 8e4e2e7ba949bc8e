"""Memory URIs: one string per memory version, fragments and malformed input rejected."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cortexgraph as cg

names = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,63}", fullmatch=True)


@given(
    actor=names,
    ns=names,
    memory_id=st.binary(min_size=16, max_size=16),
    version=st.none() | st.integers(1, 2**32 - 1),
)
def test_parse_inverts_format(actor: str, ns: str, memory_id: bytes, version: int | None) -> None:
    """str() and parse() are inverse: every URI has exactly one string form."""
    uri = cg.MemoryURI(actor, ns, memory_id, version)
    text = str(uri)
    assert cg.MemoryURI.parse(text) == uri
    assert str(cg.MemoryURI.parse(text)) == text


def test_known_uri_form() -> None:
    """The documented layout cx://actor/ns/id-hex@version."""
    uri = cg.MemoryURI("agent", "default", bytes(range(16)), 3)
    assert str(uri) == "cx://agent/default/000102030405060708090a0b0c0d0e0f@3"
    assert str(uri.head) == "cx://agent/default/000102030405060708090a0b0c0d0e0f"
    assert uri.head.at_version(3) == uri
    assert uri.id_hex == "000102030405060708090a0b0c0d0e0f"


GOOD_ID = "000102030405060708090a0b0c0d0e0f"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f"cx://agent/default/{GOOD_ID}#latest", "fragments"),
        (f"cx://agent/default/{GOOD_ID}@2#x", "fragments"),
        (f"cx://agent/default/{GOOD_ID}#", "fragments"),
        (f"cx://agent/default/{GOOD_ID}?v=2", "query"),
        (f"cx://agent/default/{GOOD_ID}@0", "leading zeros"),
        (f"cx://agent/default/{GOOD_ID}@01", "leading zeros"),
        (f"cx://agent/default/{GOOD_ID}@-1", "leading zeros"),
        (f"cx://agent/default/{GOOD_ID}@", "leading zeros"),
        (f"cx://agent/default/{GOOD_ID}@4294967296", "leading zeros"),
        (f"cx://agent/default/{GOOD_ID.upper()}", "32 lowercase hex"),
        (f"cx://agent/default/{GOOD_ID[:-1]}", "32 lowercase hex"),
        (f"cx://agent/default/{GOOD_ID}0", "32 lowercase hex"),
        (f"cx://Agent/default/{GOOD_ID}", "actor"),
        (f"cx://agent//{GOOD_ID}", "ns"),
        (f"cx://agent/default/{GOOD_ID}/extra", "expected cx://"),
        (f"http://agent/default/{GOOD_ID}", "expected cx://"),
        (f"cx:/agent/default/{GOOD_ID}", "expected cx://"),
        ("", "expected cx://"),
    ],
)
def test_malformed_uris_are_rejected(text: str, words: str) -> None:
    """Each malformed URI raises URIError (a ValidationError on field 'uri') saying why."""
    with pytest.raises(cg.URIError, match=words) as caught:
        cg.MemoryURI.parse(text)
    assert caught.value.field == "uri"


def test_non_string_is_rejected() -> None:
    """Parsing something that is not a string is a URIError, not an AttributeError."""
    with pytest.raises(cg.URIError):
        cg.MemoryURI.parse(b"cx://a/b/c")  # type: ignore[arg-type]


def test_constructor_validates() -> None:
    """A MemoryURI cannot be built with bad parts either."""
    with pytest.raises(cg.ValidationError, match="16 bytes"):
        cg.MemoryURI("agent", "default", b"short")
    with pytest.raises(cg.ValidationError):
        cg.MemoryURI("agent", "default", bytes(16), 0)
    with pytest.raises(cg.ValidationError):
        cg.MemoryURI("Agent", "default", bytes(16))


@pytest.mark.parametrize(
    ("parts", "field"),
    [
        (("agent", "Bad NS", bytes(16)), "ns"),
        (("agent", "", bytes(16)), "ns"),
        (("agent", "x" * 65, bytes(16)), "ns"),
        (("", "default", bytes(16)), "actor"),
        (("agent", "default", bytes(16), 2**40), "version"),
    ],
)
def test_constructor_names_the_bad_part(parts: tuple[object, ...], field: str) -> None:
    """Each part is checked by its own rule, and the error names that part."""
    with pytest.raises(cg.ValidationError) as caught:
        cg.MemoryURI(*parts)  # type: ignore[arg-type]
    assert caught.value.field == field
