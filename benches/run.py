"""Measure cortexgraph against raw LMDB puts and gets of the same bytes; print the tables.

Usage (``make bench`` runs the first)::

    .venv/bin/python benches/run.py                        # every suite, one table each
    .venv/bin/python benches/run.py --suite store          # only the store table
    .venv/bin/python benches/run.py --suite merkle         # only the Merkle table
    .venv/bin/python benches/run.py --suite query          # only the query tables
    .venv/bin/python benches/run.py --suite recall         # recall latency (benches/recall.py)
    .venv/bin/python benches/run.py --suite locomo         # LoCoMo recall (benches/locomo.py)
    .venv/bin/python benches/run.py --suite embedders      # the embedders (benches/embedders.py)
    .venv/bin/python benches/run.py --n 20000 --json
    .venv/bin/python benches/run.py --dir /mnt/ssd/tmp     # where the stores live

The ``store`` suite is described below; the ``merkle`` suite (writes with and without Merkle
maintenance, replay, proofs) lives in ``benches/merkle.py``, the ``query`` suite
(``find`` against SQLite, ``traverse``, ``attest``, a profile of ``find``) in
``benches/query.py``, the ``recall`` suite (recall latency at ``--n`` memories against
hnswlib and SQLite FTS5) in ``benches/recall.py``, the ``locomo`` suite (evidence recall
on the LoCoMo development split with MiniLM on ONNX Runtime and, when torch can be imported,
on torch) in ``benches/locomo.py`` and the ``embedders`` suite (the embedders' throughput,
model load, query embedding and the CLI's recall, on LoCoMo turns) in
``benches/embedders.py``; ``all`` skips the last two when ``--data`` does not exist. Each
also runs on its own.

What the store suite measures, each next to a raw py-lmdb baseline run in the same process
(see ``benches/README.md`` for the figures on one machine):

1. batched writes: 20 batches of 1,000 memories (one write transaction each, sync on) into
   a fresh store; 3 repeats, best and median memories/s. The baseline replays the puts and
   deletes those batches make, Merkle rows (``mmr``, ``smt``) included, captured from a
   scratch store, with the same transaction boundaries.
2. single durable writes: 200 memories, each ``cx.write`` its own fsync'ed commit, against
   SQLite in WAL mode (``synchronous=FULL``) inserting the same text into a table and an
   FTS5 index in one transaction (the primary baseline), and against one raw commit of that
   write's puts and deletes (its ``mmr`` nodes and ``smt`` rows included; the floor); the
   three alternate, write by write. µs p50 / p95.
3. ``resolve`` of pinned URIs on a store of ``--n`` memories: a hot set of 1,000 URIs
   resolved repeatedly (their bodies sit in the library's verified-body memo), and cold: the
   memo cleared, then up to 20,000 distinct memories drawn uniformly from the whole store,
   so every call decodes and verifies its body. The baseline is one read transaction that
   gets the same ``heads`` and ``versions`` keys through the store's own LMDB handle.

After each write phase, every table but ``meta`` and ``snapshots`` is checked to be
byte-identical between the cortexgraph store and the raw one.

A second table gives the floors the targets must clear with no cortexgraph code at all:
the batched writes' rows replayed raw with sync on (the baseline above) and with sync off,
and a cold ``resolve``'s two raw reads followed by the J6 check of the body alone
(``cbor2.loads``, the validated build, the canonical re-encode and the comparison).

Progress goes to stderr; the table (or JSON with ``--json``) to stdout. Nothing here fails
on timing: a missed target is reported as ``no``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cbor2

import cortexgraph as cg
import embedders
import locomo
import merkle
import query
import recall as recall_suite
from _report import environment, markdown_table, percentile, progress, torch_available
from _workload import (
    ACTOR,
    BASE_AT,
    NS,
    STEP_MS,
    RawStore,
    SqliteFts5,
    capture_batches,
    check_same_bytes,
    make_memories,
    write_cortex,
)
from cortexgraph.core import state as core_state
from cortexgraph.core.body import encode_body, memory_from_body
from cortexgraph.core.keys import version_key
from cortexgraph.core.taxonomy import Memory

BATCH = 1_000
BATCHES = 20
REPEATS = 3
SINGLES = 200
HOT_SET = 1_000
HOT_PASSES = 20
COLD_CALLS = 20_000

TARGET_BATCH_RATE = 20_000  # memories/s, at least
TARGET_SINGLE_RATIO = 1.5  # x a raw commit, at most
TARGET_SINGLE_SQLITE_RATIO = 1.0  # x SQLite's single insert with FTS5, at most
TARGET_RESOLVE_US = 20.0  # µs, at most

SQLITE_BASELINE = "SQLite WAL+FTS5"

_clock = time.perf_counter
#: bytes before the body in a ``versions`` row (layout, seq, at)
_VERSION_HEADER = len(core_state.VersionState(seq=1, at=0, body=b"").encode())


# -- measurements -------------------------------------------------------------------------


def measure_batched(root: Path) -> tuple[list[float], list[float], list[float]]:
    """Memories/s of each repeat: cortexgraph, raw LMDB, and raw LMDB with sync off (the
    floor: the same rows written with no cortexgraph code and no fsync)."""
    memories = make_memories(BATCH * BATCHES, seed=1)
    progress(f"batched writes: capturing the writes of {len(memories):,} memories")
    batches = capture_batches(memories, batch_size=BATCH)
    ours: list[float] = []
    raw_rates: list[float] = []
    floor_rates: list[float] = []
    for rep in range(REPEATS):
        cx = cg.open(root / f"batched-{rep}", ACTOR, sync=True)
        try:
            start = _clock()
            write_cortex(cx, memories, batch_size=BATCH)
            ours.append(len(memories) / (_clock() - start))
        finally:
            cx.close()
        raw_rates.append(_raw_rate(root / f"batched-raw-{rep}", batches, len(memories), sync=True))
        check_same_bytes(root / f"batched-{rep}" / ACTOR, root / f"batched-raw-{rep}")
        floor_rates.append(
            _raw_rate(root / f"batched-floor-{rep}", batches, len(memories), sync=False)
        )
        check_same_bytes(root / f"batched-{rep}" / ACTOR, root / f"batched-floor-{rep}")
        progress(
            f"batched writes: repeat {rep + 1}/{REPEATS}: cortexgraph {ours[-1]:,.0f}/s,"
            f" raw {raw_rates[-1]:,.0f}/s, raw with sync off {floor_rates[-1]:,.0f}/s"
        )
    return ours, raw_rates, floor_rates


def _raw_rate(path: Path, batches: list[list[Any]], memories: int, *, sync: bool) -> float:
    """Memories/s of replaying ``batches``, one write transaction each, into a fresh raw
    store."""
    raw = RawStore.create(path, sync=sync)
    try:
        return memories / raw.timed_replay(batches)
    finally:
        raw.close()


def measure_single(root: Path) -> tuple[list[float], list[float], list[float]]:
    """µs per durable write: cortexgraph, a raw LMDB commit of the same rows, and SQLite
    (WAL, ``synchronous=FULL``, FTS5) inserting the same text, the three alternating write
    by write so that they share the machine's moments."""
    memories = make_memories(SINGLES, seed=2)
    progress(f"single durable writes: capturing the writes of {len(memories)} memories")
    batches = capture_batches(memories, batch_size=1)
    cx = cg.open(root / "single", ACTOR, sync=True)
    raw = RawStore.create(root / "single-raw", sync=True)
    sqlite = SqliteFts5(root / "single.sqlite")
    ours: list[float] = []
    raw_us: list[float] = []
    sqlite_us: list[float] = []
    try:
        for i, (memory, ops) in enumerate(zip(memories, raw.bind(batches), strict=True)):
            at = BASE_AT + i * STEP_MS
            start = _clock()
            cx.write(memory, ns=NS, at=at)
            middle = _clock()
            raw.write(ops)
            end = _clock()
            sqlite.write(memory, NS)
            last = _clock()
            ours.append((middle - start) * 1e6)
            raw_us.append((end - middle) * 1e6)
            sqlite_us.append((last - end) * 1e6)
    finally:
        cx.close()
        raw.close()
        sqlite.close()
    check_same_bytes(root / "single" / ACTOR, root / "single-raw")
    progress(
        f"single durable writes: p50 cortexgraph {statistics.median(ours):,.0f} µs,"
        f" raw {statistics.median(raw_us):,.0f} µs,"
        f" SQLite+FTS5 {statistics.median(sqlite_us):,.0f} µs"
    )
    return ours, raw_us, sqlite_us


