"""``LocalEmbedder``: all-MiniLM-L6-v2 on ONNX Runtime, on the CPU, offline, without torch.

The model files ship in the distribution ``cortexgraph-minilm-onnx`` (``models/minilm-onnx``
in the repository, made by ``tools/export_minilm_onnx.py``): the transformer as ONNX, its
large weights stored as float16 and computed in float32, and the model's tokenizer. Both
files are read into memory, checked against the package's sha256 pins, and handed to ONNX
Runtime and ``tokenizers`` from memory, so what runs is what was checked. Nothing is
downloaded, ever.

What sentence-transformers does around the transformer is done here in numpy, the same way:
WordPiece tokens with ``[CLS]``/``[SEP]``, at most 256 per text; the mean of the last hidden
state over the text's tokens; L2 normalisation.

**Batch invariance.** A text's vector must not depend on which texts share its call. Texts
are grouped by token count and each forward pass takes texts of one length only, so there is
no padding; each text's mean is taken over its own rows of the output, in float64; and the
session runs with deterministic compute. ``tests/test_embed.py`` checks, over random batch
compositions, that a text's bytes are the same alone, in any batch and in another process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import EmbedderError, MissingExtraError
from .base import check_int, check_texts, length_groups, normalize_rows

__all__ = ["LocalEmbedder"]

#: the vectors' name: the model, the runtime and the export's version
MODEL_NAME = "all-MiniLM-L6-v2:onnx-1"
MODEL_DIM = 384
#: word pieces per text, ``[CLS]`` and ``[SEP]`` included (sentence-transformers' limit)
MAX_TOKENS = 256
INSTALL_HINT = "pip install 'cortexgraph[local]'"
FILES = ("model.onnx", "tokenizer.json")


def _import_runtime() -> tuple[Any, Any]:
    """``onnxruntime`` and ``tokenizers.Tokenizer``, or MissingExtraError."""
    try:
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingExtraError(
            f"LocalEmbedder needs the 'local' extra ({exc.name or exc} is missing): "
            f"{INSTALL_HINT}",
            extra="local",
        ) from exc
    return onnxruntime, Tokenizer


def packaged_model() -> tuple[Path, dict[str, str]]:
    """The directory of the packaged model and its sha256 pins, or MissingExtraError."""
    try:
        import cortexgraph_minilm_onnx
    except ImportError as exc:
        raise MissingExtraError(
            f"LocalEmbedder needs the model package cortexgraph-minilm-onnx: {INSTALL_HINT}",
            extra="local",
        ) from exc
    return cortexgraph_minilm_onnx.model_dir(), dict(cortexgraph_minilm_onnx.SHA256)


def read_checked(directory: Path, pins: dict[str, str]) -> dict[str, bytes]:
    """Each of :data:`FILES` read from ``directory`` and checked against its sha256 pin.

    Raises:
        EmbedderError: a file is missing, unreadable or not the pinned bytes (named).
    """
    out: dict[str, bytes] = {}
    for name in FILES:
        path = directory / name
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise EmbedderError(f"cannot read the model file {path}: {exc}") from exc
        found = hashlib.sha256(data).hexdigest()
        if found != pins.get(name):
            raise EmbedderError(
                f"the model file {path} has sha256 {found}, not the pinned {pins.get(name)}:"
                f" it is damaged or from another version; reinstall it: {INSTALL_HINT}"
            )
        out[name] = data
    return out


class LocalEmbedder:
    """Sentence embeddings from all-MiniLM-L6-v2 on ONNX Runtime, on the CPU, offline.

    Semantic: paraphrases score high even without shared words ("car" ~ "automobile"). The
    model reads at most 256 word pieces per text (about 180 English words); the rest of a
    longer text is ignored, so embed memories, not whole files.

    The bytes of a text's vector do not depend on the other texts of the call, their order
    or the batch size, and are the same in every process on one machine with the same
    ONNX Runtime. Other CPUs or runtime versions may change the last bits; use
    :class:`~cortexgraph.HashEmbedder` where bits must agree across machines.

    Loading takes about half a second in a fresh process (imports included), 0.2 s once
    ONNX Runtime is imported; create one instance and reuse it. ``embed`` is safe to call
    from several threads (ONNX Runtime sessions are).

    Args:
        batch_size: texts of one length per forward pass (1 to 4096).
        threads: ONNX Runtime intra-op threads, 1 to 256 (1 by default: the vectors do not
            depend on it, and one thread is the better choice on a small or busy machine).
        model_dir: a directory holding ``model.onnx`` and ``tokenizer.json`` with the
            packaged model's bytes (``None``: the installed ``cortexgraph-minilm-onnx``).
            The files are checked against the package's sha256 pins either way.

    Raises:
        MissingExtraError: the ``local`` extra is not installed (``.extra == "local"``; the
            message says ``pip install 'cortexgraph[local]'``). It is also an ``ImportError``.
        EmbedderError: a model file is missing or is not the pinned bytes.
        ValidationError: ``batch_size`` or ``threads`` is out of range.
    """

    name = MODEL_NAME
    dim = MODEL_DIM

    def __init__(
        self, *, batch_size: int = 64, threads: int = 1, model_dir: Path | str | None = None
    ) -> None:
        check_int("batch_size", batch_size, 1, 4096)
        check_int("threads", threads, 1, 256)
        self._batch_size = batch_size
        self._threads = threads
        runtime, tokenizer_class = _import_runtime()
        packaged, pins = packaged_model()
        files = read_checked(packaged if model_dir is None else Path(model_dir), pins)
        tokenizer = tokenizer_class.from_str(files["tokenizer.json"].decode("utf-8"))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        options = runtime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = runtime.ExecutionMode.ORT_SEQUENTIAL
        options.use_deterministic_compute = True
        options.log_severity_level = 3  # errors only: no optimiser chatter on stderr
        try:
            self._session = runtime.InferenceSession(
                files["model.onnx"], options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # the runtime's own error types are not importable stably
            raise EmbedderError(f"ONNX Runtime cannot load the model: {exc}") from exc
        shape = self._session.get_outputs()[0].shape
        if shape[-1] != MODEL_DIM:
            raise EmbedderError(f"the packaged model has dimension {shape[-1]}, not {MODEL_DIM}")

    def __repr__(self) -> str:
        return f"LocalEmbedder(batch_size={self._batch_size}, threads={self._threads})"

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` into a ``(len(texts), 384)`` float32 array of unit rows.

        Raises:
            ValidationError: ``texts`` is not a sequence of str (``field == "texts"``).
        """
        items = check_texts(texts)
        pooled = np.zeros((len(items), MODEL_DIM), dtype=np.float64)
        if not items:
            return pooled.astype(np.float32)
        ids = [encoding.ids for encoding in self._tokenizer.encode_batch(items)]
        for chunk in length_groups([len(tokens) for tokens in ids], self._batch_size):
            length = len(ids[chunk[0]])
            tokens = np.array([ids[i] for i in chunk], dtype=np.int64).reshape(-1, length)
            (hidden,) = self._session.run(
                None,
                {
                    "input_ids": tokens,
                    "attention_mask": np.ones_like(tokens),
                    "token_type_ids": np.zeros_like(tokens),
                },
            )
            for row, i in enumerate(chunk):
                # each text's own (length, 384) block, summed the same way whatever else
                # the pass held
                pooled[i] = hidden[row].astype(np.float64).sum(axis=0) / length
        return normalize_rows(pooled)
