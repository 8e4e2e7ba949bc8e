"""Fleet verification throughput: actors verified per second by ``verify_fleet`` on a local
process pool and on a local Ray runtime, against the same stores verified one after
another in this process (the baseline, same run).

Usage::

    .venv/bin/python benches/fleet.py                       # 200 actors x 50 memories
    .venv/bin/python benches/fleet.py --actors 1000 --memories 200 --json --dir /data

Ray's figure includes one task per actor and excludes starting the runtime, which is
reported on its own (a cluster is started once and serves many runs). Nothing here fails on
timing.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import cortexgraph as cg
from _report import environment, markdown_table, progress
from cortexgraph.fleet import verify_fleet

BASE_AT = 1_700_000_000_000


def build(root: Path, actors: int, memories: int) -> None:
    for n in range(actors):
        with cg.open(root, f"actor-{n:05d}", clock=cg.ManualClock(BASE_AT), sync=False) as cx:
            with cx.batch() as b:
                for i in range(memories):
                    b.write(cg.Fact(text=f"memory {i} of actor {n}: deploys go through CI",
                                    tags=["deploy", f"t{i % 7}"]))
            cx.snapshot()


def measure(root: Path, actors: int, workers: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    started = time.perf_counter()
    report = cg.verify(root)
    serial = time.perf_counter() - started
    assert report.ok
    results["serial (one process)"] = serial
    progress(f"serial: {actors / serial:,.0f} actors/s")
    started = time.perf_counter()
    fleet = verify_fleet(root, engine="processes", workers=workers)
    results[f"process pool ({workers} workers)"] = time.perf_counter() - started
    assert fleet.ok
    progress(f"processes: {actors / results[f'process pool ({workers} workers)']:,.0f} actors/s")
    try:
        import ray
    except ImportError:
        progress("ray is not installed: no Ray figure")
        return results
    started = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    results["ray start (local runtime)"] = time.perf_counter() - started
    try:
        verify_fleet(root, engine="ray")  # warm: the workers import cortexgraph once
        started = time.perf_counter()
        fleet = verify_fleet(root, engine="ray")
        results[f"ray tasks ({workers} CPUs)"] = time.perf_counter() - started
        assert fleet.ok
    finally:
        ray.shutdown()
    progress(f"ray: {actors / results[f'ray tasks ({workers} CPUs)']:,.0f} actors/s")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, default=200)
    parser.add_argument("--memories", type=int, default=50)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        progress(f"building {args.actors} stores of {args.memories} memories")
        build(root, args.actors, args.memories)
        results = measure(root, args.actors, args.workers)
        env = environment(args.actors * args.memories, root)
    if args.json:
        rows = {
            k: {"seconds": round(v, 3), "actors_per_s": round(args.actors / v, 1)}
            for k, v in results.items()
            if not k.startswith("ray start")
        }
        print(json.dumps({"environment": env, "actors": args.actors, "results": rows,
                          "ray_start_s": results.get("ray start (local runtime)")}, indent=1))
        return
    cells = []
    for name, seconds in results.items():
        rate = "-" if name.startswith("ray start") else f"{args.actors / seconds:,.0f}"
        cells.append([name, f"{seconds:.2f}", rate])
    print(f"{args.actors} actors x {args.memories} memories, {args.workers} workers,"
          f" {env['cpus']} CPUs, load {env['load_avg_1min_start']}")
    print(markdown_table(["engine", "seconds", "actors/s"], cells, numeric={1, 2}))


if __name__ == "__main__":
    main()
