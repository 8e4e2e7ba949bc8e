"""The bulk Merkle builds a rebuild calls, against a store written through the API (J4, M9).

``build_mmr_rows`` (from the journal alone) and ``build_smt_rows`` (from the final
``heads``, ``versions`` and ``edges`` tables) must give exactly the ``mmr`` and ``smt``
rows the incremental write path left, for the metamorphic tests' generated scripts
(writes, updates, head moves, tombstones, attests, snapshots) run in batches of random
sizes, and edges added and removed after them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.commitments import build_mmr_rows, build_smt_rows
from test_metamorphic import ACTOR, T0, _Runner, generate_script


def _rows(txn: object, table: str) -> list[tuple[bytes, bytes]]:
    with txn.cursor(table) as cur:  # type: ignore[attr-defined]
        return [(bytes(key), bytes(value)) for key, value in cur]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    batch_size=st.integers(2, 40),
    stride=st.integers(1, 7),
    hash_name=st.sampled_from(["blake3", "sha256"]),
)
@example(seed=1, batch_size=7, stride=3, hash_name="blake3")
def test_bulk_builds_give_the_incremental_rows(
    seed: int, batch_size: int, stride: int, hash_name: str
) -> None:
    """After a generated script of 150 operations (some refused, some no-ops; tombstones
    and snapshots included) run in batches of a random size, and edges added among its
    memories in one batch and every third of them removed in another, the one-pass MMR
    build over the journal and the bottom-up SMT build over the final memories and edges
    equal the stored ``mmr`` and ``smt`` tables byte for byte."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "s"
        cg.open(root, ACTOR, hash_name=hash_name, sync=False).close()
        runner = _Runner(root, batch_size=batch_size)
        try:
            runner.run(generate_script(seed))
            cx = runner.cx
            uris = runner.uris
            pairs = list(zip(uris, uris[stride:] + uris[:stride], strict=True))
            added = []
            for i, (src, dst) in enumerate(pairs):
                try:  # a tombstoned end refuses the edge; the others stay
                    cx.add_edge(src, dst, "relates_to", at=T0 + i)
                    added.append((src, dst))
                except cg.CortexError:
                    pass
            with cx.batch() as batch:
                for src, dst in added[::3]:
                    batch.remove_edge(src, dst, "relates_to", at=T0 + 999)
            with cx._env.read() as txn:
                journal = [value for _, value in _rows(txn, "journal")]
                memory_ids = [key for key, _ in _rows(txn, "heads")]
                edges = [key for key, _ in _rows(txn, "edges") if key[:1] == b"o"]
                mmr, smt = _rows(txn, "mmr"), _rows(txn, "smt")
                built_smt = build_smt_rows(cx.hash_name, txn.get, memory_ids, edges)
            assert cx.hash_name == hash_name
            assert len(journal) == cx.seq and memory_ids  # edges: none when all ends died
            assert list(build_mmr_rows(hash_name, journal)) == mmr
            assert built_smt == smt
        finally:
            runner.cx.close()
