"""The sparse Merkle tree half of cortexgraph.merkle.

The reference below is deliberately naive and shares no code with
``cortexgraph.core.smt``: it computes the root of a *full-depth* 256-level tree by
recursion over the sorted key set, applying the collapse rule (an interior node with one
empty child and one leaf child is that leaf) at every level, and builds proofs from the
definition (descend while the subtree holds two or more keys). The implementation instead
descends from stored shortcut leaves; agreeing with this reference is the evidence that
shortcut leaves are equivalent to the full tree. Running this file as a script regenerates
``fixtures/vectors/smt_*.json`` from the reference::

    PYTHONPATH=src .venv/bin/python tests/test_merkle_smt.py
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cortexgraph.core import hashing
from cortexgraph.core import smt as core
from cortexgraph.errors import CorruptionError, ValidationError
from cortexgraph.merkle import (
    EMPTY_SMT_ROOT,
    SmtVerifier,
    SparseMerkleTree,
    smt_get,
    smt_prove,
    smt_update,
    verify_smt,
)

VECTORS = Path(__file__).resolve().parent.parent / "fixtures" / "vectors"
HASHES: dict[str, Callable[[bytes], bytes]] = {
    "sha256": lambda data: hashlib.sha256(data).digest(),
    "blake3": lambda data: bytes(blake3.blake3(data).digest()),
}
ZERO = bytes(32)

# ------------------------------------------------------------ reference (full depth)


def bit(key: bytes, i: int) -> int:
    """Bit i of a key, most significant bit of key[0] first."""
    return (key[i // 8] >> (7 - i % 8)) & 1


def ref_node(
    h: Callable[[bytes], bytes], items: list[tuple[bytes, bytes]], depth: int
) -> tuple[bytes, bool]:
    """(hash, is_leaf) of the full-depth subtree at ``depth`` holding sorted ``items``."""
    if not items:
        return ZERO, False
    if depth == 256:
        key, value = items[0]
        return h(b"\x00" + key + value), True
    cut = next((i for i, (key, _) in enumerate(items) if bit(key, depth)), len(items))
    left, left_leaf = ref_node(h, items[:cut], depth + 1)
    right, right_leaf = ref_node(h, items[cut:], depth + 1)
    if left == ZERO and right == ZERO:
        return ZERO, False
    if left == ZERO and right_leaf:
        return right, True
    if right == ZERO and left_leaf:
        return left, True
    return h(b"\x01" + left + right), False


def ref_root(h: Callable[[bytes], bytes], entries: dict[bytes, bytes]) -> bytes:
    return ref_node(h, sorted(entries.items()), 0)[0]


def ref_prove(h: Callable[[bytes], bytes], entries: dict[bytes, bytes], key: bytes) -> bytes:
    """The proof for ``key`` by the definition: the siblings along key's path while the
    subtree holds >= 2 keys, then what the path ends in; encoded per the documented layout."""
    items = sorted(entries.items())
    siblings = []
    depth = 0
    while len(items) >= 2:
        same = [item for item in items if bit(item[0], depth) == bit(key, depth)]
        other = [item for item in items if bit(item[0], depth) != bit(key, depth)]
        siblings.append(ref_node(h, other, depth + 1)[0])
        items = same
        depth += 1
    if not items:
        kind, tail = 0, b""
    elif items[0][0] == key:
        kind, tail = 1, b""
    else:
        kind, tail = 2, items[0][0] + items[0][1]
    bits = "".join("0" if s == ZERO else "1" for s in siblings)
    bits += "0" * (-len(bits) % 8)
    bitmap = bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits), 8))
    present = b"".join(s for s in siblings if s != ZERO)
    return bytes([kind]) + depth.to_bytes(2, "big") + bitmap + present + tail


# --------------------------------------------------------------------------- helpers


def key_of(i: int, salt: bytes = b"k") -> bytes:
    return hashlib.sha256(salt + i.to_bytes(8, "big")).digest()


def value_of(i: int, salt: bytes = b"v") -> bytes:
    return hashlib.sha256(salt + i.to_bytes(8, "big")).digest()


def with_bit(key: bytes, i: int) -> bytes:
    """``key`` with bit i flipped: the absent key that shares exactly i leading bits."""
    out = bytearray(key)
    out[i // 8] ^= 0x80 >> (i % 8)
    return bytes(out)


def tree_of(hash_name: str, entries: dict[bytes, bytes]) -> SparseMerkleTree:
    tree = SparseMerkleTree(hash_name)
    for key, value in entries.items():
        tree.update(key, value)
    return tree


def reachable(get: Callable[[bytes], bytes | None], root: bytes) -> set[bytes]:
    """Every stored node reachable from ``root`` (EMPTY excluded)."""
    seen: set[bytes] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node == ZERO or node in seen:
            continue
        seen.add(node)
        enc = get(node)
        assert enc is not None
        if enc[0] == 1:
            stack += [enc[1:33], enc[33:]]
    return seen


# Keys that hypothesis shrinks towards long shared prefixes (deep trees) mixed with
# structured neighbours of a base key.
BASE = key_of(0)
KEYS = st.one_of(
    st.binary(min_size=32, max_size=32),
    st.integers(0, 255).map(lambda i: with_bit(BASE, i)),
    st.integers(0, 255).map(lambda i: with_bit(with_bit(BASE, 255), i)),
    st.integers(0, 40).map(key_of),
)
VALUES = st.binary(min_size=32, max_size=32)

# -------------------------------------------------------------------------- fixtures


def fixture_cases() -> list[tuple[str, dict[bytes, bytes], list[bytes]]]:
    """(name, entries, keys to prove) for the known-answer file."""
    hashed = {key_of(i): value_of(i) for i in range(16)}
    low = bytes(31) + b"\x00"
    one_bit = {bytes(31) + bytes([1 << i]): value_of(i) for i in range(8)}
    return [
        ("empty", {}, [ZERO, b"\xff" * 32]),
        ("one key", {BASE: value_of(0)}, [BASE, with_bit(BASE, 0), with_bit(BASE, 255)]),
        (
            "keys differing only in the last bit (depth 256)",
            {low: value_of(1), with_bit(low, 255): value_of(2)},
            [low, with_bit(low, 255), with_bit(low, 254), with_bit(low, 0)],
        ),
        (
            "one-bit keys (a chain of interior nodes)",
            one_bit,
            [*list(one_bit)[:3], ZERO, bytes(31) + b"\x03", b"\x80" + bytes(31)],
        ),
        (
            "sixteen hashed keys",
            hashed,
            [*list(hashed)[:4], key_of(100), key_of(101), with_bit(key_of(3), 20)],
        ),
    ]


def make_smt_vectors(hash_name: str) -> dict[str, Any]:
    """Known-answer vectors computed by the reference only."""
    h = HASHES[hash_name]
    cases = []
    for name, entries, keys in fixture_cases():
        cases.append(
            {
                "name": name,
                "entries": [[k.hex(), v.hex()] for k, v in sorted(entries.items())],
                "root": ref_root(h, entries).hex(),
                "proofs": [
                    {
                        "key": k.hex(),
                        "value": entries[k].hex() if k in entries else None,
                        "proof": ref_prove(h, entries, k).hex(),
                    }
                    for k in keys
                ],
            }
        )
    return {
        "description": "256-bit sparse Merkle tree vectors (layout in cortexgraph.core.merkle); "
        "generated by the full-depth reference in tests/test_merkle_smt.py",
        "hash_name": hash_name,
        "cases": cases,
    }


def write_fixtures() -> None:
    for hash_name in ("sha256", "blake3"):
        path = VECTORS / f"smt_{hash_name}.json"
        path.write_text(json.dumps(make_smt_vectors(hash_name), indent=1) + "\n", "utf-8")


@pytest.mark.parametrize("hash_name", ["sha256", "blake3"])
def test_fixture_is_what_the_reference_generates(hash_name: str) -> None:
    """fixtures/vectors/smt_<hash>.json is exactly the reference's output (no drift)."""
    path = VECTORS / f"smt_{hash_name}.json"
    assert json.loads(path.read_text("utf-8")) == make_smt_vectors(hash_name)


