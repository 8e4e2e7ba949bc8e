"""Replay: rebuild == incremental (J4, M9), and ``verify`` finds what was changed (M10).

Tampering is done the way an attacker or a bad disk would: on a copy of a healthy store,
with raw py-lmdb, underneath the library. ``verify`` must then report ``ok = False``, name
the first diverging seq for a changed journal entry or snapshot, and name the derived
table that no longer matches a rebuild.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import cbor2
import lmdb
import pytest

import cortexgraph as cg
from cortexgraph.cli import main
from cortexgraph.core.commitments import empty_roots
from cortexgraph.replay import drop_derived
from cortexgraph.store.env import DERIVED_TABLES

ACTOR = "agent"
T0 = 1_700_000_000_000
NAMESPACES = ("default", "work", "personal.notes", "a-b_c")
FLIPS = 60  # journal bit flips checked (the project requires at least 50)


def _memories() -> list[cg.Memory]:
    """One memory of each of the seven types an agent writes (``attest`` writes the other
    two)."""
    return [
        cg.Goal(text="Ship the verifier 🧠", status="active", priority=9),
        cg.Preference(text="Prefers cafe\u0301-style commits", confidence=0.75, tags=["Style"]),
        cg.Constraint(text="Never push to main (禁止)", pinned=True),
        cg.Fact(text="Deploys go through CI", tags=["deploy", "ci"]),
        cg.Pattern(text="Retry with jittered backoff", tags=["net"]),
        cg.Event(text="CI went green", channel="#ci", occurred_at=T0 - 5000),
        cg.ArtifactRef(text="The greeting helper", path="src/greet.py", content="print('hi')\n"),
    ]


def build_store(root: Path, *, hash_name: str = "blake3", seed: int = 7) -> cg.Cortex:
    """A store of about 60 entries: every memory type in four namespaces, updates, head
    moves, tombstones, batches (one rolled back) and five snapshots. Returned open."""
    rng = random.Random(seed)
    cx = cg.open(root, ACTOR, clock=cg.ManualClock(T0), sync=False, hash_name=hash_name)
    ticks = iter(range(T0, T0 + 10**9, 1000))
    uris = [cx.write(m, ns=NAMESPACES[i % 4], at=next(ticks)) for i, m in enumerate(_memories())]
    uris.append(cx.attest([uris[3], uris[0]], outcome="success", ns="a-b_c", at=next(ticks)).attest)
    cx.snapshot(at=next(ticks))
    with cx.batch() as b:
        uris.append(
            b.write(cg.Fact(text="batch fact ä", tags=["batch"]), ns="work", at=next(ticks))
        )
        b.update(uris[-1], text="batch fact ä, revised", at=next(ticks))
        b.update(uris[3], text="Deploys go through the CI pipeline", at=next(ticks))
        b.update_head(uris[3], version=1, at=next(ticks))
    try:
        with cx.batch() as b:
            b.write(cg.Fact(text="never committed"), at=next(ticks))
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    dead: set[int] = set()
    for i in range(40):
        roll = rng.random()
        live = [n for n in range(len(uris)) if n not in dead]
        pick = uris[rng.choice(live)]
        if roll < 0.35:
            memory = cg.Fact(text=f"fact {i} — ü", tags=[f"t{i % 3}", "Bulk"])
            uris.append(cx.write(memory, ns=rng.choice(NAMESPACES), at=next(ticks)))
        elif roll < 0.75:
            cx.update(pick, text=f"revision {i} 🚀", priority=rng.randint(1, 10), at=next(ticks))
        elif roll < 0.88:
            latest = cx.resolve(pick.head).latest
            cx.update_head(pick, version=rng.randint(1, latest), at=next(ticks))
        else:
            cx.tombstone(pick, reason=f"retired {i}", at=next(ticks))
            dead.add(uris.index(pick))
        if i % 10 == 9:
            cx.snapshot(at=next(ticks))
    return cx


@attrs.frozen
class Pristine:
    """A healthy store (closed) and what it held."""

    root: Path
    entries: dict[int, bytes]
    snapshots: tuple[int, ...]
    overall_root: bytes
    digests: dict[str, str]

    def copy(self, dest: Path) -> Path:
        """Copy the store's environment to ``dest/<actor>``; return ``dest``."""
        shutil.copytree(self.root / ACTOR, dest / ACTOR)
        return dest


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    """One healthy store per module; tests tamper with copies of it."""
    root = tmp_path_factory.mktemp("pristine")
    with build_store(root) as cx:
        return Pristine(
            root=root,
            entries=dict(cx.journal_bytes()),
            snapshots=tuple(m.seq for m in cx.snapshots()),
            overall_root=cx.overall_root(),
            digests=cx.table_digests(),
        )


