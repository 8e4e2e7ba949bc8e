"""Key encodings: fixed-width big-endian integers so that byte order equals numeric order.

Layouts (``|`` separates fields)::

    journal    u64be(seq)                                   -> entry (canonical CBOR)
    heads      id(16)                                       -> head record
    versions   id(16) | u32be(version)                      -> version record
    meta       text key (UTF-8)                             -> canonical CBOR value

Memory ids are 16 bytes; a head is keyed by the id alone because ids are unique across
namespaces (the namespace is hashed into the id).
"""

from __future__ import annotations

import struct

from ..errors import CorruptionError

__all__ = [
    "ID_SIZE",
    "seq_key",
    "seq_from_key",
    "version_key",
]

ID_SIZE = 16

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
