"""``cortexgraph verify-fleet ROOT_DIR``: replay-verify every actor's store under
``ROOT_DIR`` in parallel (:func:`cortexgraph.fleet.verify_fleet`), as Ray tasks when Ray
is installed (a local runtime, or the cluster of ``--ray ADDRESS``), else, or with
``--no-ray``, in a local process pool. It draws a progress bar on a terminal, prints a
table (actor, entries, root, ok/FAILED, seconds) and the problems of each failed store,
and exits 0 when every store checks out, 1 when any does not, 2 on usage and I/O errors
(no store under ``ROOT_DIR``). With ``--key PUBKEY`` (one verifier key for every actor) or
``--keys DIR`` (``DIR/<actor>.key.pub`` per actor) each actor's signed checkpoints are
checked as ``cortexgraph verify --key`` checks them."""

from __future__ import annotations

import argparse
from typing import Any

from .output import Output

__all__ = ["add_fleet_parser", "cmd_verify_fleet"]


def _workers(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def add_fleet_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``verify-fleet`` subcommand to ``sub`` (the parser's subparsers action)."""
    p = sub.add_parser(
        "verify-fleet",
        help="verify every actor's store under a directory in parallel (Ray or processes)",
        description="Exit status: 0 every store checks out, 1 any fails, 2 usage or I/O.",
    )
    p.add_argument("fleet_root", metavar="ROOT_DIR", help="directory holding one store per actor")
    engine = p.add_mutually_exclusive_group()
    engine.add_argument(
        "--ray", metavar="ADDRESS", default=None,
        help="run on this Ray cluster (e.g. ray://head:10001, or auto); default: a local"
        " Ray runtime when Ray is installed",
    )
    engine.add_argument(
        "--no-ray", action="store_true", help="use a local process pool even if Ray is installed"
    )
    p.add_argument("--workers", type=_workers, default=None,
                   help="process pool size (default: the CPU count)")
    keys = p.add_mutually_exclusive_group()
    keys.add_argument(
        "--key", metavar="PUBKEY", default=None,
        help="also check every actor's checkpoints signed with this verifier key (a .pub"
        " file or its text); an actor with none fails",
    )
    keys.add_argument(
        "--keys", metavar="DIR", default=None,
        help="also check each actor's signed checkpoints with its own verifier key,"
        " DIR/<actor>.key.pub (as `cortexgraph keygen DIR/<actor>.key` writes it) or"
        " DIR/<actor>.pub; an actor without one fails",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_verify_fleet)


def cmd_verify_fleet(args: argparse.Namespace, out: Output) -> int:
    from .. import NotFoundError
    from ..fleet import verify_fleet
    from .output import fail
    from .progress import ProgressBar

    engine = "processes" if args.no_ray else "ray" if args.ray is not None else "auto"
    try:
        keys = _verifier_keys(args)
        with ProgressBar(enabled=not (args.no_progress or args.json)) as bar:
            report = verify_fleet(
                args.fleet_root, engine=engine, address=args.ray, workers=args.workers,
                keys=keys, progress=bar.step("verifying stores"),
            )
    except NotFoundError as exc:
        fail(out, type(exc).__name__, str(exc))
        out.emit({"ok": False, "actors": [], "error": type(exc).__name__, "message": str(exc)})
        return 2
    out.emit(report.to_dict(), _table(report))
    return 0 if report.ok else 1


def _verifier_keys(args: argparse.Namespace) -> dict[str, str] | None:
    """Actor -> verifier key text, from ``--key`` (one for all) or ``--keys DIR``.

    Raises:
        NotFoundError: no store under the root. OSError: a key file cannot be read.
        ValidationError: ``--key`` is not a verifier key.
    """
    from pathlib import Path

    from ..fleet import find_actors
    from .keys import read_verifier_key

    if args.key is not None:
        text = read_verifier_key(args.key).to_text()
        return {actor: text for actor in find_actors(args.fleet_root)}
    if args.keys is None:
        return None
    found = {}
    for actor in find_actors(args.fleet_root):
        for name in (f"{actor}.key.pub", f"{actor}.pub"):
            path = Path(args.keys) / name
            if path.is_file():
                found[actor] = path.read_text(encoding="ascii", errors="replace").strip()
                break
    return found


def _table(report: Any) -> str:
    rows = [("actor", "entries", "root", "status", "seconds")]
    for a in report.actors:
        status = "ok" if a.ok else "FAILED"
        rows.append((a.actor, f"{a.entries:,}", a.overall_root[:16] or "-", status,
                     f"{a.seconds:.2f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.rjust(w) if i in (1, 4) else cell.ljust(w)
                  for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
        for row in rows
    ]
    for a in report.actors:
        lines.extend(f"{a.actor}: {problem}" for problem in a.problems)
    failed = len(report.failed)
    lines.append(
        f"{len(report.actors) - failed} of {len(report.actors)} stores ok, {failed} failed"
        f" ({report.engine}, {report.seconds:.2f}s)"
    )
    return "\n".join(lines)
