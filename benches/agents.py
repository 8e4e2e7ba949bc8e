"""Agent event ingestion: events per second into the store, against parsing alone.

Usage (``PYTHONPATH`` names the source tree that is timed)::

    PYTHONPATH=src .venv/bin/python benches/agents.py [--runs 200] [--json]

A directory of ``--runs`` finished event files in the documented format is generated
(seeded), 51 events each: request, start, 20 tool calls (start and end, two at a time
overlapping), 4 thinking lines, 2 info lines, an agent handoff, and a finish (every tenth
run ends in an error instead, every fifth continues a session). Cases, each in a fresh
store where it writes:

- **parse only** (the floor): read every file and ``json.loads`` each line; nothing stored;
- **ingest_events, whole files**: one call over the directory (one batch per file);
- **ingest_events, line by line**: each file grown one line at a time, with a call after
  every line, as ``AgentRunner`` and ``follow`` do while a run is going on (a tenth of the
  runs, to keep the time reasonable).

It reports events per second for each, and the time per event. Nothing here fails on
timing; the target is at least 5,000 events/s for whole files.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cortexgraph as cg
from _report import environment, markdown_table, progress
from cortexgraph.integrations.agents import event_files, ingest_events

T0 = 1_700_000_000_000
TOOLS = ["search_journal", "read_file", "grep", "list_incidents", "fetch_url"]
WORDS = ["deploy", "migration", "cache", "timeout", "billing", "retry", "queue", "schema"]


def _run_lines(rng: random.Random, n: int) -> list[dict[str, Any]]:
    ts = T0 + n * 10_000
    aid = str(ts)
    words = lambda k: " ".join(rng.choice(WORDS) for _ in range(k))  # noqa: E731
    lines: list[dict[str, Any]] = [
        {
            "event": "request",
            "ts": ts,
            "prompt": f"Investigate {words(8)}",
            "name": "bench",
            "provider": "openai",
            "facet": f"project-{n % 5}",
        },
        {"event": "start", "ts": ts + 1, "model": "gpt-4o", "session_id": f"s-{n // 5}"},
    ]
    t = ts + 2
    for i in range(0, 20, 2):
        a, b = rng.choice(TOOLS), rng.choice(TOOLS)
        lines.append(
            {
                "event": "tool_start",
                "ts": t,
                "tool": a,
                "args": {"q": words(3)},
                "call_id": f"{a}-{i}",
            }
        )
        lines.append(
            {
                "event": "tool_start",
                "ts": t + 1,
                "tool": b,
                "args": {"q": words(3)},
                "call_id": f"{b}-{i + 1}",
            }
        )
        lines.append(
            {
                "event": "tool_end",
                "ts": t + 5,
                "tool": b,
                "result": [words(6)],
                "call_id": f"{b}-{i + 1}",
            }
        )
        lines.append(
            {
                "event": "tool_end",
                "ts": t + 9,
                "tool": a,
                "result": {"hits": words(6)},
                "call_id": f"{a}-{i}",
            }
        )
        t += 10
    lines += [{"event": "thinking", "ts": t + k, "summary": words(20)} for k in range(4)]
    lines += [{"event": "info", "ts": t + 5 + k, "message": words(5)} for k in range(2)]
    lines.append({"event": "agent_updated", "ts": t + 8, "agent": "Specialist"})
    if n % 10 == 9:
        lines.append({"event": "error", "ts": t + 9, "error": "quota exceeded", "trace": words(30)})
    else:
        lines.append({"event": "finish", "ts": t + 9, "result": f"Found: {words(30)}"})
    for line in lines:
        line["agent_id"] = aid
    return lines


def write_runs(directory: Path, runs: int) -> int:
    """Write ``runs`` finished event files under ``directory``; returns the events written."""
    rng = random.Random(21)
    total = 0
    for n in range(runs):
        lines = _run_lines(rng, n)
        folder = directory / "bench"
        folder.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(line) + "\n" for line in lines)
        (folder / f"{lines[0]['ts']}.jsonl").write_text(text)
        total += len(lines)
    return total


def parse_only(directory: Path) -> float:
    start = time.perf_counter()
    count = 0
    for path in event_files(directory):
        with path.open("rb") as handle:
            for raw in handle:
                json.loads(raw)
                count += 1
    return time.perf_counter() - start


def whole_files(directory: Path, store: Path) -> tuple[float, int]:
    with cg.open(store, "bench", clock=cg.ManualClock(T0)) as cx:
        start = time.perf_counter()
        report = ingest_events(cx, directory)
        return time.perf_counter() - start, report.events


def line_by_line(directory: Path, scratch: Path, store: Path, runs: int) -> tuple[float, int]:
    folder = scratch / "bench"
    folder.mkdir(parents=True)
    events = 0
    elapsed = 0.0
    with cg.open(store, "bench", clock=cg.ManualClock(T0)) as cx:
        for path in event_files(directory)[:runs]:
            active = folder / path.name.replace(".jsonl", "_active.jsonl")
            with active.open("ab") as out:
                for raw in path.read_bytes().splitlines(keepends=True):
                    out.write(raw)
                    out.flush()
                    start = time.perf_counter()
                    events += ingest_events(cx, active).events
                    elapsed += time.perf_counter() - start
            active.rename(folder / path.name)
    return elapsed, events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="event files (51 events each)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        env = environment(args.runs, root)
        progress(f"writing {args.runs} event files")
        total = write_runs(root / "events", args.runs)
        progress("parse only")
        parse = parse_only(root / "events")
        progress("ingest_events, whole files")
        whole, whole_events = whole_files(root / "events", root / "whole")
        progress("ingest_events, line by line")
        few = max(1, args.runs // 10)
        lines, line_events = line_by_line(root / "events", root / "growing", root / "lines", few)
    results = {
        "parse only (floor)": (total, parse),
        "ingest_events, whole files": (whole_events, whole),
        "ingest_events, line by line": (line_events, lines),
    }
    if args.json:
        data = {k: {"events": n, "seconds": s, "rate": n / s} for k, (n, s) in results.items()}
        print(json.dumps({"environment": env, "cases": data}))
        return 0
    print(f"Agent event ingestion, {args.runs} runs of 51 events\n")
    rows = [
        [case, f"{n:,}", f"{n / s:,.0f}", f"{s / n * 1e6:,.1f}"] for case, (n, s) in results.items()
    ]
    print(markdown_table(["case", "events", "events/s", "µs/event"], rows, {1, 2, 3}))
    print(f"\nload average {env['load_avg_1min_start']} at the start", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
