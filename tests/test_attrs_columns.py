"""Attributes rows decoded many at once (``core.signals.decode_attrs_rows``), which a
column index build uses, against ``AttrsRow.decode`` one row at a time: the same values,
the same numbering of namespaces and tag lists, and None exactly when a row would not
decode (or would not fit a signed 64-bit column)."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
import cortexgraph.index.table as table_module
from cortexgraph.core.signals import MEMORY_STATUSES, AttrsRow, decode_attrs_rows
from cortexgraph.core.taxonomy import MEMORY_TYPES
from cortexgraph.errors import CorruptionError
from cortexgraph.index import ColumnIndex
from cortexgraph.index.table import TableImage

TYPE_NAMES = sorted(t.type_name for t in MEMORY_TYPES)
TYPE_CODES = {t.type_name: t.type_code for t in MEMORY_TYPES}
# a small vocabulary, so that namespaces and tag lists repeat across rows
NAMESPACES = ["default", "ops", "team-a", "x"]
TAGS = ["deploy", "ci", "net", "ünï", "a" * 40]
MS = st.integers(min_value=0, max_value=(1 << 63) - 1)


@st.composite
def attrs_rows(draw: st.DrawFn) -> AttrsRow:
    indexed = draw(st.booleans())
    return AttrsRow(
        draw(st.sampled_from(TYPE_NAMES)),
        draw(st.sampled_from(MEMORY_STATUSES)),
        draw(st.booleans()),
        draw(st.integers(min_value=1, max_value=10)),
        draw(st.floats(min_value=0.0, max_value=1.0)),
        draw(MS),
        draw(MS),
        draw(MS),
        draw(st.sampled_from(NAMESPACES)),
        tuple(draw(st.lists(st.sampled_from(TAGS), max_size=3, unique=True))),
        draw(st.integers(min_value=1, max_value=(1 << 63) - 1)) if indexed else 0,
        draw(st.integers(min_value=0, max_value=(1 << 32) - 1)) if indexed else 0,
    )


def _expected(rows: list[bytes]) -> dict[str, object]:
    """What decoding the rows one by one gives, as the columns of a build."""
    decoded = [AttrsRow.decode(row) for row in rows]
    ns_names: dict[str, int] = {}
    tag_sets: dict[tuple[str, ...], int] = {}
    return {
        "type_code": [TYPE_CODES[a.type_name] for a in decoded],
        "status_code": [MEMORY_STATUSES.index(a.status) + 1 for a in decoded],
        "pinned": [a.pinned for a in decoded],
        "priority": [a.priority for a in decoded],
        "confidence": [a.confidence for a in decoded],
        "at": [a.at for a in decoded],
        "updated_at": [a.updated_at for a in decoded],
        "index_seq": [a.index_seq for a in decoded],
        "length": [a.length for a in decoded],
        "ns_of": [ns_names.setdefault(a.ns, len(ns_names)) for a in decoded],
        "tag_of": [tag_sets.setdefault(a.tags, len(tag_sets)) for a in decoded],
        "ns_names": tuple(ns_names),
        "tag_sets": tuple(tag_sets),
    }


def _as_lists(columns: object) -> dict[str, object]:
    return {
        name: value.tolist() if isinstance(value, np.ndarray) else value
        for name, value in columns._asdict().items()  # type: ignore[attr-defined]
    }


@given(st.lists(attrs_rows(), max_size=40))
def test_many_rows_decode_as_each_row_does(rows: list[AttrsRow]) -> None:
    encoded = [row.encode() for row in rows]
    columns = decode_attrs_rows(encoded)
    assert columns is not None
    assert _as_lists(columns) == _expected(encoded)


@settings(max_examples=300)
@given(
    st.lists(attrs_rows(), min_size=1, max_size=8),
    st.data(),
)
def test_a_damaged_row_gives_none_exactly_when_decoding_it_fails(
    rows: list[AttrsRow], data: st.DataObject
) -> None:
    encoded = [row.encode() for row in rows]
    which = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
    row = bytearray(encoded[which])
    how = data.draw(st.sampled_from(["byte", "cut", "extend"]))
    if how == "byte":
        at = data.draw(st.integers(min_value=0, max_value=len(row) - 1))
        row[at] = data.draw(st.integers(min_value=0, max_value=255))
    elif how == "cut":
        del row[data.draw(st.integers(min_value=0, max_value=len(row) - 1)) :]
    else:
        row += data.draw(st.binary(min_size=1, max_size=3))
    encoded[which] = bytes(row)
    try:
        expected = _expected(encoded)
    except CorruptionError:
        assert decode_attrs_rows(encoded) is None
        return
    columns = decode_attrs_rows(encoded)
    too_big = any(
        max(value) >= 1 << 63
        for name, value in expected.items()
        if name in ("at", "updated_at", "index_seq") and isinstance(value, list) and value
    )
    if too_big:  # fits the row, not a signed 64-bit column: decoded one by one instead
        assert columns is None
    else:
        assert columns is not None
        assert _as_lists(columns) == expected


_GOOD = AttrsRow("goal", "active", True, 5, 0.5, 7, 6, 8, "ops", ("ci", "deploy"), 9, 4)


def _damage(offset: int, value: bytes) -> bytes:
    row = bytearray(_GOOD.encode())
    row[offset : offset + len(value)] = value
    return bytes(row)


@pytest.mark.parametrize(
    "row",
    [
        _damage(0, b"\x01"),  # layout
        _damage(0, b"\x03"),
        _damage(1, b"\xff"),  # no such type
        _damage(2, b"\x00"),  # status
        _damage(2, bytes([len(MEMORY_STATUSES) + 1])),
        _damage(3, b"\x02"),  # flags
        _damage(3, b"\xff"),
        _damage(4, b"\x00"),  # priority
        _damage(4, b"\x0b"),
        _damage(5, struct.pack(">d", -0.5)),  # confidence
        _damage(5, struct.pack(">d", 1.5)),
        _damage(5, struct.pack(">d", math.nan)),
        _damage(37, bytes(8)),  # an index seq of 0 with a length
        _damage(49, b"\x04"),  # the namespace's length
        _damage(49, b"\xff"),
        _GOOD.encode()[:-1],  # cut inside the last tag
        _GOOD.encode()[:50],  # cut before the tag count
        _GOOD.encode() + b"\x00",  # a byte past the last tag
    ],
    ids=lambda row: row.hex(),
)
def test_each_check_of_a_row_holds_for_many_rows(row: bytes) -> None:
    """Every way a row can fail ``AttrsRow.decode`` makes the bulk decoder give up (the
    build then decodes row by row and reports it), wherever the row is."""
    with pytest.raises(CorruptionError):
        AttrsRow.decode(row)
    good = _GOOD.encode()
    for rows in ([row], [good, row], [row, good, good]):
        assert decode_attrs_rows(rows) is None


@pytest.mark.parametrize("offset", [13, 29, 37])  # at, updated_at, index seq
def test_a_value_past_a_signed_column_is_left_to_the_row_decoder(offset: int) -> None:
    row = _damage(offset, struct.pack(">Q", 1 << 63))
    AttrsRow.decode(row)  # a valid row, but no int64 column holds it
    assert decode_attrs_rows([_GOOD.encode(), row]) is None
    assert decode_attrs_rows([_GOOD.encode(), _damage(offset, struct.pack(">Q", (1 << 63) - 1))])


def test_a_status_of_zero_is_refused() -> None:
    """Status codes start at 1: a 0 is damage (it used to read as the last status)."""
    row = bytearray(AttrsRow("fact", "active", False, 5, 0.5, 1, 1, 1, "default", ()).encode())
    row[2] = 0
    with pytest.raises(CorruptionError, match="bad status 0"):
        AttrsRow.decode(bytes(row))
    assert decode_attrs_rows([bytes(row)]) is None


def test_no_rows() -> None:
    columns = decode_attrs_rows([])
    assert columns is not None
    assert _as_lists(columns) == _expected([])


def _built(cx: cg.Cortex) -> TableImage:
    """The image of a column index built from the store's rows (no snapshot)."""
    index = ColumnIndex(None)
    with cx._env.read() as txn:
        index.refresh(txn)
    return index.export()


