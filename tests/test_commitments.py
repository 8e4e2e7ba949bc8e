"""The OverallRoot and memory proofs (M9-M11).

``overall_root()`` must move with every committed mutation and with nothing else; a
:class:`~cortexgraph.MemoryProof` from ``cx.prove`` must verify against the root it was
taken at and against no other, and any change to any of its fields must make
``verify_memory_proof`` return False — which never raises, whatever it is given.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.commitments import (
    empty_roots,
    head_commitment,
    mmr_mutations,
    smt_mutations,
    verify_memory_proof,
)
from cortexgraph.core.mmr import mmr_append, mmr_leaf_hash
from cortexgraph.core.smt import smt_key
from cortexgraph.core.smt_apply import smt_store_apply
from cortexgraph.core.state import HeadState, VersionState
from cortexgraph.errors import CorruptionError
from cortexgraph.merkle import overall_root

ACTOR = "agent"
T0 = 1_700_000_000_000
BYTES_FIELDS = (
    "head_record",
    "head_version_record",
    "version_record",
    "smt_proof",
    "entry",
    "mmr_root",
    "smt_root",
    "origin_entry",
)


def _check_roots(cx: cg.Cortex) -> bytes:
    """The root three ways: ``overall_root()``, ``roots()`` and the formula of section 6."""
    root = cx.overall_root()
    manifest = cx.roots()
    assert (root, cx.seq, ACTOR, cx.hash_name) == (
        manifest.overall_root,
        manifest.seq,
        manifest.actor,
        manifest.hash_name,
    )
    assert root == overall_root(cx.hash_name, cx.seq, manifest.mmr_root, manifest.smt_root)
    return root


# ---------------------------------------------------------------------------
# the root


def test_the_root_changes_with_every_committed_op(cx: cg.Cortex) -> None:
    """Every committed write, update, head move, tombstone and batch gives a root never
    seen before (a head moved back to an earlier version included: the journal grew), and
    ``overall_root()`` always equals ``roots()`` and the OverallRoot formula."""
    roots = [_check_roots(cx)]
    assert empty_roots(cx.hash_name)[2] == roots[0]

    def committed() -> None:
        roots.append(_check_roots(cx))

    fact = cx.write(cg.Fact(text="deploys go through CI"), at=T0)
    committed()
    goal = cx.write(cg.Goal(text="ship the verifier"), ns="work", at=T0)
    committed()
    cx.update(fact, text="deploys go through Argo", at=T0 + 1)
    committed()
    cx.update_head(fact, version=1, at=T0 + 2)
    committed()
    cx.update_head(fact, version=2, at=T0 + 3)
    committed()
    cx.update(goal, tags=["release"], at=T0 + 4)
    committed()
    cx.tombstone(goal, reason="done", at=T0 + 5)
    committed()
    with cx.batch() as b:
        b.write(cg.Event(text="CI went green"), ns="work", at=T0 + 6)
        b.update(fact, priority=9, at=T0 + 7)
    committed()
    cx.write(cg.Fact(text="deploys go through CI"), at=T0)  # same body, new seq: new memory
    committed()

    assert 10 == len(roots) == len(set(roots))
    assert cx.seq == 10  # the batch journaled two entries


def test_the_root_ignores_what_is_not_committed(cx: cg.Cortex) -> None:
    """A no-op update, a head move to the current head, a rolled-back batch, operations
    that fail, snapshots, a rebuild and a reopen leave the root (and the seq) alone."""
    fact = cx.write(cg.Fact(text="deploys go through CI", tags=["ci"]), at=T0)
    dead = cx.write(cg.Fact(text="retired"), ns="work", at=T0)
    cx.tombstone(dead, at=T0 + 1)
    root, seq = cx.overall_root(), cx.seq

    assert fact == cx.update(fact, text="deploys go through CI", tags=["CI"], at=T0 + 2)
    assert fact == cx.update_head(fact, version=1, at=T0 + 3)
    with pytest.raises(RuntimeError), cx.batch() as b:
        b.write(cg.Fact(text="rolled back"), at=T0 + 4)
        b.update(fact, text="rolled back too", at=T0 + 5)
        raise RuntimeError("roll back")
    with pytest.raises(cg.TombstonedError):
        cx.update(dead, text="too late", at=T0 + 6)
    with pytest.raises(cg.VersionConflictError):
        cx.update(fact, expected_version=2, text="stale", at=T0 + 7)
    with pytest.raises(cg.ValidationError):
        cx.write(cg.Fact(text="bad namespace"), ns="Not Valid", at=T0 + 8)
    cx.snapshot(at=T0 + 9)
    cx.rebuild()

    assert (root, seq) == (cx.overall_root(), cx.seq)
    path = cx.path.parent
    cx.close()
    with cg.open(path, ACTOR, readonly=True) as again:
        assert (root, seq) == (again.overall_root(), again.seq)


def test_snapshots_record_the_root(cx: cg.Cortex) -> None:
    """A snapshot stores the current roots; taking one again at the same seq returns the
    stored manifest (its ``at`` too); ``snapshots()`` lists them oldest first."""
    cx.write(cg.Fact(text="one"), at=T0)
    first = cx.snapshot(at=T0 + 1)
    again = cx.snapshot(at=T0 + 2)
    cx.write(cg.Pattern(text="two"), ns="work", at=T0 + 3)
    second = cx.snapshot(at=T0 + 4)

    assert first == again
    assert (1, T0 + 1, cx.hash_name, ACTOR) == (first.seq, first.at, first.hash_name, first.actor)
    assert first.overall_root != second.overall_root
    assert second.same_roots(cx.roots())
    assert second.overall_root == cx.overall_root()
    assert [first, second] == cx.snapshots()
    assert first == cg.SnapshotManifest.decode(first.encode())


# ---------------------------------------------------------------------------
# proofs


@attrs.frozen
class Store:
    """A store with memories in several namespaces, several versions, a head moved below
    its latest version and a tombstone; and the proofs of every version."""

    cx: cg.Cortex
    root: bytes
    old_root: bytes  # a snapshot's root, taken before the last writes
    memories: tuple[cg.MemoryURI, ...]
    multi: cg.MemoryURI  # four versions, head at 2
    dead: cg.MemoryURI  # tombstoned


def build(root: Path, hash_name: str = "blake3") -> Store:
    cx = cg.open(root, ACTOR, clock=cg.ManualClock(T0), sync=False, hash_name=hash_name)
    memories = [
        cx.write(cg.Fact(text=f"fact {i} — ü", tags=["x"]), ns=ns, at=T0 + i)
        for i, ns in enumerate(["default", "work", "personal.notes", "a-b_c"] * 3)
    ]
    multi, dead = memories[1], memories[2]
    for version in (2, 3, 4):
        cx.update(multi, text=f"fact 1, version {version}", at=T0 + 100 + version)
    cx.update_head(multi, version=2, at=T0 + 200)
    cx.update(dead, text="about to be forgotten", at=T0 + 201)
    old_root = cx.snapshot(at=T0 + 202).overall_root
    cx.tombstone(dead, reason="wrong", at=T0 + 203)
    memories.append(cx.write(cg.Goal(text="late goal"), ns="work", at=T0 + 204))
    return Store(cx, cx.overall_root(), old_root, tuple(memories), multi, dead)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    built = build(tmp_path)
    try:
        yield built
    finally:
        built.cx.close()


def test_proofs_of_every_version_verify(store: Store) -> None:
    """``prove`` of an unpinned URI proves the head; of a pinned URI, that version (older
    ones, versions above a moved-back head, a tombstoned memory's) — in every namespace,
    each verifying against ``overall_root()`` and carrying what it proves."""
    cx = store.cx
    checked = 0
    for uri in store.memories:
        head = cx.resolve(uri.head)
        refs: list[Any] = [uri.head, uri.id_hex]
        refs += [uri.at_version(v) for v in range(1, head.latest + 1)]
        for ref in refs:
            proof = cx.prove(ref)
            version = getattr(ref, "version", None) or head.head
            record = VersionState.decode(proof.version_record)

            assert verify_memory_proof(proof, store.root), ref
            assert uri.at_version(version) == proof.uri
            assert (cx.seq, cx.hash_name) == (proof.journal_size, proof.hash_name)
            assert cx.resolve(uri.at_version(version)).seq == record.seq
            checked += 1

    dead_head = HeadState.decode(cx.prove(store.dead).head_record)
    multi_head = HeadState.decode(cx.prove(store.multi).head_record)
    assert (dead_head.status, dead_head.reason) == ("tombstoned", "wrong")
    assert (multi_head.head, multi_head.latest) == (2, 4)
    assert cx.prove(store.multi.head).uri.version == 2
    # per memory: its head by URI and by id, and each version (multi has 4, dead 2)
    assert checked == 2 * 13 + (11 + 4 + 2)


def test_proofs_fail_against_any_other_root(store: Store) -> None:
    """A proof verifies only against the root it was taken at: not an older snapshot's,
    not another store's; and a proof taken before later writes fails against the new root
    while still verifying against its own."""
    cx = store.cx
    fact = store.memories[0]
    proof = cx.prove(fact)
    cx.write(cg.Fact(text="written after the proof"), at=T0 + 999)
    later = cx.prove(fact)

    assert not verify_memory_proof(proof, store.old_root)
    assert verify_memory_proof(proof, store.root)
    assert not verify_memory_proof(proof, cx.overall_root())
    assert verify_memory_proof(later, cx.overall_root())
    assert not verify_memory_proof(later, store.root)
    assert not verify_memory_proof(proof, bytes(32))
    assert not verify_memory_proof(proof, store.root[:31])


def _flips(value: bytes) -> Iterator[bytes]:
    """``value`` with each of its bits flipped in turn."""
    for i in range(len(value)):
        for bit in range(8):
            changed = bytearray(value)
            changed[i] ^= 1 << bit
            yield bytes(changed)


@pytest.mark.parametrize("which", ["head", "older", "above_head", "tombstoned"])
def test_changing_any_field_of_a_proof_breaks_it(store: Store, which: str) -> None:
    """Every single-bit change of every bytes field and of every MMR proof element, a
    changed journal size, hash name or URI (version, namespace, id), another version's
    record, and a dropped or added MMR proof element each make the proof fail."""
    ref = {
        "head": store.multi.head,
        "older": store.multi.at_version(1),
        "above_head": store.multi.at_version(4),
        "tombstoned": store.dead,
    }[which]
    proof = store.cx.prove(ref)
    root = store.root
    other = store.cx.prove(store.multi.at_version(3 if proof.uri.version != 3 else 1))
    mutants: list[tuple[str, cg.MemoryProof]] = []
    for field in BYTES_FIELDS:
        for changed in _flips(getattr(proof, field)):
            change: dict[str, Any] = {field: changed}
            mutants.append((field, attrs.evolve(proof, **change)))
    for path in ("mmr_proof", "origin_mmr_proof"):
        for k, element in enumerate(getattr(proof, path)):
            for changed in _flips(element):
                elements = list(getattr(proof, path))
                elements[k] = changed
                mutants.append((f"{path}[{k}]", attrs.evolve(proof, **{path: tuple(elements)})))
    uri = proof.uri
    origin = store.cx.prove(store.memories[0].at_version(1)).entry  # another memory's write
    mutants += [
        ("uri actor", attrs.evolve(proof, uri=attrs.evolve(uri, actor="bob"))),
        ("origin_entry of another memory", attrs.evolve(proof, origin_entry=origin)),
        ("origin_entry added", attrs.evolve(proof, origin_entry=proof.entry)),
        ("origin_mmr_proof added", attrs.evolve(proof, origin_mmr_proof=proof.mmr_proof)),
    ]
    if proof.origin_entry:
        mutants += [
            ("origin_entry dropped", attrs.evolve(proof, origin_entry=b"")),
            ("origin_mmr_proof dropped", attrs.evolve(proof, origin_mmr_proof=())),
            ("origin_mmr_proof shortened",
             attrs.evolve(proof, origin_mmr_proof=proof.origin_mmr_proof[:-1])),
        ]
    mutants += [
        ("mmr_proof dropped", attrs.evolve(proof, mmr_proof=proof.mmr_proof[:-1])),
        ("mmr_proof added", attrs.evolve(proof, mmr_proof=(*proof.mmr_proof, bytes(32)))),
        ("mmr_proof first dropped", attrs.evolve(proof, mmr_proof=proof.mmr_proof[1:])),
        ("journal_size + 1", attrs.evolve(proof, journal_size=proof.journal_size + 1)),
        ("journal_size - 1", attrs.evolve(proof, journal_size=proof.journal_size - 1)),
        ("hash_name", attrs.evolve(proof, hash_name="sha256")),
        ("version_record", attrs.evolve(proof, version_record=other.version_record)),
        ("entry", attrs.evolve(proof, entry=other.entry)),
        ("uri version", attrs.evolve(proof, uri=uri.at_version(other.uri.version or 1))),
        ("uri version 5", attrs.evolve(proof, uri=uri.at_version(5))),
        ("uri head", attrs.evolve(proof, uri=uri.head)),
        ("uri ns", attrs.evolve(proof, uri=attrs.evolve(uri, ns="default"))),
        ("uri id", attrs.evolve(proof, uri=attrs.evolve(uri, id=store.memories[0].id))),
    ]

    assert verify_memory_proof(proof, root)
    assert len(proof.mmr_proof) >= 3
    accepted = [name for name, mutant in mutants if verify_memory_proof(mutant, root) is not False]
    assert accepted == []  # each is refused with False itself: the verifier returns a bool


def test_a_proof_names_the_actor_the_root_commits_to(tmp_path: Path) -> None:
    """A proof whose URI names another actor does not verify against the root of this
    actor's store, for version 1 (its write entry) and for later versions (which carry
    the creating write): the id of a memory hashes its actor's name. The same memory
    written by actor ``bob`` (same namespace, seq and body) gets another id, and
    ``bob``'s proof verifies against ``bob``'s root only."""
    proofs = {}
    for actor in ("agent", "bob"):
        with cg.open(tmp_path, actor, clock=cg.ManualClock(T0), sync=False) as cx:
            uri = cx.write(cg.Fact(text="the same fact"), at=T0)
            cx.update(uri, text="the same fact, revised", at=T0 + 1)
            proofs[actor] = (cx.prove(uri), cx.prove(uri.head), cx.overall_root())
    agent_v1, agent_v2, agent_root = proofs["agent"]
    bob_v1, bob_v2, bob_root = proofs["bob"]
    assert agent_v1.uri.id != bob_v1.uri.id
    assert agent_v2.origin_entry == agent_v1.entry and agent_v1.origin_entry == b""
    for proof in (agent_v1, agent_v2):
        assert verify_memory_proof(proof, agent_root)
        as_bob = attrs.evolve(proof, uri=attrs.evolve(proof.uri, actor="bob"))
        assert verify_memory_proof(as_bob, agent_root) is False  # a bool, as documented
    for proof in (bob_v1, bob_v2):
        assert verify_memory_proof(proof, bob_root)
        assert verify_memory_proof(proof, agent_root) is False


def test_the_version_time_of_an_older_version_is_proved(store: Store) -> None:
    """A proof of an older version whose record claims another ``at`` (bytes 9-16 of the
    version record) must not verify: the record's time comes from the journal entry."""
    proof = store.cx.prove(store.multi.at_version(1))
    changed = bytearray(proof.version_record)
    changed[16] ^= 1

    assert not verify_memory_proof(attrs.evolve(proof, version_record=bytes(changed)), store.root)