@pytest.mark.parametrize("hash_name", ["sha256", "blake3"])
def test_tree_matches_fixture(hash_name: str) -> None:
    """The implementation reproduces every fixture root and proof byte for byte (including
    depth-256 proofs and the empty tree), and verify_smt accepts each claim."""
    vectors = json.loads((VECTORS / f"smt_{hash_name}.json").read_text("utf-8"))
    for case in vectors["cases"]:
        entries = {bytes.fromhex(k): bytes.fromhex(v) for k, v in case["entries"]}
        tree = tree_of(hash_name, entries)
        assert tree.root().hex() == case["root"], case["name"]
        for p in case["proofs"]:
            key = bytes.fromhex(p["key"])
            value = None if p["value"] is None else bytes.fromhex(p["value"])
            assert tree.prove(key).hex() == p["proof"], (case["name"], p["key"])
            assert verify_smt(hash_name, tree.root(), key, value, bytes.fromhex(p["proof"]))


def test_empty_tree() -> None:
    """The empty tree's root is 32 zero bytes; every key has a 3-byte non-membership proof."""
    tree = SparseMerkleTree("sha256")
    assert tree.root() == EMPTY_SMT_ROOT == ZERO
    assert len(tree) == 0
    assert tree.prove(BASE) == b"\x00\x00\x00"
    assert verify_smt("sha256", ZERO, BASE, None, b"\x00\x00\x00") is True
    assert verify_smt("sha256", ZERO, BASE, ZERO, b"\x00\x00\x00") is False


