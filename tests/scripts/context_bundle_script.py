"""A fixed store, and its context bundles as JSON.

``tests/test_context_bundle.py`` builds this store (:func:`build`, every ``at=`` fixed)
for the golden files in ``fixtures/context_bundle/``, and runs this file on the built
store in subprocesses with other hash seeds, to check that the same state and arguments
give the same bytes. Run as ``context_bundle_script.py ROOT`` it opens the store under
``ROOT`` and prints ``{case: {"digest", "tokens", "items"}}`` for :data:`CASES`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import cortexgraph as cg
from cortexgraph.context import ContextBundle, run_context

ACTOR = "agent"
T0 = 1_700_000_000_000  # 2023-11-14T22:13:20.000Z
MINUTE = 60_000
DAY = 86_400_000
#: Where the bundles are taken: 30 days after the first memory.
NOW = T0 + 30 * DAY
QUERY = "how do we deploy the api?"
#: ``name -> (query, budget_tokens, channel)``; the goldens are ``<name>.txt``.
CASES: dict[str, tuple[str | None, int, str | None]] = {
    "query-150": (QUERY, 150, None),
    "query-600": (QUERY, 600, None),
    "query-2000": (QUERY, 2000, None),
    "channel-600": (None, 600, "slack"),
    "query-channel-2000": (QUERY, 2000, "slack"),
}


def build(root: Path) -> dict[str, cg.MemoryURI]:
    """Write the fixed store under ``root``; returns the URIs by name."""
    uris: dict[str, cg.MemoryURI] = {}
    with cg.open(root, ACTOR, sync=False) as cx:
        at = T0

        def put(name: str, memory: cg.Memory, ns: str = "project") -> None:
            nonlocal at
            at += MINUTE
            uris[name] = cx.write(memory, ns=ns, at=at)

        put(
            "no-fridays",
            cg.Constraint(
                text="Never deploy the api on Fridays.", tags=["deploy"], priority=9, pinned=True
            ),
        )
        put("ship-v2", cg.Goal(text="Ship v2 of the api by March.", tags=["release"], priority=8))
        put(
            "old-goal",
            cg.Goal(text="Migrate the build to Bazel.", status="abandoned", tags=["build"]),
        )
        put("docs-goal", cg.Goal(text="Document every public endpoint.", tags=["docs"]))
        put(
            "no-secrets",
            cg.Constraint(
                text="Never commit secrets; use the vault.", tags=["security"], priority=10
            ),
        )
        put(
            "review",
            cg.Constraint(
                text="Every change to main needs one review.", tags=["review"], priority=7
            ),
        )
        put(
            "terse",
            cg.Preference(
                text="The user prefers terse answers with code first.",
                tags=["style"],
                confidence=0.9,
            ),
        )
        put(
            "pytest",
            cg.Preference(
                text="Tests are written with pytest, not unittest.", tags=["testing"], priority=6
            ),
        )
        put(
            "make-ship",
            cg.Fact(
                text="Deploys run through make ship, which builds, tests and pushes the api image.",
                tags=["deploy"],
                priority=8,
            ),
        )
        put(
            "eu-west",
            cg.Fact(
                text="The api runs in eu-west-1 on three nodes.", tags=["infra"], confidence=0.8
            ),
        )
        put(
            "postgres",
            cg.Fact(text="The database is Postgres 16 with one replica.", tags=["database"]),
        )
        put(
            "canary",
            cg.Fact(
                text="A deploy goes to the canary first for ten minutes.",
                tags=["deploy"],
                priority=7,
            ),
        )
        put(
            "stale",
            cg.Fact(
                text="Deploys used to run from Jenkins.",
                tags=["deploy"],
                confidence=0.5,
                priority=2,
            ),
        )
        put(
            "retry",
            cg.Pattern(
                text="Retry flaky deploys once, then page the on-call.", tags=["deploy", "oncall"]
            ),
        )
        put(
            "script",
            cg.ArtifactRef(
                text="The deploy script.",
                path="scripts/ship.sh",
                content="#!/bin/sh\nmake test && make push\n",
            ),
        )
        put(
            "script-fact",
            cg.Fact(text="scripts/ship.sh is what make ship runs to deploy.", tags=["deploy"]),
        )
        cx.add_edge(uris["script"], uris["script-fact"], "source_of", at=at)
        for i, (channel, text) in enumerate(
            [
                ("slack", "Ana asked whether the deploy is done."),
                ("cli", "make ship failed on the lint step."),
                ("slack", "Ben said the canary looks healthy."),
                ("slack", "Ana wants a changelog for v2."),
                ("cli", "make ship succeeded."),
            ]
        ):
            put(
                f"event-{i}",
                cg.Event(
                    text=text, channel=channel, speaker="team", occurred_at=T0 + (100 + i) * MINUTE
                ),
            )
        put(
            "gone",
            cg.Fact(text="The api deploy token is in the old wiki.", tags=["deploy"], priority=10),
        )
        cx.tombstone(uris["gone"], reason="wrong", at=at + MINUTE)
        put(
            "other-ns",
            cg.Fact(text="Deploy windows are Tuesday and Thursday.", tags=["deploy"]),
            ns="team",
        )
        cx.attest(
            [uris["make-ship"]],
            outcome="success",
            text="deploy went fine",
            ns="project",
            at=at + 2 * MINUTE,
        )
    return uris


def bundle_json(bundle: ContextBundle) -> dict[str, Any]:
    return {
        "digest": bundle.digest,
        "tokens": bundle.tokens,
        "items": [[str(uri), layer, form] for uri, layer, form in bundle.items],
    }


def bundles(root: Path) -> dict[str, ContextBundle]:
    """The bundle of every case, from the store under ``root``."""
    with cg.open(root, ACTOR, sync=False) as cx:
        return {
            name: run_context(
                cx._handle,
                query=query,
                budget_tokens=budget,
                channel=channel,
                now=NOW,
                estimator=None,
            )
            for name, (query, budget, channel) in CASES.items()
        }


if __name__ == "__main__":
    found = bundles(Path(sys.argv[1]))
    print(json.dumps({name: bundle_json(b) for name, b in found.items()}, sort_keys=True))