def test_a_build_equals_the_row_by_row_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The column index built from the columns equals the one built row by row: same
    rows, columns, tag lists and namespaces."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        uris = []
        with cx.batch() as b:
            for i in range(300):
                memory: cg.Memory
                if i % 3 == 0:
                    memory = cg.Fact(text=f"fact {i} on deploys", tags=[f"t{i % 7}", "deploy"])
                elif i % 3 == 1:
                    memory = cg.Goal(text=f"goal {i}", priority=1 + i % 10, pinned=i % 5 == 0)
                else:
                    memory = cg.Preference(text=f"prefers {i}", confidence=(i % 11) / 10)
                ns = ["default", "ops", "team-a"][i % 3]
                uris.append(b.write(memory, ns=ns, at=1_700_000_000_000 + i))
        cx.tombstone(uris[5], at=1_700_000_001_000)
        cx.update(uris[9], text="goal 9, revised", at=1_700_000_001_001)
        bulk = _built(cx)
        monkeypatch.setattr(table_module, "decode_attrs_rows", lambda rows: None)
        one_by_one = _built(cx)
    assert len(bulk.ids) == 300 * 16
    assert bulk.ids == one_by_one.ids
    assert bulk.tag_sets == one_by_one.tag_sets and bulk.ns_names == one_by_one.ns_names
    assert bulk.tag_of.tolist() == one_by_one.tag_of.tolist()
    assert sorted(bulk.columns) == sorted(one_by_one.columns)
    for name, column in bulk.columns.items():
        assert column.dtype == one_by_one.columns[name].dtype, name
        assert column.tolist() == one_by_one.columns[name].tolist(), name