# ---------------------------------------------------------------------------
# garbage in, False out


_GARBAGE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.binary(max_size=80),
    st.lists(st.binary(max_size=40), max_size=5),
    st.lists(st.binary(min_size=32, max_size=32), max_size=5).map(tuple),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.sampled_from(["blake3", "sha256", "md5", b"blake3", 2**64, -1, 0, ()]),
)
_PROOF_FIELDS = [f.name for f in attrs.fields(cg.MemoryProof)]


def _garbage_uris(uri: cg.MemoryURI) -> st.SearchStrategy[cg.MemoryURI]:
    """URIs built without validation: any part of the real one replaced by garbage."""
    return st.builds(
        cg.MemoryURI.trusted,
        st.one_of(st.just(uri.actor), _GARBAGE),
        st.one_of(st.just(uri.ns), _GARBAGE),
        st.one_of(st.just(uri.id), st.binary(max_size=20), _GARBAGE),
        st.one_of(st.just(uri.version), st.integers(-2, 2**33), _GARBAGE),
    )


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[cg.MemoryProof, bytes]]:
    """One real proof (of an older version) and its root, for the property tests."""
    built = build(tmp_path_factory.mktemp("real"))
    with built.cx:
        yield built.cx.prove(built.multi.at_version(1)), built.root


