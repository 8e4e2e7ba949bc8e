"""The page check (``store.pages``): its bulk check of leaf nodes reports exactly what a
walk node by node reports, on sound files and on files with damaged leaf pages."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.store import pages

ACTOR = "pages"
_HEADER = struct.Struct("<QHHHH")


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with a few hundred memories (updates, tombstones, edges, one large value)."""
    root = tmp_path_factory.mktemp("pages")
    at = 1_700_000_000_000
    with cg.open(root, ACTOR, sync=False) as cx:
        uris = []
        with cx.batch() as b:
            for i in range(400):
                text = f"note {i} about deploys {i % 13}" + (" long" * 2000 if i == 7 else "")
                uris.append(b.write(cg.Fact(text=text, tags=[f"t{i % 4}"]), at=at + i))
        for i in range(0, 400, 7):
            cx.update(uris[i], text=f"revised {i}", at=at + 1000 + i)
        for i in range(2, 390, 13):
            cx.add_edge(uris[i], uris[i + 1], "relates_to", at=at + 2000 + i)
        for i in range(1, 400, 11):
            cx.tombstone(uris[i], at=at + 3000 + i)
    return root / ACTOR / "data.mdb"


def _node_by_node(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    with monkeypatch.context() as patch:

        def walk(self: pages._Walk, table: str, record: bytes, *, main: bool) -> object:
            return self.walk(table, record, main=main, bulk=False)

        patch.setattr(pages._Walk, "tree", walk)
        return [str(p) for p in pages.check_pages(path)]


def _leaf_pages(data: bytes) -> list[int]:
    psize = 4096
    return [
        page
        for page in range(2, len(data) // psize)
        if _HEADER.unpack_from(data, page * psize)[2] == 0x02  # P_LEAF
    ]


def test_a_sound_file_has_no_problems_either_way(
    data_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pages.check_pages(data_file) == []
    assert _node_by_node(data_file, monkeypatch) == []


def test_damaged_leaf_pages_are_reported_as_the_walk_node_by_node_reports_them(
    data_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = data_file.read_bytes()
    leaves = _leaf_pages(original)
    assert len(leaves) >= 5
    damaged = tmp_path / "data.mdb"
    reported = free = 0
    for page in leaves[:: max(1, len(leaves) // 12)]:
        start = page * 4096
        lower, upper = _HEADER.unpack_from(original, start)[3:]
        first_node = struct.unpack_from("<H", original, start + 16)[0]
        # the first node offset, a node's flags, its key size and its data size, each
        # made too large; and an offset pointed into the page's free space, or below it
        for at, value in (
            (start + 16, 0xFFF0),
            (start + first_node + 4, 0x0008),
            (start + first_node + 6, 0x0FFF),
            (start + first_node + 2, 0x0100),
            (start + 16, lower - 2),
            (start + 16, upper - 8),
        ):
            data = bytearray(original)
            if value == upper - 8:  # a well-formed empty node in the free space, if any
                if upper - lower < 8:
                    continue
                data[start + upper - 8 : start + upper] = bytes(8)
            struct.pack_into("<H", data, at, value)
            damaged.write_bytes(bytes(data))
            bulk = [str(p) for p in pages.check_pages(damaged)]
            assert bulk == _node_by_node(damaged, monkeypatch)
            reported += bool(bulk)
        free += upper - lower >= 8
    assert reported >= 20  # the damage was seen, not only agreed about
    assert free >= 3  # and a node in free space was among it