# ------------------------------------------------------------------------ properties

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(
    history=st.dictionaries(
        KEYS, st.lists(st.one_of(st.none(), VALUES), min_size=1, max_size=3), max_size=30
    ),
    order=st.randoms(use_true_random=False),
    hash_name=st.sampled_from(["sha256", "blake3"]),
)
def test_root_depends_only_on_the_final_key_value_set(
    history: dict[bytes, list[bytes | None]], order: Any, hash_name: str
) -> None:
    """M2: applying each key's updates (inserts, overwrites, deletes) with the keys' updates
    interleaved in a random order gives the same root as inserting the final set in sorted
    order, and the same root as the full-depth reference."""
    final = {k: ops[-1] for k, ops in history.items() if ops[-1] is not None}
    schedule = [k for k, ops in history.items() for _ in ops]
    order.shuffle(schedule)
    pending = {k: list(ops) for k, ops in history.items()}
    tree = SparseMerkleTree(hash_name)
    for key in schedule:
        tree.update(key, pending[key].pop(0))
    assert tree.root() == tree_of(hash_name, dict(sorted(final.items()))).root()
    assert tree.root() == ref_root(HASHES[hash_name], final)
    assert len(tree) == len(final)
    for key in history:
        assert tree.get(key) == final.get(key)


@settings(FAST, max_examples=40)
@given(
    entries=st.dictionaries(KEYS, VALUES, max_size=40),
    probes=st.lists(KEYS, max_size=8),
    hash_name=st.sampled_from(["sha256", "blake3"]),
)
@example(entries={BASE: ZERO}, probes=[with_bit(BASE, 255)], hash_name="sha256").via(
    "neighbour of a lone key"
)
def test_membership_and_non_membership(
    entries: dict[bytes, bytes], probes: list[bytes], hash_name: str
) -> None:
    """Every present key's proof equals the reference proof, verifies with its value, and fails
    with another value or as non-membership; every absent key (random, or sharing 0..255
    leading bits with a present key) verifies as non-membership and fails as membership."""
    tree = tree_of(hash_name, entries)
    root = tree.root()
    h = HASHES[hash_name]
    for key, value in entries.items():
        proof = tree.prove(key)
        assert proof == ref_prove(h, entries, key)
        assert verify_smt(hash_name, root, key, value, proof) is True
        assert verify_smt(hash_name, root, key, with_bit(value, 3), proof) is False
        assert verify_smt(hash_name, root, key, None, proof) is False
    neighbours = [with_bit(k, i) for k in list(entries)[:3] for i in (0, 7, 100, 254, 255)]
    for key in [*probes, *neighbours]:
        if key in entries:
            continue
        proof = tree.prove(key)
        assert proof == ref_prove(h, entries, key)
        assert verify_smt(hash_name, root, key, None, proof) is True
        assert verify_smt(hash_name, root, key, ZERO, proof) is False
        for present in list(entries)[:2]:
            assert verify_smt(hash_name, root, present, None, proof) is False