def time_calls(call: Callable[[Any], object], args: Sequence[Any]) -> list[float]:
    """µs of each ``call(arg)``, timed one by one."""
    out: list[float] = []
    for arg in args:
        start = _clock()
        call(arg)
        out.append((_clock() - start) * 1e6)
    return out


def measure_resolve(root: Path, n: int) -> dict[str, tuple[list[float], list[float]]]:
    """µs per resolve (hot and cold), cortexgraph and raw, on a store of ``n`` memories."""
    progress(f"resolve: generating {n:,} memories")
    memories = make_memories(n, seed=3)
    progress(f"resolve: building a store of {n:,} memories (sync off)")
    cx = cg.open(root / "resolve", ACTOR, sync=False)
    try:
        start = _clock()
        uris = write_cortex(cx, memories, batch_size=BATCH)
        progress(f"resolve: built at {n / (_clock() - start):,.0f} memories/s")
        del memories
        raw = RawStore.borrow(cx)

        def raw_get(uri: cg.MemoryURI) -> object:
            return raw.get_pair(uri.id, version_key(uri.id, uri.version or 1))

        rng = random.Random(4)
        hot = rng.sample(uris, min(HOT_SET, n))
        for uri in hot:  # warm the memo and the pages
            cx.resolve(uri)
            raw_get(uri)
        hot_order: list[cg.MemoryURI] = []
        for _ in range(HOT_PASSES):
            hot_order.extend(rng.sample(hot, len(hot)))
        # The raw side gets prebuilt keys, so that it times LMDB and nothing else.
        hot_keys = [(u.id, version_key(u.id, u.version or 1)) for u in hot_order]
        progress(f"resolve: hot set, {len(hot_order):,} calls each")
        results = {
            "hot": (
                time_calls(cx.resolve, hot_order),
                time_calls(lambda k: raw.get_pair(*k), hot_keys),
            )
        }
        cold_order = rng.sample(uris, min(COLD_CALLS, n))
        cold_keys = [(u.id, version_key(u.id, u.version or 1)) for u in cold_order]
        core_state._VERIFIED.clear()
        progress(f"resolve: cold, {len(cold_order):,} distinct memories, memo cleared")
        results["cold"] = (
            time_calls(cx.resolve, cold_order),
            time_calls(lambda k: raw.get_pair(*k), cold_keys),
        )
        # The same keys once more, each read raw and put through J6 and nothing else.
        results["j6_floor"] = (time_calls(lambda k: _j6_floor(raw, k), cold_keys), [])
    finally:
        cx.close()
    return results


