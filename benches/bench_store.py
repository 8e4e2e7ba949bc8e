"""pytest-benchmark benchmarks of writes and ``resolve``, each next to raw LMDB doing the same.

Run them with::

    .venv/bin/python -m pytest benches/bench_store.py --benchmark-only

They are not tests (``testpaths`` is ``tests/``) and assert nothing about time. Each group
pairs cortexgraph with a raw py-lmdb baseline of the same bytes (see ``_workload``), Merkle
rows (``mmr`` nodes, ``smt`` chunk rows) included:

- ``batched-write``: one round is one batch of 1,000 memories, committed with sync on;
  rounds continue the same store, so round ``i`` writes memories ``1000*i ..``.
- ``single-durable-write``: one round is one memory in its own fsync'ed commit; the
  primary baseline is SQLite in WAL mode (``synchronous=FULL``) inserting the same text
  into a table and an FTS5 index, one transaction per memory.
- ``resolve-hot`` / ``resolve-cold``: ``resolve`` of a pinned URI on a store of 100,000
  memories, against a raw read transaction that gets the same ``heads`` and ``versions``
  keys through the same LMDB handle. Hot cycles 1,000 URIs whose bodies the library's
  verified-body memo already holds; cold walks every memory once in random order after the
  memo is cleared, so every call decodes and verifies its body.

``benches/run.py`` measures the same things without pytest and prints them as one table.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from _workload import (
    ACTOR,
    BASE_AT,
    NS,
    STEP_MS,
    Op,
    RawStore,
    SqliteFts5,
    capture_batches,
    chunks,
    make_memories,
    write_cortex,
)
from cortexgraph.core import state as core_state
from cortexgraph.core.keys import version_key

BATCH = 1_000
BATCH_ROUNDS = 20
SINGLE_ROUNDS = 200
STORE_SIZE = 100_000
HOT_SET = 1_000


# -- workloads ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def batch_workload() -> tuple[list[cg.Memory], list[list[Op]]]:
    memories = make_memories(BATCH * BATCH_ROUNDS, seed=1)
    return memories, capture_batches(memories, batch_size=BATCH)


@pytest.fixture(scope="session")
def single_workload() -> tuple[list[cg.Memory], list[list[Op]]]:
    memories = make_memories(SINGLE_ROUNDS, seed=2)
    return memories, capture_batches(memories, batch_size=1)


@pytest.fixture(scope="session")
def big_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[cg.Cortex, list[cg.MemoryURI]]]:
    """A store of STORE_SIZE memories, built once with sync off (durability is not measured)."""
    root = tmp_path_factory.mktemp("big-store")
    cx = cg.open(root, ACTOR, sync=False)
    try:
        uris = write_cortex(cx, make_memories(STORE_SIZE, seed=3), batch_size=BATCH)
        yield cx, uris
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


# -- batched writes -------------------------------------------------------------------------


@pytest.mark.benchmark(group="batched-write")
def test_batched_write_cortexgraph(
    benchmark: Any, tmp_path: Path, batch_workload: tuple[list[cg.Memory], list[list[Op]]]
) -> None:
    memories, _ = batch_workload
    cx = cg.open(tmp_path, ACTOR, sync=True)

    def write_batch(i: int, batch: Sequence[cg.Memory]) -> None:
        write_cortex(cx, batch, batch_size=BATCH, start_at=BASE_AT + i * BATCH * STEP_MS)

    try:
        benchmark.pedantic(
            write_batch, setup=_feeder(list(chunks(memories, BATCH))), rounds=BATCH_ROUNDS
        )
    finally:
        cx.close()
    _per_second(benchmark, BATCH)


@pytest.mark.benchmark(group="batched-write")
def test_batched_write_raw_lmdb(
    benchmark: Any, tmp_path: Path, batch_workload: tuple[list[cg.Memory], list[list[Op]]]
) -> None:
    _, batches = batch_workload
    raw = RawStore.create(tmp_path / "raw", sync=True)
    try:
        benchmark.pedantic(
            lambda _i, batch: raw.write(batch),
            setup=_feeder(raw.bind(batches)),
            rounds=BATCH_ROUNDS,
        )
    finally:
        raw.close()
    _per_second(benchmark, BATCH)


# -- single durable writes ------------------------------------------------------------------


@pytest.mark.benchmark(group="single-durable-write")
def test_single_durable_write_cortexgraph(
    benchmark: Any, tmp_path: Path, single_workload: tuple[list[cg.Memory], list[list[Op]]]
) -> None:
    memories, _ = single_workload
    cx = cg.open(tmp_path, ACTOR, sync=True)
    try:
        benchmark.pedantic(
            lambda i, memory: cx.write(memory, ns=NS, at=BASE_AT + i * STEP_MS),
            setup=_feeder(memories),
            rounds=SINGLE_ROUNDS,
        )
    finally:
        cx.close()


@pytest.mark.benchmark(group="single-durable-write")
def test_single_durable_write_raw_lmdb(
    benchmark: Any, tmp_path: Path, single_workload: tuple[list[cg.Memory], list[list[Op]]]
) -> None:
    _, batches = single_workload
    raw = RawStore.create(tmp_path / "raw", sync=True)
    try:
        benchmark.pedantic(
            lambda _i, ops: raw.write(ops),
            setup=_feeder(raw.bind(batches)),
            rounds=SINGLE_ROUNDS,
        )
    finally:
        raw.close()


@pytest.mark.benchmark(group="single-durable-write")
def test_single_durable_write_sqlite_fts5(
    benchmark: Any, tmp_path: Path, single_workload: tuple[list[cg.Memory], list[list[Op]]]
) -> None:
    memories, _ = single_workload
    sqlite = SqliteFts5(tmp_path / "single.sqlite")
    try:
        benchmark.pedantic(
            lambda _i, memory: sqlite.write(memory, NS),
            setup=_feeder(memories),
            rounds=SINGLE_ROUNDS,
        )
    finally:
        sqlite.close()


# -- resolve --------------------------------------------------------------------------------


def _hot_set(uris: list[cg.MemoryURI]) -> list[cg.MemoryURI]:
    return random.Random(4).sample(uris, HOT_SET)


def _cold_order(uris: list[cg.MemoryURI]) -> list[cg.MemoryURI]:
    order = list(uris)
    random.Random(5).shuffle(order)
    return order


def _raw_keys(uris: Sequence[cg.MemoryURI]) -> list[tuple[bytes, bytes]]:
    return [(uri.id, version_key(uri.id, uri.version or 1)) for uri in uris]


@pytest.mark.benchmark(group="resolve-hot")
def test_resolve_hot_cortexgraph(
    benchmark: Any, big_store: tuple[cg.Cortex, list[cg.MemoryURI]]
) -> None:
    cx, uris = big_store
    hot = _hot_set(uris)
    for uri in hot:
        cx.resolve(uri)  # the memo now holds every body of the set
    nxt = itertools.cycle(hot).__next__
    benchmark(lambda: cx.resolve(nxt()))


@pytest.mark.benchmark(group="resolve-hot")
def test_resolve_hot_raw_lmdb(
    benchmark: Any, big_store: tuple[cg.Cortex, list[cg.MemoryURI]]
) -> None:
    cx, uris = big_store
    raw = RawStore.borrow(cx)
    keys = _raw_keys(_hot_set(uris))
    for pair in keys:
        raw.get_pair(*pair)
    nxt = itertools.cycle(keys).__next__
    benchmark(lambda: raw.get_pair(*nxt()))


@pytest.mark.benchmark(group="resolve-cold")
def test_resolve_cold_cortexgraph(
    benchmark: Any, big_store: tuple[cg.Cortex, list[cg.MemoryURI]]
) -> None:
    cx, uris = big_store
    core_state._VERIFIED.clear()
    # One pass visits each memory once: at most a few calibration calls can hit the memo.
    nxt = itertools.cycle(_cold_order(uris)).__next__
    benchmark(lambda: cx.resolve(nxt()))


@pytest.mark.benchmark(group="resolve-cold")
def test_resolve_cold_raw_lmdb(
    benchmark: Any, big_store: tuple[cg.Cortex, list[cg.MemoryURI]]
) -> None:
    cx, uris = big_store
    raw = RawStore.borrow(cx)
    nxt = itertools.cycle(_raw_keys(_cold_order(uris))).__next__
    benchmark(lambda: raw.get_pair(*nxt()))
