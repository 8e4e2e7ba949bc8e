"""Canonical CBOR: the only byte encoding cortexgraph writes.

Everything that is hashed or stored — journal entries, memory bodies, derived records —
goes through :func:`encode`. It uses cbor2's canonical mode (RFC 8949 section 4.2.1 as
cbor2 implements it: shortest integer and float forms, definite lengths, map keys in
length-first order, which for the text-only keys we allow equals bytewise order).

Invariant J6: :func:`decode` re-encodes what it decoded and compares; bytes that are not
in canonical form, hold duplicate map keys, invalid UTF-8, tags, or trailing data raise
:class:`~cortexgraph.errors.CorruptionError`. So a decoded value always has exactly one
byte representation, and hashing it is meaningful.

What :func:`encode` accepts (anything else is a ``ValidationError``):

    None, bool, int (-2**64 .. 2**64-1), float (finite), str (valid UTF-8), bytes,
    list/tuple of those, dict with str keys of those.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import cbor2

from ..errors import CorruptionError, ValidationError

__all__ = ["decode", "encode", "encode_trusted"]

_INT_MIN = -(2**64)
_INT_MAX = 2**64 - 1


def _check(value: Any, path: str) -> None:
    """Reject values that have no single canonical encoding or that we never store."""
    kind = type(value)
    if value is None or kind is bool or kind is bytes:
        return
    if kind is int:
        if not _INT_MIN <= value <= _INT_MAX:
            raise ValidationError("integer out of the 64-bit CBOR range", field=path)
        return
    if kind is float:
        if not math.isfinite(value):
            raise ValidationError("NaN and infinity cannot be stored", field=path)
        return
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError("invalid UTF-8 (lone surrogate)", field=path) from None
        return
    if kind is list or kind is tuple:
        for i, item in enumerate(value):
            _check(item, f"{path}[{i}]")
        return
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise ValidationError("map keys must be text", field=path)
            _check(item, f"{path}.{key}" if path else key)
        return
    raise ValidationError(f"cannot encode a value of type {kind.__name__}", field=path or None)


def encode(value: Any) -> bytes:
    """Encode ``value`` as canonical CBOR after checking it holds only storable values.

    Raises:
        ValidationError: a value has no canonical encoding (NaN, a set, a non-text map
            key, a lone surrogate, an integer beyond 64 bits).
    """
    _check(value, "")
    return encode_trusted(value)


def encode_trusted(value: Any) -> bytes:
    """Encode a value the caller built from already-validated parts (the hot path)."""
    return cbor2.dumps(value, canonical=True)


def decode(data: bytes, *, what: str = "value") -> Any:
    """Decode canonical CBOR, checking canonical form (J6).

    Arrays decode to lists and maps to dicts with text keys.

    Raises:
        CorruptionError: the bytes are malformed, not canonical, or hold duplicate keys,
            tags or non-text map keys. The message names ``what`` was being decoded.
    """
    try:
        value = cbor2.loads(data, allow_duplicate_keys=False, allow_indefinite=False)
    except Exception as exc:  # cbor2 raises several types for malformed input
        raise CorruptionError(f"{what} is not valid CBOR: {exc}") from None
    try:
        again = encode(value)
    except ValidationError as exc:
        raise CorruptionError(f"{what} holds a value that cannot be stored: {exc}") from None
    if again != data:
        raise CorruptionError(f"{what} is not in canonical CBOR form")
    return value


def as_map(value: Any, what: str) -> Mapping[str, Any]:
    """Return ``value`` if it is a decoded CBOR map, else raise ``CorruptionError``."""
    if type(value) is not dict:
        raise CorruptionError(f"{what} is not a CBOR map")
    return value
