"""Forged journals: well formed, canonically encoded and consistently hashed, but meaning
something the library never writes (see ``tests/forge.py``).

Every Merkle table and snapshot of a forged store agrees with its journal, so no hash can
catch the forgery: only replaying the journal through ``core.journal.apply`` can. Each
forgery must be refused by ``rebuild`` (a ``ReplayError`` naming the entry's seq, the
store left as it was), by ``cortexgraph.verify`` and by ``cortexgraph verify`` (the seq as
``first_bad_seq``). The last tests pin what replay accepts on purpose: ``at`` out of
order, reads of forgotten memories, and a journal that is forged but means something the
API could have written, which the OverallRoot tells apart only when it is pinned.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from cortexgraph.cli import main
from cortexgraph.core.body import encode_body
from cortexgraph.core.codec import encode
from cortexgraph.core.journal import Identity, apply, decode_entry, memory_id
from cortexgraph.core.taxonomy import WEIGHT_COUNT, WEIGHT_TOTAL
from cortexgraph.errors import CorruptionError
from cortexgraph.merkle import verify_memory_proof
from cortexgraph.replay import ReplayError
from forge import ACTOR, HASH, Honest, Journal, forge_store, honest_journal

MISSING = bytes(range(16))  # the id of no memory in the honest history


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Honest:
    return honest_journal(tmp_path_factory.mktemp("honest"))


def _edit(h: Honest, seq: int, /, **fields: Any) -> Journal:
    """The honest journal with the entry at ``seq`` changed (a field set to None is
    removed)."""
    journal = list(h.journal)
    entry = h.entry(seq)
    entry.update(fields)
    journal[seq - 1] = {k: v for k, v in entry.items() if v is not None}
    return journal


def _then(h: Honest, op: str, /, **fields: Any) -> Journal:
    """The honest journal with one more entry (in ``default`` unless ``ns`` is given)."""
    seq = len(h.journal) + 1
    entry = {"v": 1, "seq": seq, "at": h.journal[-1]["at"] + 1000, "op": op, "ns": "default"}
    return [*h.journal, {**entry, **fields}]


def _body(h: Honest, memory: bytes) -> Any:
    return h.journal[h.seq_of("write", memory) - 1]["body"]


def _edge(h: Honest, src: bytes, dst: bytes, **fields: Any) -> dict[str, Any]:
    base = {"src": src, "dst": dst, "rel": "relates_to", "strength": 1_000_000}
    return {**base, "status": "active", "origin": "system", **fields}


#: name -> (the forged journal and its keys, the seq replay must name, what it must say)
Forgery = Callable[[Honest], tuple[Journal, list[int] | None]]
FORGERIES: dict[str, tuple[Forgery, int, str]] = {
    # a write whose id is not H(actor | ns | seq | body)
    "write with a wrong id": (
        lambda h: (_edit(h, 3, id=h.c[:-1] + bytes([h.c[-1] ^ 1])), None),
        3,
        "id that does not match",
    ),
    "write with the id of another seq": (
        lambda h: (_edit(h, 3, seq=3, id=h.a), None),
        3,
        "id that does not match",
    ),
    # every change after a tombstone (b is tombstoned at seq 9)
    "update after a tombstone": (
        lambda h: (_then(h, "update", id=h.b, version=2, body=_body(h, h.b)), None),
        10,
        "changes a tombstoned memory",
    ),
    "head move after a tombstone": (
        lambda h: (_then(h, "head", id=h.b, version=1), None),
        10,
        "changes a tombstoned memory",
    ),
    "status after a tombstone": (
        lambda h: (_then(h, "status", id=h.b, status="archived"), None),
        10,
        "changes a tombstoned memory",
    ),
    "second tombstone": (
        lambda h: (_then(h, "tombstone", id=h.b), None),
        10,
        "changes a tombstoned memory",
    ),
    "edge to a tombstoned memory": (
        lambda h: (_then(h, "edge", **_edge(h, h.a, h.b, status="suggested")), None),
        10,
        "links a tombstoned memory",
    ),
    "edge from a tombstoned memory": (
        lambda h: (_then(h, "edge", **_edge(h, h.b, h.a)), None),
        10,
        "links a tombstoned memory",
    ),
    "unedge of a tombstoned memory": (
        lambda h: (_then(h, "unedge", src=h.a, dst=h.b, rel="relates_to"), None),
        10,
        "links a tombstoned memory",
    ),
    # versions out of sequence (a's update at seq 4 makes version 2)
    "update that skips a version": (
        lambda h: (_edit(h, 4, version=3), None),
        4,
        "is not the next version",
    ),
    "update that repeats a version": (
        lambda h: (_edit(h, 4, version=1), None),
        4,
        "is not the next version",
    ),
    "update that changes the type": (
        lambda h: (_edit(h, 4, body=_body(h, h.b)), None),
        4,
        "is not the next version",
    ),
    "head move to a version that does not exist": (
        lambda h: (_edit(h, 5, version=3), None),
        5,
        "moves the head to a bad version",
    ),
    "head move to the head": (
        lambda h: (_edit(h, 5, version=2), None),
        5,
        "moves the head to a bad version",
    ),
    # edges that cannot exist
    "edge to a missing memory": (
        lambda h: (_edit(h, 6, dst=MISSING), None),
        6,
        "names an unknown memory",
    ),
    "edge from a missing memory": (
        lambda h: (_edit(h, 6, src=MISSING), None),
        6,
        "names an unknown memory",
    ),
    "edge of a memory to itself": (
        lambda h: (_edit(h, 6, dst=h.a), None),
        6,
        "links a memory to itself",
    ),
    "unedge of an edge that does not exist": (
        lambda h: (_then(h, "unedge", src=h.a, dst=h.c, rel="relates_to"), None),
        10,
        "removes an edge that does not exist",
    ),
    "supersedes edge not made by a human": (
        lambda h: (_edit(h, 6, rel="supersedes"), None),
        6,
        "supersedes needs origin human",
    ),
    "edge with a memory's status": (
        lambda h: (_edit(h, 6, status="archived"), None),
        6,
        "bad status",
    ),
    "status that is an edge's": (
        lambda h: (_then(h, "status", id=h.a, status="suggested"), None),
        10,
        "bad status",
    ),
    "status move the lifecycle never makes": (
        lambda h: (_then(h, "status", id=h.a, status="pruned"), None),
        10,
        "moves a memory from active to pruned",
    ),
    # entries that name a memory of another namespace (c lives in "other")
    "update in the wrong namespace": (
        lambda h: (_edit(h, 4, ns="other"), None),
        4,
        "wrong namespace",
    ),
    "edge whose source is in another namespace": (
        lambda h: (_edit(h, 6, ns="other"), None),
        6,
        "wrong namespace",
    ),
    "tombstone in the wrong namespace": (
        lambda h: (_edit(h, 9, ns="other"), None),
        9,
        "wrong namespace",
    ),
    "access in the wrong namespace": (
        lambda h: (_then(h, "access", ids=[h.c]), None),
        10,
        "accesses an unknown memory",
    ),
    "access of a missing memory": (
        lambda h: (_then(h, "access", ids=[MISSING]), None),
        10,
        "accesses an unknown memory",
    ),
    # seqs that are not dense from 1
    "duplicate seq (an entry stored twice)": (
        lambda h: ([*h.journal[:5], h.journal[4], *h.journal[5:]], None),
        6,
        "says seq 5",
    ),
    "duplicate seq (an entry renumbered)": (
        lambda h: (_edit(h, 7, seq=6), None),
        7,
        "says seq 6",
    ),
    "missing seq": (
        lambda h: (h.journal[:4] + h.journal[5:], [1, 2, 3, 4, 6, 7, 8, 9]),
        5,
        "journal entry 5 is missing",
    ),
    "first seq not 1": (
        lambda h: ([{**e, "seq": e["seq"] + 1} for e in h.journal[:2]], [2, 3]),
        1,
        "journal entry 1 is missing",
    ),
    # unknown ops and fields
    "unknown op": (
        lambda h: (_then(h, "merge", id=h.a), None),
        10,
        "unknown op 'merge'",
    ),
    "unknown field": (
        lambda h: (_edit(h, 9, note="forged"), None),
        9,
        "missing or extra fields",
    ),
    "missing field": (
        lambda h: (_edit(h, 6, origin=None), None),
        6,
        "missing or extra fields",
    ),
    "unknown entry version": (
        lambda h: (_edit(h, 2, v=2), None),
        2,
        "unknown format version 2",
    ),
}


def _forged(tmp_path: Path, h: Honest, name: str) -> Path:
    journal, keys = FORGERIES[name][0](h)
    last = len(journal) if keys is None else keys[-1]
    return forge_store(tmp_path / "forged", journal, keys=keys, snapshots=(1, last))


@pytest.mark.parametrize("name", list(FORGERIES))
def test_rebuild_refuses_a_forged_journal_naming_the_entry(
    tmp_path: Path, honest: Honest, name: str
) -> None:
    """``rebuild`` of a forged store raises ``ReplayError`` whose ``seq`` is the forged
    entry and whose message names that entry and what is wrong; the store is unchanged."""
    _, seq, says = FORGERIES[name]
    root = _forged(tmp_path, honest, name)
    with cg.open(root, ACTOR, sync=False) as cx:
        before = cx.table_digests()
        with pytest.raises(ReplayError) as caught:
            cx.rebuild()
        assert cx.table_digests() == before
    assert caught.value.seq == seq
    assert f"journal entry {seq}" in str(caught.value)
    assert says in str(caught.value)


@pytest.mark.parametrize("name", list(FORGERIES))
def test_verify_refuses_a_forged_journal_naming_the_entry(
    tmp_path: Path, honest: Honest, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cortexgraph.verify`` and ``cortexgraph verify --json`` report a forged store as
    not ok, with the forged entry as the first bad seq and a problem that names it, though
    every MMR leaf, the SMT and each snapshot agree with the forged journal."""
    _, seq, says = FORGERIES[name]
    root = _forged(tmp_path, honest, name)
    report = cg.verify(root, ACTOR).actors[0]
    assert (report.ok, report.first_bad_seq) == (False, seq)
    assert any(f"journal entry {seq}" in p and says in p for p in report.problems)
    assert not any("MMR leaf" in p for p in report.problems)  # the hashes are consistent
    capsys.readouterr()
    code = main(["verify", str(root), "--json", "--no-progress"])
    cli = json.loads(capsys.readouterr().out)
    assert (code, cli["ok"], cli["actors"][0]["first_bad_seq"]) == (1, False, seq)


