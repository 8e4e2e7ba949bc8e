"""The ``Embedder`` protocol and the checks every embedder shares.

An embedder turns texts into unit vectors. The recall layer records its ``name`` and ``dim``
when an environment is created and caches vectors by (name, content hash), so ``name`` must
change whenever the vectors would: include the model, its version and the dimension.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ..errors import CortexError, EmbedderError, ValidationError

__all__ = [
    "Embedder",
    "check_int",
    "check_texts",
    "embed_checked",
    "length_groups",
    "normalize_rows",
    "worker_safe",
]


@runtime_checkable
class Embedder(Protocol):
    """What the recall layer needs from an embedder.

    ``embed(texts)`` returns a ``float32`` array of shape ``(len(texts), dim)`` whose rows
    are L2-normalised, so a dot product is a cosine. A text with nothing to embed gives a
    zero row, whose cosine with anything is 0: for :class:`HashEmbedder`, one with no word
    characters, such as ``""`` or ``"--"``; for :class:`StaticEmbedder`, one with no word
    piece of its vocabulary, such as ``""``. The transformer embedders
    (:class:`LocalEmbedder`, :class:`TorchEmbedder`) give every text, the empty one
    included, a unit vector.

    Implementations validate their input like the built-in ones: ``texts`` must be a
    sequence of ``str`` (a bare ``str`` is refused, since it would be embedded character by
    character), else :class:`~cortexgraph.errors.ValidationError` with ``field == "texts"``.
    Use :func:`check_texts` for that.

    An embedder may also set ``worker_safe = True`` (not a member of the protocol: absent
    means false) to declare that each vector is a pure function of its text alone (not of
    the other texts of the call, the process or the machine), and that the embedder
    pickles to a few bytes that rebuild it in a fresh process at once (no model to load,
    no session, connection or device). A large catch-up may then embed part of its texts
    in a helper process (see ``vector.parallel``). :class:`HashEmbedder` declares it; the
    model embedders and :class:`HttpEmbedder` do not.
    """

    @property
    def name(self) -> str:
        """A stable identifier of the vectors this embedder produces (model, version, dim)."""
        ...

    @property
    def dim(self) -> int:
        """The number of components of each vector."""
        ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` into a ``(len(texts), dim)`` float32 array of unit rows."""
        ...


def check_int(field: str, value: object, low: int, high: int, *, optional: bool = False) -> None:
    """Check an embedder's int argument: an int (not a bool) in ``[low, high]``, or ``None``
    when ``optional``.

    Raises:
        ValidationError: ``.field == field``; the message says what was expected.
    """
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"expected an int, got {type(value).__name__}", field=field)
    if not low <= value <= high:
        raise ValidationError(f"must be between {low} and {high}, got {value}", field=field)


