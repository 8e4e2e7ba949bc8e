"""A fixed script of operations whose results must not depend on the process running it.

Usage::

    python tests/scripts/determinism_script.py ROOT

Runs :func:`run` on a fresh store under ROOT and prints its result as one JSON object: a
SHA-256 over every journal entry (seq and bytes), every table's digest, the OverallRoot, and
what the script observed (counts, URIs, the outcome of the operations that must fail), and
the SHA-256 of the vectors the default model embedder (``LocalEmbedder``) gives the texts
written, embedded in batches of 5.
``tests/test_determinism.py`` runs it under different hash seeds, and in-process, and
compares.

Everything that could vary between processes is exercised: tags given as sets (whose
iteration order follows the hash seed), in mixed case and unsorted; update changes built
from sets of field names; non-ASCII, decomposed (non-NFC) and non-BMP text; all nine
memory types in several namespaces; update_head back and forth; tombstones; batches,
including two that fail and roll back. Every ``at`` is fixed.
"""

# The text is full of look-alike characters (Fraktur, double-struck, Greek) on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

import blake3

import cortexgraph as cg

ACTOR = "det"
T0 = 1_700_000_000_000
CONTENT = "def greet():\n    return 'grüß dich 👋'\n"


class Ticks:
    """Fixed, increasing ``at`` values: one second apart."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += 1000
        return self.now


def journal_sha256(cx: cg.Cortex) -> str:
    """SHA-256 over every journal entry as ``u64be(seq) | u32be(len) | bytes``."""
    h = hashlib.sha256()
    for seq, data in cx.journal_bytes():
        h.update(seq.to_bytes(8, "big") + len(data).to_bytes(4, "big") + data)
    return h.hexdigest()


def script(cx: cg.Cortex) -> dict[str, Any]:
    """Run the operations; return what was observed along the way."""
    at = Ticks()
    seen: dict[str, Any] = {}
    src = cg.Source(origin="human", session="sess-1", branch="feature/ü", cwd="/home/zoë")

    goal = cx.write(
        cg.Goal(
            text="Ship the verifier 🧠 before the freeze",
            summary="ship verifier",
            tags=["Release", "GOALS", "release", "q4"],
            priority=9,
            due=T0 + 86_400_000,
            source=src,
        ),
        at=at(),
    )
    pref = cx.write(
        cg.Preference(
            text="Prefers cafe\u0301-style commit messages — short ✓",  # NFC-normalised
            tags={"Style", "commits", "ÉCLAIR", "Straße"},
            confidence=0.75,
        ),
        ns="personal.notes",
        at=at(),
    )
    rule = cx.write(
        cg.Constraint(
            text="Never push to main (禁止) — use a PR",
            tags=["zeta", "Alpha", "mid", "ALPHA"],
            pinned=True,
            confidence=1,
            priority=10,
        ),
        ns="work",
        at=at(),
    )
    fact = cx.write(
        cg.Fact(
            text="𝔘𝔫𝔦𝔠𝔬𝔡𝔢 lives in the astral plane 𝄞 (non-BMP)",
            tags=("unicode", "Astral"),
            confidence=-0.0,
            valid_from=T0 - 1000,
            valid_to=T0 + 10_000,
        ),
        ns="work",
        at=at(),
    )
    pattern = cx.write(
        cg.Pattern(text="Retry flaky network calls with jittered backoff", tags={"net", "Retry"}),
        ns="a-b_c",
        at=at(),
    )
    event = cx.write(
        cg.Event(
            text="CI went green on the release branch",
            channel="#ci",
            occurred_at=T0 + 500,
            agent_id="agent-7",
            speaker="bot",
            kind="tool_call",
            call_id="call-0001",
            tags=["CI", "progress"],
        ),
        ns="work",
        at=at(),
    )
    artifact = cx.write(
        cg.ArtifactRef(
            text="The greeting helper",
            path="src/greet.py",
            media_type="text/x-python",
            content_hash="blake3:" + blake3.blake3(CONTENT.encode()).hexdigest(),
            content=CONTENT,
            tags=["Code"],
        ),
        at=at(),
    )
    attest = cx.write(
        cg.Attest(cited=[str(fact), str(goal)], outcome="success", tags=["Outcome"]),
        ns="a-b_c",
        at=at(),
    )
    cx.attest([fact, goal], outcome="success", text="the first success", ns="a-b_c", at=at())

    # Versions: 2 and 3, the head back to 1, forward to 3, back to 2, then an update
    # based on version 2 (which becomes version 4).
    cx.update(fact, text="Astral plane text: 𝕏𝕐ℤ ≠ XYZ", at=at())
    values = {"summary": "astral", "tags": ["Unicode", "ASTRAL", "plane"], "priority": 3}
    cx.update(fact, expected_version=2, at=at(), **{name: values[name] for name in set(values)})
    cx.update_head(fact, version=1, at=at())
    cx.update_head(fact, version=3, at=at())
    cx.update_head(fact.id, version=2, at=at())
    seen["update_from_v2"] = str(cx.update(fact, confidence=0.5, at=at()))
    seen["unchanged_update"] = str(cx.update(goal, priority=9, tags=["q4", "RELEASE", "goals"]))
    try:
        cx.update(fact, expected_version=1, text="stale", at=at())
    except cg.VersionConflictError as exc:
        seen["conflict"] = type(exc).__name__
    cx.update(pref, tags={"style", "Commits", "Tabs"}, at=at())
    cx.update(rule.head, text="Never push to main (禁止); PRs only", at=at())

    cx.tombstone(pattern, reason="superseded — ersetzt durch 🆕", at=at())
    cx.tombstone(event, at=at())
    try:
        cx.update(pattern, text="too late", at=at())
    except cg.TombstonedError as exc:
        seen["update_tombstoned"] = type(exc).__name__

    with cx.batch() as b:
        first = b.write(cg.Fact(text="Batch fact α", tags=["Batch"]), ns="work", at=at())
        b.write(cg.Goal(text="Batch goal β", status="blocked"), ns="default", at=at())
        b.update(first, text="Batch fact α, revised", at=at())
        b.update(artifact, summary="helper", at=at())
        b.update_head(fact, version=3, at=at())
        b.tombstone(first, reason="written and retired in one batch", at=at())

    seq = cx.seq
    doomed: list[str] = []
    try:
        with cx.batch() as b:
            doomed.append(str(b.write(cg.Fact(text="never committed 1"), at=at())))
            b.update(goal, text="never committed 2", at=at())
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    try:
        with cx.batch() as b:
            doomed.append(str(b.write(cg.Event(text="never committed 3"), ns="work", at=at())))
            b.update(pattern, text="fails: tombstoned", at=at())
    except cg.TombstonedError:
        pass
    seen["rolled_back_seq_unchanged"] = cx.seq == seq
    seen["rolled_back_resolvable"] = [cx.exists(uri) for uri in doomed]

    # Bulk: more memories of every type, updates and tombstones, from a seeded generator.
    rng = random.Random(42)
    kinds = [cg.Goal, cg.Preference, cg.Constraint, cg.Fact, cg.Pattern, cg.Event]
    namespaces = ["default", "work", "personal.notes", "a-b_c"]
    written = []
    for i in range(30):
        cls = kinds[i % len(kinds)]
        tags = {rng.choice(["Deploy", "DEPLOY", "ops", "Ops", "ünï", "ÜNÏ", "x"]) for _ in range(3)}
        text = f"memory {i}: " + "".join(
            chr(rng.choice([0x41, 0xE9, 0x4E2D, 0x1F600]) + rng.randrange(20)) for _ in range(12)
        )
        written.append(cx.write(cls(text=text, tags=tags), ns=rng.choice(namespaces), at=at()))
        if i % 4 == 3:
            cx.update(rng.choice(written), text=f"memory {i} revised 🎯", at=at())
        if i % 9 == 8:
            target = written.pop(0)
            cx.tombstone(target, reason=f"bulk {i}", at=at())
    seen["uris"] = [str(u) for u in (goal, pref, rule, fact, pattern, event, artifact, attest)]
    return seen


def run(root: Path) -> dict[str, Any]:
    """Run the script on a fresh store under ``root``; return the comparable result."""
    with cg.open(root, ACTOR, clock=cg.ManualClock(T0), sync=False) as cx:
        seen = script(cx)
        entries = list(cx.journal())
        return {
            "journal_sha256": journal_sha256(cx),
            "table_digests": cx.table_digests(),
            "overall_root": cx.overall_root().hex(),
            "entries": len(entries),
            "ops": sorted({e.op for e in entries}),
            "types": sorted({e.fields["body"]["type"] for e in entries if e.op == "write"}),
            "namespaces": sorted({e.ns for e in entries}),
            "seen": seen,
            "local_vectors_sha256": local_vectors_sha256(entries),
        }


def local_vectors_sha256(entries: list[Any]) -> str:
    """SHA-256 of the LocalEmbedder vectors of every written text, in journal order."""
    from cortexgraph.embed import LocalEmbedder

    texts = [
        e.fields["body"]["text"]
        for e in entries
        if e.op == "write" and isinstance(e.fields["body"].get("text"), str)
    ]
    vectors = LocalEmbedder(batch_size=5).embed(texts)
    return hashlib.sha256(vectors.tobytes()).hexdigest()


def main(argv: list[str]) -> int:
    (root,) = argv
    print(json.dumps(run(Path(root)), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
