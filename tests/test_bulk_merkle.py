"""The bulk Merkle builds a rebuild calls, against a store written through the API (J4, M9).

``build_mmr_rows`` (from the journal alone) and ``build_smt_rows`` (from the final
``heads``, ``versions`` and ``edges`` tables) must give exactly the ``mmr`` and ``smt``
rows the incremental write path left, for the metamorphic tests' generated scripts
(writes, updates, head moves, tombstones, attests, snapshots) run in batches of 7, and
edges added and removed after them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.core.commitments import build_mmr_rows, build_smt_rows
from test_metamorphic import T0, _Runner, generate_script


def _rows(txn: object, table: str) -> list[tuple[bytes, bytes]]:
    with txn.cursor(table) as cur:  # type: ignore[attr-defined]
        return [(bytes(key), bytes(value)) for key, value in cur]


@pytest.mark.parametrize("seed", [1, 2])
def test_bulk_builds_give_the_incremental_rows(seed: int, tmp_path: Path) -> None:
    """After a generated script of 150 operations (some refused, some no-ops; tombstones
    included) and edges added among its memories, a third of them removed again,
    the one-pass MMR build over the journal and the bottom-up SMT build over the final
    memories and edges equal the stored ``mmr`` and ``smt`` tables byte for byte."""
    runner = _Runner(tmp_path / "s", batch_size=7)
    try:
        runner.run(generate_script(seed))
        cx = runner.cx
        uris, added = runner.uris, []
        for i, (src, dst) in enumerate(zip(uris, uris[3:] + uris[:3], strict=True)):
            try:  # a tombstoned end refuses the edge; the others stay
                cx.add_edge(src, dst, "relates_to", at=T0 + i)
                added.append((src, dst))
            except cg.CortexError:
                pass
        for src, dst in added[::3]:
            cx.remove_edge(src, dst, "relates_to", at=T0 + 999)
        with cx._env.read() as txn:
            journal = [value for _, value in _rows(txn, "journal")]
            memory_ids = [key for key, _ in _rows(txn, "heads")]
            edges = [key for key, _ in _rows(txn, "edges") if key[:1] == b"o"]
            mmr, smt = _rows(txn, "mmr"), _rows(txn, "smt")
            built_smt = build_smt_rows(cx.hash_name, txn.get, memory_ids, edges)
        assert len(journal) == cx.seq > 80 and memory_ids and len(edges) > 10
        assert list(build_mmr_rows(cx.hash_name, journal)) == mmr
        assert built_smt == smt
    finally:
        runner.cx.close()
