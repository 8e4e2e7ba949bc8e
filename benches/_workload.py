"""Deterministic workloads for the benchmarks, and a raw-LMDB baseline that replays their bytes.

The baseline answers "what does the same work cost in bare LMDB?". To make it the *same*
work, a workload is first run through cortexgraph on a scratch store while every put and
delete its write transactions make is recorded, in order, transaction by transaction (the
methods of ``store.txn.WriteTxn`` are wrapped for the run; :func:`capture_batches`), so the
recording follows whatever rows the layout writes. :func:`rows_per_memory` counts them.

The raw side replays exactly those operations, with the same transaction boundaries, into a
fresh environment with the same tables and options (sync on, readahead off, meminit off).
Memory ids depend only on actor, namespace, seq and body, so a measured cortexgraph run on
an empty store writes byte-identical tables; :func:`check_same_bytes` verifies that after a
run, for every table but ``meta`` and ``snapshots``.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import lmdb

import cortexgraph as cg
from cortexgraph.core.keys import seq_key
from cortexgraph.core.postings import index_text
from cortexgraph.store.env import DEFAULT_MAP_SIZE, TABLES
from cortexgraph.store.txn import WriteTxn

__all__ = [
    "ACTOR",
    "BASE_AT",
    "COMPARED_TABLES",
    "MERKLE_TABLES",
    "NS",
    "WRITE_TABLES",
    "Op",
    "RawStore",
    "SqliteFts5",
    "capture_batches",
    "check_same_bytes",
    "chunks",
    "make_memories",
    "read_tables",
    "rows_per_memory",
    "write_cortex",
]

ACTOR = "bench"
NS = "default"
BASE_AT = 1_700_000_000_000
#: Milliseconds between consecutive memories of a workload.
STEP_MS = 1_000
#: The tables ``Batch.write`` itself puts to (before Merkle maintenance).
WRITE_TABLES = ("journal", "heads", "versions", "salience", "postings")
#: The Merkle tables every batch also writes: MMR rows per entry, SMT chunk rows per batch.
MERKLE_TABLES = ("mmr", "smt")
#: The tables a raw replay must leave byte-identical: every table but ``meta`` (identity,
#: written when cortexgraph opens a store) and ``snapshots`` (not written by these workloads
#: either, but not derived from the journal). The ones no write touches must stay empty.
COMPARED_TABLES = tuple(t for t in TABLES if t not in ("meta", "snapshots"))

#: One LMDB operation: ``(table, key, value)`` puts ``value``; a ``None`` value deletes ``key``.
Op = tuple[str, bytes, bytes | None]

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


class _Recorder:
    """Records every put and delete the write transactions of this process make, per
    transaction, in order: the rows of a workload whatever the layout writes."""

    def __init__(self) -> None:
        self.transactions: list[list[Op]] = []
        self._open: dict[int, list[Op]] = {}

    def ops(self, txn: WriteTxn) -> list[Op]:
        return self._open.setdefault(id(txn), [])

    def install(self) -> list[tuple[str, Any]]:
        recorder = self
        saved = [
            (name, getattr(WriteTxn, name))
            for name in ("put", "delete", "apply_mutations", "append_entry", "commit", "abort")
        ]
        real = dict(saved)

        def put(txn: WriteTxn, table: str, key: bytes, value: bytes) -> None:
            recorder.ops(txn).append((table, bytes(key), bytes(value)))
            real["put"](txn, table, key, value)

        def delete(txn: WriteTxn, table: str, key: bytes) -> None:
            recorder.ops(txn).append((table, bytes(key), None))
            real["delete"](txn, table, key)

        def apply_mutations(txn: WriteTxn, mutations: list[Op]) -> None:
            recorder.ops(txn).extend(
                (t, bytes(k), None if v is None else bytes(v)) for t, k, v in mutations
            )
            real["apply_mutations"](txn, mutations)

        def append_entry(txn: WriteTxn, seq: int, data: bytes) -> None:
            recorder.ops(txn).append(("journal", seq_key(seq), bytes(data)))
            real["append_entry"](txn, seq, data)

        def commit(txn: WriteTxn) -> None:
            ops = recorder._open.pop(id(txn), [])
            real["commit"](txn)
            if ops:
                recorder.transactions.append(ops)

        def abort(txn: WriteTxn) -> None:
            recorder._open.pop(id(txn), None)
            real["abort"](txn)

        for name, function in (
            ("put", put), ("delete", delete), ("apply_mutations", apply_mutations),
            ("append_entry", append_entry), ("commit", commit), ("abort", abort),
        ):  # fmt: skip
            setattr(WriteTxn, name, function)
        return saved


def capture_batches(
    memories: Sequence[cg.Memory], *, batch_size: int, start_at: int = BASE_AT
) -> list[list[Op]]:
    """Run the workload on a scratch store; return each write transaction's operations.

    One list per committed write transaction (per batch; per memory when ``batch_size`` is
    1), every put and delete in the order cortexgraph made it, whatever tables and rows the
    layout uses. Replaying them, transaction by transaction, into an empty environment
    gives the scratch store's tables byte for byte (checked here).
    """
    recorder = _Recorder()
    with tempfile.TemporaryDirectory(prefix="cg-scratch-") as root:
        cx = cg.open(root, ACTOR, sync=False)
        saved = recorder.install()
        try:
            write_cortex(cx, memories, batch_size=batch_size, start_at=start_at)
        finally:
            for name, function in saved:
                setattr(WriteTxn, name, function)
            cx.close()
        tables = read_tables(Path(root) / ACTOR, COMPARED_TABLES)
    batches = recorder.transactions
    expected = len(range(0, len(memories), batch_size))
    if len(batches) != expected:
        raise ValueError(f"expected {expected} write transactions, recorded {len(batches)}")
    replayed: dict[str, dict[bytes, bytes]] = {name: {} for name in COMPARED_TABLES}
    for ops in batches:
        for table, key, value in ops:
            if value is None:
                replayed[table].pop(key, None)
            else:
                replayed[table][key] = value
    if replayed != tables:
        raise ValueError("the recorded operations do not rebuild the scratch store's tables")
    return batches


def rows_per_memory(batches: Sequence[Sequence[Op]], memories: int) -> dict[str, float]:
    """What a workload's write transactions wrote per memory: every put and delete
    (``ops``), and the distinct rows each transaction left changed (``rows``; a row put
    twice in one transaction counts once), in total and per table."""
    per_table: dict[str, int] = {}
    ops = 0
    for batch in batches:
        ops += len(batch)
        for table, _ in {(table, key) for table, key, _ in batch}:
            per_table[table] = per_table.get(table, 0) + 1
    out = {"ops": ops / memories, "rows": sum(per_table.values()) / memories}
    out.update({f"rows.{table}": count / memories for table, count in sorted(per_table.items())})
    return out


def check_same_bytes(
    cortex_path: Path, raw_path: Path, tables: Sequence[str] = COMPARED_TABLES
) -> None:
    """Raise ``RuntimeError`` unless both (closed) environments hold identical ``tables``."""
    ours, raw = read_tables(cortex_path, tables), read_tables(raw_path, tables)
    for name in tables:
        if ours[name] != raw[name]:
            raise RuntimeError(
                f"the raw baseline did not replay the same bytes: table {name!r} differs"
                f" ({len(ours[name])} vs {len(raw[name])} keys)"
            )


# -- the raw baseline ----------------------------------------------------------------------


class RawStore:
    """A bare py-lmdb environment with cortexgraph's tables and open options.

    Create one with :meth:`create`, or :meth:`borrow` the environment of an open Cortex to
    read the very pages it reads. Operations must be :meth:`bind`-ed to table handles first,
    so that timed loops do little but LMDB calls.
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

    def bind(self, batches: Sequence[Sequence[Op]]) -> list[list[tuple[Any, bytes, bytes | None]]]:
        """``batches`` with each table name replaced by this environment's table handle."""
        dbs = self.dbs
        return [[(dbs[table], key, value) for table, key, value in ops] for ops in batches]

    def write(self, bound: Sequence[tuple[Any, bytes, bytes | None]]) -> None:
        """Apply one bound batch in one write transaction and commit it.

        A ``None`` value deletes the key, as ``WriteTxn.apply_mutations`` does.
        """
        with self.env.begin(write=True) as txn:
            put, delete = txn.put, txn.delete
            for db, key, value in bound:
                if value is None:
                    delete(key, db=db)
                else:
                    put(key, value, db=db)

    def timed_replay(self, batches: Sequence[Sequence[Op]]) -> float:
        """Seconds to :meth:`write` each of ``batches`` in turn (bound before timing)."""
        bound = self.bind(batches)
        start = time.perf_counter()
        for batch in bound:
            self.write(batch)
        return time.perf_counter() - start

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


