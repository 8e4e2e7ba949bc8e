"""Signed checkpoints: C2SP tlog-checkpoint text signed as a C2SP signed note (Ed25519),
stored by ``snapshot(sign_with=...)``, checked with only the public key, and carried by
scope bundles."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

import cortexgraph as cg
from cortexgraph.core.checkpoint import signature_line, split_note
from cortexgraph.core.codec import decode_unchecked, encode
from cortexgraph.signing import sign_checkpoint

T0 = 1_700_000_000_000
VECTORS = Path(__file__).resolve().parent.parent / "fixtures" / "vectors"

# The grammar of the two specifications, written out independently of the implementation:
# tlog-checkpoint's three note-text lines, the blank line, and signed-note signature lines.
C2SP_CHECKPOINT = re.compile(
    r"(?P<origin>[^\s+\x00-\x1f]+)\n"
    r"(?P<size>0|[1-9][0-9]*)\n"
    r"(?P<root>[A-Za-z0-9+/]{43}=)\n"
    r"\n"
    r"(?P<signatures>(?:\u2014 [^\s+]+ [A-Za-z0-9+/]+={0,2}\n)+)"
)


@pytest.fixture(scope="module")
def key() -> cg.SigningKey:
    return cg.SigningKey.generate("example.com/agent")


def _store(path: Path) -> cg.Cortex:
    cx = cg.open(path, "agent", clock=cg.ManualClock(T0))
    for i, text in enumerate(["Deploys go through CI", "Never push to main", "Lunch at noon"]):
        cx.write(cg.Fact(text=text, tags=["deploy" if i < 2 else "office"]), at=T0 + i)
    return cx


def test_a_checkpoint_parses_with_the_c2sp_grammar(tmp_path: Path, key: cg.SigningKey) -> None:
    """snapshot(sign_with=key) stores a note that matches the specifications' grammar:
    origin = the key's name, size = the journal size, root = base64 of the OverallRoot,
    one signature line whose first 4 bytes are SHA-256(name | 0x0A | 0x01 | public key)
    and whose rest is an Ed25519 signature (checked with cryptography directly) of the
    note text including its final newline."""
    with _store(tmp_path) as cx:
        manifest = cx.snapshot(sign_with=key)
        [checkpoint] = cx.checkpoints()
    note = checkpoint.note
    match = C2SP_CHECKPOINT.fullmatch(note)
    assert match is not None, note
    assert match["origin"] == "example.com/agent" == checkpoint.origin
    assert int(match["size"]) == manifest.seq == 3 == checkpoint.size
    assert base64.b64decode(match["root"]) == manifest.overall_root == checkpoint.root
    [line] = match["signatures"].splitlines()
    dash, name, blob = line.split(" ")
    raw = base64.b64decode(blob)
    public = key.verifier.public_key
    assert (dash, name) == ("\u2014", "example.com/agent")
    assert raw[:4] == hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4]
    text = note[: match.start("signatures") - 1]
    assert text.endswith(match["root"] + "\n")
    Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], text.encode())  # raises if bad


def test_the_reference_implementations_known_answers() -> None:
    """The known answers of Go's sumdb/note package and of the signed-note specification
    (fixtures/vectors/signed_note.json): key texts parse, the key IDs match, signing the
    Go example reproduces its note byte for byte (Ed25519 is deterministic), and both
    notes' signatures verify."""
    vectors = json.loads((VECTORS / "signed_note.json").read_text())
    go, spec = vectors["go"], vectors["spec"]
    signer = cg.SigningKey.from_text(go["signer_key"])
    verifier = cg.VerifierKey.from_text(go["verifier_key"])
    assert signer.verifier == verifier and signer.to_text() == go["signer_key"]
    assert verifier.to_text() == go["verifier_key"] and verifier.key_id.hex() == "c74f20a3"
    line = signature_line(signer.name, verifier.key_id, signer.sign(go["text"].encode()))
    assert go["text"] + "\n" + line == go["note"]
    for vector, vkey in ((go, verifier), (spec, cg.VerifierKey.from_text(spec["verifier_key"]))):
        text, [signature] = split_note(vector["note"])
        assert text == vector["text"] and signature.key_id == vkey.key_id
        assert vkey.verify(text.encode(), signature.signature)