def length_groups(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Positions of texts grouped by token count, shortest first, at most ``batch_size``
    to a group, in input order within a length.

    A transformer fed one group at a time never pads, so a text's output rows do not depend
    on what else was in the call: the model embedders get batch-invariant bytes this way.

    >>> list(length_groups([3, 5, 3, 3], 2))
    [[0, 2], [3], [1]]
    """
    by_length: dict[int, list[int]] = {}
    for position, length in enumerate(lengths):
        by_length.setdefault(length, []).append(position)
    for length in sorted(by_length):
        members = by_length[length]
        for start in range(0, len(members), batch_size):
            yield members[start : start + batch_size]


def worker_safe(embedder: Embedder) -> bool:
    """Whether ``embedder`` declares ``worker_safe = True`` (see :class:`Embedder`): only
    then may a helper process embed texts for it.

    >>> from cortexgraph.embed import HashEmbedder
    >>> class Remote:
    ...     name, dim = "remote", 8
    >>> worker_safe(HashEmbedder(8)), worker_safe(Remote())
    (True, False)
    """
    return getattr(embedder, "worker_safe", False) is True


def check_texts(texts: object) -> list[str]:
    """Return ``texts`` as a list after checking it is a sequence of valid Unicode strings.

    >>> check_texts(("a", "b"))
    ['a', 'b']
    >>> check_texts("abc")
    Traceback (most recent call last):
    ...
    cortexgraph.errors.ValidationError: texts: expected a sequence of str, got a str ...

    Raises:
        ValidationError: ``field == "texts"``; the message names the offending item.
    """
    if isinstance(texts, str | bytes | bytearray):
        raise ValidationError(
            f"expected a sequence of str, got a {type(texts).__name__} "
            "(wrap a single text in a list)",
            field="texts",
        )
    if not isinstance(texts, Sequence):
        raise ValidationError(
            f"expected a sequence of str, got {type(texts).__name__}", field="texts"
        )
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise ValidationError(f"item {i} is a {type(text).__name__}, not a str", field="texts")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(
                f"item {i} is not valid Unicode ({exc.reason})", field="texts"
            ) from None
    return out


def embed_checked(embedder: Embedder, texts: list[str]) -> NDArray[np.float32]:
    """``embedder.embed(texts)``, checked: the one place the library calls an embedder.

    Whatever an embedder returns is checked before a vector reaches the cache or the index,
    so a faulty custom embedder gives one typed error naming it and what was wrong, never a
    ``ValueError`` from numpy or hnswlib, nor a vector cached for good.

    >>> from cortexgraph.embed import HashEmbedder
    >>> embed_checked(HashEmbedder(8), ["deploy", "rollback"]).shape
    (2, 8)
    >>> class Short(HashEmbedder):
    ...     def embed(self, texts):
    ...         return super().embed(texts)[:1]
    >>> embed_checked(Short(8), ["deploy", "rollback"])
    Traceback (most recent call last):
    ...
    cortexgraph.errors.EmbedderError: embedder 'hash-v1-8' returned an array of shape (1, 8) ...

    Args:
        embedder: any :class:`Embedder`.
        texts: the texts, already checked (see :func:`check_texts`).

    Returns:
        A C-contiguous little-endian ``float32`` array of shape ``(len(texts), dim)``.

    Raises:
        EmbedderError: ``embed`` raised an error that is not a ``CortexError``, or returned
            None, something that is not a rectangular array of floats, the wrong number of
            rows or columns, or a value that is NaN or infinite (also after the cast to
            float32).
        CortexError: whatever ``CortexError`` the embedder raised itself (an
            ``EmbedderError`` from :class:`HttpEmbedder`, say).
    """
    name, dim = embedder.name, embedder.dim

    def bad(why: str) -> EmbedderError:
        return EmbedderError(f"embedder {name!r} {why}")

    try:
        result: object = embedder.embed(texts)
    except CortexError:
        raise
    except Exception as exc:
        raise bad(f"failed on {len(texts)} text(s): {exc!r}") from exc
    if result is None:
        raise bad(f"returned None for {len(texts)} text(s), not a ({len(texts)}, {dim}) array")
    try:
        matrix = np.asarray(result)
    except (TypeError, ValueError) as exc:
        raise bad(f"returned a {type(result).__name__} that is not an array ({exc})") from None
    if matrix.dtype.kind != "f":
        raise bad(f"returned {matrix.dtype} values, not floats (expected float32)")
    if matrix.ndim != 2 or matrix.shape[0] != len(texts):
        raise bad(
            f"returned an array of shape {matrix.shape} for {len(texts)} text(s);"
            f" expected ({len(texts)}, {dim})"
        )
    if matrix.shape[1] != dim:
        raise bad(f"returned {matrix.shape[1]}-dimensional vectors, but its dim is {dim}")
    with np.errstate(over="ignore"):
        vectors = np.ascontiguousarray(matrix, dtype="<f4")
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise bad(f"returned NaN or infinity (as float32) in row {row} of {len(texts)}")
    return vectors


def normalize_rows(matrix: NDArray[np.floating] | NDArray[np.integer]) -> NDArray[np.float32]:
    """Scale each row to unit L2 norm (zero rows stay zero) and return float32.

    The norm is computed in float64 and each row is divided by it before the cast, so a row
    of a returned array has norm 1 within float32 rounding.

    >>> normalize_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    array([[0.6, 0.8],
           [0. , 0. ]], dtype=float32)
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-D array, got {m.ndim} dimensions")
    if not np.all(np.isfinite(m)):
        raise ValueError("embedding contains NaN or infinity")
    norms = np.sqrt(np.einsum("ij,ij->i", m, m))
    safe = np.where(norms > 0.0, norms, 1.0)
    return np.ascontiguousarray(m / safe[:, None], dtype=np.float32)


def unit_row(row: NDArray[np.float64]) -> NDArray[np.float32]:
    """Scale one float64 row to unit norm with bit-reproducible arithmetic; return float32.

    The norm uses :func:`math.fsum` (exactly rounded) and :func:`math.sqrt` (IEEE 754), not a
    BLAS reduction whose order depends on the CPU; elementwise products and divisions are
    correctly rounded, vectorised or not. A zero row stays zero.
    """
    nonzero = row[row != 0.0]
    norm = math.sqrt(math.fsum((nonzero * nonzero).tolist()))
    if norm == 0.0:
        return np.zeros(row.shape, dtype=np.float32)
    return (row / norm).astype(np.float32)
