"""Ed25519 keys and signed checkpoints (the ``sign`` extra: the ``cryptography`` package).

A store's owner holds a :class:`SigningKey` (outside the store: ``cortexgraph keygen``
writes it to a file of its own, readable by its owner only) and publishes its
:class:`VerifierKey`. ``cx.snapshot(sign_with=key)`` stores a checkpoint of the store's
OverallRoot signed with it, and a scope bundle may carry one, so a sub-agent needs only the
verifier key. The note format is in :mod:`cortexgraph.core.checkpoint`.

Key texts are those of Go's ``golang.org/x/mod/sumdb/note`` package, so keys made here work
there and the other way round::

    PRIVATE+KEY+<name>+<key ID, 8 hex digits>+<base64(0x01 || 32-byte Ed25519 seed)>
    <name>+<key ID, 8 hex digits>+<base64(0x01 || 32-byte Ed25519 public key)>

>>> key = SigningKey.generate("example.com/agent")
>>> note = sign_checkpoint(key, 3, bytes(32))
>>> print(note.split("\\n\\n")[0])
example.com/agent
3
AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
>>> verify_checkpoint(note, key.verifier).size
3
"""

from __future__ import annotations

import base64
import binascii
from types import SimpleNamespace
from typing import Any

import attrs

from .core.checkpoint import (
    ED25519_TYPE,
    KEY_ID_SIZE,
    Checkpoint,
    check_key_name,
    checkpoint_text,
    key_id,
    parse_checkpoint_text,
    signature_line,
    split_note,
)
from .errors import MissingExtraError, ValidationError, VerificationError

__all__ = ["SigningKey", "VerifierKey", "sign_checkpoint", "verify_checkpoint"]

_PRIVATE = "PRIVATE+KEY+"
_KEY_SIZE = 32
_SIGNATURE_SIZE = 64


def _crypto() -> Any:
    """The parts of ``cryptography`` used here (a namespace), imported on first use."""
    try:
        from cryptography import exceptions
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:
        raise MissingExtraError(
            "signing and checking checkpoints needs the 'sign' extra (the cryptography"
            " package is missing): pip install 'cortexgraph[sign]'",
            extra="sign",
        ) from exc
    return SimpleNamespace(
        ed25519=ed25519,
        serialization=serialization,
        InvalidSignature=exceptions.InvalidSignature,
    )


def _key_parts(text: object, what: str) -> tuple[str, bytes, bytes]:
    """``(name, key ID, key bytes)`` of ``<name>+<hex ID>+<base64(0x01 || key)>``."""
    if type(text) is not str:
        raise ValidationError(f"the {what} must be text", field="key")
    parts = text.strip().split("+", 2)  # the base64 key may hold "+" itself
    if len(parts) != 3:
        raise ValidationError(f"the {what} is not '<name>+<key ID>+<key>'", field="key")
    name, hex_id, encoded = parts
    check_key_name(name, "key")
    try:
        kid = bytes.fromhex(hex_id) if len(hex_id) == 2 * KEY_ID_SIZE else b""
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (ValueError, binascii.Error, UnicodeEncodeError):
        kid, raw = b"", b""
    if len(kid) != KEY_ID_SIZE or len(raw) != 1 + _KEY_SIZE or raw[:1] != ED25519_TYPE:
        raise ValidationError(
            f"the {what} is malformed (an 8-hex-digit key ID and base64 of an Ed25519 key"
            " expected)",
            field="key",
        )
    return name, kid, raw[1:]


@attrs.frozen(repr=False)
class VerifierKey:
    """The public half of a :class:`SigningKey`: checks checkpoints signed with it.

    Attributes:
        name: the key's name (the origin line of the checkpoints it signs).
        public_key: the 32-byte Ed25519 public key.
    """

    name: str
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        """The 4-byte signed-note key ID."""
        return key_id(self.name, self.public_key)

    @classmethod
    def from_text(cls, text: str) -> VerifierKey:
        """Read a verifier key (``<name>+<key ID>+<base64 key>``, as ``.pub`` files hold).

        Raises:
            ValidationError: malformed, or the key ID does not match the name and key.
        """
        name, kid, public = _key_parts(text, "verifier key")
        key = cls(name, public)
        if key.key_id != kid:
            raise ValidationError("the verifier key's ID does not match its name and key",
                                  field="key")
        return key

    def to_text(self) -> str:
        """The key as ``<name>+<key ID>+<base64 key>`` (no newline)."""
        encoded = base64.b64encode(ED25519_TYPE + self.public_key).decode()
        return f"{self.name}+{self.key_id.hex()}+{encoded}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        crypto = _crypto()
        if len(signature) != _SIGNATURE_SIZE:
            return False
        try:
            public = crypto.ed25519.Ed25519PublicKey.from_public_bytes(self.public_key)
            public.verify(signature, message)
        except (crypto.InvalidSignature, ValueError):
            return False
        return True

    def __repr__(self) -> str:
        return f"VerifierKey({self.to_text()!r})"