@contextmanager
def raw_table(root: Path, table: str) -> Iterator[Any]:
    """A raw py-lmdb write transaction on ``table`` of the actor's environment."""
    env = lmdb.open(str(root / ACTOR), max_dbs=32)
    try:
        db = env.open_db(table.encode(), create=False)
        with env.begin(write=True, db=db) as txn:
            yield txn
    finally:
        env.close()


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "big")


def _only_actor(report: cg.VerifyReport) -> cg.ActorReport:
    (actor,) = report.actors
    return actor


# ---------------------------------------------------------------------------
# rebuild


def test_the_workload_is_mixed(pristine: Pristine) -> None:
    """The store the other tests use has every op, several namespaces and snapshots, and
    about 60 entries, so the checks below are not vacuous."""
    ops = {cbor2.loads(data)["op"] for data in pristine.entries.values()}
    namespaces = {cbor2.loads(data)["ns"] for data in pristine.entries.values()}

    assert {"write", "update", "head", "tombstone"} == ops
    assert set(NAMESPACES) == namespaces
    assert 50 <= len(pristine.entries) <= 70
    assert len(pristine.snapshots) == 5


def test_rebuild_equals_incremental(tmp_path: Path) -> None:
    """After a mixed workload, ``rebuild`` leaves every table and the OverallRoot exactly as
    the incremental writes left them (J4, M9), and returns the number of entries; a
    second rebuild changes nothing either."""
    with build_store(tmp_path) as cx:
        digests, root, seq = cx.table_digests(), cx.overall_root(), cx.seq

        assert seq == cx.rebuild()
        assert (digests, root) == (cx.table_digests(), cx.overall_root())
        assert seq == cx.rebuild()
        assert (digests, root) == (cx.table_digests(), cx.overall_root())


def test_drop_derived_then_rebuild_restores_everything(tmp_path: Path) -> None:
    """``drop_derived`` empties exactly the derived tables (journal, snapshots and meta are
    untouched, memories stop resolving); ``rebuild`` then restores every table and the
    OverallRoot byte for byte, also across a reopen in between."""
    with build_store(tmp_path) as cx:
        digests, root, seq = cx.table_digests(), cx.overall_root(), cx.seq
        some = next(cx.journal()).fields["id"]
        drop_derived(cx._handle)
    empty = cg.open(tmp_path / "empty", ACTOR, sync=False)
    with empty:
        empty_digest = empty.table_digests()["heads"]
    with cg.open(tmp_path, ACTOR, sync=False) as cx:
        dropped = cx.table_digests()

        assert all(dropped[t] == digests[t] for t in ("journal", "snapshots", "meta"))
        assert all(dropped[t] == empty_digest for t in DERIVED_TABLES)
        changed = ("heads", "versions", "salience", "mmr", "smt")
        assert all(dropped[t] != digests[t] for t in changed)
        assert seq == cx.seq
        assert not cx.exists(some.hex())
        assert seq == cx.rebuild()
        assert (digests, root) == (cx.table_digests(), cx.overall_root())


def test_rebuild_of_an_empty_store(cx: cg.Cortex) -> None:
    """Rebuilding a store with an empty journal replays nothing, changes no table, and
    leaves the OverallRoot of an empty store."""
    digests = cx.table_digests()

    assert cx.rebuild() == 0
    assert digests == cx.table_digests()
    assert empty_roots(cx.hash_name)[2] == cx.overall_root()


def test_rebuild_reports_progress_and_refuses_inside_a_batch(cx: cg.Cortex) -> None:
    """``rebuild(progress=...)`` ends with (entries, entries); inside a batch it raises
    instead of dropping tables under the batch's feet, and the batch still commits."""
    for i in range(5):
        cx.write(cg.Fact(text=f"fact {i}"), at=T0 + i)
    calls: list[tuple[int, int]] = []

    assert cx.rebuild(progress=lambda done, total: calls.append((done, total))) == 5
    assert calls[-1] == (5, 5)
    with cx.batch() as b:
        b.write(cg.Fact(text="in a batch"), at=T0 + 9)
        with pytest.raises(cg.CortexError, match="inside a batch"):
            cx.rebuild()
    assert cx.seq == 6


