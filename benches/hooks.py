"""Time the Claude Code hooks as Claude Code runs them: a whole process per call.

Usage (``PYTHONPATH`` names the source tree that is timed)::

    PYTHONPATH=src .venv/bin/python benches/hooks.py [--n 10000] [--runs 20] [--json]
        [--no-bytecode]

A project store of ``--n`` memories (texts of ten words from a small vocabulary, tagged
decision, gotcha or context) is written once, as the Stop hook writes it (its close leaves
the column snapshot). Then each case runs ``--runs`` times as a fresh interpreter with the
event's JSON on stdin, and the wall time from spawning to exit is reported, interpreter
start-up included:

- ``UserPromptSubmit``: keyword recall for a prompt, recording access (a write);
- ``SessionStart, cached surface``: the surface served from its cache (valid while the
  stores do not change), as after a Stop;
- ``SessionStart, surface computed``: the cache removed before each run, so the surface is
  ranked from the stores;
- ``UserPromptSubmit, no column snapshot``: the snapshot removed before each run, so each
  process scans the store to build its column index.

A bare ``python -c pass`` is the floor. Targets: the prompt hook p95 <= 200 ms at 10,000
memories; SessionStart with a cached surface p95 <= 150 ms. Nothing here fails on timing.

The children read bytecode from a private cache that one warm-up run per command fills
(``_bytecode.py``), as an installed package does; ``--no-bytecode`` makes every run
compile every module from source instead, as it would with ``PYTHONDONTWRITEBYTECODE=1``
and no cache (about 85 ms more per hook). The table's caption says which.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cortexgraph as cg
from _bytecode import bytecode_env, describe, warm_up
from _report import markdown_table, percentile, progress
from cortexgraph.index.snapshot import SNAPSHOT_FILE
from cortexgraph.integrations.claude_code.surface import CACHE_DIR

SRC = Path(__file__).resolve().parent.parent / "src"
ENV = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(SRC))}
WORDS = [
    "deploy",
    "billing",
    "service",
    "login",
    "safari",
    "migration",
    "postgres",
    "cache",
    "queue",
    "worker",
    "token",
    "api",
    "schema",
    "index",
    "cluster",
    "retry",
    "timeout",
    "budget",
]
PROMPT = "why does the billing migration time out?"
CACHED = "SessionStart, cached surface"
COMPUTED = "SessionStart, surface computed"
NO_SNAPSHOT = "UserPromptSubmit, no column snapshot"
TARGETS = {"UserPromptSubmit": 200.0, CACHED: 150.0}
CASES = ("python -c pass", "UserPromptSubmit", CACHED, COMPUTED, NO_SNAPSHOT)


def build(project: Path, n: int) -> None:
    """A project store of ``n`` memories under ``project/.memory``, written and then
    read by one handle, as the Stop hook writes what it extracted and reads (its cursor,
    the surface): so its close leaves the column snapshot that hook's close leaves."""
    rng = random.Random(1)
    with cg.open(project / ".memory", "project", sync=False) as cx:
        with cx.batch() as batch:
            for i in range(n):
                text = " ".join(rng.choice(WORDS) for _ in range(10)) + f" note {i}"
                tag = rng.choice(["decision", "gotcha", "context"])
                batch.write(cg.Fact(text=text, tags=(tag,)), at=1_700_000_000_000 + i)
        cx.find(cg.Q.tag("decision"), limit=25)


def wall_ms(
    command: list[str],
    stdin: str,
    runs: int,
    env: dict[str, str],
    before_each: Callable[[], None] = lambda: None,
) -> tuple[list[float], list[float]]:
    """The wall times of ``runs`` runs of ``command`` fed ``stdin``, and their CPU times
    (user + system), in milliseconds; ``before_each`` runs untimed before each run."""
    times = []
    cpu = []
    for _ in range(runs):
        before_each()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, input=stdin, text=True, env=env, check=True, capture_output=True)
        times.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        cpu.append(used * 1000)
    return times, cpu


def measure(n: int, runs: int, *, bytecode: bool = True) -> dict[str, Any]:
    """The wall and CPU times of each case and of the bare interpreter, and how the
    children got their bytecode (``"bytecode"``)."""
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "proj"
        env = bytecode_env(ENV, Path(scratch) / "pycache") if bytecode else ENV
        progress(f"hooks: writing {n:,} memories")
        build(project, n)
        hook = [sys.executable, "-m", "cortexgraph.cli", "hook"]
        out: dict[str, Any] = {"memories": n, "runs": runs, "bytecode": describe(env)}
        bare = [sys.executable, "-c", "pass"]
        if bytecode:
            warm_up([bare], env, [""])
        out["python -c pass"], out["cpu python -c pass"] = wall_ms(bare, "", runs, env)
        cache = project / ".memory" / CACHE_DIR
        snapshot = project / ".memory" / "project" / SNAPSHOT_FILE

        def stdin_of(event: str, **extra: str) -> str:
            return json.dumps(
                {"session_id": "bench", "cwd": str(project), "hook_event_name": event, **extra}
            )

        cases = [
            ("UserPromptSubmit", "UserPromptSubmit", {"prompt": PROMPT}, lambda: None),
            (CACHED, "SessionStart", {"source": "startup"}, lambda: None),
            (COMPUTED, "SessionStart", {"source": "startup"},
             lambda: shutil.rmtree(cache, ignore_errors=True)),
            (NO_SNAPSHOT, "UserPromptSubmit", {"prompt": PROMPT},
             lambda: snapshot.unlink(missing_ok=True)),
        ]  # fmt: skip
        for case, event, extra, before_each in cases:
            stdin = stdin_of(event, **extra)
            if bytecode:
                warm_up([[*hook, event]], env, [stdin])
            wall_ms([*hook, event], stdin, 1, env)  # warm the file cache (and the surface's)
            progress(f"hooks: {case}, {runs} runs")
            out[case], out[f"cpu {case}"] = wall_ms([*hook, event], stdin, runs, env, before_each)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="memories in the store")
    parser.add_argument("--runs", type=int, default=20, help="runs per case")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="compile every module from source in every run (no bytecode cache)",
    )
    args = parser.parse_args(argv)
    result = measure(args.n, args.runs, bytecode=not args.no_bytecode)
    rows = []
    for case in CASES:
        times = result[case]
        target = TARGETS.get(case)
        p95 = percentile(times, 95)
        rows.append(
            [
                case,
                f"{percentile(times, 50):,.0f}",
                f"{p95:,.0f}",
                f"{percentile(result['cpu ' + case], 50):,.0f}",
                "-" if target is None else f"<= {target:,.0f} ms",
                "-" if target is None else ("yes" if p95 <= target else "no"),
            ]
        )
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"hooks as whole processes, {args.n:,} memories, {args.runs} runs each;"
            f" {result['bytecode']}\n"
        )
        header = ["case", "p50 ms", "p95 ms", "CPU p50 ms", "target (p95)", "met"]
        print(markdown_table(header, rows, {1, 2, 3}))
        print(
            f"\nCPU: user + system time of the process (less sensitive to a busy machine"
            f" than wall time); load average {os.getloadavg()[0]:.2f} at the end"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
