"""The hash functions cortexgraph commits with.

An environment picks one hash at creation and records it in ``meta``: ``"blake3"``
(BLAKE3-256, the default) or ``"sha256"`` (SHA-256, so that RFC 6962 test vectors apply).
Every digest is 32 bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import blake3

from ..errors import ValidationError

__all__ = [
    "DIGEST_SIZE",
    "HASH_NAMES",
    "hash_function",
    "hash_parts",
    "local_hash_function",
    "native_core",
]

DIGEST_SIZE = 32
HASH_NAMES = ("blake3", "sha256")

HashFunction = Callable[[bytes], bytes]


#: inputs up to this many bytes are one BLAKE3 chunk, which the C form hashes
_CHUNK_SIZE = 1024


def native_core() -> Any:
    """The C module built with the compiled modules (``smt_native.c``: the SMT's bulk
    update and build, and BLAKE3 of inputs of one chunk) when this module runs compiled,
    as all of ``cortexgraph.compiled.MODULES`` then do (the C module is built with them
    and runs exactly when they do); ``None`` when it runs as its source, or was built
    without it. The Python code stays the reference wherever this is ``None``."""
    if __file__.endswith(".py"):
        return None
    try:
        from . import smt_native
    except ImportError:  # built without it: the reference alone
        return None
    return smt_native


#: BLAKE3 of one chunk in C, or None: the ``blake3`` package's digests
#: (``tests/test_smt_native.py`` compares every length up to 1,024) without building a
#: hasher object, about 200-250 ns less a call
_CORE: Any = native_core()
_SMALL: Any = None if _CORE is None else _CORE.blake3


def _blake3(data: bytes) -> bytes:
    if _SMALL is not None and len(data) <= _CHUNK_SIZE:
        digest: bytes = _SMALL(data)
        return digest
    return blake3.blake3(data).digest()


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


_FUNCTIONS: dict[str, HashFunction] = {"blake3": _blake3, "sha256": _sha256}


def hash_function(hash_name: str) -> HashFunction:
    """Return the 32-byte hash function called ``hash_name``.

    Raises:
        ValidationError: ``hash_name`` is not one of :data:`HASH_NAMES`.
    """
    try:
        return _FUNCTIONS[hash_name]
    except (KeyError, TypeError):
        raise ValidationError(
            f"unknown hash {hash_name!r}; expected one of {', '.join(HASH_NAMES)}",
            field="hash_name",
        ) from None


def local_hash_function(hash_name: str) -> HashFunction:
    """Return a hash function equal to ``hash_function(hash_name)``, for one thread's run
    of many short inputs (a verifier's loop): for BLAKE3 it keeps one hasher and resets it
    before each input, which costs about 60% of building a hasher per call. Do not share
    the function between threads.

    Raises:
        ValidationError: ``hash_name`` is not one of :data:`HASH_NAMES`.
    """
    function = hash_function(hash_name)
    if function is not _blake3:
        return function
    small = _SMALL
    hasher = blake3.blake3()
    reset, update, digest = hasher.reset, hasher.update, hasher.digest

    def local(data: bytes) -> bytes:
        if small is not None and len(data) <= _CHUNK_SIZE:
            found: bytes = small(data)
            return found
        reset()
        update(data)
        return digest()

    return local


def hash_parts(hash_name: str, *parts: bytes) -> bytes:
    """Hash the concatenation of ``parts`` without building it twice."""
    if hash_name == "blake3":
        if _SMALL is not None and sum(map(len, parts)) <= _CHUNK_SIZE:
            joined: bytes = _SMALL(b"".join(parts))
            return joined
        h = blake3.blake3()
        for part in parts:
            h.update(part)
        return h.digest()
    if hash_name == "sha256":
        s = hashlib.sha256()
        for part in parts:
            s.update(part)
        return s.digest()
    return hash_function(hash_name)(b"".join(parts))
