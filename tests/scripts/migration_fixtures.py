"""Write the migration fixtures in ``fixtures/migration/``, one per source format.

Each is built from its format's documented shape, with at least 50 records and every
feature the importer maps (observations, each kind of relation, owners and runs, the
eight memory types, statuses, pinned, access counts, bidirectional and suggested edges):

- ``mcp-memory.jsonl``: as the reference MCP memory server writes ``memory.jsonl``
  (``src/memory/index.ts``: entity lines first, then relation lines);
- ``mem0.json``: mem0's ``Memory.get_all()`` result, ``{"results": [...]}``, with ISO
  8601 timestamps in US/Pacific as mem0 writes them;
- ``claude-memory.db``: the memory plugin's SQLite database (``memories``, ``edges``,
  ``extractions``).

The content is fixed (no randomness, no clock). Run from the repository root::

    python tests/scripts/migration_fixtures.py
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent.parent / "fixtures" / "migration"

_SERVICES = [
    "billing", "auth", "search", "gateway", "scheduler", "notifier", "ledger", "catalog",
    "inventory", "reports",
]  # fmt: skip
_PEOPLE = ["Alice Chen", "Bob Okafor", "Carla Díaz", "Dmitri Volkov", "Eun-ji Park"]
_TEAMS = ["Platform Team", "Payments Team", "Data Team"]


def _uuid(*parts: object) -> str:
    return str(uuid.UUID(hashlib.sha256(repr(parts).encode()).hexdigest()[:32]))


def mcp_memory() -> str:
    """35 entities (people, teams, services, a preference, a rule) and 34 relations."""
    entities = []
    for i, name in enumerate(_PEOPLE):
        entities.append(
            (name, "person", [f"Joined in {2019 + i}", f"Prefers {'tabs' if i % 2 else 'spaces'}"])
        )
    for team in _TEAMS:
        entities.append((team, "team", [f"{team} holds a weekly planning meeting on Monday"]))
    for i, service in enumerate(_SERVICES):
        observations = [f"Written in {'Go' if i % 3 == 0 else 'Python'}"]
        if i % 2 == 0:
            observations.append(f"Deployed to the {'eu' if i % 4 == 0 else 'us'} cluster")
        if i == 3:
            observations = []  # an entity with no observations yet
        entities.append((f"{service}-service", "service", observations))
    for i, service in enumerate(_SERVICES[:10]):
        entities.append((f"{service} runbook", "document", [f"Runbook for {service}, v{i + 1}"]))
    entities.append(("Code review style", "preference", ["Small pull requests, one topic each"]))
    entities.append(("Deploy freeze", "rule", ["No deploys on Friday after 15:00"]))
    entities.append(("Rotate keys quarterly", "goal", ["Next rotation due in March"]))
    relations = []
    for i, name in enumerate(_PEOPLE):
        relations.append((name, _TEAMS[i % 3], "member of"))
        relations.append((name, f"{_SERVICES[i]}-service", "owns"))
    for i, service in enumerate(_SERVICES):
        relations.append((f"{service} runbook", f"{service}-service", "documents"))
        if i:
            relations.append((f"{service}-service", f"{_SERVICES[0]}-service", "depends_on"))
    relations.append(("auth-service", "gateway-service", "source_of"))
    relations.append(("search-service", "catalog-service", "derived_from"))
    relations.append(("ledger-service", "billing-service", "refines"))
    relations.append(("reports-service", "ledger-service", "based on"))
    relations.append(("Deploy freeze", "Code review style", "contradicts"))
    relations.append(("notifier-service", "scheduler-service", "Example-Of"))
    relations.append(("inventory-service", "catalog-service", "supersedes"))
    relations.append(("Alice Chen", "Bob Okafor", "mentors"))
    relations.append(("Alice Chen", "Bob Okafor", "works with"))  # same edge: relates_to
    lines = [
        json.dumps(
            {"type": "entity", "name": n, "entityType": t, "observations": o},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        for n, t, o in entities
    ]
    lines += [
        json.dumps(
            {"type": "relation", "from": a, "to": b, "relationType": r},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        for a, b, r in relations
    ]
    return "\n".join(lines) + "\n"


def mem0() -> str:
    """60 records: 48 of user alice over three runs and none, 6 of bob, 4 of an agent
    alone, 2 of alice and an agent; one procedural memory, one empty memory."""
    facts = [
        "Is allergic to peanuts", "Prefers vegetarian restaurants", "Lives in Lisbon",
        "Works as a data engineer", "Has a dog named Miso", "Plays the cello",
        "Is learning Japanese", "Drinks oolong tea in the afternoon", "Runs on Sundays",
        "Dislikes early meetings", "Uses Neovim", "Reads science fiction",
    ]  # fmt: skip
    runs = [None, "onboarding", "trip-planning", "Q3 Review"]
    results = []
    for i in range(60):
        if i < 48:
            user, agent = "alice", None
        elif i < 54:
            user, agent = "bob", None
        elif i < 58:
            user, agent = None, "travel-agent"
        else:
            user, agent = "alice", "travel-agent"
        text = f"{facts[i % len(facts)]} (note {i})"
        metadata: dict[str, object] | None = None
        if i % 5 == 0:
            metadata = {"categories": ["Food", "personal details"], "source": "chat"}
        if i == 7:
            metadata = {"memory_type": "procedural_memory"}
        if i == 11:
            text = ""
        created = f"2026-0{1 + i % 9}-{10 + i % 18:02d}T{8 + i % 12:02d}:15:00.123456-08:00"
        updated = None if i % 4 else f"2026-10-0{1 + i % 9}T12:00:00-07:00"
        record: dict[str, object] = {
            "id": _uuid("mem0", i),
            "memory": text,
            "hash": hashlib.md5(text.encode()).hexdigest(),
            "metadata": metadata,
            "created_at": created,
            "updated_at": updated,
        }
        for key, value in (("user_id", user), ("agent_id", agent), ("run_id", runs[i % 4])):
            if value is not None:
                record[key] = value
        results.append(record)
    return json.dumps({"results": results}, ensure_ascii=False, indent=2) + "\n"


_SCHEMA = """
CREATE TABLE memories (
  id TEXT PRIMARY KEY, content TEXT NOT NULL, summary TEXT, memory_type TEXT NOT NULL,
  category TEXT NOT NULL DEFAULT 'project', voyage_embedding BLOB, local_embedding BLOB,
  confidence REAL NOT NULL DEFAULT 1.0, priority INTEGER NOT NULL DEFAULT 5,
  pinned INTEGER NOT NULL DEFAULT 0, source_type TEXT, source_session TEXT,
  source_context TEXT, tags TEXT NOT NULL DEFAULT '[]', access_count INTEGER NOT NULL
  DEFAULT 0, last_accessed_at TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'active'
);
CREATE TABLE edges (
  id TEXT PRIMARY KEY, source_id TEXT NOT NULL REFERENCES memories(id),
  target_id TEXT NOT NULL REFERENCES memories(id), relation_type TEXT NOT NULL,
  strength REAL NOT NULL DEFAULT 0.5, bidirectional INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL DEFAULT 'active', created_at TEXT NOT NULL,
  UNIQUE (source_id, target_id, relation_type)
);
CREATE TABLE extractions (
  id TEXT PRIMARY KEY, session_id TEXT NOT NULL, cursor_position INTEGER NOT NULL,
  extracted_at TEXT NOT NULL
);
"""

_TYPES = [
    "architecture", "decision", "pattern", "gotcha", "context", "progress",
    "code_description", "code",
]  # fmt: skip
_STATUSES = ["active"] * 9 + ["archived", "pruned", "superseded"]
_SOURCES = ["extraction", "manual", "code_index", "consolidation"]


def claude_memory(path: Path) -> None:
    """64 memories (8 of each type), 44 edges of all seven relations, 3 extractions."""
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.executescript(_SCHEMA)
    ids = []
    for i in range(64):
        kind = _TYPES[i % 8]
        service = _SERVICES[i % 10]
        if kind == "code":
            content = f"def {service}_handler(event):\n    return route(event, {i})\n"
            summary = f"{service}_handler in src/{service}/handler.py"
        else:
            content = f"The {service} service: {kind.replace('_', ' ')} note {i}."
            summary = f"{kind} about {service}" if i % 3 else None
        mid = _uuid("claude", i)
        ids.append(mid)
        day = 1 + i % 28
        row = {
            "id": mid,
            "content": content,
            "summary": summary,
            "memory_type": kind,
            "category": "global" if i % 7 == 0 else "project",
            "voyage_embedding": bytes(range(8)),
            "confidence": round(0.3 + (i % 8) / 10, 2),
            "priority": 1 + i % 10,
            "pinned": 1 if i % 11 == 0 else 0,
            "source_type": _SOURCES[i % 4],
            "source_session": f"session-{i % 5}",
            "source_context": "main" if i % 2 else "feature/import",
            "tags": json.dumps([service, "Needs Review"] if i % 6 == 0 else [service]),
            "access_count": (i * 7) % 13,
            "last_accessed_at": None if (i * 7) % 13 == 0 else f"2026-10-{day:02d}T09:00:00Z",
            "created_at": f"2026-03-{day:02d}T10:{i % 60:02d}:00Z",
            "updated_at": f"2026-04-{day:02d}T10:{i % 60:02d}:00Z",
            "status": _STATUSES[i % 12],
        }
        db.execute(
            f"INSERT INTO memories ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            tuple(row.values()),
        )
    relations = [
        "relates_to", "derived_from", "contradicts", "exemplifies", "refines", "supersedes",
        "source_of",
    ]  # fmt: skip
    edges = []
    for i in range(8):  # prose-code pairing: each code_description is the source_of a code
        edges.append((ids[8 * i + 6], ids[8 * i + 7], "source_of", 1.0, 0, "active"))
    for i in range(36):
        a, b = ids[i], ids[(i * 5 + 3) % 64]
        if a == b:
            b = ids[(i + 1) % 64]
        rel = relations[i % 6]  # source_of is covered above
        edges.append(
            (a, b, rel, round(0.1 + (i % 9) / 10, 2), 1 if i % 5 == 0 else 0,
             "suggested" if i % 7 == 3 else "active")
        )  # fmt: skip
    for n, (a, b, rel, strength, both, status) in enumerate(edges):
        created = f"2026-05-{1 + n % 28:02d}T08:00:00Z"
        db.execute(
            "INSERT INTO edges VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (_uuid("edge", n), a, b, rel, strength, both, status, created),
        )
    for n in range(3):
        db.execute(
            "INSERT INTO extractions VALUES (?, ?, ?, ?)",
            (_uuid("extraction", n), f"session-{n}", 1000 * (n + 1), "2026-06-01T00:00:00Z"),
        )
    db.commit()
    db.execute("VACUUM")
    db.close()


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "mcp-memory.jsonl").write_text(mcp_memory(), encoding="utf-8")
    (OUT / "mem0.json").write_text(mem0(), encoding="utf-8")
    claude_memory(OUT / "claude-memory.db")


if __name__ == "__main__":
    main()
