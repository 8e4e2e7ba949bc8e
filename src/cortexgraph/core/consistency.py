"""Consistency proofs between two OverallRoots of one store: the newer state extends the
older one's journal.

An OverallRoot is ``H("cortexgraph/root/v1" | u64be(size) | mmr_root | smt_root)``
(``core.roots``). The journal is append-only and every other table is a function of it
(J4), so a state whose journal extends another's is a legitimate successor of it; the SMT
root is not append-only and needs no proof of its own. A :class:`ConsistencyProof`
therefore carries both roots' parts and the RFC 9162 consistency proof between the two
MMR roots::

    {"hash_name", "old_size", "old_mmr_root", "old_smt_root",
     "new_size", "new_mmr_root", "new_smt_root", "path": [32-byte hashes]}

(canonical CBOR, text keys; :meth:`ConsistencyProof.to_map` and
:meth:`ConsistencyProof.from_map`).

Invariant:

C1  :func:`verify_consistency` never raises; it accepts only if the old parts hash to
    the trusted old root, the new parts to the trusted new root, ``old_size <= new_size``,
    and ``path`` proves the MMR of ``new_size`` entries extends the MMR of ``old_size``
    (``core.mmr.verify_consistency``, RFC 9162 section 2.1.4.2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..errors import CorruptionError, ValidationError, VerificationError
from .codec import decode, encode
from .hashing import DIGEST_SIZE, HASH_NAMES
from .mmr import mmr_consistency_proof, mmr_root
from .mmr import verify_consistency as verify_mmr_consistency
from .roots import overall_root

__all__ = [
    "ConsistencyProof",
    "build_consistency_proof",
    "check_sizes",
    "require_consistency",
    "verify_consistency",
]

_KEYS = frozenset(
    {
        "hash_name",
        "old_size",
        "old_mmr_root",
        "old_smt_root",
        "new_size",
        "new_mmr_root",
        "new_smt_root",
        "path",
    }
)


@attrs.frozen
class ConsistencyProof:
    """A proof that the store's state at ``new_size`` journal entries extends its state
    at ``old_size`` (see the module doc). Check it with :func:`verify_consistency`.

    Attributes:
        hash_name: the store's hash.
        old_size, new_size: journal sizes (seqs) of the two states.
        old_mmr_root, old_smt_root, new_mmr_root, new_smt_root: the parts of the two
            OverallRoots.
        path: the RFC 9162 consistency proof from the old MMR to the new one.
    """

    hash_name: str
    old_size: int
    old_mmr_root: bytes
    old_smt_root: bytes
    new_size: int
    new_mmr_root: bytes
    new_smt_root: bytes
    path: tuple[bytes, ...]

    @property
    def old_root(self) -> bytes:
        """The OverallRoot the proof starts from."""
        return overall_root(self.hash_name, self.old_size, self.old_mmr_root, self.old_smt_root)

    @property
    def new_root(self) -> bytes:
        """The OverallRoot the proof leads to."""
        return overall_root(self.hash_name, self.new_size, self.new_mmr_root, self.new_smt_root)

    def to_map(self) -> dict[str, Any]:
        """The proof as a map of text keys (how bundles and files carry it)."""
        value = attrs.asdict(self)
        value["path"] = list(self.path)
        return value

    def encode(self) -> bytes:
        """The proof as canonical CBOR (to send it to a client)."""
        return encode(self.to_map())

    @classmethod
    def decode(cls, data: object) -> ConsistencyProof:
        """Read a proof from :meth:`encode`'s bytes.

        Raises:
            VerificationError: not bytes, not canonical CBOR, or not a proof's shape.
        """
        if type(data) is not bytes:
            raise VerificationError("the consistency proof is not bytes")
        try:
            value = decode(data, what="a consistency proof")
        except CorruptionError as exc:
            raise VerificationError(str(exc)) from None
        return cls.from_map(value)

    @classmethod
    def from_map(cls, value: object) -> ConsistencyProof:
        """Read a proof from :meth:`to_map`'s form.

        Raises:
            VerificationError: the map is not exactly that shape (wrong keys, types or
                lengths).
        """
        if type(value) is not dict or set(value) != _KEYS:
            raise VerificationError("the consistency proof is malformed (its fields)")
        m: Mapping[str, Any] = value
        if m["hash_name"] not in HASH_NAMES:
            raise VerificationError("the consistency proof names an unknown hash")
        for name in ("old_size", "new_size"):
            if type(m[name]) is not int or not 0 <= m[name] < 1 << 64:
                raise VerificationError(f"the consistency proof's {name} is not a u64")
        digests = [m[k] for k in ("old_mmr_root", "old_smt_root", "new_mmr_root", "new_smt_root")]
        path = m["path"]
        if type(path) is not list:
            raise VerificationError("the consistency proof's path is not a list")
        if not all(type(d) is bytes and len(d) == DIGEST_SIZE for d in [*digests, *path]):
            raise VerificationError(
                f"the consistency proof holds a hash that is not {DIGEST_SIZE} bytes"
            )
        return cls(
            m["hash_name"], m["old_size"], m["old_mmr_root"], m["old_smt_root"],
            m["new_size"], m["new_mmr_root"], m["new_smt_root"], tuple(path),
        )


def build_consistency_proof(
    hash_name: str,
    get_node: Callable[[int], bytes | None],
    old_size: int,
    old_smt_root: bytes,
    new_size: int,
    new_smt_root: bytes,
) -> ConsistencyProof:
    """The proof from the state at ``old_size`` to the state at ``new_size``.

    ``get_node`` reads the MMR (``commitments.mmr_getter``), which holds the nodes of every
    size up to the journal's; the SMT roots of the two states are the caller's (the MMR
    keeps every past size, the SMT only the current one).

    Raises:
        ValidationError: ``old_size > new_size`` or a size that is not a u64.
    """
    return ConsistencyProof(
        hash_name=hash_name,
        old_size=old_size,
        old_mmr_root=mmr_root(hash_name, get_node, old_size),
        old_smt_root=old_smt_root,
        new_size=new_size,
        new_mmr_root=mmr_root(hash_name, get_node, new_size),
        new_smt_root=new_smt_root,
        path=tuple(mmr_consistency_proof(hash_name, get_node, old_size, new_size)),
    )


def verify_consistency(proof: object, *, old_root: object, new_root: object) -> bool:
    """Whether ``proof`` shows that the state committed by ``new_root`` extends the one
    committed by ``old_root`` (C1). Never raises: anything malformed is ``False``.

    Args:
        proof: a :class:`ConsistencyProof` (as :meth:`Cortex.prove_consistency` returns).
        old_root: the 32-byte OverallRoot you already trust.
        new_root: the 32-byte OverallRoot you are asked to accept.
    """
    try:
        return _verify(proof, old_root, new_root)
    except Exception:
        return False


def _verify(proof: object, old_root: object, new_root: object) -> bool:
    if type(proof) is not ConsistencyProof:
        return False
    if not all(type(r) is bytes and len(r) == DIGEST_SIZE for r in (old_root, new_root)):
        return False
    if proof.hash_name not in HASH_NAMES or type(proof.path) is not tuple:
        return False
    if proof.old_root != old_root or proof.new_root != new_root:
        return False
    return verify_mmr_consistency(
        proof.hash_name,
        proof.old_size,
        proof.new_size,
        proof.old_mmr_root,
        proof.new_mmr_root,
        list(proof.path),
    )


def require_consistency(proof: ConsistencyProof, old_root: bytes, new_root: bytes) -> None:
    """:func:`verify_consistency` for callers that want an error naming the failure.

    Raises:
        VerificationError: the proof does not lead from ``old_root`` to ``new_root``.
    """
    if not verify_consistency(proof, old_root=old_root, new_root=new_root):
        raise VerificationError(
            "the consistency proof does not show that the new root extends the trusted one"
        )


def check_sizes(old_size: object, new_size: object, journal_size: int) -> tuple[int, int]:
    """Validate the seqs of :meth:`Cortex.prove_consistency`.

    Raises:
        ValidationError: not integers, or not ``0 <= old_size <= new_size <= journal_size``.
    """
    if type(old_size) is not int or old_size < 0:
        raise ValidationError("must be a non-negative integer", field="old_seq")
    if type(new_size) is not int or new_size < 0:
        raise ValidationError("must be a non-negative integer", field="new_seq")
    if new_size > journal_size:
        raise ValidationError(
            f"{new_size} is past the end of the journal ({journal_size} entries)", field="new_seq"
        )
    if old_size > new_size:
        raise ValidationError(f"{old_size} is above new_seq {new_size}", field="old_seq")
    return old_size, new_size