class SqliteFts5:
    """What a user would otherwise pick for durable single writes: SQLite in WAL mode with
    ``synchronous=FULL`` (each commit fsyncs the WAL), a table of memories and an FTS5
    index over the same text the keyword index holds (``index_text``), with its tags in an
    indexed table.

    :meth:`write` is one memory in one transaction, as ``cx.write`` outside a batch is.
    """

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        if not create:
            return
        self.db.execute("CREATE TABLE memories(id INTEGER PRIMARY KEY, ns TEXT, text TEXT)")
        self.db.execute("CREATE TABLE tags(tag TEXT, id INTEGER)")
        self.db.execute("CREATE INDEX tags_by_tag ON tags(tag, id)")
        self.db.execute(
            "CREATE VIRTUAL TABLE fts USING fts5(text, content='memories', content_rowid='id')"
        )

    @classmethod
    def reopen(cls, path: Path) -> SqliteFts5:
        """The database an earlier instance created at ``path``."""
        return cls(path, create=False)

    def write(self, memory: cg.Memory, ns: str) -> None:
        """Insert ``memory`` (row, tags, FTS5 postings) in one durable transaction."""
        text = index_text(memory)
        db = self.db
        db.execute("BEGIN")
        row = db.execute("INSERT INTO memories(ns, text) VALUES (?, ?)", (ns, text)).lastrowid
        db.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (row, text))
        db.executemany("INSERT INTO tags VALUES (?, ?)", ((tag, row) for tag in memory.tags))
        db.execute("COMMIT")

    def write_many(self, memories: Sequence[cg.Memory], ns: str) -> None:
        """Insert ``memories`` in one durable transaction (a batch)."""
        db = self.db
        db.execute("BEGIN")
        for memory in memories:
            text = index_text(memory)
            row = db.execute(
                "INSERT INTO memories(ns, text) VALUES (?, ?)", (ns, text)
            ).lastrowid
            db.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (row, text))
            db.executemany("INSERT INTO tags VALUES (?, ?)", ((tag, row) for tag in memory.tags))
        db.execute("COMMIT")

    def write_batches(self, memories: Sequence[cg.Memory], ns: str, batch_size: int) -> None:
        """Insert ``memories``, ``batch_size`` to a durable transaction (as
        :func:`write_cortex` does for cortexgraph)."""
        for first in range(0, len(memories), batch_size):
            self.write_many(memories[first : first + batch_size], ns)

    def keyword(self, query: str, k: int) -> list[int]:
        """The ``k`` best rows for ``query`` (its words OR-ed) by FTS5's ``bm25()``."""
        match = " OR ".join(f'"{word}"' for word in query.split())
        rows = self.db.execute(
            "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?", (match, k)
        ).fetchall()
        return [row for (row,) in rows]

    def close(self) -> None:
        self.db.close()
