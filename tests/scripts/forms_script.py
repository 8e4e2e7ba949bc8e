"""Fixed, hand-built records of all nine memory types, and their forms as JSON.

``tests/test_forms.py`` renders these records for the golden files in ``fixtures/forms/``
and runs this file in subprocesses (other locales, time zones and hash seeds) to check
that every form and token estimate comes out the same. Run as a script it adopts the
environment's locale and time zone (``setlocale(LC_ALL, "")``, ``tzset()``) before
rendering, so that anything locale- or zone-dependent would show, and prints
``{"environment": ..., "forms": {name: {form: text}}, "tokens": {...}}``.
"""

from __future__ import annotations

import hashlib
import json
import locale
import time

from cortexgraph.core.forms import FORMS, estimate_tokens, render
from cortexgraph.core.state import Record
from cortexgraph.core.taxonomy import (
    ArtifactRef,
    Attest,
    Constraint,
    Event,
    Fact,
    Goal,
    LearnWeights,
    Memory,
    Pattern,
    Preference,
    Source,
)
from cortexgraph.core.uri import MemoryURI

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20.000Z

RETRY_PY = '''"""Retry a call with exponential backoff.

Usage: ```retry(fetch, attempts=3)```
"""


def retry(fn, attempts=3, base=0.5):
    for i in range(attempts):
        try:
            return fn()
        except OSError:
            if i == attempts - 1:
                raise
'''


def _record(
    n: int,
    memory: Memory,
    *,
    version: int = 1,
    head: int | None = None,
    latest: int | None = None,
    status: str = "active",
    ns: str = "default",
) -> Record:
    uri = MemoryURI("agent", ns, bytes([n] * 8 + list(range(8))), version)
    return Record(
        uri=uri,
        memory=memory,
        version=version,
        seq=10 * n + version,
        at=T0 + 60_000 * n + 1000 * version,
        head=version if head is None else head,
        latest=version if latest is None else latest,
        status=status,
        created_at=T0 + 60_000 * n,
    )


def golden_records() -> dict[str, Record]:
    """One record per memory type, keyed by type name, with most fields set."""
    cited = (
        "cx://agent/default/0505050505050505" + "0001020304050607@1",
        "cx://agent/runbooks/0707070707070707" + "0001020304050607@2",
    )
    memories: dict[str, Record] = {
        "goal": _record(
            1,
            Goal(
                text="Ship cortexgraph 1.0 with verified scopes and context bundles.",
                tags=["release", "Q1"],
                confidence=0.9,
                priority=9,
                pinned=True,
                status="blocked",
                due=1_704_067_200_000,
                source=Source(origin="human", session="s-1", branch="main", cwd="/srv/app"),
            ),
        ),
        "preference": _record(
            2,
            Preference(
                text="Alice prefers short answers with a code example first; no long preambles.",
                tags=["style", "alice"],
                confidence=0.75,
                source=Source(origin="llm", session="s-2"),
            ),
            status="tombstoned",
        ),
        "constraint": _record(
            3,
            Constraint(
                text=(
                    "Never run migrate.py against production without a fresh backup.\n"
                    "It drops the sessions table before it recreates it."
                ),
                summary="No migrations on production without a backup",
                tags=["gotcha", "db"],
                priority=10,
                pinned=True,
                valid_from=T0,
                valid_to=T0 + 86_400_000 * 365,
            ),
            version=2,
            head=3,
            latest=3,
        ),
        "fact": _record(
            4,
            Fact(
                text=(
                    "Deploys go through CI.\n"
                    "The pipeline runs on every push to main and takes about twelve minutes."
                ),
                summary="Deploys go through CI",
                tags=["deploy", "ci"],
                confidence=0.8,
                priority=7,
                source=Source(origin="human", session="s-42", branch="main", cwd="/srv/app"),
                valid_from=T0,
            ),
            version=2,
        ),
        "pattern": _record(
            5,
            Pattern(
                text=(
                    "When a property test fails once and then passes, pin the failing input "
                    "with @example before touching the code: it turns a heisenbug into a "
                    "regression test that runs on every commit, and the fix can then be "
                    "checked against the exact input that broke it."
                ),
                tags=[
                    "testing",
                    "hypothesis",
                    "flaky",
                    "regression",
                    "debugging",
                    "ci",
                    "property-based",
                    "seeds",
                ],
                confidence=0.6,
                priority=6,
            ),
        ),
        "event": _record(
            6,
            Event(
                text="デプロイ完了 🚀 all green on main",
                tags=["deploy"],
                speaker="alice",
                channel="#ops",
                kind="message",
                occurred_at=T0 + 123_456,
                agent_id="agent-7",
                call_id="call_42",
                source=Source(origin="human", session="chat-9"),
            ),
            ns="chat",
        ),
        "artifact_ref": _record(
            7,
            ArtifactRef(
                text="The retry helper the HTTP client uses.",
                tags=["code", "http"],
                path="src/app/retry.py",
                media_type="text/x-python",
                content=RETRY_PY,
                content_hash="sha256:" + hashlib.sha256(RETRY_PY.encode("utf-8")).hexdigest(),
            ),
        ),
        "attest": _record(
            8,
            Attest(
                text="The deploy succeeded by following the cited runbook.",
                cited=cited,
                outcome="success",
            ),
        ),
        "learn_weights": _record(
            9,
            LearnWeights(
                weights=(460_000, 190_000, 150_000, 100_000, 100_000),
                attest="cx://agent/default/0808080808080808" + "0001020304050607@1",
            ),
        ),
    }
    return memories


def render_all() -> dict[str, dict[str, str]]:
    return {name: {form: render(r, form) for form in FORMS} for name, r in golden_records().items()}


def main() -> None:
    chosen = locale.setlocale(locale.LC_ALL, "")
    time.tzset()
    forms = render_all()
    tokens = {
        name: {f: estimate_tokens(text) for f, text in by.items()} for name, by in forms.items()
    }
    environment = {"locale": chosen, "utc_offset": time.strftime("%z", time.localtime(0))}
    print(json.dumps({"environment": environment, "forms": forms, "tokens": tokens}))


if __name__ == "__main__":
    main()
