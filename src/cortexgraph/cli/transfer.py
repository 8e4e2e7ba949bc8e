"""The ``export``, ``import`` and ``stats`` commands.

``export`` writes the journal as JSON Lines (or Markdown, for people) to stdout or to
``-o FILE``, which is written to a temporary file beside it and renamed into place, so a
failed export never leaves a partial file under that name. ``import FILE`` replays such a
file into the store (creating it, with the file's hash, if it does not exist);
``import FILE --from FORMAT`` hands the file to :mod:`cortexgraph.migrate`. Each shows a
progress bar on a terminal, none with ``--json``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .. import open
from ..io import export_journal, export_markdown, import_journal, read_journal
from ..io import readable as jsonable  # one rendering of bytes, the export's
from .output import Output
from .progress import ProgressBar

__all__ = ["cmd_export", "cmd_import", "cmd_stats"]


def cmd_export(args: argparse.Namespace, out: Output) -> int:
    write = export_markdown if args.format == "md" else export_journal
    with open(args.root, args.actor, readonly=True) as cx, ProgressBar(not args.json) as bar:
        progress = bar.step(f"exporting {cx.actor}")
        if args.output is None:  # stdout holds the export and nothing else
            write(cx, sys.stdout, since=args.since, progress=progress)
            return 0
        target = Path(args.output)
        fd, scratch = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
                count = write(cx, stream, since=args.since, progress=progress)
            os.replace(scratch, target)
        except BaseException:
            Path(scratch).unlink(missing_ok=True)
            raise
    out.emit(
        {"file": str(target), "format": args.format, "entries": count, "since": args.since},
        f"exported {count:,} entries of {args.actor} to {target}",
    )
    return 0


def cmd_import(args: argparse.Namespace, out: Output) -> int:
    if args.from_format is not None:
        return _migrate(args, out)
    # The whole file is read and checked before the store is opened, so a bad file
    # creates no store; a new store gets the file's hash.
    source: Any = sys.stdin.buffer if args.file == "-" else args.file
    exists = (Path(args.root) / args.actor / "data.mdb").exists()
    with ProgressBar(not args.json) as bar:
        journal = read_journal(source, progress=bar.step(f"reading {args.file}"))
        hash_name = None if exists else journal.header.hash_name
        with open(args.root, args.actor, create=True, hash_name=hash_name) as cx:
            report = import_journal(cx, journal, progress=bar.step(f"importing into {cx.actor}"))
    checked = "; OverallRoot matches the file's" if report.root_checked else ""
    out.emit(
        report.to_json(),
        f"applied {report.applied:,} entries, skipped {report.skipped:,} already present;"
        f" seq {report.seq}{checked}",
    )
    return 0


def _migrate(args: argparse.Namespace, out: Output) -> int:
    # imported on demand: only --from needs the peers' formats
    migrate = importlib.import_module("cortexgraph.migrate")
    with open(args.root, args.actor, create=True) as cx, ProgressBar(not args.json) as bar:
        report = migrate.import_from(
            cx,
            args.from_format,
            Path(args.file),
            progress=bar.step(f"importing {args.from_format}"),
        )
    data = report.to_json()
    lines = [
        "imported " + ", ".join(f"{n:,} {what}" for what, n in report.imported.items()),
        f"skipped {len(report.skipped):,}",
        *(f"  {where}: {reason}" for where, reason in report.skipped),
    ]
    out.emit(data, "\n".join(lines))
    return 0


def cmd_stats(args: argparse.Namespace, out: Output) -> int:
    with open(args.root, args.actor, readonly=True) as cx:
        stats = cx.stats()
    data = jsonable(
        {
            "actor": args.actor,
            "seq": stats.seq,
            "memories": stats.memories,
            "by_type": stats.by_type,
            "by_status": stats.by_status,
            "edges": stats.edges,
            "journal_entries": stats.seq,
            "tables": stats.tables,
            "file_bytes": stats.file_bytes,
            "map_size": stats.map_size,
            "hash_name": stats.hash_name,
            "overall_root": stats.overall_root,
        }
    )
    root = stats.overall_root
    counts = ", ".join(f"{n:,} {name}" for name, n in stats.by_type.items()) or "none"
    statuses = ", ".join(f"{n:,} {name}" for name, n in stats.by_status.items()) or "none"
    lines = [
        f"{args.actor}: {stats.memories:,} memories, {stats.edges:,} edges,"
        f" {stats.seq:,} journal entries",
        f"  by type:   {counts}",
        f"  by status: {statuses}",
        f"  size: {stats.file_bytes:,} bytes on disk, map {stats.map_size:,} bytes",
        f"  root: {'none (rebuild first)' if root is None else root.hex()} ({stats.hash_name})",
    ]
    out.emit(data, "\n".join(lines))
    return 0
