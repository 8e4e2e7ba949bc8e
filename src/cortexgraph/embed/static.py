"""``StaticEmbedder``: all-MiniLM-L6-v2 distilled into a static model, looked up with numpy.

A static model keeps one vector per word piece; the vector of a text is the mean of its
pieces' vectors, scaled to unit length. There is no transformer to run, so it embeds two
orders of magnitude faster than MiniLM and loads in a fraction of a second, at some cost in
quality (word order and context are lost). The model was distilled from the same MiniLM
with model2vec by ``tools/distill_static.py`` and ships as the distribution
``cortexgraph-minilm-static`` (``pip install 'cortexgraph[static]'``): ``model.safetensors``
(29,525 float16 vectors of 384 components) and ``tokenizer.json`` (MiniLM's WordPiece
tokenizer). Nothing is downloaded; the files are read from the package's ``model_dir()``.

A text's vector is the one model2vec's ``StaticModel.encode`` computes, up to rounding: the
text's first 3,072 characters are split into word pieces without special tokens, the first
512 pieces are kept, unknown pieces (``[UNK]``) are dropped, and the kept pieces' vectors
are summed and scaled to unit length. A text with no known piece (``""``, or only symbols
the vocabulary lacks) gives a zero row, as with :class:`HashEmbedder`.

Why not model2vec's ``StaticModel`` itself: it does load from a local directory without a
hub call, but it returns float16 vectors (about three significant digits), averages in
float16 over groups of equally long texts (so whether a row depends on its batch is up to
numpy's reduction order for each group's shape), sets ``TOKENIZERS_PARALLELISM`` in
``os.environ`` for large inputs, and brings huggingface-hub, jinja2 and joblib. The lookup
is a few lines with ``tokenizers`` and numpy, and owning it makes the vectors
batch-invariant by arithmetic rather than by luck:

- every float16 value is a multiple of 2**-24 below 2**16, so the sum of up to 512 of them
  in float64 is exact, whatever the order of the additions;
- the norm is :func:`~cortexgraph.embed.base.unit_row`'s correctly rounded ``math.fsum``,
  and the division and the cast to float32 are correctly rounded too.

So a text's vector depends only on the text, the model files and the tokenizer's split:
the same bytes alone, in any batch, at any position, in any process, and on any CPU, since
no step rounds in a machine-dependent way.

The name ``all-MiniLM-L6-v2:static-1`` stands for exactly these files: :data:`MODEL_SHA256`
pins their digests, checked before anything is parsed; a new distillation gets a new name.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import EmbedderError, MissingExtraError, ValidationError
from .base import check_texts, unit_row

__all__ = ["StaticEmbedder"]

MODEL_NAME = "all-MiniLM-L6-v2:static-1"
MODEL_DIM = 384
INSTALL_HINT = "pip install 'cortexgraph[static]'"
REINSTALL_HINT = "reinstall the model: pip install --force-reinstall cortexgraph-minilm-static"
#: the sha256 of each file the embedder reads, as ``tools/distill_static.py`` made them
MODEL_SHA256 = {
    "model.safetensors": "0f3aa4335a0c00b8cf6c4a777fe69cc895d7abeed7a7f3b81676b93e04c272fb",
    "tokenizer.json": "dd33465341c98889c3338356b6200c8b232b89af5f1b7aa8e6ee1d4d7a699631",
}
#: model2vec's limits for this model: 512 pieces, read from 512 x 6 characters (6 is the
#: median length of a vocabulary entry), which bounds the tokenising of a long text
MAX_PIECES = 512
MAX_CHARS = 512 * 6


def _read_verified(directory: Path, name: str) -> bytes:
    """The bytes of model file ``name``, after checking their sha256 against the pin."""
    try:
        data = (directory / name).read_bytes()
    except OSError as exc:
        raise EmbedderError(
            f"cannot read the static model file {name} in {directory}"
            f" ({exc.strerror or exc}); {REINSTALL_HINT}"
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != MODEL_SHA256[name]:
        raise EmbedderError(
            f"the static model file {name} in {directory} has sha256 {digest}, not the"
            f" {MODEL_SHA256[name]} of {MODEL_NAME}: it is damaged or from another model;"
            f" {REINSTALL_HINT}"
        )
    return data


def _load_model(model_dir: Path | None) -> tuple[Any, NDArray[np.float16]]:
    """Import the ``static`` extra, verify the model files and load them.

    Returns the tokenizer and the ``(pieces, 384)`` float16 vectors.
    """
    try:
        from safetensors.numpy import load as load_safetensors
        from tokenizers import Tokenizer

        if model_dir is None:
            import cortexgraph_minilm_static

            model_dir = cortexgraph_minilm_static.model_dir()
    except ImportError as exc:
        raise MissingExtraError(
            f"StaticEmbedder needs the 'static' extra ({exc.name or exc} is missing):"
            f" {INSTALL_HINT}",
            extra="static",
        ) from exc
    # Parse the very bytes that were hashed: the files cannot change in between.
    model = _read_verified(model_dir, "model.safetensors")
    tokenizer = Tokenizer.from_str(_read_verified(model_dir, "tokenizer.json").decode("utf-8"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_PIECES)
    vectors: NDArray[np.float16] = load_safetensors(model)["embeddings"]
    return tokenizer, vectors


class StaticEmbedder:
    """Sentence embeddings from a static model distilled from all-MiniLM-L6-v2, offline.

    For bulk ingestion and small machines: some 18,000 short texts a second on one core, a
    load of a twentieth of a second, 22 MiB of model and no torch or ONNX Runtime. It
    matches paraphrases through shared and related words ("car" ~ "automobile", "doctor" ~
    "physician"), but reads no word order and less context than MiniLM: prefer the default
    local embedder when recall quality matters more than speed.

    Vectors are identical bit for bit alone or in any batch, across processes and machines
    (see the module's documentation for why), so a store can re-embed anywhere and get the
    same bytes. A text's first 3,072 characters (at most 512 word pieces) are read.

    Args:
        model_dir: the directory holding ``model.safetensors`` and ``tokenizer.json``;
            ``None`` (the default) uses the installed ``cortexgraph-minilm-static`` package.
            Whichever directory, the files must be the pinned ones.

    Raises:
        MissingExtraError: the ``static`` extra is not installed (``.extra == "static"``;
            the message says ``pip install 'cortexgraph[static]'``). It is also an
            ``ImportError``.
        EmbedderError: a model file is missing, unreadable, or not the pinned bytes (its
            sha256 differs); the message names the file.
        ValidationError: ``model_dir`` is not a path (``field == "model_dir"``).
    """

    name = MODEL_NAME
    dim = MODEL_DIM

    def __init__(self, *, model_dir: str | os.PathLike[str] | None = None) -> None:
        if model_dir is not None and not isinstance(model_dir, str | os.PathLike):
            raise ValidationError(
                f"expected None or a path, got {type(model_dir).__name__}", field="model_dir"
            )
        self._model_dir = None if model_dir is None else Path(model_dir)
        self._tokenizer, self._vectors = _load_model(self._model_dir)
        self._unknown = self._tokenizer.token_to_id("[UNK]")

    def __repr__(self) -> str:
        where = "" if self._model_dir is None else f"model_dir={str(self._model_dir)!r}"
        return f"StaticEmbedder({where})"

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` into a ``(len(texts), 384)`` float32 array of unit rows (a zero
        row for a text with no known word piece).

        Raises:
            ValidationError: ``texts`` is not a sequence of str (``field == "texts"``).
        """
        items = check_texts(texts)
        out = np.zeros((len(items), MODEL_DIM), dtype=np.float32)
        if not items:
            return out
        encodings = self._tokenizer.encode_batch_fast(
            [text[:MAX_CHARS] for text in items], add_special_tokens=False
        )
        for row, encoding in enumerate(encodings):
            pieces = [piece for piece in encoding.ids if piece != self._unknown]
            if pieces:
                # float16 -> float64 is exact and so is this sum (see the module docstring).
                out[row] = unit_row(self._vectors[pieces].sum(axis=0, dtype=np.float64))
        return out