def test_every_flipped_bit_of_a_note_is_rejected(key: cg.SigningKey) -> None:
    """Flipping any one bit of a signed checkpoint, in its text or in its signature line,
    makes verify_checkpoint raise VerificationError (never accept, never another error)."""
    note = sign_checkpoint(key, 42, hashlib.sha256(b"root").digest())
    assert cg.verify_checkpoint(note, key.verifier).size == 42
    data = note.encode()
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(cg.VerificationError):
            cg.verify_checkpoint(bytes(flipped), key.verifier)


def test_the_wrong_key_is_rejected(key: cg.SigningKey) -> None:
    """A checkpoint does not verify with another key: one of the same name (same name,
    different key ID), one of another name, nor one that claims this key's name and ID
    with another public key; a note with a second, unknown signer still verifies."""
    note = sign_checkpoint(key, 7, bytes(range(32)))
    same_name = cg.SigningKey.generate(key.name)
    other = cg.SigningKey.generate("example.com/other")
    impostor = cg.VerifierKey(key.name, same_name.verifier.public_key)
    for verifier in (same_name.verifier, other.verifier, impostor):
        with pytest.raises(cg.VerificationError):
            cg.verify_checkpoint(note, verifier)
    cosigned = sign_checkpoint(other, 7, bytes(range(32)), note=note)
    assert cg.verify_checkpoint(cosigned, key.verifier).root == bytes(range(32))
    assert cg.verify_checkpoint(cosigned, other.verifier).size == 7


def test_malformed_notes_and_keys_are_typed_errors(key: cg.SigningKey) -> None:
    """Notes that break the grammar (no blank line, no signature, a size with a leading
    zero, a short root, a control character) raise VerificationError; malformed key
    texts and key names raise ValidationError naming the key."""
    good = sign_checkpoint(key, 5, bytes(32))
    text, sig = good.split("\n\n")
    bad_notes = [
        text + "\n" + sig,
        text + "\n\n",
        text.replace("\n5\n", "\n05\n") + "\n\n" + sig,
        text.replace("AAAA=", "AA==") + "\n\n" + sig,
        text.replace("agent", "ag\x07ent") + "\n\n" + sig,
        "",
        b"\xff\xfe",
    ]
    for note in bad_notes:
        with pytest.raises(cg.VerificationError):
            cg.verify_checkpoint(note, key.verifier)
    for text_key in ("", "name+1234", "PRIVATE+KEY+x+zz+AAAA", key.verifier.to_text() + "x"):
        with pytest.raises(cg.ValidationError):
            cg.VerifierKey.from_text(text_key)
    with pytest.raises(cg.ValidationError):
        cg.SigningKey.from_text(key.verifier.to_text())
    for name in ("", "a b", "a+b", "a\nb"):
        with pytest.raises(cg.ValidationError) as info:
            cg.SigningKey.generate(name)
        assert info.value.field == "name"
    assert "<secret>" in repr(key) and key.seed.hex() not in repr(key)


def test_snapshot_signing_cosigns_and_lists(tmp_path: Path, key: cg.SigningKey) -> None:
    """Signing twice at one seq keeps one note; a second key adds its signature to it;
    checkpoints(key=...) returns the ones that key signed, each checked, and raises when
    there are none or when a stored note was tampered with (its size changed, or bytes
    that are not UTF-8), and signing over a damaged note is refused."""
    other = cg.SigningKey.generate("example.com/witness")
    stranger = cg.SigningKey.generate("example.com/stranger")
    with _store(tmp_path) as cx:
        first = cx.snapshot(sign_with=key)
        assert cx.snapshot(sign_with=key) == first and len(cx.checkpoints()) == 1
        cx.snapshot(sign_with=other)
        [both] = cx.checkpoints()
        assert both.note.count("\u2014 ") == 2
        cx.write(cg.Fact(text="later", tags=["x"]), at=T0 + 10)
        cx.snapshot(sign_with=key)
        assert [c.size for c in cx.checkpoints(key=key.verifier)] == [3, 4]
        assert [c.size for c in cx.checkpoints(key=other.verifier)] == [3]
        with pytest.raises(cg.VerificationError, match="no checkpoint signed"):
            cx.checkpoints(key=stranger.verifier)
        with pytest.raises(cg.ValidationError):
            cx.snapshot(sign_with="PRIVATE+KEY+...")  # type: ignore[arg-type]
        forged = both.note.replace("\n3\n", "\n4\n")
        cx._handle.env.write_small(
            lambda txn: txn.put("meta", b"checkpoint" + (3).to_bytes(8, "big"), forged.encode())
        )
        with pytest.raises(cg.VerificationError, match="seq 3"):
            cx.checkpoints(key=key.verifier)
        cx._handle.env.write_small(
            lambda txn: txn.put("meta", b"checkpoint" + (4).to_bytes(8, "big"), b"\xff\n")
        )
        with pytest.raises(cg.VerificationError, match="seq 4 is not UTF-8"):
            cx.snapshot(sign_with=other)
        with pytest.raises(cg.VerificationError, match="seq 3"):
            cx.checkpoints()


