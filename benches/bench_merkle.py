"""pytest-benchmark benchmarks of Merkle maintenance, replay and proofs against their baselines.

Run them with::

    .venv/bin/python -m pytest benches/bench_merkle.py --benchmark-only

They are not tests (``testpaths`` is ``tests/``) and assert nothing about time. Each group
pairs a cortexgraph operation with its baseline (``benches/merkle.py`` describes them):

- ``merkle-write-fresh`` / ``merkle-write-prefilled``: one round is one batch of 1,000
  memories, committed with sync on; rounds continue the same store. "with" is cortexgraph
  as it is; "without" the same code with ``cortexgraph.writing.mmr_mutations`` and
  ``smt_mutations`` patched to return no mutations (what the Merkle work costs). The
  prefilled store starts as a copy of a store of STORE_SIZE memories.
- ``merkle-replay``: one round is ``cx.rebuild()``, or ``cortexgraph.verify(root, actor)``,
  of a STORE_SIZE-entry journal (90% writes, 7% updates, 3% tombstones), or a py-lmdb
  cursor over that journal with ``cbor2.loads`` of each entry (the floor).
- ``merkle-prove``: ``cx.prove`` of random memories of that store, against the same LMDB
  reads in one raw read transaction.
- ``merkle-verify-proof``: ``verify_memory_proof`` against its two tree checks alone.
- ``merkle-verify-smt`` / ``merkle-verify-inclusion``: ``verify_smt`` and
  ``verify_inclusion`` on the proofs' parts, against the same number of hash calls.

STORE_SIZE is 20,000 here (``benches/merkle.py`` defaults to 100,000) so that the whole
file runs in about two minutes. ``median_items_per_s`` in each benchmark's extra info
gives the throughput.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from _workload import ACTOR, BASE_AT, STEP_MS, chunks, make_memories, write_cortex
from cortexgraph.core.commitments import verify_memory_proof
from cortexgraph.core.mmr import verify_inclusion
from cortexgraph.core.smt import verify_smt
from merkle import (
    ProofWork,
    both_checks,
    build_journal,
    build_store,
    copy_store,
    hash_floor,
    merkle_off,
    scan_journal,
)

BATCH = 1_000
BATCH_ROUNDS = 10
STORE_SIZE = 20_000
REPLAY_ROUNDS = 3
PROOFS = 2_000


# -- stores -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def prefilled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed store of STORE_SIZE memories; tests write into copies of it."""
    root = tmp_path_factory.mktemp("prefilled")
    build_store(root, STORE_SIZE)
    return root


@pytest.fixture(scope="session")
def replay_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, list[cg.MemoryURI]]:
    """A closed store whose journal holds STORE_SIZE entries, and its memories' URIs."""
    root = tmp_path_factory.mktemp("replay")
    return root, build_journal(root, STORE_SIZE)


@pytest.fixture(scope="session")
def proofs(
    tmp_path_factory: pytest.TempPathFactory, replay_store: tuple[Path, list[cg.MemoryURI]]
) -> Iterator[tuple[cg.Cortex, ProofWork]]:
    """A copy of the replay store, open read-only, and PROOFS proofs of random memories.

    A copy, because ``cortexgraph.verify`` cannot open a store this process has open.
    """
    source, uris = replay_store
    root = tmp_path_factory.mktemp("proofs")
    copy_store(source, root)
    cx = cg.open(root, ACTOR, readonly=True)
    try:
        yield cx, ProofWork(cx, uris, PROOFS)
    finally:
        cx.close()


def _feeder(items: Sequence[Any]) -> Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]:
    """A pedantic ``setup`` that hands the next item (and its index) to each round."""
    numbered = iter(enumerate(items))
    return lambda: (next(numbered), {})


def _per_second(benchmark: Any, items_per_round: int) -> None:
    """Record throughput next to the per-round times (absent under --benchmark-disable)."""
    benchmark.extra_info["items_per_round"] = items_per_round
    if benchmark.stats:
        median = benchmark.stats.stats.median
        benchmark.extra_info["median_items_per_s"] = round(items_per_round / median)


def _cycle(items: Sequence[Any]) -> Callable[[], Any]:
    return itertools.cycle(items).__next__


# -- batched writes with and without Merkle maintenance --------------------------------------


def _write_batches(benchmark: Any, path: Path, start_at: int, *, merkle: bool) -> None:
    memories = make_memories(BATCH * BATCH_ROUNDS, seed=1, start_at=start_at)
    cx = cg.open(path, ACTOR, sync=True)

    def write_batch(i: int, batch: Sequence[cg.Memory]) -> None:
        write_cortex(cx, batch, batch_size=BATCH, start_at=start_at + i * BATCH * STEP_MS)

    def run() -> None:
        benchmark.pedantic(
            write_batch, setup=_feeder(list(chunks(memories, BATCH))), rounds=BATCH_ROUNDS
        )

    try:
        if merkle:
            run()
        else:
            with merkle_off():
                run()
    finally:
        cx.close()
    _per_second(benchmark, BATCH)


