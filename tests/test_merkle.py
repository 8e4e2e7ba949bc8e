"""The MMR half of cortexgraph.merkle, the OverallRoot and the public surface.

The reference implementation below is written straight from RFC 6962 section 2.1 (MTH,
PATH, SUBPROOF, as recursions over lists), uses ``hashlib``/``blake3`` directly, and shares
no code with ``cortexgraph.core.mmr``. Running this file as a script regenerates
``fixtures/vectors/mmr_*.json`` from that reference::

    PYTHONPATH=src .venv/bin/python tests/test_merkle.py
"""

from __future__ import annotations

import doctest
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import cortexgraph.merkle as public
from cortexgraph.core import mmr, smt
from cortexgraph.core import roots as merkle
from cortexgraph.errors import CorruptionError, ValidationError
from cortexgraph.merkle import (
    MMR,
    mmr_append,
    mmr_consistency_proof,
    mmr_inclusion_proof,
    mmr_leaf_hash,
    mmr_leaf_position,
    mmr_node_count,
    mmr_root,
    overall_root,
    smt_key,
    verify_consistency,
    verify_inclusion,
)

VECTORS = Path(__file__).resolve().parent.parent / "fixtures" / "vectors"
HASHES: dict[str, Callable[[bytes], bytes]] = {
    "sha256": lambda data: hashlib.sha256(data).digest(),
    "blake3": lambda data: bytes(blake3.blake3(data).digest()),
}

# The RFC 6962 test leaves and the values the certificate-transparency test suites
# (C++ merkle_tree_test.cc, Go transparency-dev/merkle) publish for them, SHA-256.
RFC6962_LEAVES = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
]
CT_ROOTS = {
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}
CT_INCLUSION = [  # (index, size, audit path), 0-based index
    (0, 1, []),
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        1,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]
CT_CONSISTENCY = [  # (old_size, new_size, proof)
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]


# ------------------------------------------------------------------ reference (RFC text)


def ref_split(n: int) -> int:
    """The largest power of two smaller than n (n >= 2)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(h: Callable[[bytes], bytes], leaves: list[bytes]) -> bytes:
    """RFC 6962 section 2.1: MTH({}) = H(), MTH({d}) = H(0 || d), else split at k."""
    if not leaves:
        return h(b"")
    if len(leaves) == 1:
        return h(b"\x00" + leaves[0])
    k = ref_split(len(leaves))
    return h(b"\x01" + ref_mth(h, leaves[:k]) + ref_mth(h, leaves[k:]))


def ref_path(h: Callable[[bytes], bytes], m: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 section 2.1.1: PATH(m, D[n])."""
    if len(leaves) == 1:
        return []
    k = ref_split(len(leaves))
    if m < k:
        return [*ref_path(h, m, leaves[:k]), ref_mth(h, leaves[k:])]
    return [*ref_path(h, m - k, leaves[k:]), ref_mth(h, leaves[:k])]


def ref_subproof(h: Callable[[bytes], bytes], m: int, leaves: list[bytes], b: bool) -> list[bytes]:
    """RFC 6962 section 2.1.2: SUBPROOF(m, D[n], b)."""
    n = len(leaves)
    if m == n:
        return [] if b else [ref_mth(h, leaves)]
    k = ref_split(n)
    if m <= k:
        return [*ref_subproof(h, m, leaves[:k], b), ref_mth(h, leaves[k:])]
    return [*ref_subproof(h, m - k, leaves[k:], False), ref_mth(h, leaves[:k])]


def path_shape(m: int, n: int) -> list[str]:
    """The sides of PATH(m, D[n]) leaf first: 'R' = sibling on the right."""
    if n == 1:
        return []
    k = ref_split(n)
    return [*path_shape(m, k), "R"] if m < k else [*path_shape(m - k, n - k), "L"]