def test_the_forger_alone_changes_nothing(tmp_path: Path, honest: Honest) -> None:
    """The control for every forgery: the honest journal, written by the forger, gives a
    store that verifies, with its snapshots, and has the honest store's OverallRoot. So
    what the tests above find is the forgery, not the forger."""
    root = forge_store(tmp_path, honest.journal, snapshots=(1, 4, 9))
    report = cg.verify(root, ACTOR).actors[0]
    assert (report.ok, report.snapshots_checked, report.problems) == (True, 3, ())
    with cg.open(root, ACTOR, readonly=True) as cx:
        assert cx.overall_root() == honest.root


def test_a_wrong_id_also_fails_its_proof(tmp_path: Path, honest: Honest) -> None:
    """Reads trust the derived tables, so a forged store reads as its forger made it; but
    a proof of a memory whose id is not ``H(actor | ns | seq | body)`` does not verify,
    even against the forged store's own root: the verifier recomputes the id."""
    forged_id = honest.c[:-1] + bytes([honest.c[-1] ^ 1])
    journal = _edit(honest, 3, id=forged_id)[:3]  # nothing later names c
    root = forge_store(tmp_path, journal)
    with cg.open(root, ACTOR, readonly=True) as cx:
        uri = cg.MemoryURI(ACTOR, "other", forged_id)
        assert cx.resolve(uri).memory.text == "The staging host is blue"
        assert not verify_memory_proof(cx.prove(uri), cx.overall_root())
        honest_uri = cx.prove(cg.MemoryURI(ACTOR, "default", honest.a))
        assert verify_memory_proof(honest_uri, cx.overall_root())