def _j6_floor(raw: RawStore, keys: tuple[bytes, bytes]) -> Memory:
    """What a cold ``resolve`` cannot skip: read the head and version rows raw, then the
    J6 check of the body with nothing around it (decode, validated build, canonical
    re-encode, compare). Raises if the body fails it."""
    _head, version = raw.get_pair(*keys)
    body = version[_VERSION_HEADER:]
    memory = memory_from_body(cbor2.loads(body))
    if encode_body(memory)[1] != body:
        raise RuntimeError("a stored body is not canonical")
    return memory


# -- report -------------------------------------------------------------------------------


def row(
    operation: str,
    unit: str,
    ours: float,
    raw: float,
    *,
    baseline: str = "raw LMDB",
    higher_is_better: bool = False,
    target: str = "",
    met: bool | None = None,
) -> dict[str, Any]:
    """One table row; ``ratio`` is cortexgraph's cost as a multiple of the baseline's
    (raw LMDB's unless ``baseline`` names another)."""
    ratio = raw / ours if higher_is_better else ours / raw
    return {
        "operation": operation,
        "unit": unit,
        "cortexgraph": ours,
        "baseline": baseline,
        "baseline_figure": raw,
        "ratio": ratio,
        "target": target,
        "met": met,
    }


def build_rows(
    batched: tuple[list[float], list[float], list[float]],
    single: tuple[list[float], list[float], list[float]],
    resolve: dict[str, tuple[list[float], list[float]]],
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    ours, raw, _floor = batched
    for label, pick in (("best", max), ("median", statistics.median)):
        rate = pick(ours)
        rows.append(
            row(
                f"batched write, {BATCH:,}/txn ({label} of {REPEATS})",
                "memories/s",
                rate,
                pick(raw),
                higher_is_better=True,
                target=f">= {TARGET_BATCH_RATE:,}/s",
                met=rate >= TARGET_BATCH_RATE,
            )
        )
    ours, raw, sqlite = single
    p50 = row("single durable write p50", "µs", percentile(ours, 50), percentile(raw, 50))
    p50.update(target=f"<= {TARGET_SINGLE_RATIO}x raw", met=p50["ratio"] <= TARGET_SINGLE_RATIO)
    rows.append(p50)
    rows.append(row("single durable write p95", "µs", percentile(ours, 95), percentile(raw, 95)))
    p50 = row(
        "single durable write p50",
        "µs",
        percentile(ours, 50),
        percentile(sqlite, 50),
        baseline=SQLITE_BASELINE,
    )
    p50.update(
        target=f"<= {TARGET_SINGLE_SQLITE_RATIO}x SQLite",
        met=p50["ratio"] <= TARGET_SINGLE_SQLITE_RATIO,
    )
    rows.append(p50)
    rows.append(
        row(
            "single durable write p95",
            "µs",
            percentile(ours, 95),
            percentile(sqlite, 95),
            baseline=SQLITE_BASELINE,
        )
    )
    for kind, label in (("hot", f"hot {HOT_SET:,}"), ("cold", "cold, memo cleared")):
        ours, raw = resolve[kind]
        median = percentile(ours, 50)
        rows.append(
            row(
                f"resolve p50 ({label})",
                "µs",
                median,
                percentile(raw, 50),
                target=f"<= {TARGET_RESOLVE_US:g} µs",
                met=median <= TARGET_RESOLVE_US,
            )
        )
        rows.append(row(f"resolve p95 ({label})", "µs", percentile(ours, 95), percentile(raw, 95)))
    return rows


def build_floor_rows(
    batched: tuple[list[float], list[float], list[float]],
    single: tuple[list[float], list[float], list[float]],
    resolve: dict[str, tuple[list[float], list[float]]],
) -> list[dict[str, Any]]:
    """What the targets leave: the same work with no cortexgraph code around it."""
    _ours, raw, floor = batched
    _ours, single_raw, single_sqlite = single
    single_floor = percentile(single_raw, 50)
    single_target = percentile(single_sqlite, 50) * TARGET_SINGLE_SQLITE_RATIO
    batch_target = f">= {TARGET_BATCH_RATE:,}/s"
    j6 = percentile(resolve["j6_floor"][0], 50)
    return [
        {
            "floor": f"batched write: raw LMDB, same rows, sync on (best of {REPEATS})",
            "unit": "memories/s",
            "figure": max(raw),
            "target": batch_target,
            "met": max(raw) >= TARGET_BATCH_RATE,
        },
        {
            "floor": f"batched write: raw LMDB, same rows, sync off (best of {REPEATS})",
            "unit": "memories/s",
            "figure": max(floor),
            "target": batch_target,
            "met": max(floor) >= TARGET_BATCH_RATE,
        },
        {
            "floor": "single durable write p50: raw LMDB commit of the same rows (sync, metasync)",
            "unit": "µs",
            "figure": single_floor,
            "target": f"<= {single_target:,.0f} µs ({TARGET_SINGLE_SQLITE_RATIO}x SQLite)",
            "met": single_floor <= single_target,
        },
        {
            "floor": "resolve p50 (cold): raw reads + the J6 check of the body alone",
            "unit": "µs",
            "figure": j6,
            "target": f"<= {TARGET_RESOLVE_US:g} µs",
            "met": j6 <= TARGET_RESOLVE_US,
        },
    ]


def format_floor_table(rows: list[dict[str, Any]]) -> str:
    header = ("floor (no cortexgraph code)", "unit", "figure", "target", "floor meets it")
    cells = [
        (
            r["floor"],
            r["unit"],
            _number(r["figure"], r["unit"]),
            r["target"],
            "yes" if r["met"] else "no",
        )
        for r in rows
    ]
    return markdown_table(header, cells, {2})


def _number(value: float, unit: str) -> str:
    return f"{value:,.0f}" if unit == "memories/s" or value >= 1000 else f"{value:,.1f}"


def format_table(rows: list[dict[str, Any]]) -> str:
    header = ("operation", "unit", "cortexgraph", "baseline", "figure", "x base", "target", "met")
    cells = [
        (
            r["operation"],
            r["unit"],
            _number(r["cortexgraph"], r["unit"]),
            r["baseline"],
            _number(r["baseline_figure"], r["unit"]),
            f"{r['ratio']:.2f}x",
            r["target"] or "-",
            "-" if r["met"] is None else ("yes" if r["met"] else "no"),
        )
        for r in rows
    ]
    return markdown_table(header, cells, {2, 4, 5})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--suite",
        choices=("store", "merkle", "query", "recall", "locomo", "embedders", "all"),
        default="all",
        help="store: writes and resolve against raw LMDB; merkle: Merkle maintenance,"
        " replay and proofs (benches/merkle.py); query: find against SQLite, traverse,"
        " attest (benches/query.py); recall: recall latency against hnswlib and"
        " FTS5 (benches/recall.py); locomo: LoCoMo evidence recall with MiniLM, ONNX and"
        " torch (benches/locomo.py, about 2 minutes); embedders: the embedders' speed,"
        " model load and the CLI's recall (benches/embedders.py, about 2 minutes); all:"
        " every suite (default; locomo and embedders are skipped when --data does not"
        " exist)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=locomo.DEFAULT_DATA,
        help="the LoCoMo file (locomo_dev5.json) for the locomo and embedders suites"
        " (default: $CORTEXGRAPH_LOCOMO)",
    )
    parser.add_argument(
        "--n",
        type=int,
        default=100_000,
        help="memories in the resolve store; for the merkle suite, memories in the prefilled"
        " store and entries in the replay journal; for the query and recall suites,"
        " memories in their stores (default 100000)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--dir", type=Path, default=None, help="parent of the temporary stores (default: TMPDIR)"
    )
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be positive")
    if args.suite in ("merkle", "recall", "all") and args.n < 100:
        parser.error("--n must be at least 100 for the merkle and recall suites")
    if args.suite in ("query", "all") and args.n < 1_000:
        parser.error("--n must be at least 1000 for the query suite")
    rows: list[dict[str, Any]] | None = None
    floor_rows: list[dict[str, Any]] | None = None
    merkle_rows: list[dict[str, Any]] | None = None
    query_result: dict[str, Any] | None = None
    recall_result: dict[str, Any] | None = None
    locomo_result: dict[str, Any] | None = None
    embedders_result: dict[str, Any] | None = None
    # the torch side of the locomo and embedders suites, when torch can be imported
    torch = torch_available()
    with tempfile.TemporaryDirectory(prefix="cortexgraph-bench-", dir=args.dir) as tmp:
        root = Path(tmp)
        info = environment(args.n, root)
        progress(f"stores under {root}")
        if args.suite in ("store", "all"):
            batched = measure_batched(root)
            single = measure_single(root)
            resolve = measure_resolve(root, args.n)
            rows = build_rows(batched, single, resolve)
            floor_rows = build_floor_rows(batched, single, resolve)
        if args.suite in ("merkle", "all"):
            (root / "merkle").mkdir()
            # The resolve store holds the workload merkle.build_store makes: reuse it.
            prefilled = root / "resolve" if rows is not None else None
            merkle_rows = merkle.measure(root / "merkle", args.n, prefilled=prefilled)
        if args.suite in ("query", "all"):
            (root / "query").mkdir()
            query_result = query.measure(root / "query", args.n)
        if args.suite in ("recall", "all"):
            (root / "recall").mkdir()
            recall_result = recall_suite.measure(
                root / "recall", args.n, recall_suite.QUERIES, profile=False, minilm=False
            )
        if args.suite == "locomo" or (args.suite == "all" and args.data.is_file()):
            (root / "locomo").mkdir()
            names = ["local", "torch"] if torch else ["local"]
            locomo_result = locomo.measure(args.data, root / "locomo", None, names)
        elif args.suite == "all":
            progress(f"locomo: skipped, {args.data} does not exist")
        if args.suite == "embedders" or (args.suite == "all" and args.data.is_file()):
            (root / "embedders").mkdir()
            embedders_result = embedders.measure(args.data, root / "embedders", torch=torch)
        elif args.suite == "all":
            progress(f"embedders: skipped, {args.data} does not exist")
    info["load_avg_1min_end"] = round(os.getloadavg()[0], 2)
    progress("done")
    if args.json:
        out: dict[str, Any] = {"environment": info}
        if rows is not None:
            out["rows"] = rows
            out["floor_rows"] = floor_rows
        if merkle_rows is not None:
            out["merkle_rows"] = merkle_rows
        if query_result is not None:
            out["query"] = query_result
        if recall_result is not None:
            out["recall_rows"] = recall_suite.build_rows(recall_result)
            out["recall_times"] = recall_result["times"]
        if locomo_result is not None:
            out["locomo"] = {
                **locomo.json_result(locomo_result),
                **locomo.summarise(locomo_result),
            }
        if embedders_result is not None:
            out["embedders"] = embedders.json_result(embedders_result)
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    print(
        f"cortexgraph {info['cortexgraph']}, Python {info['python']}, LMDB {info['lmdb']}"
        f" (py-lmdb {info['py_lmdb']}), {info['cpus']} CPUs, {info['platform']}"
    )
    print(
        f"1-min load average {info['load_avg_1min_start']} at start,"
        f" {info['load_avg_1min_end']} at end"
    )
    if rows is not None:
        print(f"\nstore suite: resolve store of {args.n:,} memories")
        print(format_table(rows))
    if floor_rows is not None:
        print("\nstore suite floors: the same work with no cortexgraph code")
        print(format_floor_table(floor_rows))
    if merkle_rows is not None:
        print(
            f"\nmerkle suite: prefilled store of {args.n:,} memories,"
            f" replay journal of {args.n:,} entries"
        )
        print(merkle.format_table(merkle_rows))
    if query_result is not None:
        print()
        print(query.header_lines(info, query_result)[1])
        query.print_result(query_result)
    if recall_result is not None:
        print(
            f"\nrecall suite: {args.n:,} memories, HashEmbedder (384 dims),"
            f" {recall_result['queries']:,} queries, k={recall_suite.K}"
        )
        print(recall_suite.format_table(recall_suite.build_rows(recall_result)))
        print()
        print(recall_suite.format_times(recall_result, args.n))
    if locomo_result is not None:
        print("\nlocomo suite (all-MiniLM-L6-v2)")
        print(locomo.format_report(locomo_result, locomo.summarise(locomo_result)))
    if embedders_result is not None:
        print("\nembedders suite")
        print(embedders.format_report(embedders_result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
