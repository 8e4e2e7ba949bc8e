"""Scopes: export, verification without a database, and every kind of tampering."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph import Q
from cortexgraph.core import bundle as core_scope
from cortexgraph.core.codec import decode, decode_unchecked, encode, encode_head

T0 = 1_700_000_000_000


@pytest.fixture
def bundle(tmp_path: Path) -> tuple[bytes, bytes, list[cg.MemoryURI]]:
    """A store of a few related memories; a scope of the deploy ones; the store deleted
    afterwards (verification must need no database)."""
    with cg.open(tmp_path, "agent") as cx:
        ci = cx.write(cg.Fact(text="Deploys go through CI", tags=["deploy"]), at=T0)
        rule = cx.write(cg.Constraint(text="Never push to main", tags=["deploy"]), at=T0 + 1)
        goal = cx.write(cg.Goal(text="Ship v2 by Friday", tags=["deploy"]), at=T0 + 2)
        cx.write(cg.Fact(text="Lunch at noon", tags=["office"]), at=T0 + 3)
        cx.add_edge(ci, rule, "relates_to", at=T0 + 4)
        cx.add_edge(goal, ci, "refines", strength=0.5, at=T0 + 5)
        cx.update(ci, text="Deploys go through the CI pipeline", at=T0 + 6)
        blob = cx.scope(Q.tag("deploy"), limit=10)
        root = cx.overall_root()
    shutil.rmtree(tmp_path)
    return blob, root, [ci, rule, goal]


def test_a_scope_verifies_against_the_root_and_reads_like_a_store(
    bundle: tuple[bytes, bytes, list[cg.MemoryURI]],
) -> None:
    """The bundle verifies against overall_root() with no database; the view holds
    exactly the scoped memories at their head versions and the edges among them, and
    find, keyword recall and context work over it."""
    blob, root, (ci, rule, goal) = bundle
    view = cg.verify_scope(blob, trusted_root=root)
    assert view.overall_root == root and view.actor == "agent"
    assert {r.uri.id for r in view} == {ci.id, rule.id, goal.id}
    texts = {r.memory.text for r in view}
    assert "Deploys go through the CI pipeline" in texts and "Lunch at noon" not in texts
    assert {(e.src.id, e.relation, e.dst.id) for e in view.edges} == {
        (ci.id, "relates_to", rule.id), (goal.id, "refines", ci.id)}
    found = view.find(Q.type(cg.Constraint), limit=5)
    assert [h.record.memory.text for h in found] == ["Never push to main"]
    assert view.recall("CI pipeline")[0][0].uri.id == ci.id
    bundle_ = view.context(query="pipeline", budget_tokens=200)
    assert bundle_.tokens <= 200 and "Never push to main" in bundle_.text


def _flip(blob: bytes, bit: int) -> bytes:
    data = bytearray(blob)
    data[bit // 8] ^= 1 << (bit % 8)
    return bytes(data)


def test_every_single_bit_flip_fails(bundle: tuple[bytes, bytes, list[cg.MemoryURI]]) -> None:
    """Flipping any one bit (1,200 random positions, plus every bit of the first and last
    bytes) makes verification fail with VerificationError, with or without a trusted
    root."""
    blob, root, _ = bundle
    rng = random.Random(11)
    bits = {rng.randrange(len(blob) * 8) for _ in range(1200)} | set(range(8)) | set(
        range(len(blob) * 8 - 8, len(blob) * 8))
    assert len(bits) >= 1000
    for bit in sorted(bits):
        with pytest.raises(cg.VerificationError):
            cg.verify_scope(_flip(blob, bit), trusted_root=root if bit % 2 else None)


def test_truncation_extension_swaps_and_other_roots_fail(
    bundle: tuple[bytes, bytes, list[cg.MemoryURI]],
) -> None:
    """Truncating, appending a byte, swapping two records' proofs, presenting another
    trusted root, and re-encoding with a changed actor each fail."""
    blob, _, _ = bundle
    for cut in (1, len(blob) // 2, len(blob) - 1):
        with pytest.raises(cg.VerificationError):
            cg.verify_scope(blob[:cut], trusted_root=None)
    with pytest.raises(cg.VerificationError):
        cg.verify_scope(blob + b"\x00", trusted_root=None)
    with pytest.raises(cg.VerificationError):
        cg.verify_scope(blob, trusted_root=bytes(32))
    value = decode(blob)
    value["records"][0]["proof"], value["records"][1]["proof"] = (
        value["records"][1]["proof"], value["records"][0]["proof"])
    with pytest.raises(cg.VerificationError, match="not in the tree"):
        cg.verify_scope(encode(value), trusted_root=None)
    value = decode(blob)
    value["manifest"]["actor"] = "someone-else"
    with pytest.raises(cg.VerificationError, match="not written by actor"):
        cg.verify_scope(encode(value), trusted_root=None)
    value = decode(blob)
    value["edges"] = value["edges"][:1] * 2
    with pytest.raises(cg.VerificationError):
        cg.verify_scope(encode(value), trusted_root=None)
    for garbage in (b"", b"\xa0", "text", None):
        with pytest.raises(cg.VerificationError):
            cg.verify_scope(garbage, trusted_root=None)  # type: ignore[arg-type]


def test_the_size_cap_applies_on_both_sides(
    bundle: tuple[bytes, bytes, list[cg.MemoryURI]], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A bundle over the cap is refused by verify and never produced by export."""
    blob, _, _ = bundle
    monkeypatch.setattr(core_scope, "MAX_SCOPE_BYTES", len(blob) - 1)
    with pytest.raises(cg.VerificationError, match="larger than"):
        cg.verify_scope(blob, trusted_root=None)
    with cg.open(tmp_path / "s", "agent") as cx:
        cx.write(cg.Fact(text="x" * len(blob), tags=["big"]))
        with pytest.raises(cg.CortexError, match="more than"):
            cx.scope(Q.tag("big"), limit=1)


