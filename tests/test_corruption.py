"""Corruption is reported with a typed error, never a crash.

Two levels:

- every decoder of stored bytes, fed damaged rows (each real row of a store truncated,
  extended and with bytes flipped, plus arbitrary bytes), returns a value or raises
  ``CorruptionError``, never ``struct.error``, ``IndexError``, ``KeyError``,
  ``UnicodeDecodeError`` or ``ValueError``;
- the sweep: one byte of ``data.mdb`` flipped at each of a few hundred offsets spread over
  every page of a closed store; ``verify``, ``open``, ``journal``, ``find`` and ``recall``
  either work or raise a ``CortexError``, and ``cortexgraph verify --json`` prints one JSON
  report and exits 1 whenever it reports a problem.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import lmdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.commitments import SnapshotManifest, roots
from cortexgraph.core.graph import EdgeState
from cortexgraph.core.journal import decode_entry
from cortexgraph.core.keys import seq_from_key
from cortexgraph.core.segments import block_term, decode_block, decode_stats
from cortexgraph.core.signals import AttrsRow, decode_attrs_rows
from cortexgraph.core.smt_store import smt_store_get
from cortexgraph.core.state import HeadState, VersionState
from cortexgraph.store.env import TABLES

ACTOR = "agent"
T0 = 1_700_000_000_000


def build_store(root: Path) -> None:
    """A small closed store: 300 memories of seven types in two namespaces (half written in
    one batch), updates, edges, tombstones, two snapshots, a cached embedding per memory
    and a saved vector index."""
    rng = random.Random(3)
    cx = cg.open(root, ACTOR, clock=cg.ManualClock(T0), sync=False)
    ticks = iter(range(T0, T0 + 10**9, 1000))
    kinds: list[Callable[[int], cg.Memory]] = [
        lambda i: cg.Fact(
            text=f"fact {i} on deploys, ci {rng.random()}", tags=["deploy", f"t{i % 5}"]
        ),
        lambda i: cg.Goal(
            text=f"goal {i}: ship the verifier", status="active", priority=1 + i % 10
        ),
        lambda i: cg.Preference(text=f"prefers style {i} commits", confidence=0.5),
        lambda i: cg.Constraint(text=f"never push {i} to main", pinned=i % 7 == 0),
        lambda i: cg.Pattern(text=f"retry pattern {i} with backoff", tags=["net"]),
        lambda i: cg.Event(text=f"event {i}: ci went green", channel="#ci", occurred_at=T0 - i),
        lambda i: cg.ArtifactRef(
            text=f"helper {i}", path=f"src/h{i}.py", content=f"print({i})\n" * 40
        ),
    ]
    uris = []
    with cx.batch() as b:
        for i in range(150):
            uris.append(b.write(kinds[i % 7](i), ns=("default", "work")[i % 2], at=next(ticks)))
    for i in range(150, 300):
        uris.append(cx.write(kinds[i % 7](i), ns=("default", "work")[i % 2], at=next(ticks)))
    for i in range(0, 280, 9):
        uris[i] = cx.update(uris[i], text=f"updated memory {i} " * 3, at=next(ticks))
    for i in range(5, 280, 11):
        cx.add_edge(uris[i], uris[i + 1], "relates_to", strength=0.5, at=next(ticks))
    cx.snapshot(at=next(ticks))
    for i in range(3, 280, 17):
        cx.tombstone(uris[i], reason="obsolete", at=next(ticks))
    cx.recall("deploy pipeline", k=5)  # fills the embedding cache and the vector index
    cx.snapshot(at=next(ticks))
    cx.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corruption") / "store"
    build_store(root)
    return root


def _rows(root: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    """Up to 40 rows of each table, read with raw py-lmdb."""
    env = lmdb.open(str(root / ACTOR), readonly=True, max_dbs=len(TABLES) + 4, lock=False)
    try:
        out = {}
        with env.begin() as txn:
            for table in TABLES:
                db = env.open_db(table.encode(), txn=txn, create=False)
                rows = list(txn.cursor(db=db))
                out[table] = rows[:: max(1, len(rows) // 40)]
        return out
    finally:
        env.close()


def _damaged(data: bytes) -> Iterator[bytes]:
    """``data`` truncated at each length, extended, and with each of its first bytes flipped."""
    for end in range(min(len(data), 80)):
        yield data[:end]
    yield data[: len(data) - 1]
    yield data + b"\0"
    yield data + b"\xff" * 9
    for i in range(min(len(data), 80)):
        yield data[:i] + bytes((data[i] ^ 0xFF,)) + data[i + 1 :]


def _version_memory(data: bytes) -> object:
    return VersionState.decode(data).memory()


DECODERS: dict[str, Callable[[bytes], object]] = {
    "HeadState": HeadState.decode,
    "VersionState": _version_memory,
    "EdgeState": EdgeState.decode,
    "AttrsRow": AttrsRow.decode,
    "AttrsRow, many at once": lambda data: decode_attrs_rows([data, data]),
    "keyword block": decode_block,
    "keyword block lookup": lambda data: block_term(data, b"deploy"),
    "keyword statistics": decode_stats,
    "SnapshotManifest": SnapshotManifest.decode,
    "journal entry": decode_entry,
    "journal key": seq_from_key,
}


def _typed_or_value(decoder: Callable[[bytes], object], data: bytes) -> None:
    try:
        decoder(data)
    except cg.CorruptionError:
        pass


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_decoders_fail_typed_on_damaged_rows(store: Path, name: str) -> None:
    """Each decoder, given every row of every table damaged in many ways (rows of other
    tables are damaged input too), returns a value or raises CorruptionError."""
    decoder = DECODERS[name]
    for rows in _rows(store).values():
        for key, value in rows:
            for data in (*_damaged(value), *_damaged(key)):
                _typed_or_value(decoder, data)


@pytest.mark.parametrize("name", sorted(DECODERS))
@given(data=st.binary(max_size=120))
def test_decoders_fail_typed_on_any_bytes(name: str, data: bytes) -> None:
    """Each decoder, given arbitrary bytes, returns a value or raises CorruptionError."""
    _typed_or_value(DECODERS[name], data)


def _read_roots(
    txn: Any, hash_name: str, size: int, damage: dict[tuple[str, bytes], bytes]
) -> None:
    """Read the roots and one SMT lookup through a getter that returns ``damage`` rows."""

    def get(table: str, key: bytes) -> bytes | None:
        if (table, key) in damage:
            return damage[table, key]
        found: bytes | None = txn.get(table, key)
        return found

    roots(hash_name, get, size)
    smt_store_get(lambda key: get("smt", key), b"\x5a" * 32)


def test_merkle_readers_fail_typed_on_damaged_nodes(store: Path) -> None:
    """The MMR and SMT node readers behind the roots, given one damaged ``mmr`` or ``smt``
    row at a time, return a root or raise CorruptionError."""
    rows = _rows(store)
    with cg.open(store, ACTOR, readonly=True) as cx:
        size, hash_name = cx.seq, cx.hash_name
        with cx._env.read() as txn:
            for table in ("mmr", "smt"):
                for key, value in rows[table]:
                    for data in _damaged(value):
                        damage = {(table, key): data}
                        try:
                            _read_roots(txn, hash_name, size, damage)
                        except cg.CorruptionError:
                            pass


# ---------------------------------------------------------------------------
# verify reports every actor and every problem


def _main_tree_root(data: bytes) -> int:
    """The page number of the main tree's root, from the newest of the two meta pages."""
    metas = []
    for page in (0, 1):
        base = page * PAGE
        txnid = int.from_bytes(data[base + 144 : base + 152], "little")
        metas.append((txnid, int.from_bytes(data[base + 128 : base + 136], "little")))
    return max(metas)[1]