@given(proof=_GARBAGE, root=_GARBAGE)
def test_verify_never_raises_on_garbage(proof: Any, root: Any) -> None:
    """Anything that is not a MemoryProof and a root gives False, never an exception."""
    assert verify_memory_proof(proof, root) is False


@given(data=st.data())
def test_verify_never_raises_on_a_proof_with_garbage_fields(
    real: tuple[cg.MemoryProof, bytes], data: st.DataObject
) -> None:
    """A real proof with any of its fields replaced by garbage (of any type, or random
    bytes of the right length) gives False, never an exception, whatever the root."""
    proof, root = real
    fields = data.draw(st.sets(st.sampled_from(_PROOF_FIELDS), min_size=1, max_size=3))
    changes: dict[str, Any] = {}
    for name in sorted(fields):
        value = getattr(proof, name)
        if type(value) is bytes:
            options = _GARBAGE | st.binary(min_size=len(value), max_size=len(value))
        elif name == "uri":
            options = _GARBAGE | _garbage_uris(value)
        else:
            options = _GARBAGE
        changes[name] = data.draw(options)
    mutant = attrs.evolve(proof, **changes)
    trusted = data.draw(st.one_of(st.just(root), st.just(mutant.mmr_root), _GARBAGE))

    result = verify_memory_proof(mutant, trusted)

    assert result is False or (mutant == proof and trusted == root)


