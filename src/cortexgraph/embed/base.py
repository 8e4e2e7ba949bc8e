"""The ``Embedder`` protocol and the checks every embedder shares.

An embedder turns texts into unit vectors. The recall layer records its ``name`` and ``dim``
when an environment is created and caches vectors by (name, content hash), so ``name`` must
change whenever the vectors would: include the model, its version and the dimension.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError

__all__ = ["Embedder", "check_texts", "normalize_rows"]


@runtime_checkable
class Embedder(Protocol):
    """What the recall layer needs from an embedder.

    ``embed(texts)`` returns a ``float32`` array of shape ``(len(texts), dim)`` whose rows
    are L2-normalised, so a dot product is a cosine. A text with nothing to embed (for
    :class:`HashEmbedder`, one with no word characters, such as ``""`` or ``"--"``) gives a
    zero row, whose cosine with anything is 0. Model-based embedders give every text,
    the empty one included, a unit vector.

    Implementations validate their input like the built-in ones: ``texts`` must be a
    sequence of ``str`` (a bare ``str`` is refused, since it would be embedded character by
    character), else :class:`~cortexgraph.errors.ValidationError` with ``field == "texts"``.
    Use :func:`check_texts` for that.
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
