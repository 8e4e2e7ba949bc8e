"""The framework adapters against what a user of each framework runs instead, in one run.

Usage (``PYTHONPATH`` names the source tree that is timed)::

    PYTHONPATH=src .venv/bin/python benches/adapters.py [--n 5000] [--calls 300] [--json]

- **LangGraph.** ``--n`` items in 50 namespaces, put into LangGraph's ``InMemoryStore``
  and into ``CortexStore`` (durable: every put is a synced commit, and also with
  ``sync=False``, which matches the in-memory store's lack of durability more closely).
  Then ``--calls`` timed calls of each: ``put`` (a new key), ``get`` (an existing key),
  and ``search`` in one namespace with a filter (``{"n": {"$gte": ...}}``, limit 10).
- **MCP.** A store of ``--n`` memories served by ``cortexgraph mcp``'s server in process,
  and ``--calls`` keyword ``recall`` tool calls through ``mcp.Client`` (the whole round
  trip: the request, the tool, JSON in both directions), against the same ``recall``
  called directly on an identical store (the library call the tool wraps).

Each case reports p50 and p95 in microseconds and the ratio of p50s against its baseline.
Nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp
from langgraph.store.memory import InMemoryStore

import cortexgraph as cg
from _report import environment, markdown_table, percentile, progress
from cortexgraph.integrations.langgraph import CortexStore
from cortexgraph.integrations.mcp import build_server

WORDS = [
    "deploy", "billing", "service", "login", "safari", "migration", "postgres", "cache",
    "queue", "worker", "token", "api", "schema", "index", "cluster", "retry", "timeout",
    "budget", "ledger", "invoice", "refund",
]
T0 = 1_700_000_000_000
NAMESPACES = 50


def _text(rng: random.Random, i: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(10)) + f" note {i}"


def _timed(call: Callable[[int], object], calls: int) -> list[float]:
    """Microseconds of ``call(i)`` for i in range(calls)."""
    out = []
    for i in range(calls):
        start = time.perf_counter()
        call(i)
        out.append((time.perf_counter() - start) * 1e6)
    return out


def _store_cases(store: Any, n: int, calls: int) -> dict[str, list[float]]:
    """Preload ``n`` items into ``store``, then time put, get and search."""
    rng = random.Random(7)
    for i in range(n):
        store.put(("users", f"u{i % NAMESPACES}"), f"k{i}", {"text": _text(rng, i), "n": i})
    keys = [(("users", f"u{i % NAMESPACES}"), f"k{i}") for i in rng.sample(range(n), calls)]

    def put(i: int) -> None:
        store.put(("users", f"u{i % NAMESPACES}"), f"new{i}", {"n": n + i})

    def search(i: int) -> None:
        store.search(("users", f"u{i % NAMESPACES}"), filter={"n": {"$gte": n // 2}}, limit=10)

    return {
        "put": _timed(put, calls),
        "get": _timed(lambda i: store.get(*keys[i]), calls),
        "search": _timed(search, calls),
    }


def langgraph_cases(root: Path, n: int, calls: int) -> dict[str, dict[str, list[float]]]:
    """put / get / search latencies for each store."""
    results: dict[str, dict[str, list[float]]] = {}
    makers: dict[str, Callable[[], Any]] = {
        "InMemoryStore": InMemoryStore,
        "CortexStore": lambda: CortexStore.open(root / "durable", "langgraph"),
        "CortexStore, sync=False": lambda: CortexStore.open(
            root / "nosync", "langgraph", sync=False
        ),
    }
    for name, make in makers.items():
        store = make()
        progress(f"langgraph: {name}: {n:,} items, then {calls} calls of each op")
        results[name] = _store_cases(store, n, calls)
        close = getattr(store, "close", None)
        if close is not None:
            close()
    return results


def _fill_memory(root: Path, n: int) -> None:
    rng = random.Random(11)
    with cg.open(root, "agent", sync=False) as cx, cx.batch() as batch:
        for i in range(n):
            batch.write(cg.Fact(text=_text(rng, i), tags=("note",)), at=T0 + i)


def mcp_cases(root: Path, n: int, calls: int) -> dict[str, list[float]]:
    """The recall round trip through MCP, and the same recall called directly."""
    progress(f"mcp: two identical stores of {n:,} memories")
    _fill_memory(root / "served", n)
    _fill_memory(root / "direct", n)
    rng = random.Random(3)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(calls)]

    with cg.open(root / "direct", "agent", readonly=True) as cx:
        cx.recall(queries[0], mode="keyword")  # the first query builds the index
        direct = _timed(lambda i: cx.recall(queries[i], k=10, mode="keyword"), calls)

    async def round_trips() -> list[float]:
        server = build_server(root / "served", "agent")
        async with mcp.Client(server) as client:
            await client.call_tool("recall", {"text": queries[0], "mode": "keyword"})
            out = []
            for query in queries:
                start = time.perf_counter()
                result = await client.call_tool(
                    "recall", {"text": query, "k": 10, "mode": "keyword"}
                )
                out.append((time.perf_counter() - start) * 1e6)
                if result.is_error:
                    raise RuntimeError(f"recall failed through MCP: {result.content}")
            return out

    progress(f"mcp: {calls} recall round trips")
    return {
        "recall, direct library call": direct,
        "recall, MCP round trip": asyncio.run(round_trips()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5_000, help="items and memories preloaded")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per case")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        env = environment(args.n, root)
        lg = langgraph_cases(root / "langgraph", args.n, args.calls)
        mc = mcp_cases(root / "mcp", args.n, args.calls)
    if args.json:
        print(json.dumps({"environment": env, "langgraph": lg, "mcp": mc}))
        return 0
    print(f"LangGraph stores, {args.n:,} items, {args.calls} calls per case (µs)\n")
    rows = []
    for op in ("put", "get", "search"):
        base = percentile(lg["InMemoryStore"][op], 50)
        for name, cases in lg.items():
            times = cases[op]
            p50 = percentile(times, 50)
            rows.append(
                [op, name, f"{p50:,.0f}", f"{percentile(times, 95):,.0f}", f"{p50 / base:.1f}x"]
            )
    print(markdown_table(["op", "store", "p50", "p95", "p50 vs InMemoryStore"], rows, {2, 3, 4}))
    print(f"\nMCP recall (keyword, k=10), {args.n:,} memories, {args.calls} calls (µs)\n")
    base = percentile(mc["recall, direct library call"], 50)
    rows = [
        [
            case,
            f"{percentile(t, 50):,.0f}",
            f"{percentile(t, 95):,.0f}",
            f"{percentile(t, 50) / base:.1f}x",
        ]
        for case, t in mc.items()
    ]
    print(markdown_table(["case", "p50", "p95", "p50 vs direct"], rows, {1, 2, 3}))
    print(f"\nload average {env['load_avg_1min_start']} at the start", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
