"""A store written by an earlier release is upgraded to the current derived-table layout.

``tests/fixtures/layout1/agent/data.mdb`` was written by the release whose derived tables
had an ``idx`` table and a keyword row per term and memory, and which recorded no layout
(``expected.json`` holds its seq, OverallRoot and a keyword recall, as that release
answered them). The journal is the source of truth, so the upgrade is a rebuild.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lmdb
import pytest

import cortexgraph as cg
from cortexgraph.core.codec import encode
from cortexgraph.store.env import DERIVED_LAYOUT, LAYOUT_KEY

FIXTURE = Path(__file__).parent / "fixtures" / "layout1"


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(FIXTURE, root)
    return root


def _tables(root: Path) -> set[bytes]:
    env = lmdb.open(str(root / "agent"), max_dbs=32, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return {bytes(key) for key, _ in txn.cursor()}
    finally:
        env.close()


def test_a_read_only_open_is_refused_until_the_store_is_upgraded(old_store: Path) -> None:
    """Read-only, the old tables cannot be served or rebuilt: a typed error says which
    layout the store has and how to upgrade it; verify reports the same, and nothing is
    written."""
    before = (old_store / "agent" / "data.mdb").read_bytes()
    with pytest.raises(cg.ReadOnlyError, match=r"layout 1.*cortexgraph rebuild"):
        cg.open(old_store, "agent", readonly=True)
    report = cg.verify(old_store, "agent")
    assert not report.ok and "layout 1" in report.actors[0].problems[0]
    assert (old_store / "agent" / "data.mdb").read_bytes() == before


def test_a_writable_open_rebuilds_the_old_store_in_the_current_layout(old_store: Path) -> None:
    """The first writable open rebuilds every derived table from the journal, deletes the
    old ``idx`` table and records the layout; the journal, seq and OverallRoot are the
    old release's, keyword recall answers as it did, and the store then verifies."""
    expected = json.loads((FIXTURE / "expected.json").read_text())
    assert b"idx" in _tables(old_store)
    with cg.open(old_store, "agent") as cx:
        assert cx.seq == expected["seq"]
        assert cx.overall_root().hex() == expected["root"]
        hits = cx.recall("green cluster", mode="keyword").hits
        assert [h.uri.id.hex() for h in hits] == expected["recall"]
    assert b"idx" not in _tables(old_store)
    with cg.open(old_store, "agent", readonly=True) as cx:
        assert cx.seq == expected["seq"]
    assert cg.verify(old_store, "agent").ok


def test_a_store_of_a_newer_layout_is_refused(tmp_path: Path) -> None:
    """A layout above the one this release writes is a CorruptionError naming it, for
    writable and read-only opens alike."""
    with cg.open(tmp_path, "agent") as cx:
        cx.write(cg.Fact(text="x"))
        cx._env.set_meta_value(LAYOUT_KEY, DERIVED_LAYOUT + 1)
    for readonly in (False, True):
        with pytest.raises(cg.CorruptionError, match=f"layout {DERIVED_LAYOUT + 1}"):
            cg.open(tmp_path, "agent", readonly=readonly)


def test_new_stores_record_the_layout_when_they_are_created(tmp_path: Path) -> None:
    """Creation records the current layout before any write, so a new store that gains
    entries is never taken for one that predates the record."""
    with cg.open(tmp_path, "agent") as cx:
        assert cx._env.meta_raw(LAYOUT_KEY) == encode(DERIVED_LAYOUT)
        cx.write(cg.Fact(text="x"))
    with cg.open(tmp_path, "agent", readonly=True) as cx:
        assert cx.seq == 1


def test_an_empty_store_without_a_record_gets_one(tmp_path: Path) -> None:
    """A store that records no layout and has no entries (an earlier release made it and
    never wrote) needs no rebuild: a writable open records the current layout, a
    read-only open serves it as it is."""
    with cg.open(tmp_path, "agent") as cx:
        cx._env.write_small(lambda txn: txn.delete("meta", LAYOUT_KEY))
    with cg.open(tmp_path, "agent", readonly=True) as cx:
        assert cx.seq == 0 and cx._env.meta_raw(LAYOUT_KEY) is None
    with cg.open(tmp_path, "agent") as cx:
        assert cx._env.meta_raw(LAYOUT_KEY) == encode(DERIVED_LAYOUT)