def test_scopes_by_uri_list_and_bad_arguments(tmp_path: Path) -> None:
    """A list of URIs scopes exactly those memories; too many for limit, a string or a
    bad limit are ValidationErrors."""
    with cg.open(tmp_path, "agent") as cx:
        a = cx.write(cg.Fact(text="a"))
        b = cx.write(cg.Fact(text="b"))
        view = cg.verify_scope(cx.scope([b], include_edges=False), cx.overall_root())
        assert [r.uri.id for r in view] == [b.id]
        for call, field in [(lambda: cx.scope([a, b], limit=1), "limit"),
                            (lambda: cx.scope(str(a)), "where"),
                            (lambda: cx.scope([a], limit=0), "limit")]:
            with pytest.raises(cg.ValidationError) as info:
                call()
            assert info.value.field == field


def _bytes_item(key: str, value: bytes) -> bytes:
    """The canonical encoding of one map entry ``key: value`` (a byte string)."""
    return encode(key) + encode_head(2, len(value)) + value


def test_non_canonical_encodings_of_a_valid_bundle_fail(
    bundle: tuple[bytes, bytes, list[cg.MemoryURI]],
) -> None:
    """SC1: the same bundle in an encoding that decodes to equal values but is not the
    canonical one fails: a byte string's length in a longer header, a record's keys out
    of order, an indefinite-length list, the version as ``true`` or ``1.0``."""
    blob, root, _ = bundle
    assert cg.verify_scope(blob, trusted_root=root)
    record = decode(blob)["records"][0]
    head = _bytes_item("head", record["head"])
    assert blob.count(head) == 1 and len(record["head"]) < 256
    long_head = encode("head") + b"\x59" + len(record["head"]).to_bytes(2, "big")
    long_head += record["head"]
    id_then_head = _bytes_item("id", record["id"]) + head
    head_then_id = head + _bytes_item("id", record["id"])
    assert blob.count(id_then_head) == 1
    records_key = encode("records") + encode_head(4, len(decode(blob)["records"]))
    assert blob.count(records_key) == 1
    end_of_records = blob.index(encode("manifest"))
    indefinite = (blob[: blob.index(records_key)] + encode("records") + b"\x9f"
                  + blob[blob.index(records_key) + len(records_key) : end_of_records] + b"\xff"
                  + blob[end_of_records:])
    assert blob[:4] == b"\xa5\x61v\x01"
    variants = {
        "long header": blob.replace(head, long_head),
        "keys out of order": blob.replace(id_then_head, head_then_id),
        "indefinite list": indefinite,
        "version true": b"\xa5\x61v\xf5" + blob[4:],
        "version 1.0": b"\xa5\x61v\xf9\x3c\x00" + blob[4:],
    }
    for name, variant in variants.items():
        assert variant != blob, name
        with pytest.raises(cg.VerificationError):
            cg.verify_scope(variant, trusted_root=root)
    for name in ("long header", "keys out of order"):  # equal values, other bytes
        assert decode_unchecked(variants[name]) == decode_unchecked(blob), name
        with pytest.raises(cg.VerificationError, match="canonical"):
            cg.verify_scope(variants[name], trusted_root=root)


