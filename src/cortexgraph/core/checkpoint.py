"""Checkpoints in the C2SP ``tlog-checkpoint`` form, as C2SP ``signed-note`` text.

A checkpoint of a store is a signed note whose text is three lines::

    <origin>                       the key's name: who signs for the store
    <journal size>                 ASCII decimal, no leading zeros ("0" when empty)
    <base64 OverallRoot>           standard base64 (RFC 4648 section 4) of the 32 bytes

followed by a blank line and one or more signature lines::

    — <key name> <base64(key ID (4 bytes, big-endian) || Ed25519 signature (64 bytes))>

where ``key ID = SHA-256(key name || 0x0A || 0x01 || 32-byte public key)[:4]`` (0x01 is
the signed-note type byte of Ed25519) and the signature is over the note text including
its final newline. The root line holds the OverallRoot, not the bare RFC 6962 root of the
journal: the OverallRoot commits to that root (the MMR root) and to every memory's head.

This module is the grammar only (pure: no keys are read and nothing is signed here; the
Ed25519 operations are in :mod:`cortexgraph.signing`).

Invariant:

N1  :func:`split_note` and :func:`parse_checkpoint_text` accept exactly the grammar of
    the two specifications (UTF-8, no control characters but newline, the text ends in a
    newline, the last blank line separates it from one or more well-formed signature
    lines; at least three non-empty text lines, a canonical size, a 32-byte root, any
    extension lines non-empty) and raise :class:`VerificationError` naming what is wrong
    otherwise.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

import attrs

from ..errors import ValidationError, VerificationError
from .hashing import DIGEST_SIZE

__all__ = [
    "ED25519_TYPE",
    "KEY_ID_SIZE",
    "MAX_SIGNATURES",
    "Checkpoint",
    "NoteSignature",
    "check_key_name",
    "checkpoint_text",
    "key_id",
    "parse_checkpoint_text",
    "signature_line",
    "split_note",
]

ED25519_TYPE = b"\x01"
KEY_ID_SIZE = 4
#: signature lines accepted in one note (the specification asks for at least 16)
MAX_SIGNATURES = 64
_DASH = "\u2014 "
_SIZE = re.compile(r"0|[1-9][0-9]{0,19}")


@attrs.frozen
class Checkpoint:
    """A checkpoint whose signature has been checked (or that was just signed).

    Attributes:
        origin: the first line: the name of the key that signs for the store.
        size: the journal size (the seq of the last entry) the root was taken at.
        root: the 32-byte OverallRoot at that size.
        note: the whole signed note, text and signature lines.
    """

    origin: str
    size: int
    root: bytes
    note: str


@attrs.frozen
class NoteSignature:
    """One signature line of a note: the key's name, its 4-byte ID, the signature."""

    name: str
    key_id: bytes
    signature: bytes


def check_key_name(name: object, field: str = "name") -> str:
    """A valid signed-note key name: non-empty, without spaces, ``+`` or control characters.

    Raises:
        ValidationError: otherwise (naming ``field``).
    """
    if type(name) is not str or not name:
        raise ValidationError("a key name must be a non-empty string", field=field)
    if any(c.isspace() or c == "+" or ord(c) < 0x20 or c == "\x7f" for c in name):
        raise ValidationError(
            f"a key name must not contain spaces, '+' or control characters: {name!r}",
            field=field,
        )
    return name


def key_id(name: str, public_key: bytes) -> bytes:
    """The signed-note key ID of an Ed25519 key: ``SHA-256(name | 0x0A | 0x01 | key)[:4]``."""
    return hashlib.sha256(name.encode() + b"\n" + ED25519_TYPE + public_key).digest()[:KEY_ID_SIZE]


def checkpoint_text(origin: str, size: int, root: bytes) -> str:
    """The note text of a checkpoint (three lines, each ending in a newline).

    Raises:
        ValidationError: a bad origin, size or root.
    """
    check_key_name(origin, "origin")
    if type(size) is not int or not 0 <= size < 1 << 64:
        raise ValidationError("must be a u64", field="size")
    if type(root) is not bytes or len(root) != DIGEST_SIZE:
        raise ValidationError(f"must be {DIGEST_SIZE} bytes", field="root")
    return f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n"


def signature_line(name: str, key: bytes, signature: bytes) -> str:
    """One signature line: ``— <name> <base64(key ID | signature)>`` and a newline."""
    return f"{_DASH}{name} {base64.b64encode(key + signature).decode()}\n"


def _b64(text: str, what: str) -> bytes:
    """Strict standard base64: the alphabet, padding, and a canonical encoding."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise VerificationError(f"the {what} is not standard base64") from None
    if base64.b64encode(raw).decode() != text:  # non-zero padding bits: not canonical
        raise VerificationError(f"the {what} is not canonical base64")
    return raw


def split_note(note: object) -> tuple[str, tuple[NoteSignature, ...]]:
    """Split a signed note into its text (with its final newline) and its signatures (N1).

    Raises:
        VerificationError: the note does not follow the signed-note grammar.
    """
    if isinstance(note, bytes):
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError:
            raise VerificationError("the note is not UTF-8") from None
    if type(note) is not str:
        raise VerificationError("the note is not text")
    if any(ord(c) < 0x20 and c != "\n" for c in note) or "\x7f" in note:
        raise VerificationError("the note holds a control character")
    if not note.endswith("\n"):
        raise VerificationError("the note does not end in a newline")
    cut = note.rfind("\n\n")
    if cut < 0:
        raise VerificationError("the note has no blank line before its signatures")
    text, lines = note[: cut + 1], note[cut + 2 :].split("\n")[:-1]
    if not lines:
        raise VerificationError("the note has no signature lines")
    if len(lines) > MAX_SIGNATURES:
        raise VerificationError(f"the note has more than {MAX_SIGNATURES} signatures")
    signatures = []
    for line in lines:
        if not line.startswith(_DASH):
            raise VerificationError("a signature line does not start with an em dash and a space")
        parts = line[len(_DASH) :].split(" ")
        if len(parts) != 2:
            raise VerificationError("a signature line is not '— <name> <signature>'")
        name, encoded = parts
        try:
            check_key_name(name)
        except ValidationError as exc:
            raise VerificationError(f"a signature line names a bad key: {exc}") from None
        raw = _b64(encoded, "signature")
        if len(raw) <= KEY_ID_SIZE:
            raise VerificationError("a signature is too short to hold a key ID")
        signatures.append(NoteSignature(name, raw[:KEY_ID_SIZE], raw[KEY_ID_SIZE:]))
    return text, tuple(signatures)


def parse_checkpoint_text(text: str) -> tuple[str, int, bytes]:
    """``(origin, size, root)`` of a checkpoint's note text (N1).

    Raises:
        VerificationError: fewer than three lines, an empty line, a size with a sign,
            leading zeros or above 2**64 - 1, or a root that is not base64 of 32 bytes.
    """
    if not text.endswith("\n"):
        raise VerificationError("the checkpoint text does not end in a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3 or any(not line for line in lines):
        raise VerificationError("the checkpoint text is not three or more non-empty lines")
    origin, size_line, root_line = lines[:3]
    if not _SIZE.fullmatch(size_line) or int(size_line) >= 1 << 64:
        raise VerificationError(f"the checkpoint size {size_line!r} is not a canonical u64")
    root = _b64(root_line, "root hash")
    if len(root) != DIGEST_SIZE:
        raise VerificationError(f"the checkpoint root is not {DIGEST_SIZE} bytes")
    return origin, int(size_line), root
