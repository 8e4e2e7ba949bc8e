"""Merkle commitments: what the Merkle Mountain Range (:mod:`cortexgraph.core.mmr`) and
the sparse Merkle tree (:mod:`cortexgraph.core.smt`) share, and the OverallRoot that
commits to both.

Everything here is pure: no I/O, no clock, no randomness. Persistence is the caller's job.
The tree algorithms are written as functions over an abstract node store (``get_node``),
and they *return* the nodes to write, so ``store/`` can keep the nodes in its LMDB tables
(``mmr``, ``smt``) while :class:`MMR` and :class:`SparseMerkleTree` wrap the same functions
around an in-memory list or dict. ``H`` is the environment's hash (BLAKE3-256 or SHA-256,
see :mod:`cortexgraph.core.hashing`); every digest is 32 bytes.

OverallRoot::

    H("cortexgraph/root/v1" || u64be(journal_size) || mmr_root || smt_root)

Invariants (the others are in the modules named above: M1 and M5 in ``core.mmr``, M2, M4,
M6 and M7 in ``core.smt``)
=========================================================================================

M3  Verifiers (:func:`verify_inclusion`, :func:`verify_consistency`, :func:`verify_smt`,
    :class:`SmtVerifier`) never raise: any malformed input (wrong type, ``bool`` for
    ``int``, a ``bytes`` subclass, negative or beyond-u64 sizes, ``index >= size``, wrong
    lengths, an unknown hash name, over-long proofs, trailing bytes) gives ``False``.
M8  Hash inputs are domain separated: 0x00 leaves vs 0x01 interior nodes, and the
    ``cortexgraph/root/v1`` and ``cortexgraph/smt/key`` prefixes with fixed-width or
    length-prefixed fields, so no two distinct inputs share a preimage.
"""

from __future__ import annotations

from ..errors import ValidationError
from .hashing import DIGEST_SIZE, HASH_NAMES, hash_function

__all__ = [
    "LEAF",
    "NODE",
    "is_digest",
    "is_hash_name",
    "is_u64",
    "overall_root",
    "require_digest",
    "require_size",
]

#: the first byte of a leaf's hash input, and of an interior node's (M8)
LEAF = b"\x00"
NODE = b"\x01"
_U64_MAX = (1 << 64) - 1
_ROOT_DOMAIN = b"cortexgraph/root/v1"


def require_size(value: object, field: str) -> int:
    """``value`` if it is an int in ``[0, 2**64)``.

    Raises:
        ValidationError: naming ``field``, otherwise.
    """
    if type(value) is not int or not 0 <= value <= _U64_MAX:
        raise ValidationError(f"expected an int in [0, 2**64), got {value!r}", field=field)
    return value


def require_digest(value: object, field: str) -> bytes:
    """``value`` as exact ``bytes`` if it is a digest (32 bytes).

    Raises:
        ValidationError: naming ``field``, otherwise.
    """
    if not isinstance(value, bytes) or len(value) != DIGEST_SIZE:
        raise ValidationError(f"expected {DIGEST_SIZE} bytes, got {value!r}", field=field)
    return bytes(value)


def is_u64(value: object) -> bool:
    """Whether ``value`` is exactly an int in ``[0, 2**64)`` (a verifier's check: no raise)."""
    return type(value) is int and 0 <= value <= _U64_MAX


def is_digest(value: object) -> bool:
    """Whether ``value`` is exactly ``bytes`` of a digest's length (no subclass)."""
    return type(value) is bytes and len(value) == DIGEST_SIZE


def is_hash_name(value: object) -> bool:
    """Whether ``value`` names a hash cortexgraph knows (``"blake3"``, ``"sha256"``)."""
    return type(value) is str and value in HASH_NAMES


def overall_root(hash_name: str, journal_size: int, mmr_root: bytes, smt_root: bytes) -> bytes:
    """Return ``H("cortexgraph/root/v1" || u64be(journal_size) || mmr_root || smt_root)``."""
    h = hash_function(hash_name)
    require_size(journal_size, "journal_size")
    return h(
        _ROOT_DOMAIN
        + journal_size.to_bytes(8, "big")
        + require_digest(mmr_root, "mmr_root")
        + require_digest(smt_root, "smt_root")
    )
