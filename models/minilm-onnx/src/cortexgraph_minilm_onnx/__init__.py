"""all-MiniLM-L6-v2 as ONNX for cortexgraph's ``LocalEmbedder``: data only.

``model.onnx`` is the transformer of sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0),
exported by ``tools/export_minilm_onnx.py`` in the cortexgraph repository, with its large
weights stored as float16 and computed in float32. ``tokenizer.json`` is the model's own
tokenizer. ``LocalEmbedder`` checks both files against :data:`SHA256` before it loads them.
"""

from pathlib import Path

__version__ = "1.0.0"

#: sha256 of each file of the package, checked before use
SHA256 = {
    "model.onnx": "eebef7e3d8c7ef8e01c8fc0c3bfd223fe753c3d4666a356b5284b8aaad0a0e41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}


def model_dir() -> Path:
    """The directory holding ``model.onnx`` and ``tokenizer.json``."""
    return Path(__file__).parent
