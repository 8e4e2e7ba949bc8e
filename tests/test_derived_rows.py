"""The fixed-layout rows of derived tables (``HeadState``, ``VersionState``, ``AttrsRow``):
plain classes compiled as native ones, compared, hashed and shown field by field."""

from __future__ import annotations

import pytest

from cortexgraph import compiled
from cortexgraph.core.signals import AttrsRow
from cortexgraph.core.state import DerivedRow, HeadState, VersionState


def _attrs_row(**changes: object) -> AttrsRow:
    fields: dict[str, object] = {
        "type_name": "fact", "status": "active", "pinned": False, "priority": 5,
        "confidence": 0.5, "at": 1, "created_at": 1, "updated_at": 2, "ns": "default",
        "tags": ("a", "b"), "index_seq": 3, "length": 4,
    }  # fmt: skip
    fields.update(changes)
    return AttrsRow(**fields)  # type: ignore[arg-type]


ROWS: list[tuple[DerivedRow, DerivedRow]] = [
    (HeadState("a", "fact", 1, 2, "active", 5, 6, "why"),
     HeadState("a", "fact", 1, 2, "active", 5, 6, "other")),
    (VersionState(1, 2, b"body"), VersionState(1, 3, b"body")),
    (_attrs_row(), _attrs_row(length=5)),
]  # fmt: skip


@pytest.mark.parametrize(("row", "other"), ROWS)
def test_rows_equal_by_value_and_hash_alike(row: DerivedRow, other: DerivedRow) -> None:
    twin = type(row)(*row.values())
    assert twin == row and hash(twin) == hash(row)
    assert not twin != row  # noqa: SIM202 - != is its own method
    assert row != other
    assert not row == other  # noqa: SIM201 - == is its own method
    assert row != row.values()  # another type is never equal, even with the same values
    assert len({row, twin, other}) == 2


@pytest.mark.parametrize(("row", "other"), ROWS)
def test_rows_show_every_field_by_name(row: DerivedRow, other: DerivedRow) -> None:
    shown = repr(row)
    assert shown.startswith(type(row).__name__ + "(")
    for name, value in zip(row.FIELDS, row.values(), strict=True):
        assert f"{name}={value!r}" in shown
        assert getattr(row, name) == value


def test_rows_round_trip_through_their_encodings() -> None:
    head, version, attrs = ROWS[0][0], ROWS[1][0], ROWS[2][0]
    assert isinstance(head, HeadState) and HeadState.decode(head.encode()) == head
    assert isinstance(version, VersionState) and VersionState.decode(version.encode()) == version
    assert isinstance(attrs, AttrsRow) and AttrsRow.decode(attrs.encode()) == attrs


def test_a_status_change_keeps_the_other_fields() -> None:
    row = _attrs_row()
    changed = row.with_status("archived", 9, 0, 0)
    assert changed == _attrs_row(status="archived", updated_at=9, index_seq=0, length=0)


@pytest.mark.skipif(
    not compiled.state()[0],
    reason="the sources leave Final attributes to mypy; only the compiled rows refuse at run time",
)
@pytest.mark.parametrize(("row", "other"), ROWS)
def test_compiled_rows_refuse_assignment(row: DerivedRow, other: DerivedRow) -> None:
    name = row.FIELDS[0]
    with pytest.raises(AttributeError):
        setattr(row, name, getattr(other, name))
    assert row.values() == type(row)(*row.values()).values()
