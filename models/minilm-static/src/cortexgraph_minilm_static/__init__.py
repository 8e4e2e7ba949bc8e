"""all-MiniLM-L6-v2 distilled into a static model2vec model: the files of cortexgraph's
``StaticEmbedder`` (``pip install 'cortexgraph[static]'``).

The directory :func:`model_dir` returns holds ``model.safetensors`` (one float16 vector of 384
components per word piece, tensor ``embeddings``), ``tokenizer.json`` (MiniLM's WordPiece
tokenizer) and ``config.json`` (model2vec's settings), the layout model2vec's ``StaticModel``
reads. ``tools/distill_static.py`` in the cortexgraph repository made them, reproducibly, and
:data:`SHA256` records their digests. Read them offline; nothing here downloads anything.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SHA256", "model_dir"]

__version__ = "0.1.0"

#: the sha256 (hex) of each model file in :func:`model_dir`, by file name
SHA256: dict[str, str] = {
    "config.json": "d8847e5376cb22ebd984fb8aee978aef620f170f05d429ccbff9e109af1086a7",
    "model.safetensors": "0f3aa4335a0c00b8cf6c4a777fe69cc895d7abeed7a7f3b81676b93e04c272fb",
    "tokenizer.json": "dd33465341c98889c3338356b6200c8b232b89af5f1b7aa8e6ee1d4d7a699631",
}


def model_dir() -> Path:
    """The directory that holds the model files (inside this installed package)."""
    return Path(__file__).resolve().parent