def test_a_bundle_with_a_checkpoint_verifies_with_only_the_public_key(
    tmp_path: Path, key: cg.SigningKey
) -> None:
    """A scope signed with sign_with verifies with verify_scope(blob, key=verifier) and
    no root (the store deleted); it fails with another key, when its checkpoint is of
    another root, and when the bundle carries no checkpoint. A bundle made without the
    new options has exactly the old five fields."""
    with _store(tmp_path / "s") as cx:
        blob = cx.scope(cg.Q.tag("deploy"), limit=10, sign_with=key)
        plain = cx.scope(cg.Q.tag("deploy"), limit=10)
        root = cx.overall_root()
    shutil.rmtree(tmp_path / "s")
    view = cg.verify_scope(blob, key=key.verifier)
    assert len(view) == 2 and view.overall_root == root
    assert view.checkpoint is not None and view.checkpoint.root == root
    assert set(decode_unchecked(plain, what="bundle")) == {
        "v", "manifest", "anchor", "records", "edges"}
    with pytest.raises(cg.VerificationError):
        cg.verify_scope(blob, key=cg.SigningKey.generate(key.name).verifier)
    with pytest.raises(cg.VerificationError, match="no checkpoint"):
        cg.verify_scope(plain, key=key.verifier)
    value = decode_unchecked(blob, what="bundle")
    value["checkpoint"] = sign_checkpoint(key, value["manifest"]["seq"], bytes(32))
    with pytest.raises(cg.VerificationError, match="another seq or root"):
        cg.verify_scope(encode(value), key=key.verifier)
    with pytest.raises(cg.ValidationError):
        cg.verify_scope(blob, key=key)  # type: ignore[arg-type]


def test_a_bundle_with_a_consistency_proof_extends_an_older_trusted_root(
    tmp_path: Path,
) -> None:
    """A sub-agent that trusts the root at seq 2 accepts a newer bundle that carries a
    consistency proof from seq 2; it refuses the same bundle without the proof, and one
    whose proof starts at another seq."""
    with _store(tmp_path) as cx:
        old = cx.prove_consistency(2).old_root
        cx.write(cg.Fact(text="Rollbacks need a ticket", tags=["deploy"]), at=T0 + 20)
        blob = cx.scope(cg.Q.tag("deploy"), limit=10, prove_from=2)
        wrong = cx.scope(cg.Q.tag("deploy"), limit=10, prove_from=1)
        plain = cx.scope(cg.Q.tag("deploy"), limit=10)
        for bad in (9, -1, "2"):
            with pytest.raises(cg.ValidationError) as info:
                cx.scope(cg.Q.tag("deploy"), limit=10, prove_from=bad)  # type: ignore[arg-type]
            assert info.value.field == "prove_from"
    view = cg.verify_scope(blob, trusted_root=old)
    assert len(view) == 3 and view.consistency is not None and view.consistency.old_size == 2
    for bad in (plain, wrong):
        with pytest.raises(cg.VerificationError, match="not the trusted root"):
            cg.verify_scope(bad, trusted_root=old)


# ------------------------------------------------------------------------------ the CLI


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from cortexgraph.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_keygen_writes_a_private_key_file_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """keygen writes KEYFILE with mode 0600 and KEYFILE.pub, which parse as a key pair;
    a second keygen to the same file fails with exit 2 and leaves the key unchanged; a
    key file inside a store is refused (exit 1)."""
    keyfile = tmp_path / "keys" / "agent.key"
    keyfile.parent.mkdir()
    code, out, _ = _run(capsys, "keygen", str(keyfile), "--name", "example.com/a", "--json")
    assert code == 0 and json.loads(out)["name"] == "example.com/a"
    assert keyfile.stat().st_mode & 0o777 == 0o600
    key = cg.SigningKey.from_text(keyfile.read_text())
    public = cg.VerifierKey.from_text((tmp_path / "keys" / "agent.key.pub").read_text())
    assert key.verifier == public and key.name == "example.com/a"
    before = keyfile.read_bytes()
    code, _, err = _run(capsys, "keygen", str(keyfile))
    assert code == 2 and "exists" in err and keyfile.read_bytes() == before
    with cg.open(tmp_path / "root", "agent"):
        pass
    code, _, err = _run(capsys, "keygen", str(tmp_path / "root" / "agent" / "k.key"))
    assert code == 1 and "inside the store" in err