@pytest.mark.benchmark(group="merkle-write-fresh")
@pytest.mark.parametrize("merkle", [True, False], ids=["with-merkle", "without-merkle"])
def test_batched_write_fresh(benchmark: Any, tmp_path: Path, merkle: bool) -> None:
    _write_batches(benchmark, tmp_path, BASE_AT, merkle=merkle)


@pytest.mark.benchmark(group="merkle-write-prefilled")
@pytest.mark.parametrize("merkle", [True, False], ids=["with-merkle", "without-merkle"])
def test_batched_write_prefilled(
    benchmark: Any, tmp_path: Path, prefilled: Path, merkle: bool
) -> None:
    copy_store(prefilled, tmp_path / "store")
    try:
        start_at = BASE_AT + STORE_SIZE * STEP_MS
        _write_batches(benchmark, tmp_path / "store", start_at, merkle=merkle)
    finally:
        shutil.rmtree(tmp_path / "store")


# -- replay -----------------------------------------------------------------------------------


@pytest.mark.benchmark(group="merkle-replay")
def test_replay_rebuild(benchmark: Any, replay_store: tuple[Path, list[cg.MemoryURI]]) -> None:
    root, _ = replay_store
    cx = cg.open(root, ACTOR)
    try:
        benchmark.pedantic(cx.rebuild, rounds=REPLAY_ROUNDS)
    finally:
        cx.close()
    _per_second(benchmark, STORE_SIZE)


@pytest.mark.benchmark(group="merkle-replay")
def test_replay_verify(benchmark: Any, replay_store: tuple[Path, list[cg.MemoryURI]]) -> None:
    root, _ = replay_store

    def verify() -> None:
        report = cg.verify(root, ACTOR)
        if not report.ok:
            raise RuntimeError(f"verify failed: {report.to_dict()}")

    benchmark.pedantic(verify, rounds=REPLAY_ROUNDS)
    _per_second(benchmark, STORE_SIZE)


@pytest.mark.benchmark(group="merkle-replay")
def test_replay_floor_lmdb_scan_cbor2(
    benchmark: Any, replay_store: tuple[Path, list[cg.MemoryURI]]
) -> None:
    root, _ = replay_store
    benchmark.pedantic(lambda: scan_journal(root, decode=True), rounds=REPLAY_ROUNDS)
    _per_second(benchmark, STORE_SIZE)


# -- proofs -----------------------------------------------------------------------------------


@pytest.mark.benchmark(group="merkle-prove")
def test_prove(benchmark: Any, proofs: tuple[cg.Cortex, ProofWork]) -> None:
    cx, work = proofs
    nxt = _cycle(work.sample)
    benchmark(lambda: cx.prove(nxt()))


@pytest.mark.benchmark(group="merkle-prove")
def test_prove_raw_lmdb_reads(benchmark: Any, proofs: tuple[cg.Cortex, ProofWork]) -> None:
    _, work = proofs
    nxt = _cycle(work.reads)
    benchmark(lambda: work.raw_reads(nxt()))


@pytest.mark.benchmark(group="merkle-verify-proof")
def test_verify_memory_proof(benchmark: Any, proofs: tuple[cg.Cortex, ProofWork]) -> None:
    _, work = proofs
    nxt = _cycle(work.with_root)
    benchmark(lambda: verify_memory_proof(*nxt()))


@pytest.mark.benchmark(group="merkle-verify-proof")
def test_verify_memory_proof_tree_checks_only(
    benchmark: Any, proofs: tuple[cg.Cortex, ProofWork]
) -> None:
    _, work = proofs
    nxt = _cycle(work.both)
    benchmark(lambda: both_checks(*nxt()))


@pytest.mark.benchmark(group="merkle-verify-smt")
def test_verify_smt(benchmark: Any, proofs: tuple[cg.Cortex, ProofWork]) -> None:
    _, work = proofs
    nxt = _cycle(work.smt)
    benchmark(lambda: verify_smt(*nxt()))


@pytest.mark.benchmark(group="merkle-verify-smt")
def test_verify_smt_hash_floor(benchmark: Any, proofs: tuple[cg.Cortex, ProofWork]) -> None:
    _, work = proofs
    nxt = _cycle(work.smt_hashes)
    benchmark(lambda: hash_floor(work.hash, nxt()))


@pytest.mark.benchmark(group="merkle-verify-inclusion")
def test_verify_inclusion(benchmark: Any, proofs: tuple[cg.Cortex, ProofWork]) -> None:
    _, work = proofs
    nxt = _cycle(work.mmr)
    benchmark(lambda: verify_inclusion(*nxt()))


@pytest.mark.benchmark(group="merkle-verify-inclusion")
def test_verify_inclusion_hash_floor(benchmark: Any, proofs: tuple[cg.Cortex, ProofWork]) -> None:
    _, work = proofs
    nxt = _cycle(work.mmr_hashes)
    benchmark(lambda: hash_floor(work.hash, nxt()))