def test_at_out_of_order_is_accepted(tmp_path: Path, honest: Honest) -> None:
    """``at`` is the caller's claim (every verb takes ``at=``), not an order the journal
    keeps: the API writes entries dated earlier than the ones before them, and a journal
    whose dates go backwards replays and verifies."""
    with cg.open(tmp_path / "api", ACTOR, sync=False) as cx:
        later = cx.write(cg.Fact(text="written first, dated later"), at=2_000)
        cx.write(cg.Fact(text="written second, dated earlier"), at=1_000)
        cx.update(later, text="revised, dated earliest", at=500)
        assert cx.rebuild() == 3
    assert cg.verify(tmp_path / "api").ok
    backwards = [{**e, "at": 10**6 - 1000 * e["seq"]} for e in honest.journal]
    root = forge_store(tmp_path / "forged", backwards, snapshots=(9,))
    assert cg.verify(root, ACTOR).ok


def test_an_access_after_a_tombstone_is_accepted(tmp_path: Path, honest: Honest) -> None:
    """A read is journaled after it returned (``find``/``recall`` with late binding), so
    a tombstone committed in between comes first: an ``access`` of a tombstoned memory is
    a journal the API can write, and it replays."""
    root = forge_store(tmp_path, _then(honest, "access", ids=sorted([honest.a, honest.b])))
    assert cg.verify(root, ACTOR).ok


