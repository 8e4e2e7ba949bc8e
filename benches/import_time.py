"""Time the start-up of each entry point as a whole process; print the median of N runs.

Usage (``PYTHONPATH`` names the source tree that is timed)::

    PYTHONPATH=src .venv/bin/python benches/import_time.py [--runs 10] [--no-bytecode]

Cases, each a fresh interpreter (so interpreter start-up is included): ``import
cortexgraph``; ``python -m cortexgraph.cli --help``; and a keyword ``recall`` on a tiny
store (ten memories, written once before timing). A bare ``python -c pass`` is printed too,
as the floor. The median and the best run are printed (the best is steadier on a busy
machine). The ``-X importtime`` total of ``import cortexgraph`` (the package's own
share, without interpreter start-up) closes the table. Nothing here fails on timing; the
target for each case is 150 ms.

The children read bytecode from a private cache that one warm-up run per case fills
(``_bytecode.py``), as an installed package does; ``--no-bytecode`` makes every run
compile from source instead (as ``PYTHONDONTWRITEBYTECODE=1`` with no cache does). The
table's first line says which.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cortexgraph as cg
from _bytecode import bytecode_env, describe, warm_up

SRC = Path(__file__).resolve().parent.parent / "src"
ENV = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(SRC))}


def _wall_ms(command: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """The wall times of ``runs`` runs of ``command``, in milliseconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _importtime_ms(env: dict[str, str]) -> float:
    """The cumulative ``-X importtime`` figure of the ``cortexgraph`` package, in ms."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import cortexgraph"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    for line in done.stderr.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) == 3 and fields[2] == "cortexgraph":
            return int(fields[1]) / 1000
    raise RuntimeError("no cortexgraph line in the -X importtime output")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="compile every module from source in every run (no bytecode cache)",
    )
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as cache:
        env = ENV if args.no_bytecode else bytecode_env(ENV, Path(cache))
        with cg.open(root, "agent") as cx:
            for i in range(10):
                cx.write(cg.Fact(text=f"Deploy step {i} goes through the CI pipeline"))
        cli = [python, "-m", "cortexgraph.cli"]
        recall = [*cli, "recall", "deploy pipeline", "--mode", "keyword", "--root", root]
        cases = [
            ("python -c pass (floor)", [python, "-c", "pass"]),
            ("import cortexgraph", [python, "-c", "import cortexgraph"]),
            ("cortexgraph --help", [*cli, "--help"]),
            ("cortexgraph recall --mode keyword (10 memories)", recall),
        ]
        if not args.no_bytecode:
            warm_up([command for _, command in cases], env, [""] * len(cases))
        print(f"{describe(env)}\n")
        print(f"| case ({args.runs} runs) | median ms | best ms |")
        print("| --- | ---: | ---: |")
        for name, command in cases:
            times = _wall_ms(command, args.runs, env)
            print(f"| {name} | {statistics.median(times):.0f} | {min(times):.0f} |")
        print(f"| -X importtime, cortexgraph cumulative | {_importtime_ms(env):.0f} | |")


if __name__ == "__main__":
    main()