def _run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    from cortexgraph.cli import main

    code = main(list(argv))
    return code, capsys.readouterr().out


def test_verify_reports_a_damaged_page_without_letting_lmdb_read_it(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged header of the main tree's root page (its ``lower`` bound: LMDB would take
    garbage as node offsets) is found by the page check, reported as a CorruptionError
    naming the tree, and the CLI prints a JSON report with ok false and exits 1."""
    root = tmp_path / "copy"
    shutil.copytree(store, root)
    path = root / ACTOR / "data.mdb"
    data = bytearray(path.read_bytes())
    data[_main_tree_root(bytes(data)) * PAGE + 12] ^= 0xFF
    path.write_bytes(bytes(data))
    report = cg.verify(root)
    [actor] = report.actors
    assert (report.ok, actor.error, actor.tables) == (False, "CorruptionError", {"main": False})
    assert actor.actor == ACTOR and actor.seconds >= 0
    assert "damaged LMDB page structure in 'main'" in actor.problems[0]
    code, out = _run_cli(capsys, "verify", str(root), "--json", "--no-progress")
    assert (code, json.loads(out)["ok"]) == (1, False)


def test_verify_goes_on_past_a_store_it_cannot_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under a root holding two healthy actors and, between them, an LMDB environment that
    is not a cortexgraph store, verify reports all three: the foreign one failed with a
    typed error kind and a problem, the two others verified; the CLI exits 1 with one
    JSON report naming the three."""
    root = tmp_path / "root"
    for name in ("alice", "carol"):
        with cg.open(root, name, sync=False) as cx:
            cx.write(cg.Fact(text=f"{name} was here"), at=T0)
    foreign = lmdb.open(str(root / "bob"), max_dbs=2)
    with foreign.begin(write=True) as txn:
        txn.put(b"key", b"value")
    foreign.close()
    report = cg.verify(root)
    by_actor = {a.actor: a for a in report.actors}
    assert sorted(by_actor) == ["alice", "bob", "carol"]
    assert (by_actor["alice"].ok, by_actor["carol"].ok, by_actor["bob"].ok) == (True, True, False)
    assert by_actor["bob"].error is not None and by_actor["bob"].problems
    code, out = _run_cli(capsys, "verify", str(root), "--json", "--no-progress")
    printed = json.loads(out)
    assert (code, printed["ok"], len(printed["actors"])) == (1, False, 3)


