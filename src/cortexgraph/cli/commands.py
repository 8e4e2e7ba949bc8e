"""The ``cortexgraph`` commands: each ``cmd_NAME(args, out)`` runs one subcommand through the
public API, prints its result through ``out`` and returns the exit status; the library's
errors propagate to :func:`cortexgraph.cli.main`, which turns them into exit codes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .. import (
    Cortex,
    CortexError,
    Memory,
    NotFoundError,
    Q,
    ValidationError,
    open,
)
from ..core.predicates import Predicate
from ..cortex import sync_vectors
from .keys import read_signing_key, read_verifier_key
from .output import (
    Output,
    context_json,
    edge_json,
    fail,
    print_record,
    recall_json,
    record_json,
    traversal_json,
)
from .progress import ProgressBar

if TYPE_CHECKING:
    from ..replay import VerifyReport
    from ..signing import VerifierKey

# ``cortexgraph.io`` (the export format), replay verification, scope checking and
# ``tempfile`` are imported by the few commands that use them: every command starts a
# fresh interpreter, and the frequent ones (recall, remember, find) should not pay for them.


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


def cmd_init(args: argparse.Namespace, out: Output) -> int:
    with open(args.root, args.actor, hash_name=args.hash) as cx:
        out.emit(
            {"path": str(cx.path), "actor": cx.actor, "hash_name": cx.hash_name, "seq": cx.seq},
            f"initialised {cx.path} (actor {cx.actor}, hash {cx.hash_name}, seq {cx.seq})",
        )
    return 0


def cmd_remember(args: argparse.Namespace, out: Output) -> int:
    memory = _memory_from_args(args)
    # every write through the CLI embeds what it wrote, so a later `recall` (read-only,
    # unable to cache) finds every vector cached and embeds only its query
    with _open(args, create=True, embed_on_write=True) as cx:
        uri = cx.write(memory, ns=args.ns)
    out.emit({"uri": str(uri)}, str(uri))
    return 0


def cmd_get(args: argparse.Namespace, out: Output) -> int:
    with _open(args, readonly=True) as cx:
        records = cx.history(args.uri) if args.history else [cx.resolve(args.uri)]
    if out.as_json:
        out.emit([record_json(r) for r in records] if args.history else record_json(records[0]))
    else:
        for record in records:
            print_record(record)
    return 0


def cmd_update(args: argparse.Namespace, out: Output) -> int:
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
    where = Q.fields(
        types=args.type or None,
        tags=args.tag or None,
        ns=args.ns or None,
        status=args.status or None,
        min_priority=args.min_priority,
        min_confidence=args.min_confidence,
        since=args.since,
    )
    if where is None:
        raise ValidationError("give at least one --type or --tag", field="where")
    return where


def cmd_find(args: argparse.Namespace, out: Output) -> int:
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


def cmd_link(args: argparse.Namespace, out: Output) -> int:
    with _open(args) as cx:
        edge = cx.add_edge(
            args.src,
            args.dst,
            args.relation,
            strength=args.strength,
            status=args.status,
            origin=args.origin,
        )
    text = f"{edge.src} --{edge.relation} ({edge.strength:g}, {edge.status})--> {edge.dst}"
    out.emit(edge_json(edge), text)
    return 0


def cmd_unlink(args: argparse.Namespace, out: Output) -> int:
    with _open(args) as cx:
        cx.remove_edge(args.src, args.dst, args.relation)
    out.emit({"removed": True}, f"removed {args.relation} edge")
    return 0


def cmd_traverse(args: argparse.Namespace, out: Output) -> int:
    with _open(args, readonly=True) as cx:
        result = cx.traverse(
            args.uri,
            depth=args.depth,
            relations=args.relation or None,
            direction=args.direction,
            min_strength=args.min_strength,
        )
    data = traversal_json(result)
    if out.as_json:
        out.emit(data)
    else:
        for row in data["found"]:
            arrow = "<-" if row["direction"] == "in" else "->"
            print(f"{row['depth']}  {arrow} {row['relation']:<13} {row['uri']}")
    return 0


#: a recall that must embed this many memories first says that a back-fill would help
_BACKFILL_HINT = 100


def _catch_up_vectors(cx: Cortex, out: Output) -> None:
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

    with ProgressBar(enabled=not out.as_json) as bar:
        sync_vectors(cx, progress=progress, indexing=bar.step(f"indexing {cx.actor}"))


def cmd_recall(args: argparse.Namespace, out: Output) -> int:
    with _open(args, readonly=not args.late_binding) as cx:
        if args.mode != "keyword":
            _catch_up_vectors(cx, out)
        result = cx.recall(args.text, k=args.k, mode=args.mode, late_binding=args.late_binding)
        data = recall_json(result)
    if out.as_json:
        out.emit(data)
    else:
        for row in data["hits"]:
            print(f"{row['score']:.4f}  {row['uri']}  {row['text'][:100]}")
    return 0


def cmd_context(args: argparse.Namespace, out: Output) -> int:
    with _open(args, readonly=True) as cx:
        if args.query is not None:
            _catch_up_vectors(cx, out)
        bundle = cx.context(
            query=args.query, budget_tokens=args.budget_tokens, channel=args.channel
        )
    out.emit(context_json(bundle), bundle.text)
    return 0


def cmd_compact(args: argparse.Namespace, out: Output) -> int:
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


def cmd_scope(args: argparse.Namespace, out: Output) -> int:
    if args.action == "export":
        if not args.tag and not args.uri:
            raise ValidationError("give --tag or --uri", field="where")
        with _open(args, readonly=True) as cx:
            where: Any = Q.any_of(*(Q.tag(t) for t in args.tag)) if args.tag else args.uri
            key = None if args.sign is None else read_signing_key(args.sign)
            blob = cx.scope(where, limit=args.limit, sign_with=key)
            root = cx.overall_root()
        Path(args.file).write_bytes(blob)
        out.emit(
            {"file": args.file, "bytes": len(blob), "overall_root": root.hex()},
            f"wrote {len(blob)} bytes to {args.file}; root {root.hex()}",
        )
        return 0
    # Without --trusted-root only the bundle's self-consistency is checked: anyone can
    # build a self-consistent bundle, so that is never reported as verified (exit 1).
    from .. import verify_scope

    trusted: bytes | None = args.trusted_root
    blob = Path(args.file).read_bytes()
    if args.key is not None:
        view = verify_scope(blob, trusted, key=read_verifier_key(args.key))
    else:
        view = verify_scope(blob, trusted_root=trusted)
    summary = (
        f"{len(view)} memories and {len(view.edges)} edges of {view.actor} at seq {view.seq}"
    )
    if args.key is not None:
        text = f"verified with the signed checkpoint of key {args.key}: {summary}"
    elif trusted is None:
        text = (
            f"self-consistent but NOT verified against a trusted root: {summary};"
            f" its claimed root {view.overall_root.hex()} is unchecked (pass --trusted-root"
            " with the OverallRoot from the store's owner, e.g. `cortexgraph root`)"
        )
    else:
        text = f"verified against the trusted root: {summary}"
    verified = trusted is not None or args.key is not None
    out.emit(
        {
            "ok": verified,
            "consistent": True,
            "trusted_root_checked": trusted is not None,
            "checkpoint_checked": args.key is not None,
            "actor": view.actor,
            "seq": view.seq,
            "memories": len(view),
            "edges": len(view.edges),
            "overall_root": view.overall_root.hex(),
        },
        text,
    )
    return 0 if verified else 1


def cmd_forget(args: argparse.Namespace, out: Output) -> int:
    with _open(args) as cx:
        uri = cx.tombstone(args.uri, reason=args.reason)
    out.emit({"uri": str(uri), "status": "tombstoned"}, f"tombstoned {uri}")
    return 0


def cmd_journal(args: argparse.Namespace, out: Output) -> int:
    from ..io import render_entry as entry_json  # the export's rendering of an entry

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


def cmd_inspect(args: argparse.Namespace, out: Output) -> int:
    from ..io import readable as jsonable  # one rendering of bytes, the export's

    with _open(args, readonly=True) as cx:
        stats = cx.stats()
        digests = cx.table_digests()
    data = {
        **jsonable(attrs.asdict(stats)),
        "digests": digests,
        "path": str(Path(args.root) / args.actor),
    }
    lines = [
        f"{data['path']}: seq {stats.seq}, {stats.memories} memories, hash {stats.hash_name}",
        *(
            f"  {name:<10} {count:>10}  {digests[name][:16]}"
            for name, count in stats.tables.items()
        ),
    ]
    out.emit(data, "\n".join(lines))
    return 0


def cmd_verify(args: argparse.Namespace, out: Output) -> int:
    """Replay-verify every actor (or ``--actor``): exit 0 when all check out, 1 when
    anything is wrong (the report lists each problem per actor), 2 for usage errors (the
    root is missing or not a directory, no store under it, a bad actor name). With
    ``--json`` one JSON report is printed on stdout in every case."""
    from .. import verify

    try:
        if not Path(args.store_root).is_dir():
            raise NotFoundError(f"{args.store_root} is not a directory")
        with ProgressBar(enabled=not (args.no_progress or args.json)) as bar:
            report = verify(
                args.store_root, args.actor, progress=lambda a, d, t: bar(f"verifying {a}", d, t)
            )
    except (NotFoundError, ValidationError) as exc:
        fail(out, type(exc).__name__, str(exc))
        out.emit({"ok": False, "actors": [], "error": type(exc).__name__, "message": str(exc)})
        return 2
    data = report.to_dict()
    checked = {}
    if args.key is not None:
        checked = _check_checkpoints(args.store_root, report, read_verifier_key(args.key))
        for entry in data["actors"]:
            entry["checkpoints"] = checked[entry["actor"]]
        data["ok"] = report.ok and all(c["ok"] for c in checked.values())
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
        if actor.actor in checked:
            c = checked[actor.actor]
            lines.append(
                f"  signed checkpoints: {c['count']} verified" if c["ok"]
                else f"  signed checkpoints: FAILED — {c['problem']}"
            )
    out.emit(data, "\n".join(lines))
    return 0 if data["ok"] else 1


def _check_checkpoints(
    store_root: str, report: VerifyReport, key: VerifierKey
) -> dict[str, dict[str, Any]]:
    """Per actor: the checkpoints signed with ``key``, each verified with it and matched
    to the snapshot manifest at its seq (which the replay just checked against the
    journal); an actor with none, or with one that fails, is not ok."""
    checked: dict[str, dict[str, Any]] = {}
    for actor in report.actors:
        try:
            with open(store_root, actor.actor, readonly=True) as cx:
                count = len(cx.checkpoints(key=key))
            checked[actor.actor] = {"ok": True, "count": count, "problem": None}
        except CortexError as exc:
            checked[actor.actor] = {"ok": False, "count": 0, "problem": str(exc)}
    return checked


def cmd_rebuild(args: argparse.Namespace, out: Output) -> int:
    with _open(args) as cx, ProgressBar(enabled=not args.json) as bar:
        count = cx.rebuild(progress=lambda d, t: bar(f"rebuilding {cx.actor}", d, t))
        root = cx.overall_root().hex()
    out.emit({"entries": count, "overall_root": root}, f"rebuilt {count:,} entries; root {root}")
    return 0


def cmd_backfill(args: argparse.Namespace, out: Output) -> int:
    with _open(args) as cx, ProgressBar(enabled=not args.json) as bar:
        count = cx.backfill_embeddings(progress=lambda d, t: bar(f"embedding {cx.actor}", d, t))
        name = cx.embedder.name
    out.emit(
        {"embedded": count, "embedder": name},
        f"embedded {count:,} memories with {name}; every vector is cached and indexed",
    )
    return 0


def cmd_snapshot(args: argparse.Namespace, out: Output) -> int:
    from ..io import readable as jsonable  # one rendering of bytes, the export's

    key = None if args.sign is None else read_signing_key(args.sign)
    with _open(args) as cx:
        manifest = cx.snapshot(sign_with=key)
        notes = [c.note for c in cx.checkpoints() if c.size == manifest.seq]
    data = jsonable(attrs.asdict(manifest))
    text = f"snapshot at seq {manifest.seq}: root {manifest.overall_root.hex()}"
    if key is not None:
        data["checkpoint"] = notes[0]
        text += f"\nsigned checkpoint:\n{notes[0]}"
    out.emit(data, text)
    return 0


def cmd_root(args: argparse.Namespace, out: Output) -> int:
    from ..io import readable as jsonable  # one rendering of bytes, the export's

    with _open(args, readonly=True) as cx:
        manifest = cx.roots()
    data = jsonable(attrs.asdict(manifest))
    del data["at"]
    out.emit(data, manifest.overall_root.hex())
    return 0


def cmd_demo(args: argparse.Namespace, out: Output) -> int:
    import tempfile

    from ..demo import run_demo

    if args.dir is not None:
        return run_demo(Path(args.dir), as_json=out.as_json)
    with tempfile.TemporaryDirectory(prefix="cortexgraph-demo-") as tmp:
        return run_demo(Path(tmp), as_json=out.as_json)
