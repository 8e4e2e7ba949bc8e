"""The C form of the SMT's bulk update and build (``cortexgraph.core.smt_native``) against its
reference, ``core.smt_apply`` run as Python: the same root and the same rows byte for byte,
and on damaged rows the reference's own errors. Its BLAKE3 is checked against the
``blake3`` package and a published known answer.

The C form is built with the compiled modules; where it was not built from this source
(no C compiler, ``CORTEXGRAPH_PURE_PYTHON`` at build time, or a source edited since)
these tests have nothing to test and skip. In both passes of ``make pytest`` it is built.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import random
import struct
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import blake3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortexgraph import compiled
from cortexgraph.core import hashing, segments, smt_apply
from cortexgraph.core.hashing import hash_function, hash_parts, local_hash_function
from cortexgraph.core.smt_apply import smt_store_apply, smt_store_build
from cortexgraph.core.smt_store import SMT_STORE_META_KEY
from cortexgraph.errors import CorruptionError

Table = dict[bytes, bytes]
Updates = dict[bytes, bytes | None]


def _built() -> ModuleType | None:
    """The C form, if it was built from this checkout's source (in either test pass)."""
    package = Path(compiled.__file__).parent
    try:
        recorded = json.loads((package / compiled.SOURCES_FILE).read_text(encoding="utf-8"))
        if recorded.get(compiled.NATIVE) != compiled.source_digests(package)[compiled.NATIVE]:
            return None
        return importlib.import_module(compiled.NATIVE)
    except (OSError, ValueError, ImportError):
        return None


NATIVE = _built()
pytestmark = pytest.mark.skipif(
    NATIVE is None,
    reason="the C SMT is not built from this source (no C compiler, a pure-Python build, or"
    " an edit since the build)",
)


@pytest.fixture
def native(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The C form, switched on in ``smt_apply`` whichever way the modules run."""
    assert NATIVE is not None
    monkeypatch.setattr(smt_apply, "_NATIVE", NATIVE)
    yield NATIVE


class _Refused:
    """Stands in for the C form while the reference runs: any call is a test failure."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the C form was called ({name}) while the reference ran")


def reference_apply(
    monkeypatch: pytest.MonkeyPatch, table: Table, updates: Updates
) -> tuple[bytes, dict[bytes, bytes | None]]:
    with monkeypatch.context() as patch:
        patch.setattr(smt_apply, "_NATIVE", None)
        return smt_store_apply("blake3", table.get, updates)


def reference_build(
    monkeypatch: pytest.MonkeyPatch, items: list[tuple[bytes, bytes]]
) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    with monkeypatch.context() as patch:
        patch.setattr(smt_apply, "_NATIVE", None)
        return smt_store_build("blake3", items)


def applied(table: Table, writes: dict[bytes, bytes | None]) -> Table:
    out = dict(table)
    for row, value in writes.items():
        if value is None:
            del out[row]
        else:
            out[row] = value
    return out


# ----------------------------------------------------------------------------- BLAKE3


def test_blake3_equals_the_package_for_every_length_of_one_chunk() -> None:
    """Every input length from 0 to 1,024 bytes (one block, many blocks, a partial last
    block), against the ``blake3`` package; and the published hash of the empty input."""
    assert NATIVE is not None
    for length in range(1025):
        data = bytes(i % 251 for i in range(length))
        assert NATIVE.blake3(data) == blake3.blake3(data).digest(), length
    empty = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
    assert NATIVE.blake3(b"").hex() == empty
    with pytest.raises(ValueError, match="1,024"):
        NATIVE.blake3(bytes(1025))


# ------------------------------------------------------------------- equal to the reference