def mutated(proof: bytes) -> list[bytes]:
    """Every single-bit flip, every truncation, and appended bytes."""
    flips = [with_bit(proof, i) for i in range(8 * len(proof))]
    return [*flips, *(proof[:n] for n in range(len(proof))), proof + b"\x00", proof + proof[-1:]]


@pytest.mark.parametrize("hash_name", ["sha256", "blake3"])
def test_every_mutation_of_small_proofs_fails(hash_name: str) -> None:
    """M7: for small trees (a chain, a depth-256 pair, hashed keys), every flipped bit of
    every proof, every truncation and appended bytes are rejected, for membership and
    non-membership proofs alike, and flipped bits in the root or key are rejected too."""
    for _, entries, keys in fixture_cases():
        tree = tree_of(hash_name, entries)
        root = tree.root()
        for key in keys:
            value = entries.get(key)
            proof = tree.prove(key)
            assert verify_smt(hash_name, root, key, value, proof) is True
            for bad in mutated(proof):
                assert verify_smt(hash_name, root, key, value, bad) is False, bad.hex()
            for i in (0, 100, 255):
                assert verify_smt(hash_name, with_bit(root, i), key, value, proof) is False
                if value is not None:
                    assert verify_smt(hash_name, root, with_bit(key, i), value, proof) is False


def test_more_than_256_siblings_and_bad_depths_are_rejected() -> None:
    """A proof claiming depth 257 (or 300, or 65535) is rejected even when its length matches
    its bitmap, while a genuine depth-256 proof verifies."""
    low = bytes(32)
    tree = tree_of("blake3", {low: value_of(1), with_bit(low, 255): value_of(2)})
    proof = tree.prove(low)
    assert proof[1:3] == (256).to_bytes(2, "big")
    assert verify_smt("blake3", tree.root(), low, value_of(1), proof) is True
    sibling = b"\x11" * 32
    for depth in (257, 264, 300, 65535):
        width = (depth + 7) // 8
        bitmap = ((1 << depth) - 1) << (8 * width - depth)  # all present, padding clear
        body = depth.to_bytes(2, "big") + bitmap.to_bytes(width, "big") + sibling * depth
        assert verify_smt("blake3", tree.root(), low, value_of(1), b"\x01" + body) is False
        assert verify_smt("blake3", tree.root(), low, None, b"\x00" + body) is False
        other = with_bit(low, 255) + value_of(2)
        assert verify_smt("blake3", tree.root(), low, None, b"\x02" + body + other) is False


def test_non_canonical_proofs_are_rejected() -> None:
    """M7: the verifier refuses encodings the prover never makes: an unknown kind, set padding
    bits, an all-zero sibling marked present, an empty deepest sibling, and a kind-2 leaf that
    is the key itself or is off the key's path."""
    a, b = bytes(32), with_bit(bytes(32), 3)  # split at depth 3
    entries = {a: value_of(1), b: value_of(2)}
    tree = tree_of("sha256", entries)
    root = tree.root()
    proof = tree.prove(a)  # kind 1, depth 4, bitmap 0b0001_0000, one sibling
    assert proof[:4] == b"\x01\x00\x04\x10" and len(proof) == 4 + 32
    assert verify_smt("sha256", root, a, value_of(1), proof) is True
    sibling = proof[4:]
    cases = [
        b"\x03" + proof[1:],  # unknown kind
        proof[:3] + b"\x11" + sibling + sibling,  # padding bit set (and a second sibling)
        proof[:3] + b"\x90" + ZERO + sibling,  # an all-zero sibling marked present
        b"\x01\x00\x05\x10" + sibling,  # depth 5: the deepest sibling is empty
    ]
    for bad in cases:
        assert verify_smt("sha256", root, a, value_of(1), bad) is False
    absent = with_bit(a, 200)
    other = tree.prove(absent)
    assert other[0] == 2 and verify_smt("sha256", root, absent, None, other) is True
    own = other[:-64] + absent + value_of(1)  # kind 2 naming the key itself
    assert verify_smt("sha256", root, absent, None, own) is False
    off_path = other[:-64] + b  # kind 2 with a leaf that does not share the first 4 bits
    assert verify_smt("sha256", root, absent, None, off_path + value_of(2)) is False


