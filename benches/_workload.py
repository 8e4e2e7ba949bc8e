"""Deterministic workloads for the benchmarks, and a raw-LMDB baseline that replays their bytes.

The baseline answers "what does the same work cost in bare LMDB?". To make it the *same*
work, a workload is first run through cortexgraph on a scratch store; every ``(table, key,
value)`` that store then holds is read back with py-lmdb and grouped per memory, in the order
``Batch.write`` puts them::

    journal[seq] -> heads[id] -> versions[id|1] -> idx type key -> idx tag keys -> idx time key

The raw side replays exactly those puts, with the same transaction boundaries, into a fresh
environment with the same tables and options (sync on, readahead off, meminit off). Memory ids
depend only on actor, namespace, seq and body, so a measured cortexgraph run on an empty store
writes byte-identical tables; :func:`check_same_bytes` verifies that after a run.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import lmdb

import cortexgraph as cg
from cortexgraph.core.journal import decode_entry
from cortexgraph.core.keys import ID_SIZE
from cortexgraph.store.env import DEFAULT_MAP_SIZE, TABLES

__all__ = [
    "ACTOR",
    "BASE_AT",
    "NS",
    "WRITE_TABLES",
    "Put",
    "RawStore",
    "capture_puts",
    "check_same_bytes",
    "chunks",
    "make_memories",
    "read_tables",
    "write_cortex",
]

ACTOR = "bench"
NS = "default"
BASE_AT = 1_700_000_000_000
#: Milliseconds between consecutive memories of a workload.
STEP_MS = 1_000
#: The tables a ``write`` touches (the others stay empty in these workloads).
WRITE_TABLES = ("journal", "heads", "versions", "idx")

#: One LMDB put: ``(table, key, value)``.
Put = tuple[str, bytes, bytes]

_WORDS = (
    "the", "a", "an", "of", "to", "in", "for", "on", "with", "by", "from", "at", "as", "and",
    "or", "but", "not", "that", "this", "these", "those", "it", "its", "we", "they", "our",
    "their", "agent", "user", "team", "service", "api", "client", "server", "request",
    "response", "cache", "queue", "worker", "job", "build", "test", "deploy", "release",
    "branch", "commit", "merge", "review", "patch", "config", "setting", "default", "value",
    "key", "token", "secret", "session", "login", "account", "password", "database", "table",
    "index", "query", "schema", "migration", "backup", "replica", "shard", "cluster", "node",
    "pod", "container", "image", "registry", "pipeline", "stage", "step", "runner", "timeout",
    "retry", "limit", "rate", "error", "warning", "failure", "crash", "log", "trace", "metric",
    "alert", "dashboard", "latency", "throughput", "memory", "disk", "cpu", "network", "socket",
    "port", "host", "domain", "certificate", "proxy", "gateway", "route", "handler", "endpoint",
    "version", "feature", "flag", "rollout", "canary", "should", "must", "never", "always",
    "usually", "prefers", "wants", "needs", "uses", "runs", "calls", "returns", "stores",
    "reads", "writes", "fails", "succeeds", "blocks", "waits", "starts", "stops", "restarts",
    "checks", "validates", "parses", "renders", "before", "after", "during", "when", "while",
    "because", "unless", "until", "only", "also", "still", "already", "again", "quickly",
    "slowly", "safely", "locally", "remotely", "nightly", "weekly", "manually", "automatically",
)  # fmt: skip

_TAGS = (
    "architecture", "decision", "context", "pattern", "gotcha", "progress", "deploy", "ci",
    "testing", "python", "rust", "typescript", "frontend", "backend", "database", "auth",
    "security", "performance", "caching", "logging", "monitoring", "infra", "docker",
    "kubernetes", "networking", "api", "cli", "docs", "release", "migration", "config",
    "billing", "search", "storage", "queue", "payments", "onboarding", "style", "review",
    "incident", "oncall", "data", "ml", "embedding", "privacy", "compliance", "ux",
    "accessibility", "i18n", "tooling",
)  # fmt: skip

_CHANNELS = ("cli", "chat", "slack", "ci", "review", "ide")
_AGENTS = ("planner", "coder", "reviewer", "tester")


def _text(rng: random.Random) -> str:
    """A sentence-like text of 40-300 characters drawn from the word list."""
    target = rng.randint(40, 300)
    words: list[str] = []
    length = -1
    while True:
        word = rng.choice(_WORDS)
        if length + 1 + len(word) + 1 > target and length >= 39:
            break
        words.append(word)
        length += 1 + len(word)
    text = " ".join(words) + "."
    return text[0].upper() + text[1:]


def _tags(rng: random.Random) -> list[str]:
    return rng.sample(_TAGS, rng.randint(1, 4))


def _source(rng: random.Random) -> cg.Source | None:
    if rng.random() < 0.6:
        return None
    return cg.Source(origin=rng.choice(("human", "llm", "llm")), session=f"s-{rng.randrange(500)}")


def make_memories(n: int, *, seed: int, start_at: int = BASE_AT) -> list[cg.Memory]:
    """``n`` realistic memories: about half Facts, 30% Events and 20% Preferences.

    The same ``(n, seed, start_at)`` always gives the same memories. Memory ``i`` is meant
    to be written at ``start_at + i * STEP_MS`` (Events occurred shortly before that).
    """
    rng = random.Random(seed)
    memories: list[cg.Memory] = []
    for i in range(n):
        kind = rng.random()
        common: dict[str, Any] = {
            "text": _text(rng),
            "tags": _tags(rng),
            "priority": rng.randint(1, 10),
            "source": _source(rng),
        }
        if kind < 0.5:
            memory: cg.Memory = cg.Fact(confidence=round(rng.uniform(0.5, 1.0), 2), **common)
        elif kind < 0.8:
            memory = cg.Event(
                channel=rng.choice(_CHANNELS),
                agent_id=rng.choice(_AGENTS),
                occurred_at=start_at + i * STEP_MS - rng.randrange(3_600_000),
                **common,
            )
        else:
            memory = cg.Preference(confidence=round(rng.uniform(0.6, 1.0), 2), **common)
        memories.append(memory)
    return memories


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``items`` of ``size`` elements (the last may be shorter)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def write_cortex(
    cx: cg.Cortex,
    memories: Sequence[cg.Memory],
    *,
    batch_size: int,
    start_at: int = BASE_AT,
) -> list[cg.MemoryURI]:
    """Write ``memories`` in batches of ``batch_size`` (1: one ``cx.write`` per memory)."""
    uris: list[cg.MemoryURI] = []
    at = start_at
    if batch_size == 1:
        for memory in memories:
            uris.append(cx.write(memory, ns=NS, at=at))
            at += STEP_MS
        return uris
    for chunk in chunks(memories, batch_size):
        with cx.batch() as b:
            for memory in chunk:
                uris.append(b.write(memory, ns=NS, at=at))
                at += STEP_MS
    return uris


# -- reading back what a store holds ------------------------------------------------------


def read_tables(path: Path, tables: Sequence[str] = WRITE_TABLES) -> dict[str, dict[bytes, bytes]]:
    """Every key and value of ``tables`` in the (closed) LMDB environment at ``path``."""
    env = lmdb.open(str(path), max_dbs=32, readonly=True)
    try:
        out: dict[str, dict[bytes, bytes]] = {}
        with env.begin(buffers=False) as txn:
            for name in tables:
                db = env.open_db(name.encode(), txn=txn, create=False)
                out[name] = dict(txn.cursor(db=db))
        return out
    finally:
        env.close()


_IDX_ORDER = {b"T"[0]: 0, b"G"[0]: 1, b"S"[0]: 2, b"C"[0]: 3}


def _group_per_memory(tables: dict[str, dict[bytes, bytes]]) -> list[list[Put]]:
    """The puts of each memory, in journal order, each in the order ``Batch.write`` makes them."""
    idx_by_id: dict[bytes, list[bytes]] = {}
    for key in tables["idx"]:
        idx_by_id.setdefault(key[-ID_SIZE:], []).append(key)
    groups: list[list[Put]] = []
    used = 0
    for seq_key, data in sorted(tables["journal"].items()):
        entry = decode_entry(data)
        if entry.op != "write":
            raise ValueError(f"the workload journaled a {entry.op!r}; only writes are replayed")
        mid = entry.memory_id
        version_key = mid + (1).to_bytes(4, "big")
        # idx keys sort by kind in the table; the writer emits type, tags, time.
        idx = sorted(idx_by_id.pop(mid), key=lambda k: (_IDX_ORDER[k[0]], k))
        group: list[Put] = [
            ("journal", seq_key, data),
            ("heads", mid, tables["heads"][mid]),
            ("versions", version_key, tables["versions"][version_key]),
        ]
        group.extend(("idx", key, tables["idx"][key]) for key in idx)
        groups.append(group)
        used += len(group)
    if used != sum(len(t) for t in tables.values()) or idx_by_id:
        raise ValueError("the scratch store holds puts that belong to no memory")
    return groups


def capture_puts(
    memories: Sequence[cg.Memory], *, batch_size: int, start_at: int = BASE_AT
) -> list[list[Put]]:
    """Run the workload on a scratch store and return the puts it made, grouped per memory."""
    with tempfile.TemporaryDirectory(prefix="cg-scratch-") as root:
        cx = cg.open(root, ACTOR, sync=False)
        try:
            write_cortex(cx, memories, batch_size=batch_size, start_at=start_at)
        finally:
            cx.close()
        return _group_per_memory(read_tables(Path(root) / ACTOR))


def check_same_bytes(cortex_path: Path, raw_path: Path) -> None:
    """Raise ``RuntimeError`` unless both (closed) environments hold identical written tables."""
    ours, raw = read_tables(cortex_path), read_tables(raw_path)
    for name in WRITE_TABLES:
        if ours[name] != raw[name]:
            raise RuntimeError(
                f"the raw baseline did not replay the same bytes: table {name!r} differs"
                f" ({len(ours[name])} vs {len(raw[name])} keys)"
            )


# -- the raw baseline ----------------------------------------------------------------------


class RawStore:
    """A bare py-lmdb environment with cortexgraph's tables and open options.

    Create one with :meth:`create`, or :meth:`borrow` the environment of an open Cortex to
    read the very pages it reads. Puts must be :meth:`bind`-ed to table handles first, so
    that timed loops do nothing but LMDB calls.
    """

    def __init__(self, env: Any, dbs: dict[str, Any], *, owned: bool) -> None:
        self.env = env
        self.dbs = dbs
        self._owned = owned

    @classmethod
    def create(cls, path: Path, *, sync: bool = True, map_size: int = DEFAULT_MAP_SIZE) -> RawStore:
        path.mkdir(parents=True, exist_ok=True)
        env = lmdb.open(
            str(path),
            map_size=map_size,
            max_dbs=len(TABLES) + 4,
            subdir=True,
            sync=sync,
            metasync=sync,
            readahead=False,
            meminit=False,
            lock=True,
        )
        with env.begin(write=True) as txn:
            dbs = {name: env.open_db(name.encode(), txn=txn, create=True) for name in TABLES}
        return cls(env, dbs, owned=True)

    @classmethod
    def borrow(cls, cx: cg.Cortex) -> RawStore:
        """The LMDB handle of an open Cortex (internal); closing the RawStore leaves it open."""
        return cls(cx._env._env, cx._env.dbs, owned=False)

    def bind(self, groups: Sequence[Sequence[Put]]) -> list[list[tuple[Any, bytes, bytes]]]:
        """``groups`` with each table name replaced by this environment's table handle."""
        dbs = self.dbs
        return [[(dbs[table], key, value) for table, key, value in group] for group in groups]

    def write(self, bound: Sequence[Sequence[tuple[Any, bytes, bytes]]]) -> None:
        """Put every memory of ``bound`` in one write transaction and commit it."""
        with self.env.begin(write=True) as txn:
            put = txn.put
            for group in bound:
                for db, key, value in group:
                    put(key, value, db=db)

    def get_pair(self, heads_key: bytes, version_key: bytes) -> tuple[bytes, bytes]:
        """Read one ``heads`` and one ``versions`` value in one read transaction."""
        # Begin and abort, as cortexgraph's read path does (commit would cost the same).
        txn = self.env.begin(buffers=False)
        try:
            return (
                txn.get(heads_key, db=self.dbs["heads"]),
                txn.get(version_key, db=self.dbs["versions"]),
            )
        finally:
            txn.abort()

    @property
    def path(self) -> Path:
        return Path(self.env.path())

    def close(self) -> None:
        if self._owned:
            self.env.close()
