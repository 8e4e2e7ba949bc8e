"""The ``cortexgraph`` command. Every command goes through the public API only.

Exit codes: 0 success; 1 the library refused or failed (a ``CortexError``: not found,
validation, conflict, corruption); 2 usage errors and I/O errors. ``--json`` prints one
JSON document (or JSON lines for streams) for scripts; without it output is for people.

The store is ``--root`` (default ``$CORTEXGRAPH_ROOT`` or ``./.cortexgraph``) and the actor
``--actor`` (default ``$CORTEXGRAPH_ACTOR`` or ``agent``).
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from . import (
    Cortex,
    CortexError,
    Entry,
    Memory,
    NotFoundError,
    Q,
    Record,
    ValidationError,
    __version__,
    open,
    verify,
    verify_scope,
)
from .core.query import Predicate
from .cortex import sync_vectors

__all__ = ["main"]


def _default_root() -> str:
    return os.environ.get("CORTEXGRAPH_ROOT", ".cortexgraph")


def _default_actor() -> str:
    return os.environ.get("CORTEXGRAPH_ACTOR", "agent")


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def record_json(record: Record) -> dict[str, Any]:
    """A record as a JSON-ready dict."""
    return {
        "uri": str(record.uri),
        "type": record.memory.type_name,
        "version": record.version,
        "head": record.head,
        "latest": record.latest,
        "status": record.status,
        "seq": record.seq,
        "at": record.at,
        "created_at": record.created_at,
        "memory": record.memory.to_dict(),
    }


def entry_json(entry: Entry) -> dict[str, Any]:
    """A journal entry as a JSON-ready dict (bytes as hex)."""
    return {
        "seq": entry.seq,
        "at": entry.at,
        "op": entry.op,
        "ns": entry.ns,
        **_jsonable(dict(entry.fields)),
    }


def _print_record(record: Record) -> None:
    memory = record.memory
    flags = [] if record.status == "active" else [record.status]
    if not record.is_head:
        flags.append(f"head is v{record.head}")
    suffix = f"  ({', '.join(flags)})" if flags else ""
    print(f"{record.uri}  [{memory.type_name}] v{record.version}/{record.latest}{suffix}")
    print(f"  {memory.text}")
    if memory.tags:
        print(f"  tags: {', '.join(memory.tags)}")
    print(f"  confidence {memory.confidence:g}  priority {memory.priority}  seq {record.seq}")


class _Output:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def emit(self, data: Any, text: str | None = None) -> None:
        if self.as_json:
            print(json.dumps(data, ensure_ascii=False, sort_keys=True))
        elif text is not None:
            print(text)


def _open(
    args: argparse.Namespace,
    *,
    readonly: bool = False,
    create: bool = False,
    embed_on_write: bool = False,
) -> Cortex:
    return open(
        args.root, args.actor, readonly=readonly, create=create, embed_on_write=embed_on_write
    )


def _memory_from_args(args: argparse.Namespace) -> Memory:
    fields: dict[str, Any] = {"type": args.type, "text": args.text}
    if args.tag:
        fields["tags"] = args.tag
    for name in ("summary", "priority", "confidence"):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    if args.pinned:
        fields["pinned"] = True
    return Memory.from_dict(fields)


# -- commands -------------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace, out: _Output) -> int:
    with open(args.root, args.actor, hash_name=args.hash) as cx:
        out.emit(
            {"path": str(cx.path), "actor": cx.actor, "hash_name": cx.hash_name, "seq": cx.seq},
            f"initialised {cx.path} (actor {cx.actor}, hash {cx.hash_name}, seq {cx.seq})",
        )
    return 0


def cmd_remember(args: argparse.Namespace, out: _Output) -> int:
    memory = _memory_from_args(args)
    # every write through the CLI embeds what it wrote, so a later `recall` (read-only,
    # unable to cache) finds every vector cached and embeds only its query
    with _open(args, create=True, embed_on_write=True) as cx:
        uri = cx.write(memory, ns=args.ns)
    out.emit({"uri": str(uri)}, str(uri))
    return 0


def cmd_get(args: argparse.Namespace, out: _Output) -> int:
    with _open(args, readonly=True) as cx:
        records = cx.history(args.uri) if args.history else [cx.resolve(args.uri)]
    if out.as_json:
        out.emit([record_json(r) for r in records] if args.history else record_json(records[0]))
    else:
        for record in records:
            _print_record(record)
    return 0


def cmd_update(args: argparse.Namespace, out: _Output) -> int:
    changes: dict[str, Any] = {}
    for name in ("text", "summary", "priority", "confidence"):
        value = getattr(args, name)
        if value is not None:
            changes[name] = value
    if args.tag is not None:
        changes["tags"] = args.tag
    with _open(args, embed_on_write=True) as cx:
        uri = cx.update(args.uri, expected_version=args.expected_version, **changes)
    out.emit({"uri": str(uri)}, str(uri))
    return 0


def _predicate(args: argparse.Namespace) -> Predicate:
    """AND of the filters given on the command line (each --type/--tag alternative ORed)."""
    parts: list[Predicate] = []
    if args.type:
        parts.append(Q.any_of(*(Q.type(t) for t in args.type)))
    if args.tag:
        parts.append(Q.all_of(*(Q.tag(t) for t in args.tag)))
    if args.ns:
        parts.append(Q.ns(args.ns))
    if args.status:
        parts.append(Q.status(args.status))
    if args.min_priority is not None:
        parts.append(Q.min_priority(args.min_priority))
    if args.min_confidence is not None:
        parts.append(Q.min_confidence(args.min_confidence))
    if args.since is not None:
        parts.append(Q.since(args.since))
    if not parts:
        raise ValidationError("give at least one --type or --tag", field="where")
    return Q.all_of(*parts)


def cmd_find(args: argparse.Namespace, out: _Output) -> int:
    with _open(args, readonly=not args.late_binding) as cx:
        result = cx.find(
            _predicate(args),
            limit=10 if args.limit is None and args.budget_tokens is None else args.limit,
            budget_tokens=args.budget_tokens,
            order_by=args.order_by,
            form=args.form,
            late_binding=args.late_binding,
        )
    if out.as_json:
        out.emit(
            {
                "hits": [
                    {"uri": str(h.uri), "score": h.score, "tokens": h.tokens, "text": h.text}
                    for h in result
                ],
                "tokens": result.tokens,
                "matched": result.matched,
                "plan": result.plan,
                "seq": result.seq,
            }
        )
    else:
        for hit in result:
            print(hit.text if args.form == "short" else f"{hit.text}\n")
        print(
            f"-- {len(result)} of {result.matched} matching, {result.tokens} tokens",
            file=sys.stderr,
        )
    return 0


def cmd_link(args: argparse.Namespace, out: _Output) -> int:
    with _open(args) as cx:
        edge = cx.add_edge(
            args.src,
            args.dst,
            args.relation,
            strength=args.strength,
            status=args.status,
            origin=args.origin,
        )
    data = {
        "src": str(edge.src),
        "dst": str(edge.dst),
        "relation": edge.relation,
        "strength": edge.strength,
        "status": edge.status,
        "origin": edge.origin,
        "seq": edge.seq,
    }
    out.emit(data, f"{edge.src} --{edge.relation} ({edge.strength:g}, {edge.status})--> {edge.dst}")
    return 0


def cmd_unlink(args: argparse.Namespace, out: _Output) -> int:
    with _open(args) as cx:
        cx.remove_edge(args.src, args.dst, args.relation)
    out.emit({"removed": True}, f"removed {args.relation} edge")
    return 0


def cmd_traverse(args: argparse.Namespace, out: _Output) -> int:
    with _open(args, readonly=True) as cx:
        result = cx.traverse(
            args.uri,
            depth=args.depth,
            relations=args.relation or None,
            direction=args.direction,
            min_strength=args.min_strength,
        )
    rows = [
        {
            "depth": n.depth,
            "uri": str(n.uri),
            "via": str(n.via),
            "relation": n.relation,
            "direction": n.direction,
            "strength": n.strength,
        }
        for n in result
    ]
    if out.as_json:
        out.emit({"start": str(result.start), "found": rows})
    else:
        for row in rows:
            arrow = "<-" if row["direction"] == "in" else "->"
            print(f"{row['depth']}  {arrow} {row['relation']:<13} {row['uri']}")
    return 0


#: a recall that must embed this many memories first says that a back-fill would help
_BACKFILL_HINT = 100


def _catch_up_vectors(cx: Cortex, out: _Output) -> None:
    """Bring the vector index up to date before a recall, showing progress on a terminal
    when memories must be embedded; on a read-only handle, which cannot cache what it
    embeds, say when many are and that `cortexgraph backfill` would embed them once."""
    def progress(done: int, total: int) -> None:
        if done == 0 and total >= _BACKFILL_HINT and cx.readonly and not out.as_json:
            print(
                f"cortexgraph: {total:,} memories have no cached vector and are embedded for"
                " this command only; `cortexgraph backfill` embeds them once for every"
                " later recall",
                file=sys.stderr,
            )
        bar(f"embedding {cx.actor}", done, total)

    with _ProgressBar(enabled=not out.as_json) as bar:
        sync_vectors(cx, progress=progress)


def cmd_recall(args: argparse.Namespace, out: _Output) -> int:
    with _open(args, readonly=not args.late_binding) as cx:
        if args.mode != "keyword":
            _catch_up_vectors(cx, out)
        result = cx.recall(args.text, k=args.k, mode=args.mode, late_binding=args.late_binding)
        rows: list[dict[str, Any]] = [
            {
                "uri": str(h.uri),
                "score": h.score,
                "ranks": dict(h.ranks),
                "text": h.record.memory.text,
                "via": None if h.via is None else str(h.via),
            }
            for h in result
        ]
    if out.as_json:
        out.emit({"hits": rows, "mode": result.mode, "seq": result.seq})
    else:
        for row in rows:
            print(f"{row['score']:.4f}  {row['uri']}  {row['text'][:100]}")
    return 0


def cmd_context(args: argparse.Namespace, out: _Output) -> int:
    with _open(args, readonly=True) as cx:
        if args.query is not None:
            _catch_up_vectors(cx, out)
        bundle = cx.context(
            query=args.query, budget_tokens=args.budget_tokens, channel=args.channel
        )
    out.emit(
        {
            "text": bundle.text,
            "tokens": bundle.tokens,
            "digest": bundle.digest,
            "items": [[str(u), layer, form] for u, layer, form in bundle.items],
        },
        bundle.text,
    )
    return 0


def cmd_compact(args: argparse.Namespace, out: _Output) -> int:
    with _open(args) as cx:
        report = cx.compact()
    out.emit(
        {
            "archived": [str(u) for u in report.archived],
            "pruned": [str(u) for u in report.pruned],
            "merged": [[str(a), str(b)] for a, b in report.merged],
            "seq": report.seq,
        },
        f"archived {len(report.archived)}, pruned {len(report.pruned)},"
        f" merged {len(report.merged)}; seq {report.seq}",
    )
    return 0


def cmd_scope(args: argparse.Namespace, out: _Output) -> int:
    if args.action == "export":
        if not args.tag and not args.uri:
            raise ValidationError("give --tag or --uri", field="where")
        with _open(args, readonly=True) as cx:
            where: Any = Q.any_of(*(Q.tag(t) for t in args.tag)) if args.tag else args.uri
            blob = cx.scope(where, limit=args.limit)
            root = cx.overall_root()
        Path(args.file).write_bytes(blob)
        out.emit(
            {"file": args.file, "bytes": len(blob), "overall_root": root.hex()},
            f"wrote {len(blob)} bytes to {args.file}; root {root.hex()}",
        )
        return 0
    # Without --trusted-root only the bundle's self-consistency is checked: anyone can
    # build a self-consistent bundle, so that is never reported as verified (exit 1).
    trusted: bytes | None = args.trusted_root
    view = verify_scope(Path(args.file).read_bytes(), trusted_root=trusted)
    summary = (
        f"{len(view)} memories and {len(view.edges)} edges of {view.actor} at seq {view.seq}"
    )
    if trusted is None:
        text = (
            f"self-consistent but NOT verified against a trusted root: {summary};"
            f" its claimed root {view.overall_root.hex()} is unchecked (pass --trusted-root"
            " with the OverallRoot from the store's owner, e.g. `cortexgraph root`)"
        )
    else:
        text = f"verified against the trusted root: {summary}"
    out.emit(
        {
            "ok": trusted is not None,
            "consistent": True,
            "trusted_root_checked": trusted is not None,
            "actor": view.actor,
            "seq": view.seq,
            "memories": len(view),
            "edges": len(view.edges),
            "overall_root": view.overall_root.hex(),
        },
        text,
    )
    return 0 if trusted is not None else 1


def cmd_forget(args: argparse.Namespace, out: _Output) -> int:
    with _open(args) as cx:
        uri = cx.tombstone(args.uri, reason=args.reason)
    out.emit({"uri": str(uri), "status": "tombstoned"}, f"tombstoned {uri}")
    return 0


def cmd_journal(args: argparse.Namespace, out: _Output) -> int:
    with _open(args, readonly=True) as cx:
        for entry in cx.journal(since=args.since):
            data = entry_json(entry)
            if out.as_json:
                print(json.dumps(data, ensure_ascii=False, sort_keys=True))
            else:
                target = data.get("id", "")
                extra = f" v{data['version']}" if "version" in data else ""
                print(f"{entry.seq:>8}  {entry.at}  {entry.op:<9} {entry.ns}/{target}{extra}")
    return 0


def cmd_inspect(args: argparse.Namespace, out: _Output) -> int:
    with _open(args, readonly=True) as cx:
        stats = cx.stats()
        digests = cx.table_digests()
    data = {**attrs.asdict(stats), "digests": digests, "path": str(Path(args.root) / args.actor)}
    lines = [
        f"{data['path']}: seq {stats.seq}, {stats.memories} memories, hash {stats.hash_name}",
        *(
            f"  {name:<10} {count:>10}  {digests[name][:16]}"
            for name, count in stats.tables.items()
        ),
    ]
    out.emit(data, "\n".join(lines))
    return 0


class _ProgressBar:
    """A progress bar (tqdm's) on stderr, drawn only when stderr is a terminal and the
    bar is enabled; ``bar(label, done, total)`` starts a new bar for a new label."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: Any = None  # tqdm.tqdm, imported only when a bar is drawn
        self._label = ""

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._bar is None or label != self._label or total != self._bar.total:
            from tqdm import tqdm

            self.finish()
            self._bar = tqdm(total=total, desc=label, file=sys.stderr, dynamic_ncols=True)
            self._label = label
        self._bar.update(done - self._bar.n)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


def cmd_verify(args: argparse.Namespace, out: _Output) -> int:
    """Replay-verify every actor (or ``--actor``): exit 0 when all check out, 1 when
    anything is wrong (the report lists each problem per actor), 2 for usage errors (the
    root is missing or not a directory, no store under it, a bad actor name). With
    ``--json`` one JSON report is printed on stdout in every case."""
    try:
        if not Path(args.store_root).is_dir():
            raise NotFoundError(f"{args.store_root} is not a directory")
        with _ProgressBar(enabled=not args.no_progress) as bar:
            report = verify(
                args.store_root, args.actor, progress=lambda a, d, t: bar(f"verifying {a}", d, t)
            )
    except (NotFoundError, ValidationError) as exc:
        _fail(out, type(exc).__name__, str(exc))
        out.emit({"ok": False, "actors": [], "error": type(exc).__name__, "message": str(exc)})
        return 2
    lines = []
    for actor in report.actors:
        status = "ok" if actor.ok else "MISMATCH" if actor.error is None else actor.error
        lines.append(
            f"{actor.actor}: {status} — {actor.entries:,} entries, {actor.snapshots_checked}"
            f" snapshot(s), root {actor.overall_root[:16] or '-'}, {actor.seconds:.2f}s"
        )
        if actor.first_bad_seq is not None:
            lines.append(f"  first diverging seq: {actor.first_bad_seq}")
        lines.extend(f"  - {problem}" for problem in actor.problems)
    out.emit(report.to_dict(), "\n".join(lines))
    return 0 if report.ok else 1


def cmd_rebuild(args: argparse.Namespace, out: _Output) -> int:
    with _open(args) as cx, _ProgressBar(enabled=not args.json) as bar:
        count = cx.rebuild(progress=lambda d, t: bar(f"rebuilding {cx.actor}", d, t))
        root = cx.overall_root().hex()
    out.emit({"entries": count, "overall_root": root}, f"rebuilt {count:,} entries; root {root}")
    return 0


def cmd_backfill(args: argparse.Namespace, out: _Output) -> int:
    with _open(args) as cx, _ProgressBar(enabled=not args.json) as bar:
        count = cx.backfill_embeddings(progress=lambda d, t: bar(f"embedding {cx.actor}", d, t))
        name = cx.embedder.name
    out.emit(
        {"embedded": count, "embedder": name},
        f"embedded {count:,} memories with {name}; every vector is cached and indexed",
    )
    return 0


def cmd_snapshot(args: argparse.Namespace, out: _Output) -> int:
    with _open(args) as cx:
        manifest = cx.snapshot()
    data = _jsonable(attrs.asdict(manifest))
    out.emit(data, f"snapshot at seq {manifest.seq}: root {manifest.overall_root.hex()}")
    return 0


def cmd_root(args: argparse.Namespace, out: _Output) -> int:
    with _open(args, readonly=True) as cx:
        manifest = cx.roots()
    data = _jsonable(attrs.asdict(manifest))
    del data["at"]
    out.emit(data, manifest.overall_root.hex())
    return 0


def cmd_demo(args: argparse.Namespace, out: _Output) -> int:
    from .demo import run_demo

    if args.dir is not None:
        return run_demo(Path(args.dir), as_json=out.as_json)
    with tempfile.TemporaryDirectory(prefix="cortexgraph-demo-") as tmp:
        return run_demo(Path(tmp), as_json=out.as_json)


# -- parser -------------------------------------------------------------------------------


def _root_arg(text: str) -> bytes:
    """``--trusted-root``: a 32-byte OverallRoot as 64 hex digits (a usage error otherwise)."""
    try:
        root = bytes.fromhex(text)
    except ValueError:
        root = b""
    if len(root) != 32:
        raise argparse.ArgumentTypeError(
            f"must be 64 hex digits (a 32-byte OverallRoot, as `cortexgraph root` prints"
            f" it), not {text!r}"
        )
    return root


def _seq_arg(text: str) -> int:
    """``--since``: a non-negative integer (a usage error otherwise)."""
    try:
        value = int(text, 10)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {text!r}")
    return value


def _add_memory_options(p: argparse.ArgumentParser, *, for_update: bool) -> None:
    p.add_argument("--tag", action="append", help="a tag (repeat for several)")
    p.add_argument("--summary", help="a one-line summary")
    p.add_argument("--priority", type=int, help="1..10")
    p.add_argument("--confidence", type=float, help="0..1")
    if not for_update:
        p.add_argument("--type", default="fact", help="memory type (default: fact)")
        p.add_argument("--pinned", action="store_true", help="exempt from decay")
        p.add_argument("--ns", default="default", help="namespace (default: default)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cortexgraph",
        description="An embeddable, deterministic, verifiable memory graph for AI agents.",
    )
    parser.add_argument("--version", action="version", version=f"cortexgraph {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=_default_root(), help="store root directory")
    common.add_argument("--actor", default=_default_actor(), help="actor name")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("init", parents=[common], help="create an actor's store")
    p.add_argument("--hash", choices=["blake3", "sha256"], default=None, help="commit hash")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("remember", parents=[common], help="write a memory")
    p.add_argument("text")
    _add_memory_options(p, for_update=False)
    p.set_defaults(func=cmd_remember)

    p = sub.add_parser("get", parents=[common], help="resolve a memory URI")
    p.add_argument("uri")
    p.add_argument("--history", action="store_true", help="every version")
    p.set_defaults(func=cmd_get)

    p = sub.add_parser("update", parents=[common], help="write a new version of a memory")
    p.add_argument("uri")
    p.add_argument("--text")
    p.add_argument("--expected-version", type=int, default=None)
    _add_memory_options(p, for_update=True)
    p.set_defaults(func=cmd_update)

    p = sub.add_parser("forget", parents=[common], help="tombstone a memory")
    p.add_argument("uri")
    p.add_argument("--reason", default="")
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser("find", parents=[common], help="typed query, ranked and rendered")
    p.add_argument("--type", action="append", help="memory type (repeat: any of them)")
    p.add_argument("--tag", action="append", help="tag (repeat: all of them)")
    p.add_argument("--ns", help="only this namespace")
    p.add_argument("--status", help="status (default: active only)")
    p.add_argument("--min-priority", type=int, default=None)
    p.add_argument("--min-confidence", type=float, default=None)
    p.add_argument("--since", type=int, default=None, help="head version written at >= ms")
    p.add_argument("--limit", type=int, default=None, help="most hits (default 10)")
    p.add_argument("--budget-tokens", type=int, default=None, help="token budget for hits")
    p.add_argument("--order-by", default="salience", help="salience|recent|priority|confidence")
    p.add_argument("--form", default="short", help="short|medium|full")
    p.add_argument("--late-binding", action="store_true", help="journal the reads")
    p.set_defaults(func=cmd_find)

    p = sub.add_parser("recall", parents=[common], help="keyword, vector or hybrid recall")
    p.add_argument("text")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--mode", default="hybrid", help="keyword|vector|hybrid")
    p.add_argument("--late-binding", action="store_true", help="journal the reads")
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser("context", parents=[common], help="a token-budgeted context bundle")
    p.add_argument("--query", default=None)
    p.add_argument("--channel", default=None)
    p.add_argument("--budget-tokens", type=int, default=2000)
    p.set_defaults(func=cmd_context)

    p = sub.add_parser("compact", parents=[common], help="forget and consolidate (journaled)")
    p.set_defaults(func=cmd_compact)

    p = sub.add_parser("scope", parents=[common], help="export or verify a scope bundle")
    p.add_argument("action", choices=["export", "verify"])
    p.add_argument("file")
    p.add_argument("--tag", action="append", help="export: memories with any of these tags")
    p.add_argument("--uri", action="append", help="export: these memories")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument(
        "--trusted-root",
        type=_root_arg,
        default=None,
        help="verify: the OverallRoot you trust (64 hex digits); without it the bundle is"
        " only checked for self-consistency, reported as NOT verified, and the exit status"
        " is 1",
    )
    p.set_defaults(func=cmd_scope)

    p = sub.add_parser("link", parents=[common], help="add or change an edge")
    p.add_argument("src")
    p.add_argument("relation")
    p.add_argument("dst")
    p.add_argument("--strength", type=float, default=1.0)
    p.add_argument("--status", default="active", help="active|suggested")
    p.add_argument("--origin", default="human", help="human|llm|system (default: human)")
    p.set_defaults(func=cmd_link)

    p = sub.add_parser("unlink", parents=[common], help="remove an edge")
    p.add_argument("src")
    p.add_argument("relation")
    p.add_argument("dst")
    p.set_defaults(func=cmd_unlink)

    p = sub.add_parser("traverse", parents=[common], help="breadth-first walk of the graph")
    p.add_argument("uri")
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--relation", action="append", help="only these relations (repeat)")
    p.add_argument("--direction", default="out", help="out|in|both")
    p.add_argument("--min-strength", type=float, default=0.0)
    p.set_defaults(func=cmd_traverse)

    p = sub.add_parser("journal", parents=[common], help="print the change feed")
    p.add_argument(
        "--since",
        type=_seq_arg,
        default=0,
        help="print entries after this seq (a non-negative integer; past the end: none)",
    )
    p.set_defaults(func=cmd_journal)

    p = sub.add_parser("inspect", parents=[common], help="table counts and digests")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser(
        "verify",
        help="replay each store's journal and check it against its tables and snapshots",
        description="Exit status: 0 all match, 1 a mismatch or corruption, 2 usage or I/O.",
    )
    p.add_argument("store_root", metavar="ROOT", help="directory holding one store per actor")
    p.add_argument("--actor", default=None, help="verify only this actor")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("rebuild", parents=[common], help="drop derived tables and replay")
    p.set_defaults(func=cmd_rebuild)

    p = sub.add_parser(
        "backfill",
        parents=[common],
        help="embed every memory not embedded yet, so that recall embeds only its query",
    )
    p.set_defaults(func=cmd_backfill)

    p = sub.add_parser("snapshot", parents=[common], help="store a snapshot manifest")
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("root", parents=[common], help="print the OverallRoot")
    p.set_defaults(func=cmd_root)

    p = sub.add_parser("demo", parents=[common], help="run the end-to-end demo")
    p.add_argument("--dir", default=None, help="keep the demo store here")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = _Output(args.json)
    try:
        code: int = args.func(args, out)
    except NotFoundError as exc:
        _fail(out, type(exc).__name__, str(exc))
        return 2 if args.command == "verify" else 1
    except CortexError as exc:
        _fail(out, type(exc).__name__, str(exc))
        return 1
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly
        sys.stdout = _devnull()
        return 0
    except OSError as exc:
        _fail(out, "OSError", str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    return code


def _devnull() -> Any:
    return builtins.open(os.devnull, "w")


def _fail(out: _Output, kind: str, message: str) -> None:
    if out.as_json:
        print(json.dumps({"error": kind, "message": message}), file=sys.stderr)
    else:
        print(f"cortexgraph: {kind}: {message}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
