"""Where a single durable write's time goes: per-phase timers, and the commit's cost per table.

Usage::

    .venv/bin/python benches/single_write.py              # 400 writes, tables to stdout
    .venv/bin/python benches/single_write.py --writes 1000 --dir /mnt/ssd/tmp

Two measurements, each after 100 warm-up writes on a fresh store (the LMDB file and its
free list past their first growth):

1. **Phases.** ``cx.write`` with sync on and with sync off, each phase of the write path
   timed by wrapping the function that does it (the wrappers add about 0.3 µs a phase).
   The phases are disjoint: ``apply`` (the derived rows), ``mmr`` and ``smt`` compute rows
   and return them; ``LMDB puts`` is every ``WriteTxn.apply_mutations`` (the derived, MMR
   and SMT rows); ``journal log`` is, with sync on (on Linux: log mode), the commit's record
   encoded, written to ``journal.log`` and flushed (``fdatasync``), the one flush of a
   durable write; ``LMDB commit`` is LMDB writing the dirty pages, without a flush in log
   mode (the journal log's step is taken out of it), with its own two flushes where there
   is no log. ``other`` is the rest of ``cx.write`` (argument checks, the batch object, the
   URI).
2. **Rows.** The rows each write puts (captured as ``benches/_workload.py`` does) replayed
   into fresh raw LMDB stores, one commit per write, sync on: all of them (the floor: the
   same rows with no cortexgraph code), the journal row alone, and all but one table's rows
   for each table. What a table's rows cost a commit is the difference to "all": the
   pages they dirty, which the flush then writes.

The phases are timed on the sources of the compiled modules (``cortexgraph.compiled``;
this script sets ``CORTEXGRAPH_PURE_PYTHON`` before it imports cortexgraph): compiled code
calls its functions directly, never through the names the timers wrap. The total of the
compiled write, beside SQLite's, is ``benches/write_path.py``'s ``single`` part.

Nothing here fails on timing; the figures go to ``docs/internals.md`` ("Single writes").
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["CORTEXGRAPH_PURE_PYTHON"] = "1"  # the timers wrap names (see above)

import cortexgraph as cg
import cortexgraph.batch as batch_module
import cortexgraph.writing as writing_module
from _report import markdown_table, percentile, progress
from _workload import ACTOR, BASE_AT, NS, STEP_MS, RawStore, capture_batches, make_memories
from cortexgraph.store import env as env_module
from cortexgraph.store import txn as txn_module

WARMUP = 100

#: (label, owner, attribute) of each timed phase, in the order a write runs them
PHASES: tuple[tuple[str, Any, str], ...] = (
    ("writer lock", env_module.Environment, "hold_writer"),
    ("begin txn", env_module.Environment, "begin_write"),
    ("last seq", txn_module.ReadTxn, "last_seq"),
    ("encode body", batch_module, "encode_body"),
    ("memory id", batch_module, "memory_id"),
    ("encode entry", batch_module, "encode_entry"),
    ("journal put", txn_module.WriteTxn, "append_entry"),
    ("apply (derived rows)", writing_module, "apply"),
    ("mmr", writing_module, "mmr_mutations"),
    ("smt", writing_module, "smt_mutations"),
    ("keyword segment encode", writing_module, "docs_blocks"),
    ("keyword segment encode", writing_module, "segment_blocks"),
    ("LMDB puts", txn_module.WriteTxn, "apply_mutations"),
    ("journal log", env_module.Environment, "_log_prepare"),
    ("LMDB commit", txn_module.WriteTxn, "commit"),
    ("release writer", env_module.Environment, "release_writer"),
)


def _timed(function: Callable[..., Any], label: str, spent: dict[str, float]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - start

    return timed


def measure_phases(root: Path, writes: int, *, sync: bool) -> dict[str, float]:
    """µs p50 of each phase of ``cx.write`` (and of the whole write), over ``writes``
    writes after the warm-up."""
    memories = make_memories(writes + WARMUP, seed=2)
    spent: dict[str, float] = {}
    samples: dict[str, list[float]] = {label: [] for label, _, _ in PHASES}
    samples["other"] = []
    totals: list[float] = []
    originals = [(owner, name, getattr(owner, name)) for _, owner, name in PHASES]
    for (label, owner, name), (_, _, original) in zip(PHASES, originals, strict=True):
        setattr(owner, name, _timed(original, label, spent))
    cx = cg.open(root, ACTOR, sync=sync)
    try:
        for i, memory in enumerate(memories):
            spent.clear()
            start = time.perf_counter()
            cx.write(memory, ns=NS, at=BASE_AT + i * STEP_MS)
            total = time.perf_counter() - start
            if i < WARMUP:
                continue
            totals.append(total * 1e6)
            for label in samples.keys() - {"other"}:
                samples[label].append(spent.get(label, 0.0) * 1e6)
            # the phases are disjoint (the journal log's step runs inside WriteTxn.commit
            # and is taken out of it)
            samples["LMDB commit"][-1] -= samples["journal log"][-1]
            outer = sum(spent.values()) - spent.get("journal log", 0.0)
            samples["other"].append(max(total - outer, 0.0) * 1e6)
    finally:
        cx.close()
        for owner, name, original in originals:
            setattr(owner, name, original)
    out = {label: statistics.median(values) for label, values in samples.items()}
    out["total"] = statistics.median(totals)
    return out


def measure_rows(root: Path, writes: int) -> tuple[dict[str, float], dict[str, float]]:
    """Rows per write per table, and the µs p50 of a raw commit (sync on) of each subset
    of a write's rows (see the module docstring)."""
    memories = make_memories(writes + WARMUP, seed=2)
    progress(f"rows: capturing the writes of {len(memories)} memories")
    batches = capture_batches(memories, batch_size=1)
    rows: Counter[str] = Counter()
    for ops in batches[WARMUP:]:
        rows.update(table for table, _, _ in ops)
    per_write = {table: count / writes for table, count in sorted(rows.items())}
    subsets = {"all rows (the floor)": set(rows), "journal row only": {"journal"}}
    for table in sorted(rows):
        if table != "journal":
            subsets[f"all but {table}"] = set(rows) - {table}
    commit_us: dict[str, float] = {}
    for n, (label, keep) in enumerate(subsets.items()):
        progress(f"rows: {label}")
        raw = RawStore.create(root / f"raw-{n}", sync=True)
        try:
            bound = raw.bind([[op for op in ops if op[0] in keep] for ops in batches])
            times: list[float] = []
            for ops in bound:
                start = time.perf_counter()
                raw.write(ops)
                times.append((time.perf_counter() - start) * 1e6)
        finally:
            raw.close()
        commit_us[label] = percentile(times[WARMUP:], 50)
    return per_write, commit_us


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=400, help="measured writes (default 400)")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temporary stores")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cortexgraph-single-", dir=args.dir) as tmp:
        root = Path(tmp)
        progress("phases, sync on")
        synced = measure_phases(root / "sync", args.writes, sync=True)
        progress("phases, sync off")
        unsynced = measure_phases(root / "nosync", args.writes, sync=False)
        per_write, commit_us = measure_rows(root, args.writes)
    labels = [*dict.fromkeys(label for label, _, _ in PHASES), "other", "total"]
    print("phases of cx.write, µs p50")
    print(
        markdown_table(
            ("phase", "sync on", "sync off"),
            [(label, f"{synced[label]:.1f}", f"{unsynced[label]:.1f}") for label in labels],
            {1, 2},
        )
    )
    print(f"\nrows per write: {sum(per_write.values()):.1f}")
    print(markdown_table(("table", "rows"), [(t, f"{c:.1f}") for t, c in per_write.items()], {1}))
    print("\nraw LMDB commit of a write's rows, sync on, µs p50")
    floor = commit_us["all rows (the floor)"]
    print(
        markdown_table(
            ("rows committed", "µs", "less than all"),
            [(label, f"{us:.0f}", f"{floor - us:.0f}") for label, us in commit_us.items()],
            {1, 2},
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