@attrs.frozen(repr=False)
class SigningKey:
    """An Ed25519 key that signs checkpoints under ``name``.

    Keep it outside the store (``cortexgraph keygen`` writes it to a file only its owner
    can read); publish :attr:`verifier`. ``repr`` never shows the secret.

    Attributes:
        name: the key's name, e.g. ``example.com/agent``; no spaces or ``+``.
        seed: the 32-byte Ed25519 private key (RFC 8032 seed).
    """

    name: str
    seed: bytes

    @classmethod
    def generate(cls, name: str) -> SigningKey:
        """A new random key named ``name``.

        Raises:
            ValidationError: a name with spaces, ``+`` or control characters, or empty.
            MissingExtraError: the ``sign`` extra is not installed.
        """
        check_key_name(name)
        crypto = _crypto()
        form = crypto.serialization
        private = crypto.ed25519.Ed25519PrivateKey.generate()
        seed = private.private_bytes(
            form.Encoding.Raw, form.PrivateFormat.Raw, form.NoEncryption()
        )
        return cls(name, seed)

    @classmethod
    def from_text(cls, text: str) -> SigningKey:
        """Read a key from its text (``PRIVATE+KEY+<name>+<key ID>+<base64 seed>``).

        Raises:
            ValidationError: malformed, or the key ID does not match the key.
        """
        if type(text) is not str or not text.strip().startswith(_PRIVATE):
            raise ValidationError("a signing key starts with 'PRIVATE+KEY+'", field="key")
        name, kid, seed = _key_parts(text.strip()[len(_PRIVATE) :], "signing key")
        key = cls(name, seed)
        if key.verifier.key_id != kid:
            raise ValidationError("the signing key's ID does not match its name and key",
                                  field="key")
        return key

    def to_text(self) -> str:
        """The key as ``PRIVATE+KEY+<name>+<key ID>+<base64 seed>`` (no newline)."""
        encoded = base64.b64encode(ED25519_TYPE + self.seed).decode()
        return f"{_PRIVATE}{self.name}+{self.verifier.key_id.hex()}+{encoded}"

    @property
    def verifier(self) -> VerifierKey:
        """The public key, to hand to whoever checks this key's checkpoints."""
        form = _crypto().serialization
        public = self._private().public_key().public_bytes(
            form.Encoding.Raw, form.PublicFormat.Raw
        )
        return VerifierKey(self.name, public)

    def sign(self, message: bytes) -> bytes:
        """The Ed25519 signature of ``message`` (deterministic: RFC 8032)."""
        signature: bytes = self._private().sign(message)
        return signature

    def _private(self) -> Any:
        return _crypto().ed25519.Ed25519PrivateKey.from_private_bytes(self.seed)

    def __repr__(self) -> str:
        return f"SigningKey(name={self.name!r}, <secret>)"


def sign_checkpoint(key: SigningKey, size: int, root: bytes, *, note: str | None = None) -> str:
    """A checkpoint of ``(size, root)`` signed with ``key``, its origin the key's name.

    With ``note`` (a checkpoint of the same size and root), ``key``'s signature line is
    added to it (a cosignature), unless the note already holds one from this key.

    Raises:
        ValidationError: a bad key, size or root. VerificationError: ``note`` is malformed
            or is a checkpoint of another size or root.
    """
    if type(key) is not SigningKey:
        raise ValidationError("must be a cortexgraph.SigningKey", field="sign_with")
    if note is None:
        text = checkpoint_text(key.name, size, root)
        lines = ""
    else:
        text, signatures = split_note(note)
        if parse_checkpoint_text(text)[1:] != (size, root):
            raise VerificationError("the note is a checkpoint of another size or root")
        kid = key.verifier.key_id
        if any(s.name == key.name and s.key_id == kid for s in signatures):
            return note
        lines = note[len(text) + 1 :]
    verifier = key.verifier
    line = signature_line(key.name, verifier.key_id, key.sign(text.encode()))
    return f"{text}\n{lines}{line}"


def verify_checkpoint(note: object, key: VerifierKey) -> Checkpoint:
    """Check a signed checkpoint with ``key`` and return what it commits to.

    As the signed-note specification asks: signature lines of other keys are ignored,
    every line of ``key`` (same name and key ID) must verify, and at least one must.

    Raises:
        VerificationError: the note does not parse, holds no signature of ``key``, or a
            signature of ``key`` does not verify (a flipped bit anywhere in the text or
            the signature).
        ValidationError: ``key`` is not a :class:`VerifierKey`.
    """
    if type(key) is not VerifierKey:
        raise ValidationError("must be a cortexgraph.VerifierKey", field="key")
    text, signatures = split_note(note)
    kid = key.key_id
    mine = [s for s in signatures if s.name == key.name and s.key_id == kid]
    if not mine:
        raise VerificationError(f"the checkpoint carries no signature of key {key.to_text()}")
    message = text.encode()
    if not all(key.verify(message, s.signature) for s in mine):
        raise VerificationError(f"a signature of key {key.name} does not verify")
    origin, size, root = parse_checkpoint_text(text)
    full = note.decode() if isinstance(note, bytes) else str(note)
    return Checkpoint(origin, size, root, full)