@pytest.mark.parametrize("hash_name", ["sha256", "blake3"])
def test_present_key_cannot_be_proven_absent_by_naming_its_own_leaf(hash_name: str) -> None:
    """A membership proof rewritten as kind 2 with the key's own leaf appended rebuilds the
    true root, so only the "other leaf must be another key" rule stops it from proving a
    present key absent; the verifier must reject it, at every depth."""
    for _, entries, _keys in fixture_cases():
        tree = tree_of(hash_name, entries)
        for key, value in entries.items():
            proof = tree.prove(key)
            forged = b"\x02" + proof[1:] + key + value
            assert verify_smt(hash_name, tree.root(), key, None, forged) is False
            assert verify_smt(hash_name, tree.root(), key, value, proof) is True


# ------------------------------------------------------------- the store contract (M6)


@FAST
@given(
    ops=st.lists(st.tuples(KEYS, st.one_of(st.none(), VALUES)), max_size=40),
    hash_name=st.sampled_from(["sha256", "blake3"]),
)
def test_added_and_removed_keep_exactly_the_reachable_nodes(
    ops: list[tuple[bytes, bytes | None]], hash_name: str
) -> None:
    """M6: a dict node store that applies each SmtUpdate (put added, delete removed) holds
    exactly the nodes reachable from the root, each stored under H(encoding), and after any
    history it is byte-identical to the store built from the final set (rebuild == replay)."""
    store: dict[bytes, bytes] = {}
    root = ZERO
    final: dict[bytes, bytes] = {}
    h = HASHES[hash_name]
    for key, value in ops:
        change = smt_update(hash_name, store.get, root, key, value)
        assert change.old_value == final.get(key)
        assert not {node for node, _ in change.added} & set(change.removed)
        for node, enc in change.added:
            assert h(enc) == node and len(enc) == 65
            store[node] = enc
        for node in change.removed:
            del store[node]
        root = change.root
        if value is None:
            final.pop(key, None)
        else:
            final[key] = value
        assert set(store) == reachable(store.get, root)
        assert smt_get(store.get, root, key) == value
    rebuilt: dict[bytes, bytes] = {}
    rebuilt_root = ZERO
    for key, value in sorted(final.items()):
        change = smt_update(hash_name, rebuilt.get, rebuilt_root, key, value)
        rebuilt.update(change.added)
        for node in change.removed:
            del rebuilt[node]
        rebuilt_root = change.root
    assert (rebuilt_root, rebuilt) == (root, store)


def test_no_op_updates_change_nothing() -> None:
    """Writing a key's current value or deleting an absent key returns the same root and no
    nodes to add or remove."""
    tree = tree_of("blake3", {key_of(i): value_of(i) for i in range(20)})
    store, root = tree._nodes, tree.root()
    same = smt_update("blake3", store.get, root, key_of(3), value_of(3))
    assert same == (root, [], [], value_of(3))
    gone = smt_update("blake3", store.get, root, key_of(99), None)
    assert gone == (root, [], [], None)


# ---------------------------------------------------------------- cost (M4)


