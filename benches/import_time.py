"""Time the start-up of each entry point as a whole process; print the median of N runs.

Usage (``PYTHONPATH`` names the source tree that is timed)::

    PYTHONPATH=src .venv/bin/python benches/import_time.py [--runs 10]

Cases, each a fresh interpreter (so interpreter start-up is included): ``import
cortexgraph``; ``python -m cortexgraph.cli --help``; and a keyword ``recall`` on a tiny
store (ten memories, written once before timing). A bare ``python -c pass`` is printed too,
as the floor. The median and the best run are printed (the best is steadier on a busy
machine). The ``-X importtime`` total of ``import cortexgraph`` (the package's own
share, without interpreter start-up) closes the table. Nothing here fails on timing; the
target for each case is 150 ms.
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

SRC = Path(__file__).resolve().parent.parent / "src"
ENV = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(SRC))}


def _wall_ms(command: list[str], runs: int) -> list[float]:
    """The wall times of ``runs`` runs of ``command``, in milliseconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, env=ENV, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _importtime_ms() -> float:
    """The cumulative ``-X importtime`` figure of the ``cortexgraph`` package, in ms."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import cortexgraph"],
        env=ENV,
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
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as root:
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
        print(f"| case ({args.runs} runs) | median ms | best ms |")
        print("| --- | ---: | ---: |")
        for name, command in cases:
            times = _wall_ms(command, args.runs)
            print(f"| {name} | {statistics.median(times):.0f} | {min(times):.0f} |")
    print(f"| -X importtime, cortexgraph cumulative | {_importtime_ms():.0f} | |")


if __name__ == "__main__":
    main()
