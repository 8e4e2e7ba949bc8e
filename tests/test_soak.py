"""Concurrency soak: readers in three processes and two threads against two writer
processes, on a store whose map starts at 64 KiB and grows many times during the run.

Each writer batch is one transaction tagged with its number, and each writer keeps a counter
memory updated in the same batch (see ``scripts/soak_worker.py``). A reader checks, round
after round, that every batch the counter says is committed is whole, that no batch is
partly visible, that nothing goes backwards, and that keyword recall finds the newest batch.
The two reader threads share one read-write handle in this process and use hybrid recall,
so they also write the embedding cache (which grows the map in this process while the other
thread reads). At the end: no inconsistent read, no error of any kind, the map grew many
times, and ``verify`` finds the store sound.
"""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

import cortexgraph as cg

WORKER = Path(__file__).parent / "scripts" / "soak_worker.py"
BATCHES = 300
TIMEOUT_S = 300


def _load_worker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak_worker", WORKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


worker = _load_worker()


@pytest.mark.slow
def test_soak_readers_against_writers_with_map_growth(tmp_path: Path) -> None:
    """3 reader processes and 2 reader threads against 2 writer processes on a growing
    map: no inconsistent read, no error, many growths, and verify ok at the end."""
    root = tmp_path / "store"
    stop = tmp_path / "stop"
    with cg.open(root, worker.ACTOR, map_size=worker.MAP, sync=False):
        pass
    size0 = (root / worker.ACTOR / "data.mdb").stat().st_size
    py = sys.executable
    readers = [
        subprocess.Popen([py, str(WORKER), "read", str(root), str(stop)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    writers = [
        subprocess.Popen([py, str(WORKER), "write", str(root), str(w), str(BATCHES)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in (0, 1)
    ]
    thread_results: list[tuple[int, list[str], list[str]]] = []
    cx = cg.open(root, worker.ACTOR, map_size=worker.MAP, sync=False)

    def read_in_thread(seed: int) -> None:
        rng = random.Random(seed)
        seen: dict[int, int] = {}
        last = [0]
        rounds, problems, errors = 0, [], []
        while not stop.exists() or rounds == 0:
            try:
                problems.extend(worker.read_round(cx, rng, seen, last))
                cx.recall("marker0x1 batch item", k=5)  # hybrid: fills the embedding cache
            except Exception as exc:  # every error fails the test below
                errors.append(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")
            rounds += 1
        thread_results.append((rounds, problems, errors))

    threads = [threading.Thread(target=read_in_thread, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    try:
        written = [w.communicate(timeout=TIMEOUT_S) for w in writers]
    finally:
        stop.touch()
        for thread in threads:
            thread.join(timeout=TIMEOUT_S)
        read_out = [r.communicate(timeout=TIMEOUT_S) for r in readers]
        cx.close()

    for proc, (out, err) in zip(writers, written, strict=True):
        assert proc.returncode == 0, err
        assert json.loads(out)["batches"] == BATCHES
    reports = []
    for proc, (out, err) in zip(readers, read_out, strict=True):
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    for rounds, problems, errors in thread_results:
        reports.append({"rounds": rounds, "problems": problems, "errors": errors})
    assert len(reports) == 5
    for report in reports:
        assert report["errors"] == []
        assert report["problems"] == []
        assert report["rounds"] >= 2  # each reader read while the writers wrote

    size = (root / worker.ACTOR / "data.mdb").stat().st_size
    assert size > 64 * size0  # the map doubled at least six times during the run
    result = cg.verify(root, worker.ACTOR)
    assert result.ok, result.to_dict()
    with cg.open(root, worker.ACTOR, readonly=True) as check:
        for w in (0, 1):
            assert worker.committed(check, w) == BATCHES - 1
            assert all(
                worker.batch_size(check, w, i) == worker.PER_BATCH for i in range(BATCHES)
            )
