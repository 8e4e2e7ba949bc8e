"""Exact boundaries and guards that a mutation run found unguarded: each test here fails
when one comparison, constant or guard of the code is changed (see docs/testing.md)."""

from __future__ import annotations

from pathlib import Path

import cbor2
import pytest

import cortexgraph as cg
from cortexgraph.core.body import encode_body
from cortexgraph.core.query import Or
from cortexgraph.core.taxonomy import MAX_TAGS, MAX_TEXT_BYTES

T0 = 1_700_000_000_000


@pytest.mark.parametrize("count", [22, 23, 24, 25, MAX_TAGS])
def test_bodies_with_arrays_around_the_one_byte_head_limit(count: int) -> None:
    """CBOR gives arrays of up to 23 items a one-byte head and longer ones a two-byte
    head: a memory with 22 to 25 (and the most) tags encodes to exactly cbor2's canonical
    bytes."""
    tags = [f"t{i:02d}" for i in range(count)]
    memory = cg.Fact(text="tagged", tags=tags)
    _, body = encode_body(memory)
    assert body == cbor2.dumps(memory.to_dict(), canonical=True)


def test_text_of_exactly_the_largest_size_is_accepted_and_one_byte_more_is_not() -> None:
    """Text may be 1 MiB of UTF-8, not a byte more (in characters of several bytes too)."""
    assert len(cg.Fact(text="x" * MAX_TEXT_BYTES).text) == MAX_TEXT_BYTES
    with pytest.raises(cg.ValidationError, match="longer than"):
        cg.Fact(text="x" * (MAX_TEXT_BYTES + 1))
    two_bytes = "é" * (MAX_TEXT_BYTES // 2)  # exactly 1 MiB of UTF-8
    assert cg.Fact(text=two_bytes).text == two_bytes
    with pytest.raises(cg.ValidationError, match="longer than"):
        cg.Fact(text=two_bytes + "x")


def test_an_or_of_fewer_than_two_parts_is_refused() -> None:
    """``Or`` is built by ``|`` and ``Q.any_of``; built by hand with one part it refuses
    (``Q.any_of`` of one predicate returns that predicate instead)."""
    with pytest.raises(TypeError, match="at least two"):
        Or((cg.Q.tag("a"),))
    assert cg.Q.any_of(cg.Q.tag("a")) == cg.Q.tag("a")


def test_taking_a_snapshot_twice_at_one_seq_returns_the_stored_one(tmp_path: Path) -> None:
    """A second snapshot at the same seq returns the manifest stored first (its ``at``),
    and stores nothing new."""
    with cg.open(tmp_path, "a", sync=False) as cx:
        cx.write(cg.Fact(text="one"), at=T0)
        first = cx.snapshot(at=T0 + 1)
        again = cx.snapshot(at=T0 + 2)
        assert again == first and again.at == T0 + 1
        assert cx.snapshots() == [first]
