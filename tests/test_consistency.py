"""Consistency proofs in the public API: a client that trusts one OverallRoot accepts a
newer one only with a proof that the newer journal extends the older."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.codec import encode
from cortexgraph.core.consistency import ConsistencyProof
from cortexgraph.core.roots import overall_root
from cortexgraph.merkle import MMR

T0 = 1_700_000_000_000
VECTORS = Path(__file__).resolve().parent.parent / "fixtures" / "vectors"


def _fill(cx: cg.Cortex, texts: list[str], at: int = T0) -> None:
    for i, text in enumerate(texts):
        cx.write(cg.Fact(text=text, tags=["t"]), at=at + i)


def test_public_verifier_accepts_the_rfc6962_consistency_vectors() -> None:
    """Every RFC 6962 consistency vector of fixtures/vectors (independent known answers,
    computed from Certificate Transparency's test leaves), carried in a ConsistencyProof
    whose OverallRoots are made of the vector's MMR roots, verifies with
    cg.verify_consistency; our MMR produces exactly the vector's path; and the same
    proof with its roots swapped does not verify."""
    vectors = json.loads((VECTORS / "mmr_sha256.json").read_text())
    roots = {r["size"]: bytes.fromhex(r["root"]) for r in vectors["roots"]}
    mmr = MMR("sha256")
    for leaf in vectors["leaves"]:
        mmr.append(bytes.fromhex(leaf))
    smt_old, smt_new = b"\x11" * 32, b"\x22" * 32
    assert vectors["consistency"]
    for v in vectors["consistency"]:
        old, new = v["old_size"], v["new_size"]
        path = tuple(bytes.fromhex(p) for p in v["proof"])
        assert tuple(mmr.consistency_proof(old, new)) == path
        proof = ConsistencyProof("sha256", old, roots[old], smt_old, new, roots[new], smt_new, path)
        r1 = overall_root("sha256", old, roots[old], smt_old)
        r2 = overall_root("sha256", new, roots[new], smt_new)
        assert cg.verify_consistency(proof, old_root=r1, new_root=r2)
        assert not cg.verify_consistency(proof, old_root=r2, new_root=r1)


def test_a_client_accepts_a_newer_root_only_with_a_valid_proof(tmp_path: Path) -> None:
    """A proof from a store verifies from the root the client held to the store's new
    root, and not to or from any other root: not the reverse direction, not a third
    root, not a root of a forked history (same length, one entry different)."""
    with cg.open(tmp_path, "agent", hash_name="sha256") as cx:
        _fill(cx, ["one", "two", "three"])
        r1, s1 = cx.overall_root(), cx.seq
        _fill(cx, ["four", "five", "six", "seven"], at=T0 + 10)
        r2 = cx.overall_root()
        proof = cx.prove_consistency(s1)
    with cg.open(tmp_path, "fork", hash_name="sha256") as other:
        _fill(other, ["one", "two", "THREE"])
        forked = other.overall_root()
    assert (proof.old_size, proof.new_size) == (s1, 7)
    assert cg.verify_consistency(proof, old_root=r1, new_root=r2)
    assert not cg.verify_consistency(proof, old_root=r2, new_root=r1)
    assert not cg.verify_consistency(proof, old_root=forked, new_root=r2)
    assert not cg.verify_consistency(proof, old_root=r1, new_root=forked)
    for junk in (None, b"", "r1", r1[:31]):
        assert not cg.verify_consistency(proof, old_root=junk, new_root=r2)
    assert not cg.verify_consistency(proof.to_map(), old_root=r1, new_root=r2)


def test_every_single_bit_flip_of_a_proof_is_rejected(tmp_path: Path) -> None:
    """Flipping any one bit of the proof's canonical CBOR form (ConsistencyProof.encode)
    gives bytes that either no longer read as a proof (VerificationError, never another
    error) or read as one that does not verify from r1 to r2."""
    with cg.open(tmp_path, "agent", hash_name="blake3") as cx:
        _fill(cx, [f"memory {i}" for i in range(5)])
        r1, s1 = cx.overall_root(), cx.seq
        _fill(cx, [f"later {i}" for i in range(8)], at=T0 + 100)
        r2 = cx.overall_root()
        proof = cx.prove_consistency(s1)
    data = proof.encode()
    assert data == encode(proof.to_map()) and len(proof.path) >= 3
    assert ConsistencyProof.decode(data) == proof
    assert cg.verify_consistency(ConsistencyProof.decode(data), old_root=r1, new_root=r2)
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        try:
            candidate = ConsistencyProof.decode(bytes(flipped))
        except cg.VerificationError:
            continue
        assert not cg.verify_consistency(candidate, old_root=r1, new_root=r2), bit


def test_the_past_smt_root_from_a_snapshot_equals_the_replayed_one(tmp_path: Path) -> None:
    """prove_consistency takes the old state's SMT root from the snapshot stored at that
    seq, or replays the journal prefix when there is none: a store with a snapshot at
    seq 2 and a copy of its journal without snapshots give identical proofs, and so do
    proofs between two past seqs."""
    with cg.open(tmp_path / "a", "agent") as cx:
        _fill(cx, ["alpha", "beta"])
        manifest = cx.snapshot(at=T0)
        first = next(iter(cx.journal(0)))
        cx.update(cx.resolve(first.memory_id).uri, text="ALPHA", at=T0 + 5)
        _fill(cx, ["gamma", "delta"], at=T0 + 6)
        cx.snapshot(at=T0 + 9)
        _fill(cx, ["epsilon"], at=T0 + 20)
        entries = list(cx.journal_bytes(0))
        from_snapshots = [cx.prove_consistency(2), cx.prove_consistency(2, 5)]
    with cg.open(tmp_path / "b", "agent") as copy:
        copy.append_entries(entries)
        assert copy.snapshots() == []
        replayed = [copy.prove_consistency(2), copy.prove_consistency(2, 5)]
    assert from_snapshots[0].old_smt_root == manifest.smt_root
    assert replayed == from_snapshots
    for proof in replayed:
        assert cg.verify_consistency(proof, old_root=proof.old_root, new_root=proof.new_root)


def test_prove_consistency_rejects_bad_seqs(cx: cg.Cortex) -> None:
    """Seqs outside 0 <= old <= new <= seq, or not integers, are ValidationErrors naming
    the argument, and the empty and equal cases give empty proofs that verify."""
    _fill(cx, ["a", "b", "c"])
    for old, new, field in ((4, None, "old_seq"), (2, 1, "old_seq"), (0, 4, "new_seq"),
                            (-1, None, "old_seq"), (True, None, "old_seq"), (1, 2.0, "new_seq")):
        with pytest.raises(cg.ValidationError) as info:
            cx.prove_consistency(old, new)  # type: ignore[arg-type]
        assert info.value.field == field
    same = cx.prove_consistency(3, 3)
    assert same.path == () and cg.verify_consistency(
        same, old_root=cx.overall_root(), new_root=cx.overall_root())
    empty = cx.prove_consistency(0)
    assert cg.verify_consistency(empty, old_root=empty.old_root, new_root=cx.overall_root())


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, bytes]]:
    """A store of 24 entries of every kind (writes, updates, edges, a tombstone), with a
    snapshot after each, so the root at every seq is known."""
    root = tmp_path_factory.mktemp("history")
    roots: dict[int, bytes] = {}
    with cg.open(root, "agent", clock=cg.ManualClock(T0), sync=False) as cx:
        uris = []
        for step in range(24):
            kind = step % 4
            if kind == 0 or len(uris) < 2:
                uris.append(cx.write(cg.Fact(text=f"fact {step}", tags=["t"])))
            elif kind == 1:
                uris[-1] = cx.update(uris[-1], text=f"fact {step}, revised")
            elif kind == 2:
                cx.add_edge(uris[-1], uris[-2], "relates_to")
            elif step == 23:
                cx.tombstone(uris[0], reason="obsolete")
            else:
                uris.append(cx.write(cg.Preference(text=f"preference {step}")))
            roots[cx.seq] = cx.snapshot().overall_root
    return root, roots


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_proof_links_exactly_its_two_roots(
    history: tuple[Path, dict[int, bytes]], data: st.DataObject
) -> None:
    """For any 0 < old <= new <= 24, prove_consistency(old, new) verifies from the root
    snapshotted at old to the one at new, and from no other old root to that new root."""
    root, roots = history
    new = data.draw(st.integers(1, 24))
    old = data.draw(st.integers(1, new))
    other = data.draw(st.integers(1, 24).filter(lambda s: s != old))
    with cg.open(root, "agent", readonly=True) as cx:
        proof = cx.prove_consistency(old, new)
    assert cg.verify_consistency(proof, old_root=roots[old], new_root=roots[new])
    assert not cg.verify_consistency(proof, old_root=roots[other], new_root=roots[new])