def subproof_shape(m: int, n: int, b: bool = True) -> list[str]:
    """The shape of SUBPROOF(m, D[n], b): 'seed', then 'L' (both roots) / 'R' (new only)."""
    if m == n:
        return [] if b else ["seed"]
    k = ref_split(n)
    if m <= k:
        return [*subproof_shape(m, k, b), "R"]
    return [*subproof_shape(m - k, n - k, False), "L"]


def leaf_data(i: int) -> bytes:
    """Distinct leaves derived from the index (leaf 0 is the empty string)."""
    return i.to_bytes((i.bit_length() + 7) // 8, "big")


def build(hash_name: str, n: int) -> MMR:
    mmr = MMR(hash_name)
    for i in range(n):
        assert mmr.append(leaf_data(i)) == i
    return mmr


def flip(data: bytes, bit: int) -> bytes:
    bit %= 8 * len(data)
    out = bytearray(data)
    out[bit // 8] ^= 0x80 >> (bit % 8)
    return bytes(out)


# ------------------------------------------------------------------------- fixtures


def make_mmr_vectors(hash_name: str, leaves: list[bytes]) -> dict[str, Any]:
    """Known-answer vectors for ``leaves``, computed by the reference only."""
    h = HASHES[hash_name]
    n = len(leaves)
    pairs = [(i, s) for s in range(1, n + 1) for i in range(s) if s <= 8 or i in (0, s - 1)]
    cons = [(m, s) for s in range(1, n + 1) for m in range(1, s + 1) if s <= 8 or m in (1, s - 1)]
    return {
        "description": "RFC 6962 Merkle Tree Hash vectors; generated by tests/test_merkle.py",
        "hash_name": hash_name,
        "leaves": [leaf.hex() for leaf in leaves],
        "roots": [{"size": s, "root": ref_mth(h, leaves[:s]).hex()} for s in range(n + 1)],
        "inclusion": [
            {"index": i, "size": s, "proof": [p.hex() for p in ref_path(h, i, leaves[:s])]}
            for i, s in pairs
        ],
        "consistency": [
            {
                "old_size": m,
                "new_size": s,
                "proof": [p.hex() for p in ref_subproof(h, m, leaves[:s], True)],
            }
            for m, s in cons
        ],
    }


def fixture_leaves(hash_name: str) -> list[bytes]:
    rfc = [bytes.fromhex(x) for x in RFC6962_LEAVES]
    if hash_name == "sha256":
        return rfc
    return rfc + [b"cortexgraph leaf %d" % i for i in range(8, 21)]


def write_fixtures() -> None:
    for hash_name in ("sha256", "blake3"):
        vectors = make_mmr_vectors(hash_name, fixture_leaves(hash_name))
        path = VECTORS / f"mmr_{hash_name}.json"
        path.write_text(json.dumps(vectors, indent=1) + "\n", encoding="utf-8")


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    return data


# --------------------------------------------------------------------- known answers


def test_rfc6962_root_of_the_eight_test_leaves() -> None:
    """Known answer: in sha256 mode the MMR root of the RFC 6962 test leaves is 5dc9da79...4328,
    and every prefix root is the published certificate-transparency value (M1)."""
    mmr = MMR("sha256")
    for leaf in RFC6962_LEAVES:
        mmr.append(bytes.fromhex(leaf))
    assert mmr.root().hex() == CT_ROOTS[8]
    assert {s: mmr.root_at(s).hex() for s in range(1, 9)} == CT_ROOTS
    assert mmr.root_at(0) == hashlib.sha256(b"").digest()


def test_ct_suite_values_agree_with_reference_and_fixture() -> None:
    """The CT suite values, the reference recursion and the sha256 fixture are one data set,
    so the fixture is checked against two independent sources."""
    h = HASHES["sha256"]
    leaves = [bytes.fromhex(x) for x in RFC6962_LEAVES]
    vectors = load("mmr_sha256.json")
    roots = {r["size"]: r["root"] for r in vectors["roots"]}
    for size, root in CT_ROOTS.items():
        assert ref_mth(h, leaves[:size]).hex() == root
        assert roots[size] == root
    inclusion = {(v["index"], v["size"]): v["proof"] for v in vectors["inclusion"]}
    for index, size, proof in CT_INCLUSION:
        assert [p.hex() for p in ref_path(h, index, leaves[:size])] == proof
        assert inclusion[index, size] == proof
    consistency = {(v["old_size"], v["new_size"]): v["proof"] for v in vectors["consistency"]}
    for old, new, proof in CT_CONSISTENCY:
        assert [p.hex() for p in ref_subproof(h, old, leaves[:new], True)] == proof
        assert consistency[old, new] == proof


@pytest.mark.parametrize("hash_name", ["sha256", "blake3"])
def test_fixture_is_what_the_reference_generates(hash_name: str) -> None:
    """fixtures/vectors/mmr_<hash>.json is byte-for-byte the reference's output (no drift)."""
    expected = make_mmr_vectors(hash_name, fixture_leaves(hash_name))
    assert load(f"mmr_{hash_name}.json") == expected


@pytest.mark.parametrize("hash_name", ["sha256", "blake3"])
def test_mmr_matches_fixture(hash_name: str) -> None:
    """The MMR reproduces every fixture root and proof, and the verifiers accept them all."""
    vectors = load(f"mmr_{hash_name}.json")
    leaves = [bytes.fromhex(x) for x in vectors["leaves"]]
    mmr = MMR(hash_name)
    for leaf in leaves:
        mmr.append(leaf)
    roots = {r["size"]: bytes.fromhex(r["root"]) for r in vectors["roots"]}
    assert {s: mmr.root_at(s) for s in roots} == roots
    for v in vectors["inclusion"]:
        index, size = v["index"], v["size"]
        proof = mmr.inclusion_proof(index, size)
        assert [p.hex() for p in proof] == v["proof"]
        leaf_hash = mmr.leaf_hash(leaves[index])
        assert verify_inclusion(hash_name, index, size, leaf_hash, proof, roots[size])
    for v in vectors["consistency"]:
        old, new = v["old_size"], v["new_size"]
        proof = mmr.consistency_proof(old, new)
        assert [p.hex() for p in proof] == v["proof"]
        assert verify_consistency(hash_name, old, new, roots[old], roots[new], proof)


# ------------------------------------------------------------------------ properties

SIZES = st.integers(1, 1000)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(size=SIZES, hash_name=st.sampled_from(["sha256", "blake3"]))
@example(size=1, hash_name="sha256").via("smallest tree")
@example(size=1000, hash_name="blake3").via("largest tree")
@example(size=512, hash_name="sha256").via("a single peak")
@example(size=1023 - 512, hash_name="blake3").via("nine peaks")
def test_mmr_root_is_the_rfc6962_mth(size: int, hash_name: str) -> None:
    """M1: after any number of appends the MMR root equals the reference recursive MTH, and
    the node array has 2n - popcount(n) entries with every leaf hash at its position."""
    mmr = build(hash_name, size)
    leaves = [leaf_data(i) for i in range(size)]
    h = HASHES[hash_name]
    assert mmr.size == size
    assert mmr.root() == ref_mth(h, leaves)
    assert mmr.root_at(size // 3) == ref_mth(h, leaves[: size // 3])
    assert len(mmr._nodes) == mmr_node_count(size) == 2 * size - bin(size).count("1")
    for i in (0, size // 2, size - 1):
        assert mmr._nodes[mmr_leaf_position(i)] == h(b"\x00" + leaves[i])


@FAST
@given(size=SIZES, data=st.data())
@example(size=1, data=None).via("empty proof")
def test_inclusion_proofs_verify_and_mutations_fail(size: int, data: Any) -> None:
    """Every inclusion proof equals the RFC PATH and verifies; a flipped bit in any element,
    the leaf or the root, a dropped, extra, truncated or extended element, or a wrong index
    fails; a wrong size fails exactly when it changes the shape of the audit path (RFC 9162
    binds the size only through that shape)."""
    index = data.draw(st.integers(0, size - 1)) if data is not None else 0
    bit = data.draw(st.integers(0, 255)) if data is not None else 7
    hash_name = "sha256" if size % 2 else "blake3"
    mmr = build(hash_name, size)
    leaf = mmr.leaf_hash(leaf_data(index))
    root = mmr.root()
    proof = mmr.inclusion_proof(index)
    h = HASHES[hash_name]
    assert proof == ref_path(h, index, [leaf_data(i) for i in range(size)])

    def check(
        *, i: int = index, n: int = size, lf: bytes = leaf, p: Any = proof, r: bytes = root
    ) -> bool:
        return verify_inclusion(hash_name, i, n, lf, p, r)

    assert check() is True
    assert check(lf=flip(leaf, bit)) is False
    assert check(r=flip(root, bit)) is False
    for j, element in enumerate(proof):
        assert check(p=[*proof[:j], flip(element, bit + j), *proof[j + 1 :]]) is False
        assert check(p=proof[:j] + proof[j + 1 :]) is False
        assert check(p=[*proof[:j], element + b"\x00", *proof[j + 1 :]]) is False
        assert check(p=[*proof[:j], element[:-1], *proof[j + 1 :]]) is False
    assert check(p=[*proof, root]) is False
    assert check(p=[leaf, *proof]) is False
    for wrong in {0, index - 1, index + 1, size - 1, (index * 7 + 3) % size} - {index}:
        if 0 <= wrong < size:
            assert check(i=wrong) is False
    assert check(i=size) is False
    for wrong in {size - 1, size + 1, 2 * size, size + 1000} - {size}:
        same_shape = index < wrong and path_shape(index, wrong) == path_shape(index, size)
        assert check(n=wrong) is same_shape


@FAST
@given(new=SIZES, data=st.data())
@example(new=8, data=None).via("old == new")
def test_consistency_proofs_verify_and_mutations_fail(new: int, data: Any) -> None:
    """Every consistency proof equals the RFC SUBPROOF and verifies, including the edge cases
    old == 0 and old == new; flipped bits in any element or root, dropped, extra, truncated
    or extended elements fail; a wrong size fails exactly when it changes the proof shape."""
    old = data.draw(st.integers(0, new)) if data is not None else new
    bit = data.draw(st.integers(0, 255)) if data is not None else 3
    hash_name = "blake3" if new % 2 else "sha256"
    mmr = build(hash_name, new)
    old_root, new_root = mmr.root_at(old), mmr.root()
    proof = mmr.consistency_proof(old)
    h = HASHES[hash_name]
    leaves = [leaf_data(i) for i in range(new)]
    assert proof == ([] if old == 0 else ref_subproof(h, old, leaves, True))

    def check(
        *, m: int = old, n: int = new, a: bytes = old_root, b: bytes = new_root, p: Any = proof
    ) -> bool:
        return verify_consistency(hash_name, m, n, a, b, p)

    assert check() is True
    assert check(a=flip(old_root, bit)) is False
    # Every tree extends the empty tree, so with old == 0 the new root is unconstrained.
    assert check(b=flip(new_root, bit)) is (old == 0)
    for j, element in enumerate(proof):
        assert check(p=[*proof[:j], flip(element, bit + j), *proof[j + 1 :]]) is False
        assert check(p=proof[:j] + proof[j + 1 :]) is False
        assert check(p=[*proof[:j], element + b"\x00", *proof[j + 1 :]]) is False
        assert check(p=[*proof[:j], element[:-1], *proof[j + 1 :]]) is False
    assert check(p=[*proof, new_root]) is False
    assert check(p=[old_root, *proof]) is False

    def expected(m: int, n: int) -> bool:
        if not (0 < old < new and 0 < m < n):
            return False  # an edge case has an empty proof; this proof is not empty
        return subproof_shape(m, n) == subproof_shape(old, new)

    for wrong in {0, old - 1, old + 1, new} - {old}:
        if 0 <= wrong <= new:
            assert check(m=wrong) is expected(wrong, new)
    if old > 0:
        for wrong in {old, new - 1, new + 1, 2 * new} - {new}:
            if wrong >= old:
                assert check(n=wrong) is expected(old, wrong)
    assert check(n=old - 1) is False


@settings(max_examples=20, deadline=None)
@given(size=st.integers(1, 1000), data=st.data())
def test_proofs_for_old_sizes_read_only_old_nodes(size: int, data: Any) -> None:
    """M5: proofs and roots for the first m leaves read only nodes below mmr_node_count(m), in
    O(log n) reads, so a stored MMR serves historical proofs and never needs rehashing."""
    m = data.draw(st.integers(1, size))
    index = data.draw(st.integers(0, m - 1))
    mmr = build("blake3", size)
    reads: list[int] = []

    def get(pos: int) -> bytes:
        reads.append(pos)
        return mmr._nodes[pos]

    limit = mmr_node_count(m)
    bound = 2 * (m.bit_length() + 1)
    assert mmr_root("blake3", get, m) == mmr.root_at(m)
    assert max(reads) < limit and len(reads) <= bound
    reads.clear()
    assert mmr_inclusion_proof("blake3", get, index, m) == mmr.inclusion_proof(index, m)
    assert (not reads or max(reads) < limit) and len(reads) <= bound
    reads.clear()
    old = data.draw(st.integers(0, m))
    assert mmr_consistency_proof("blake3", get, old, m) == mmr.consistency_proof(old, m)
    assert (not reads or max(reads) < limit) and len(reads) <= bound


def test_mmr_append_writes_consecutive_new_positions() -> None:
    """M5 and the store contract: mmr_append over a dict returns exactly the positions
    [mmr_node_count(n), mmr_node_count(n + 1)), never rewrites one, and the pure functions
    over that dict agree with the in-memory MMR."""
    store: dict[int, bytes] = {}
    mmr = MMR("sha256")
    for n in range(300):
        data = leaf_data(n)
        new = mmr_append("sha256", store.get, n, mmr_leaf_hash("sha256", data))
        positions = [pos for pos, _ in new]
        assert positions == list(range(mmr_node_count(n), mmr_node_count(n + 1)))
        assert not store.keys() & set(positions)
        store.update(new)
        mmr.append(data)
        assert mmr_root("sha256", store.get, n + 1) == mmr.root()
    assert [store[i] for i in range(len(store))] == mmr._nodes


def test_empty_mmr() -> None:
    """An empty MMR has root H(b""), no inclusion proofs, and empty consistency proofs."""
    for hash_name, h in HASHES.items():
        mmr = MMR(hash_name)
        assert mmr.size == 0
        assert mmr.root() == h(b"") == mmr.root_at(0)
        assert mmr.consistency_proof(0) == []
        with pytest.raises(ValidationError):
            mmr.inclusion_proof(0)


def test_mmr_rejects_bad_arguments() -> None:
    """Bad sizes, indices, hash names and leaf values raise ValidationError with a field."""
    mmr = build("blake3", 5)
    bad_calls: list[Callable[[], object]] = [
        lambda: MMR("md5"),
        lambda: mmr.append("text"),  # type: ignore[arg-type]
        lambda: mmr.append_leaf_hash(b"short"),
        lambda: mmr.root_at(6),
        lambda: mmr.root_at(-1),
        lambda: mmr.root_at(True),
        lambda: mmr.inclusion_proof(5),
        lambda: mmr.inclusion_proof(2, 2),
        lambda: mmr.inclusion_proof(0, 6),
        lambda: mmr.consistency_proof(6),
        lambda: mmr.consistency_proof(3, 2),
        lambda: mmr_root("sha1", mmr._get, 1),
    ]
    for call in bad_calls:
        with pytest.raises(ValidationError):
            call()


def test_missing_node_is_corruption() -> None:
    """A node store that lost a node (or holds a wrong-length one) raises CorruptionError
    instead of producing a wrong root."""
    mmr = build("blake3", 6)
    with pytest.raises(CorruptionError):
        mmr_root("blake3", lambda pos: None, 6)
    with pytest.raises(CorruptionError):
        mmr_append("blake3", lambda pos: b"\x00" * 31, 5, mmr.leaf_hash(b"x"))


# ------------------------------------------------------------ verifiers never raise

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.binary(max_size=40),
    st.text(max_size=8),
    st.sampled_from(["sha256", "blake3", "SHA256", b"sha256", 2**64, 2**64 - 1, -1]),
    st.lists(st.one_of(st.binary(min_size=30, max_size=34), st.none(), st.integers()), max_size=70),
    st.tuples(st.binary(min_size=32, max_size=32)),
    st.builds(bytearray, st.binary(min_size=32, max_size=32)),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(args=st.tuples(JUNK, JUNK, JUNK, JUNK, JUNK, JUNK))
def test_mmr_verifiers_never_raise_on_garbage(args: tuple[Any, ...]) -> None:
    """M3: verify_inclusion and verify_consistency return False (never raise) on arbitrary
    values: None, bools, huge and negative ints, floats, junk bytes, lists of junk."""
    assert verify_inclusion(*args) is False
    assert verify_consistency(*args) is False


def well_typed(kind: str, value: Any) -> bool:
    """Whether ``value`` has the type and length a verifier argument of ``kind`` needs."""
    if kind == "name":
        return value in ("sha256", "blake3") and type(value) is str
    if kind == "size":
        return type(value) is int and 0 <= value < 2**64
    if kind == "digest":
        return type(value) is bytes and len(value) == 32
    return type(value) in (list, tuple) and all(well_typed("digest", p) for p in value)


@settings(max_examples=300, deadline=None)
@given(position=st.integers(0, 5), junk=JUNK, use_consistency=st.booleans())
def test_mmr_verifiers_reject_one_bad_argument(
    position: int, junk: Any, use_consistency: bool
) -> None:
    """M3: a valid call with any one argument replaced by a value of the wrong type or length
    returns False and never raises."""
    mmr = build("sha256", 7)
    if use_consistency:
        good: list[Any] = ["sha256", 3, 7, mmr.root_at(3), mmr.root(), mmr.consistency_proof(3)]
        kinds = ["name", "size", "size", "digest", "digest", "proof"]
        verify: Callable[..., bool] = verify_consistency
    else:
        good = ["sha256", 2, 7, mmr.leaf_hash(leaf_data(2)), mmr.inclusion_proof(2), mmr.root()]
        kinds = ["name", "size", "size", "digest", "proof", "digest"]
        verify = verify_inclusion
    assert verify(*good) is True
    args = list(good)
    args[position] = junk
    if not well_typed(kinds[position], junk):
        assert verify(*args) is False
    else:
        assert verify(*args) in (True, False)


def test_verifiers_reject_huge_sizes_and_long_proofs() -> None:
    """M3: sizes at or beyond 2**64, bool sizes, and proofs longer than any u64-sized tree
    needs are rejected quickly; the largest u64 size is still accepted as an input."""
    h = HASHES["sha256"]
    leaf, root = h(b"\x00"), h(b"")
    assert verify_inclusion("sha256", 0, 2**64, leaf, [leaf] * 64, root) is False
    assert verify_inclusion("sha256", True, 2, leaf, [leaf], root) is False
    assert verify_inclusion("sha256", 0, 2**64 - 1, leaf, [leaf] * 64, root) is False
    assert verify_inclusion("sha256", 0, 2**64 - 1, leaf, [leaf] * 10**5, root) is False
    assert verify_consistency("sha256", 1, 2**64 - 1, leaf, root, [leaf] * 10**5) is False
    assert verify_consistency("sha256", 2**64, 2**64, root, root, []) is False
    assert verify_consistency("sha256", 5, 4, root, root, [leaf]) is False


def test_consistency_edge_cases() -> None:
    """The documented edge cases: equal sizes need an empty proof and equal roots; an empty
    old tree needs an empty proof and old_root == H(b""); 0 < old < new needs a proof."""
    h = HASHES["blake3"]
    mmr = build("blake3", 4)
    r2, r4 = mmr.root_at(2), mmr.root()
    assert verify_consistency("blake3", 4, 4, r4, r4, []) is True
    assert verify_consistency("blake3", 4, 4, r4, r2, []) is False
    assert verify_consistency("blake3", 4, 4, r4, r4, [r4]) is False
    assert verify_consistency("blake3", 0, 0, h(b""), h(b""), []) is True
    assert verify_consistency("blake3", 0, 0, r4, r4, []) is False
    assert verify_consistency("blake3", 0, 4, h(b""), r4, []) is True
    assert verify_consistency("blake3", 0, 4, r2, r4, []) is False
    assert verify_consistency("blake3", 0, 4, h(b""), r4, [r2]) is False
    assert verify_consistency("blake3", 2, 4, r2, r4, []) is False
    assert verify_consistency("blake3", 2, 4, r2, r4, mmr.consistency_proof(2)) is True


# --------------------------------------------------------- OverallRoot, keys, surface


def test_overall_root_layout() -> None:
    """OverallRoot = H("cortexgraph/root/v1" || u64be(size) || mmr_root || smt_root)."""
    a, b = bytes(range(32)), bytes(range(32, 64))
    for hash_name, h in HASHES.items():
        expected = h(b"cortexgraph/root/v1" + (258).to_bytes(8, "big") + a + b)
        assert overall_root(hash_name, 258, a, b) == expected
    assert overall_root("blake3", 0, a, b) != overall_root("blake3", 1, a, b)
    for bad in [(-1, a, b), (2**64, a, b), (1, a[:31], b), (1, a, None), (True, a, b)]:
        with pytest.raises(ValidationError):
            overall_root("blake3", *bad)  # type: ignore[arg-type]


def test_smt_key_layout_and_length_prefix() -> None:
    """smt_key = H("cortexgraph/smt/key" || u16be(len(ns)) || ns || id); the length prefix
    keeps ("a", b"bc") and ("ab", b"c") apart."""
    mid = bytes(range(16))
    expected = hashlib.sha256(b"cortexgraph/smt/key" + b"\x00\x07" + "défaut".encode() + mid)
    assert smt_key("sha256", "défaut", mid) == expected.digest()
    assert smt_key("blake3", "a", b"bc") != smt_key("blake3", "ab", b"c")
    assert len(smt_key("blake3", "", b"")) == 32
    for ns, memory_id in [("\ud800", mid), ("x" * 65536, mid), (b"ns", mid), ("ns", "id")]:
        with pytest.raises(ValidationError):
            smt_key("blake3", ns, memory_id)  # type: ignore[arg-type]


def test_public_module_reexports_core() -> None:
    """cortexgraph.merkle exports the public names of core.mmr and core.smt, core.roots's
    overall_root and the memory-proof API of core.commitments, sorted, as the same objects."""
    from cortexgraph.core import commitments

    proof_api = ["MemoryProof", "head_commitment", "verify_memory_proof"]
    sources = {name: module for module in (mmr, smt) for name in module.__all__}
    sources |= {"overall_root": merkle} | {name: commitments for name in proof_api}
    assert public.__all__ == sorted(public.__all__) == sorted(sources)
    for name in public.__all__:
        assert getattr(public, name) is getattr(sources[name], name)
    for name in [
        "MMR",
        "verify_inclusion",
        "verify_consistency",
        "SparseMerkleTree",
        "verify_smt",
        "overall_root",
        "smt_key",
    ]:
        assert name in public.__all__


def test_public_module_doctest_runs() -> None:
    """The usage example in cortexgraph.merkle's docstring runs and passes."""
    result = doctest.testmod(public, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0


if __name__ == "__main__":
    write_fixtures()
    sys.exit(0)