def _valid_forgery(h: Honest) -> Journal:
    """The honest journal with c's text changed and its id recomputed, and the entries
    that name c made to name the new id: a journal the API could have written."""
    body = {**_body(h, h.c), "text": "The staging host is green"}
    new_id = memory_id(Identity(ACTOR, HASH), "other", 3, encode(body))
    journal = _edit(h, 3, body=body, id=new_id)
    return [{**e, "dst": new_id} if e.get("dst") == h.c else e for e in journal]


def test_a_meaningful_forgery_verifies_and_only_a_pinned_root_tells(
    tmp_path: Path, honest: Honest
) -> None:
    """What the OverallRoot guarantees: a store whose journal was rewritten into another
    journal the API could have written (ids recomputed, every table re-derived) verifies,
    because verify checks that a store is consistent with its own journal, not who wrote
    the journal. Only a root pinned from the honest store tells them apart."""
    root = forge_store(tmp_path, _valid_forgery(honest), snapshots=(9,))
    assert cg.verify(root, ACTOR).ok
    with cg.open(root, ACTOR, readonly=True) as cx:
        assert cx.overall_root() != honest.root


def test_learned_weights_are_not_checked_by_replay(tmp_path: Path, honest: Honest) -> None:
    """Replay keeps the journal's state rules, not the verbs' policies: the API writes a
    ``LearnWeights`` only after an ``Attest``, with the weights learned from it, but a
    journal holding a bare ``LearnWeights`` with any weights replays and verifies (the
    pinned root is what rules such a journal out)."""
    weights = [WEIGHT_TOTAL - (WEIGHT_COUNT - 1)] + [1] * (WEIGHT_COUNT - 1)
    body, body_bytes = encode_body(cg.LearnWeights(weights=weights))
    seq = len(honest.journal) + 1
    wid = memory_id(Identity(ACTOR, HASH), "default", seq, body_bytes)
    root = forge_store(tmp_path, _then(honest, "write", id=wid, body=body))
    assert cg.verify(root, ACTOR).ok
    with cg.open(root, ACTOR, readonly=True) as cx:
        assert cx.weights() == tuple(weights)


def test_apply_refuses_a_write_of_an_existing_memory(honest: Honest) -> None:
    """Replay cannot reach this check (a write's id hashes its own seq, so the id check
    refuses a repeated id first), but writers call ``apply`` with ``trusted=True`` and
    skip the id check: a write whose id is taken must still be refused, naming the entry,
    rather than overwrite the memory's head."""
    tables: dict[tuple[str, bytes], bytes] = {}

    class View:
        def get(self, table: str, key: bytes) -> bytes | None:
            return tables.get((table, key))

    identity = Identity(ACTOR, HASH)
    first = decode_entry(encode(honest.entry(1)))
    for table, key, value in apply(identity, first, View(), trusted=True):
        assert value is not None
        tables[table, key] = value
    again = decode_entry(encode({**honest.entry(1), "seq": 10}))
    with pytest.raises(CorruptionError, match="journal entry 10 writes an existing memory"):
        apply(identity, again, View(), trusted=True)