@pytest.mark.parametrize("where", ["missing", "file", "empty"])
def test_verify_usage_errors_print_a_json_report_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """A root that is missing, a file, or holds no store is a usage error: exit 2, and with
    --json still one JSON report (ok false, the error kind) on stdout."""
    root = tmp_path / "root"
    if where == "file":
        root.write_text("not a directory")
    elif where == "empty":
        root.mkdir()
    code, out = _run_cli(capsys, "verify", str(root), "--json", "--no-progress")
    printed = json.loads(out)
    assert (code, printed["ok"], printed["actors"], printed["error"]) == (
        2,
        False,
        [],
        "NotFoundError",
    )


# ---------------------------------------------------------------------------
# the sweep: one flipped byte of data.mdb, in child processes

PAGE = 4096
#: offsets inside a page tried in turn: the page number, flags, lower, upper, the node
#: offsets, a node header, and the node area (keys and values)
IN_PAGE = (2, 10, 12, 14, 17, 19, 24, 40, 4095, 3000, 2048, 1024)
#: meta page fields: magic, root of the main tree, its entry count, last page, txnid
IN_META = (16, 128, 120, 136, 144, 96)


def sweep_offsets(size: int) -> list[int]:
    """One offset in every page of a file of ``size`` bytes, cycling through IN_PAGE, plus
    the fields of both meta pages."""
    offsets = {page * PAGE + field for page in (0, 1) for field in IN_META}
    for page in range(2, size // PAGE):
        offsets.add(page * PAGE + IN_PAGE[page % len(IN_PAGE)])
    return sorted(offsets)


def _attempt(run: Callable[[], object]) -> str:
    try:
        run()
    except cg.CortexError as exc:
        return f"typed {type(exc).__name__}"
    except Exception as exc:  # the failure this sweep looks for
        return f"UNTYPED {type(exc).__name__}: {exc}"
    return "ok"


def _probe(
    base: Path, work: Path, offset: int, digests: dict[str, str]
) -> Iterator[dict[str, Any]]:
    """Flip the byte at ``offset`` in a copy of ``base``; yield what verify said, then what
    the library calls did (separately, so that a crash after verify still shows its verdict)."""
    from cortexgraph.cli import main

    root = work / str(offset)
    shutil.rmtree(root, ignore_errors=True)  # left by a worker that died on this offset
    shutil.copytree(base, root)
    with (root / ACTOR / "data.mdb").open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes((byte ^ 0xFF,)))
    out = io.StringIO()
    code: int | str
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main(["verify", str(root), "--json", "--no-progress"])
        except Exception as exc:  # the failure this sweep looks for
            code = f"UNTYPED {type(exc).__name__}: {exc}"
    try:
        report = json.loads(out.getvalue())
    except ValueError:
        report = None
    yield {"offset": offset, "verify": code, "report": report}

    def read(fn: Callable[[cg.Cortex], object]) -> Callable[[], object]:
        def run() -> object:
            with cg.open(root, ACTOR, readonly=True) as cx:
                return fn(cx)

        return run

    ops = {
        "open": read(lambda cx: None),
        "journal": read(lambda cx: list(cx.journal())),
        "find": read(lambda cx: cx.find(cg.Q.type(cg.Fact) | cg.Q.tag("net"), limit=50)),
        "recall": read(lambda cx: cx.recall("deploy pipeline", k=10)),
    }
    result: dict[str, Any] = {"offset": offset}
    for name, op in ops.items():
        result[name] = _attempt(op)
    if report is not None and report.get("ok"):
        changed: list[str] = []
        result["changed"] = changed
        _attempt(
            read(
                lambda cx: changed.extend(
                    t for t, d in cx.table_digests().items() if digests[t] != d
                )
            )
        )
    shutil.rmtree(root)
    yield result