def test_verify_key_checks_the_signed_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`verify ROOT --key PUB` exits 0 when each actor's checkpoints signed with the key
    verify, 1 with another key (no checkpoint of it) and 1 when a stored checkpoint was
    altered; `scope verify --key` accepts a bundle exported with `--sign`."""
    keyfile = tmp_path / "a.key"
    assert _run(capsys, "keygen", str(keyfile), "--actor", "agent")[0] == 0
    other = tmp_path / "b.key"
    assert _run(capsys, "keygen", str(other))[0] == 0
    store = ["--root", str(tmp_path / "root"), "--actor", "agent"]
    assert _run(capsys, "remember", "Deploys go through CI", "--tag", "deploy", *store)[0] == 0
    assert _run(capsys, "snapshot", "--sign", str(keyfile), *store)[0] == 0
    code, out, _ = _run(capsys, "verify", str(tmp_path / "root"), "--key", f"{keyfile}.pub",
                        "--json")
    assert code == 0 and json.loads(out)["actors"][0]["checkpoints"]["count"] == 1
    code, out, _ = _run(capsys, "verify", str(tmp_path / "root"), "--key", f"{other}.pub")
    assert code == 1 and "no checkpoint signed" in out
    bundle = tmp_path / "scope.bin"
    assert _run(capsys, "scope", "export", str(bundle), "--tag", "deploy", "--sign",
                str(keyfile), *store)[0] == 0
    assert _run(capsys, "scope", "verify", str(bundle), "--key", f"{keyfile}.pub")[0] == 0
    assert _run(capsys, "scope", "verify", str(bundle), "--key", f"{other}.pub")[0] == 1
    with cg.open(tmp_path / "root", "agent") as cx:
        note = cx.checkpoints()[0].note
        cx._handle.env.write_small(lambda txn: txn.put(
            "meta", b"checkpoint" + (1).to_bytes(8, "big"), note.replace("\n1\n", "\n2\n").encode()
        ))
    code, out, _ = _run(capsys, "verify", str(tmp_path / "root"), "--key", f"{keyfile}.pub")
    assert code == 1 and "FAILED" in out


def test_without_the_sign_extra_signing_says_which_extra(
    monkeypatch: pytest.MonkeyPatch, key: cg.SigningKey
) -> None:
    """With cryptography not importable, making, using and checking keys raise
    MissingExtraError naming the 'sign' extra (an ImportError too), not a bare
    ImportError from deep inside."""
    for name in ("cryptography", "cryptography.exceptions", "cryptography.hazmat.primitives",
                 "cryptography.hazmat.primitives.asymmetric"):
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: not importable
    for action in (lambda: cg.SigningKey.generate("example.com/a"),
                   lambda: sign_checkpoint(key, 1, bytes(32)),
                   lambda: key.verifier.verify(b"text", bytes(64))):
        with pytest.raises(cg.MissingExtraError) as info:
            action()
        assert info.value.extra == "sign" and "cortexgraph[sign]" in str(info.value)


def test_a_bundle_made_before_the_optional_fields_still_verifies(tmp_path: Path) -> None:
    """fixtures/scope/bundle-v1.cbor, made before bundles had optional fields, verifies
    against its root, and the same store's journal exports it byte for byte today."""
    blob = (Path(__file__).resolve().parent.parent / "fixtures" / "scope"
            / "bundle-v1.cbor").read_bytes()
    root = bytes.fromhex("bb1d5fdbee2712e683d0e7d7e444155e9aaca56a9bff0e39789c1f3b5e536f07")
    view = cg.verify_scope(blob, trusted_root=root)
    assert (len(view), len(view.edges), view.seq) == (2, 1, 3)
    assert view.consistency is None and view.checkpoint is None
    with cg.open(tmp_path, "agent", clock=cg.ManualClock(T0)) as cx:
        a = cx.write(cg.Fact(text="Deploys go through CI", tags=["deploy"]))
        b = cx.write(cg.Constraint(text="Never push to main", tags=["deploy"]))
        cx.add_edge(a, b, "relates_to")
        assert cx.scope(cg.Q.tag("deploy"), limit=10) == blob
