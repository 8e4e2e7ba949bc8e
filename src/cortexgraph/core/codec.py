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
import struct
from collections.abc import Iterable, Mapping
from typing import Any

import cbor2

from ..errors import CorruptionError, ValidationError

__all__ = [
    "as_map",
    "canonical_keys",
    "decode",
    "decode_unchecked",
    "encode",
    "encode_float",
    "encode_head",
    "encode_into",
    "encode_trusted",
]

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
    """Encode a value the caller built from already-validated parts (the hot path).

    Produces exactly ``cbor2.dumps(value, canonical=True)`` (a property test holds the two
    together) for the types :func:`encode` accepts, several times faster for the small
    maps cortexgraph writes, because key orders are computed once per key set.
    """
    out: list[bytes] = []
    encode_into(value, out)
    return b"".join(out)


_F16 = struct.Struct(">e")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_KEY_ORDERS: dict[tuple[str, ...], tuple[tuple[str, bytes], ...]] = {}
_CACHE_LIMIT = 4096


def canonical_keys(keys: Iterable[str]) -> tuple[tuple[str, bytes], ...]:
    """``(key, encoded key)`` pairs in canonical map order (shorter encodings first)."""
    encoded = []
    for key in keys:
        raw = key.encode("utf-8")
        encoded.append((key, encode_head(3, len(raw)) + raw))
    return tuple(sorted(encoded, key=lambda pair: (len(pair[1]), pair[1])))


def _key_order(keys: tuple[str, ...]) -> tuple[tuple[str, bytes], ...]:
    order = _KEY_ORDERS.get(keys)
    if order is None:
        order = canonical_keys(keys)
        if len(_KEY_ORDERS) < _CACHE_LIMIT:
            _KEY_ORDERS[keys] = order
    return order


_FLOATS: dict[float, bytes] = {}


def encode_float(value: float) -> bytes:
    """The shortest IEEE 754 form that keeps the value (memoised; zeros kept apart)."""
    if value == 0.0:
        return b"\xf9\x80\x00" if math.copysign(1.0, value) < 0 else b"\xf9\x00\x00"
    known = _FLOATS.get(value)
    if known is None:
        known = _shortest_float(value)
        if len(_FLOATS) < _CACHE_LIMIT:
            _FLOATS[value] = known
    return known


def _shortest_float(value: float) -> bytes:
    if value != value:
        return b"\xf9\x7e\x00"
    try:
        half = _F16.pack(value)
        if _F16.unpack(half)[0] == value:
            return b"\xf9" + half
    except OverflowError:
        pass
    try:
        single = _F32.pack(value)
        if _F32.unpack(single)[0] == value:
            return b"\xfa" + single
    except OverflowError:
        pass
    return b"\xfb" + _F64.pack(value)


def encode_into(value: Any, out: list[bytes]) -> None:
    """Append the canonical encoding of ``value`` to ``out``, in pieces (no checks)."""
    kind = type(value)
    if kind is str:
        raw = value.encode("utf-8")
        out.append(encode_head(3, len(raw)))
        out.append(raw)
    elif kind is int:
        out.append(encode_head(0, value) if value >= 0 else encode_head(1, -1 - value))
    elif kind is dict:
        out.append(encode_head(5, len(value)))
        for key, kb in _key_order(tuple(value)):
            out.append(kb)
            encode_into(value[key], out)
    elif kind is list or kind is tuple:
        out.append(encode_head(4, len(value)))
        for item in value:
            encode_into(item, out)
    elif kind is bytes:
        out.append(encode_head(2, len(value)))
        out.append(value)
    elif value is None:
        out.append(b"\xf6")
    elif value is True:
        out.append(b"\xf5")
    elif value is False:
        out.append(b"\xf4")
    elif kind is float:
        out.append(encode_float(value))
    else:
        out.append(cbor2.dumps(value, canonical=True))


def decode_unchecked(data: bytes, *, what: str = "value") -> Any:
    """Decode CBOR without the canonical check.

    Only for callers that establish canonical form themselves by re-encoding what they
    built from the value and comparing bytes (as ``core.state`` does for memory bodies).

    Raises:
        CorruptionError: the bytes are malformed.
    """
    try:
        return cbor2.loads(data, allow_duplicate_keys=False, allow_indefinite=False)
    except Exception as exc:  # cbor2 raises several types for malformed input
        raise CorruptionError(f"{what} is not valid CBOR: {exc}") from None


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


def encode_head(major: int, n: int) -> bytes:
    """The shortest CBOR header for major type ``major`` with argument ``n``."""
    if n < 24:
        return _SMALL_HEADS[major][n]
    if n < 0x100:
        return bytes((major << 5 | 24, n))
    if n < 0x10000:
        return bytes((major << 5 | 25,)) + n.to_bytes(2, "big")
    if n < 0x100000000:
        return bytes((major << 5 | 26,)) + n.to_bytes(4, "big")
    return bytes((major << 5 | 27,)) + n.to_bytes(8, "big")


_SMALL_HEADS = tuple(tuple(bytes((major << 5 | n,)) for n in range(24)) for major in range(8))