# ---------------------------------------------------------------------------
# verify: healthy stores


@pytest.mark.parametrize("hash_name", ["blake3", "sha256"])
def test_verify_passes_on_a_healthy_store(tmp_path: Path, hash_name: str) -> None:
    """A healthy store verifies: ok, no problems, every stored snapshot checked, every
    derived table matching, the stored root equal to the rebuilt one and to
    ``overall_root()``; verifying changes nothing in the store."""
    with build_store(tmp_path, hash_name=hash_name) as cx:
        root, seq, snapshots, digests = (
            cx.overall_root().hex(),
            cx.seq,
            len(cx.snapshots()),
            cx.table_digests(),
        )
    progress: list[tuple[str, int, int]] = []

    report = cg.verify(tmp_path, progress=lambda *call: progress.append(call))

    actor = _only_actor(report)
    assert report.ok and actor.ok
    assert actor.problems == ()
    assert (ACTOR, seq, None) == (actor.actor, actor.entries, actor.first_bad_seq)
    assert report.first_bad_seq is None
    assert snapshots == actor.snapshots_checked
    assert dict.fromkeys(DERIVED_TABLES, True) == actor.tables
    assert root == actor.stored_root == actor.overall_root
    assert (ACTOR, seq, seq) == progress[-1]
    as_json = json.loads(json.dumps(report.to_dict()))
    assert (True, [], root) == (
        as_json["ok"],
        as_json["actors"][0]["problems"],
        as_json["actors"][0]["overall_root"],
    )
    with cg.open(tmp_path, ACTOR, readonly=True) as cx:
        assert digests == cx.table_digests()


def test_verify_checks_every_actor_or_the_one_named(tmp_path: Path) -> None:
    """Without ``actor``, every store under the root is verified (sorted by name); with
    it, only that one."""
    for name in ("zed", "amy"):
        with cg.open(tmp_path, name, sync=False) as cx:
            cx.write(cg.Fact(text=f"{name}'s fact"), at=T0)

    both = cg.verify(tmp_path)
    one = cg.verify(tmp_path, actor="zed")

    assert [a.actor for a in both.actors] == ["amy", "zed"]
    assert both.ok
    assert [a.actor for a in one.actors] == ["zed"]


# ---------------------------------------------------------------------------
# verify: tampered stores


def _flip_positions(pristine: Pristine) -> list[tuple[int, int, int]]:
    """``FLIPS`` (seq, byte offset, bit) positions from a fixed seed, plus the edges: the
    first and last byte of the first and last entries."""
    rng = random.Random(20_240_501)
    first, last = min(pristine.entries), max(pristine.entries)
    positions = {
        (first, 0, 0),
        (last, 0, 7),
        (first, len(pristine.entries[first]) - 1, 0),
        (last, len(pristine.entries[last]) - 1, 3),
    }
    seqs = sorted(pristine.entries)
    while len(positions) < FLIPS:
        seq = rng.choice(seqs)
        positions.add((seq, rng.randrange(len(pristine.entries[seq])), rng.randrange(8)))
    return sorted(positions)


def test_verify_names_the_seq_of_any_flipped_journal_bit(
    pristine: Pristine, tmp_path: Path
) -> None:
    """Flipping one bit anywhere in any journal entry (60 seeded positions,
    each in a fresh copy of a healthy store) makes ``verify`` fail and report exactly the
    tampered seq as the first diverging one."""
    positions = _flip_positions(pristine)
    missed: list[tuple[Any, ...]] = []
    for n, (seq, offset, bit) in enumerate(positions):
        copy = pristine.copy(tmp_path / f"copy-{n}")
        with raw_table(copy, "journal") as txn:
            value = bytearray(txn.get(_u64(seq)))
            value[offset] ^= 1 << bit
            txn.put(_u64(seq), bytes(value))

        report = cg.verify(copy)

        actor = _only_actor(report)
        if report.ok or report.first_bad_seq != seq or actor.first_bad_seq != seq:
            missed.append((seq, offset, bit, report.ok, actor.first_bad_seq, actor.problems))
        elif not any(str(seq) in problem for problem in actor.problems):
            missed.append((seq, offset, bit, "no problem names the seq", actor.problems))
        shutil.rmtree(copy)

    assert len(positions) >= 50
    assert len({seq for seq, _, _ in positions}) >= 30
    assert missed == []