def _worker(base: Path, work: Path, offsets: list[int]) -> None:
    """Run the probes of ``offsets`` in this process, one JSON line per result, each
    offset announced first so that the parent can name the one that crashed it."""
    with cg.open(base, ACTOR, readonly=True) as cx:
        digests = cx.table_digests()
    for offset in offsets:
        print(json.dumps({"start": offset}), flush=True)
        for line in _probe(base, work, offset, digests):
            print(json.dumps(line), flush=True)


def _run_worker(
    base: Path, work: Path, offsets: list[int]
) -> tuple[list[dict[str, Any]], int | None, int, str]:
    """Run one worker process on ``offsets`` until it ends or dies: the records it printed,
    the offset it was on when it ended, its exit code and the tail of its stderr."""
    records: list[dict[str, Any]] = []
    current = None
    with tempfile.TemporaryFile("w+") as errors:
        with subprocess.Popen(
            [sys.executable, __file__, str(base), str(work), *map(str, offsets)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                record = json.loads(line)
                if "start" in record:
                    current = record["start"]
                else:
                    records.append(record)
        errors.seek(0)
        tail = errors.read()[-600:]
    return records, current, proc.returncode, tail


def _run_slice(base: Path, work: Path, offsets: list[int]) -> Iterator[dict[str, Any]]:
    """Run ``offsets`` in worker processes; when one dies, run the offset it died on once
    more, alone, and yield a crash record (with the exit code, whether it happened again
    and the worker's last stderr) before going on with the rest in a new worker."""
    pending = list(offsets)
    while pending:
        records, current, code, tail = _run_worker(base, work, pending)
        yield from records
        done = {r["offset"] for r in records if "open" in r}
        if code == 0:
            missing = [o for o in pending if o not in done]
            if missing:
                raise AssertionError(f"the worker stopped early before offsets {missing[:5]}")
            return
        if current is None:
            raise AssertionError(f"a worker died before its first offset ({code}): {tail}")
        again = _run_worker(base, work, [current])[2]
        yield {"offset": current, "crash": code, "again": again, "stderr": tail}
        pending = [o for o in pending if o not in done and o != current]


@pytest.mark.slow
def test_one_flipped_byte_is_reported_never_a_crash(store: Path, tmp_path: Path) -> None:
    """Flip one byte at several hundred offsets spread over every page of ``data.mdb`` of a
    closed store (meta pages, branch and leaf pages of every table, overflow pages, free
    pages), each in a copy, in two worker processes. Then:

    - ``cortexgraph verify --json`` never crashes, always prints one JSON report, and exits
      1 exactly when the report says ``ok: false`` (0 when ok);
    - ``open``, ``journal``, ``find`` and ``recall`` each work or raise a CortexError;
    - a flip verify reports as ok is invisible: the store reads back with identical
      tables, or only the ``emb`` cache differs (a flipped byte of a cached embedding, a
      cache verify does not compare), or the flip is in a meta page (LMDB then reads the
      other meta page: the previous committed state, which verifies). Flips in free pages
      and in the unused middle of a page are the common invisible ones.
    - a reading process dies only where verify reported damaged LMDB page structure.
      LMDB follows node offsets without bounds checks, so a damaged page header can make a
      reader read past the file (SIGBUS), and whether it does can depend on the order of
      the reads (which varies with the hash seed); verify checks the pages without LMDB
      before it opens a store, so it reports such damage and never dies
      (``docs/reliability.md``).
    """
    offsets = sweep_offsets((store / ACTOR / "data.mdb").stat().st_size)
    assert len(offsets) >= 200
    work = tmp_path / "work"
    work.mkdir()
    halves = [offsets[0::2], offsets[1::2]]
    with ThreadPoolExecutor(2) as pool:  # threads that each drive one worker process
        slices = list(pool.map(lambda h: list(_run_slice(store, work, h)), halves))
    records = [record for part in slices for record in part]
    verdicts = {r["offset"]: r for r in records if "verify" in r}
    results = {r["offset"]: r for r in records if "open" in r}
    crashes = {r["offset"]: r for r in records if "crash" in r}
    failures = []
    for offset in offsets:
        verdict = verdicts.get(offset)
        if verdict is None:
            failures.append(f"{offset}: verify crashed the process ({crashes.get(offset)})")
            continue
        report = verdict["report"]
        if report is None or "ok" not in report:
            failures.append(f"{offset}: verify printed no JSON report ({verdict['verify']})")
            continue
        if verdict["verify"] != (0 if report["ok"] else 1):
            failures.append(f"{offset}: verify ok={report['ok']} but exit {verdict['verify']}")
        damaged = any("damaged LMDB page" in p for a in report["actors"] for p in a["problems"])
        if offset in crashes:
            crash = crashes[offset]
            if not damaged:
                failures.append(
                    f"{offset}: a library call crashed the process (exit {crash['crash']};"
                    f" run again alone: exit {crash['again']}) where verify saw no damaged"
                    f" page: {crash['stderr']}"
                )
            continue
        result = results[offset]
        failures.extend(
            f"{offset}: {op} {result[op]}"
            for op in ("open", "journal", "find", "recall")
            if result[op].startswith("UNTYPED")
        )
        if report["ok"] and set(result.get("changed", [])) - {"emb"} and offset >= 2 * PAGE:
            failures.append(f"{offset}: verify says ok but {result['changed']} changed")
    invisible = sum(1 for v in verdicts.values() if v["report"] and v["report"]["ok"])
    print(f"{len(offsets)} offsets: {invisible} invisible, {len(crashes)} LMDB crashes")
    assert failures == [], "\n".join(failures)


if __name__ == "__main__":  # a sweep worker: base, work, offsets...
    _worker(Path(sys.argv[1]), Path(sys.argv[2]), [int(o) for o in sys.argv[3:]])
