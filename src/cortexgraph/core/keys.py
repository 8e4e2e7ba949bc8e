"""Key encodings: fixed-width big-endian integers so that byte order equals numeric order.

Layouts (``|`` separates fields; ``ns\\0`` is the namespace's UTF-8 bytes and a NUL, which
names never contain, so that every key of a namespace shares one prefix)::

    journal    u64be(seq)                                   -> entry (canonical CBOR)
    heads      id(16)                                       -> head record
    versions   id(16) | u32be(version)                      -> version record
    idx        b"T" | ns\\0 | u8(type code) | id(16)          -> b""   (type; namespace)
               b"G" | ns\\0 | tag\\0 | id(16)                  -> b""   (tag)
               b"S" | ns\\0 | status\\0 | id(16)               -> b""   (status other than active)
               b"C" | ns\\0 | u64be(at) | id(16)              -> b""   (time of head version)
    meta       text key (UTF-8)                             -> canonical CBOR value

Every memory has exactly one type key, so the prefix ``b"T" | ns\\0`` lists a namespace
(the namespace index costs no extra key). Most memories are active, so only the other
statuses are indexed: "active" is the type prefix minus the status keys.

Memory ids are 16 bytes; a head is keyed by the id alone because ids are unique across
namespaces (the namespace is hashed into the id).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from ..errors import CorruptionError

__all__ = [
    "ID_SIZE",
    "IDX_STATUS",
    "IDX_TAG",
    "IDX_TIME",
    "IDX_TYPE",
    "idx_status_key",
    "idx_tag_keys",
    "idx_time_key",
    "idx_type_key",
    "ns_prefix",
    "seq_key",
    "seq_from_key",
    "version_key",
]

ID_SIZE = 16

IDX_TYPE = b"T"
IDX_TAG = b"G"
IDX_STATUS = b"S"
IDX_TIME = b"C"

_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")


def seq_key(seq: int) -> bytes:
    """The journal key of ``seq``."""
    return _U64.pack(seq)


def seq_from_key(key: bytes, *, table: str = "journal") -> int:
    """The seq a journal (or ``snapshots``) key encodes.

    Raises:
        CorruptionError: the key is not 8 bytes long.
    """
    if len(key) != 8:
        raise CorruptionError(
            f"a {table} key must be 8 bytes, not {len(key)}", table=table, operation="decode"
        )
    return int(_U64.unpack(key)[0])


def version_key(memory_id: bytes, version: int) -> bytes:
    """The ``versions`` key of one version of a memory."""
    return memory_id + _U32.pack(version)


def ns_prefix(kind: bytes, ns: str) -> bytes:
    """The prefix shared by every ``idx`` key of one kind in one namespace."""
    return kind + ns.encode("utf-8") + b"\0"


def idx_type_key(ns: str, type_code: int, memory_id: bytes) -> bytes:
    return ns_prefix(IDX_TYPE, ns) + bytes((type_code,)) + memory_id


def idx_tag_keys(ns: str, tags: Iterable[str], memory_id: bytes) -> list[bytes]:
    """The ``idx`` tag key of each of ``tags`` (the namespace prefix built once).

    >>> idx_tag_keys("n", ["a", "bc"], b"I")
    [b'Gn\\x00a\\x00I', b'Gn\\x00bc\\x00I']
    """
    prefix = ns_prefix(IDX_TAG, ns)
    return [prefix + tag.encode("utf-8") + b"\0" + memory_id for tag in tags]


def idx_status_key(ns: str, status: str, memory_id: bytes) -> bytes:
    return ns_prefix(IDX_STATUS, ns) + status.encode("utf-8") + b"\0" + memory_id


def idx_time_key(ns: str, at: int, memory_id: bytes) -> bytes:
    return ns_prefix(IDX_TIME, ns) + _U64.pack(at) + memory_id
