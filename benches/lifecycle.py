"""Measure forgetting and scopes at scale: ``compact`` time, and scope export and
verification throughput (target: ``verify_scope`` >= 20,000 records/s at 100,000 memories).

Usage::

    .venv/bin/python benches/lifecycle.py              # a store of 100,000 memories
    .venv/bin/python benches/lifecycle.py --n 20000 --json

The store is the deterministic workload of ``_workload.py`` (Facts, Events, Preferences
with 1-4 tags of 50), written in batches of 1,000 with ``sync=False`` and auto-linking on
(so compaction has consolidation candidates), at one write time. Rows:

1. ``compact`` 60 days later (the first compaction: most Events and Preferences decay,
   low-confidence memories are archived, candidates are examined), and once more right
   after (nothing left to do: the cost of looking);
2. ``scope`` export of the 1,000 most salient memories of one tag (records/s), and
   ``verify_scope`` of that bundle (records/s; target >= 20,000/s). The baselines for
   verification are ``verify_smt`` alone on the same records' proofs (the hashing floor
   of checking those memberships one by one) and one ``SmtVerifier`` over them (what
   ``verify_scope`` does: the top levels shared by the proofs hashed once).

Progress goes to stderr; the table (or JSON) to stdout. Nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cortexgraph as cg
from _report import environment, markdown_table, progress
from _workload import BASE_AT, chunks, make_memories
from cortexgraph.core.codec import decode
from cortexgraph.core.commitments import head_commitment
from cortexgraph.core.smt import SmtVerifier, smt_key, verify_smt
from cortexgraph.core.state import HeadState

DAY = 86_400_000


def build(root: Path, n: int) -> None:
    progress(f"writing {n:,} memories (auto-linking on)")
    with cg.open(root, "bench", sync=False, autolink=True) as cx:
        for chunk in chunks(make_memories(n, seed=5), 1_000):
            with cx.batch() as batch:
                for memory in chunk:
                    batch.write(memory, at=BASE_AT)


def measure(root: Path, n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with cg.open(root, "bench", sync=False) as cx:
        progress("compact, 60 days later")
        start = time.perf_counter()
        report = cx.compact(now=BASE_AT + 60 * DAY)
        first = time.perf_counter() - start
        rows.append({"row": "compact 60 days on (first)", "unit": "s", "figure": first,
                     "note": f"{len(report.archived):,} archived, {len(report.merged):,} merged,"
                             f" {report.examined:,} examined"})
        start = time.perf_counter()
        again = cx.compact(now=BASE_AT + 60 * DAY)
        rows.append({"row": "compact again (nothing to do)", "unit": "s",
                     "figure": time.perf_counter() - start,
                     "note": f"{report.examined:,} -> {again.examined:,} examined"})
        tags = sorted({t for m in make_memories(50, seed=5) for t in m.tags})[:3]
        progress("scope export")
        start = time.perf_counter()
        blob = cx.scope(cg.Q.any_of(*(cg.Q.tag(t) for t in tags)), limit=1_000)
        export = time.perf_counter() - start
        root_hash = cx.overall_root()
    records = len(decode(blob)["records"])
    rows.append({"row": "scope export", "unit": "records/s", "figure": records / export,
                 "note": f"{records:,} records, {len(blob):,} bytes"})
    progress("scope verification")
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        cg.verify_scope(blob, trusted_root=root_hash)
        best = min(best, time.perf_counter() - start)
    rows.append({"row": "verify_scope (best of 5)", "unit": "records/s",
                 "figure": records / best, "note": "target >= 20,000/s"})
    value = decode(blob)
    h = value["manifest"]["hash_name"]
    smt_root = value["manifest"]["smt_root"]
    checks = []
    for record in value["records"]:
        head = HeadState.decode(record["head"])
        checks.append((smt_key(h, head.ns, record["id"]),
                       head_commitment(h, record["head"], record["version"]), record["proof"]))
    floor = shared = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for key, commitment, proof in checks:
            verify_smt(h, smt_root, key, commitment, proof)
        floor = min(floor, time.perf_counter() - start)
        start = time.perf_counter()
        verifier = SmtVerifier(h, smt_root)
        for key, commitment, proof in checks:
            verifier.verify(key, commitment, proof)
        shared = min(shared, time.perf_counter() - start)
    rows.append({"row": "baseline: verify_smt alone (best of 5)", "unit": "records/s",
                 "figure": records / floor, "note": "the hashing floor of the same checks"})
    rows.append({"row": "baseline: one SmtVerifier (best of 5)", "unit": "records/s",
                 "figure": records / shared, "note": "the same checks, shared nodes hashed once"})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="cg-lifecycle-", dir=args.dir))
    try:
        env = environment(args.n, root)
        build(root, args.n)
        rows = measure(root, args.n)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps({"environment": env, "rows": rows}, indent=2))
        return 0
    cells = [[r["row"], r["unit"], f"{r['figure']:,.2f}" if r["unit"] == "s"
              else f"{r['figure']:,.0f}", r["note"]] for r in rows]
    print(markdown_table(["operation", "unit", "figure", "note"], cells, numeric={2}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