_DIGESTS = st.binary(min_size=32, max_size=32)
_BYTES = st.binary(max_size=300)


@settings(max_examples=200, deadline=None)
@given(
    manifest=st.fixed_dictionaries({
        "actor": st.text("abc-", min_size=1, max_size=70), "hash_name": st.sampled_from(
            ["blake3", "sha256"]), "seq": st.integers(0, 2**64 - 1), "mmr_root": _DIGESTS,
        "smt_root": _DIGESTS, "overall_root": _DIGESTS}),
    anchor=st.none() | st.fixed_dictionaries(
        {"entry": _BYTES, "proof": st.lists(_DIGESTS, max_size=40)}),
    records=st.lists(st.fixed_dictionaries(
        {"id": st.binary(min_size=16, max_size=16), "head": _BYTES, "version": st.binary(
            max_size=70_000), "proof": _BYTES}), max_size=30),
    edges=st.lists(st.fixed_dictionaries(
        {"key": st.binary(min_size=34, max_size=34), "record": _BYTES, "proof": _BYTES}),
        max_size=30),
)
def test_canonical_bytes_equal_encode(
    manifest: dict[str, object], anchor: dict[str, object] | None,
    records: list[dict[str, bytes]], edges: list[dict[str, bytes]],
) -> None:
    """The direct encoding the verifier compares a bundle with is exactly ``encode`` of
    the bundle, for any values of the checked shape (byte strings of every header size,
    up to 30 records and edges, 0 to 2**64-1 for seq)."""
    value = {"v": 1, "manifest": manifest, "anchor": anchor, "records": records,
             "edges": edges}
    assert core_scope._canonical_bytes(value) == encode(value)


def test_the_trusted_root_must_be_spelled_out(
    bundle: tuple[bytes, bytes, list[cg.MemoryURI]],
) -> None:
    """Omitting ``trusted_root`` is a ValidationError naming it (a self-consistent bundle
    proves nothing about where it came from); ``trusted_root=None`` checks
    self-consistency only, knowingly; a root that is not 32 bytes is a
    VerificationError."""
    blob, root, _ = bundle
    with pytest.raises(cg.ValidationError, match="None to check only") as info:
        cg.verify_scope(blob)  # type: ignore[call-arg]
    assert info.value.field == "trusted_root"
    assert cg.verify_scope(blob, trusted_root=None).overall_root == root
    assert cg.verify_scope(blob, root).overall_root == root
    for wrong in (root[:31], root.hex(), b""):
        with pytest.raises(cg.VerificationError, match="not 32 bytes"):
            cg.verify_scope(blob, trusted_root=wrong)  # type: ignore[arg-type]