# Keys drawn around a few prefixes, so that chunks deep in the tree, lone leaves moving up
# and down, and collapses all happen with few keys.
_PREFIXES = [b"", b"\x00", b"\x5a\x5a", b"\x5a\x5b", b"\xff\xff\xff"]
_keys = st.builds(
    lambda prefix, tail: (prefix + tail)[:32],
    st.sampled_from(_PREFIXES),
    st.binary(min_size=32, max_size=32),
)
_values = st.binary(min_size=32, max_size=32)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    start=st.dictionaries(_keys, _values, max_size=60),
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 3), _keys, _values), max_size=25), max_size=5
    ),
)
def test_batches_give_the_reference_rows_byte_for_byte(
    native: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    start: dict[bytes, bytes],
    batches: list[list[tuple[int, bytes, bytes]]],
) -> None:
    """From a tree built in bulk, batches of inserts, overwrites (also with the same
    value), deletes of present and absent keys: each call returns the reference's root and
    writes, and the tables stay equal; each table also equals a bulk build of its set."""
    root, rows = smt_store_build("blake3", list(start.items()))
    assert (root, rows) == reference_build(monkeypatch, list(start.items()))
    ours = theirs = dict(rows)
    content = dict(start)
    for batch in batches:
        updates: Updates = {}
        for op, key, value in batch:
            present = sorted(content)
            if op == 0 or not present:
                updates[key] = value
            elif op == 1:
                chosen = present[int.from_bytes(key[:4], "big") % len(present)]
                updates[chosen] = value
            elif op == 2:
                chosen = present[int.from_bytes(key[:4], "big") % len(present)]
                updates[chosen] = content[chosen]  # the same value: a no-op
            else:
                updates[key if value[0] & 1 else present[value[1] % len(present)]] = None
        done = smt_store_apply("blake3", ours.get, updates)
        assert done == reference_apply(monkeypatch, theirs, updates)
        ours, theirs = applied(ours, done[1]), applied(theirs, done[1])
        for key, value in updates.items():
            if value is None:
                content.pop(key, None)
            else:
                content[key] = value
        assert ours == dict(reference_build(monkeypatch, list(content.items()))[1])


