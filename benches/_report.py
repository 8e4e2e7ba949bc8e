"""Reporting shared by the benchmark suites: progress lines, the environment, tables."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lmdb

import cortexgraph as cg

_started = time.perf_counter()


def progress(message: str) -> None:
    """One line on stderr, stamped with the seconds since the benchmarks started."""
    print(f"[{time.perf_counter() - _started:6.1f}s] {message}", file=sys.stderr, flush=True)


def environment(n: int, root: Path) -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "cortexgraph": cg.__version__,
        "python": platform.python_version(),
        "py_lmdb": lmdb.__version__,
        "lmdb": ".".join(map(str, lmdb.version())),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "store_size": n,
        "temp_dir": str(root),
        # Other processes on the machine skew every figure; the load shows how busy it was.
        "load_avg_1min_start": round(os.getloadavg()[0], 2),
    }


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by linear interpolation between closest ranks."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def markdown_table(header: Sequence[str], cells: Sequence[Sequence[str]], numeric: set[int]) -> str:
    """A Markdown table with the ``numeric`` columns right-aligned."""
    widths = [max(len(line[i]) for line in (header, *cells)) for i in range(len(header))]

    def fmt(line: Sequence[str]) -> str:
        parts = (
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        )
        return "| " + " | ".join(parts) + " |"

    rule = (
        "|"
        + "|".join(
            "-" * (w + 1) + ":" if i in numeric else "-" * (w + 2) for i, w in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([fmt(header), rule, *(fmt(line) for line in cells)])