# ---------------------------------------------------------------------------
# SHA-256 stores


def test_sha256_stores_prove_too_and_commit_differently(tmp_path: Path) -> None:
    """A SHA-256 store built by the same operations has a different root from the BLAKE3
    one; its proofs verify against its own root only, and not as BLAKE3 proofs."""
    sha = build(tmp_path / "sha", hash_name="sha256")
    blake = build(tmp_path / "blake")
    with sha.cx, blake.cx:
        assert (sha.cx.hash_name, blake.cx.hash_name) == ("sha256", "blake3")
        assert sha.root != blake.root
        assert sha.cx.seq == blake.cx.seq
        assert sha.root == _check_roots(sha.cx)
        for uri in (sha.multi.at_version(1), sha.multi.head, sha.dead, sha.memories[-1]):
            proof = sha.cx.prove(uri)

            assert proof.hash_name == "sha256"
            assert verify_memory_proof(proof, sha.root), uri
            assert not verify_memory_proof(proof, blake.root)
            assert not verify_memory_proof(attrs.evolve(proof, hash_name="blake3"), sha.root)


# ---------------------------------------------------------------------------
# the flat write-path helpers against the reference functions


@pytest.mark.parametrize("hash_name", ["blake3", "sha256"])
def test_mmr_mutations_write_what_mmr_append_computes(hash_name: str) -> None:
    """``mmr_mutations`` (written out flat for the write path) puts one row per entry,
    keyed by leaf index, holding exactly the nodes ``core.mmr.mmr_append`` gives, in the
    same order, for 70 appends; a missing or malformed left sibling row is
    ``CorruptionError`` naming that row."""
    table: dict[bytes, bytes] = {}
    nodes: list[bytes] = []  # the in-memory node list mmr_append reads

    def get(name: str, key: bytes) -> bytes | None:
        assert name == "mmr"
        return table.get(key)

    for size in range(70):
        entry = b"entry %d" % size
        expected = mmr_append(hash_name, nodes.__getitem__, size, mmr_leaf_hash(hash_name, entry))
        nodes.extend(node for _, node in expected)
        got = mmr_mutations(hash_name, get, size, entry)
        assert got == [("mmr", size.to_bytes(8, "big"), b"".join(n for _, n in expected))]
        table.update((key, value) for _, key, value in got if value is not None)
    assert len(table) == 70
    left = (68).to_bytes(8, "big")  # leaf 69 (0b1000101) needs the last node of row 68
    table[left] = table[left] + b"x" * 32
    with pytest.raises(CorruptionError, match=r"leaf 68 .* 64 bytes, not 32"):
        mmr_mutations(hash_name, get, 69, b"x")
    del table[left]
    with pytest.raises(CorruptionError, match=r"leaf 68 .* missing"):
        mmr_mutations(hash_name, get, 69, b"x")