@pytest.mark.parametrize("n", [1000, 10_000])
def test_update_hash_calls_are_logarithmic(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """M4: with n = 1,000 and 10,000 hashed keys, every insert, overwrite and delete makes
    fewer than 4*log2(n) + 8 hash calls (far below 256), about log2(n) on average; counted
    by wrapping the hash function the pure code resolves."""
    tree = SparseMerkleTree("blake3")
    for i in range(n):
        tree.update(key_of(i), value_of(i))
    calls = _count_hash_calls(monkeypatch, "hash_function")
    counts = []
    for i in range(100):
        for key, value in [
            (key_of(n + i), value_of(n + i)),  # insert
            (key_of(i), value_of(i, b"w")),  # overwrite
            (key_of(n // 2 + i), None),  # delete
        ]:
            calls[0] = 0
            tree.update(key, value)
            counts.append(calls[0])
    monkeypatch.undo()
    bound = 4 * math.log2(n) + 8
    assert max(counts) < bound < 256
    assert sum(counts) / len(counts) < math.log2(n) + 4
    assert len(tree) == n


# ------------------------------------------------------------- errors and garbage


def test_update_rejects_bad_arguments_and_missing_nodes() -> None:
    """Keys and values of the wrong type or length raise ValidationError; a store that lost
    a node raises CorruptionError instead of computing a wrong root."""
    tree = tree_of("sha256", {key_of(i): value_of(i) for i in range(4)})
    for key, value in [(b"short", ZERO), (key_of(1), b"short"), ("k" * 32, ZERO), (None, ZERO)]:
        with pytest.raises(ValidationError):
            tree.update(key, value)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        SparseMerkleTree("md5")
    with pytest.raises(ValidationError):
        tree.prove(b"\x00" * 31)
    with pytest.raises(CorruptionError):
        smt_update("sha256", lambda node: None, tree.root(), key_of(9), ZERO)
    with pytest.raises(CorruptionError):
        smt_prove(lambda node: b"\x02" * 65, tree.root(), key_of(9))


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.binary(max_size=40),
    st.binary(min_size=32, max_size=32),
    st.text(max_size=8),
    st.sampled_from(["sha256", "blake3", "SHA256", b"blake3", 2**64]),
    st.lists(st.binary(max_size=33), max_size=4),
    st.builds(bytearray, st.binary(min_size=32, max_size=32)),
    st.binary(min_size=3, max_size=600),
)


@settings(max_examples=400, deadline=None)
@given(args=st.tuples(JUNK, JUNK, JUNK, JUNK, JUNK))
def test_verify_smt_never_raises_on_garbage(args: tuple[Any, ...]) -> None:
    """M3: verify_smt returns False (never raises) on arbitrary arguments."""
    assert verify_smt(*args) is False


@settings(max_examples=300, deadline=None)
@given(position=st.integers(0, 4), junk=JUNK, garbage=st.binary(min_size=1, max_size=64))
def test_verify_smt_rejects_one_bad_argument(position: int, junk: Any, garbage: bytes) -> None:
    """M3: a valid membership check with one argument replaced by a value of the wrong type
    or length (or the proof extended by trailing garbage) returns False and never raises."""
    tree = tree_of("blake3", {key_of(i): value_of(i) for i in range(30)})
    good: list[Any] = ["blake3", tree.root(), key_of(7), value_of(7), tree.prove(key_of(7))]
    assert verify_smt(*good) is True
    assert verify_smt("blake3", good[1], good[2], good[3], good[4] + garbage) is False
    args = list(good)
    args[position] = junk
    well_typed = [
        type(junk) is str and junk in ("sha256", "blake3"),
        type(junk) is bytes and len(junk) == 32,
        type(junk) is bytes and len(junk) == 32,
        junk is None or (type(junk) is bytes and len(junk) == 32),
        type(junk) is bytes,
    ][position]
    result = verify_smt(*args)
    assert result is False or (well_typed and result is True)


# ------------------------------------------------------------- many proofs, one root


@settings(FAST, max_examples=40)
@given(
    entries=st.dictionaries(KEYS, VALUES, min_size=1, max_size=60),
    probes=st.lists(KEYS, max_size=6),
    flips=st.lists(st.tuples(st.integers(0, 59), st.integers(0, 8 * 600)), max_size=12),
    order=st.randoms(use_true_random=False),
    hash_name=st.sampled_from(["sha256", "blake3"]),
    small_memo=st.booleans(),
)
def test_smt_verifier_agrees_with_verify_smt(
    entries: dict[bytes, bytes], probes: list[bytes], flips: list[tuple[int, int]],
    order: Any, hash_name: str, small_memo: bool,
) -> None:
    """One SmtVerifier answers every claim in a shuffled stream exactly as verify_smt does:
    members with their values, wrong values and "absent" claims, absent keys (random and
    neighbours of members), proofs of other keys, and proofs with a flipped bit that come
    after the valid proof of the same key has filled the verifier's memo (which is also
    run nearly full, so that it stops remembering)."""
    tree = tree_of(hash_name, entries)
    root = tree.root()
    keys = list(entries)
    claims: list[tuple[bytes, bytes | None, bytes]] = []
    for key, value in entries.items():
        proof = tree.prove(key)
        claims += [(key, value, proof), (key, with_bit(value, 5), proof), (key, None, proof)]
    for key in [*probes, *(with_bit(k, i) for k in keys[:3] for i in (0, 9, 255))]:
        claims += [(key, None, tree.prove(key)), (key, ZERO, tree.prove(key))]
    claims += [(keys[0], entries[keys[0]], tree.prove(keys[-1]))]
    order.shuffle(claims)
    for index, bit in flips:
        key = keys[index % len(keys)]
        proof = tree.prove(key)
        if bit < 8 * len(proof):
            claims.append((key, entries[key], with_bit(proof, bit)))
    with pytest.MonkeyPatch.context() as patch:
        if small_memo:
            patch.setattr(core, "_MAX_SHARED", 8)
        verifier = SmtVerifier(hash_name, root)
        for key, value, proof in claims:
            expected = verify_smt(hash_name, root, key, value, proof)
            assert verifier.verify(key, value, proof) is expected


@settings(max_examples=300, deadline=None)
@given(made=st.tuples(JUNK, JUNK), args=st.lists(st.tuples(JUNK, JUNK, JUNK), max_size=3))
def test_smt_verifier_never_raises_on_garbage(
    made: tuple[Any, Any], args: list[tuple[Any, Any, Any]]
) -> None:
    """M3: SmtVerifier built and called with arbitrary arguments answers as verify_smt does
    (so False for anything malformed) and never raises."""
    verifier = SmtVerifier(*made)
    for key, value, proof in args:
        assert verifier.verify(key, value, proof) is verify_smt(*made, key, value, proof)


def test_smt_verifier_hashes_shared_nodes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checking 500 members of a 5,000-key tree through one verifier makes fewer than
    half the hash calls that verify_smt makes for the same proofs (the top levels of the
    paths are shared), and every answer is True."""
    tree = tree_of("blake3", {key_of(i): value_of(i) for i in range(5000)})
    claims = [(key_of(i), value_of(i), tree.prove(key_of(i))) for i in range(0, 5000, 10)]
    calls = _count_hash_calls(monkeypatch, "local_hash_function")
    assert all(verify_smt("blake3", tree.root(), *claim) for claim in claims)
    alone, calls[0] = calls[0], 0
    verifier = SmtVerifier("blake3", tree.root())
    assert all(verifier.verify(*claim) for claim in claims)
    assert alone > 500 * 12 and calls[0] < alone / 2


def _count_hash_calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Wrap ``hashing.<name>`` as the pure code resolves it (``core.<name>``) so that
    every hash call is counted; returns the one-element counter."""
    calls = [0]
    real = getattr(hashing, name)

    def counting(hash_name: str) -> Callable[[bytes], bytes]:
        function = real(hash_name)

        def counted(data: bytes) -> bytes:
            calls[0] += 1
            return function(data)

        return counted

    monkeypatch.setattr(core, name, counting)
    return calls


if __name__ == "__main__":
    write_fixtures()
    sys.exit(0)