@pytest.mark.parametrize("where", ["middle", "last"])
def test_verify_fails_when_a_journal_entry_is_missing(
    pristine: Pristine, tmp_path: Path, where: str
) -> None:
    """Deleting one entry (a hole in the seqs, J1, or a lost tail) fails verification."""
    copy = pristine.copy(tmp_path)
    seqs = sorted(pristine.entries)
    missing = seqs[len(seqs) // 2] if where == "middle" else seqs[-1]
    with raw_table(copy, "journal") as txn:
        txn.delete(_u64(missing))

    report = cg.verify(copy)

    assert not report.ok
    assert any(str(missing) in p or "differs" in p for p in _only_actor(report).problems)


def test_verify_names_the_seq_of_a_missing_journal_entry(
    pristine: Pristine, tmp_path: Path
) -> None:
    """A hole in the journal's seqs (J1) is reported with the missing seq as the first
    diverging one, like any other damaged entry."""
    copy = pristine.copy(tmp_path)
    missing = sorted(pristine.entries)[len(pristine.entries) // 2]
    with raw_table(copy, "journal") as txn:
        txn.delete(_u64(missing))

    assert missing == cg.verify(copy).first_bad_seq


def _change(txn: Any, key: bytes) -> None:
    value = bytes(txn.get(key))
    txn.put(key, value[:-1] + bytes([value[-1] ^ 1]) if value else b"\x00")


def _add(txn: Any, key: bytes) -> None:
    txn.put(key + b"\xff", bytes(txn.get(key)))


def _delete(txn: Any, key: bytes) -> None:
    txn.delete(key)


TAMPERS: dict[str, Callable[[Any, bytes], None]] = {
    "change": _change,
    "add": _add,
    "delete": _delete,
}


@pytest.mark.parametrize("how", sorted(TAMPERS))
@pytest.mark.parametrize("table", ["heads", "versions", "salience", "mmr", "smt"])
def test_verify_names_a_tampered_derived_table(
    pristine: Pristine, tmp_path: Path, table: str, how: str
) -> None:
    """Changing, adding or deleting one key of a derived table (journal untouched) makes
    verify fail, report that table and only that table as differing from a rebuild, and
    name it in a problem."""
    copy = pristine.copy(tmp_path)
    with raw_table(copy, table) as txn:
        keys = [bytes(key) for key, _ in txn.cursor()]
        TAMPERS[how](txn, keys[len(keys) // 2])

    actor = _only_actor(cg.verify(copy))

    assert not actor.ok
    assert {table} == {name for name, same in actor.tables.items() if not same}
    assert any(repr(table) in problem for problem in actor.problems)


@pytest.mark.parametrize("field", ["mmr_root", "smt_root", "overall_root"])
def test_verify_names_the_seq_of_a_tampered_snapshot(
    pristine: Pristine, tmp_path: Path, field: str
) -> None:
    """A snapshot whose root was changed (one bit, re-encoded canonically so it still
    decodes) fails verification with its seq as the first diverging one."""
    copy = pristine.copy(tmp_path)
    seq = pristine.snapshots[2]
    with raw_table(copy, "snapshots") as txn:
        stored = bytes(txn.get(_u64(seq)))
        manifest = cbor2.loads(stored)
        assert stored == cbor2.dumps(manifest, canonical=True)  # the re-encoding is faithful
        manifest[field] = bytes([manifest[field][0] ^ 0x80]) + manifest[field][1:]
        txn.put(_u64(seq), cbor2.dumps(manifest, canonical=True))

    actor = _only_actor(cg.verify(copy))

    assert not actor.ok
    assert seq == actor.first_bad_seq
    assert any(f"snapshot at seq {seq}" in problem for problem in actor.problems)
    assert dict.fromkeys(DERIVED_TABLES, True) == actor.tables


def test_snapshots_catch_a_journal_rewritten_with_every_derived_table(
    pristine: Pristine, tmp_path: Path
) -> None:
    """An entry rewritten canonically (its ``at`` moved) and the whole store rebuilt from
    the forged journal, so that the MMR and every derived table agree with it, still fails
    verification: the first snapshot after the entry no longer matches, and is named."""
    copy = pristine.copy(tmp_path)
    forged = pristine.snapshots[1] - 2
    with raw_table(copy, "journal") as txn:
        entry = cbor2.loads(bytes(txn.get(_u64(forged))))
        entry["at"] += 1
        txn.put(_u64(forged), cbor2.dumps(entry, canonical=True))
    with cg.open(copy, ACTOR, sync=False) as cx:
        cx.rebuild()

    actor = _only_actor(cg.verify(copy))

    assert not actor.ok
    assert pristine.snapshots[1] == actor.first_bad_seq
    assert dict.fromkeys(DERIVED_TABLES, True) == actor.tables
    assert actor.stored_root == actor.overall_root != pristine.overall_root.hex()


# ---------------------------------------------------------------------------
# the command line


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_verify_exit_codes(
    pristine: Pristine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cortexgraph verify`` exits 0 on a healthy store, 1 on a tampered one (its --json
    report parses, with ok false and the diverging seq), 2 when the directory does not
    exist, holds no store, or lacks the named actor."""
    healthy = pristine.copy(tmp_path / "healthy")
    tampered = pristine.copy(tmp_path / "tampered")
    seq = sorted(pristine.entries)[10]
    with raw_table(tampered, "journal") as txn:
        value = bytes(txn.get(_u64(seq)))
        txn.put(_u64(seq), value[:-1] + bytes([value[-1] ^ 1]))
    (tmp_path / "no-store").mkdir()

    code, out, _ = _run(capsys, "verify", str(healthy), "--no-progress")
    assert (code, f"{ACTOR}: ok" in out) == (0, True)
    code, out, _ = _run(capsys, "verify", str(healthy), "--json", "--actor", ACTOR)
    assert (code, json.loads(out)["ok"]) == (0, True)

    code, out, _ = _run(capsys, "verify", str(tampered), "--no-progress")
    assert (code, f"first diverging seq: {seq}" in out) == (1, True)
    code, out, _ = _run(capsys, "verify", str(tampered), "--json", "--no-progress")
    report = json.loads(out)
    assert (1, False, seq) == (code, report["ok"], report["actors"][0]["first_bad_seq"])

    for argv in (
        [str(tmp_path / "missing")],
        [str(tmp_path / "no-store")],
        [str(healthy), "--actor", "nobody"],
    ):
        code, _, err = _run(capsys, "verify", *argv, "--json")
        assert (code, json.loads(err)["error"]) == (2, "NotFoundError"), argv


def test_cli_rebuild_snapshot_and_root(
    pristine: Pristine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rebuild``, ``snapshot`` and ``root`` with --json report the store's OverallRoot;
    rebuild replays every entry without changing a table, and a second snapshot at the
    same seq returns the first."""
    copy = pristine.copy(tmp_path)
    store = ["--root", str(copy), "--actor", ACTOR, "--json"]
    root_hex = pristine.overall_root.hex()
    seq = max(pristine.entries)

    code, out, _ = _run(capsys, "rebuild", *store)
    assert (0, {"entries": seq, "overall_root": root_hex}) == (code, json.loads(out))

    code, out, _ = _run(capsys, "root", *store)
    manifest = json.loads(out)
    assert code == 0
    assert (ACTOR, seq, root_hex, "blake3") == (
        manifest["actor"],
        manifest["seq"],
        manifest["overall_root"],
        manifest["hash_name"],
    )
    assert "at" not in manifest

    with cg.open(copy, ACTOR, sync=False) as cx:
        cx.write(cg.Fact(text="one more"), at=T0)
        new_root = cx.overall_root().hex()
    code, out, _ = _run(capsys, "snapshot", *store)
    first = json.loads(out)
    code_again, out, _ = _run(capsys, "snapshot", *store)
    assert (code, code_again) == (0, 0)
    assert first == json.loads(out)
    assert (seq + 1, new_root) == (first["seq"], first["overall_root"])

    with cg.open(copy, ACTOR, readonly=True) as cx:
        assert pristine.digests["journal"] != cx.table_digests()["journal"]
    assert _run(capsys, "verify", str(copy), "--no-progress")[0] == 0


def test_verify_names_a_lost_last_entry(pristine: Pristine, tmp_path: Path) -> None:
    """Losing the last journal entry is reported with its seq: the store's MMR committed
    more entries than the journal still holds."""
    copy = pristine.copy(tmp_path)
    last = max(pristine.entries)
    with raw_table(copy, "journal") as txn:
        txn.delete(_u64(last))

    report = cg.verify(copy)

    assert not report.ok
    assert report.first_bad_seq == last