@pytest.mark.parametrize("hash_name", ["blake3", "sha256"])
def test_smt_mutations_commit_to_the_documented_key_and_value(hash_name: str) -> None:
    """``smt_mutations`` puts each memory under ``smt_key(ns, id)`` with the value
    ``head_commitment(head record, head version record)``: the same rows as a direct
    ``smt_store_apply`` of those pairs."""
    tables: dict[str, dict[bytes, bytes]] = {"heads": {}, "versions": {}, "smt": {}}
    expected: dict[bytes, bytes | None] = {}
    for i in range(40):
        memory_id = bytes([i]) * 16
        ns = "ns-é" if i % 3 else "default"
        head = HeadState(ns, "fact", 1 + i % 2, 2, "active", T0, T0 + i, "r" * (i % 4))
        version = VersionState(i + 1, T0 + i, b"\xa1\x61x\x01").encode()
        tables["heads"][memory_id] = head.encode()
        tables["versions"][memory_id + head.head.to_bytes(4, "big")] = version
        key = smt_key(hash_name, ns, memory_id)
        expected[key] = head_commitment(hash_name, head.encode(), version)
    ids = [bytes([i]) * 16 for i in range(40)]
    got = smt_mutations(hash_name, lambda t, k: tables[t].get(k), ids)
    _, writes = smt_store_apply(hash_name, tables["smt"].get, expected)
    assert got == [("smt", key, value) for key, value in sorted(writes.items())]


def test_a_later_version_s_proof_needs_its_own_creating_write(tmp_path: Path) -> None:
    """A proof of version 2 carries the write that created the memory: swapping in another
    memory's write (with that write's own valid MMR path) is refused with False."""
    with cg.open(tmp_path, "a", clock=cg.ManualClock(T0), sync=False) as cx:
        first = cx.write(cg.Fact(text="first"), at=T0)
        other = cx.write(cg.Fact(text="other"), at=T0 + 1)
        cx.update(first, text="first, revised", at=T0 + 2)
        proof, other_write, root = cx.prove(first.head), cx.prove(other), cx.overall_root()
    assert verify_memory_proof(proof, root) is True
    assert other_write.journal_size == proof.journal_size  # its path fits the same tree
    swapped = attrs.evolve(
        proof, origin_entry=other_write.entry, origin_mmr_proof=tuple(other_write.mmr_proof)
    )
    assert verify_memory_proof(swapped, root) is False
