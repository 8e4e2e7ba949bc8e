"""Reporting shared by the benchmark suites: progress lines, the environment, tables."""

from __future__ import annotations

import importlib.util
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


def torch_available() -> bool:
    """Whether torch can be imported (looked up, not imported: that takes seconds)."""
    return importlib.util.find_spec("torch") is not None


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


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class TimedEmbedder:
    """Delegates to an embedder and adds up the seconds its ``embed`` calls take.

    Same ``name`` and ``dim`` as the embedder it wraps, so a store records the wrapped one.
    Reset ``seconds`` before a call to read what that call spent embedding.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dim: int = inner.dim
        self.seconds = 0.0
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> Any:
        start = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - start
            self.texts += len(texts)