def test_a_large_tree_and_its_batches_equal_the_reference(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20,000 keys in bulk (full top chunks), then batches of 1, 10 and 1,000 mixed
    updates, including deletes that collapse chunks: the same roots and rows."""
    rng = random.Random(7)
    content = {rng.randbytes(32): rng.randbytes(32) for _ in range(20_000)}
    built = smt_store_build("blake3", list(content.items()))
    assert built == reference_build(monkeypatch, list(content.items()))
    table = dict(built[1])
    for size in (1, 10, 1_000, 1, 1_000):
        present = list(content)
        updates: Updates = {}
        for _ in range(size):
            x = rng.random()
            if x < 0.4:
                updates[rng.randbytes(32)] = rng.randbytes(32)
            elif x < 0.7:
                updates[rng.choice(present)] = rng.randbytes(32)
            else:
                updates[rng.choice(present)] = None
        done = smt_store_apply("blake3", table.get, updates)
        assert done == reference_apply(monkeypatch, table, updates)
        table = applied(table, done[1])
        for key, value in updates.items():
            if value is None:
                content.pop(key, None)
            else:
                content[key] = value
    assert sorted(table.items()) == reference_build(monkeypatch, list(content.items()))[1]


def test_the_compiled_build_uses_the_c_form_and_the_sources_do_not() -> None:
    """``smt_apply`` takes the C form exactly when the compiled modules run, and the C form
    is what it calls for a BLAKE3 tree (not for SHA-256, which only the reference does)."""
    assert (smt_apply._NATIVE is not None) is compiled.state()[0]


def test_the_hash_functions_take_the_c_blake3_for_one_chunk_and_the_package_above() -> None:
    """``hash_function``, ``local_hash_function`` and ``hash_parts`` hash inputs of one
    chunk with the C BLAKE3 exactly when the compiled modules run, and give the
    package's digests on both sides of the chunk's end."""
    assert (hashing._SMALL is not None) is compiled.state()[0]
    one, local = hash_function("blake3"), local_hash_function("blake3")
    rng = random.Random(4)
    for length in (0, 1, 64, 65, 1023, 1024, 1025, 2048, 5000):
        data = rng.randbytes(length)
        want = blake3.blake3(data).digest()
        assert one(data) == want and local(data) == want, length
        cut = length // 3
        assert hash_parts("blake3", data[:cut], data[cut:]) == want, length
        assert hash_parts("blake3", data) == want, length


_postings_docs = st.dictionaries(
    st.binary(min_size=16, max_size=16),
    st.dictionaries(st.text(min_size=1, max_size=5), st.integers(1, 2**32 - 1), max_size=8),
    max_size=12,
)


def _postings_both_ways(docs: Any) -> tuple[segments.Postings, segments.Postings]:
    """``Postings.from_docs`` with the C columns, and with the Python reference."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(segments, "_NATIVE", NATIVE)
        native = segments.Postings.from_docs(docs)
        patch.setattr(segments, "_NATIVE", None)
        return native, segments.Postings.from_docs(docs)


def _same_postings(a: segments.Postings, b: segments.Postings) -> bool:
    return (
        a.terms == b.terms
        and a.counts.tolist() == b.counts.tolist()
        and a.ids.tobytes() == b.ids.tobytes()
        and a.tf.tolist() == b.tf.tolist()
    )


@settings(max_examples=300)
@given(docs=_postings_docs)
def test_postings_columns_give_the_reference_postings(docs: dict[bytes, dict[str, int]]) -> None:
    """A segment's postings built with the C columns are the reference's: the same terms
    in UTF-8 order, counts, ids and frequencies, for any terms (astral, combining, empty
    docs) and frequencies up to the u32 a block stores."""
    native, reference = _postings_both_ways(docs)
    assert _same_postings(native, reference)


def test_postings_columns_known_answer_and_what_they_give_back() -> None:
    """The columns number terms by first appearance, doc by doc in each doc's order; a
    value that is not a dict of str to a 64-bit int gives the call back, and the postings
    are then the reference's (which decides, as it would alone)."""
    assert NATIVE is not None
    rank: dict[str, int] = {}
    found = NATIVE.columns([{"b": 2, "a": 1}, {}, {"a": 3, "c": 7}], rank)
    assert found is not None and rank == {"b": 0, "a": 1, "c": 2}
    terms, freqs = found
    assert list(struct.unpack("=4I", terms)) == [0, 1, 1, 2]
    assert list(struct.unpack("=4q", freqs)) == [2, 1, 3, 7]
    assert NATIVE.columns([], {}) == (b"", b"")
    for odd in (
        [{"a": 1}, MappingProxyType({"b": 2})],  # not a dict
        [{b"a": 1}],  # a term that is not str
        [{"a": True}],  # a bool is not an exact int
        [{"a": 2**70}],  # past 64 bits
        [{"a": 1.0}],
    ):
        assert NATIVE.columns(odd, {}) is None
    ids = [bytes([i]) * 16 for i in range(3)]
    for docs in ({ids[0]: {"a": True}, ids[1]: {"a": 2}}, {ids[2]: MappingProxyType({"z": 4})}):
        native, reference = _postings_both_ways(docs)
        assert _same_postings(native, reference)
    with pytest.raises(OverflowError):
        _postings_both_ways({ids[0]: {"a": 2**70}})


def test_postings_columns_past_16_bit_term_indexes() -> None:
    """Past 65,536 distinct terms the term index is no longer 16 bits; the postings are
    still the reference's."""
    docs = {
        i.to_bytes(16, "big"): {f"t{(i * 7919) % 70_001}": 1 + i % 3, f"s{i % 5}": 2}
        for i in range(70_001)
    }
    native, reference = _postings_both_ways(docs)
    assert len(native.terms) > 1 << 16
    assert _same_postings(native, reference)


def test_the_compiled_build_builds_postings_columns_in_c() -> None:
    """``core.segments`` takes the C columns exactly when the compiled modules run."""
    assert (segments._NATIVE is not None) is compiled.state()[0]


def test_sha256_trees_never_reach_the_c_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C form hashes with BLAKE3 only: a SHA-256 tree runs the reference, whatever is
    built."""
    monkeypatch.setattr(smt_apply, "_NATIVE", _Refused())
    items = [(hashlib.sha256(bytes([i])).digest(), bytes(31) + bytes([i])) for i in range(40)]
    root, rows = smt_store_build("sha256", items)
    root2, writes = smt_store_apply("sha256", dict(rows).get, {items[0][0]: None})
    assert root2 != root and writes


# ------------------------------------------------------------------------- damaged rows


def _content() -> dict[bytes, bytes]:
    rng = random.Random(11)
    return {rng.randbytes(32): rng.randbytes(32) for _ in range(300)}


def _damaged_tables() -> Iterator[tuple[str, Table]]:
    table = dict(smt_store_build("blake3", list(_content().items()))[1])
    deep = max((row for row in table if row != SMT_STORE_META_KEY), key=len)
    yield "missing", {k: v for k, v in table.items() if k != deep}
    yield "truncated", {**table, deep: table[deep][:-1]}
    yield "longer", {**table, deep: table[deep] + b"\x00"}
    flipped = bytearray(table[deep])
    flipped[4] ^= 1  # node 1's hash: no longer the parent's slot
    yield "hash", {**table, deep: bytes(flipped)}
    both = bytearray(table[deep])
    both[0] |= both[2]
    both[1] |= both[3]  # every LEAF slot also marked CHILD
    yield "bitmaps", {**table, deep: bytes(both)}
    yield "root", {**table, b"\x00": table[b"\x00"][:40]}
    yield "not bytes", {**table, b"\x00": 12345}  # type: ignore[dict-item]


@pytest.mark.parametrize("damage", [name for name, _ in _damaged_tables()])
def test_damaged_rows_raise_the_reference_error(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """On each kind of damage on the updated keys' paths (every key is updated), the call
    raises exactly the reference's CorruptionError: the C form gives the call back."""
    table = dict(_damaged_tables())[damage]
    updates: Updates = {key: bytes(32) for key in _content()}
    with pytest.raises(CorruptionError) as ours:
        smt_store_apply("blake3", table.get, updates)
    with pytest.raises(CorruptionError) as theirs:
        reference_apply(monkeypatch, table, updates)
    assert str(ours.value) == str(theirs.value)



@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_damage_to_any_row_never_diverges_from_the_reference(
    native: ModuleType, monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    """Any row of a valid table replaced by arbitrary bytes (truncated, extended, bits
    flipped, or random): the call either raises the reference's own error or returns the
    reference's root and writes; the C form never reads out of bounds (it would crash)."""
    content = _content()
    table = dict(smt_store_build("blake3", list(content.items()))[1])
    rows = sorted(table)
    row = data.draw(st.sampled_from(rows))
    original = table[row]
    how = data.draw(st.sampled_from(["truncate", "extend", "flip", "random"]))
    if how == "truncate":
        damaged = original[: data.draw(st.integers(0, len(original) - 1))]
    elif how == "extend":
        damaged = original + data.draw(st.binary(min_size=1, max_size=200))
    elif how == "flip":
        at = data.draw(st.integers(0, len(original) - 1))
        flipped = bytes([original[at] ^ data.draw(st.integers(1, 255))])
        damaged = original[:at] + flipped + original[at + 1 :]
    else:
        damaged = data.draw(st.binary(max_size=2 * len(original)))
    table[row] = damaged
    keys = sorted(content)
    chosen = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=40, unique=True))
    updates: Updates = {key: (None if key[0] & 1 else bytes(32)) for key in chosen}
    try:
        ours: object = smt_store_apply("blake3", table.get, updates)
    except CorruptionError as exc:
        ours = ("error", str(exc))
    try:
        theirs: object = reference_apply(monkeypatch, table, updates)
    except CorruptionError as exc:
        theirs = ("error", str(exc))
    assert ours == theirs
