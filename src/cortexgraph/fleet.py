"""Fleet verification: replay-verify every actor's store under one directory, in parallel.

The unit of work is :func:`cortexgraph.verify` of one actor (a read-only replay in a
scratch copy; see :mod:`cortexgraph.replay`), so a fleet run finds exactly what running
``cortexgraph verify ROOT --actor A`` for each actor would. Two engines run the units:

- ``"ray"``: one Ray task per actor (the ``ray`` extra). It joins the Ray runtime the
  calling process already started (``ray.init(...)``), else starts a local one, or
  connects to the cluster at ``address``. Every node must see ``root`` at the same path
  (shared storage; ``docs/scale.md``).
- ``"processes"``: a local process pool (spawned workers, so nothing of the caller's
  open stores is inherited), the default when Ray is not installed.

Both return the same :class:`FleetReport`; each task returns its
:class:`~cortexgraph.ActorReport` as a plain dict, so no cortexgraph class crosses a
process or machine boundary.

>>> import tempfile, cortexgraph as cg
>>> from cortexgraph.fleet import verify_fleet
>>> root = tempfile.mkdtemp()
>>> for actor in ("alice", "bob"):
...     with cg.open(root, actor, clock=cg.ManualClock(1_700_000_000_000)) as cx:
...         _ = cx.write(cg.Fact(text=f"{actor} deploys through CI", tags=["deploy"]))
>>> report = verify_fleet(root, engine="processes", workers=1)
>>> report.ok, [(a.actor, a.ok, a.entries) for a in report.actors]
(True, [('alice', True, 1), ('bob', True, 1)])
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .core.uri import check_name
from .errors import CortexError, MissingExtraError, NotFoundError, ValidationError
from .replay import ActorReport, verify

__all__ = ["ENGINES", "FleetReport", "find_actors", "verify_actor", "verify_fleet"]

ENGINES = ("auto", "ray", "processes")

#: called with (actors done, actors in all) as reports come in
FleetProgress = Callable[[int, int], None]


@attrs.frozen
class FleetReport:
    """What :func:`verify_fleet` found: one report per actor, sorted by actor.

    Attributes:
        ok: every actor's store checked out.
        engine: ``"ray"`` or ``"processes"``, whichever ran the work.
        actors: the actors' reports (:class:`~cortexgraph.ActorReport`).
        seconds: the wall-clock time of the whole run.
    """

    ok: bool
    engine: str
    actors: tuple[ActorReport, ...]
    seconds: float

    @property
    def failed(self) -> tuple[str, ...]:
        """The actors whose store did not check out."""
        return tuple(a.actor for a in self.actors if not a.ok)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "engine": self.engine,
            "seconds": self.seconds,
            "failed": list(self.failed),
            "actors": [a.to_dict() for a in self.actors],
        }


def find_actors(root: str | os.PathLike[str]) -> list[str]:
    """The actors with a store under ``root`` (directories holding a ``data.mdb`` whose
    name is a valid actor name), sorted.

    Raises:
        NotFoundError: ``root`` is not a directory or holds no store.
    """
    path = Path(root)
    if not path.is_dir():
        raise NotFoundError(f"{path} is not a directory")
    actors = []
    for child in path.iterdir():
        if child.is_dir() and (child / "data.mdb").exists():
            try:
                actors.append(check_name(child.name, "actor"))
            except ValidationError:
                continue  # not a store this library made: its name cannot be an actor's
    if not actors:
        raise NotFoundError(f"no cortexgraph store under {path}")
    return sorted(actors)


def verify_actor(root: str, actor: str, key: str | None = None) -> dict[str, Any]:
    """Verify one actor's store and return its report as a dict (the unit of work: a Ray
    task or a pool job). Never raises for a bad store: the report says what is wrong.

    With ``key`` (a verifier key's text), the store's checkpoints signed with it are
    checked too (:meth:`Cortex.checkpoints`); a failure, or no such checkpoint, makes the
    report not ok and adds the problem.
    """
    started = time.perf_counter()
    try:
        (report,) = verify(root, actor).actors
    except CortexError as exc:  # e.g. the store vanished between listing and checking
        report = ActorReport(
            actor=actor, ok=False, entries=0, overall_root="", stored_root=None,
            first_bad_seq=None, tables={}, snapshots_checked=0, problems=(str(exc),),
            seconds=round(time.perf_counter() - started, 3), error=type(exc).__name__,
        )
    if key is not None:
        problem = _checkpoint_problem(Path(root) / actor, actor, key)
        if problem is not None:
            report = attrs.evolve(report, ok=False, problems=(*report.problems, problem))
    return report.to_dict()


def _checkpoint_problem(path: Path, actor: str, key: str) -> str | None:
    """What is wrong with the checkpoints of the store at ``path`` signed with ``key``,
    or None when there is at least one and each verifies."""
    from .handle import open_handle
    from .signing import VerifierKey
    from .store.env import DEFAULT_MAP_SIZE
    from .trust import read_checkpoints

    if not key:
        return "signed checkpoints: no verifier key was given for this actor"
    try:
        verifier = VerifierKey.from_text(key)
        h = open_handle(
            path, actor, create=False, readonly=True, map_size=DEFAULT_MAP_SIZE, sync=False,
            hash_name=None, embedder=None, reembed=False,
        )
        try:
            read_checkpoints(h, verifier)
        finally:
            h.env.close()
    except CortexError as exc:
        return f"signed checkpoints: {exc}"
    return None


def _report(data: dict[str, Any]) -> ActorReport:
    return ActorReport(**{**data, "problems": tuple(data["problems"])})


def verify_fleet(
    root: str | os.PathLike[str],
    *,
    engine: str = "auto",
    address: str | None = None,
    workers: int | None = None,
    keys: Mapping[str, str] | None = None,
    progress: FleetProgress | None = None,
) -> FleetReport:
    """Verify every actor's store under ``root`` in parallel.

    Args:
        root: the directory holding one store per actor.
        engine: ``"ray"``, ``"processes"``, or ``"auto"`` (Ray when it is installed or
            ``address`` is given, else processes).
        address: the Ray cluster to run on (``ray.init(address=...)``, e.g.
            ``"ray://head:10001"`` or ``"auto"``); None: a new local runtime. A runtime
            this process already joined (``ray.init`` was called) is used as it is, and
            ``address`` is then not consulted.
        workers: the size of the process pool (default: the CPU count); ignored by Ray,
            which schedules one task per actor on the CPUs it has.
        keys: actor -> the text of its verifier key (``<name>+<key ID>+<key>``): each
            such actor's signed checkpoints are checked with its key as well, and an
            actor under ``root`` without a key fails. None: no checkpoints are checked.
        progress: called with (actors done, actors in all) as reports come in.

    Raises:
        NotFoundError: ``root`` holds no store.
        ValidationError: an unknown engine, a bad ``workers``, or ``address`` with the
            process engine.
        MissingExtraError: the Ray engine without the ``ray`` extra.
    """
    if engine not in ENGINES:
        raise ValidationError(f"must be one of {', '.join(ENGINES)}", field="engine")
    if workers is not None and (type(workers) is not int or workers < 1):
        raise ValidationError("must be a positive integer", field="workers")
    if address is not None and engine == "processes":
        raise ValidationError("a Ray address needs the ray engine", field="address")
    if engine == "auto":
        ray_installed = importlib.util.find_spec("ray") is not None
        engine = "ray" if ray_installed or address is not None else "processes"
    # absolute: Ray workers and pool processes may run in another working directory
    base = str(Path(root).resolve())
    actors = find_actors(base)
    started = time.perf_counter()
    step = progress or (lambda done, total: None)
    jobs = [(base, actor, None if keys is None else keys.get(actor, "")) for actor in actors]
    if engine == "ray":
        results = _run_on_ray(jobs, address, step)
    else:
        results = _run_in_processes(jobs, workers, step)
    reports = tuple(sorted((_report(r) for r in results), key=lambda r: r.actor))
    return FleetReport(
        ok=all(r.ok for r in reports),
        engine=engine,
        actors=reports,
        seconds=round(time.perf_counter() - started, 3),
    )


Job = tuple[str, str, "str | None"]
"""The arguments of one :func:`verify_actor` call: root, actor, verifier key text."""


def _run_in_processes(
    jobs: list[Job], workers: int | None, step: FleetProgress
) -> list[dict[str, Any]]:
    count = min(workers or os.cpu_count() or 1, len(jobs))
    context = multiprocessing.get_context("spawn")
    results = []
    step(0, len(jobs))
    with concurrent.futures.ProcessPoolExecutor(count, mp_context=context) as pool:
        futures = [pool.submit(verify_actor, *job) for job in jobs]
        for future in concurrent.futures.as_completed(futures):
            results.append(future.result())
            step(len(results), len(jobs))
    return results


def _run_on_ray(
    jobs: list[Job], address: str | None, step: FleetProgress
) -> list[dict[str, Any]]:
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError(
            "verify-fleet on Ray needs the 'ray' extra: pip install 'cortexgraph[ray]'"
            " (or run it on a local process pool: --no-ray)",
            extra="ray",
        ) from exc
    ours = not ray.is_initialized()
    if ours:
        ray.init(
            address=address, include_dashboard=False, log_to_driver=False,
            logging_level=logging.WARNING,
        )
    try:
        task = ray.remote(num_cpus=1)(verify_actor)
        pending = [task.remote(*job) for job in jobs]
        results: list[dict[str, Any]] = []
        step(0, len(jobs))
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            results.extend(ray.get(done))
            step(len(results), len(jobs))
        return results
    finally:
        if ours:
            ray.shutdown()
