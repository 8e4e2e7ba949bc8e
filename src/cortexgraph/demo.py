"""The end-to-end demo behind ``make demo`` / ``cortexgraph demo``.

One coding agent remembers facts, constraints and preferences about a project in an
embedded store, revises them with optimistic concurrency, rolls a memory back, forgets
one, survives a failed batch, links memories into a graph, finds and recalls them, builds
a token-budgeted context bundle, attests an outcome (and its ranking learns), compacts
(forgetting what stopped mattering), snapshots, hands a proof-checked scope to a
sub-agent that verifies it without the database, and finally replays and verifies the
whole store and shows that the same operations on a second store give byte-identical
tables. The clock is a :class:`~cortexgraph.clock.ManualClock`, so every run prints the
same ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cortexgraph as cg
from cortexgraph.merkle import verify_memory_proof

__all__ = ["run_demo"]

START = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _story(cx: cg.Cortex, clock: cg.ManualClock, say: Any) -> dict[str, Any]:
    say("1. The agent learns about the project (one atomic batch)")
    with cx.batch() as b:
        arch = b.write(
            cg.Fact(
                text="The API service is a FastAPI app deployed to Kubernetes via Argo CD.",
                tags=["architecture", "deploy"],
                confidence=0.9,
                priority=8,
                source=cg.Source(origin="human", branch="main", cwd="/src/api"),
            ),
            ns="project",
        )
        rule = b.write(
            cg.Constraint(
                text="Never run database migrations from CI; a human applies them.",
                tags=["deploy", "database"],
                priority=10,
                pinned=True,
            ),
            ns="project",
        )
        pref = b.write(
            cg.Preference(text="The team prefers small PRs with one reviewer.", tags=["process"]),
            ns="project",
        )
        goal = b.write(cg.Goal(text="Ship the billing endpoint", priority=9), ns="project")
        b.write(
            cg.Event(text="Deploy 142 failed: migration lock", channel="ci", tags=["deploy"]),
            ns="project",
        )
    for uri in (arch, rule, pref, goal):
        record = cx.resolve(uri)
        say(f"   {record.uri}  [{record.memory.type_name}] {record.memory.text}")
    say(f"   journal seq is now {cx.seq}")

    say("2. A revision with optimistic concurrency")
    clock.advance(60_000)
    arch2 = cx.update(arch, expected_version=1, text=arch_text_v2(), confidence=0.95)
    say(f"   updated to {arch2}")
    try:
        cx.update(arch, expected_version=1, text="a stale edit based on version 1")
    except cg.VersionConflictError as exc:
        say(f"   a second writer based on v1 is refused: {exc}")

    say("3. Rolling the head back, and forward again")
    clock.advance(1_000)
    cx.update_head(arch, version=1)
    say(f"   head is v{cx.resolve(arch.head).version}: {cx.resolve(arch.head).memory.text}")
    cx.update_head(arch, version=2)
    say(f"   head is v{cx.resolve(arch.head).version} again")

    say("4. Forgetting keeps the audit trail")
    clock.advance(1_000)
    cx.tombstone(pref, reason="the team changed its review policy")
    try:
        cx.update(pref, text="changed my mind")
    except cg.TombstonedError as exc:
        say(f"   update refused: {exc}")
    say(f"   still resolvable: {cx.resolve(pref).memory.text!r} ({cx.resolve(pref).status})")

    say("5. A batch that fails leaves nothing behind")
    seq = cx.seq
    try:
        with cx.batch() as b:
            b.write(cg.Fact(text="half-finished thought"), ns="project")
            b.update(goal, status="achieved")
            raise RuntimeError("the agent crashed mid-batch")
    except RuntimeError as exc:
        say(f"   {exc}: seq stays {cx.seq} (was {seq}); goal is {goal_status(cx, goal)}")

    say("6. Linking memories into a graph")
    clock.advance(1_000)
    with cx.batch() as b:
        event = b.write(
            cg.Event(text="Deploy 143 was blocked by a migration run from CI", channel="ci",
                     tags=["deploy", "database"], speaker="ci-bot"),
            ns="project",
        )
        b.add_edge(event, rule, "example", strength=0.9)
        b.add_edge(rule, arch, "refines", strength=0.8)
        b.add_edge(goal, arch, "relates_to", strength=0.5)
    walk = cx.traverse(event, depth=2)
    for n in walk:
        say(f"   depth {n.depth}: --{n.relation}--> {cx.resolve(n.uri).memory.text[:48]}")
    say(f"   centrality of the architecture fact: {cx.centrality(arch):.2f}")

    say("7. Typed queries and recall")
    found = cx.find(cg.Q.tag("deploy") & ~cg.Q.type(cg.Event), limit=3)
    for hit in found:
        say(f"   find   {hit.score:>7}  {hit.text}")
    for recalled in cx.recall("how do we deploy database changes?", k=3):
        ranks = sorted(recalled.ranks.items())
        channels = ", ".join(f"{c} #{r}" for c, r in ranks) or "graph"
        say(f"   recall {recalled.score:.3f}  {recalled.record.memory.text[:52]}  ({channels})")

    say("8. A context bundle for the next prompt (300 tokens)")
    bundle = cx.context(query="deploy the billing endpoint", budget_tokens=300)
    for line in bundle.text.splitlines():
        say(f"   | {line}")
    say(f"   {bundle.tokens} tokens, digest {bundle.digest[:16]}")

    say("9. The outcome is attested; the ranking weights learn from it")
    clock.advance(1_000)
    learned = cx.attest([rule, arch], outcome="success", ns="project")
    say(f"   weights {learned.before} -> {learned.after}")

    say("10. Sixty days later: compact forgets what stopped mattering")
    clock.advance(60 * 86_400_000)
    report = cx.compact()
    for uri in report.archived:
        say(f"   archived: {cx.resolve(uri).memory.text[:60]}")
    say(f"   the pinned rule is still {cx.resolve(rule).status}")

    say("11. The change feed")
    for entry in cx.journal():
        fields = entry.fields
        target = (fields.get("id") or fields.get("src") or fields["ids"][0]).hex()[:12]
        extra = f" -> v{fields['version']}" if "version" in fields else ""
        extra += f" {fields['rel']}" if "rel" in fields else ""
        extra += f" {fields['status']}" if entry.op == "status" else ""
        say(f"   seq {entry.seq:>2}  {entry.op:<9} {entry.ns}/{target}{extra}")
    return {
        "uris": [str(u) for u in (arch, rule, pref, goal)],
        "seq": cx.seq,
        "digests": cx.table_digests(),
        "context_digest": bundle.digest,
    }


def arch_text_v2() -> str:
    return "The API service is a FastAPI app deployed to Kubernetes via Argo CD (since v2.3)."


def goal_status(cx: cg.Cortex, goal: cg.MemoryURI) -> str:
    return str(getattr(cx.resolve(goal.head).memory, "status", "?"))


def run_demo(root: Path, *, as_json: bool = False) -> int:
    """Run the demo under ``root``; print the story (or a JSON summary). Returns 0."""
    lines: list[str] = []
    say = lines.append if as_json else print
    say(f"cortexgraph {cg.__version__} demo in {root}")
    clock = cg.ManualClock(START)
    with cg.open(root, "coder", clock=clock) as cx:
        summary = _story(cx, clock, say)
        story_digests = summary["digests"]

    say("12. One root commits to everything; a sub-agent gets a proof-checked scope")
    with cg.open(root, "coder", clock=clock) as cx:
        manifest = cx.snapshot()
        proof = cx.prove(summary["uris"][1])
        good = verify_memory_proof(proof, manifest.overall_root)
        say(f"   snapshot at seq {manifest.seq}: root {manifest.overall_root.hex()[:32]}")
        say(f"   proof of the migration rule against that root: {good}")
        blob = cx.scope(cg.Q.tag("deploy"), limit=10)
        view = cg.verify_scope(blob, trusted_root=manifest.overall_root)
        say(f"   scope of {len(view)} memories and {len(view.edges)} edges, {len(blob)} bytes,"
            " verified by the sub-agent without the database")
        for hit in view.find(cg.Q.type(cg.Constraint), limit=2):
            say(f"   sub-agent finds: {hit.text}")
        tampered = bytearray(blob)
        tampered[len(blob) // 2] ^= 1
        try:
            cg.verify_scope(bytes(tampered), trusted_root=manifest.overall_root)
            good = False
        except cg.VerificationError:
            say("   one flipped bit: VerificationError")
        clock.advance(1_000)
        cx.write(cg.Event(text="Deploy 144 succeeded", channel="ci"), ns="project")
        stale = verify_memory_proof(proof, cx.overall_root())
        say(f"   the old proof against the next root: {stale} (the root moved on)")
        summary["digests"] = cx.table_digests()
        summary["seq"] = cx.seq

    say("13. Replay verification: rebuild from the journal, compare everything")
    report = cg.verify(root, "coder")
    actor = report.actors[0]
    say(
        f"   verify: ok={report.ok}, {actor.entries} entries, {actor.snapshots_checked}"
        f" snapshot(s), every derived table identical: {all(actor.tables.values())}"
    )

    say("14. Reopened read-only, the store is exactly as committed")
    with cg.open(root, "coder", readonly=True) as ro:
        stats = ro.stats()
        same = ro.table_digests() == summary["digests"]
        say(f"   seq {stats.seq}, {stats.memories} memories, tables unchanged: {same}")

    say("15. Determinism: the same operations on a second store give the same bytes")
    quiet: list[str] = []
    twin_clock = cg.ManualClock(START)
    with cg.open(root / "twin", "coder", clock=twin_clock) as twin:
        twin_summary = _story(twin, twin_clock, quiet.append)
        first = twin_summary["digests"]
    identical = first == story_digests
    say(f"   every table byte-identical: {identical}")
    for name, digest in sorted(summary["digests"].items()):
        if name in ("journal", "heads", "versions", "mmr", "smt"):
            say(f"   {name:<9} {digest[:32]}")
    if as_json:
        print(json.dumps({**summary, "identical_twin": identical, "story": lines}, indent=2))
    return 0 if identical and same and good and not stale and report.ok else 1
